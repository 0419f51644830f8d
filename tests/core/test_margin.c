/* The margin planner (core/engine/margin.c), host only: how many candidates a first round under a
 * half-precision screen collects, from the rows a sample needs inside its certificate's window. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "engine/engine_internal.h"

/* n rows of d values in `clusters` Gaussian clusters whose centres lie far from the origin (the
 * euclidean window, which grows with the rows' norms, then holds many rows), or with spread 0
 * plain standard normal rows. */
static KnnwbMatrix *clustered(size_t n, size_t d, int clusters, double spread, guint32 seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  double *centre = g_new(double, (size_t)clusters *d);
  for (size_t i = 0; i < (size_t)clusters * d; i++)
    centre[i] = spread * (g_rand_double(rand) * 2.0 - 1.0);
  for (size_t i = 0; i < n; i++) {
    const size_t c = (size_t)g_rand_int_range(rand, 0, clusters);
    for (size_t j = 0; j < d; j++) {
      /* Box-Muller */
      const double u = g_rand_double_range(rand, 1e-12, 1.0), v = g_rand_double(rand);
      m->values[i * d + j] = (float)(centre[c * d + j] + sqrt(-2.0 * log(u)) * cos(2 * G_PI * v));
    }
  }
  g_free(centre);
  return m;
}

static void prepare(KnnwbPrepared *p, const KnnwbMatrix *m, KnnwbMetric metric, KnnwbScreen screen)
{
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_prepared_init(p, m, metric, FALSE, "data", 2, NULL, NULL, &error));
  g_assert_no_error(error);
  knnwb_prepared_set_screen(p, p, screen);
}

/* Rows inside row i's window, counted here by brute force in double, plus one. The planner
 * estimates distances from the float rows: counts may differ by a row or two at the window's edge.
 */
static size_t needed_of(const KnnwbPrepared *p, size_t i, size_t k)
{
  g_autofree double *dist = g_new(double, p->n - 1);
  size_t m = 0;
  for (size_t j = 0; j < p->n; j++)
    if (j != i)
      dist[m++] = knnwb_prepared_distance(p, i, p, j);
  double kth = INFINITY;
  /* the k-th smallest, by k passes of "smallest above the last" (ties counted) */
  size_t below = 0;
  double last = -INFINITY;
  while (below < k) {
    double next = INFINITY;
    for (size_t j = 0; j < m; j++)
      if (dist[j] > last && dist[j] < next)
        next = dist[j];
    for (size_t j = 0; j < m; j++)
      below += dist[j] == next;
    last = kth = next;
  }
  const double limit = knnwb_refine_window_limit(p, i, p, kth);
  size_t inside = 0;
  for (size_t j = 0; j < m; j++)
    inside += dist[j] <= limit;
  return inside + 1;
}

/* Euclidean rows in tight clusters far from the origin under FP16: the window holds far more rows
 * than the fixed margin, so the planner raises the first round's candidates; the counts are the
 * brute-force ones. */
