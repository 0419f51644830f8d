/*
 * The partitioned self search (see partition.h): the clusters' own lists first, then, for every
 * cluster, the rows of other clusters that its bound cannot rule out are searched against it and
 * their lists merged. Every list is kept sorted by (engine distance, row), so merging two is the
 * plain search's order; sub-searches see the rows of a cluster in their original order, so their
 * ties break by the lower original row too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "engine/engine.h"
#include "knnwb_kernels.h"
#include "partition/partition.h"
#include "partition/partition_internal.h"

/* Sub-searches of the partitioned search do not partition again (nor pay for the choice's
 * k-means: 0.06 s each at 600,000 rows). Thread-local, so set by each thread that runs one. */
static _Thread_local int knnwb_partition_depth;

void knnwb_partition_sub_search_begin(void)
{
  knnwb_partition_depth++;
}

void knnwb_partition_sub_search_end(void)
{
  knnwb_partition_depth--;
}

/* Sub-searches at once on each GPU: while one scores on the GPU, the others prepare their rows,
 * plan and merge on the CPU (about half of a 200,000-row sub-search's time at d = 50; at 10M rows
 * in 50 clusters one H200 took 19.9 s with two, 18.1-18.6 s with three). Groups of more than a
 * million rows keep the GPU busy for seconds each, and two at once still gain: their tile loops
 * fill each other's gaps and one's host work overlaps the other's tiles (groups of 2,000,000 x 50
 * on one H200: 20 M rows in 10 clusters, own lists 29.8 s with two, 31.0 s with three, 33.3 s with
 * one; 10^8 rows in 50 clusters 147.6 s against 168.2 s). Each call takes its GPU memory from what
 * is free when it starts, so they run at once only where that many of the largest group's
 * sub-search surely fit: free memory for each of KNNWB_PARTITION_GPU_ROW_BYTES a row (its rows,
 * candidate lists of a few hundred, tiles) plus a GiB for the context's and cuBLAS's share; else
 * one. */
#define KNNWB_PARTITION_WORKERS_PER_GPU 3
#define KNNWB_PARTITION_LARGE_WORKERS_PER_GPU 2
#define KNNWB_PARTITION_SHARED_ROWS ((size_t)1 << 20)
#define KNNWB_PARTITION_GPU_ROW_BYTES ((size_t)16384)

/* KNNWB_PARTITION_GPU_WORKERS=N (1-16): N sub-searches at once on each GPU where they fit, groups
 * of any size, to compare with the default; anything else: the default (*given FALSE). */
static int knnwb_partition_gpu_workers_wanted(gboolean *given)
{
  const char *v = g_getenv("KNNWB_PARTITION_GPU_WORKERS");
  char *end = NULL;
  const long n = v != NULL ? strtol(v, &end, 10) : 0;
  *given = v != NULL && end != v && *end == 0 && n >= 1 && n <= 16;
  return *given ? (int)n : KNNWB_PARTITION_WORKERS_PER_GPU;
}

int knnwb_partition_gpu_workers_for(size_t largest, size_t d, size_t budget, size_t least_free)
{
  gboolean given = FALSE;
  int wanted = knnwb_partition_gpu_workers_wanted(&given);
  if (largest > KNNWB_PARTITION_SHARED_ROWS && !given)
    wanted = KNNWB_PARTITION_LARGE_WORKERS_PER_GPU;
  const double need =
      (double)largest * (double)(d * sizeof(float) + KNNWB_PARTITION_GPU_ROW_BYTES) +
      (double)((size_t)1 << 30);
  /* (a budget the user gave a GPU is shared by its sub-searches) */
  if (budget > 0 && (double)budget < wanted * need)
    return 1;
  return (double)least_free < wanted * need ? 1 : wanted;
}

