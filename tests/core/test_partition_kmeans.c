/* The partitioned search's k-means and choice (core/partition/partition_build.c, partition_seed.c,
 * partition_plan.c), host only: the same sample, seeds, centroids, labels, rounds and choice, bit
 * for bit, for any number of threads, on odd sizes; the seeds as the serial k-means++ draws them;
 * rounds that stop early leave each centroid the mean of its rows; the estimated k-th chord as a
 * sort of the chords gives it; the floor of the work under what the estimate gives; how many
 * sub-searches run at once on a GPU. */
#include <math.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "partition/partition_internal.h"
#include "uniform_clusters.h"

static const int thread_counts[] = {2, 3, 5, 16};

/* The k-means++ seeds drawn one row at a time (the subset, the fixed seed and the draw of
 * partition_seed.c, without threads). */
static void reference_seeds(const KnnwbPartitionBlock *sample, size_t m, double *centroid)
{
  const size_t s = sample->rows, d = sample->d;
  const size_t subset = MIN(s, MAX((size_t)4096, 4 * m));
  double *nearest = g_new(double, subset);
  GRand *rand = g_rand_new_with_seed(20240611u);
  size_t chosen = 0;
  for (size_t c = 0; c < m; c++) {
    if (c > 0) {
      double total = 0.0;
      for (size_t u = 0; u < subset; u++)
        total += nearest[u];
      double target = g_rand_double(rand) * total, seen = 0.0;
      chosen = subset - 1;
      for (size_t u = 0; u < subset; u++) {
        seen += nearest[u];
        if (seen > target) {
          chosen = u;
          break;
        }
      }
    }
    const double *centre = sample->v + ((chosen * s) / subset) * d;
    memcpy(centroid + c * d, centre, d * sizeof(double));
    for (size_t u = 0; u < subset; u++) {
      const double *v = sample->v + ((u * s) / subset) * d;
      double sq = 0.0;
      for (size_t j = 0; j < d; j++)
        sq += (v[j] - centre[j]) * (v[j] - centre[j]);
      nearest[u] = c == 0 ? sq : MIN(nearest[u], sq);
    }
  }
  g_rand_free(rand);
  g_free(nearest);
}

static void sample_of(KnnwbPartitionBlock *sample, const KnnwbMatrix *data, KnnwbMetric metric,
                      size_t s, size_t m)
{
  g_assert_true(knnwb_partition_sample_init(sample, data, metric, s, m, 3));
  g_assert_cmpuint(sample->rows, ==, s);
}

static void test_seeds(void)
{
  g_autoptr(KnnwbMatrix) data = uniform_clusters(9001, 13, 40, 4.0, 1.0, 11);
  /* 5003 rows: a subset of 4096 (threads' ranges not multiples of 4); 2001 rows: the whole
   * sample; 1100 seeds: a subset of 4 rows a seed */
  const size_t rows[] = {5003, 2001, 5003}, seeds[] = {37, 150, 1100};
  for (size_t r = 0; r < G_N_ELEMENTS(rows); r++) {
    KnnwbPartitionBlock sample;
    sample_of(&sample, data, KNNWB_METRIC_EUCLIDEAN, rows[r], seeds[r]);
    const size_t bytes = seeds[r] * sample.d * sizeof(double);
    double *expected = g_malloc(bytes), *got = g_malloc(bytes);
    reference_seeds(&sample, seeds[r], expected);
    knnwb_partition_seed(&sample, seeds[r], 1, got);
    g_assert_cmpmem(got, bytes, expected, bytes);
    for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
      memset(got, 0, bytes);
      knnwb_partition_seed(&sample, seeds[r], thread_counts[t], got);
      g_assert_cmpmem(got, bytes, expected, bytes);
    }
    g_free(got);
    g_free(expected);
    knnwb_partition_block_clear(&sample);
  }
}

/* The sample made on one thread and on several: the same rows; a row without direction (constant,
 * for pearson) in any block fails it. */
