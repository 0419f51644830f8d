/*
 * The partitioned self search (see partition.h): the clusters' own lists first, then, for every
 * cluster, the rows of other clusters that its bound cannot rule out are searched against it and
 * their lists merged. Every list is kept sorted by (engine distance, row), so merging two is the
 * plain search's order; sub-searches see the rows of a cluster in their original order, so their
 * ties break by the lower original row too.
 */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "engine/engine.h"
#include "partition/partition.h"
#include "partition/partition_internal.h"

/* Rows per block of the bounds pass. */
#define KNNWB_PARTITION_BOUND_ROWS ((size_t)2048)
/* Pairs per unit of progress (an 8192 x 8192 tile, as the plain search counts). */
#define KNNWB_PARTITION_PROGRESS_UNIT 67108864.0

extern int openblas_get_num_threads(void);
extern void openblas_set_num_threads(int);

/* Sub-searches of the partitioned search do not partition again. */
static _Thread_local int knnwb_partition_depth;

typedef struct {
  const KnnwbMatrix *data;
  const KnnwbKnnOptions *options;
  KnnwbPartition *p;
  KnnwbNeighbors *lists;
  size_t k, d;
  float *reference_rows, *query_rows;
  int64_t *query_start; /* m + 1: each cluster's visitors in queries */
  int64_t *queries;
  /* progress, in pairs */
  double done, step, total;
  KnnwbScreen screen;
} KnnwbPartitionRun;

/* A sub-search's progress as a share of the whole run's pairs. */
static void knnwb_partition_progress(uint64_t done, uint64_t total, void *data)
{
  KnnwbPartitionRun *run = data;
  const double at = run->done + (total > 0 ? run->step * (double)done / (double)total : 0.0);
  run->options->progress((uint64_t)(at / KNNWB_PARTITION_PROGRESS_UNIT),
                         (uint64_t)ceil(MAX(run->total, at) / KNNWB_PARTITION_PROGRESS_UNIT),
                         run->options->progress_data);
}

typedef struct {
  const KnnwbMatrix *data;
  const int64_t *rows;
  float *out;
} KnnwbPartitionGather;

static void knnwb_partition_gather_rows(size_t first, size_t last, void *data)
{
  KnnwbPartitionGather *g = data;
  const size_t d = g->data->n_cols;
  for (size_t t = first; t < last; t++)
    memcpy(g->out + t * d, g->data->values + (size_t)g->rows[t] * d, d * sizeof(float));
}

/* rows[0 .. count) of the data, in that order, as a matrix over out (count x d floats). */
static KnnwbMatrix *knnwb_partition_gather(const KnnwbPartitionRun *run, const int64_t *rows,
                                           size_t count, float *out)
{
  KnnwbPartitionGather g = {.data = run->data, .rows = rows, .out = out};
  knnwb_parallel_for(run->p->threads, count, 4096, knnwb_partition_gather_rows, &g);
  return knnwb_matrix_new_wrapped(count, run->d, out, NULL, NULL);
}

/* One sub-search (the self lists of a cluster, or visitors against it), its progress counted as
 * pairs of the run. */
static KnnwbNeighbors *knnwb_partition_search(KnnwbPartitionRun *run, const KnnwbMatrix *query,
                                              const KnnwbMatrix *reference, size_t k, double pairs,
                                              GError **error)
{
  KnnwbKnnOptions options = *run->options;
  options.k = k;
  options.group = NULL;
  if (run->options->progress != NULL) {
    options.progress = knnwb_partition_progress;
    options.progress_data = run;
  }
  run->step = pairs;
  KnnwbNeighbors *lists = NULL;
  gboolean ok = reference == NULL ? knnwb_knn_self(query, &options, &lists, error)
                                  : knnwb_knn_query(query, reference, &options, &lists, error);
  run->done += pairs;
  if (!ok)
    return NULL;
  if (run->lists->backend_used == NULL)
    run->lists->backend_used = g_strdup(lists->backend_used);
  run->lists->screen_used = lists->screen_used;
  run->lists->n_reselected += lists->n_reselected;
  run->lists->n_exhaustive += lists->n_exhaustive;
  return lists;
}