/* Workers per GPU for the run's groups on devices[0 .. count). */
static int knnwb_partition_per_gpu(const KnnwbPartitionRun *run, const int *devices, int count)
{
  const KnnwbPartition *p = run->p;
  size_t largest = 0;
  for (size_t g = 0; g < p->groups; g++)
    largest = MAX(largest, p->start[g + 1] - p->start[g]);
  size_t least_free = SIZE_MAX;
  for (int w = 0; w < count; w++)
    least_free = MIN(least_free, knnwb_cuda_free_bytes(devices[w]));
  return knnwb_partition_gpu_workers_for(largest, run->d, run->options->gpu_memory_bytes,
                                         least_free);
}

/* Threads per CPU worker: one sub-search of a few ten thousand rows does not keep 16 cores busy
 * (2M x 50 in 50 clusters on 16 cores: own lists 24.4 s with one process, 16.3 s with 4 MPI
 * ranks of 4 threads, each rank one search at a time). */
#define KNNWB_PARTITION_CPU_WORKER_THREADS 4

/* The run's workers: one or three per GPU the options allow (each searching its own groups), or
 * CPU workers of KNNWB_PARTITION_CPU_WORKER_THREADS threads (at least one; at most a group each).
 */
static void knnwb_partition_workers(KnnwbPartitionRun *run, int threads)
{
  const KnnwbKnnOptions *options = run->options;
  run->workers = MAX(1, MIN(threads / KNNWB_PARTITION_CPU_WORKER_THREADS, (int)run->p->groups));
  run->gpus = 0;
  if (knnwb_knn_uses_gpu(options) && knnwb_cuda_device_count() > 0) {
    const int count = knnwb_knn_run_gpus(options, NULL, 0);
    int *ordinals = g_new(int, count);
    knnwb_knn_run_gpus(options, ordinals, count);
    knnwb_knn_gpus_log(options, count);
    const int per_gpu = knnwb_partition_per_gpu(run, ordinals, count);
    run->gpus = count;
    run->workers = count * per_gpu;
    run->devices = g_new(int, run->workers);
    for (int w = 0; w < run->workers; w++)
      run->devices[w] = ordinals[w % count];
    g_free(ordinals);
  }
  run->threads_per_worker = MAX(1, threads / run->workers);
  run->keep = knnwb_partition_keep_wanted();
  run->inflight = g_new0(double, 2 * (size_t)run->workers);
  g_mutex_init(&run->lock);
  g_mutex_init(&run->progress_lock);
  run->n_stripes =
      MAX((size_t)1, (run->p->n + KNNWB_PARTITION_STRIPE_ROWS - 1) / KNNWB_PARTITION_STRIPE_ROWS);
  run->stripes = g_new(GMutex, run->n_stripes);
  for (size_t s = 0; s < run->n_stripes; s++)
    g_mutex_init(&run->stripes[s]);
}

int knnwb_partition_keep_wanted(void)
{
  const char *v = g_getenv("KNNWB_PARTITION_KEEP");
  if (v == NULL || *v == 0)
    return KNNWB_PARTITION_KEEP_DEVICE | KNNWB_PARTITION_KEEP_HOST;
  return g_strcmp0(v, "device") == 0 ? KNNWB_PARTITION_KEEP_DEVICE
         : g_strcmp0(v, "host") == 0 ? KNNWB_PARTITION_KEEP_HOST
         : g_strcmp0(v, "0") == 0    ? 0
                                     : KNNWB_PARTITION_KEEP_DEVICE | KNNWB_PARTITION_KEEP_HOST;
}

static void knnwb_partition_run_clear(KnnwbPartitionRun *run)
{
  g_clear_pointer(&run->devices, g_free);
  g_clear_pointer(&run->inflight, g_free);
  g_clear_pointer(&run->query_start, g_free);
  g_clear_pointer(&run->queries, g_free);
  g_clear_pointer(&run->owner, g_free);
  g_clear_pointer(&run->kth, g_free);
  g_clear_pointer(&run->query_kth, g_free);
  g_clear_pointer(&run->slot, g_free);
  g_clear_pointer(&run->block_list, g_free);
  g_clear_pointer(&run->held_first, g_free);
  g_clear_pointer(&run->held.values, g_free);
  g_clear_pointer(&run->lists, knnwb_neighbors_free);
  g_clear_error(&run->error);
  g_mutex_clear(&run->lock);
  g_mutex_clear(&run->progress_lock);
  for (size_t s = 0; run->stripes != NULL && s < run->n_stripes; s++)
    g_mutex_clear(&run->stripes[s]);
  g_clear_pointer(&run->stripes, g_free);
}

