/* The partitioned search's bounds pass (core/partition/partition_visits.c), host only: the groups
 * each row must still visit are exactly those with a cell whose exact bound (the row's distance
 * to its centroid less the cell's radius) is not beyond the row's limit, every row read or not;
 * with many cells (more than a cell's ordered neighbourhood holds), few, and limits from none to
 * every group; on any number of threads. */
#include <math.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "partition/partition_internal.h"
#include "uniform_clusters.h"

/* The visitors of each group by their definition: every cell of another group, its exact bound. */
static void reference_visits(const KnnwbPartition *p, const KnnwbMatrix *data, const double *limit,
                             int64_t *start, GArray *rows)
{
  const size_t d = p->d;
  double *v = g_new(double, d);
  memset(start, 0, (p->groups + 1) * sizeof(int64_t));
  for (size_t g = 0; g < p->groups; g++) {
    for (size_t i = 0; i < p->n; i++) {
      const size_t own = (size_t)p->group_of[p->cluster_of[i]];
      if (own == g)
        continue;
      g_assert_true(knnwb_partition_space_row(p->metric, data->values + i * d, d, v));
      double sq = 0.0;
      for (size_t t = 0; t < d; t++)
        sq += v[t] * v[t];
      gboolean visits = FALSE;
      for (size_t j = 0; j < p->m && !visits; j++) {
        if ((size_t)p->group_of[j] != g)
          continue;
        double lower, upper;
        knnwb_partition_pair_bounds(p->metric, d, sq + p->centroid_sq[j],
                                    knnwb_partition_row_dot(v, p->centroid + j * d, d), &lower,
                                    &upper);
        visits = !(lower - p->radius[j] > limit[i]);
      }
      if (visits) {
        const int64_t row = (int64_t)i;
        g_array_append_val(rows, row);
      }
    }
    start[g + 1] = (int64_t)rows->len;
  }
  g_free(v);
}

/* A partition of data (cells of about 300 rows, grouped), the bounds pass with limits of a few
 * scales of the cells' radii, against the reference (with the largest, some visits). */
static void check_visits(const KnnwbMatrix *data, KnnwbMetric metric, size_t k, int threads,
                         int gpus)
{
  /* a run given GPUs bounds on them when there are any, else falls back to the CPU's pass */
  const gboolean on_gpu = gpus > 0 && knnwb_cuda_device_count() > 0;
  int devices[2] = {0, 0}; /* (two parts on one GPU split the rows as two GPUs would) */
  KnnwbPartition p;
  double share;
  g_assert_true(knnwb_partition_choose(&p, data, metric, k, threads, FALSE, &share));
  g_assert_true(knnwb_partition_assign_all(&p, data, k, NULL, NULL, NULL, 0));
  knnwb_partition_group(&p, data, k, FALSE);
  g_assert_cmpuint(p.groups, >=, 2);
  const size_t n = data->n_rows;
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = k;
  options.metric = metric;
  /* limits: the chord of a distance between nothing and many times a cell's radius (more cells
   * left than a cell orders) */
  const double scales[] = {0.0, 0.3, 1.0, 3.0, 12.0};
  for (size_t s = 0; s < G_N_ELEMENTS(scales); s++) {
    g_autoptr(GRand) rand = g_rand_new_with_seed(11 + (guint32)s);
    double *limit = g_new(double, n);
    KnnwbPartitionRun run = {.data = data,
                             .options = &options,
                             .p = &p,
                             .k = k,
                             .d = p.d,
                             .first = 0,
                             .last = n,
                             .devices = gpus > 0 ? devices : NULL,
                             .gpus = gpus};
    run.kth = g_new(int64_t, n);
    for (size_t i = 0; i < n; i++) {
      const double kth = scales[s] * p.radius[p.cluster_of[i]] * g_rand_double_range(rand, 0.5, 1);
      memcpy(&run.kth[i], &kth, sizeof kth);
      limit[i] = knnwb_partition_chord_limit(metric, kth, p.d);
    }
    double pairs;
    g_assert_true(knnwb_partition_visits(&run, &pairs));
    g_assert_cmpint(run.bounds_on_gpu, ==, on_gpu);
    int64_t *start = g_new(int64_t, p.groups + 1);
    GArray *rows = g_array_new(FALSE, FALSE, sizeof(int64_t));
    reference_visits(&p, data, limit, start, rows);
    g_assert_cmpmem(run.query_start, (p.groups + 1) * sizeof(int64_t), start,
                    (p.groups + 1) * sizeof(int64_t));
    g_assert_cmpmem(run.queries, rows->len * sizeof(int64_t), rows->data,
                    rows->len * sizeof(int64_t));
    if (s == G_N_ELEMENTS(scales) - 1)
      g_assert_cmpint(start[p.groups], >, 0);
    g_array_free(rows, TRUE);
    g_free(start);
    g_free(run.query_start);
    g_free(run.queries);
    g_free(run.kth);
    g_free(limit);
  }
  knnwb_partition_clear(&p);
}