static void test_sample_threads(void)
{
  g_autoptr(KnnwbMatrix) data = uniform_clusters(9001, 13, 20, 4.0, 1.0, 16);
  KnnwbPartitionBlock one;
  g_assert_true(knnwb_partition_sample_init(&one, data, KNNWB_METRIC_PEARSON, 5003, 2, 1));
  for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
    KnnwbPartitionBlock sample;
    g_assert_true(knnwb_partition_sample_init(&sample, data, KNNWB_METRIC_PEARSON, 5003, 2,
                                              thread_counts[t]));
    g_assert_cmpuint(sample.rows, ==, one.rows);
    g_assert_cmpmem(sample.v, 5003 * 13 * sizeof(double), one.v, 5003 * 13 * sizeof(double));
    g_assert_cmpmem(sample.v_sq, 5003 * sizeof(double), one.v_sq, 5003 * sizeof(double));
    knnwb_partition_block_clear(&sample);
  }
  knnwb_partition_block_clear(&one);
  /* sample row 4500 (the third block) is data row 4500 * 9001 / 5003 */
  const size_t row = (4500 * (size_t)9001) / 5003;
  for (size_t j = 0; j < 13; j++)
    data->values[row * 13 + j] = 2.5f;
  for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
    KnnwbPartitionBlock sample;
    g_assert_false(knnwb_partition_sample_init(&sample, data, KNNWB_METRIC_PEARSON, 5003, 2,
                                               thread_counts[t]));
  }
}

/* Whether each centroid with rows is the mean of its rows as the k-means makes it: sums of
 * blocks of 2048 rows in row order, added in block order. */
static gboolean centroids_are_means(const KnnwbPartitionBlock *sample, const int32_t *label,
                                    size_t m, const double *centroid)
{
  const size_t s = sample->rows, d = sample->d, blocks = (s + 2047) / 2048;
  double *total = g_new0(double, m *d), *block = g_new(double, m *d);
  size_t *count = g_new0(size_t, m), *in_block = g_new(size_t, m);
  for (size_t b = 0; b < blocks; b++) {
    memset(in_block, 0, m * sizeof(size_t));
    memset(block, 0, m * d * sizeof(double));
    for (size_t t = b * 2048; t < MIN(s, (b + 1) * 2048); t++) {
      in_block[label[t]]++;
      for (size_t j = 0; j < d; j++)
        block[label[t] * d + j] += sample->v[t * d + j];
    }
    for (size_t c = 0; c < m; c++) {
      count[c] += in_block[c];
      for (size_t j = 0; in_block[c] > 0 && j < d; j++)
        total[c * d + j] += block[c * d + j];
    }
  }
  gboolean same = TRUE;
  for (size_t c = 0; c < m; c++)
    for (size_t j = 0; count[c] > 0 && j < d; j++) {
      const double mean = total[c * d + j] / (double)count[c];
      same = same && memcmp(&mean, &centroid[c * d + j], sizeof mean) == 0;
    }
  g_free(in_block);
  g_free(count);
  g_free(block);
  g_free(total);
  return same;
}

/* k-means on one thread and on several: centroids, their squares, labels, the sample's dot
 * products and the rounds the same; rounds that stopped early (the labels settled) left each
 * centroid the mean of its rows, so that one more round would change nothing. Returns the
 * rounds. */
static int check_kmeans(const KnnwbMatrix *data, KnnwbMetric metric, size_t s, size_t m)
{
  KnnwbPartitionBlock sample;
  sample_of(&sample, data, metric, s, m);
  const size_t d = sample.d, centroid_bytes = m * d * sizeof(double);
  double *centroid = g_malloc(centroid_bytes), *centroid_sq = g_new(double, m);
  int32_t *label = g_new(int32_t, s);
  const int rounds = knnwb_partition_kmeans(&sample, m, 1, centroid, centroid_sq, label);
  g_assert_cmpint(rounds, >=, 1);
  g_assert_cmpint(rounds, <=, 8);
  if (rounds < 8)
    g_assert_true(centroids_are_means(&sample, label, m, centroid));
  double *dot = g_memdup2(sample.dot, s * sample.m * sizeof(double));
  /* each label the first centroid of the lowest |c|^2 - 2 v.c, one score at a time */
  for (size_t t = 0; t < s; t++) {
    size_t best = 0;
    double best_score = HUGE_VAL;
    for (size_t j = 0; j < m; j++) {
      const double score = centroid_sq[j] - 2.0 * dot[t * sample.m + j];
      if (score < best_score) {
        best_score = score;
        best = j;
      }
    }
    g_assert_cmpint(label[t], ==, (int32_t)best);
  }
  /* every centroid has sample rows (the data has clusters enough) */
  size_t *count = g_new0(size_t, m);
  for (size_t t = 0; t < s; t++)
    count[label[t]]++;
  size_t empty = 0;
  for (size_t c = 0; c < m; c++)
    empty += count[c] == 0;
  g_assert_cmpuint(empty, <, m / 2);
  for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
    double *c2 = g_malloc0(centroid_bytes), *sq2 = g_new0(double, m);
    int32_t *label2 = g_new0(int32_t, s);
    g_assert_cmpint(knnwb_partition_kmeans(&sample, m, thread_counts[t], c2, sq2, label2), ==,
                    rounds);
    g_assert_cmpmem(c2, centroid_bytes, centroid, centroid_bytes);
    g_assert_cmpmem(sq2, m * sizeof(double), centroid_sq, m * sizeof(double));
    g_assert_cmpmem(label2, s * sizeof(int32_t), label, s * sizeof(int32_t));
    g_assert_cmpmem(sample.dot, s * sample.m * sizeof(double), dot, s * sample.m * sizeof(double));
    g_free(label2);
    g_free(sq2);
    g_free(c2);
  }
  g_free(count);
  g_free(dot);
  g_free(label);
  g_free(centroid_sq);
  g_free(centroid);
  knnwb_partition_block_clear(&sample);
  return rounds;
}

