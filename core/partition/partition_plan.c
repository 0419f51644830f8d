/*
 * When the partitioned search runs, and with how many clusters: k-means on a sample for a few
 * cluster counts, each judged from the sample alone (no pass over all rows) by the work it would
 * leave: the pairs scored within clusters and between each row and the clusters its bound cannot
 * rule out, plus a cost per sub-search and per row searched, in pairs of the plain search (a CPU
 * call costs little). Only the speed depends on it.
 *
 * The GPU's costs were fitted to the whole partitioned search on one H200 (2,000,000 x 50 rows
 * of 50 Gaussian clusters whose centres lie 2, 2.5 and 3 standard deviations apart, 61 cells,
 * against the plain search's 2.35 ps a pair): about 9 ms a sub-search with three at once on a GPU
 * (the choice and the bounds pass included) and 0.1 us a row searched; the estimates then came
 * within 10% of the measured share (62%, 40%, 33% against 68%, 42%, 30%). Before the visits'
 * rows started from their k-th distances (knnwb_knn_query_within) a visiting row cost 0.5 us
 * and a call 20 ms, and the choice kept the plain search where the partitioned one took half its
 * time.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/parallel.h>
#include "partition/partition_internal.h"

/* Sample rows whose k-th distance is estimated, at most. */
#define KNNWB_PARTITION_ESTIMATE_ROWS ((size_t)256)

/* Costs in pairs of the plain search: per sub-search, per row searched. */
typedef struct {
  double call, row;
} KnnwbPartitionCosts;

/* The CPU's call cost: a sub-search of about 1,000 rows of 50 columns took 3-10 ms on two cores
 * (the engine's set-up, its screen and selection, the exact distances), where the plain search
 * takes 2.6 ns a pair. With it the whole command on 50,000 to 200,000 rows of 50 Gaussian
 * clusters took 0.75-1.64 times the share of the plain search's time the choice expected
 * (docs/performance-cpu.md). At 2e7 pairs a call, as before, the choice judged cluster counts that
 * took 0.2-0.6 of the plain search's time at 1.6-3.3 times its work. */
static const KnnwbPartitionCosts knnwb_partition_gpu_costs = {4e9, 4e4};
static const KnnwbPartitionCosts knnwb_partition_cpu_costs = {1e6, 1e3};

/* The costs for the GPU or the CPU: KNNWB_PARTITION_GPU_COSTS=CALL:ROW and
 * KNNWB_PARTITION_CPU_COSTS=CALL:ROW replace them, to fit them again on other machines (only the
 * speed depends on them). Read once each. */
static KnnwbPartitionCosts knnwb_partition_costs_from(const char *name, KnnwbPartitionCosts costs)
{
  const char *v = g_getenv(name);
  char *end = NULL;
  const double call = v != NULL ? g_ascii_strtod(v, &end) : -1.0;
  const double row = end != NULL && *end == ':' ? g_ascii_strtod(end + 1, &end) : -1.0;
  if (call >= 0.0 && row >= 0.0 && end != NULL && *end == '\0')
    costs = (KnnwbPartitionCosts){call, row};
  return costs;
}

static KnnwbPartitionCosts knnwb_partition_costs_get(gboolean gpu)
{
  static KnnwbPartitionCosts costs[2];
  static gsize once = 0;
  if (g_once_init_enter(&once)) {
    costs[0] = knnwb_partition_costs_from("KNNWB_PARTITION_CPU_COSTS", knnwb_partition_cpu_costs);
    costs[1] = knnwb_partition_costs_from("KNNWB_PARTITION_GPU_COSTS", knnwb_partition_gpu_costs);
    g_once_init_leave(&once, 1);
  }
  return costs[gpu ? 1 : 0];
}

double knnwb_partition_work(gboolean gpu, double pairs, double calls, double rows)
{
  const KnnwbPartitionCosts costs = knnwb_partition_costs_get(gpu);
  return pairs + costs.call * calls + costs.row * rows;
}