/* 150 cells (more than the 64 a cell orders): rows with few cells left, with more, and with none */
static void test_many_cells(void)
{
  g_autoptr(KnnwbMatrix) data = uniform_clusters(45001, 6, 40, 10.0, 1.5, 5);
  check_visits(data, KNNWB_METRIC_EUCLIDEAN, 5, 3, 0);
  check_visits(data, KNNWB_METRIC_EUCLIDEAN, 5, 1, 0);
}

/* few cells, the other metrics whose bound space has the triangle test */
static void test_metrics(void)
{
  g_autoptr(KnnwbMatrix) data = uniform_clusters(9001, 7, 6, 10.0, 2.0, 8);
  check_visits(data, KNNWB_METRIC_PEARSON, 4, 2, 0);
  check_visits(data, KNNWB_METRIC_COSINE, 4, 2, 0);
  /* abs-pearson has no gaps: every row is read, as before */
  check_visits(data, KNNWB_METRIC_ABS_PEARSON, 4, 2, 0);
}

/* The assignment on a GPU (partition_assign_gpu.c) against the CPU's: the same cells, reaches and
 * radii, bit for bit, for every row and for a block that starts past 0 (a rank's). The CPU's
 * assignment has dropped small cells and moved their rows, which gives what a full pass over the
 * kept centroids gives. has_gpu FALSE: the GPU's is refused (no GPU), nothing written. */
static void check_assign(const KnnwbMatrix *data, KnnwbMetric metric, size_t k, gboolean has_gpu)
{
  KnnwbPartition p;
  double share;
  g_assert_true(knnwb_partition_choose(&p, data, metric, k, 2, FALSE, &share));
  g_assert_true(knnwb_partition_assign_all(&p, data, k, NULL, NULL, NULL, 0));
  const size_t n = p.n, first = n / 3;
  int32_t *cell = g_memdup2(p.cluster_of, n * sizeof(int32_t));
  double *reach = g_memdup2(p.reach, n * sizeof(double));
  double *radius = g_memdup2(p.radius, p.m * sizeof(double));
  memset(p.cluster_of, 0xff, n * sizeof(int32_t));
  memset(p.reach, 0xff, n * sizeof(double));
  memset(p.radius, 0, p.m * sizeof(double));
  /* every GPU there is (one part each), then GPU 0 listed twice (two parts) for a later block */
  g_assert_cmpint(knnwb_partition_assign_gpu(&p, data, 0, n, NULL, NULL, -1, FALSE), ==, has_gpu);
  if (has_gpu) {
    g_assert_cmpmem(p.cluster_of, n * sizeof(int32_t), cell, n * sizeof(int32_t));
    g_assert_cmpmem(p.reach, n * sizeof(double), reach, n * sizeof(double));
    g_assert_cmpmem(p.radius, p.m * sizeof(double), radius, p.m * sizeof(double));
    memset(p.cluster_of, 0xff, n * sizeof(int32_t));
    memset(p.reach, 0xff, n * sizeof(double));
    const int twice[] = {0, 0};
    g_assert_true(knnwb_partition_assign_gpu(&p, data, first, n, NULL, twice, 2, TRUE));
    g_assert_cmpmem(p.cluster_of + first, (n - first) * sizeof(int32_t), cell + first,
                    (n - first) * sizeof(int32_t));
    g_assert_cmpmem(p.reach + first, (n - first) * sizeof(double), reach + first,
                    (n - first) * sizeof(double));
    g_assert_cmpint(p.cluster_of[first - 1], ==, -1);
  } else {
    g_assert_cmpint(p.cluster_of[0], ==, -1);
  }
  g_free(cell);
  g_free(reach);
  g_free(radius);
  knnwb_partition_clear(&p);
}

/* The pass on a GPU (kernels/partition_bounds.cu): the same visits as their definition, every
 * metric, many cells and few, narrow rows and wide, the rows in chunks of 1,000 through both
 * streams, as one part and as two; and the assignment on the GPU. Skipped without a GPU. */