/* Phase one: every cluster's rows among themselves, into the run's lists. */
static gboolean knnwb_partition_own(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbPartition *p = run->p;
  const size_t k = run->k;
  for (size_t c = 0; c < p->m; c++) {
    const int64_t *members = p->members + p->start[c];
    const size_t size = p->start[c + 1] - p->start[c];
    KnnwbMatrix *rows = knnwb_partition_gather(run, members, size, run->reference_rows);
    KnnwbNeighbors *own =
        knnwb_partition_search(run, rows, NULL, k, 0.5 * (double)size * (double)size, error);
    knnwb_matrix_free(rows);
    if (own == NULL)
      return FALSE;
    for (size_t t = 0; t < size; t++) {
      const size_t i = (size_t)members[t];
      for (size_t r = 0; r < k; r++) {
        const int64_t local = own->indices[t * k + r];
        run->lists->indices[i * k + r] = local >= 0 ? members[local] : -1;
        run->lists->distances[i * k + r] = own->distances[t * k + r];
      }
      run->lists->n_found[i] = own->n_found[t];
    }
    knnwb_neighbors_free(own);
  }
  return TRUE;
}

typedef struct {
  KnnwbPartitionRun *run;
  GArray **found; /* per block of rows: (cluster << 40 | row) of every visit */
  gint failed;
} KnnwbPartitionVisits;

/* Rows [first, last): the other clusters their bound cannot rule out (lower bound minus the
 * cluster's radius not beyond the chord of the row's k-th distance so far). */
static void knnwb_partition_visit_rows(size_t first, size_t last, void *data)
{
  KnnwbPartitionVisits *v = data;
  const KnnwbPartitionRun *run = v->run;
  const KnnwbPartition *p = run->p;
  const volatile gint *cancel = run->options->cancel;
  if (g_atomic_int_get(&v->failed) || (cancel != NULL && g_atomic_int_get(cancel))) {
    g_atomic_int_set(&v->failed, 1);
    return;
  }
  KnnwbPartitionBlock block;
  if (!knnwb_partition_block_init(&block, last - first, p->m, p->d)) {
    g_atomic_int_set(&v->failed, 1);
    return;
  }
  GArray *found = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  if (knnwb_partition_block_fill(&block, p->metric, run->data, first, last, NULL, p->centroid,
                                 p->m)) {
    for (size_t r = 0; r < block.rows; r++) {
      const size_t i = first + r, own = (size_t)p->cluster_of[i];
      const double limit = knnwb_partition_chord_limit(
          p->metric, run->lists->distances[i * run->k + run->k - 1], p->d);
      for (size_t j = 0; j < p->m; j++) {
        double lower, upper;
        knnwb_partition_block_bounds(&block, p->metric, p->centroid_sq, r, j, &lower, &upper);
        if (j != own && !(lower - p->radius[j] > limit)) {
          const uint64_t visit = ((uint64_t)j << 40) | (uint64_t)i;
          g_array_append_val(found, visit);
        }
      }
    }
  } else {
    g_atomic_int_set(&v->failed, 1);
  }
  knnwb_partition_block_clear(&block);
  v->found[first / KNNWB_PARTITION_BOUND_ROWS] = found;
}

/* Phase two's queries: each cluster's visitors, rows ascending (run->query_start, run->queries).
 * *pairs: the pairs they will score. FALSE: memory or cancel. */
static gboolean knnwb_partition_visits(KnnwbPartitionRun *run, double *pairs)
{
  const KnnwbPartition *p = run->p;
  const size_t blocks = (p->n + KNNWB_PARTITION_BOUND_ROWS - 1) / KNNWB_PARTITION_BOUND_ROWS;
  KnnwbPartitionVisits v = {.run = run, .found = g_new0(GArray *, blocks)};
  const int saved_blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  knnwb_parallel_for(p->threads, p->n, KNNWB_PARTITION_BOUND_ROWS, knnwb_partition_visit_rows, &v);
  openblas_set_num_threads(saved_blas_threads);
  size_t total = 0;
  run->query_start = g_new0(int64_t, p->m + 1);
  for (size_t b = 0; b < blocks; b++)
    for (guint t = 0; v.found[b] != NULL && t < v.found[b]->len; t++) {
      run->query_start[(g_array_index(v.found[b], uint64_t, t) >> 40) + 1]++;
      total++;
    }
  for (size_t c = 0; c < p->m; c++)
    run->query_start[c + 1] += run->query_start[c];
  run->queries = v.failed ? NULL : g_try_new(int64_t, MAX(total, (size_t)1));
  int64_t *next = g_new(int64_t, p->m);
  memcpy(next, run->query_start, p->m * sizeof(int64_t));
  for (size_t b = 0; b < blocks; b++) {
    for (guint t = 0; run->queries != NULL && v.found[b] != NULL && t < v.found[b]->len; t++) {
      const uint64_t visit = g_array_index(v.found[b], uint64_t, t);
      run->queries[next[visit >> 40]++] = (int64_t)(visit & (((uint64_t)1 << 40) - 1));
    }
    if (v.found[b] != NULL)
      g_array_free(v.found[b], TRUE);
  }
  g_free(next);
  g_free(v.found);
  *pairs = 0.0;
  for (size_t c = 0; c < p->m; c++)
    *pairs += (double)(run->query_start[c + 1] - run->query_start[c]) *
              (double)(p->start[c + 1] - p->start[c]);
  return run->queries != NULL;
}

