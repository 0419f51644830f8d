/* The partitioned self search (core/partition/): forced on small clustered matrices, its lists
 * must equal the plain search's byte for byte and the double brute force, for every metric it
 * takes, with exact ties across clusters (integer lattices, duplicate rows) and odd sizes, both
 * with each k-means cell searched as its own group and with cells joined; the joining must follow
 * the work model (a blob's cells joined, blobs far apart kept apart); the automatic choice must
 * leave small or unclustered data to the plain search, and partition clustered rows on the CPU
 * from 40,000 rows. */
#include <math.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "oracle.h"
#include "knnwb_test_lists.h"

/* What the engine's debug messages said about the partitioned search in the last run: the
 * choice, the cells and groups it searched with (0 until said) and the pairs they left. */
static gboolean partition_done, partition_declined, partition_chosen;
static size_t partition_cells, partition_groups;
static int partition_workers; /* sub-searches at once */
static int partition_ends;    /* "partition: done" or "not used": choices made, nested ones too */
static double pairs_within, pairs_between;

static void capture(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data)
{
  (void)domain;
  (void)data;
  if ((level & G_LOG_LEVEL_DEBUG) && strstr(message, "partition: done") != NULL)
    partition_done = TRUE;
  if ((level & G_LOG_LEVEL_DEBUG) && (strstr(message, "partition: done") != NULL ||
                                      strstr(message, "partition: not used") != NULL))
    g_atomic_int_inc(&partition_ends);
  if ((level & G_LOG_LEVEL_DEBUG) && strstr(message, "the plain search") != NULL)
    partition_declined = TRUE;
  if ((level & G_LOG_LEVEL_DEBUG) && strstr(message, "partitioning") != NULL)
    partition_chosen = TRUE;
  const char *said = strstr(message, "partition: ");
  if ((level & G_LOG_LEVEL_DEBUG) && said != NULL) {
    size_t cells, groups;
    double within, between;
    if (sscanf(said, "partition: %zu clusters (%zu groups)", &cells, &groups) == 2)
      partition_cells = cells, partition_groups = groups;
    if (sscanf(said, "partition: %zu groups, %lg pairs within, %lg between", &groups, &within,
               &between) == 3) {
      g_assert_cmpuint(groups, ==, partition_groups);
      pairs_within = within, pairs_between = between;
      const char *workers = strstr(said, " visits), ");
      g_assert_nonnull(workers);
      g_assert_cmpint(sscanf(workers, " visits), %d worker", &partition_workers), ==, 1);
    }
  }
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    g_log_default_handler(domain, level, message, data);
}

static void forget_messages(void)
{
  partition_done = partition_declined = partition_chosen = FALSE;
  partition_cells = partition_groups = 0;
  partition_workers = 0;
  partition_ends = 0;
  pairs_within = pairs_between = -1.0;
}

/* n rows of d values around `clusters` centres (spread apart by `spread`); lattice: every value
 * rounded to an integer, so that many distances tie exactly, within and across clusters. A few
 * rows are copies of others. */
static KnnwbMatrix *clustered(size_t n, size_t d, int clusters, double spread, gboolean lattice,
                              guint32 seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  g_autofree double *centre = g_new(double, (size_t)clusters *d);
  for (size_t i = 0; i < (size_t)clusters * d; i++)
    centre[i] = spread * (g_rand_double(rand) * 2.0 - 1.0);
  for (size_t i = 0; i < n; i++) {
    const size_t c = (size_t)g_rand_int_range(rand, 0, clusters);
    for (size_t j = 0; j < d; j++) {
      const double u = g_rand_double_range(rand, 1e-12, 1.0), v = g_rand_double(rand);
      const double x = centre[c * d + j] + 2.0 * sqrt(-2.0 * log(u)) * cos(2 * G_PI * v);
      m->values[i * d + j] = lattice ? (float)rint(x) : (float)x;
    }
    /* no constant (or zero) rows: pearson and cosine refuse them */
    gboolean constant = TRUE;
    for (size_t j = 1; j < d; j++)
      constant = constant && m->values[i * d + j] == m->values[i * d];
    if (constant)
      m->values[i * d] += 1.0f;
  }
  for (size_t i = 7; i + 3 < n; i += n / 5)
    memcpy(m->values + (i + 3) * d, m->values + i * d, d * sizeof(float));
  return m;
}