static void test_euclidean_clusters(void)
{
  const size_t n = 3001, k = 10, kc = 30, sample = 16;
  g_autoptr(KnnwbMatrix) m = clustered(n, 12, 3, 40.0, 11);
  KnnwbPrepared p;
  prepare(&p, m, KNNWB_METRIC_EUCLIDEAN, KNNWB_SCREEN_FP16);
  size_t needed[16];
  const size_t chosen =
      knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, sample, 2, NULL, needed);
  size_t over = 0;
  for (size_t s = 0; s < sample; s++) {
    const size_t i = (2 * s + 1) * n / (2 * sample);
    const size_t exact = needed_of(&p, i, k);
    g_assert_cmpuint(needed[s], <=, exact + 2);
    if (needed[s] <= 4 * kc + 1) /* else the count saturated, past any kc the planner takes */
      g_assert_cmpuint(needed[s] + 2, >=, exact);
    g_assert_cmpuint(needed[s], >, k);
    over += needed[s] > kc;
  }
  if (g_test_verbose())
    g_printerr("euclidean clusters: %zu of %zu sample rows need more than %zu; chosen %zu\n", over,
               sample, kc, chosen);
  g_assert_cmpuint(over * 8, >, sample);
  g_assert_cmpuint(chosen, >, kc);
  g_assert_cmpuint(chosen, <=, 4 * kc);
  g_assert_cmpuint(chosen % 8, ==, 0);
  /* the caps: 4 kc, the rows available and the memory bound */
  g_assert_cmpuint(knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, 40, sample, 2, NULL, NULL),
                   ==, MIN(chosen, (size_t)40));
  g_assert_cmpuint(
      knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, 33, SIZE_MAX, sample, 2, NULL, NULL), ==,
      MIN(chosen, 33));
  g_assert_cmpuint(knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, 10, sample, 2, NULL, NULL),
                   ==, kc);
  /* a raised cancel flag: kc (the caller stops at its next step), no counts; a lowered one: as
   * without a flag, with 1 and 3 threads */
  for (int threads = 1; threads <= 3; threads += 2) {
    gint cancel = 1;
    size_t counts[16];
    memset(counts, 0xff, sizeof counts);
    g_assert_cmpuint(knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, sample,
                                         threads, &cancel, counts),
                     ==, kc);
    for (size_t s = 0; s < sample; s++)
      g_assert_cmpuint(counts[s], ==, 0);
    cancel = 0;
    g_assert_cmpuint(knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, sample,
                                         threads, &cancel, counts),
                     ==, chosen);
    g_assert_cmpmem(counts, sizeof counts, needed, sizeof needed);
  }
  /* the same rows under FP32: a window 2^13 times narrower, the fixed margin kept */
  knnwb_prepared_set_screen(&p, &p, KNNWB_SCREEN_FP32);
  g_assert_cmpuint(
      knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, sample, 2, NULL, NULL), ==,
      kc);
  knnwb_prepared_clear(&p);
}

/* When FP16's window is too wide to screen with (knnwb_margin_too_wide): rows in clusters far from
 * the origin hold hundreds of rows inside it, plain normal rows a few; never under FP32, for fewer
 * rows than the planner takes, or once cancel is raised. */
static void test_too_wide(void)
{
  const size_t n = KNNWB_MARGIN_MIN_ROWS + 1, k = 10;
  const size_t kc = knnwb_screen_candidates(KNNWB_SCREEN_FP16, k);
  for (int far = 1; far >= 0; far--) {
    g_autoptr(KnnwbMatrix) m = clustered(n, 12, 3, far ? 400.0 : 0.0, 21);
    KnnwbPrepared p;
    prepare(&p, m, KNNWB_METRIC_EUCLIDEAN, KNNWB_SCREEN_FP16);
    g_assert_true(knnwb_margin_too_wide(&p, &p, TRUE, n, k, kc, n - 1, 2, NULL) == far);
    gint cancel = 1;
    g_assert_false(knnwb_margin_too_wide(&p, &p, TRUE, n, k, kc, n - 1, 2, &cancel));
    g_assert_false(
        knnwb_margin_too_wide(&p, &p, TRUE, KNNWB_MARGIN_MIN_ROWS - 1, k, kc, n - 1, 2, NULL));
    knnwb_prepared_set_screen(&p, &p, KNNWB_SCREEN_FP32);
    g_assert_false(knnwb_margin_too_wide(&p, &p, TRUE, n, k, kc, n - 1, 2, NULL));
    knnwb_prepared_clear(&p);
  }
}

/* Pearson rows of plain noise under FP16: few rows inside the window, the fixed margin kept. */
static void test_pearson_plain(void)
{
  const size_t n = 3001, k = 10, kc = 30, sample = 16;
  g_autoptr(KnnwbMatrix) m = clustered(n, 24, 1, 0.0, 12);
  KnnwbPrepared p;
  prepare(&p, m, KNNWB_METRIC_PEARSON, KNNWB_SCREEN_FP16);
  size_t needed[16];
  g_assert_cmpuint(
      knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, sample, 2, NULL, needed), ==,
      kc);
  for (size_t s = 0; s < sample; s++) {
    const size_t exact = needed_of(&p, (2 * s + 1) * n / (2 * sample), k);
    g_assert_cmpuint(needed[s] + 2, >=, exact);
    g_assert_cmpuint(needed[s], <=, exact + 2);
  }
  knnwb_prepared_clear(&p);
}

/* The planner's rule from counts (knnwb_margin_choose's contract): kc unless more than an eighth
 * need more, else what seven eighths need, rounded up to 8, at most most. */