typedef struct {
  KnnwbPartitionRun *run;
  const KnnwbNeighbors *found;
  const int64_t *queries, *members;
  size_t k_found;
} KnnwbPartitionMerge;

/* Visitors [first, last): their lists so far and what they found in the cluster, merged by
 * (distance, row); the row sets are disjoint, so no pair appears twice. */
static void knnwb_partition_merge_rows(size_t first, size_t last, void *data)
{
  KnnwbPartitionMerge *mg = data;
  const size_t k = mg->run->k, kf = mg->k_found;
  int64_t *index = g_new(int64_t, k);
  double *distance = g_new(double, k);
  for (size_t t = first; t < last; t++) {
    const size_t i = (size_t)mg->queries[t];
    int64_t *li = mg->run->lists->indices + i * k;
    double *ld = mg->run->lists->distances + i * k;
    const int64_t *fi = mg->found->indices + t * kf;
    const double *fd = mg->found->distances + t * kf;
    size_t a = 0, b = 0;
    for (size_t r = 0; r < k; r++) {
      const int64_t bi = b < kf && fi[b] >= 0 ? mg->members[fi[b]] : -1;
      const gboolean take_b =
          bi >= 0 && (a >= k || li[a] < 0 || fd[b] < ld[a] || (fd[b] == ld[a] && bi < li[a]));
      index[r] = take_b ? bi : li[a];
      distance[r] = take_b ? fd[b++] : ld[a++];
    }
    memcpy(li, index, k * sizeof(int64_t));
    memcpy(ld, distance, k * sizeof(double));
  }
  g_free(index);
  g_free(distance);
}

/* Phase two: every cluster against its visitors, their lists merged. */
static gboolean knnwb_partition_others(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbPartition *p = run->p;
  for (size_t c = 0; c < p->m; c++) {
    const size_t visitors = (size_t)(run->query_start[c + 1] - run->query_start[c]);
    const size_t size = p->start[c + 1] - p->start[c];
    if (visitors == 0)
      continue;
    const int64_t *queries = run->queries + run->query_start[c];
    KnnwbMatrix *reference =
        knnwb_partition_gather(run, p->members + p->start[c], size, run->reference_rows);
    KnnwbMatrix *query = knnwb_partition_gather(run, queries, visitors, run->query_rows);
    const size_t k_found = MIN(run->k, size);
    KnnwbNeighbors *found = knnwb_partition_search(run, query, reference, k_found,
                                                   (double)visitors * (double)size, error);
    knnwb_matrix_free(query);
    knnwb_matrix_free(reference);
    if (found == NULL)
      return FALSE;
    KnnwbPartitionMerge mg = {.run = run,
                              .found = found,
                              .queries = queries,
                              .members = p->members + p->start[c],
                              .k_found = k_found};
    knnwb_parallel_for(p->threads, visitors, 1024, knnwb_partition_merge_rows, &mg);
    knnwb_neighbors_free(found);
  }
  return TRUE;
}

/* Whether the partitioned search can run on this request at all. */
static gboolean knnwb_partition_applies(const KnnwbMatrix *data, const KnnwbKnnOptions *options)
{
  const KnnwbMetric metric = options->metric;
  return (options->group == NULL || options->group->size <= 1) && data->n_absent_rows == 0 &&
         (metric == KNNWB_METRIC_EUCLIDEAN || metric == KNNWB_METRIC_COSINE ||
          metric == KNNWB_METRIC_PEARSON || metric == KNNWB_METRIC_ABS_PEARSON) &&
         options->k >= 1 && options->k < data->n_rows && data->n_cols >= 1 &&
         data->n_rows < ((size_t)1 << 40);
}

/* Both phases over the clusters of p; *lists stays NULL when the run gives up (the bounds rule
 * out too little: auto mode only). */
