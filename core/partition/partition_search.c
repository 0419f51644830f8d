/*
 * The sub-searches of a partitioned run: a pool of workers takes clusters, largest first, gathers
 * their rows (which keep their order, so ties still break by the lower row), runs the plain
 * engine on them and writes or merges the lists. Every list stays sorted by (engine distance,
 * row); the merged list of a row is the best k of the union whatever order the clusters finish
 * in, so any number of workers gives the same bytes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "engine/engine.h"
#include "knnwb_kernels.h"
#include "partition/partition_internal.h"

/* Pairs per unit of progress (an 8192 x 8192 tile, as the plain search counts). */
#define KNNWB_PARTITION_PROGRESS_UNIT 67108864.0
/* Below this many multiply-adds (pairs x columns) a sub-search runs on the CPU even in a GPU run:
 * a GPU call costs about ten milliseconds whatever its size. */
#define KNNWB_PARTITION_CPU_WORK 1e9

typedef struct {
  KnnwbPartitionRun *run;
  int index;
  float *reference_rows, *query_rows;
  size_t reference_cap, query_cap; /* rows */
  KnnwbResultKeep lists;           /* the last sub-search's list arrays, for the next */
} KnnwbPartitionWorker;

/* One sub-search: a group's rows among themselves, or visitors [first, first + count) of the
 * group's (a large group's visitors come in several pieces, so that the workers share them). */
typedef struct {
  size_t group, first, count;
  double work; /* pairs */
} KnnwbPartitionPiece;

typedef gboolean (*KnnwbPartitionItem)(KnnwbPartitionWorker *worker,
                                       const KnnwbPartitionPiece *piece, GError **error);

/* A sub-search's progress, with every worker's, as a share of the run's pairs. */
static void knnwb_partition_progress(uint64_t done, uint64_t total, void *data)
{
  KnnwbPartitionWorker *worker = data;
  KnnwbPartitionRun *run = worker->run;
  if (!g_mutex_trylock(&run->progress_lock))
    return;
  const double step = run->inflight[worker->index * 2];
  run->inflight[worker->index * 2 + 1] = total > 0 ? step * (double)done / (double)total : 0.0;
  double at = run->done;
  for (int w = 0; w < run->workers; w++)
    at += run->inflight[w * 2 + 1];
  run->options->progress((uint64_t)(at / KNNWB_PARTITION_PROGRESS_UNIT),
                         (uint64_t)ceil(MAX(run->total, at) / KNNWB_PARTITION_PROGRESS_UNIT),
                         run->options->progress_data);
  g_mutex_unlock(&run->progress_lock);
}

typedef struct {
  const KnnwbPartitionRun *run;
  const int64_t *rows;
  float *out;
} KnnwbPartitionGather;

static void knnwb_partition_gather_rows(size_t first, size_t last, void *data)
{
  KnnwbPartitionGather *g = data;
  const size_t d = g->run->d;
  for (size_t t = first; t < last; t++)
    memcpy(g->out + t * d, knnwb_partition_row(g->run, (size_t)g->rows[t]), d * sizeof(float));
}

/* rows[0 .. count) of the data, in that order, as a matrix over *buffer (grown as needed); NULL
 * when memory is short. */
static KnnwbMatrix *knnwb_partition_gather(const KnnwbPartitionWorker *worker, const int64_t *rows,
                                           size_t count, float **buffer, size_t *cap,
                                           GError **error)
{
  const KnnwbPartitionRun *run = worker->run;
  if (count > *cap) {
    g_free(*buffer);
    *buffer = g_try_new(float, count * run->d);
    *cap = *buffer != NULL ? count : 0;
    if (*buffer == NULL) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "cannot allocate %zu x %zu floats for a cluster's rows", count, run->d);
      return NULL;
    }
  }
  KnnwbPartitionGather g = {.run = run, .rows = rows, .out = *buffer};
  knnwb_parallel_for(run->threads_per_worker, count, 4096, knnwb_partition_gather_rows, &g);
  return knnwb_matrix_new_wrapped(count, run->d, *buffer, NULL, NULL);
}

/* One sub-search on the worker's GPU (or the CPU when it is small or the run is a CPU run); a
 * visit's query rows start from within (knnwb_knn_query_within), the own lists from nothing. */