static void test_kmeans_threads(void)
{
  g_autoptr(KnnwbMatrix) data = uniform_clusters(9001, 13, 60, 4.0, 1.0, 12);
  /* 5003 sample rows: three assignment blocks of 2048, the last short */
  check_kmeans(data, KNNWB_METRIC_EUCLIDEAN, 5003, 37);
  check_kmeans(data, KNNWB_METRIC_EUCLIDEAN, 5003, 150);
  check_kmeans(data, KNNWB_METRIC_PEARSON, 4097, 61);
  check_kmeans(data, KNNWB_METRIC_COSINE, 333, 7);
  /* a few blobs far apart, fewer centroids than blobs: the labels settle before the last round */
  g_autoptr(KnnwbMatrix) blobs = uniform_clusters(7001, 13, 5, 4.0, 1.0, 15);
  g_assert_cmpint(check_kmeans(blobs, KNNWB_METRIC_EUCLIDEAN, 4999, 3), <, 8);
  g_assert_cmpint(check_kmeans(blobs, KNNWB_METRIC_EUCLIDEAN, 4999, 4), <, 8);
  g_assert_cmpint(check_kmeans(blobs, KNNWB_METRIC_PEARSON, 4999, 3), <, 8);
}

/* The whole choice (k-means for each cluster count, the sample's estimate of the work left) on
 * one thread and on several: the same centroids and share. */
static void test_choice_threads(void)
{
  g_autoptr(KnnwbMatrix) data = uniform_clusters(12345, 9, 30, 4.0, 1.0, 13);
  const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_ABS_PEARSON};
  for (size_t k = 0; k < G_N_ELEMENTS(metrics); k++) {
    KnnwbPartition one;
    double share_one;
    g_assert_true(knnwb_partition_choose(&one, data, metrics[k], 7, 1, FALSE, &share_one));
    g_assert_cmpuint(one.m, ==, 12345 / 301);
    for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
      KnnwbPartition p;
      double share;
      g_assert_true(
          knnwb_partition_choose(&p, data, metrics[k], 7, thread_counts[t], FALSE, &share));
      g_assert_cmpuint(p.m, ==, one.m);
      g_assert_cmpmem(p.centroid, p.m * p.d * sizeof(double), one.centroid,
                      one.m * one.d * sizeof(double));
      g_assert_true(memcmp(&share, &share_one, sizeof share) == 0);
      knnwb_partition_clear(&p);
    }
    knnwb_partition_clear(&one);
  }
}

/* n x d Gaussian rows around one centre (no clusters). */
static KnnwbMatrix *gaussian_rows(size_t n, size_t d, guint32 seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  for (size_t i = 0; i < n * d; i++) {
    double u = g_rand_double(rand), v = g_rand_double(rand);
    m->values[i] = (float)(sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * G_PI * v));
  }
  return m;
}

/* The choice's counts for 65,601 rows are 2, 8 and 32 clusters: rows without clusters (64
 * Gaussian columns), whose 8 clusters every row would visit, end the choice there; 30 clusters
 * apart go on to 32 (2 clusters do not end it: every row of either kind visits nearly all). */
static void test_choice_visited_all(void)
{
  g_unsetenv("KNNWB_PARTITION_ROWS");
  g_autoptr(KnnwbMatrix) noise = gaussian_rows(65601, 64, 21);
  g_autoptr(KnnwbMatrix) clusters = uniform_clusters(65601, 9, 30, 4.0, 1.0, 22);
  const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_PEARSON};
  for (size_t k = 0; k < G_N_ELEMENTS(metrics); k++) {
    KnnwbPartition p;
    double share;
    g_assert_true(knnwb_partition_choose(&p, noise, metrics[k], 10, 2, FALSE, &share));
    g_assert_cmpuint(p.tried, ==, 2);
    g_assert_cmpfloat(share, >, 1.0);
    knnwb_partition_clear(&p);
    g_assert_true(knnwb_partition_choose(&p, clusters, metrics[k], 10, 2, FALSE, &share));
    g_assert_cmpuint(p.tried, ==, 3);
    knnwb_partition_clear(&p);
  }
  g_setenv("KNNWB_PARTITION_ROWS", "301", TRUE);
}