/* ok as every rank of the run's group says (alone: ok): a rank's failure stops them all. */
static gboolean knnwb_partition_agree(const KnnwbPartitionRun *run, gboolean ok, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  return group == NULL || group->size <= 1 ? ok : group->agree(group, ok, error);
}

/* In a group, the rows of the other ranks' groups are emptied by a helper thread while this rank
 * searches its own (knnwb_partition_ranks_empty_others): emptying every row first held the GPUs'
 * start back 0.25 s at 10,000,000 rows, k = 30, two ranks sharing an H200. (Alone, faulting the
 * lists in on helper threads beside the search, without writing them, held the GPUs' first
 * allocations back about as long as it saved.) A split rank's others are left unset instead
 * (run->block_list): their lists are touched only where a visit or the combining writes them. */
typedef struct {
  KnnwbPartitionRun *run;
  int helpers; /* threads of the helper */
} KnnwbPartitionEmpty;

static gpointer knnwb_partition_empty_body(gpointer data)
{
  const KnnwbPartitionEmpty *empty = data;
  knnwb_partition_ranks_empty_others(empty->run, empty->helpers);
  return NULL;
}

/* Phase one: the groups' own lists (in a group, each on the rank its work is given to, then each
 * row's k-th distance sent to the rank that bounds it). */
static gboolean knnwb_partition_phase_one(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const KnnwbPartition *p = run->p;
  if (group == NULL || group->size <= 1)
    return knnwb_partition_own_lists(run, error);
  if (!knnwb_partition_ranks_assign_own(run, error))
    return FALSE;
  /* (split ranks first bring the rows of their groups) */
  if (run->slot == NULL && p->block_start != NULL && !knnwb_partition_split_own_rows(run, error))
    return FALSE;
  const gint64 start = g_get_monotonic_time();
  const gboolean unset = run->block_list != NULL;
  KnnwbPartitionEmpty empty = {run, MAX(1, p->threads / 2)};
  GThread *emptying =
      unset ? NULL : knnwb_thread_try_start("knnwb-empty", knnwb_partition_empty_body, &empty);
  if (emptying == NULL && !unset) /* (no thread: emptied here, before the search) */
    knnwb_partition_ranks_empty_others(run, p->threads);
  const gboolean ok = knnwb_partition_own_lists(run, error);
  const gint64 searched = g_get_monotonic_time();
  if (emptying != NULL) /* (on every way out: the helper reads the run) */
    g_thread_join(emptying);
  const gint64 emptied = g_get_monotonic_time();
  const gboolean agreed = knnwb_partition_agree(run, ok, error);
  const gint64 waited = g_get_monotonic_time();
  const gboolean sent = agreed && knnwb_partition_ranks_kth(run, error);
  const gint64 received = g_get_monotonic_time();
  g_debug("knnwb: partition: rank %d: own lists of its groups %.3f s, the other ranks' rows "
          "%s %.3f s later, then waited %.3f s for the other ranks, its block's k-th distances "
          "received in %.3f s",
          group->rank, (double)(searched - start) / 1e6, unset ? "left unset" : "emptied",
          (double)(emptied - searched) / 1e6, (double)(waited - emptied) / 1e6,
          (double)(received - waited) / 1e6);
  return sent;
}

/* The bounds of the run's rows and phase two's visitors (in a group, shared out to the ranks that
 * search their groups): *pairs they will score, *give_up when memory is short or (auto mode) what
 * remains costs more than the plain search from the start, since phase one is spent. The same
 * decision on every rank. FALSE: cancelled, the group's errors. */