static gboolean knnwb_partition_run(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                                    KnnwbPartition *p, KnnwbPartitionMode mode, double expected,
                                    KnnwbNeighbors **lists, GError **error)
{
  const size_t n = data->n_rows, k = options->k;
  size_t largest = 0;
  double own_pairs = 0.0;
  for (size_t c = 0; c < p->m; c++) {
    const size_t size = p->start[c + 1] - p->start[c];
    largest = MAX(largest, size);
    own_pairs += 0.5 * (double)size * (double)size;
  }
  const double plain = 0.5 * (double)n * (double)n;
  KnnwbPartitionRun run = {.data = data,
                           .options = options,
                           .p = p,
                           .k = k,
                           .d = data->n_cols,
                           .total = MAX(own_pairs, expected * plain)};
  run.lists = knnwb_knn_result_new(0, n, k, error);
  run.reference_rows = g_try_new(float, largest *run.d);
  gboolean ok = run.lists != NULL && run.reference_rows != NULL;
  if (run.lists != NULL && run.reference_rows == NULL)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate %zu x %zu floats for a cluster's rows", largest, run.d);
  ok = ok && knnwb_partition_own(&run, error);
  double visit_pairs = 0.0;
  gboolean give_up = FALSE;
  if (ok) {
    give_up = !knnwb_partition_visits(&run, &visit_pairs);
    if (options->cancel != NULL && g_atomic_int_get(options->cancel)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled while bounding clusters");
      ok = FALSE;
    }
    give_up = give_up || (mode == KNNWB_PARTITION_AUTO &&
                          own_pairs + visit_pairs > KNNWB_PARTITION_GIVE_UP_SHARE * plain);
    g_debug("knnwb: partition: %zu clusters, %.3g pairs within, %.3g between (%.1f%% of all)%s",
            p->m, own_pairs, visit_pairs, 100.0 * (own_pairs + visit_pairs) / plain,
            give_up ? ": the plain search instead" : "");
  }
  if (ok && !give_up) {
    size_t most = 0;
    for (size_t c = 0; c < p->m; c++)
      most = MAX(most, (size_t)(run.query_start[c + 1] - run.query_start[c]));
    run.total = run.done + visit_pairs;
    run.query_rows = g_try_new(float, MAX(most, (size_t)1) * run.d);
    give_up = run.query_rows == NULL;
    ok = give_up || knnwb_partition_others(&run, error);
  }
  g_free(run.reference_rows);
  g_free(run.query_rows);
  g_free(run.query_start);
  g_free(run.queries);
  if (ok && !give_up)
    *lists = g_steal_pointer(&run.lists);
  g_clear_pointer(&run.lists, knnwb_neighbors_free);
  return ok;
}

gboolean knnwb_partition_self(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                              KnnwbNeighbors **result, GError **error)
{
  *result = NULL;
  const KnnwbPartitionMode mode = knnwb_partition_mode();
  if (knnwb_partition_depth > 0 || mode == KNNWB_PARTITION_OFF ||
      !knnwb_partition_applies(data, options) ||
      (mode == KNNWB_PARTITION_AUTO && data->n_rows < KNNWB_PARTITION_MIN_ROWS))
    return TRUE;
  const size_t m = knnwb_partition_cluster_count(data->n_rows, options->k);
  if (m == 0 || !knnwb_matrix_check_finite(data, NULL))
    return TRUE; /* the plain search reports what is wrong */
  const gint64 start = g_get_monotonic_time();
  KnnwbPartition p;
  if (!knnwb_partition_build(&p, data, options->metric, m, options->k,
                             knnwb_thread_count(options->n_threads), options->cancel))
    return TRUE;
  const double expected = knnwb_partition_expected_share(&p, data, options->k);
  const gboolean chosen = mode == KNNWB_PARTITION_ON || expected <= KNNWB_PARTITION_SAMPLE_SHARE;
  g_debug("knnwb: partition: %zu clusters in %.3f s, expected %.1f%% of the pairs: %s", p.m,
          (double)(g_get_monotonic_time() - start) / 1e6, 100.0 * expected,
          chosen ? "partitioning" : "the plain search");
  gboolean ok = TRUE;
  if (chosen) {
    knnwb_partition_depth++;
    ok = knnwb_partition_run(data, options, &p, mode, expected, result, error);
    knnwb_partition_depth--;
  }
  knnwb_partition_clear(&p);
  g_debug("knnwb: partition: %s in %.3f s", *result != NULL ? "done" : "not used",
          (double)(g_get_monotonic_time() - start) / 1e6);
  return ok;
}