/* The floor's load is below the sample's estimate for the clusters k-means finds (every part,
 * every metric, few clusters and many), and a count whose floor's work is no less than the best
 * of a smaller count's is followed by none whose floor is below it, on either backend's costs:
 * so the choice may stop there. */
static void test_work_floor(void)
{
  g_autoptr(KnnwbMatrix) data = uniform_clusters(12345, 9, 30, 4.0, 1.0, 13);
  const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_PEARSON,
                                 KNNWB_METRIC_ABS_PEARSON, KNNWB_METRIC_COSINE};
  const size_t counts[] = {2, 7, 41, 150};
  for (size_t k = 0; k < G_N_ELEMENTS(metrics); k++)
    for (size_t c = 0; c < G_N_ELEMENTS(counts); c++) {
      const size_t m = counts[c], s = 4801, n = 10 * data->n_rows;
      KnnwbPartitionBlock sample;
      sample_of(&sample, data, metrics[k], s, m);
      double *centroid = g_new(double, m *sample.d), *centroid_sq = g_new(double, m);
      int32_t *label = g_new(int32_t, s);
      knnwb_partition_kmeans(&sample, m, 2, centroid, centroid_sq, label);
      const KnnwbPartitionSampleView view = {.sample = &sample,
                                             .label = label,
                                             .centroid_sq = centroid_sq,
                                             .m = m,
                                             .n = n,
                                             .k = 7,
                                             .metric = metrics[k]};
      const KnnwbPartitionLoad load = knnwb_partition_sample_load(&view, 2);
      const KnnwbPartitionLoad floor = knnwb_partition_load_floor(n, m);
      g_assert_cmpfloat(floor.pairs, <=, load.pairs);
      g_assert_cmpfloat(floor.calls, <=, load.calls);
      g_assert_cmpfloat(floor.rows, <=, load.rows);
      g_free(label);
      g_free(centroid_sq);
      g_free(centroid);
      knnwb_partition_block_clear(&sample);
    }
  g_autoptr(GRand) rand = g_rand_new_with_seed(7);
  for (int trial = 0; trial < 20000; trial++) {
    const gboolean gpu = g_rand_boolean(rand);
    const size_t n = (size_t)g_rand_double_range(rand, 1e3, 1e10);
    size_t m[3];
    KnnwbPartitionLoad floor[3];
    for (int t = 0; t < 3; t++) {
      m[t] = (size_t)g_rand_int_range(rand, 2, 100000);
      floor[t] = knnwb_partition_load_floor(n, m[t]);
    }
    if (!(m[0] < m[1] && m[1] < m[2]))
      continue;
    const double best = knnwb_partition_load_work(gpu, &floor[0]) * g_rand_double_range(rand, 1, 3);
    if (knnwb_partition_load_work(gpu, &floor[1]) >= best)
      g_assert_cmpfloat(knnwb_partition_load_work(gpu, &floor[2]), >=, best);
  }
}

/* Members indexed by group on one thread and on several (ranges of 256 Ki rows, the last short;
 * empty groups): each group's rows ascending, the same start and members on any number. */