static gboolean knnwb_partition_bound(KnnwbPartitionRun *run, KnnwbPartitionMode mode,
                                      gboolean *give_up, double *pairs, double *visits,
                                      GError **error)
{
  const KnnwbKnnOptions *options = run->options;
  const KnnwbKnnGroup *group =
      options->group != NULL && options->group->size > 1 ? options->group : NULL;
  const size_t groups = run->p->groups;
  gboolean found = knnwb_partition_visits(run, pairs);
  /* Test hook (as partition_ranks.c's KNNWB_PARTITION_DIFFER_RANK):
   * KNNWB_PARTITION_BOUNDS_SHORT_RANK=r makes rank r's bounds pass run short of memory, after phase
   * one: every rank gives up. */
  const char *short_rank = g_getenv("KNNWB_PARTITION_BOUNDS_SHORT_RANK");
  if (group != NULL && short_rank != NULL && *short_rank != '\0' && atoi(short_rank) == group->rank)
    found = FALSE;
  gboolean ok = TRUE;
  if (options->cancel != NULL && g_atomic_int_get(options->cancel)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled while bounding clusters");
    ok = FALSE;
  }
  if (!knnwb_partition_agree(run, ok, error))
    return FALSE;
  *visits = (double)(run->queries != NULL ? run->query_start[groups] : 0);
  *give_up = !found;
  if (group != NULL && !knnwb_partition_ranks_visitors(run, found, give_up, pairs, visits, error))
    return FALSE;
  if (group != NULL && !*give_up && run->slot != NULL &&
      !knnwb_partition_split_visitor_rows(run, error))
    return FALSE;
  const gboolean gpu = run->devices != NULL;
  const double remaining = knnwb_partition_work(gpu, *pairs, (double)groups, *visits);
  int64_t stop =
      *give_up || (mode == KNNWB_PARTITION_AUTO &&
                   remaining > knnwb_partition_plain_work(gpu, run->p->n) * MAX(run->gpus, 1));
  /* (ranks with other devices could judge differently) */
  if (group != NULL && !group->reduce(group, &stop, 1, KNNWB_GROUP_MAX, error))
    return FALSE;
  *give_up = stop != 0;
  return TRUE;
}

/* The finished lists: this process's, or (in a group) every rank's pieces combined. */
static gboolean knnwb_partition_finish(KnnwbPartitionRun *run, KnnwbNeighbors **lists,
                                       GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  g_autofree char *backend =
      run->devices != NULL ? g_strdup_printf("cuda:%d", run->gpus) : g_strdup("cpu");
  if (group == NULL || group->size <= 1) {
    run->lists->backend_used = g_steal_pointer(&backend);
    *lists = g_steal_pointer(&run->lists);
    return TRUE;
  }
  /* The rows a split rank brought serve no more: given back before its block's lists fill, with
   * the rest of the heap the search freed. Ranks keep freed blocks under 32 MiB in the heap
   * (group_mpi.c), and malloc placed the rows brought in a freed part of it: at 1,000,000 x 50
   * rows, k = 30, four ranks, 70-75 MiB a rank stayed through the combining, above phase one's
   * peak (the combining then refaults what it reuses: about 0.1 s). */
  g_clear_pointer(&run->held.values, g_free);
  if (run->p->block_start != NULL)
    knnwb_memory_trim();
  if (!knnwb_partition_ranks_combine(run, lists, error))
    return FALSE;
  (*lists)->backend_used = g_strdup_printf("%s x %d ranks", backend, group->size);
  return TRUE;
}

/* Both phases over the clusters of p; *lists stays NULL when the run gives up (the bounds rule
 * out too little: auto mode only; memory is short). In a group every rank takes its share and
 * the same decisions. */