/* The self search of m on the CPU with KNNWB_PARTITION = mode and KNNWB_PARTITION_ROWS = rows;
 * grouped: the cells joined into groups as the work model says (the default) on 2 threads, else
 * each cell its own group (KNNWB_PARTITION_GROUPS=off) on 8 threads: two CPU workers (where the
 * host allows 8), whose merges into the lists of rows visiting their groups meet. */
static KnnwbNeighbors *search(const KnnwbMatrix *m, KnnwbMetric metric, size_t k, const char *mode,
                              const char *rows, gboolean grouped)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = grouped ? 2 : MIN(8, knnwb_thread_limit());
  g_setenv("KNNWB_PARTITION", mode, TRUE);
  g_setenv("KNNWB_PARTITION_ROWS", rows, TRUE);
  if (grouped)
    g_unsetenv("KNNWB_PARTITION_GROUPS");
  else
    g_setenv("KNNWB_PARTITION_GROUPS", "off", TRUE);
  forget_messages();
  g_autoptr(GError) error = NULL;
  KnnwbNeighbors *nb = NULL;
  g_assert_true(knnwb_knn_self(m, &options, &nb, &error));
  g_assert_no_error(error);
  /* At most one choice: sub-searches, on whichever worker thread, do not choose again. */
  g_assert_cmpint(g_atomic_int_get(&partition_ends), <=, 1);
  return nb;
}

typedef struct {
  size_t n, d, k;
  int clusters;
  double spread;
  gboolean lattice;
  const char *rows; /* target cluster size */
} Case;

/* The partitioned search forced on, with each cell its own group and with the cells joined: both
 * give the plain search's lists byte for byte (and so the oracle's, checked once). */
static void check_case(const Case *c, KnnwbMetric metric, gboolean oracle)
{
  g_autoptr(KnnwbMatrix) m = clustered(c->n, c->d, c->clusters, c->spread, c->lattice, 17);
  g_autoptr(KnnwbNeighbors) plain = search(m, metric, c->k, "off", c->rows, TRUE);
  g_assert_false(partition_done);
  g_autoptr(KnnwbNeighbors) cells = search(m, metric, c->k, "on", c->rows, FALSE);
  g_assert_true(partition_done);
  g_assert_cmpuint(partition_cells, >=, 2);
  g_assert_cmpuint(partition_groups, ==, partition_cells);
  g_assert_cmpint(partition_workers, ==,
                  MAX(1, MIN(MIN(8, knnwb_thread_limit()) / 4, (int)partition_groups)));
  knnwb_test_assert_same_lists(plain, cells);
  g_autoptr(KnnwbNeighbors) grouped = search(m, metric, c->k, "on", c->rows, TRUE);
  g_assert_true(partition_done);
  g_assert_cmpuint(partition_groups, >=, 2);
  g_assert_cmpuint(partition_groups, <=, partition_cells);
  g_test_message("%s: %zu cells in %zu groups", knnwb_metric_to_string(metric), partition_cells,
                 partition_groups);
  knnwb_test_assert_same_lists(plain, grouped);
  /* each group's visitors in several pieces, searched by different workers where there are */
  g_setenv("KNNWB_PARTITION_PIECES", "3", TRUE);
  g_autoptr(KnnwbNeighbors) pieces = search(m, metric, c->k, "on", c->rows, TRUE);
  g_unsetenv("KNNWB_PARTITION_PIECES");
  g_assert_true(partition_done);
  knnwb_test_assert_same_lists(plain, pieces);
  if (oracle)
    oracle_check(metric, m->values, m->n_rows, m->values, m->n_rows, m->n_cols, TRUE, grouped,
                 1e-9);
}

static const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_COSINE,
                                      KNNWB_METRIC_PEARSON, KNNWB_METRIC_ABS_PEARSON};

/* Well-separated clusters: most pairs skipped, lists unchanged, equal to the oracle. */
static void test_separated(void)
{
  const Case c = {.n = 3001, .d = 7, .k = 9, .clusters = 12, .spread = 60.0, .rows = "250"};
  for (size_t t = 0; t < G_N_ELEMENTS(metrics); t++)
    check_case(&c, metrics[t], TRUE);
}

/* Overlapping clusters on an integer lattice: exact ties at the k-th distance across cluster
 * borders must still break by the lower row. */
static void test_lattice_ties(void)
{
  const Case c = {
      .n = 2503, .d = 3, .k = 17, .clusters = 9, .spread = 5.0, .lattice = TRUE, .rows = "200"};
  for (size_t t = 0; t < G_N_ELEMENTS(metrics); t++)
    check_case(&c, metrics[t], TRUE);
}