static void test_index_threads(void)
{
  const size_t n = 1000003, m = 37, groups = 11;
  g_autoptr(GRand) rand = g_rand_new_with_seed(3);
  KnnwbPartition p = {.n = n, .m = m, .groups = groups, .threads = 1};
  p.cluster_of = g_new(int32_t, n);
  p.group_of = g_new(int32_t, m);
  p.start = g_new(size_t, groups + 1);
  p.members = g_new(int64_t, n);
  for (size_t c = 0; c < m; c++) /* groups 9 and 10 stay empty */
    p.group_of[c] = (int32_t)(c % (groups - 2));
  for (size_t i = 0; i < n; i++)
    p.cluster_of[i] = g_rand_int_range(rand, 0, (gint32)m);
  knnwb_partition_index(&p);
  size_t *start = g_memdup2(p.start, (groups + 1) * sizeof(size_t));
  int64_t *members = g_memdup2(p.members, n * sizeof(int64_t));
  g_assert_cmpuint(start[0], ==, 0);
  g_assert_cmpuint(start[groups], ==, n);
  g_assert_cmpuint(start[groups - 1], ==, n);
  for (size_t g = 0; g < groups; g++)
    for (size_t t = start[g]; t < start[g + 1]; t++) {
      g_assert_cmpint(p.group_of[p.cluster_of[members[t]]], ==, (int32_t)g);
      if (t > start[g])
        g_assert_cmpint(members[t - 1], <, members[t]);
    }
  for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
    p.threads = thread_counts[t];
    memset(p.members, 0xff, n * sizeof(int64_t));
    knnwb_partition_index(&p);
    g_assert_cmpmem(p.start, (groups + 1) * sizeof(size_t), start, (groups + 1) * sizeof(size_t));
    g_assert_cmpmem(p.members, n * sizeof(int64_t), members, n * sizeof(int64_t));
  }
  g_free(start);
  g_free(members);
  g_free(p.cluster_of);
  g_free(p.group_of);
  g_free(p.start);
  g_free(p.members);
}

static int compare_doubles(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : (x > y);
}

/* The estimate's k-th chord one pair at a time and by a sort. */
static double reference_limit(const KnnwbPartitionBlock *sample, KnnwbMetric metric, size_t t,
                              const size_t *members, size_t count, double size, size_t k)
{
  const size_t d = sample->d, compared = MIN(count, KNNWB_PARTITION_ESTIMATE_MEMBERS);
  double *chord = g_new(double, KNNWB_PARTITION_ESTIMATE_MEMBERS);
  size_t found = 0;
  for (size_t q = 0; q < compared; q++) {
    const size_t o = members[(q * count) / compared];
    if (o == t)
      continue;
    double plain = 0.0, flipped = 0.0;
    for (size_t j = 0; j < d; j++) {
      const double x = sample->v[t * d + j], y = sample->v[o * d + j];
      plain += (x - y) * (x - y);
      flipped += (x + y) * (x + y);
    }
    chord[found++] = sqrt(metric == KNNWB_METRIC_ABS_PEARSON ? MIN(plain, flipped) : plain);
  }
  const size_t rank = MAX((size_t)1, (size_t)llround((double)k * (double)found / size));
  double limit = HUGE_VAL;
  if (found >= rank) {
    qsort(chord, found, sizeof(double), compare_doubles);
    limit = chord[rank - 1];
  }
  g_free(chord);
  return limit;
}

static void test_estimate_limit(void)
{
  g_autoptr(KnnwbMatrix) data = uniform_clusters(6007, 11, 5, 4.0, 1.0, 14);
  /* rows repeated: equal chords, which the selection must place as a sort does */
  memcpy(data->values + 11 * 100, data->values, 11 * 100 * sizeof(float));
  const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_PEARSON,
                                 KNNWB_METRIC_ABS_PEARSON, KNNWB_METRIC_COSINE};
  const size_t counts[] = {0, 1, 2, 3, 4, 5, 9, 2047, 2048, 2049, 3001};
  const double sizes[] = {1.0, 10.0, 400.0, 1e6};
  size_t *members = g_new(size_t, 3001);
  double *chord = g_new(double, KNNWB_PARTITION_ESTIMATE_MEMBERS);
  for (size_t k = 0; k < G_N_ELEMENTS(metrics); k++) {
    KnnwbPartitionBlock sample;
    sample_of(&sample, data, metrics[k], 3001, 2);
    for (size_t c = 0; c < G_N_ELEMENTS(counts); c++) {
      /* members: an odd stride through the sample, row 5 among them */
      for (size_t q = 0; q < counts[c]; q++)
        members[q] = (5 + q * 7) % 3001;
      for (size_t z = 0; z < G_N_ELEMENTS(sizes); z++) {
        for (size_t neighbours = 1; neighbours <= 300; neighbours *= 7) {
          const double expected =
              reference_limit(&sample, metrics[k], 5, members, counts[c], sizes[z], neighbours);
          const double got = knnwb_partition_estimate_limit(&sample, metrics[k], 5, members,
                                                            counts[c], sizes[z], neighbours, chord);
          g_assert_true(memcmp(&got, &expected, sizeof got) == 0);
        }
      }
    }
    knnwb_partition_block_clear(&sample);
  }
  g_free(chord);
  g_free(members);
}