gboolean knnwb_partition_run(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                             KnnwbPartition *p, KnnwbPartitionMode mode, double expected,
                             const char *otherwise, KnnwbNeighbors **lists, GError **error)
{
  /* (split ranks: data is this rank's block, from row p->data_first) */
  const size_t n = p->n, k = options->k;
  const gboolean split = p->block_start != NULL;
  const KnnwbKnnGroup *group = options->group;
  const int ranks = group != NULL ? MAX(group->size, 1) : 1;
  double own_pairs = 0.0;
  for (size_t c = 0; c < p->groups; c++)
    own_pairs += 0.5 * (double)(p->start[c + 1] - p->start[c]) * (p->start[c + 1] - p->start[c]);
  const double plain = 0.5 * (double)n * (double)n;
  KnnwbPartitionRun run = {.data = data,
                           .options = options,
                           .p = p,
                           .k = k,
                           .d = data->n_cols,
                           .first = 0,
                           .last = n,
                           .total = MAX(own_pairs, expected * plain) / ranks};
  if (ranks > 1)
    knnwb_partition_block_of(p, group, group->rank, &run.first, &run.last);
  const gint64 start = g_get_monotonic_time();
  /* In a group a rank's lists are not emptied first: phase one writes every row of its own groups
   * whole, and the rows of the other ranks' groups are emptied beside its search
   * (knnwb_partition_phase_one). Alone every row would be written whole, but the copies that
   * fault the pages in then cost the search more than emptying them first on every core (own
   * lists 3.44-3.51 s against 3.32-3.49 s at 10,000,000 rows, k = 30, one H200). The lists come
   * before the workers: counting the workers waits for the GPUs' start (their free memory), which
   * the emptying now overlaps. */
  /* (split ranks: once they know the rows they hold, knnwb_partition_split_own_rows) */
  run.lists = split       ? NULL
              : ranks > 1 ? knnwb_knn_result_new_unset(0, n, k, error)
                          : knnwb_knn_result_new(0, n, k, error);
  const gint64 emptied = g_get_monotonic_time();
  knnwb_partition_workers(&run, p->threads);
  g_debug("knnwb: partition: lists %s in %.3f s, then the workers counted (the GPUs' start "
          "waited for) in %.3f s",
          ranks > 1 ? "allocated" : "emptied", (double)(emptied - start) / 1e6,
          (double)(g_get_monotonic_time() - emptied) / 1e6);
  gboolean ok = knnwb_partition_agree(&run, split || run.lists != NULL, error) &&
                knnwb_partition_phase_one(&run, error);
  const gint64 own_done = g_get_monotonic_time();
  gboolean give_up = FALSE;
  double visit_pairs = 0.0, visits = 0.0;
  ok = ok && knnwb_partition_bound(&run, mode, &give_up, &visit_pairs, &visits, error);
  if (ok) {
    g_debug("knnwb: partition: %zu groups, %.3g pairs within, %.3g between (%.1f%% of all; %.0f "
            "visits), %d worker(s)%s, own lists %.3f s, bounds %.3f s%s%s%s",
            p->groups, own_pairs, visit_pairs, 100.0 * (own_pairs + visit_pairs) / plain, visits,
            run.workers, ranks > 1 ? " a rank" : "", (double)(own_done - start) / 1e6,
            (double)(g_get_monotonic_time() - own_done) / 1e6, give_up ? ": " : "",
            give_up ? otherwise : "", give_up ? " instead" : "");
    run.total = run.done + visit_pairs / ranks;
  }
  if (ok && !give_up) {
    const gint64 visits_start = g_get_monotonic_time();
    ok = knnwb_partition_agree(&run, knnwb_partition_visit_lists(&run, error), error);
    g_debug("knnwb: partition: visits %.3f s",
            (double)(g_get_monotonic_time() - visits_start) / 1e6);
    ok = ok && knnwb_partition_finish(&run, lists, error);
  }
  knnwb_partition_run_clear(&run);
  return ok;
}

gboolean knnwb_partition_enough_rows(const KnnwbKnnOptions *options, size_t n)
{
  return n >= KNNWB_PARTITION_MIN_ROWS_CPU &&
         (n >= KNNWB_PARTITION_MIN_ROWS_GPU || !knnwb_knn_expects_gpu(options));
}