/* Larger k than most clusters hold: small clusters are merged away, lists unchanged. */
static void test_large_k(void)
{
  const Case c = {.n = 4099, .d = 11, .k = 150, .clusters = 30, .spread = 30.0, .rows = "100"};
  check_case(&c, KNNWB_METRIC_EUCLIDEAN, FALSE);
  check_case(&c, KNNWB_METRIC_PEARSON, FALSE);
}

/* A plane configuration: group A at (0, +-1.585), group B at (10, 0), both tight, and one row at
 * (4.9, 0). The row is nearer A's centroid (4.9 against 5.1) but nearer B's rows (5.1 against
 * 5.15): its neighbour lies in the other cluster, just inside the bound (5.1 - B's radius against
 * the row's 5.15 within A), so a bound a few percent too tight loses it. Euclidean: the plane
 * itself; cosine: (1, x/100, y/100) with varying lengths; pearson: that direction in the plane
 * of centred rows of 4 values, plus 4 (chords are the plane's distances / 100 to 0.1%). */
static KnnwbMatrix *between(KnnwbMetric metric)
{
  const size_t per_group = 200, n = 2 * per_group + 1;
  const size_t d = metric == KNNWB_METRIC_PEARSON ? 4 : 3;
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  g_autoptr(GRand) rand = g_rand_new_with_seed(11);
  const double e[3][4] = {{1 / G_SQRT2, -1 / G_SQRT2, 0, 0},
                          {1 / sqrt(6), 1 / sqrt(6), -2 / sqrt(6), 0},
                          {1 / sqrt(12), 1 / sqrt(12), 1 / sqrt(12), -3 / sqrt(12)}};
  for (size_t i = 0; i < n; i++) {
    double x = g_rand_double_range(rand, -0.005, 0.005),
           y = g_rand_double_range(rand, -0.005, 0.005);
    if (i == per_group)
      x = 4.9, y = 0.0;
    else if (i > per_group)
      x += 10.0;
    else
      y += i % 2 ? 1.585 : -1.585;
    const double direction[3] = {1.0, x / 100.0, y / 100.0},
                 length = g_rand_double_range(rand, 1, 3);
    float *row = m->values + i * d;
    for (size_t j = 0; j < d; j++) {
      if (metric == KNNWB_METRIC_EUCLIDEAN)
        row[j] = (float)(j == 0 ? x : j == 1 ? y : 0.0);
      else if (metric == KNNWB_METRIC_COSINE)
        row[j] = (float)(length * direction[j]);
      else
        row[j] = (float)(4.0 + length * (direction[0] * e[0][j] + direction[1] * e[1][j] +
                                         direction[2] * e[2][j]));
    }
  }
  return m;
}

static void test_neighbour_across(void)
{
  for (size_t t = 0; t < 3; t++) {
    g_autoptr(KnnwbMatrix) m = between(metrics[t]);
    g_autoptr(KnnwbNeighbors) plain = search(m, metrics[t], 1, "off", "200", TRUE);
    g_assert_cmpint(plain->indices[200], >, 200); /* the row between has its neighbour across */
    for (int grouped = 0; grouped < 2; grouped++) {
      g_autoptr(KnnwbNeighbors) split = search(m, metrics[t], 1, "on", "200", grouped);
      g_assert_true(partition_done);
      knnwb_test_assert_same_lists(plain, split);
    }
  }
}

/* clusters dense Gaussian blobs (standard deviation 1 in each of d values) of per_cluster rows
 * each, their centres 100 apart on the first axis: no row's bound reaches another blob. Row i is
 * in blob i % clusters, so that every sample of evenly spread rows sees each blob alike. */
static KnnwbMatrix *blobs(size_t clusters, size_t per_cluster, size_t d, guint32 seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  const size_t n = clusters * per_cluster;
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < d; j++) {
      const double u = g_rand_double_range(rand, 1e-12, 1.0), v = g_rand_double(rand);
      const double x = sqrt(-2.0 * log(u)) * cos(2 * G_PI * v);
      m->values[i * d + j] = (float)((j == 0 ? 100.0 * (double)(i % clusters) : 0.0) + x);
    }
  return m;
}

/* What a grouped run and a run of cells (KNNWB_PARTITION_GROUPS=off) said, the lists of both
 * checked against the plain search's. */
typedef struct {
  size_t cells, groups;
  double within, between;
} Said;