/* The rows' dot products with the centroids (partition_dots.c): for every vector width, bit for bit
 * the sum in order of one multiply and one add a component, on odd sizes (rows past the kernels'
 * blocks of 4, centroids past their panels of 2, 4 and 8 and past a panel chunk), values of mixed
 * magnitudes; nothing written past m in a row of ld. */
static void test_dots(void)
{
  static const size_t rows_list[] = {1, 3, 4, 5, 9, 2051};
  static const size_t d_list[] = {1, 2, 7, 50, 129};
  static const size_t m_list[] = {1, 2, 3, 7, 8, 9, 17, 33, 611};
  static const char *const widths[] = {"2", "4", NULL};
  g_autoptr(GRand) rand = g_rand_new_with_seed(99);
  for (size_t a = 0; a < G_N_ELEMENTS(rows_list); a++)
    for (size_t b = 0; b < G_N_ELEMENTS(d_list); b++)
      for (size_t c = 0; c < G_N_ELEMENTS(m_list); c++) {
        const size_t rows = rows_list[a], d = d_list[b], m = m_list[c], ld = m + 3;
        if (rows * m * d > 40000000)
          continue;
        double *v = g_new(double, rows *d), *centroid = g_new(double, m *d);
        for (size_t i = 0; i < rows * d; i++)
          v[i] = g_rand_double_range(rand, -1.0, 1.0) * ldexp(1.0, g_rand_int_range(rand, -30, 30));
        for (size_t i = 0; i < m * d; i++)
          centroid[i] = g_rand_double_range(rand, -3.0, 3.0);
        double *expected = g_new(double, rows *ld), *got = g_new(double, rows *ld);
        for (size_t r = 0; r < rows; r++)
          for (size_t j = 0; j < ld; j++) {
            double s = 0.0;
            for (size_t t = 0; t < d && j < m; t++)
              s += v[r * d + t] * centroid[j * d + t];
            expected[r * ld + j] = j < m ? s : -7.0;
          }
        for (size_t w = 0; w < G_N_ELEMENTS(widths); w++) {
          if (widths[w] != NULL)
            g_setenv("KNNWB_PARTITION_VECTOR", widths[w], TRUE);
          else
            g_unsetenv("KNNWB_PARTITION_VECTOR");
          for (size_t i = 0; i < rows * ld; i++)
            got[i] = -7.0;
          knnwb_partition_dots(v, rows, d, centroid, m, got, ld);
          g_assert_true(memcmp(got, expected, rows * ld * sizeof(double)) == 0);
        }
        g_free(v);
        g_free(centroid);
        g_free(expected);
        g_free(got);
      }
}

/* The bounds pass's centroid gaps (partition_space.c): lower bounds of every two centroids'
 * distance, within a relative 1e-9 of it (long double reference), on centroids of mixed
 * magnitudes and near duplicates; none for abs-pearson. */
static void test_centroid_gaps(void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(31);
  static const size_t dims[] = {1, 3, 50, 301};
  for (size_t b = 0; b < G_N_ELEMENTS(dims); b++) {
    const size_t m = 37, d = dims[b];
    double *centroid = g_new(double, m *d);
    for (size_t i = 0; i < m * d; i++)
      centroid[i] =
          g_rand_double_range(rand, -1.0, 1.0) * ldexp(1.0, g_rand_int_range(rand, -8, 8));
    /* near duplicates: centroid 1 is centroid 0 moved by a few units of roundoff */
    for (size_t t = 0; t < d; t++)
      centroid[d + t] = nextafter(centroid[t], INFINITY);
    KnnwbPartition p = {.metric = KNNWB_METRIC_EUCLIDEAN, .m = m, .d = d, .centroid = centroid};
    double *gap = knnwb_partition_centroid_gaps(&p);
    g_assert_nonnull(gap);
    for (size_t a = 0; a < m; a++)
      for (size_t j = 0; j < m; j++) {
        long double s = 0.0L;
        for (size_t t = 0; t < d; t++) {
          const long double e = (long double)centroid[a * d + t] - centroid[j * d + t];
          s += e * e;
        }
        const long double exact = sqrtl(s);
        g_assert_cmpfloat((long double)gap[a * m + j], <=, exact);
        g_assert_cmpfloat((long double)gap[a * m + j], >=, exact * (1.0L - 1e-9L));
      }
    g_free(gap);
    p.metric = KNNWB_METRIC_ABS_PEARSON;
    g_assert_null(knnwb_partition_centroid_gaps(&p));
    g_free(centroid);
  }
}