double knnwb_partition_plain_work(gboolean gpu, size_t n)
{
  return knnwb_partition_work(gpu, 0.5 * (double)n * (double)n, 1.0, (double)n);
}

double knnwb_partition_load_work(gboolean gpu, const KnnwbPartitionLoad *load)
{
  return knnwb_partition_work(gpu, load->pairs, load->calls, load->rows);
}

KnnwbPartitionLoad knnwb_partition_load_floor(size_t n, size_t m)
{
  /* m clusters of n rows hold at least n^2 / 2m pairs (equal sizes; the sample's sizes, scaled,
   * add up to n), each is searched twice, and each row at least once; less a part in 10^9 for the
   * estimate's rounding */
  const double less = 1.0 - 1e-9;
  return (KnnwbPartitionLoad){.pairs = less * 0.5 * (double)n * (double)n / (double)m,
                              .calls = 2.0 * (double)m,
                              .rows = less * (double)n};
}

KnnwbPartitionMode knnwb_partition_mode(void)
{
  const char *v = g_getenv("KNNWB_PARTITION");
  if (v != NULL && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0))
    return KNNWB_PARTITION_OFF;
  if (v != NULL && (strcmp(v, "on") == 0 || strcmp(v, "1") == 0))
    return KNNWB_PARTITION_ON;
  return KNNWB_PARTITION_AUTO;
}

void knnwb_partition_sample_index(const int32_t *label, size_t s, size_t m, size_t *start,
                                  size_t *members)
{
  memset(start, 0, (m + 1) * sizeof(size_t));
  for (size_t t = 0; t < s; t++)
    start[label[t] + 1]++;
  for (size_t c = 0; c < m; c++)
    start[c + 1] += start[c];
  size_t *next = g_new(size_t, m);
  memcpy(next, start, m * sizeof(size_t));
  for (size_t t = 0; t < s; t++)
    members[next[label[t]]++] = t;
  g_free(next);
}

/* The chords between sample row x and rows y[0 .. 4) (knnwb_partition_sq_distances4);
 * abs-pearson: the nearer of y and -y. */
static void knnwb_partition_estimate_chords(const double *x, const double *const y[4], size_t d,
                                            KnnwbMetric metric, double chord[4])
{
  double plain[4], flipped[4];
  knnwb_partition_sq_distances4(x, y, d, 1.0, plain);
  if (metric == KNNWB_METRIC_ABS_PEARSON) {
    knnwb_partition_sq_distances4(x, y, d, -1.0, flipped);
    for (int q = 0; q < 4; q++)
      plain[q] = MIN(plain[q], flipped[q]);
  }
  for (int q = 0; q < 4; q++)
    chord[q] = sqrt(plain[q]);
}

/* The rank-th smallest (from 1) of values[0 .. count) (not NaN), which it reorders: Hoare's
 * selection, in O(count) on average; the value is the one a sort would put there. */
static double knnwb_partition_select(double *values, size_t count, size_t rank)
{
  const ptrdiff_t want = (ptrdiff_t)rank - 1;
  ptrdiff_t low = 0, high = (ptrdiff_t)count - 1;
  while (low < high) {
    const double pivot = values[low + (high - low) / 2];
    ptrdiff_t i = low, j = high;
    do {
      while (values[i] < pivot)
        i++;
      while (pivot < values[j])
        j--;
      if (i <= j) {
        const double swap = values[i];
        values[i++] = values[j];
        values[j--] = swap;
      }
    } while (i <= j);
    if (j < want)
      low = i;
    if (want < i)
      high = j;
  }
  return values[want];
}