static void search_both(const KnnwbMatrix *m, size_t k, const char *rows, Said *cells,
                        Said *grouped)
{
  g_autoptr(KnnwbNeighbors) plain = search(m, KNNWB_METRIC_EUCLIDEAN, k, "off", rows, TRUE);
  for (int g = 0; g < 2; g++) {
    g_autoptr(KnnwbNeighbors) split = search(m, KNNWB_METRIC_EUCLIDEAN, k, "on", rows, g);
    g_assert_true(partition_done);
    g_assert_cmpfloat(pairs_within, >=, 0.0);
    g_assert_cmpfloat(pairs_between, >=, 0.0);
    knnwb_test_assert_same_lists(plain, split);
    Said *said = g ? grouped : cells;
    *said = (Said){partition_cells, partition_groups, pairs_within, pairs_between};
    g_test_message("%s: %zu cells, %zu groups, %g pairs within, %g between",
                   g ? "grouped" : "cells", said->cells, said->groups, said->within, said->between);
  }
  g_assert_cmpuint(cells->cells, ==, grouped->cells); /* the same k-means either way */
  g_assert_cmpuint(cells->groups, ==, cells->cells);
}

/* Eight small blobs far apart, each cut by k-means into about four cells whose rows visit each
 * other. Joining the cells of a blob saves those visits; joining blobs saves nothing but calls
 * (1e6 pairs each on the CPU), which is never reason enough on its own:
 * a sub-search's screen is scaled to its rows' spread. So each blob is one group, none visited. */
static void test_groups_join(void)
{
  g_autoptr(KnnwbMatrix) m = blobs(8, 400, 4, 21);
  Said cells, grouped;
  search_both(m, 8, "100", &cells, &grouped);
  g_assert_cmpuint(cells.cells, >=, 3 * 8);
  g_assert_cmpfloat(cells.between, >, 0.0);
  g_assert_cmpuint(grouped.groups, ==, 8);
  g_assert_cmpfloat(grouped.between, ==, 0.0);
}

/*
 * Three large blobs (12000 rows), each cut into cells. Joining cells a and b of different blobs
 * would cost their |a| |b| pairs plus, for the rest of each blob (which visits the cell of its own
 * blob), the other cell's rows: N (|a| + |b|) - |a| |b| pairs for blobs of N rows, more than the
 * two sub-searches it saves (2e6 pairs on the CPU) for any cells of at least N / 4 rows; joining
 * the cells of one blob saves their visits. So each blob is exactly one group: three groups, their
 * own pairs 3 N^2 / 2, none between, where the cells searched pairs between them (every row of a
 * blob visits its blob's other cells).
 */
static void test_groups_apart(void)
{
  const size_t per_cluster = 12000;
  g_autoptr(KnnwbMatrix) m = blobs(3, per_cluster, 4, 22);
  Said cells, grouped;
  search_both(m, 5, "6000", &cells, &grouped);
  g_assert_cmpuint(cells.cells, >, 3);
  g_assert_cmpfloat(cells.between, >, 0.0);
  g_assert_cmpuint(grouped.groups, ==, 3);
  const double own = 1.5 * (double)per_cluster * (double)per_cluster;
  g_assert_cmpfloat(fabs(grouped.within - own), <=, 5e-3 * own); /* printed to 3 digits */
  g_assert_cmpfloat(grouped.between, ==, 0.0);
}

/* Cancels the run at its first progress report: the choice is made (and logged) by then. */
static void cancel_at_once(uint64_t done, uint64_t total, void *data)
{
  (void)done;
  (void)total;
  g_atomic_int_set((gint *)data, 1);
}

/* What the automatic choice decides for m (the run itself cancelled at once). */
static void auto_choice(const KnnwbMatrix *m, const char *rows)
{
  static gint cancel;
  g_atomic_int_set(&cancel, 0);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = KNNWB_METRIC_EUCLIDEAN;
  options.k = 5;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = 2;
  options.cancel = &cancel;
  options.progress = cancel_at_once;
  options.progress_data = &cancel;
  g_setenv("KNNWB_PARTITION", "auto", TRUE);
  g_setenv("KNNWB_PARTITION_ROWS", rows, TRUE);
  g_unsetenv("KNNWB_PARTITION_GROUPS");
  g_setenv("KNNWB_TREE", "0", TRUE); /* (rows of 8 columns would go to core/tree/) */
  forget_messages();
  g_autoptr(GError) error = NULL;
  KnnwbNeighbors *nb = NULL;
  g_assert_false(knnwb_knn_self(m, &options, &nb, &error));
  g_unsetenv("KNNWB_TREE");
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
  g_assert_false(partition_done);
}