/* A partition of data with the centroids of the given rows (in the bound space), not assigned. */
static KnnwbPartition partition_on_rows(const KnnwbMatrix *data, KnnwbMetric metric,
                                        const size_t *rows, size_t m, int threads)
{
  const size_t d = data->n_cols;
  KnnwbPartition p = {.metric = metric, .n = data->n_rows, .d = d, .m = m, .threads = threads};
  p.centroid = g_new(double, m *d);
  p.centroid_sq = g_new(double, m);
  for (size_t c = 0; c < m; c++) {
    g_assert_true(
        knnwb_partition_space_row(metric, data->values + rows[c] * d, d, p.centroid + c * d));
    p.centroid_sq[c] = 0.0;
    for (size_t t = 0; t < d; t++)
      p.centroid_sq[c] += p.centroid[c * d + t] * p.centroid[c * d + t];
  }
  return p;
}

/* Clusters too small for k are dropped and only their rows move: the cells and radii are those of
 * a full pass over the kept centroids, bit for bit, for every thread count and both metric
 * families, on n rows (more than one chunk of the passes over every row's cell: several threads'
 * counts merged, rows renumbered and found on threads). */
static void check_drop_small(size_t n)
{
  g_autoptr(KnnwbMatrix) data = uniform_clusters(n, 7, 6, 4.0, 1.0, 17);
  /* three lone rows far out (one of them twice): cells of one or two rows */
  for (size_t t = 0; t < 7; t++) {
    data->values[10 * 7 + t] = (float)(40.0 + t);
    data->values[20 * 7 + t] = (float)(-35.0 + 2.0 * t);
    data->values[30 * 7 + t] = data->values[40 * 7 + t] = (float)(t % 2 ? 50.0 : -50.0);
    /* (and in the later chunks, the same far points again: their rows move too) */
    data->values[(n / 2) * 7 + t] = data->values[10 * 7 + t];
    data->values[(n - 1) * 7 + t] = data->values[20 * 7 + t];
  }
  const size_t rows[] = {0, 10, 1, 2, 20, 3, 4, 30, 5, 6, 7, 8};
  const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_ABS_PEARSON};
  for (size_t k = 0; k < G_N_ELEMENTS(metrics); k++)
    for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
      KnnwbPartition p =
          partition_on_rows(data, metrics[k], rows, G_N_ELEMENTS(rows), thread_counts[t]);
      g_assert_true(knnwb_partition_assign_all(&p, data, 5, NULL, NULL, NULL, 0));
      g_assert_cmpuint(p.m, <, G_N_ELEMENTS(rows)); /* some were dropped */
      g_assert_cmpuint(p.m, >=, 2);
      /* the kept centroids from scratch, nothing to drop (k = 0: every kept cell has rows) */
      KnnwbPartition full = {.metric = p.metric, .n = p.n, .d = p.d, .m = p.m, .threads = 1};
      full.centroid = g_memdup2(p.centroid, p.m * p.d * sizeof(double));
      full.centroid_sq = g_memdup2(p.centroid_sq, p.m * sizeof(double));
      g_assert_true(knnwb_partition_assign_all(&full, data, 0, NULL, NULL, NULL, 0));
      g_assert_cmpuint(full.m, ==, p.m);
      g_assert_cmpmem(p.cluster_of, p.n * sizeof(int32_t), full.cluster_of,
                      full.n * sizeof(int32_t));
      g_assert_cmpmem(p.radius, p.m * sizeof(double), full.radius, full.m * sizeof(double));
      g_assert_cmpmem(p.start, (p.groups + 1) * sizeof(size_t), full.start,
                      (full.groups + 1) * sizeof(size_t));
      g_assert_cmpmem(p.members, p.n * sizeof(int64_t), full.members, full.n * sizeof(int64_t));
      size_t *count = g_new0(size_t, p.m);
      for (size_t i = 0; i < p.n; i++)
        count[p.cluster_of[i]]++;
      for (size_t c = 0; c < p.m; c++)
        g_assert_cmpuint(count[c], >, 5);
      g_free(count);
      knnwb_partition_clear(&full);
      knnwb_partition_clear(&p);
    }
}

static void test_drop_small(void)
{
  check_drop_small(4001);
  check_drop_small(600001);
}

/* The automatic choice's limit: higher only for one process on one GPU, where the plain search
 * has no second GPU to gain from; a CPU run, ranks, and several (or not yet counted) GPUs keep the
 * common limit. Both limits lie between the shares measured on either side of them. */