double knnwb_partition_share_limit_of(gboolean gpu, gboolean ranks, int gpus)
{
  return gpu && !ranks && gpus == 1 ? KNNWB_PARTITION_SAMPLE_SHARE_ONE_GPU
                                    : KNNWB_PARTITION_SAMPLE_SHARE;
}

/* The limit for a choice that expects that share. Between the two limits the search's GPUs
 * decide, so only there is the driver's count waited for (every GPU search waits for it before
 * its first tile anyway). */
static double knnwb_partition_share_limit(const KnnwbKnnOptions *options,
                                          const KnnwbKnnGroup *group, double expected)
{
  const gboolean gpu = knnwb_knn_expects_gpu(options);
  if (expected <= KNNWB_PARTITION_SAMPLE_SHARE || expected > KNNWB_PARTITION_SAMPLE_SHARE_ONE_GPU ||
      group != NULL || !gpu)
    return knnwb_partition_share_limit_of(gpu, group != NULL, 0);
  const int gpus = knnwb_knn_run_gpus(options, NULL, 0);
  return knnwb_partition_share_limit_of(gpu, FALSE, gpus);
}

/* The threads a rank's choice and partition take: in a group sharing a host, its share of them. */
static int knnwb_partition_threads(const KnnwbKnnOptions *options, const KnnwbKnnGroup *group)
{
  const int threads = knnwb_thread_count(options->n_threads);
  if (group != NULL && options->n_threads <= 0) /* the host's cores are shared */
    return MAX(1, threads / MAX(1, group->local_size));
  return threads;
}

/* The choice on sample (the sample of n rows: the data itself, or what the ranks gathered of it),
 * into p; *made: a choice was made, *chosen: it partitions (in a group, as every rank says). FALSE:
 * the group's errors. */
gboolean knnwb_partition_pick(KnnwbPartition *p, const KnnwbMatrix *sample, size_t n,
                              const KnnwbKnnOptions *options, KnnwbPartitionMode mode,
                              const char *otherwise, double *expected, gboolean *made,
                              gboolean *chosen, GError **error)
{
  const KnnwbKnnGroup *group =
      options->group != NULL && options->group->size > 1 ? options->group : NULL;
  /* (the cost model only sets the speed: the GPUs' start is not waited for here, so that it
   * overlaps this choice and the plain search's preparation) */
  *made = knnwb_partition_choose_for(p, sample, n, options->metric, options->k,
                                     knnwb_partition_threads(options, group),
                                     knnwb_knn_expects_gpu(options), expected);
  *chosen = *made && (mode == KNNWB_PARTITION_ON ||
                      *expected <= knnwb_partition_share_limit(options, group, *expected));
  /* The ranks go on together (assigning the rows is collective) with the same centroids, and end
   * with the same partition. */
  gboolean same = TRUE;
  if (group != NULL && !knnwb_partition_ranks_agree(group, p, *chosen, otherwise, &same, error))
    return FALSE;
  *chosen = *chosen && same;
  return TRUE;
}

/* The partition p picked (knnwb_partition_pick) made whole: every row's cell, and the cells'
 * groups. In a group the ranks assign their blocks' rows and agree on the partition. FALSE: the
 * group's errors. */