static KnnwbNeighbors *knnwb_partition_search(KnnwbPartitionWorker *worker,
                                              const KnnwbMatrix *query,
                                              const KnnwbMatrix *reference, const double *within,
                                              size_t k, double pairs, GError **error)
{
  KnnwbPartitionRun *run = worker->run;
  KnnwbKnnOptions options = *run->options;
  options.k = k;
  options.group = NULL;
  options.n_threads = run->threads_per_worker;
  /* (a budget the user set is the run's, shared by its workers) */
  options.memory_bytes = run->options->memory_bytes / (size_t)run->workers;
  if (run->options->memory_bytes > 0)
    options.memory_bytes = MAX(options.memory_bytes, (size_t)1);
  if (run->devices != NULL && pairs * (double)run->d < KNNWB_PARTITION_CPU_WORK) {
    options.backend = KNNWB_BACKEND_CPU;
  } else if (run->devices != NULL) {
    options.devices = run->devices + worker->index;
    options.n_devices = 1;
    /* a GPU's budget is shared by the sub-searches on it at once */
    options.gpu_memory_bytes = run->options->gpu_memory_bytes / (size_t)(run->workers / run->gpus);
  }
  if (run->options->progress != NULL) {
    options.progress = knnwb_partition_progress;
    options.progress_data = worker;
  }
  g_mutex_lock(&run->progress_lock);
  run->inflight[worker->index * 2] = pairs;
  g_mutex_unlock(&run->progress_lock);
  KnnwbNeighbors *lists = NULL;
  knnwb_partition_sub_search_begin();
  gboolean ok = reference == NULL ? knnwb_knn_self_unchecked(query, &options, &lists, error)
                                  : knnwb_knn_query_within_unchecked(query, reference, &options,
                                                                     within, &lists, error);
  knnwb_partition_sub_search_end();
  g_mutex_lock(&run->progress_lock);
  run->done += pairs;
  run->inflight[worker->index * 2] = run->inflight[worker->index * 2 + 1] = 0.0;
  g_mutex_unlock(&run->progress_lock);
  if (!ok)
    return NULL;
  g_mutex_lock(&run->lock);
  run->lists->screen_used = lists->screen_used;
  run->lists->n_reselected += lists->n_reselected;
  run->lists->n_exhaustive += lists->n_exhaustive;
  g_mutex_unlock(&run->lock);
  return lists;
}

typedef struct {
  KnnwbPartitionRun *run;
  const KnnwbNeighbors *found;
  const int64_t *rows, *members; /* the searched rows; the reference's rows (NULL: rows) */
  size_t k_found;
} KnnwbPartitionLists;

/* The clusters' own lists [first, last) into the run's lists, in row numbers of the data. */
static void knnwb_partition_copy_rows(size_t first, size_t last, void *data)
{
  KnnwbPartitionLists *l = data;
  const size_t k = l->run->k;
  for (size_t t = first; t < last; t++) {
    const size_t i = knnwb_partition_list_at(l->run, (size_t)l->rows[t]);
    for (size_t r = 0; r < k; r++) {
      const int64_t local = l->found->indices[t * k + r];
      l->run->lists->indices[i * k + r] = local >= 0 ? l->rows[local] : -1;
      l->run->lists->distances[i * k + r] = l->found->distances[t * k + r];
    }
    l->run->lists->n_found[i] = l->found->n_found[t];
  }
}

void knnwb_partition_merge_list(int64_t *li, double *ld, size_t k, const int64_t *fi,
                                const double *fd, size_t kf, const int64_t *members, int64_t *index,
                                double *distance)
{
  size_t a = 0, b = 0;
  for (size_t r = 0; r < k; r++) {
    const int64_t bi = b < kf && fi[b] >= 0 ? (members != NULL ? members[fi[b]] : fi[b]) : -1;
    const gboolean take_b =
        bi >= 0 && (a >= k || li[a] < 0 || fd[b] < ld[a] || (fd[b] == ld[a] && bi < li[a]));
    index[r] = take_b ? bi : li[a];
    distance[r] = take_b ? fd[b++] : ld[a++];
  }
  memcpy(li, index, k * sizeof(int64_t));
  memcpy(ld, distance, k * sizeof(double));
}

/* The lock of row i's stripe, taken when it is not the one held already (rows come in ascending
 * order, so a run of rows takes few); *held: the stripe held, or NULL. */
static void knnwb_partition_stripe_take(KnnwbPartitionRun *run, size_t i, GMutex **held)
{
  GMutex *stripe = &run->stripes[i / KNNWB_PARTITION_STRIPE_ROWS];
  if (stripe == *held)
    return;
  if (*held != NULL)
    g_mutex_unlock(*held);
  g_mutex_lock(stripe);
  *held = stripe;
}