static void test_share_limit(void)
{
  const double common = knnwb_partition_share_limit_of(FALSE, FALSE, 0);
  const double one = knnwb_partition_share_limit_of(TRUE, FALSE, 1);
  g_assert_cmpfloat(common, ==, KNNWB_PARTITION_SAMPLE_SHARE);
  g_assert_cmpfloat(one, ==, KNNWB_PARTITION_SAMPLE_SHARE_ONE_GPU);
  g_assert_cmpfloat(one, >, common);
  g_assert_cmpfloat(knnwb_partition_share_limit_of(FALSE, FALSE, 1), ==, common);
  g_assert_cmpfloat(knnwb_partition_share_limit_of(TRUE, TRUE, 1), ==, common);
  g_assert_cmpfloat(knnwb_partition_share_limit_of(TRUE, FALSE, 2), ==, common);
  g_assert_cmpfloat(knnwb_partition_share_limit_of(TRUE, FALSE, 0), ==, common);
  /* 2,000,000 x 50 clusters 2 apart: 61.6% expected, faster partitioned on one H200 only; 1.9
   * apart: 65.1%, slower partitioned on one */
  g_assert_cmpfloat(0.616, <=, one);
  g_assert_cmpfloat(0.616, >, common);
  g_assert_cmpfloat(0.651, >, one);
}

/* Sub-searches at once on a GPU: three for groups of up to a million rows, two above, one where
 * that many do not surely fit the free memory or the user's budget; the knob sets any count. */
static void test_gpu_workers(void)
{
  const size_t gib = (size_t)1 << 30, d = 50;
  g_unsetenv("KNNWB_PARTITION_GPU_WORKERS");
  g_assert_cmpint(knnwb_partition_gpu_workers_for(200000, d, 0, 139 * gib), ==, 3);
  g_assert_cmpint(knnwb_partition_gpu_workers_for((size_t)1 << 20, d, 0, 139 * gib), ==, 3);
  g_assert_cmpint(knnwb_partition_gpu_workers_for(2002069, d, 0, 139 * gib), ==, 2);
  /* 2,002,069 rows need about 34 GB a sub-search: two do not fit 60 GiB, nor a budget of 40 */
  g_assert_cmpint(knnwb_partition_gpu_workers_for(2002069, d, 0, 60 * gib), ==, 1);
  g_assert_cmpint(knnwb_partition_gpu_workers_for(2002069, d, 40 * gib, 139 * gib), ==, 1);
  g_assert_cmpint(knnwb_partition_gpu_workers_for(200000, d, 0, 5 * gib), ==, 1);
  g_setenv("KNNWB_PARTITION_GPU_WORKERS", "3", TRUE);
  g_assert_cmpint(knnwb_partition_gpu_workers_for(2002069, d, 0, 139 * gib), ==, 3);
  g_setenv("KNNWB_PARTITION_GPU_WORKERS", "1", TRUE);
  g_assert_cmpint(knnwb_partition_gpu_workers_for(200000, d, 0, 139 * gib), ==, 1);
  g_setenv("KNNWB_PARTITION_GPU_WORKERS", "many", TRUE);
  g_assert_cmpint(knnwb_partition_gpu_workers_for(2002069, d, 0, 139 * gib), ==, 2);
  g_unsetenv("KNNWB_PARTITION_GPU_WORKERS");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  /* more threads than the machine's CPUs (or this process's) are meant: their warning is not
   * fatal here */
  g_log_set_always_fatal(G_LOG_FATAL_MASK);
  /* the choice tries one cluster count: a cluster each 301 rows (set before any thread starts) */
  g_setenv("KNNWB_PARTITION_ROWS", "301", TRUE);
  g_test_add_func("/partition-kmeans/sample-threads", test_sample_threads);
  g_test_add_func("/partition-kmeans/seeds", test_seeds);
  g_test_add_func("/partition-kmeans/threads", test_kmeans_threads);
  g_test_add_func("/partition-kmeans/choice-threads", test_choice_threads);
  g_test_add_func("/partition-kmeans/choice-visited-all", test_choice_visited_all);
  g_test_add_func("/partition-kmeans/work-floor", test_work_floor);
  g_test_add_func("/partition-kmeans/share-limit", test_share_limit);
  g_test_add_func("/partition-kmeans/index-threads", test_index_threads);
  g_test_add_func("/partition-kmeans/estimate-limit", test_estimate_limit);
  g_test_add_func("/partition-kmeans/dots", test_dots);
  g_test_add_func("/partition-kmeans/centroid-gaps", test_centroid_gaps);
  g_test_add_func("/partition-kmeans/drop-small", test_drop_small);
  g_test_add_func("/partition-kmeans/gpu-workers", test_gpu_workers);
  return g_test_run();
}