double knnwb_partition_estimate_limit(const KnnwbPartitionBlock *sample, KnnwbMetric metric,
                                      size_t t, const size_t *members, size_t count, double size,
                                      size_t k, double *chord)
{
  const size_t d = sample->d, compared = MIN(count, KNNWB_PARTITION_ESTIMATE_MEMBERS);
  const double *x = sample->v + t * d;
  size_t found = 0, waiting = 0;
  const double *y[4];
  for (size_t q = 0; q < compared; q++) {
    const size_t o = members[(q * count) / compared];
    if (o == t)
      continue;
    y[waiting++] = sample->v + o * d;
    if (waiting == 4) {
      knnwb_partition_estimate_chords(x, y, d, metric, chord + found);
      found += 4;
      waiting = 0;
    }
  }
  if (waiting > 0) {
    double last[4];
    for (size_t q = waiting; q < 4; q++)
      y[q] = y[0];
    knnwb_partition_estimate_chords(x, y, d, metric, last);
    memcpy(chord + found, last, waiting * sizeof(double));
    found += waiting;
  }
  /* The k-th of the cluster's size rows is about the (k found / size)-th of these. */
  const size_t rank = MAX((size_t)1, (size_t)llround((double)k * (double)found / size));
  if (found < rank)
    return HUGE_VAL;
  return knnwb_partition_select(chord, found, rank);
}

/* Per evaluated sample row: the rows of other clusters it would visit, and how many clusters. */
typedef struct {
  const KnnwbPartitionSampleView *view;
  const double *size, *radius;
  const size_t *start; /* m + 1: each cluster's sample rows in members */
  const size_t *members;
  size_t e;
  double *visit_pairs, *visit_clusters; /* per evaluated row */
} KnnwbPartitionEstimate;

static void knnwb_partition_estimate_rows(size_t first, size_t last, void *data)
{
  const KnnwbPartitionEstimate *est = data;
  const KnnwbPartitionSampleView *view = est->view;
  const KnnwbPartitionBlock *sample = view->sample;
  const size_t s = sample->rows;
  double *chord = g_new(double, KNNWB_PARTITION_ESTIMATE_MEMBERS);
  for (size_t u = first; u < last; u++) {
    const size_t t = (u * s) / est->e, c = (size_t)view->label[t];
    const double limit = knnwb_partition_estimate_limit(
        sample, view->metric, t, est->members + est->start[c], est->start[c + 1] - est->start[c],
        est->size[c], view->k, chord);
    double pairs = 0.0, clusters = 0.0;
    for (size_t j = 0; j < view->m; j++) {
      double lower, upper;
      knnwb_partition_block_bounds(sample, view->metric, view->centroid_sq, t, j, &lower, &upper);
      if (j != c && est->size[j] > 0 && lower - est->radius[j] <= limit) {
        pairs += est->size[j];
        clusters += 1.0;
      }
    }
    est->visit_pairs[u] = pairs;
    est->visit_clusters[u] = clusters;
  }
  g_free(chord);
}

KnnwbPartitionLoad knnwb_partition_sample_load(const KnnwbPartitionSampleView *view, int threads)
{
  const KnnwbPartitionBlock *sample = view->sample;
  const size_t s = sample->rows, m = view->m;
  const double scale = (double)view->n / (double)s;
  double *size = g_new0(double, m), *radius = g_new0(double, m);
  for (size_t t = 0; t < s; t++) {
    double lower, upper;
    const size_t c = (size_t)view->label[t];
    knnwb_partition_block_bounds(sample, view->metric, view->centroid_sq, t, c, &lower, &upper);
    size[c] += scale;
    radius[c] = MAX(radius[c], upper);
  }
  const size_t e = MIN(s, KNNWB_PARTITION_ESTIMATE_ROWS);
  size_t *start = g_new(size_t, m + 1), *members = g_new(size_t, s);
  knnwb_partition_sample_index(view->label, s, m, start, members);
  KnnwbPartitionEstimate est = {.view = view,
                                .size = size,
                                .radius = radius,
                                .start = start,
                                .members = members,
                                .e = e,
                                .visit_pairs = g_new0(double, e),
                                .visit_clusters = g_new0(double, e)};
  knnwb_parallel_for(threads, e, 8, knnwb_partition_estimate_rows, &est);
  double own = 0.0, visit_pairs = 0.0, visit_rows = 0.0;
  for (size_t c = 0; c < m; c++)
    own += 0.5 * size[c] * size[c];
  for (size_t u = 0; u < e; u++) {
    visit_pairs += est.visit_pairs[u];
    visit_rows += est.visit_clusters[u];
  }
  const double per_row = (double)view->n / (double)e;
  g_free(est.visit_pairs);
  g_free(est.visit_clusters);
  g_free(start);
  g_free(members);
  g_free(size);
  g_free(radius);
  return (KnnwbPartitionLoad){.pairs = own + visit_pairs * per_row,
                              .calls = 2.0 * (double)m,
                              .rows = (double)view->n + visit_rows * per_row};
}