/* The automatic choice: below the size threshold the plain search runs; on well-separated
 * clusters it partitions; on data without clusters (one Gaussian cloud in 40 dimensions) the
 * sample says the bounds would skip too little. */
static void test_auto_choice(void)
{
  g_autoptr(KnnwbMatrix) small = clustered(2000, 5, 10, 50.0, FALSE, 3);
  g_autoptr(KnnwbNeighbors) a = search(small, KNNWB_METRIC_EUCLIDEAN, 5, "auto", "100", TRUE);
  g_assert_false(partition_done);
  g_assert_false(partition_chosen);
  g_autoptr(KnnwbMatrix) separated = clustered(300007, 8, 40, 200.0, FALSE, 4);
  auto_choice(separated, "20000");
  g_assert_true(partition_chosen);
  g_autoptr(KnnwbMatrix) cloud = clustered(300007, 40, 1, 0.0, FALSE, 5);
  auto_choice(cloud, "20000");
  g_assert_true(partition_declined);
  g_assert_false(partition_chosen);
}

/* On the CPU, whose sub-searches cost little, the choice starts at 40,000 rows and tries cells of
 * 512 rows: 50,000 rows in 50 clusters far apart are partitioned into about a hundred cells (with
 * the GPU's floor of 262,144 rows, or cells of 2,048 rows at least and the former cost of a call,
 * they went to the plain search); 39,999 such rows go to the plain search without a choice. */
static void test_auto_choice_cpu(void)
{
  g_autoptr(KnnwbMatrix) separated = clustered(50000, 50, 50, 10.0, FALSE, 6);
  auto_choice(separated, "0");
  g_assert_true(partition_chosen);
  g_assert_cmpuint(partition_cells, >=, 90);
  g_autoptr(KnnwbMatrix) fewer = clustered(39999, 50, 50, 10.0, FALSE, 6);
  auto_choice(fewer, "0");
  g_assert_false(partition_chosen);
  g_assert_false(partition_declined);
}

/* A forced partitioned run of m that must fail as the plain search does (its error naming
 * `row`), leaving nothing partitioned. */
static void assert_plain_error(const KnnwbMatrix *m, KnnwbMetric metric, const char *row)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = 4;
  options.backend = KNNWB_BACKEND_CPU;
  g_setenv("KNNWB_PARTITION", "on", TRUE);
  g_setenv("KNNWB_PARTITION_ROWS", "100", TRUE);
  partition_done = FALSE;
  g_autoptr(GError) error = NULL;
  KnnwbNeighbors *nb = NULL;
  g_assert_false(knnwb_knn_self(m, &options, &nb, &error));
  g_assert_nonnull(error);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, row));
  g_assert_false(partition_done);
}

/* Rows without a direction (a constant row for pearson) leave the run to the plain search, which
 * reports them as it always does. */
static void test_degenerate_row(void)
{
  g_autoptr(KnnwbMatrix) m = clustered(1501, 6, 8, 40.0, FALSE, 9);
  for (size_t j = 0; j < m->n_cols; j++)
    m->values[700 * m->n_cols + j] = 2.5f;
  assert_plain_error(m, KNNWB_METRIC_PEARSON, "row 700");
}

/* A value that is not finite (row 901, away from the sample's rows) leaves the run to the plain
 * search, whose error names that row of the data, not a row of some cluster. */
static void test_not_finite(void)
{
  const float bad[] = {NAN, INFINITY};
  for (size_t t = 0; t < G_N_ELEMENTS(bad); t++) {
    g_autoptr(KnnwbMatrix) m = clustered(1501, 6, 8, 40.0, FALSE, 10);
    m->values[901 * m->n_cols + 2] = bad[t];
    assert_plain_error(m, KNNWB_METRIC_EUCLIDEAN, "901");
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_log_set_default_handler(capture, NULL);
  g_test_add_func("/partition/separated", test_separated);
  g_test_add_func("/partition/lattice-ties", test_lattice_ties);
  g_test_add_func("/partition/large-k", test_large_k);
  g_test_add_func("/partition/neighbour-across", test_neighbour_across);
  g_test_add_func("/partition/groups-join", test_groups_join);
  g_test_add_func("/partition/groups-apart", test_groups_apart);
  g_test_add_func("/partition/auto-choice", test_auto_choice);
  g_test_add_func("/partition/auto-choice-cpu", test_auto_choice_cpu);
  g_test_add_func("/partition/degenerate-row", test_degenerate_row);
  g_test_add_func("/partition/not-finite", test_not_finite);
  return g_test_run();
}