gboolean knnwb_partition_settle(KnnwbPartition *p, const KnnwbMatrix *data,
                                const KnnwbMatrix *sample, const KnnwbKnnOptions *options,
                                gboolean made, double expected, gint64 start, const char *otherwise,
                                gboolean *chosen, GError **error)
{
  const KnnwbKnnGroup *group =
      options->group != NULL && options->group->size > 1 ? options->group : NULL;
  /* (assigning every row finds values that are not finite: the plain search reports them) */
  /* (the products of the assignment on the run's GPUs, where there are many centroids) */
  const gboolean gpu = knnwb_knn_expects_gpu(options);
  int share = 0, shares = 1;
  knnwb_knn_gpu_share(options, &share, &shares);
  const gboolean listed = (options->devices != NULL && options->n_devices > 0) || shares > 1;
  int *gpus = NULL, n_gpus = gpu ? -1 : 0; /* -1: every visible GPU */
  if (gpu && listed) {
    n_gpus = knnwb_knn_run_gpus(options, NULL, 0);
    gpus = g_new(int, MAX(n_gpus, 1));
    knnwb_knn_run_gpus(options, gpus, n_gpus);
  }
  *chosen = *chosen &&
            knnwb_partition_assign_all(p, data, options->k, options->cancel, group, gpus, n_gpus);
  g_free(gpus);
  const size_t cells = p->m;
  const gint64 assigned = g_get_monotonic_time();
  if (*chosen)
    knnwb_partition_group(p, sample != NULL ? sample : data, options->k, gpu);
  if (made)
    g_debug("knnwb: partition: %zu clusters (%zu groups) in %.3f s (grouping %.3f s), expected "
            "%.1f%% of the work: %s",
            cells, p->groups, (double)(g_get_monotonic_time() - start) / 1e6,
            (double)(g_get_monotonic_time() - assigned) / 1e6, 100.0 * expected,
            *chosen ? "partitioning" : otherwise);
  gboolean same = TRUE;
  if (group != NULL && !knnwb_partition_ranks_agree(group, p, *chosen, otherwise, &same, error))
    return FALSE;
  *chosen = *chosen && same;
  return TRUE;
}

/* The request's own checks: what the partitioned search applies to, for n rows of d values. */
gboolean knnwb_partition_applies_to(const KnnwbKnnOptions *options, size_t n, size_t d,
                                    size_t absent)
{
  const KnnwbMetric metric = options->metric;
  return absent == 0 &&
         (metric == KNNWB_METRIC_EUCLIDEAN || metric == KNNWB_METRIC_COSINE ||
          metric == KNNWB_METRIC_PEARSON || metric == KNNWB_METRIC_ABS_PEARSON) &&
         options->k >= 1 && options->k < n && d >= 1 && n < ((size_t)1 << 40);
}

gboolean knnwb_partition_self(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                              KnnwbNeighbors **result, GError **error)
{
  *result = NULL;
  const KnnwbPartitionMode mode = knnwb_partition_mode();
  if (knnwb_partition_depth > 0)
    return TRUE;
  const KnnwbKnnGroup *group = options->group;
  const gboolean split = group != NULL && group->size > 1 && options->group_split;
  if (split)
    return knnwb_partition_self_gathered(data, options, mode, result, error);
  /* The plain search's own checks (sizes, memory) come first: it reports what they refuse. */
  const size_t n = data->n_rows, d = data->n_cols;
  int64_t go = mode != KNNWB_PARTITION_OFF &&
               knnwb_partition_applies_to(options, n, d, data->n_absent_rows) &&
               (mode != KNNWB_PARTITION_AUTO || knnwb_partition_enough_rows(options, n)) &&
               knnwb_knn_check_sizes(n, n, d, d, n, n, TRUE, options, NULL);
  /* Ranks that each hold every row go on together: the memory each sees (and its environment)
   * may differ, and a rank that went to the plain search while the others chose would wait for
   * them for ever. */
  if (group != NULL && group->size > 1 && !group->reduce(group, &go, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  if (!go)
    return TRUE;
  const gint64 start = g_get_monotonic_time();
  KnnwbPartition p = {0};
  double expected = HUGE_VAL;
  gboolean made = FALSE, chosen = FALSE;
  gboolean ok = knnwb_partition_pick(&p, data, n, options, mode, "the plain search", &expected,
                                     &made, &chosen, error);
  ok = ok && knnwb_partition_settle(&p, data, NULL, options, made, expected, start,
                                    "the plain search", &chosen, error);
  if (ok && chosen)
    ok = knnwb_partition_run(data, options, &p, mode, expected, "the plain search", result, error);
  knnwb_partition_clear(&p);
  g_debug("knnwb: partition: %s in %.3f s", *result != NULL ? "done" : "not used",
          (double)(g_get_monotonic_time() - start) / 1e6);
  return ok;
}