/* A count of at least VISITED_MIN_CELLS clusters whose rows would visit at least VISITED_ALL of
 * the other clusters ends the choice (knnwb_partition_choose says why). */
#define KNNWB_PARTITION_VISITED_ALL 0.95
#define KNNWB_PARTITION_VISITED_MIN_CELLS 8

/* The share of all possible visits (every row to every other of m clusters) that load's rows make:
 * 1 where no bound keeps a row from any cluster. */
static double knnwb_partition_load_visited(const KnnwbPartitionLoad *load, size_t n, size_t m)
{
  const double possible = (double)n * (double)(m - 1);
  return possible > 0.0 ? (load->rows - (double)n) / possible : 0.0;
}

/* The cluster counts to try for n rows and k neighbours, in increasing order: KNNWB_PARTITION_ROWS
 * rows a cluster when set, else clusters of 128 Ki, 32 Ki, 8 Ki and 2 Ki rows, and on the CPU
 * (gpu FALSE) of 512 rows too, whose sub-searches cost little there; never fewer than 4 (k + 1)
 * rows a cluster, nor more clusters than a sample of `sample` rows can place (32 rows each).
 * Returns how many (0: too few rows to split). */
#define KNNWB_PARTITION_COUNTS 5
static size_t knnwb_partition_counts(size_t n, size_t k, size_t sample, gboolean gpu,
                                     size_t counts[KNNWB_PARTITION_COUNTS])
{
  size_t targets[KNNWB_PARTITION_COUNTS] = {131072, 32768, 8192, 2048, 512},
         n_targets = gpu ? KNNWB_PARTITION_COUNTS - 1 : KNNWB_PARTITION_COUNTS;
  const char *v = g_getenv("KNNWB_PARTITION_ROWS");
  if (v != NULL && strtoull(v, NULL, 10) > 0) {
    targets[0] = (size_t)strtoull(v, NULL, 10);
    n_targets = 1;
  }
  size_t found = 0;
  for (size_t t = 0; t < n_targets; t++) {
    const size_t m = MIN(n / MAX(targets[t], 4 * (k + 1)), sample / 32);
    if (m >= 2 && (found == 0 || m != counts[found - 1]))
      counts[found++] = m;
  }
  return found;
}

gboolean knnwb_partition_choose(KnnwbPartition *p, const KnnwbMatrix *data, KnnwbMetric metric,
                                size_t k, int threads, gboolean gpu, double *share)
{
  return knnwb_partition_choose_for(p, data, data->n_rows, metric, k, threads, gpu, share);
}