/* Visitors [first, last): their lists so far and what they found in the cluster, merged by
 * (distance, row); the row sets are disjoint, so no pair appears twice. A row may visit clusters
 * that other workers search at the same time: each row is merged under its stripe's lock. */
static void knnwb_partition_merge_rows(size_t first, size_t last, void *data)
{
  KnnwbPartitionLists *l = data;
  const size_t k = l->run->k, kf = l->k_found;
  int64_t *index = g_new(int64_t, k);
  double *distance = g_new(double, k);
  GMutex *held = NULL;
  for (size_t t = first; t < last; t++) {
    const size_t i = (size_t)l->rows[t], at = knnwb_partition_list_at(l->run, i);
    knnwb_partition_stripe_take(l->run, i, &held);
    if (l->run->lists->n_found[at] < 0) { /* (unset: partition_internal.h) */
      knnwb_knn_result_empty_rows(l->run->lists, at, at + 1);
      l->run->lists->n_found[at] = 0;
    }
    knnwb_partition_merge_list(l->run->lists->indices + at * k, l->run->lists->distances + at * k,
                               k, l->found->indices + t * kf, l->found->distances + t * kf, kf,
                               l->members, index, distance);
  }
  if (held != NULL)
    g_mutex_unlock(held);
  g_free(index);
  g_free(distance);
}

/* Phase one's item: cluster c's rows among themselves. */
static gboolean knnwb_partition_own_item(KnnwbPartitionWorker *worker,
                                         const KnnwbPartitionPiece *piece, GError **error)
{
  KnnwbPartitionRun *run = worker->run;
  const size_t c = piece->group;
  const KnnwbPartition *p = run->p;
  const int64_t *members = p->members + p->start[c];
  const size_t size = p->start[c + 1] - p->start[c];
  KnnwbMatrix *rows = knnwb_partition_gather(worker, members, size, &worker->reference_rows,
                                             &worker->reference_cap, error);
  if (rows == NULL)
    return FALSE;
  KnnwbNeighbors *own = knnwb_partition_search(worker, rows, NULL, NULL, run->k,
                                               0.5 * (double)size * (double)size, error);
  knnwb_matrix_free(rows);
  if (own == NULL)
    return FALSE;
  KnnwbPartitionLists l = {.run = run, .found = own, .rows = members};
  knnwb_parallel_for(run->threads_per_worker, size, 4096, knnwb_partition_copy_rows, &l);
  knnwb_knn_result_keep_put(&worker->lists, own);
  return TRUE;
}

typedef struct {
  KnnwbPartitionRun *run;
  const int64_t *queries; /* run->queries + offset */
  size_t offset;
  double *within;
} KnnwbPartitionWithin;

static void knnwb_partition_within_rows(size_t first, size_t last, void *data)
{
  const KnnwbPartitionWithin *w = data;
  KnnwbPartitionRun *run = w->run;
  const size_t k = run->k;
  GMutex *held = NULL;
  for (size_t t = first; t < last; t++) {
    const size_t i = (size_t)w->queries[t], at = knnwb_partition_list_at(run, i);
    knnwb_partition_stripe_take(run, i, &held);
    const double here = run->lists->n_found[at] >= 0 && run->lists->indices[at * k + k - 1] >= 0
                            ? run->lists->distances[at * k + k - 1]
                            : INFINITY;
    const double kth =
        run->query_kth != NULL ? run->query_kth[w->offset + t] : knnwb_partition_kth(run, i);
    w->within[t] = MIN(here, kth);
  }
  if (held != NULL)
    g_mutex_unlock(held);
}

/* The visitors' k-th distances so far (their own lists and the visits merged into them): a pair
 * beyond a row's cannot enter its list, so its search need not take it (most pairs of a visit lie
 * beyond: on 400,000 rows of 50 overlapping clusters a visit scored three times slower per pair
 * than the plain search without them). Read under the stripes' locks the merges take. */
static double *knnwb_partition_within(KnnwbPartitionRun *run, const int64_t *queries, size_t count)
{
  /* KNNWB_PARTITION_WITHIN=0: none (to measure what they bring; the lists are the same) */
  if (g_strcmp0(g_getenv("KNNWB_PARTITION_WITHIN"), "0") == 0)
    return NULL;
  KnnwbPartitionWithin w = {run, queries, (size_t)(queries - run->queries),
                            g_new(double, MAX(count, (size_t)1))};
  knnwb_parallel_for(run->threads_per_worker, count, 4096, knnwb_partition_within_rows, &w);
  return w.within;
}