static void test_gpu(void)
{
  if (knnwb_cuda_device_count() < 1) {
    g_test_skip("no GPU");
    return;
  }
  g_autoptr(KnnwbMatrix) many = uniform_clusters(45001, 6, 40, 10.0, 1.5, 5);
  check_visits(many, KNNWB_METRIC_EUCLIDEAN, 5, 3, 1);
  check_visits(many, KNNWB_METRIC_EUCLIDEAN, 5, 3, 2);
  g_autoptr(KnnwbMatrix) few = uniform_clusters(9001, 7, 6, 10.0, 2.0, 8);
  check_visits(few, KNNWB_METRIC_EUCLIDEAN, 4, 2, 1);
  check_visits(few, KNNWB_METRIC_PEARSON, 4, 2, 1);
  check_visits(few, KNNWB_METRIC_COSINE, 4, 2, 2);
  check_visits(few, KNNWB_METRIC_ABS_PEARSON, 4, 2, 1);
  /* wide rows: 32 a block in shared memory (700 columns), and read in place (1,400) */
  g_autoptr(KnnwbMatrix) wide = uniform_clusters(3001, 700, 6, 10.0, 2.0, 9);
  check_visits(wide, KNNWB_METRIC_EUCLIDEAN, 4, 2, 1);
  g_autoptr(KnnwbMatrix) wider = uniform_clusters(3001, 1400, 6, 10.0, 2.0, 10);
  check_visits(wider, KNNWB_METRIC_PEARSON, 4, 2, 1);
  /* the assignment: every metric, narrow rows and wide */
  check_assign(many, KNNWB_METRIC_EUCLIDEAN, 5, TRUE);
  check_assign(few, KNNWB_METRIC_PEARSON, 4, TRUE);
  check_assign(few, KNNWB_METRIC_COSINE, 4, TRUE);
  check_assign(few, KNNWB_METRIC_ABS_PEARSON, 4, TRUE);
  check_assign(wider, KNNWB_METRIC_PEARSON, 4, TRUE);
}

/* Without a GPU, a run that has GPUs falls back to the CPU's pass (the same visits), and the
 * assignment on a GPU is refused. */
static void test_gpu_fallback(void)
{
  if (knnwb_cuda_device_count() > 0) {
    g_test_skip("a GPU is there: /partition-visits/gpu");
    return;
  }
  g_autoptr(KnnwbMatrix) few = uniform_clusters(9001, 7, 6, 10.0, 2.0, 8);
  check_visits(few, KNNWB_METRIC_EUCLIDEAN, 4, 2, 1);
  check_assign(few, KNNWB_METRIC_EUCLIDEAN, 4, FALSE);
}

/* The visitor index from the GPU's bits (host only): random bits of 130 groups (three words a
 * row) over a block of rows that starts past 0, on 1 and 3 threads and parts of 65,536 rows,
 * against the index by its definition (each group's rows ascending). */
static void test_bits(void)
{
  const size_t groups = 130, words = 3, rows = 150001, first = 777;
  g_autoptr(GRand) rand = g_rand_new_with_seed(5);
  uint64_t *bits = g_new0(uint64_t, rows * words);
  for (size_t r = 0; r < rows; r++)
    for (int t = g_rand_int_range(rand, 0, 4); t > 0; t--) {
      const size_t g = (size_t)g_rand_int_range(rand, 0, (gint32)groups);
      bits[r * words + g / 64] |= (uint64_t)1 << (g % 64);
    }
  int64_t *start = g_new0(int64_t, groups + 1);
  GArray *expected = g_array_new(FALSE, FALSE, sizeof(int64_t));
  for (size_t g = 0; g < groups; g++) {
    for (size_t r = 0; r < rows; r++)
      if (bits[r * words + g / 64] >> (g % 64) & 1) {
        const int64_t row = (int64_t)(first + r);
        g_array_append_val(expected, row);
      }
    start[g + 1] = (int64_t)expected->len;
  }
  const int threads[] = {1, 3};
  for (size_t t = 0; t < G_N_ELEMENTS(threads); t++) {
    KnnwbPartition p = {.groups = groups, .threads = threads[t]};
    KnnwbPartitionRun run = {.p = &p, .first = first, .last = first + rows};
    g_assert_true(knnwb_partition_visits_from_bits(&run, bits, words, rows));
    g_assert_cmpmem(run.query_start, (groups + 1) * sizeof(int64_t), start,
                    (groups + 1) * sizeof(int64_t));
    g_assert_cmpmem(run.queries, expected->len * sizeof(int64_t), expected->data,
                    expected->len * sizeof(int64_t));
    g_free(run.query_start);
    g_free(run.queries);
  }
  g_array_free(expected, TRUE);
  g_free(start);
  g_free(bits);
}

/* Where the assignment runs (host only): one process from KNNWB_PARTITION_GPU_MIN_CELLS cells,
 * ranks sharing the host's cores from any count where their CPU's share is long, never without a
 * GPU; the knob overrides both. */