static size_t choice_of(const size_t *needed, size_t n_sample, size_t kc, size_t most)
{
  g_autofree size_t *sorted = g_memdup2(needed, n_sample * sizeof(size_t));
  for (size_t a = 1; a < n_sample; a++) /* insertion sort: a few rows */
    for (size_t b = a; b > 0 && sorted[b - 1] > sorted[b]; b--) {
      const size_t t = sorted[b];
      sorted[b] = sorted[b - 1];
      sorted[b - 1] = t;
    }
  size_t over = 0;
  for (size_t s = 0; s < n_sample; s++)
    over += sorted[s] > kc;
  if (over * 8 <= n_sample)
    return kc;
  return MAX(kc, MIN((sorted[(7 * n_sample + 7) / 8 - 1] + 7) / 8 * 8, most));
}

static int compare_double(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The k-th smallest of dist[0, m) (ties counted) and how many are at most limit_of(k-th), capped
 * at keep (the planner keeps that many per row), plus one. */
static size_t count_window(const KnnwbPrepared *p, size_t i, double *dist, size_t m, size_t k,
                           size_t keep)
{
  g_assert_cmpuint(m, >=, k);
  qsort(dist, m, sizeof(double), compare_double);
  const double limit = knnwb_refine_window_limit(p, i, p, dist[k - 1]);
  size_t inside = 0;
  while (inside < m && dist[inside] <= limit)
    inside++;
  return MIN(inside, keep) + 1;
}

/* Integer rows in two mirrored clusters (x and -x, and a zero row when n is odd): the column means
 * are exactly 0, so the scored rows are integers times a power of two and every float dot product
 * of them is exact. The planner's estimated distances are then the exact ones, and its counts must
 * be the double brute force's, row for row. */
static KnnwbMatrix *mirrored(size_t n, size_t d, guint32 seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  memset(m->values, 0, n * d * sizeof(float));
  for (size_t i = 0; i + 1 < n; i += 2)
    for (size_t j = 0; j < d; j++) {
      const float x = (float)(12 + g_rand_int_range(rand, -3, 4));
      m->values[i * d + j] = x;
      m->values[(i + 1) * d + j] = -x;
    }
  return m;
}

/* The counts of n_sample rows spread over p (as the planner spreads them), by brute force in
 * double from the exact rows. */
static void exact_counts(const KnnwbPrepared *p, size_t n_sample, size_t k, size_t keep,
                         size_t *needed)
{
  g_autofree double *dist = g_new(double, p->n);
  for (size_t s = 0; s < n_sample; s++) {
    const size_t i = (2 * s + 1) * p->n / (2 * n_sample);
    size_t m = 0;
    for (size_t j = 0; j < p->n; j++)
      if (j != i)
        dist[m++] = knnwb_prepared_distance(p, i, p, j);
    needed[s] = count_window(p, i, dist, m, k, keep);
  }
}

/* Sizes at every edge of the blocking: rows fewer than a chunk of 64, one past whole chunks, past a
 * thread's block of 4,096 (three blocks: three threads); dimensions below, at and past groups of
 * eight; sample counts that fill no whole vector. Exact counts, the same on 1 and 3 threads and
 * on every kernel (vectors of 4 and 8 where the CPU has wider ones). */
static void test_edges(void)
{
  /* rows, dimensions, sample rows, candidates (a 4 kc cap that does not saturate every count) */
  const size_t sizes[][4] = {{37, 1, 13, 8},  {37, 3, 32, 8},  {65, 17, 32, 8},    {129, 8, 32, 8},
                             {71, 129, 7, 8}, {200, 2, 32, 8}, {8999, 17, 32, 200}};
  const size_t k = 3;
  for (size_t c = 0; c < G_N_ELEMENTS(sizes); c++) {
    const size_t n = sizes[c][0], d = sizes[c][1], n_sample = sizes[c][2], kc = sizes[c][3];
    g_autoptr(KnnwbMatrix) m = mirrored(n, d, (guint32)(20 + c));
    KnnwbPrepared p;
    prepare(&p, m, KNNWB_METRIC_EUCLIDEAN, KNNWB_SCREEN_FP16);
    const size_t most = MIN(4 * kc, n - 1), keep = MAX(k, most + 1);
    size_t exact[32], one[32], three[32], narrow[2][32];
    exact_counts(&p, n_sample, k, keep, exact);
    const size_t chosen =
        knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, n_sample, 1, NULL, one);
    g_assert_cmpuint(
        knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, n_sample, 3, NULL, three),
        ==, chosen);
    for (int w = 0; w < 2; w++) {
      g_setenv("KNNWB_MARGIN_VECTOR", w ? "8" : "4", TRUE);
      g_assert_cmpuint(knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, n_sample, 3,
                                           NULL, narrow[w]),
                       ==, chosen);
      g_unsetenv("KNNWB_MARGIN_VECTOR");
    }
    size_t spread = 0;
    for (size_t s = 0; s < n_sample; s++) {
      if (g_test_verbose())
        g_printerr("%s%zu", s ? " " : "", exact[s]);
      g_assert_cmpuint(one[s], ==, exact[s]);
      g_assert_cmpuint(three[s], ==, exact[s]);
      g_assert_cmpuint(narrow[0][s], ==, exact[s]);
      g_assert_cmpuint(narrow[1][s], ==, exact[s]);
      spread += exact[s] != exact[0];
    }
    if (g_test_verbose())
      g_printerr(": %zu x %zu, chosen %zu\n", n, d, chosen);
    g_assert_cmpuint(spread, >, 0); /* counts that tell rows apart */
    g_assert_cmpuint(chosen, ==, choice_of(exact, n_sample, kc, most));
    knnwb_prepared_clear(&p);
  }
}