/* Phase two's item: cluster c against a piece of its visitors, merged into their lists. */
static gboolean knnwb_partition_visit_item(KnnwbPartitionWorker *worker,
                                           const KnnwbPartitionPiece *piece, GError **error)
{
  KnnwbPartitionRun *run = worker->run;
  const KnnwbPartition *p = run->p;
  const size_t c = piece->group, visitors = piece->count;
  const size_t size = p->start[c + 1] - p->start[c];
  if (visitors == 0)
    return TRUE;
  const int64_t *queries = run->queries + run->query_start[c] + piece->first;
  KnnwbMatrix *reference =
      knnwb_partition_gather(worker, p->members + p->start[c], size, &worker->reference_rows,
                             &worker->reference_cap, error);
  KnnwbMatrix *query = reference == NULL
                           ? NULL
                           : knnwb_partition_gather(worker, queries, visitors, &worker->query_rows,
                                                    &worker->query_cap, error);
  const size_t k_found = MIN(run->k, size);
  double *within = query == NULL ? NULL : knnwb_partition_within(run, queries, visitors);
  KnnwbNeighbors *found = query == NULL
                              ? NULL
                              : knnwb_partition_search(worker, query, reference, within, k_found,
                                                       (double)visitors * (double)size, error);
  g_free(within);
  knnwb_matrix_free(query);
  knnwb_matrix_free(reference);
  if (found == NULL)
    return FALSE;
  KnnwbPartitionLists l = {.run = run,
                           .found = found,
                           .rows = queries,
                           .members = p->members + p->start[c],
                           .k_found = k_found};
  knnwb_parallel_for(run->threads_per_worker, visitors, 1024, knnwb_partition_merge_rows, &l);
  knnwb_knn_result_keep_put(&worker->lists, found);
  return TRUE;
}

typedef struct {
  KnnwbPartitionRun *run;
  KnnwbPartitionItem item;
  const KnnwbPartitionPiece *pieces; /* largest first */
  size_t n_items;
  gint next;
} KnnwbPartitionPool;

static void knnwb_partition_worker_body(int thread, int n_threads, void *data)
{
  (void)n_threads;
  KnnwbPartitionPool *pool = data;
  KnnwbPartitionRun *run = pool->run;
  KnnwbPartitionWorker worker = {.run = run, .index = thread};
  /* The groups' rows are alike: one margin plan serves the run's sub-searches (each costs a
   * sample's distances to all rows, 30-120 ms at 200,000 x 50). */
  knnwb_knn_margin_memo_set(&run->margin);
  if (run->keep & KNNWB_PARTITION_KEEP_HOST)
    knnwb_knn_result_keep_set(&worker.lists);
  for (;;) {
    const size_t t = (size_t)g_atomic_int_add(&pool->next, 1);
    if (t >= pool->n_items || g_atomic_int_get(&run->failed))
      break;
    GError *local = NULL;
    if (!pool->item(&worker, &pool->pieces[t], &local)) {
      g_mutex_lock(&run->lock);
      if (run->error == NULL)
        run->error = g_steal_pointer(&local);
      g_clear_error(&local);
      g_atomic_int_set(&run->failed, 1);
      g_mutex_unlock(&run->lock);
    }
  }
  knnwb_knn_margin_memo_set(NULL);
  knnwb_knn_result_keep_set(NULL);
  knnwb_knn_result_keep_clear(&worker.lists);
  g_free(worker.reference_rows);
  g_free(worker.query_rows);
}

static int knnwb_partition_piece_compare(const void *a, const void *b, void *data)
{
  (void)data;
  const KnnwbPartitionPiece *x = a, *y = b;
  if (x->work != y->work)
    return x->work > y->work ? -1 : 1;
  if (x->group != y->group)
    return x->group < y->group ? -1 : 1;
  return x->first < y->first ? -1 : (x->first > y->first);
}

/* Runs item on every piece (of this rank's groups, in a group), largest first, on the run's
 * workers. */
static gboolean knnwb_partition_pool_run(KnnwbPartitionRun *run, KnnwbPartitionItem item,
                                         KnnwbPartitionPiece *pieces, size_t n_items,
                                         GError **error)
{
  g_qsort_with_data(pieces, (gint)n_items, sizeof *pieces, knnwb_partition_piece_compare, NULL);
  KnnwbPartitionPool pool = {.run = run, .item = item, .pieces = pieces, .n_items = n_items};
  /* The sub-searches on a GPU reuse each other's GPU memory and handles (knnwb_cuda_keep_begin):
   * setting them up and freeing them cost 0.13-0.2 s a sub-search with six at once on two GPUs.
   * Not under a budget the user gave (--gpu-memory): what is kept would lie outside it. */
  const gboolean keep_device = run->devices != NULL && (run->keep & KNNWB_PARTITION_KEEP_DEVICE) &&
                               run->options->gpu_memory_bytes == 0;
  if (keep_device)
    knnwb_cuda_keep_begin();
  knnwb_team_run(MAX(1, MIN(run->workers, (int)n_items)), knnwb_partition_worker_body, &pool);
  if (keep_device)
    knnwb_cuda_keep_end();
  if (run->failed) {
    g_propagate_error(error, g_steal_pointer(&run->error));
    return FALSE;
  }
  return TRUE;
}