static void test_assign_rule(void)
{
  const size_t few = KNNWB_PARTITION_GPU_MIN_CELLS - 1, many = KNNWB_PARTITION_GPU_MIN_CELLS;
  const double long_share = KNNWB_PARTITION_GPU_ASSIGN_SHARED_WORK;
  const double short_share = KNNWB_PARTITION_GPU_ASSIGN_SHARED_WORK / 2;
  g_assert_false(knnwb_partition_assign_gpu_wanted(NULL, TRUE, few, 0.0));
  g_assert_true(knnwb_partition_assign_gpu_wanted(NULL, TRUE, many, 0.0));
  g_assert_true(knnwb_partition_assign_gpu_wanted(NULL, TRUE, 2, long_share));
  g_assert_true(knnwb_partition_assign_gpu_wanted("", TRUE, few, long_share));
  g_assert_false(knnwb_partition_assign_gpu_wanted(NULL, TRUE, few, short_share));
  g_assert_true(knnwb_partition_assign_gpu_wanted(NULL, TRUE, many, short_share));
  g_assert_false(knnwb_partition_assign_gpu_wanted(NULL, FALSE, many, long_share));
  g_assert_false(knnwb_partition_assign_gpu_wanted("1", FALSE, many, long_share));
  g_assert_false(knnwb_partition_assign_gpu_wanted("0", TRUE, many, long_share));
  g_assert_true(knnwb_partition_assign_gpu_wanted("1", TRUE, 2, 0.0));
}

/* The groups' ranks (host only): most work first to the rank where each ends soonest, ties to
 * the lower rank; with extra work of an item on some ranks (phase two of ranks that keep to their
 * blocks: rows to bring) an item stays where it costs nothing more unless that rank is loaded by
 * more than the extra. */
static void test_ranks_assign(void)
{
  const double work[] = {5, 4, 3, 3, 1};
  int32_t owner[5];
  knnwb_partition_ranks_assign(work, NULL, 5, 2, owner);
  const int32_t by_work[] = {0, 1, 1, 0, 1}; /* loads 5 | 4, then 7, 8, 8 */
  g_assert_cmpmem(owner, sizeof owner, by_work, sizeof by_work);
  const double same[] = {2, 2, 2};
  knnwb_partition_ranks_assign(same, NULL, 3, 3, owner);
  g_assert_cmpint(owner[0], ==, 0);
  g_assert_cmpint(owner[1], ==, 1);
  g_assert_cmpint(owner[2], ==, 2);
  /* four items held on rank 0: bringing one to rank 1 costs 10, more than all four together */
  const double ones[] = {1, 1, 1, 1};
  const double far[] = {0, 10, 0, 10, 0, 10, 0, 10};
  knnwb_partition_ranks_assign(ones, far, 4, 2, owner);
  for (int g = 0; g < 4; g++)
    g_assert_cmpint(owner[g], ==, 0);
  /* cheap to bring: shared out, the extra counted in rank 1's load (loads 1 | 1.5, 2 | 1.5, then
   * a tie at 2: the lower rank) */
  const double near[] = {0, 0.5, 0, 0.5, 0, 0.5, 0, 0.5};
  knnwb_partition_ranks_assign(ones, near, 4, 2, owner);
  const int32_t shared[] = {0, 1, 0, 0};
  g_assert_cmpmem(owner, 4 * sizeof(int32_t), shared, sizeof shared);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_log_set_always_fatal(G_LOG_FATAL_MASK);
  /* the choice tries one cluster count: a cell each 300 rows (set before any thread starts) */
  g_setenv("KNNWB_PARTITION_ROWS", "300", TRUE);
  /* the GPU's pass whenever a run has a GPU, whatever its cells; the CPU's cases have none */
  g_setenv("KNNWB_PARTITION_GPU_BOUNDS", "1", TRUE);
  g_setenv("KNNWB_PARTITION_GPU_ASSIGN", "1", TRUE);
  g_setenv("KNNWB_CUDA_BOUNDS_CHUNK", "1000", TRUE);
  g_test_add_func("/partition-visits/many-cells", test_many_cells);
  g_test_add_func("/partition-visits/metrics", test_metrics);
  g_test_add_func("/partition-visits/gpu", test_gpu);
  g_test_add_func("/partition-visits/gpu-fallback", test_gpu_fallback);
  g_test_add_func("/partition-visits/bits", test_bits);
  g_test_add_func("/partition-visits/assign-rule", test_assign_rule);
  g_test_add_func("/partition-visits/ranks-assign", test_ranks_assign);
  return g_test_run();
}