gboolean knnwb_partition_choose_for(KnnwbPartition *p, const KnnwbMatrix *data, size_t n,
                                    KnnwbMetric metric, size_t k, int threads, gboolean gpu,
                                    double *share)
{
  size_t counts[KNNWB_PARTITION_COUNTS];
  const size_t rows = knnwb_partition_sample_rows(n, data->n_cols);
  const size_t n_counts = knnwb_partition_counts(n, k, rows, gpu, counts);
  memset(p, 0, sizeof *p);
  KnnwbPartitionBlock sample;
  if (n_counts == 0 ||
      !knnwb_partition_sample_init(&sample, data, metric, rows, counts[0], threads))
    return FALSE;
  const double plain = knnwb_partition_plain_work(gpu, n);
  int32_t *label = g_new(int32_t, sample.rows);
  double best = HUGE_VAL;
  int no_better = 0;
  for (size_t t = 0; t < n_counts; t++) {
    const size_t m = counts[t], d = data->n_cols;
    /* A count whose floor is no better than the best so far cannot win, nor can a larger one:
     * the floor is convex in m and the best lies above the floor of a smaller count (on a GPU,
     * whose sub-searches cost about 10-20 ms each, 305 clusters of 10 M rows took a k-means of
     * 0.13-0.15 s to lose to 76). The choice is the same as with every count tried. */
    const KnnwbPartitionLoad floor = knnwb_partition_load_floor(n, m);
    if (knnwb_partition_load_work(gpu, &floor) >= best) {
      g_debug("knnwb: partition: %zu clusters cannot leave less work than %zu: not tried", m, p->m);
      break;
    }
    if (!knnwb_partition_block_reserve_dots(&sample, m))
      break; /* the counts tried so far decide */
    double *centroid = g_new(double, m *d), *centroid_sq = g_new(double, m);
    const gint64 start = g_get_monotonic_time();
    const int rounds = knnwb_partition_kmeans(&sample, m, threads, centroid, centroid_sq, label);
    p->tried++;
    const gint64 clustered = g_get_monotonic_time();
    const KnnwbPartitionSampleView view = {.sample = &sample,
                                           .label = label,
                                           .centroid_sq = centroid_sq,
                                           .m = m,
                                           .n = n,
                                           .k = k,
                                           .metric = metric};
    const KnnwbPartitionLoad load = knnwb_partition_sample_load(&view, threads);
    const double work = knnwb_partition_load_work(gpu, &load);
    g_debug("knnwb: partition: %zu clusters would leave %.1f%% of the work (%.3g pairs, %.3g "
            "rows searched; k-means %.3f s, %d Lloyd rounds, estimate %.3f s)",
            m, 100.0 * work / plain, load.pairs, load.rows, (double)(clustered - start) / 1e6,
            rounds, (double)(g_get_monotonic_time() - clustered) / 1e6);
    /* More clusters only help clustered data: once a count is worse than the best so far by
     * half, or two in a row are no better (one may be: 50 clusters cut in 2 and 9 left 149% and
     * 162% of the work, in 36 37.5%), the larger ones are not tried (on 1,533,876 metafeatures
     * of a real microarray, 128 columns: 190%, 200%, 213%, 248% for 11, 46, 187, 748 clusters,
     * 1.4 s to try all four on 2 cores); nor after a first count that leaves three times the
     * plain search's work (data without clusters: 3.4-4.2 measured, against 2.5-2.8 for 50
     * clusters cut in 15); nor after a count of at least 8 clusters whose rows would nearly all
     * visit every other cluster: no cell's bounds exclude anything, and finer cells did not
     * either (the real-like metafeatures: 99.6% of all visits at 11 clusters, 98.6% at 46;
     * bench_knn_gpu's d = 295 modules: all at both; 50 clusters cut in 15: 45%; that second count
     * cost 0.05-0.06 s of a 2-3 s search). Fewer cells are too wide to tell: 30 clusters apart cut
     * in 2 visit 93%. */
    no_better = work >= best ? no_better + 1 : 0;
    const gboolean visited_all =
        m >= KNNWB_PARTITION_VISITED_MIN_CELLS &&
        knnwb_partition_load_visited(&load, n, m) >= KNNWB_PARTITION_VISITED_ALL;
    const gboolean worse =
        work > 1.5 * best || no_better >= 2 || (t == 0 && work > 3.0 * plain) || visited_all;
    if (work < best) {
      best = work;
      g_free(p->centroid);
      g_free(p->centroid_sq);
      p->centroid = g_steal_pointer(&centroid);
      p->centroid_sq = g_steal_pointer(&centroid_sq);
      p->m = m;
    }
    g_free(centroid);
    g_free(centroid_sq);
    if (worse)
      break;
  }
  g_free(label);
  knnwb_partition_block_clear(&sample);
  p->metric = metric;
  p->n = n;
  p->d = data->n_cols;
  p->threads = threads;
  *share = best / plain;
  return TRUE;
}