/* Whether this process searches group c in the phase at hand. */
static gboolean knnwb_partition_mine(const KnnwbPartitionRun *run, size_t c)
{
  return run->owner == NULL || run->owner[c] == run->options->group->rank;
}

gboolean knnwb_partition_own_lists(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbPartition *p = run->p;
  KnnwbPartitionPiece *pieces = g_new(KnnwbPartitionPiece, MAX(p->groups, (size_t)1));
  size_t n = 0;
  for (size_t c = 0; c < p->groups; c++) {
    const size_t size = p->start[c + 1] - p->start[c];
    if (size > 0 && knnwb_partition_mine(run, c))
      pieces[n++] = (KnnwbPartitionPiece){c, 0, size, (double)size};
  }
  gboolean ok = knnwb_partition_pool_run(run, knnwb_partition_own_item, pieces, n, error);
  g_free(pieces);
  return ok;
}

/* Into how many pieces group c's visits (work pairs of `visitors` rows) are cut, out of the
 * phase's total: a visit larger than a worker's share is cut into pieces of about that share, of
 * at least KNNWB_PARTITION_PIECE_ROWS visitors, so that the workers (and GPUs) share it. At
 * 2,000,000 rows of clusters 3 apart one visit (683,156 rows of an 80,064-row group) was the whole
 * phase, on one worker. Smaller visits stay whole: each piece gathers and prepares the group's
 * rows again (cutting every visit into four pieces a worker took 7.3 s of visits against 6.4 s at
 * 10,000,000 rows of clusters 2 apart on two GPUs). */
#define KNNWB_PARTITION_PIECE_ROWS ((size_t)16384)
static size_t knnwb_partition_piece_count(const KnnwbPartitionRun *run, double work,
                                          size_t visitors, double total)
{
  /* KNNWB_PARTITION_PIECES=N: N pieces a group (1: one, to measure what they bring; more, for
   * the tests; the lists are the same) */
  const char *forced = g_getenv("KNNWB_PARTITION_PIECES");
  if (forced != NULL && *forced != '\0')
    return (size_t)CLAMP(g_ascii_strtoll(forced, NULL, 10), 1, (gint64)MAX(visitors, (size_t)1));
  const double share = total / (double)MAX(run->workers, 1);
  if (run->workers <= 1 || work <= share)
    return 1;
  const size_t by_work = (size_t)ceil(work / share);
  const size_t by_rows = visitors / KNNWB_PARTITION_PIECE_ROWS;
  return MAX((size_t)1, MIN(MIN(by_work, by_rows), (size_t)run->workers));
}

gboolean knnwb_partition_visit_lists(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbPartition *p = run->p;
  double total = 0.0;
  for (size_t c = 0; c < p->groups; c++)
    if (knnwb_partition_mine(run, c))
      total += (double)(run->query_start[c + 1] - run->query_start[c]) *
               (double)(p->start[c + 1] - p->start[c]);
  GArray *pieces = g_array_new(FALSE, FALSE, sizeof(KnnwbPartitionPiece));
  for (size_t c = 0; c < p->groups; c++) {
    const size_t visitors = (size_t)(run->query_start[c + 1] - run->query_start[c]);
    const size_t size = p->start[c + 1] - p->start[c];
    const double work = (double)visitors * (double)size;
    if (!(work > 0) || !knnwb_partition_mine(run, c))
      continue;
    const size_t count = knnwb_partition_piece_count(run, work, visitors, total);
    for (size_t q = 0; q < count; q++) {
      const size_t first = visitors * q / count, last = visitors * (q + 1) / count;
      const KnnwbPartitionPiece piece = {c, first, last - first, (double)(last - first) * size};
      g_array_append_val(pieces, piece);
    }
  }
  gboolean ok =
      knnwb_partition_pool_run(run, knnwb_partition_visit_item,
                               (KnnwbPartitionPiece *)(void *)pieces->data, pieces->len, error);
  g_array_free(pieces, TRUE);
  return ok;
}