/* The planner's dot product one pair at a time, as it was before it scored blocks: eight float
 * lanes over whole groups of eight, the rest in order, then the lanes in order. */
static float pair_dot(const float *a, const float *b, size_t d)
{
  float lane[8] = {0};
  size_t t = 0;
  for (; t + 8 <= d; t += 8)
    for (int u = 0; u < 8; u++)
      lane[u] += a[t + u] * b[t + u];
  float sum = 0.0f;
  for (; t < d; t++)
    sum += a[t] * b[t];
  for (int u = 0; u < 8; u++)
    sum += lane[u];
  return sum;
}

/* Rows of noise, clusters and correlation: the blocked planner's counts are those of the planner
 * that scored one pair at a time from the float rows, bit for bit, at every dimension. */
static void test_pair_at_a_time(void)
{
  const size_t dims[] = {1, 3, 8, 16, 17, 50, 129};
  const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_ABS_PEARSON,
                                 KNNWB_METRIC_EUCLIDEAN};
  const size_t n = 301, k = 5, kc = 12, n_sample = 30;
  for (size_t c = 0; c < G_N_ELEMENTS(dims) * G_N_ELEMENTS(metrics); c++) {
    const size_t d = dims[c % G_N_ELEMENTS(dims)];
    const KnnwbMetric metric = metrics[c / G_N_ELEMENTS(dims)];
    if (d == 1 && metric != KNNWB_METRIC_EUCLIDEAN)
      continue; /* a correlation of one value is undefined */
    g_autoptr(KnnwbMatrix) m =
        clustered(n, d, 4, metric == KNNWB_METRIC_EUCLIDEAN ? 6.0 : 1.0, (guint32)(40 + c));
    KnnwbPrepared p;
    prepare(&p, m, metric, KNNWB_SCREEN_FP16);
    const size_t most = MIN(4 * kc, n - 1), keep = MAX(k, most + 1);
    size_t reference[32], needed[32];
    g_autofree double *dist = g_new(double, n);
    for (size_t s = 0; s < n_sample; s++) {
      const size_t i = (2 * s + 1) * n / (2 * n_sample);
      size_t count = 0;
      for (size_t j = 0; j < n; j++) {
        if (j == i)
          continue;
        const double dot = pair_dot(p.scored + i * d, p.scored + j * d, d);
        dist[count++] =
            metric == KNNWB_METRIC_EUCLIDEAN
                ? sqrt(MAX(0.0, ((double)p.sqnorms[i] + p.sqnorms[j] - 2.0 * dot) * p.score_scale))
            : metric == KNNWB_METRIC_ABS_PEARSON ? 1.0 - fabs(dot)
                                                 : 1.0 - dot;
      }
      reference[s] = count_window(&p, i, dist, count, k, keep);
    }
    const size_t chosen =
        knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, n_sample, 2, NULL, needed);
    for (size_t s = 0; s < n_sample; s++)
      g_assert_cmpuint(needed[s], ==, reference[s]);
    g_assert_cmpuint(chosen, ==, choice_of(reference, n_sample, kc, most));
    knnwb_prepared_clear(&p);
  }
}

/* The dots themselves, bit for bit the one-pair-at-a-time sums, on the CPU's kernel and on vectors
 * of 4 and 8 (where the CPU has wider ones), at dimensions below, at and past groups of eight, for
 * sample counts that fill no whole vector and reference rows from an odd offset. */
static void test_dots_bits(void)
{
  const size_t dims[] = {1, 2, 7, 8, 9, 15, 16, 17, 24, 50, 129, 300};
  const size_t samples[] = {1, 3, 4, 8, 13, 32};
  for (size_t c = 0; c < G_N_ELEMENTS(dims); c++) {
    const size_t d = dims[c], n = 61;
    g_autoptr(KnnwbMatrix) m = clustered(n, d, 3, 5.0, (guint32)(60 + c));
    KnnwbPrepared p;
    prepare(&p, m, KNNWB_METRIC_EUCLIDEAN, KNNWB_SCREEN_FP16);
    size_t rows[32];
    float dots[32 * 61];
    for (size_t e = 0; e < G_N_ELEMENTS(samples); e++)
      for (int w = 0; w < 3; w++) {
        const char *cap[] = {NULL, "8", "4"};
        const size_t n_sample = samples[e], first = 5, count = n - first;
        for (size_t s = 0; s < n_sample; s++)
          rows[s] = (7 * s + 3) % n;
        if (cap[w] != NULL)
          g_setenv("KNNWB_MARGIN_VECTOR", cap[w], TRUE);
        knnwb_margin_score(&p, rows, n_sample, &p, first, count, dots);
        g_unsetenv("KNNWB_MARGIN_VECTOR");
        for (size_t r = 0; r < count; r++)
          for (size_t s = 0; s < n_sample; s++) {
            const float want = pair_dot(p.scored + rows[s] * d, p.scored + (first + r) * d, d);
            if (memcmp(&dots[r * n_sample + s], &want, sizeof want) != 0)
              g_error(
                  "d %zu, %zu sample rows, vectors of at most %s: dot of sample %zu and row %zu "
                  "is %.9g, not %.9g",
                  d, n_sample, cap[w] ? cap[w] : "any", s, first + r, dots[r * n_sample + s], want);
          }
      }
    knnwb_prepared_clear(&p);
  }
}

/* A partitioned run's later sub-search takes the memo's candidates, but never fewer than its own
 * screen's margin (an earlier sub-search of few rows may have stored fewer) nor more than its rows
 * available. The memo holds a value, so the planner is not consulted and the rows are not read. */
static void test_memo_floor(void)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 10;
  KnnwbPrepared rows = {.screen = KNNWB_SCREEN_FP16};
  const size_t n = 65536, screen_kc = knnwb_screen_candidates(KNNWB_SCREEN_FP16, options.k);
  const struct {
    gint memo;
    size_t available, want;
  } cases[] = {{12, 100000, screen_kc},
               {(gint)screen_kc + 50, 100000, screen_kc + 50},
               {(gint)screen_kc + 50, 40, 40},
               {12, 25, 25},
               {(gint)screen_kc, 100000, screen_kc}};
  for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
    KnnwbMarginMemo memo = {.kc = cases[c].memo};
    knnwb_knn_margin_memo_set(&memo);
    const size_t kc = knnwb_knn_rounds_candidates(&options, &rows, &rows, TRUE, cases[c].available,
                                                  1, NULL, 0, n);
    knnwb_knn_margin_memo_set(NULL);
    if (kc != cases[c].want)
      g_error("memo %d, %zu available: %zu candidates per row, not %zu", cases[c].memo,
              cases[c].available, kc, cases[c].want);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/knn/margin/euclidean-clusters", test_euclidean_clusters);
  g_test_add_func("/knn/margin/pearson-plain", test_pearson_plain);
  g_test_add_func("/knn/margin/edges", test_edges);
  g_test_add_func("/knn/margin/pair-at-a-time", test_pair_at_a_time);
  g_test_add_func("/knn/margin/dots-bits", test_dots_bits);
  g_test_add_func("/knn/margin/memo-floor", test_memo_floor);
  g_test_add_func("/knn/margin/too-wide", test_too_wide);
  return g_test_run();
}
