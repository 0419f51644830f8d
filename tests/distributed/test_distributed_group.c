/*
 * Core's group path with in-process ranks: threads share memory through a KnnwbKnnGroup of
 * barriers, so the sharing of tiles and query panels, the candidate merge, the agreement on errors
 * and the gathering of lists run under the sanitizers without MPI. Every result must equal the
 * lists of one process, byte for byte.
 */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/knnwb.h>
#include "knnwb_test_matrix.h"
#include "../core/oracle.h"
#include "engine/engine_internal.h"
#include "group/group.h"
#include "split/split_internal.h"

#define MAX_RANKS 4

typedef struct {
  int size;
  GMutex lock;
  GCond cond;
  int waiting, generation;
  /* what each rank published for the operation in progress */
  const void *const *send[MAX_RANKS];
  const size_t *send_bytes[MAX_RANKS];
  gboolean ok[MAX_RANKS];
  GError *error[MAX_RANKS];
  int64_t *values[MAX_RANKS];
  void *blocks[MAX_RANKS];
  size_t asked[MAX_RANKS];    /* share_begin's bytes, each rank's */
  uint32_t *board[MAX_RANKS]; /* the board's entries (float bits), each rank's own */
  gint reduces;               /* reduce calls, every rank's */
} ThreadJob;

typedef struct {
  KnnwbKnnGroup group;
  ThreadJob *job;
} ThreadRank;

static void thread_job_barrier(ThreadJob *job)
{
  g_mutex_lock(&job->lock);
  int generation = job->generation;
  if (++job->waiting == job->size) {
    job->waiting = 0;
    job->generation++;
    g_cond_broadcast(&job->cond);
  } else {
    while (generation == job->generation)
      g_cond_wait(&job->cond, &job->lock);
  }
  g_mutex_unlock(&job->lock);
}

static ThreadJob *thread_job_of(const KnnwbKnnGroup *group)
{
  return ((const ThreadRank *)group)->job;
}

static gboolean thread_agree(const KnnwbKnnGroup *group, gboolean ok, GError **error)
{
  ThreadJob *job = thread_job_of(group);
  job->ok[group->rank] = ok;
  job->error[group->rank] = ok || error == NULL || *error == NULL ? NULL : g_error_copy(*error);
  thread_job_barrier(job);
  int lowest = -1;
  for (int r = 0; r < job->size && lowest < 0; r++)
    if (!job->ok[r])
      lowest = r;
  if (lowest >= 0 && error != NULL) {
    const GError *failed = job->error[lowest];
    const char *message = failed ? failed->message : "failed";
    g_autofree char *prefix = g_strdup_printf("rank %d: ", lowest);
    GError *agreed = g_error_new(failed ? failed->domain : KNNWB_ERROR,
                                 failed ? failed->code : KNNWB_ERROR_FAILED, "%s%s",
                                 g_str_has_prefix(message, "rank ") ? "" : prefix, message);
    thread_job_barrier(job); /* everyone has read the errors */
    g_clear_error(error);
    *error = agreed;
  } else {
    thread_job_barrier(job);
  }
  g_clear_error(&job->error[group->rank]);
  thread_job_barrier(job);
  return lowest < 0;
}

static gboolean thread_exchange(const KnnwbKnnGroup *group, const void *const *send,
                                const size_t *send_bytes, void *const *receive,
                                const size_t *receive_bytes, GError **error)
{
  (void)error;
  ThreadJob *job = thread_job_of(group);
  job->send[group->rank] = send;
  job->send_bytes[group->rank] = send_bytes;
  thread_job_barrier(job);
  for (int r = 0; r < job->size; r++) {
    g_assert_cmpuint(job->send_bytes[r][group->rank], ==, receive_bytes[r]);
    if (receive_bytes[r] > 0)
      memcpy(receive[r], job->send[r][group->rank], receive_bytes[r]);
  }
  thread_job_barrier(job); /* the senders' buffers stay until every copy is done */
  return TRUE;
}

static gboolean thread_reduce(const KnnwbKnnGroup *group, int64_t *values, size_t count,
                              KnnwbGroupReduction reduction, GError **error)
{
  (void)error;
  ThreadJob *job = thread_job_of(group);
  g_atomic_int_inc(&job->reduces);
  job->values[group->rank] = values;
  thread_job_barrier(job);
  /* Each rank reduces for itself (any count), then all write once every rank has read. */
  g_autofree int64_t *result = g_new(int64_t, MAX(count, (size_t)1));
  for (size_t i = 0; i < count; i++) {
    int64_t v = job->values[0][i];
    for (int r = 1; r < job->size; r++) {
      int64_t w = job->values[r][i];
      v = reduction == KNNWB_GROUP_SUM   ? v + w
          : reduction == KNNWB_GROUP_MIN ? MIN(v, w)
                                         : MAX(v, w);
    }
    result[i] = v;
  }
  thread_job_barrier(job);
  memcpy(values, result, count * sizeof(int64_t));
  thread_job_barrier(job);
  return TRUE;
}

/* The board of bounds: each rank's own entries, read by the others without any barrier (whole
 * entries through atomics, as the processor gives them between MPI ranks). */
static gboolean thread_board_open(const KnnwbKnnGroup *group, size_t n, GError **error)
{
  (void)error;
  ThreadJob *job = thread_job_of(group);
  const float none = INFINITY;
  uint32_t bits;
  memcpy(&bits, &none, sizeof bits);
  job->board[group->rank] = g_new(uint32_t, MAX(n, (size_t)1));
  for (size_t i = 0; i < n; i++)
    job->board[group->rank][i] = bits;
  thread_job_barrier(job);
  return TRUE;
}

static float thread_board_entry(const uint32_t *entries, size_t i)
{
  const uint32_t bits = __atomic_load_n(&entries[i], __ATOMIC_ACQUIRE);
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

static size_t thread_board_lower(const KnnwbKnnGroup *group, float *values, size_t n)
{
  ThreadJob *job = thread_job_of(group);
  uint32_t *mine = job->board[group->rank];
  size_t lowered = 0;
  for (size_t i = 0; i < n; i++) {
    if (values[i] < thread_board_entry(mine, i)) {
      uint32_t bits;
      memcpy(&bits, &values[i], sizeof bits);
      __atomic_store_n(&mine[i], bits, __ATOMIC_RELEASE);
    }
    const float own = thread_board_entry(mine, i);
    for (int r = 0; r < job->size; r++)
      if (r != group->rank)
        values[i] = MIN(values[i], thread_board_entry(job->board[r], i));
    lowered += values[i] < own;
  }
  return lowered;
}

static gboolean thread_board_close(const KnnwbKnnGroup *group, GError **error)
{
  (void)error;
  ThreadJob *job = thread_job_of(group);
  thread_job_barrier(job); /* nobody reads any more */
  g_clear_pointer(&job->board[group->rank], g_free);
  return TRUE;
}

/* Rank rank of ranks over the thread job's barriers, with or without the board. */
static KnnwbKnnGroup thread_group(int rank, int ranks, gboolean board)
{
  return (KnnwbKnnGroup){.rank = rank,
                         .size = ranks,
                         .local_size = ranks,
                         .local_rank = rank,
                         .agree = thread_agree,
                         .exchange = thread_exchange,
                         .reduce = thread_reduce,
                         .board_open = board ? thread_board_open : NULL,
                         .board_lower = board ? thread_board_lower : NULL,
                         .board_close = board ? thread_board_close : NULL};
}

/* Tests of a host whose shared memory is short: blocks of more than this many bytes a rank are
 * refused (0: none); the refusals, and the blocks granted while a limit holds, counted. */
static size_t thread_share_limit;
static gint thread_share_refused, thread_share_granted;

/* Blocks every rank reads (the group's optional zero-copy path): each rank's own allocation. */
static gboolean thread_share_begin(const KnnwbKnnGroup *group, size_t bytes, void **blocks,
                                   GError **error)
{
  (void)error;
  ThreadJob *job = thread_job_of(group);
  if (thread_share_limit > 0) {
    /* the ranks refuse together when the largest request is over the limit, as MPI's do */
    job->asked[group->rank] = bytes;
    thread_job_barrier(job);
    size_t largest = 0;
    for (int r = 0; r < job->size; r++)
      largest = MAX(largest, job->asked[r]);
    thread_job_barrier(job); /* every rank has read asked[] before it is written again */
    if (largest > thread_share_limit) {
      g_atomic_int_inc(&thread_share_refused);
      return FALSE;
    }
    g_atomic_int_inc(&thread_share_granted);
  }
  /* (a rank that began again before share_end would keep the host's blocks for nothing) */
  g_assert_null(job->blocks[group->rank]);
  job->blocks[group->rank] = g_malloc(MAX(bytes, (size_t)1));
  thread_job_barrier(job);
  memcpy(blocks, job->blocks, (size_t)job->size * sizeof(void *));
  return TRUE;
}

static gboolean thread_share_sync(const KnnwbKnnGroup *group, GError **error)
{
  (void)error;
  thread_job_barrier(thread_job_of(group));
  return TRUE;
}

static gboolean thread_share_end(const KnnwbKnnGroup *group, GError **error)
{
  (void)error;
  ThreadJob *job = thread_job_of(group);
  thread_job_barrier(job); /* nobody reads any block any more */
  g_clear_pointer(&job->blocks[group->rank], g_free);
  return TRUE;
}

/* Every other group run shares blocks (zero-copy candidates), the others exchange messages, so
 * that both paths of core's merge run through every kind of case. */
static gboolean thread_share_next;

typedef struct {
  ThreadRank rank;
  const KnnwbMatrix *query, *reference; /* reference NULL: self */
  KnnwbKnnOptions options;
  KnnwbNeighbors *result;
  GError *error;
  /* Own rows' lists, then knnwb_neighbors_gather_root: every list on rank 0, none elsewhere. */
  gboolean gather_root;
  /* Non-NULL: knnwb_neighbourhood_find_split of these focus rows over the even blocks of query. */
  const int64_t *focus;
  size_t n_focus;
  int order;
  KnnwbDirection direction;
  KnnwbNeighbourhood *neighbourhood;
  KnnwbMatrix *members; /* rank 0: the neighbourhood's rows, in vertex order */
  /* A split run's input_done (options.input_done set): its data becomes this run, whose block
   * (query_block, the rank's own) it is told of, and its calls are counted here. */
  GThread *thread;
  KnnwbMatrix *query_block;
  int input_done_calls;
} RankRun;

/* Uneven blocks for split runs (NULL: knnwb_knn_group_rows's): rank r gets rows
 * [cuts[r], cuts[r + 1]) of the query matrix (and the even share of a reference). */
static const size_t *rank_cuts;
/* The rank whose block lacks its last column (-1: none): blocks of different widths. */
static int rank_narrow = -1;
/* Blocks as copies, not views into the whole matrix: a read outside a rank's block is then no
 * longer a read of the right values. */
static gboolean rank_copies;
/* Blocks as a rank that read the input whole holds them: its share of its own copy of the whole
 * matrix (knnwb_matrix_new_block_of); rank_not_whole (>= 0) gets a plain copy instead. */
static gboolean rank_whole_views;
static int rank_not_whole = -1;
/* Each rank's count of ranks on its host (NULL: every rank on one host): the share of the host's
 * memory a rank takes (KNNWB_PARTITION_GATHER_ROOM gives the host's), so that ranks differ. */
static const int *rank_local_sizes;

/* The rank's block of a matrix (split memory): a view of its rows, which it alone gets. */
static KnnwbMatrix *rank_block(const KnnwbMatrix *whole, const KnnwbKnnGroup *group,
                               gboolean uneven)
{
  size_t first, last;
  knnwb_knn_group_rows(whole->n_rows, group->rank, group->size, &first, &last);
  if (uneven && rank_cuts != NULL) {
    first = rank_cuts[group->rank];
    last = rank_cuts[group->rank + 1];
  }
  if (rank_whole_views && group->rank != rank_not_whole) {
    KnnwbMatrix *copy = knnwb_matrix_new(whole->n_rows, whole->n_cols, NULL);
    memcpy(copy->values, whole->values, whole->n_rows * whole->n_cols * sizeof(float));
    return knnwb_matrix_new_block_of(copy, first, last - first);
  }
  if (rank_copies || rank_whole_views || group->rank == rank_narrow) {
    /* a copy (without the last column) */
    const size_t d = whole->n_cols - (group->rank == rank_narrow);
    KnnwbMatrix *narrow = knnwb_matrix_new(last - first, d, NULL);
    for (size_t i = first; i < last; i++)
      memcpy(narrow->values + (i - first) * d, whole->values + i * whole->n_cols,
             d * sizeof(float));
    return narrow;
  }
  KnnwbMatrix *block = knnwb_matrix_new_wrapped(last - first, whole->n_cols,
                                                whole->values + first * whole->n_cols, NULL, NULL);
  for (size_t i = first; i < last && whole->row_labels != NULL; i++) /* as a reader gives them */
    knnwb_matrix_set_row_label(block, i - first, knnwb_matrix_row_label(whole, i));
  return block;
}

/* igraph as Debian builds it is not thread-safe (IGRAPH_THREAD_SAFE 0): the neighbourhood's ranks
 * compute one at a time, holding rank_turn, and let go of it only inside the group's operations,
 * where they meet (as processes would). */
static GMutex rank_turn;

static gboolean turn_agree(const KnnwbKnnGroup *group, gboolean ok, GError **error)
{
  g_mutex_unlock(&rank_turn);
  gboolean agreed = thread_agree(group, ok, error);
  g_mutex_lock(&rank_turn);
  return agreed;
}

static gboolean turn_exchange(const KnnwbKnnGroup *group, const void *const *send,
                              const size_t *send_bytes, void *const *receive,
                              const size_t *receive_bytes, GError **error)
{
  g_mutex_unlock(&rank_turn);
  gboolean ok = thread_exchange(group, send, send_bytes, receive, receive_bytes, error);
  g_mutex_lock(&rank_turn);
  return ok;
}

static gboolean turn_reduce(const KnnwbKnnGroup *group, int64_t *values, size_t count,
                            KnnwbGroupReduction reduction, GError **error)
{
  g_mutex_unlock(&rank_turn);
  gboolean ok = thread_reduce(group, values, count, reduction, error);
  g_mutex_lock(&rank_turn);
  return ok;
}

/* A neighbourhood searched over split rows: each rank passes its even block. */
static void rank_neighbourhood(RankRun *run)
{
  const KnnwbKnnGroup *group = &run->rank.group;
  g_autofree size_t *first = g_new(size_t, (size_t)group->size + 1);
  for (int r = 0; r < group->size; r++) {
    size_t last;
    knnwb_knn_group_rows(run->query->n_rows, r, group->size, &first[r], &last);
    first[r + 1] = last;
  }
  g_autoptr(KnnwbMatrix) block = rank_block(run->query, group, FALSE);
  g_mutex_lock(&rank_turn);
  knnwb_neighbourhood_find_split(group, block, first, run->focus, run->n_focus, run->order,
                                 run->direction, &run->options, &run->neighbourhood, &run->members,
                                 &run->error);
  g_mutex_unlock(&rank_turn);
}

static gpointer rank_main(gpointer data)
{
  RankRun *run = data;
  run->options.group = &run->rank.group;
  if (run->focus != NULL) {
    rank_neighbourhood(run);
    return NULL;
  }
  g_autoptr(KnnwbMatrix) query_block = NULL, reference_block = NULL;
  const KnnwbMatrix *query = run->query, *reference = run->reference;
  if (run->options.group_split && run->rank.group.size > 1) {
    query = query_block = rank_block(run->query, &run->rank.group, TRUE);
    if (reference != NULL)
      reference = reference_block = rank_block(run->reference, &run->rank.group, FALSE);
  }
  run->thread = g_thread_self();
  run->query_block = query_block;
  if (run->options.input_done != NULL)
    run->options.input_done_data = run;
  if (reference == NULL)
    knnwb_knn_self(query, &run->options, &run->result, &run->error);
  else
    knnwb_knn_query(query, reference, &run->options, &run->result, &run->error);
  if (run->gather_root && run->result != NULL) {
    g_autoptr(KnnwbNeighbors) own = g_steal_pointer(&run->result);
    knnwb_neighbors_gather_root(&run->rank.group, own, &run->result, &run->error);
  }
  return NULL;
}

/* Runs the request on ranks threads, with what task (may be NULL) asks besides: the root gather
 * (gather_root) or a split neighbourhood (focus ...); results[r] / errors[r] per rank (caller
 * frees). */
static void run_ranks_task(int ranks, const KnnwbMatrix *query, const KnnwbMatrix *reference,
                           const KnnwbKnnOptions *options, const RankRun *task_or_null,
                           RankRun *runs)
{
  const RankRun task = task_or_null ? *task_or_null : (RankRun){0};
  ThreadJob job = {.size = ranks};
  g_mutex_init(&job.lock);
  g_cond_init(&job.cond);
  GThread *threads[MAX_RANKS];
  for (int r = 0; r < ranks; r++) {
    runs[r] = (RankRun){.query = query,
                        .reference = reference,
                        .options = *options,
                        .gather_root = task.gather_root,
                        .focus = task.focus,
                        .n_focus = task.n_focus,
                        .order = task.order,
                        .direction = task.direction};
    runs[r].rank.job = &job;
    runs[r].rank.group =
        (KnnwbKnnGroup){.rank = r,
                        .size = ranks,
                        .local_size = rank_local_sizes ? rank_local_sizes[r] : ranks,
                        .local_rank = rank_local_sizes ? 0 : r,
                        .agree = task.focus ? turn_agree : thread_agree,
                        .exchange = task.focus ? turn_exchange : thread_exchange,
                        .reduce = task.focus ? turn_reduce : thread_reduce};
    /* (The turn-taking group of the focus tasks keeps to messages.) */
    if (thread_share_next && !task.focus) {
      runs[r].rank.group.share_begin = thread_share_begin;
      runs[r].rank.group.share_sync = thread_share_sync;
      runs[r].rank.group.share_end = thread_share_end;
    }
    threads[r] = g_thread_new("rank", rank_main, &runs[r]);
  }
  for (int r = 0; r < ranks; r++)
    g_thread_join(threads[r]);
  for (int r = 0; r < ranks; r++) /* every block lent was given back (share_end) */
    g_assert_null(job.blocks[r]);
  thread_share_next = !thread_share_next;
  g_mutex_clear(&job.lock);
  g_cond_clear(&job.cond);
}

/* The plain request. */
static void run_ranks(int ranks, const KnnwbMatrix *query, const KnnwbMatrix *reference,
                      const KnnwbKnnOptions *options, RankRun *runs)
{
  run_ranks_task(ranks, query, reference, options, NULL, runs);
}

/* One thread, 32-row blocks (many tiles to share between ranks), the CPU backend. */
static void small_cpu_options(KnnwbKnnOptions *options, KnnwbMetric metric, size_t k)
{
  knnwb_knn_options_init(options);
  options->metric = metric;
  options->k = k;
  options->backend = KNNWB_BACKEND_CPU;
  options->n_threads = 1;
  options->memory_bytes = 4096;
}

/* One process's lists (the bytes every split run must give): queries against data, or data's
 * self graph when queries is NULL. */
static KnnwbNeighbors *one_process_lists(const KnnwbMatrix *queries, const KnnwbMatrix *data,
                                         const KnnwbKnnOptions *options)
{
  g_autoptr(GError) error = NULL;
  KnnwbNeighbors *lists = NULL;
  if (queries != NULL)
    g_assert_true(knnwb_knn_query(queries, data, options, &lists, &error));
  else
    g_assert_true(knnwb_knn_self(data, options, &lists, &error));
  g_assert_no_error(error);
  return lists;
}

static void assert_same_rows(const KnnwbNeighbors *expected, const KnnwbNeighbors *got)
{
  const size_t k = expected->k;
  g_assert_cmpuint(got->k, ==, k);
  g_assert_cmpuint(got->first_row + got->n_queries, <=, expected->n_queries);
  const size_t first = got->first_row, rows = got->n_queries;
  g_assert_cmpmem(expected->indices + first * k, rows * k * sizeof(int64_t), got->indices,
                  rows * k * sizeof(int64_t));
  g_assert_cmpmem(expected->distances + first * k, rows * k * sizeof(double), got->distances,
                  rows * k * sizeof(double));
  g_assert_cmpmem(expected->n_found + first, rows * sizeof(int32_t), got->n_found,
                  rows * sizeof(int32_t));
}

static void check_case_split(KnnwbMetric metric, size_t n, size_t nq, size_t d, size_t k,
                             gboolean own, size_t copies, gboolean split)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(n, d, (guint32)(n * 31 + d));
  /* Exact duplicate rows take the core's collapse-and-expand path. */
  for (size_t c = 1; c <= copies && 7 * c < n; c++)
    memcpy(data->values + 7 * c * d, data->values + 3 * d, d * sizeof(float));
  g_autoptr(KnnwbMatrix) queries = nq ? knnwb_test_random_matrix(nq, d, (guint32)(nq + 7)) : NULL;
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = 1;
  options.memory_bytes = 4096; /* 32-row blocks: many tiles to share */
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbNeighbors) expected = NULL;
  if (queries)
    g_assert_true(knnwb_knn_query(queries, data, &options, &expected, &error));
  else
    g_assert_true(knnwb_knn_self(data, &options, &expected, &error));
  g_assert_no_error(error);
  options.group_own_rows = own;
  options.group_split = split;
  for (int ranks = 1; ranks <= MAX_RANKS; ranks++) {
    RankRun runs[MAX_RANKS];
    run_ranks(ranks, queries ? queries : data, queries ? data : NULL, &options, runs);
    size_t covered = 0;
    for (int r = 0; r < ranks; r++) {
      g_assert_no_error(runs[r].error);
      g_assert_nonnull(runs[r].result);
      if (own && ranks > 1) {
        g_assert_cmpuint(runs[r].result->first_row, ==, covered);
        covered += runs[r].result->n_queries;
      } else {
        g_assert_cmpuint(runs[r].result->n_queries, ==, expected->n_queries);
      }
      assert_same_rows(expected, runs[r].result);
      knnwb_neighbors_free(runs[r].result);
    }
    if (own && ranks > 1)
      g_assert_cmpuint(covered, ==, expected->n_queries);
    if (!own || !split || ranks == 1)
      continue;
    /* Each rank's own lists gathered on rank 0 alone: all rows there, nothing elsewhere. */
    const RankRun task = {.gather_root = TRUE};
    run_ranks_task(ranks, queries ? queries : data, queries ? data : NULL, &options, &task, runs);
    for (int r = 0; r < ranks; r++) {
      g_assert_no_error(runs[r].error);
      if (r > 0) {
        g_assert_null(runs[r].result);
        continue;
      }
      g_assert_cmpuint(runs[r].result->first_row, ==, 0);
      g_assert_cmpuint(runs[r].result->n_queries, ==, expected->n_queries);
      assert_same_rows(expected, runs[r].result);
      knnwb_neighbors_free(runs[r].result);
    }
  }
}

static void check_case_copies(KnnwbMetric metric, size_t n, size_t nq, size_t d, size_t k,
                              gboolean own, size_t copies)
{
  check_case_split(metric, n, nq, d, k, own, copies, FALSE);
  check_case_split(metric, n, nq, d, k, own, copies, TRUE);
  /* The split path of backends without two-sided jobs (CUDA): each pair of blocks as two panels. */
  g_setenv("KNNWB_SPLIT_PANELS", "1", TRUE);
  check_case_split(metric, n, nq, d, k, own, copies, TRUE);
  g_unsetenv("KNNWB_SPLIT_PANELS");
}

static void check_case(KnnwbMetric metric, size_t n, size_t nq, size_t d, size_t k, gboolean own)
{
  check_case_copies(metric, n, nq, d, k, own, 0);
}

static void test_every_metric(void)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON,   KNNWB_METRIC_ABS_PEARSON,
                                        KNNWB_METRIC_SPEARMAN,  KNNWB_METRIC_EUCLIDEAN,
                                        KNNWB_METRIC_MANHATTAN, KNNWB_METRIC_COSINE};
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
    check_case(metrics[m], 203, 0, 11, 7, FALSE);  /* self, all rows on every rank */
    check_case(metrics[m], 203, 0, 11, 7, TRUE);   /* self, each rank its rows */
    check_case(metrics[m], 203, 37, 11, 5, FALSE); /* query panels */
    check_case(metrics[m], 203, 37, 11, 5, TRUE);
  }
}

/* Fewer rows than ranks, k = n - 1, k + 1 rows, one block. */
static void test_odd_sizes(void)
{
  check_case(KNNWB_METRIC_EUCLIDEAN, 2, 0, 3, 1, TRUE);
  check_case(KNNWB_METRIC_PEARSON, 3, 0, 4, 2, FALSE);
  check_case(KNNWB_METRIC_MANHATTAN, 33, 0, 5, 32, TRUE);
  check_case(KNNWB_METRIC_COSINE, 65, 3, 9, 64, FALSE);
  check_case(KNNWB_METRIC_SPEARMAN, 1, 2, 4, 1, TRUE); /* one reference row, two queries */
}

/* Copies of one row (more than the candidate margin) in the self graph. */
static void test_duplicate_rows(void)
{
  check_case_copies(KNNWB_METRIC_PEARSON, 150, 0, 6, 5, FALSE, 12);
  check_case_copies(KNNWB_METRIC_EUCLIDEAN, 150, 0, 6, 5, TRUE, 12);
  check_case_copies(KNNWB_METRIC_MANHATTAN, 150, 20, 6, 5, TRUE, 12);
}

/* Every one of the ranks failed on invalid data, with the message that starts with prefix. */
static void assert_ranks_refused(RankRun *runs, int ranks, const char *prefix)
{
  for (int r = 0; r < ranks; r++) {
    g_assert_null(runs[r].result);
    g_assert_error(runs[r].error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
    g_assert_true(g_str_has_prefix(runs[r].error->message, prefix));
    g_clear_error(&runs[r].error);
  }
}

/* One rank's call of knnwb_knn_group_agree_backend (core/group/): what it passes, what it got. */
typedef struct {
  ThreadRank rank;
  gboolean ok, has_backend, on_gpu, agreed;
  GError *error;
} BackendRank;

static gpointer backend_rank_main(gpointer data)
{
  BackendRank *b = data;
  GError *own = b->ok ? NULL : g_error_new(KNNWB_ERROR, KNNWB_ERROR_IO, "own failure");
  b->agreed = knnwb_knn_group_agree_backend(&b->rank.group, b->ok, b->has_backend, b->on_gpu, &own);
  b->error = own;
  return NULL;
}

/* The ranks agree on one kind of backend: all on the CPU (or all on GPUs) go on; a rank on the CPU
 * among ranks on GPUs (more ranks than GPUs) fails every rank with a message that says so; a rank
 * that failed by itself fails all with its own error; a rank without a backend (its own failure,
 * nothing to do) is no vote. */
static void test_ranks_agree_backend(void)
{
  const struct {
    gboolean ok[3], has[3], gpu[3], agreed;
    const char *message;
  } cases[] = {
      {{1, 1, 1}, {1, 1, 1}, {0, 0, 0}, TRUE, NULL},
      {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, TRUE, NULL},
      {{1, 1, 1}, {1, 1, 1}, {1, 0, 1}, FALSE, "rank 0: the ranks differ in their backend"},
      {{1, 1, 1}, {1, 1, 1}, {0, 1, 1}, FALSE, "rank 0: the ranks differ in their backend"},
      {{1, 0, 1}, {1, 0, 1}, {1, 0, 1}, FALSE, "rank 1: own failure"},
      {{1, 1, 1}, {1, 0, 1}, {1, 0, 1}, TRUE, NULL},
  };
  for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
    ThreadJob job = {.size = 3};
    g_mutex_init(&job.lock);
    g_cond_init(&job.cond);
    BackendRank ranks[3];
    GThread *threads[3];
    for (int r = 0; r < 3; r++) {
      ranks[r] = (BackendRank){
          .ok = cases[c].ok[r], .has_backend = cases[c].has[r], .on_gpu = cases[c].gpu[r]};
      ranks[r].rank.job = &job;
      ranks[r].rank.group = thread_group(r, 3, FALSE);
      threads[r] = g_thread_new("rank", backend_rank_main, &ranks[r]);
    }
    for (int r = 0; r < 3; r++)
      g_thread_join(threads[r]);
    for (int r = 0; r < 3; r++) {
      g_assert_cmpint(ranks[r].agreed, ==, cases[c].agreed);
      if (cases[c].message == NULL)
        g_assert_no_error(ranks[r].error);
      else
        g_assert_true(g_str_has_prefix(ranks[r].error->message, cases[c].message));
      g_clear_error(&ranks[r].error);
    }
    g_mutex_clear(&job.lock);
    g_cond_clear(&job.cond);
  }
}

/* A self graph of data on 2 .. MAX_RANKS ranks: every rank's rows as expected's, no error. */
static void assert_ranks_self_lists(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                                    const KnnwbNeighbors *expected)
{
  for (int ranks = 2; ranks <= MAX_RANKS; ranks++) {
    RankRun runs[MAX_RANKS];
    run_ranks(ranks, data, NULL, options, runs);
    for (int r = 0; r < ranks; r++) {
      g_assert_no_error(runs[r].error);
      assert_same_rows(expected, runs[r].result);
      knnwb_neighbors_free(runs[r].result);
    }
  }
}

/* A NaN in rank 2's rows: only rank 2 reports it (the others, preparing every row, leave it
 * unprepared), every rank fails with its message; for the default metric, spearman (whose ranks
 * must not sort a NaN) and euclidean (whose column means it makes NaN). */
static void test_failing_rank(void)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(100, 6, 5);
  data->values[90 * 6 + 2] = NAN; /* rows 75..99 are rank 2's of 3 */
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  const KnnwbMetric metrics[] = {options.metric, KNNWB_METRIC_SPEARMAN, KNNWB_METRIC_EUCLIDEAN};
  options.k = 4;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = 1;
  for (size_t m = 0; m < G_N_ELEMENTS(metrics); m++)
    for (int split = 0; split <= 1; split++) {
      /* Split: rank 2 holds rows 67..99 only, and still names the row by its number in all. */
      options.metric = metrics[m];
      options.group_split = split;
      RankRun runs[MAX_RANKS];
      run_ranks(3, data, NULL, &options, runs);
      assert_ranks_refused(runs, 3, "rank 2: row 90, column 2 (both counted from 0) holds NaN");
    }
}

/* Split memory on data whose global statistics matter: dropped degenerate rows (constant rows in
 * several blocks, pearson and cosine with zero rows), and euclidean rows far from the origin and
 * of mixed scale (the shared column means and scale come from block sums). Bytes as one process. */
static void test_split_global_statistics(void)
{
  /* Dropping rows warns (each rank about its own rows): expected here, not fatal. */
  GLogLevelFlags fatal = g_log_set_always_fatal(G_LOG_FATAL_MASK);
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_COSINE,
                                        KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN};
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
    g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(157, 9, 77 + m);
    for (size_t i = 0; i < 157; i++)
      for (size_t j = 0; j < 9; j++) {
        float *value = &data->values[i * 9 + j];
        if (metrics[m] == KNNWB_METRIC_EUCLIDEAN || metrics[m] == KNNWB_METRIC_MANHATTAN)
          *value = *value * (i % 3 == 0 ? 1e3f : 1.0f) + 1e4f;
        else if (i % 50 == 7)
          *value = metrics[m] == KNNWB_METRIC_COSINE ? 0.0f : 3.0f; /* rows 7, 57, 107 */
      }
    KnnwbKnnOptions options;
    knnwb_knn_options_init(&options);
    options.metric = metrics[m];
    options.k = 6;
    options.backend = KNNWB_BACKEND_CPU;
    options.n_threads = 1;
    options.memory_bytes = 4096;
    options.drop_degenerate = TRUE;
    g_autoptr(GError) error = NULL;
    g_autoptr(KnnwbNeighbors) expected = NULL;
    g_assert_true(knnwb_knn_self(data, &options, &expected, &error));
    options.group_split = TRUE;
    for (int way = 0; way <= 2; way++) {
      if (way >= 1) { /* the GPUs' panels, their k best refined by the backend; 2: a pair's two
                       * panels as one job for both sides */
        g_setenv("KNNWB_SPLIT_PANELS", "1", TRUE);
        g_setenv("KNNWB_SPLIT_TEST_EXACT", way == 2 ? "4" : "3", TRUE);
      }
      assert_ranks_self_lists(data, &options, expected);
      g_unsetenv("KNNWB_SPLIT_PANELS");
      g_unsetenv("KNNWB_SPLIT_TEST_EXACT");
    }
  }
  g_log_set_always_fatal(fatal);
}

/* Blocks of any sizes (text read by byte ranges gives uneven ones), one of them empty. */
static void test_split_uneven_blocks(void)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(131, 7, 21);
  g_autoptr(KnnwbMatrix) queries = knnwb_test_random_matrix(131, 7, 22);
  static const size_t three[] = {0, 9, 9, 131}, four[] = {0, 70, 71, 100, 131};
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_EUCLIDEAN};
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++)
    for (int query = 0; query <= 1; query++) {
      KnnwbKnnOptions options;
      small_cpu_options(&options, metrics[m], 5);
      g_autoptr(KnnwbNeighbors) expected =
          one_process_lists(query ? queries : NULL, data, &options);
      options.group_split = TRUE;
      for (int ranks = 3; ranks <= 4; ranks++) {
        rank_cuts = ranks == 3 ? three : four;
        for (int way = 0; way < 9; way++) {
          /* way 0: the CPU's two-sided jobs, blocks shared every other run; 1: the same with
           * shared blocks, the last pair in halves and the exact distances returned by the
           * backend; 2-8: the panels of the GPUs with shared blocks, their exact distances
           * returned by the backend (2), their k best refined by it (3), every other job's
           * distances (6-7), the lists that go back sent (4-5), or the
           * window refused room for them (6-7: the block alone shared); 8: as 3, a pair's two
           * panels as one job for both sides (two pairs in three) */
          const int panels = way >= 2, limited = way == 6 || way == 7;
          options.group_own_rows = way % 2;
          if (way == 1) {
            g_setenv("KNNWB_SPLIT_CHUNKS", "0", TRUE);
            g_setenv("KNNWB_SPLIT_TEST_EXACT", "1", TRUE);
            thread_share_next = TRUE;
          }
          if (panels) {
            g_setenv("KNNWB_SPLIT_PANELS", "1", TRUE);
            g_setenv("KNNWB_SPLIT_TEST_EXACT",
                     way == 2   ? "1"
                     : way == 3 ? "3"
                     : way == 8 ? "4"
                     : way >= 6 ? "2"
                                : "0",
                     TRUE);
            if (way >= 4 && way < 6)
              g_setenv("KNNWB_SPLIT_BACK_SHARED", "0", TRUE);
            thread_share_next = TRUE;
          }
          const size_t largest = ranks == 3 ? 122 : 70;
          /* the block alone (under 84 bytes a row at d = 7) fits, not the block and the lists
           * that go back (84 bytes a row at k = 5): asserted below */
          thread_share_limit = limited ? knnwb_split_best_bytes(largest, 5) : 0;
          const gint refused = g_atomic_int_get(&thread_share_refused),
                     granted = g_atomic_int_get(&thread_share_granted);
          RankRun runs[MAX_RANKS];
          run_ranks(ranks, query ? queries : data, query ? data : NULL, &options, runs);
          thread_share_limit = 0;
          g_unsetenv("KNNWB_SPLIT_PANELS");
          g_unsetenv("KNNWB_SPLIT_CHUNKS");
          g_unsetenv("KNNWB_SPLIT_TEST_EXACT");
          g_unsetenv("KNNWB_SPLIT_BACK_SHARED");
          if (limited && !query) { /* the lists' window refused, the block's granted */
            g_assert_cmpint(g_atomic_int_get(&thread_share_refused), >, refused);
            g_assert_cmpint(g_atomic_int_get(&thread_share_granted), >, granted);
          }
          for (int r = 0; r < ranks; r++) {
            g_assert_no_error(runs[r].error);
            if (options.group_own_rows)
              g_assert_cmpuint(runs[r].result->first_row, ==, rank_cuts[r]);
            assert_same_rows(expected, runs[r].result);
            knnwb_neighbors_free(runs[r].result);
          }
        }
      }
      rank_cuts = NULL;
    }
}

/*
 * Split runs start every step after the first with each row's kc-th best score so far as its
 * threshold, and compute the exact distances of the first step's candidates only where refine
 * needs them. Small integer values give many pairs of equal score and equal distance (ties at the
 * thresholds and at the k-th neighbour): for 1-4 ranks, two-sided and two-panel, self and query,
 * the lists must be one process's bytes and the double oracle's neighbours, ties by lower index.
 */
static void test_split_thresholds_ties(void)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN,
                                        KNNWB_METRIC_PEARSON, KNNWB_METRIC_COSINE};
  const size_t n = 233, nq = 41, d = 5;
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
    g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
    g_autoptr(KnnwbMatrix) queries = knnwb_matrix_new(nq, d, NULL);
    g_autoptr(GRand) rng = g_rand_new_with_seed(40 + m);
    for (size_t i = 0; i < (n + nq) * d; i++) {
      float *value = i < n * d ? &data->values[i] : &queries->values[i - n * d];
      *value = (float)g_rand_int_range(rng, -2, 3);
    }
    /* No constant row (correlations): the first two columns differ. */
    for (size_t i = 0; i < n + nq; i++) {
      float *row = i < n ? data->values + i * d : queries->values + (i - n) * d;
      if (row[0] == row[1])
        row[1] = row[0] + 1.0f;
    }
    for (int query = 0; query <= 1; query++) {
      KnnwbKnnOptions options;
      small_cpu_options(&options, metrics[m], 6); /* 32-row tiles */
      g_autoptr(KnnwbNeighbors) expected =
          one_process_lists(query ? queries : NULL, data, &options);
      /* ways 0-1: split memory, two-sided jobs or two panels; 2-3: every rank holds every row
       * (a shared self job), its candidates merged by score or each rank's k best merged
       * (KNNWB_GROUP_REFINED, the GPUs' way), whose bound must refuse the rows the ties leave
       * uncertain (on these rows they do not decide: whole-refined-ties does) */
      for (int way = 0; way <= 3; way++) {
        options.group_split = way < 2;
        if (way == 1)
          g_setenv("KNNWB_SPLIT_PANELS", "1", TRUE);
        if (way >= 2)
          g_setenv("KNNWB_GROUP_REFINED", way == 3 ? "1" : "0", TRUE);
        for (int ranks = 1; ranks <= MAX_RANKS; ranks++) {
          RankRun runs[MAX_RANKS];
          run_ranks(ranks, query ? queries : data, query ? data : NULL, &options, runs);
          for (int r = 0; r < ranks; r++) {
            g_assert_no_error(runs[r].error);
            assert_same_rows(expected, runs[r].result);
            if (r == ranks - 1)
              oracle_check(metrics[m], query ? queries->values : data->values, query ? nq : n,
                           data->values, n, d, !query, runs[r].result, 1e-9);
            knnwb_neighbors_free(runs[r].result);
          }
        }
        g_unsetenv("KNNWB_SPLIT_PANELS");
        g_unsetenv("KNNWB_GROUP_REFINED");
      }
    }
  }
}

/* Dense ties (rows on two columns: every correlation is +-1 up to rounding, so every row's
 * screening window holds most rows): the split ranks compare the rows left with every row, each
 * rank its block's exact k best, merged on the rows' owner; the lists are one process's bytes and
 * the oracle's, self or query runs, two-sided jobs or two panels, constant rows dropped, and a
 * small memory budget (several batches). Before, the split mode widened its rounds up to every
 * row (n_exhaustive stayed 0). */
static gboolean fatal_unless_left_out(const gchar *domain, GLogLevelFlags level,
                                      const gchar *message, gpointer user)
{
  (void)domain, (void)level, (void)user;
  return strstr(message, "left out of the") == NULL;
}

static void test_split_dense_ties(void)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_ABS_PEARSON, KNNWB_METRIC_PEARSON};
  static const size_t ks[] = {1, 4};
  const size_t n = 301, nq = 37, d = 2;
  g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
  g_autoptr(KnnwbMatrix) queries = knnwb_matrix_new(nq, d, NULL);
  g_autoptr(GRand) rng = g_rand_new_with_seed(2011);
  for (size_t i = 0; i < (n + nq) * d; i++) {
    float *value = i < n * d ? &data->values[i] : &queries->values[i - n * d];
    *value = (float)g_rand_double_range(rng, -3, 3);
  }
  g_test_log_set_fatal_handler(fatal_unless_left_out, NULL);
  for (int dropped = 0; dropped <= 1; dropped++) {
    /* Then constant rows, dropped (the oracle knows none: bytes against one process only). */
    for (size_t i = 5; dropped && i < n; i += 41)
      data->values[i * d + 1] = data->values[i * d];
    for (guint m = 0; m < G_N_ELEMENTS(metrics); m++)
      for (guint ki = 0; ki < G_N_ELEMENTS(ks); ki++)
        for (int query = 0; query <= 1; query++) {
          KnnwbKnnOptions options;
          small_cpu_options(&options, metrics[m], ks[ki]);
          options.drop_degenerate = TRUE;
          g_autoptr(KnnwbNeighbors) expected =
              one_process_lists(query ? queries : NULL, data, &options);
          g_assert_cmpuint(expected->n_exhaustive, >, 0);
          options.group_split = TRUE;
          for (int panels = 0; panels <= 3; panels++) {
            if (panels)
              g_setenv("KNNWB_SPLIT_PANELS", "1", TRUE);
            if (panels >= 2) /* the k best refined by the backend (3: both sides of a pair) */
              g_setenv("KNNWB_SPLIT_TEST_EXACT", panels == 3 ? "4" : "3", TRUE);
            for (int ranks = 2; ranks <= MAX_RANKS; ranks++) {
              RankRun runs[MAX_RANKS];
              run_ranks(ranks, query ? queries : data, query ? data : NULL, &options, runs);
              for (int r = 0; r < ranks; r++) {
                g_assert_no_error(runs[r].error);
                assert_same_rows(expected, runs[r].result);
                /* the exhaustive round ran (counted over the ranks) */
                g_assert_cmpuint(runs[r].result->n_exhaustive, >, 0);
                if (r == ranks - 1 && !dropped)
                  oracle_check(metrics[m], query ? queries->values : data->values, query ? nq : n,
                               data->values, n, d, !query, runs[r].result, 1e-9);
                knnwb_neighbors_free(runs[r].result);
              }
            }
            g_unsetenv("KNNWB_SPLIT_PANELS");
            g_unsetenv("KNNWB_SPLIT_TEST_EXACT");
          }
        }
  }
  g_test_log_set_fatal_handler(NULL, NULL);
}

/* Rows whose only full lists come back from another rank: rank 1's block and rank 2's are smaller
 * than kc (its own step and its pair with rank 2 hold every pair), so its rows' bound is that of
 * the lists rank 0 computed for them. Two clusters far apart whose rows lie closer together than
 * the screen can tell, so the bound rarely certifies: a bound lost on the way back (or a wrong one
 * from the whole-input ranks' merged lists, ways 3-4, though on these rows that bound does not
 * decide: whole-refined-ties) certifies rows whose lists are wrong. */
static void test_split_back_bound(void)
{
  const size_t n = 301, d = 4;
  g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
  g_autoptr(GRand) rng = g_rand_new_with_seed(2011);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < d; j++)
      data->values[i * d + j] =
          (i % 2 ? 1e4f : -1e4f) + (float)g_rand_double_range(rng, -1e-2, 1e-2);
  static const size_t cuts[] = {0, 297, 299, 301}, ks[] = {1, 3};
  g_test_log_set_fatal_handler(fatal_unless_left_out, NULL);
  for (guint ki = 0; ki < G_N_ELEMENTS(ks); ki++) {
    KnnwbKnnOptions options;
    small_cpu_options(&options, KNNWB_METRIC_EUCLIDEAN, ks[ki]);
    g_autoptr(KnnwbNeighbors) expected = one_process_lists(NULL, data, &options);
    rank_cuts = cuts;
    /* ways 0-2: split, two-sided jobs, panels, panels refined by the backend; 3-4: every rank
     * every row, candidates merged by score or each rank's k best merged; 5: split, a pair's
     * panels as one job for both sides, refined by the backend */
    for (int way = 0; way < 6; way++) {
      options.group_split = way < 3 || way == 5;
      if (way == 1 || way == 2 || way == 5)
        g_setenv("KNNWB_SPLIT_PANELS", "1", TRUE);
      if (way == 2 || way == 5)
        g_setenv("KNNWB_SPLIT_TEST_EXACT", way == 5 ? "4" : "3", TRUE);
      if (way >= 3)
        g_setenv("KNNWB_GROUP_REFINED", way == 4 ? "1" : "0", TRUE);
      thread_share_next = TRUE;
      RankRun runs[MAX_RANKS];
      run_ranks(3, data, NULL, &options, runs);
      for (int r = 0; r < 3; r++) {
        g_assert_no_error(runs[r].error);
        assert_same_rows(expected, runs[r].result);
        knnwb_neighbors_free(runs[r].result);
      }
      g_unsetenv("KNNWB_SPLIT_PANELS");
      g_unsetenv("KNNWB_SPLIT_TEST_EXACT");
      g_unsetenv("KNNWB_GROUP_REFINED");
    }
    rank_cuts = NULL;
  }
  g_test_log_set_fatal_handler(NULL, NULL);
}

/* Whole-input ranks that merge each rank's k best (KNNWB_GROUP_REFINED, the GPUs' way) on rows
 * whose exact distances tie heavily (distinct binary rows of 12 columns, grids of 3), some sizes
 * barely above k, and constant rows (dropped under pearson, duplicates otherwise): a bound taken
 * from the wrong lists, or valid counts that reach the rows available too early, certify rows
 * whose lists are wrong. One process's lists on 2-4 ranks. */
static void test_whole_refined_ties(void)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN,
                                        KNNWB_METRIC_COSINE, KNNWB_METRIC_PEARSON};
  static const size_t ns[] = {5, 23, 97, 300}, ds[] = {3, 12}, ks[] = {1, 3, 8, 20};
  /* (dropping rows warns, expected here) */
  GLogLevelFlags fatal = g_log_set_always_fatal(G_LOG_FATAL_MASK);
  g_setenv("KNNWB_GROUP_REFINED", "1", TRUE);
  for (int seed = 0; seed < 2; seed++)
    for (guint ni = 0; ni < G_N_ELEMENTS(ns); ni++)
      for (guint di = 0; di < G_N_ELEMENTS(ds); di++) {
        const size_t n = ns[ni], d = ds[di];
        g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
        g_autoptr(GRand) rng = g_rand_new_with_seed(1000 + seed * 17 + ni * 5 + di);
        for (size_t i = 0; i < n; i++) {
          gboolean again;
          do { /* distinct rows, none with both first columns 0 */
            for (size_t j = 0; j < d; j++)
              data->values[i * d + j] =
                  (float)(d == 12 ? g_rand_int_range(rng, 0, 2) : g_rand_int_range(rng, -4, 5));
            again = data->values[i * d] == 0 && data->values[i * d + 1] == 0;
            for (size_t o = 0; o < i && !again; o++)
              again = memcmp(data->values + o * d, data->values + i * d, d * sizeof(float)) == 0;
          } while (again);
        }
        for (size_t i = 5; seed == 1 && i < n; i += 41) /* constant rows */
          for (size_t j = 0; j < d; j++)
            data->values[i * d + j] = (i / 41) % 2 ? 1.0f : 0.0f;
        for (guint m = 0; m < G_N_ELEMENTS(metrics); m++)
          for (guint ki = 0; ki < G_N_ELEMENTS(ks) && ks[ki] < n - 2; ki++) {
            KnnwbKnnOptions options;
            small_cpu_options(&options, metrics[m], ks[ki]);
            options.drop_degenerate = TRUE;
            g_autoptr(KnnwbNeighbors) expected = one_process_lists(NULL, data, &options);
            assert_ranks_self_lists(data, &options, expected);
          }
      }
  g_unsetenv("KNNWB_GROUP_REFINED");
  g_log_set_always_fatal(fatal);
}

/* The pair met from both ends (even ranks) in chunks that the ranks take from a shared counter:
 * whichever rank takes which chunk (one rank late: the other takes them all; or as they come), the
 * lists are one process's bytes and the oracle's, also with many equal scores at the thresholds
 * (small integers), self or query runs, two-sided jobs or two panels. */
static void test_split_pair_chunks(void)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_PEARSON};
  const size_t n = 301, nq = 37, d = 4;
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
    g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
    g_autoptr(KnnwbMatrix) queries = knnwb_matrix_new(nq, d, NULL);
    g_autoptr(GRand) rng = g_rand_new_with_seed(70 + m);
    for (size_t i = 0; i < (n + nq) * d; i++) {
      float *value = i < n * d ? &data->values[i] : &queries->values[i - n * d];
      *value = (float)g_rand_int_range(rng, -3, 4);
    }
    for (size_t i = 0; i < n + nq; i++) { /* no constant row (correlations) */
      float *row = i < n ? data->values + i * d : queries->values + (i - n) * d;
      if (row[0] == row[1])
        row[1] = row[0] + 1.0f;
    }
    for (int query = 0; query <= 1; query++) {
      KnnwbKnnOptions options;
      small_cpu_options(&options, metrics[m], 7);
      g_autoptr(KnnwbNeighbors) expected =
          one_process_lists(query ? queries : NULL, data, &options);
      options.group_split = TRUE;
      for (int job = 0; job < 8; job++) {
        /* the CPU's two-sided jobs, or the two panels of other backends; the lists that go back
         * read in place from the window, or sent beside the shared blocks */
        const int ranks = 2 + 2 * (job % 2);
        if ((job / 2) % 2 == 1) { /* the GPUs take the halves unless told */
          g_setenv("KNNWB_SPLIT_PANELS", "1", TRUE);
          g_setenv("KNNWB_SPLIT_CHUNKS", "1", TRUE);
          /* the backend's distances for every job, every other job's, or (7) the k best
           * refined by the backend */
          g_setenv("KNNWB_SPLIT_TEST_EXACT", job == 7 ? "3" : job >= 4 ? "2" : "1", TRUE);
        }
        if (job >= 4)
          g_setenv("KNNWB_SPLIT_BACK_SHARED", "0", TRUE);
        for (int late = -1; late < ranks; late++) {
          g_autofree char *rank = g_strdup_printf("%d", late);
          if (late >= 0)
            g_setenv("KNNWB_SPLIT_LATE_RANK", rank, TRUE);
          thread_share_next = TRUE; /* the chunks need shared blocks */
          RankRun runs[MAX_RANKS];
          run_ranks(ranks, query ? queries : data, query ? data : NULL, &options, runs);
          g_unsetenv("KNNWB_SPLIT_LATE_RANK");
          for (int r = 0; r < ranks; r++) {
            g_assert_no_error(runs[r].error);
            assert_same_rows(expected, runs[r].result);
            if (r == 0)
              oracle_check(metrics[m], query ? queries->values : data->values, query ? nq : n,
                           data->values, n, d, !query, runs[r].result, 1e-9);
            knnwb_neighbors_free(runs[r].result);
          }
        }
        g_unsetenv("KNNWB_SPLIT_PANELS");
        g_unsetenv("KNNWB_SPLIT_CHUNKS");
        g_unsetenv("KNNWB_SPLIT_TEST_EXACT");
        g_unsetenv("KNNWB_SPLIT_BACK_SHARED");
      }
    }
  }
}

/* Constant rows in both ranks' blocks (pearson): every rank fails with one process's message,
 * which names the first by its global number and counts every rank's (each rank named only its
 * own before, the lowest failing one's message winning: "rank 1: ... (1 such row)" for a row 40
 * alone). First a constant row in rank 1's block only, then rows 12, 40 and 55. */
static void test_split_degenerate_row(void)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(60, 5, 9);
  for (size_t j = 0; j < 5; j++)
    data->values[40 * 5 + j] = 2.0f; /* rows 30..59 are rank 1's of 2 */
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 3;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = 1;
  options.group_split = TRUE;
  static const char *const expected[] = {"data row 40 (counted from 0)*(1 such row)*",
                                         "data row 12 (counted from 0)*(3 such rows)*"};
  for (int round = 0; round < 2; round++) {
    if (round == 1)
      for (size_t j = 0; j < 5; j++)
        data->values[12 * 5 + j] = data->values[55 * 5 + j] = -1.0f;
    RankRun runs[MAX_RANKS];
    run_ranks(2, data, NULL, &options, runs);
    for (int r = 0; r < 2; r++) {
      g_assert_null(runs[r].result);
      g_assert_error(runs[r].error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
      if (!g_pattern_match_simple(expected[round], runs[r].error->message))
        g_error("rank %d: %s", r, runs[r].error->message);
      g_clear_error(&runs[r].error);
    }
  }
}

/* A cancelled run stays a cancellation on every rank (the host's exit status depends on it). */
static void test_cancelled_rank(void)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(300, 6, 6);
  static volatile gint cancel = 1;
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 4;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = 1;
  options.memory_bytes = 4096;
  options.cancel = &cancel;
  for (int split = 0; split <= 1; split++) {
    options.group_split = split;
    RankRun runs[MAX_RANKS];
    run_ranks(2, data, NULL, &options, runs);
    for (int r = 0; r < 2; r++) {
      g_assert_null(runs[r].result);
      g_assert_error(runs[r].error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
      g_clear_error(&runs[r].error);
    }
  }
}

/* What rank 0's split run shows as progress: (done, total) calls in order. */
typedef struct {
  GMutex lock;
  GArray *done, *total;
} ProgressLog;

static void progress_log(uint64_t done, uint64_t total, void *data)
{
  ProgressLog *log = data;
  g_mutex_lock(&log->lock);
  g_array_append_val(log->done, done);
  g_array_append_val(log->total, total);
  g_mutex_unlock(&log->lock);
}

/* One progress line for the whole split job: rank 0 alone reports, never backwards, ending at the
 * total, with the tiles of the jobs inside each step of the schedule (not only the steps' ends:
 * a step of a long run takes minutes), self and query runs, 2-4 ranks; the lists unchanged. */
static void test_split_progress(void)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(203, 5, 31);
  g_autoptr(KnnwbMatrix) queries = knnwb_test_random_matrix(57, 5, 32);
  for (int query = 0; query <= 1; query++) {
    KnnwbKnnOptions options;
    small_cpu_options(&options, KNNWB_METRIC_PEARSON, 6);
    g_autoptr(KnnwbNeighbors) expected = one_process_lists(query ? queries : NULL, data, &options);
    options.group_split = TRUE;
    for (int ranks = 2; ranks <= 4; ranks++) {
      ProgressLog log = {.done = g_array_new(FALSE, FALSE, sizeof(uint64_t)),
                         .total = g_array_new(FALSE, FALSE, sizeof(uint64_t))};
      g_mutex_init(&log.lock);
      options.progress = progress_log;
      options.progress_data = &log;
      RankRun runs[MAX_RANKS];
      run_ranks(ranks, query ? queries : data, query ? data : NULL, &options, runs);
      for (int r = 0; r < ranks; r++) {
        g_assert_no_error(runs[r].error);
        assert_same_rows(expected, runs[r].result);
        knnwb_neighbors_free(runs[r].result);
      }
      g_assert_cmpuint(log.done->len, >=, 2);
      const uint64_t total = g_array_index(log.total, uint64_t, 0);
      gboolean inside_a_step = FALSE;
      for (guint i = 0; i < log.done->len; i++) {
        const uint64_t done = g_array_index(log.done, uint64_t, i);
        g_assert_cmpuint(g_array_index(log.total, uint64_t, i), ==, total);
        g_assert_cmpuint(done, <=, total);
        if (i > 0) /* one reporter (rank 0), never backwards */
          g_assert_cmpuint(done, >, g_array_index(log.done, uint64_t, i - 1));
        /* A step's end is a whole share of the total; a job's tiles fall in between. */
        const uint64_t steps = query ? (uint64_t)ranks : (uint64_t)ranks / 2 + 1;
        if (done % (total / steps) != 0)
          inside_a_step = TRUE;
      }
      g_assert_cmpuint(g_array_index(log.done, uint64_t, log.done->len - 1), ==, total);
      g_assert_true(inside_a_step);
      g_mutex_clear(&log.lock);
      g_array_free(log.done, TRUE);
      g_array_free(log.total, TRUE);
    }
  }
}

/* knnwb_neighbourhood_find_split on 1-4 ranks: the single process's neighbourhood, every field, on
 * rank 0 (none elsewhere). */
static void test_split_neighbourhood(void)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(157, 9, 21);
  memcpy(data->values + 40 * 9, data->values + 150 * 9, 9 * sizeof(float)); /* a tie */
  const int64_t focus[] = {150, 3};
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = KNNWB_METRIC_PEARSON;
  options.k = 5;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = 1;
  options.memory_bytes = 4096;
  for (int direction = KNNWB_DIRECTION_OUT; direction <= KNNWB_DIRECTION_BOTH; direction++) {
    g_autoptr(KnnwbNeighbourhood) expected = NULL;
    g_assert_true(knnwb_neighbourhood_find(data, focus, 2, 2, (KnnwbDirection)direction, &options,
                                           &expected, NULL));
    for (int ranks = 1; ranks <= MAX_RANKS; ranks++) {
      RankRun runs[MAX_RANKS],
          task = {.focus = focus, .n_focus = 2, .order = 2, .direction = direction};
      run_ranks_task(ranks, data, NULL, &options, &task, runs);
      for (int r = 0; r < ranks; r++) {
        g_assert_no_error(runs[r].error);
        KnnwbNeighbourhood *got = runs[r].neighbourhood;
        if (r > 0) {
          g_assert_null(got); /* rank 0's result */
          g_assert_null(runs[r].members);
          continue;
        }
        g_assert_nonnull(got);
        /* The members' rows, in vertex order, as the data holds them. */
        g_autoptr(KnnwbMatrix) members = runs[r].members;
        g_assert_nonnull(members);
        g_assert_cmpuint(members->n_rows, ==, got->n_vertices);
        for (size_t v = 0; v < got->n_vertices; v++)
          g_assert_cmpmem(members->values + v * data->n_cols, data->n_cols * sizeof(float),
                          data->values + (size_t)got->rows[v] * data->n_cols,
                          data->n_cols * sizeof(float));
        g_assert_cmpuint(got->n_vertices, ==, expected->n_vertices);
        g_assert_cmpmem(got->rows, got->n_vertices * sizeof(int64_t), expected->rows,
                        expected->n_vertices * sizeof(int64_t));
        g_assert_cmpmem(got->order, got->n_vertices * sizeof(int), expected->order,
                        expected->n_vertices * sizeof(int));
        g_assert_cmpint(igraph_ecount(&got->graph), ==, igraph_ecount(&expected->graph));
        for (igraph_integer_t e = 0; e < igraph_ecount(&got->graph); e++) {
          g_assert_cmpint(IGRAPH_FROM(&got->graph, e), ==, IGRAPH_FROM(&expected->graph, e));
          g_assert_cmpint(IGRAPH_TO(&got->graph, e), ==, IGRAPH_TO(&expected->graph, e));
          g_assert_cmpfloat(VECTOR(got->weights)[e], ==, VECTOR(expected->weights)[e]);
        }
        g_assert_cmpuint(got->n_members, ==, expected->n_members);
        for (size_t i = 0; i < got->n_members; i++) {
          const KnnwbNeighbourhoodMember *a = &got->members[i], *b = &expected->members[i];
          g_assert_cmpuint(a->focus, ==, b->focus);
          g_assert_cmpuint(a->rank, ==, b->rank);
          g_assert_cmpint(a->row, ==, b->row);
          g_assert_cmpint(a->order, ==, b->order);
          g_assert_cmpmem(&a->distance, sizeof(double), &b->distance, sizeof(double));
          g_assert_cmpmem(&a->r, sizeof(double), &b->r, sizeof(double));
        }
        g_assert_cmpuint(got->n_queries, ==, expected->n_queries);
        knnwb_neighbourhood_free(got);
      }
    }
  }
}

/*
 * The threshold rounds of a shared GPU job (core/group/knn_group_bounds.c), which no CPU run uses:
 * every rank's values become the element-wise minimum over the ranks (infinities, negatives, a
 * float just below another), a rank whose values are of another size takes part with nothing, a
 * rank that used fewer rounds has them completed by finish (the others' rounds still match), and
 * one rank not wanting rounds makes them none for all.
 */
#define BOUND_ROWS 1001

typedef struct {
  ThreadRank rank;
  gboolean wanted;
  int used; /* rounds this rank calls share for */
  float values[3][BOUND_ROWS];
  int returned[3];
  int rounds;
} BoundsRun;

static float bound_value(int rank, int round, size_t i)
{
  if ((i + (size_t)rank) % 7 == 0)
    return INFINITY; /* this rank has no full list for the row */
  const float base = (float)((i * 37 + (size_t)rank * 11 + (size_t)round * 5) % 101) - 50.0f;
  /* Neighbouring floats must stay apart (rank 1 a step below rank 0 on some rows). */
  return rank == 1 && i % 5 == 0 ? nextafterf(bound_value(0, round, i), -INFINITY) : base;
}

static gpointer bounds_main(gpointer data)
{
  BoundsRun *run = data;
  const KnnwbKnnGroup *group = &run->rank.group;
  KnnwbGroupBounds bounds;
  g_assert_true(knnwb_group_bounds_init(&bounds, group, BOUND_ROWS, run->wanted, NULL));
  g_assert_true(knnwb_group_bounds_ready(&bounds));
  run->rounds = bounds.rounds;
  for (int round = 0; round < run->used && round < 3; round++) {
    for (size_t i = 0; i < BOUND_ROWS; i++)
      run->values[round][i] = bound_value(group->rank, round, i);
    /* Round 1 of rank 2 comes with the wrong size: it must give nothing and still take part. */
    const size_t n = group->rank == 2 && round == 1 ? BOUND_ROWS - 1 : BOUND_ROWS;
    run->returned[round] = knnwb_group_bounds_share(run->values[round], n, &bounds);
  }
  knnwb_group_bounds_finish(&bounds);
  return NULL;
}

static void test_threshold_rounds(void)
{
  for (int wanted_by_all = 1; wanted_by_all >= 0; wanted_by_all--) {
    const int ranks = 3;
    ThreadJob job = {.size = ranks};
    g_mutex_init(&job.lock);
    g_cond_init(&job.cond);
    BoundsRun *runs = g_new0(BoundsRun, ranks);
    GThread *threads[MAX_RANKS];
    for (int r = 0; r < ranks; r++) {
      runs[r].rank.job = &job;
      runs[r].rank.group = thread_group(r, ranks, FALSE);
      runs[r].wanted = wanted_by_all || r != 1;
      runs[r].used = r == 1 ? 1 : 3; /* rank 1's backend stops after one round */
      threads[r] = g_thread_new("rank", bounds_main, &runs[r]);
    }
    for (int r = 0; r < ranks; r++)
      g_thread_join(threads[r]);
    for (int r = 0; r < ranks; r++) {
      if (!wanted_by_all) {
        g_assert_cmpint(runs[r].rounds, ==, 0);
        for (int round = 0; round < runs[r].used; round++)
          g_assert_cmpint(runs[r].returned[round], ==, 0);
        continue;
      }
      g_assert_cmpint(runs[r].rounds, >=, 3);
      for (int round = 0; round < runs[r].used; round++) {
        const gboolean gave = !(r == 2 && round == 1);
        g_assert_cmpint(runs[r].returned[round], ==, gave ? 1 : 0);
        for (size_t i = 0; i < BOUND_ROWS; i++) {
          float expected = bound_value(r, round, i);
          if (gave)
            for (int o = 0; o < ranks; o++) {
              /* Rank 1 gave nothing after round 0 (finish), rank 2 nothing in round 1. */
              const gboolean other_gave = !(o == 1 && round > 0) && !(o == 2 && round == 1);
              if (other_gave)
                expected = MIN(expected, bound_value(o, round, i));
            }
          g_assert_cmpfloat(runs[r].values[round][i], ==, expected);
        }
      }
    }
    g_free(runs);
    g_mutex_clear(&job.lock);
    g_cond_clear(&job.cond);
  }
}

/* On a board (ranks of one host) a round waits for nobody: a first read lies between the own bound
 * and the lowest any rank posted, a read after every rank has posted gives the lowest, no reduction
 * is made after the agreement on the rounds, and the board is given back at the end. */
typedef struct {
  ThreadRank rank;
  float first[BOUND_ROWS], second[BOUND_ROWS];
  int returned[2];
  int rounds;
  size_t lowered;
  gboolean board_after;
} BoardRun;

static gpointer board_main(gpointer data)
{
  BoardRun *run = data;
  const KnnwbKnnGroup *group = &run->rank.group;
  KnnwbGroupBounds bounds;
  g_assert_true(knnwb_group_bounds_init(&bounds, group, BOUND_ROWS, TRUE, NULL));
  g_assert_true(knnwb_group_bounds_ready(&bounds));
  run->rounds = bounds.rounds;
  for (size_t i = 0; i < BOUND_ROWS; i++)
    run->first[i] = bound_value(group->rank, 0, i);
  run->returned[0] = knnwb_group_bounds_share(run->first, BOUND_ROWS, &bounds);
  g_assert_true(group->agree(group, TRUE, NULL)); /* every rank has posted */
  memcpy(run->second, run->first, sizeof run->second);
  const int64_t before = bounds.tightened;
  run->returned[1] = knnwb_group_bounds_share(run->second, BOUND_ROWS, &bounds);
  run->lowered = (size_t)(bounds.tightened - before);
  knnwb_group_bounds_finish(&bounds);
  run->board_after = bounds.board;
  return NULL;
}

static void test_threshold_board(void)
{
  const int ranks = 3;
  ThreadJob job = {.size = ranks};
  g_mutex_init(&job.lock);
  g_cond_init(&job.cond);
  BoardRun *runs = g_new0(BoardRun, ranks);
  GThread *threads[MAX_RANKS];
  for (int r = 0; r < ranks; r++) {
    runs[r].rank.job = &job;
    runs[r].rank.group = thread_group(r, ranks, TRUE);
    threads[r] = g_thread_new("rank", board_main, &runs[r]);
  }
  for (int r = 0; r < ranks; r++)
    g_thread_join(threads[r]);
  /* one reduction a rank: the agreement on the rounds */
  g_assert_cmpint(g_atomic_int_get(&job.reduces), ==, ranks);
  for (int r = 0; r < ranks; r++) {
    g_assert_cmpint(runs[r].rounds, >, 12);
    g_assert_cmpint(runs[r].returned[0], ==, 1);
    g_assert_cmpint(runs[r].returned[1], ==, 1);
    g_assert_false(runs[r].board_after);
    g_assert_null(job.board[r]);
    size_t expected_lowered = 0;
    for (size_t i = 0; i < BOUND_ROWS; i++) {
      float lowest = INFINITY;
      for (int o = 0; o < ranks; o++)
        lowest = MIN(lowest, bound_value(o, 0, i));
      g_assert_cmpfloat(runs[r].first[i], <=, bound_value(r, 0, i));
      g_assert_cmpfloat(runs[r].first[i], >=, lowest);
      g_assert_cmpfloat(runs[r].second[i], ==, lowest);
      expected_lowered += lowest < runs[r].first[i];
    }
    g_assert_cmpuint(runs[r].lowered, ==, expected_lowered);
  }
  g_free(runs);
  g_mutex_clear(&job.lock);
  g_cond_clear(&job.cond);
}

/* ---- The undirected graph's edges from every rank's own lists ---- */

typedef struct {
  ThreadRank rank;
  KnnwbNeighbors own; /* a view of rows [first_row, first_row + n_queries) */
  KnnwbGraphMode mode;
  igraph_vector_int_t edges;
  igraph_vector_t weights;
  gboolean ok;
  GError *error;
} EdgesRun;

static gpointer edges_main(gpointer data)
{
  EdgesRun *run = data;
  g_mutex_lock(&rank_turn); /* igraph vectors: one rank at a time outside the group's calls */
  igraph_vector_int_init(&run->edges, 0);
  igraph_vector_init(&run->weights, 0);
  run->ok = knnwb_graph_edges_from_own_neighbors(&run->rank.group, &run->own, run->mode,
                                                 &run->edges, &run->weights, &run->error);
  g_mutex_unlock(&rank_turn);
  return NULL;
}

/* Lists with pairs named by one side or both, ties, and rows with fewer neighbours: the ranks'
 * edges in rank order must be one process's edge list, for even and uneven (empty) blocks. */
static void test_undirected_edges(void)
{
  enum { N = 97, K = 6 };
  KnnwbNeighbors all = {.n_queries = N, .k = K};
  all.indices = g_new(int64_t, N * K);
  all.distances = g_new(double, N *K);
  all.n_found = g_new(int32_t, N);
  for (size_t i = 0; i < N; i++) {
    all.n_found[i] = i % 11 == 4 ? 0 : i % 7 == 2 ? 3 : K;
    for (size_t r = 0; r < K; r++) {
      /* Neighbours near i (often naming each other) and far ones (one side only). */
      size_t j = r < 4 ? (i + N - 2 + r + (r >= 2)) % N : (i * 13 + r * 29 + 5) % N;
      if (j == i)
        j = (i + 1) % N;
      gboolean found = r < (size_t)all.n_found[i];
      all.indices[i * K + r] = found ? (int64_t)j : -1;
      all.distances[i * K + r] = found ? (double)((MIN(i, j) * 7 + MAX(i, j)) % 5) / 3.0 : INFINITY;
    }
  }
  const size_t uneven[][MAX_RANKS + 1] = {
      {0, 0, 0, 0, 0}, {0, N}, {0, 1, N}, {0, 0, 40, N}, {0, 50, 50, 51, N}};
  for (int mode = KNNWB_GRAPH_UNION; mode <= KNNWB_GRAPH_MUTUAL; mode++) {
    igraph_vector_int_t expected;
    igraph_vector_t expected_weights;
    igraph_vector_int_init(&expected, 0);
    igraph_vector_init(&expected_weights, 0);
    GError *error = NULL;
    g_assert_true(knnwb_graph_edges_from_neighbors(&all, (KnnwbGraphMode)mode, &expected,
                                                   &expected_weights, &error));
    g_assert_no_error(error);
    for (int ranks = 1; ranks <= MAX_RANKS; ranks++)
      for (int even = 1; even >= 0; even--) {
        ThreadJob job = {.size = ranks};
        g_mutex_init(&job.lock);
        g_cond_init(&job.cond);
        EdgesRun runs[MAX_RANKS];
        GThread *threads[MAX_RANKS];
        for (int r = 0; r < ranks; r++) {
          size_t first = uneven[ranks][r], last = uneven[ranks][r + 1];
          if (even)
            knnwb_knn_group_rows(N, r, ranks, &first, &last);
          runs[r] = (EdgesRun){.mode = (KnnwbGraphMode)mode};
          runs[r].own = (KnnwbNeighbors){.n_queries = last - first,
                                         .k = K,
                                         .indices = all.indices + first * K,
                                         .distances = all.distances + first * K,
                                         .n_found = all.n_found + first,
                                         .first_row = first};
          runs[r].rank.job = &job;
          runs[r].rank.group = (KnnwbKnnGroup){.rank = r,
                                               .size = ranks,
                                               .local_size = ranks,
                                               .local_rank = r,
                                               .agree = turn_agree,
                                               .exchange = turn_exchange,
                                               .reduce = turn_reduce};
          threads[r] = g_thread_new("rank", edges_main, &runs[r]);
        }
        for (int r = 0; r < ranks; r++)
          g_thread_join(threads[r]);
        igraph_integer_t e = 0;
        for (int r = 0; r < ranks; r++) {
          g_assert_no_error(runs[r].error);
          g_assert_true(runs[r].ok);
          for (igraph_integer_t f = 0; f < igraph_vector_size(&runs[r].weights); f++, e++) {
            g_assert_cmpint(e, <, igraph_vector_size(&expected_weights));
            g_assert_cmpint(VECTOR(runs[r].edges)[2 * f], ==, VECTOR(expected)[2 * e]);
            g_assert_cmpint(VECTOR(runs[r].edges)[2 * f + 1], ==, VECTOR(expected)[2 * e + 1]);
            g_assert_true(memcmp(&VECTOR(runs[r].weights)[f], &VECTOR(expected_weights)[e],
                                 sizeof(double)) == 0);
          }
          /* The edges are shared out by count, not by the blocks of rows (rank 0 would get
           * most): every rank within a few rows' worth of directions of its share. */
          if (ranks > 1)
            g_assert_cmpint(igraph_vector_size(&runs[r].weights), <=,
                            igraph_vector_size(&expected_weights) / ranks + 4 * K);
          g_test_message("%d ranks, rank %d: %" IGRAPH_PRId " edges of %" IGRAPH_PRId, ranks, r,
                         igraph_vector_size(&runs[r].weights),
                         igraph_vector_size(&expected_weights));
          igraph_vector_int_destroy(&runs[r].edges);
          igraph_vector_destroy(&runs[r].weights);
        }
        g_assert_cmpint(e, ==, igraph_vector_size(&expected_weights));
        g_mutex_clear(&job.lock);
        g_cond_clear(&job.cond);
      }
    /* The test means something: some pairs are named by both sides, some by one. */
    g_assert_cmpint(igraph_vector_size(&expected_weights), >, 0);
    igraph_vector_int_destroy(&expected);
    igraph_vector_destroy(&expected_weights);
  }
  g_free(all.indices);
  g_free(all.distances);
  g_free(all.n_found);
}

/* A candidate of the merge test's reference: the kc best of a row's held and incoming ones. */
typedef struct {
  float score;
  int64_t index;
  double distance;
} MergeCandidate;

static int merge_candidate_compare(const void *a, const void *b)
{
  const MergeCandidate *x = a, *y = b;
  if (x->score != y->score)
    return x->score < y->score ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/*
 * knnwb_split_merge against a sort of everything: every row keeps the kc best of its held and
 * incoming candidates by (score, index), in that order, with their distances. The merge's order
 * decides the rows' starting thresholds and what a full list keeps; the group tests compare only
 * the final lists, which the refinement makes exact whichever of equally scored candidates were
 * kept, so a tie broken the wrong way shows here only. Scores are small integers (many ties, so
 * the index decides), -0 and +0 among them (equal as floats), negative and infinite ones; rows
 * empty, part full and full; incoming lists of 28 (a job's kc: ranked, or by insertion where the
 * indices span more than 32 bits, as in the third round) and 100 (a re-selection's: qsort); 1 and
 * 2 threads.
 */
static void test_split_merge_order(void)
{
  GRand *rand = g_rand_new_with_seed(16);
  const size_t kc = 28, rows = 301;
  const size_t widths[] = {28, 100, 28};
  for (size_t w = 0; w < G_N_ELEMENTS(widths); w++)
    for (int threads = 1; threads <= 2; threads++) {
      const size_t width = widths[w];
      const int64_t far = w == 2 ? (int64_t)1 << 33 : 0; /* indices beyond 32 bits */
      KnnwbSplitLists lists, incoming;
      g_assert_true(knnwb_split_lists_init(&lists, rows, kc, threads, NULL));
      g_assert_true(knnwb_split_lists_init(&incoming, rows, width, threads, NULL));
      MergeCandidate *all = g_new(MergeCandidate, kc + width);
      MergeCandidate *expected = g_new(MergeCandidate, rows * kc);
      size_t *expected_count = g_new0(size_t, rows);
      for (size_t t = 0; t < rows; t++) {
        size_t n = 0;
        const size_t held = (size_t)g_rand_int_range(rand, 0, (gint32)kc + 1);
        /* indices: held ones even, incoming ones odd, so no candidate is in both */
        for (size_t c = 0; c < held; c++) {
          const float score = (float)g_rand_int_range(rand, -3, 4);
          all[n++] =
              (MergeCandidate){score == 0.0f && c % 2 ? -0.0f : score,
                               2 * (int64_t)g_rand_int_range(rand, 0, 40) * 1000 + 2 * (int64_t)c,
                               (double)t + (double)c / 1000.0};
        }
        qsort(all, n, sizeof *all, merge_candidate_compare);
        for (size_t c = 0; c < n; c++) {
          lists.index[t * kc + c] = all[c].index;
          lists.score[t * kc + c] = all[c].score;
          lists.distance[t * kc + c] = all[c].distance;
        }
        for (size_t c = 0; c < width; c++) {
          if (g_rand_int_range(rand, 0, 5) == 0)
            continue; /* -1: padding, skipped */
          const int pick = g_rand_int_range(rand, 0, 12);
          const float score = pick == 0   ? -0.0f
                              : pick == 1 ? INFINITY
                                          : (float)g_rand_int_range(rand, -3, 4);
          const int64_t index =
              2 * (int64_t)g_rand_int_range(rand, 0, 40000) + 1 + (c % 3 == 0 ? far : 0);
          gboolean repeated = FALSE; /* one candidate once in a list */
          for (size_t x = 0; x < c; x++)
            repeated = repeated || incoming.index[t * width + x] == index;
          if (repeated)
            continue;
          incoming.index[t * width + c] = index;
          incoming.score[t * width + c] = score;
          incoming.distance[t * width + c] = -(double)index;
          all[n++] = (MergeCandidate){score, index, -(double)index};
        }
        qsort(all, n, sizeof *all, merge_candidate_compare);
        expected_count[t] = MIN(n, kc);
        memcpy(expected + t * kc, all, expected_count[t] * sizeof *all);
      }
      knnwb_split_merge(&lists, &incoming, 0, threads);
      for (size_t t = 0; t < rows; t++)
        for (size_t c = 0; c < kc; c++) {
          if (c >= expected_count[t]) {
            g_assert_cmpint(lists.index[t * kc + c], ==, -1);
            continue;
          }
          const MergeCandidate *e = &expected[t * kc + c];
          g_assert_cmpint(lists.index[t * kc + c], ==, e->index);
          g_assert_cmpfloat(lists.score[t * kc + c], ==, e->score);
          g_assert_cmpfloat(lists.distance[t * kc + c], ==, e->distance);
        }
      g_free(all);
      g_free(expected);
      g_free(expected_count);
      knnwb_split_lists_clear(&lists);
      knnwb_split_lists_clear(&incoming);
    }
  g_rand_free(rand);
}

/* "partition: done", said by any rank (core/partition/), and warnings passed on. */
static gint partition_runs;

/* The choice's lines ("N clusters would leave P% of the work (X pairs, Y rows searched"), up to
 * their timings, while choices is not NULL. */
static GPtrArray *choices;
static GMutex choices_lock;

/* Starts capturing the choice's lines (start), or stops and returns them. */
static GPtrArray *choices_capture(gboolean start)
{
  g_mutex_lock(&choices_lock);
  GPtrArray *taken = g_steal_pointer(&choices);
  if (start)
    choices = g_ptr_array_new_with_free_func(g_free);
  g_mutex_unlock(&choices_lock);
  if (taken != NULL && start)
    g_ptr_array_unref(taken);
  return start ? NULL : taken;
}

/* "every rank holds every row already", said by any rank (core/engine/knn_together.c). */
static gint held_runs;
/* "the ranks' partitions differ (...): the plain search" or ": the split search", said by any
 * rank. */
static gint differ_plain, differ_split;
/* Split ranks that kept to their blocks for the partitioned search (partition_split.c), said by
 * each rank. */
static gint kept_runs;
/* Phase two's visits of the job ("of all; V visits)"), as the last rank said them, and whether
 * two sayings since visits_forget differed: each row's visits follow from its k-th distance after
 * phase one, which the ranks send each other, so the job's count must be one process's (a k-th
 * distance too large would leave the lists exact, but not the count). */
static gint64 visits_said = -1;
static gint visits_differ;
/* The combinings said since combined_forget: through shared memory, as messages, and the most
 * rounds one took ("combined in ... through W in N round(s)"). */
static gint combined_shared, combined_messages, combined_rounds;

static void combined_forget(void)
{
  g_atomic_int_set(&combined_shared, 0);
  g_atomic_int_set(&combined_messages, 0);
  g_atomic_int_set(&combined_rounds, 0);
}

/* A combining's saying counted (message: a debug line). */
static void combined_count(const char *message)
{
  const char *shared = strstr(message, "through shared memory in ");
  const char *messages = strstr(message, "through messages in ");
  int rounds = 0;
  if (strstr(message, "lists of its rows combined") == NULL || (shared == NULL && messages == NULL))
    return;
  const char *count = shared != NULL ? shared + strlen("through shared memory in ")
                                     : messages + strlen("through messages in ");
  g_assert_cmpint(sscanf(count, "%d round(s)", &rounds), ==, 1);
  g_atomic_int_inc(shared != NULL ? &combined_shared : &combined_messages);
  g_mutex_lock(&choices_lock);
  g_atomic_int_set(&combined_rounds, MAX(g_atomic_int_get(&combined_rounds), rounds));
  g_mutex_unlock(&choices_lock);
}

static void visits_forget(void)
{
  g_atomic_int_set(&visits_differ, 0);
  visits_said = -1;
}

/* One process's visits for data (options: the partition on). */
static gint64 one_process_visits(const KnnwbMatrix *data, const KnnwbKnnOptions *options)
{
  visits_forget();
  g_autoptr(KnnwbNeighbors) lists = one_process_lists(NULL, data, options);
  g_assert_cmpint(visits_said, >=, 0);
  return visits_said;
}

static void count_partitions(const gchar *domain, GLogLevelFlags level, const gchar *message,
                             gpointer data)
{
  if ((level & G_LOG_LEVEL_DEBUG) && strstr(message, "partition: done") != NULL)
    g_atomic_int_inc(&partition_runs);
  if ((level & G_LOG_LEVEL_DEBUG) && strstr(message, "holds every row already") != NULL)
    g_atomic_int_inc(&held_runs);
  if ((level & G_LOG_LEVEL_DEBUG) && strstr(message, "partitions differ") != NULL)
    g_atomic_int_inc(g_str_has_suffix(message, ": the split search") ? &differ_split
                                                                     : &differ_plain);
  if ((level & G_LOG_LEVEL_DEBUG) && strstr(message, "each rank keeps its block of rows") != NULL)
    g_atomic_int_inc(&kept_runs);
  if (level & G_LOG_LEVEL_DEBUG)
    combined_count(message);
  const char *visits = strstr(message, "of all; ");
  double said;
  if ((level & G_LOG_LEVEL_DEBUG) && visits != NULL &&
      sscanf(visits, "of all; %lg visits)", &said) == 1) {
    g_mutex_lock(&choices_lock);
    if (visits_said >= 0 && visits_said != (gint64)said)
      g_atomic_int_set(&visits_differ, 1);
    visits_said = (gint64)said;
    g_mutex_unlock(&choices_lock);
  }
  const char *choice = strstr(message, "would leave"), *end = strstr(message, "rows searched");
  g_mutex_lock(&choices_lock);
  if ((level & G_LOG_LEVEL_DEBUG) && choices != NULL && choice != NULL && end != NULL)
    g_ptr_array_add(choices, g_strndup(message, (gsize)(end - message)));
  g_mutex_unlock(&choices_lock);
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    g_log_default_handler(domain, level, message, data);
}

/* n rows around 8 far-apart centres (normal, 2 apart), some rows copies of others; lattice:
 * integer values, so that many distances tie, within and across clusters. */
static KnnwbMatrix *blob_matrix(size_t n, size_t d, gboolean lattice, guint32 seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  double centre[8][16];
  for (int c = 0; c < 8; c++)
    for (size_t j = 0; j < d; j++)
      centre[c][j] = 40.0 * (g_rand_double(rand) * 2.0 - 1.0);
  for (size_t i = 0; i < n; i++) {
    const int c = g_rand_int_range(rand, 0, 8);
    for (size_t j = 0; j < d; j++) {
      const double u = g_rand_double_range(rand, 1e-12, 1.0), v = g_rand_double(rand);
      const double x = centre[c][j] + 2.0 * sqrt(-2.0 * log(u)) * cos(2 * G_PI * v);
      m->values[i * d + j] = lattice ? (float)rint(x) : (float)x;
    }
  }
  for (size_t i = 5; i + 2 < n; i += n / 6)
    memcpy(m->values + (i + 2) * d, m->values + i * d, d * sizeof(float));
  return m;
}

/* The partitioned self search over 2-4 ranks that hold every row: each group's lists searched on
 * one rank, the pieces of each row merged on the rank of its block. Forced on small clustered
 * data, for every metric it takes, with ties: the plain search's bytes (its own rows or all), and
 * every rank must have partitioned (a fallback to the plain search would pass unseen). With each
 * cell its own group the rows of a centre's other cells visit it, so visitors travel too; on 3
 * ranks each visit is searched in two pieces; on 4 the lists travel with 64-bit row numbers. */
static void test_partitioned(void)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_COSINE,
                                        KNNWB_METRIC_PEARSON, KNNWB_METRIC_ABS_PEARSON};
  g_log_set_default_handler(count_partitions, NULL);
  g_setenv("KNNWB_PARTITION_ROWS", "90", TRUE);
  for (int lattice = 0; lattice <= 1; lattice++) {
    if (lattice)
      g_setenv("KNNWB_PARTITION_GROUPS", "off", TRUE);
    g_autoptr(KnnwbMatrix) data = blob_matrix(1203, 7, lattice, 21 + (guint32)lattice);
    for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
      KnnwbKnnOptions options;
      small_cpu_options(&options, metrics[m], lattice ? 12 : 5);
      options.memory_bytes = 0;
      g_setenv("KNNWB_PARTITION", "off", TRUE);
      g_autoptr(KnnwbNeighbors) expected = one_process_lists(NULL, data, &options);
      g_setenv("KNNWB_PARTITION", "on", TRUE);
      const gint64 visits = one_process_visits(data, &options);
      for (int ranks = 2; ranks <= MAX_RANKS; ranks++)
        for (int own = 0; own <= 1; own++) {
          options.group_own_rows = own;
          RankRun runs[MAX_RANKS];
          g_atomic_int_set(&partition_runs, 0);
          visits_forget();
          /* on 2 ranks the lists travel in rounds of 8 records; on 3 each group's visitors in
           * two pieces; on 4 the lists travel with 64-bit row numbers (32 bits hold every row
           * here, so that layout is otherwise untried) */
          const size_t record = 4 + options.k * (4 + 8);
          g_autofree char *round = g_strdup_printf("%zu", 8 * record);
          if (ranks == 2)
            g_setenv("KNNWB_PARTITION_ROUND_BYTES", round, TRUE);
          combined_forget();
          if (ranks == 3)
            g_setenv("KNNWB_PARTITION_PIECES", "2", TRUE);
          if (ranks == 4)
            g_setenv("KNNWB_PARTITION_RECORD_IDS", "64", TRUE);
          run_ranks(ranks, data, NULL, &options, runs);
          g_unsetenv("KNNWB_PARTITION_PIECES");
          g_unsetenv("KNNWB_PARTITION_RECORD_IDS");
          g_unsetenv("KNNWB_PARTITION_ROUND_BYTES");
          g_assert_cmpint(g_atomic_int_get(&partition_runs), ==, ranks);
          /* (a rank sends hundreds of records: 2 ranks take many rounds, the others one) */
          if (ranks == 2)
            g_assert_cmpint(g_atomic_int_get(&combined_rounds), >, 10);
          else
            g_assert_cmpint(g_atomic_int_get(&combined_rounds), ==, 1);
          g_assert_cmpint(visits_said, ==, visits);
          g_assert_cmpint(g_atomic_int_get(&visits_differ), ==, 0);
          size_t covered = 0;
          for (int r = 0; r < ranks; r++) {
            g_assert_no_error(runs[r].error);
            g_assert_nonnull(runs[r].result);
            g_assert_cmpuint(runs[r].result->first_row, ==, own ? covered : 0);
            covered += runs[r].result->n_queries;
            assert_same_rows(expected, runs[r].result);
            g_assert_true(g_str_has_suffix(runs[r].result->backend_used, "ranks"));
            knnwb_neighbors_free(runs[r].result);
          }
          g_assert_cmpuint(covered, ==, own ? expected->n_queries : ranks * expected->n_queries);
        }
    }
  }
  g_unsetenv("KNNWB_PARTITION");
  g_unsetenv("KNNWB_PARTITION_ROWS");
  g_unsetenv("KNNWB_PARTITION_GROUPS");
  g_log_set_default_handler(g_log_default_handler, NULL);
}

static void free_runs(RankRun *runs, int ranks)
{
  for (int r = 0; r < ranks; r++) {
    g_clear_pointer(&runs[r].result, knnwb_neighbors_free);
    g_clear_error(&runs[r].error);
  }
}

/* Runs the partitioned search (forced on) of data over 2 ranks that share blocks, each rank's
 * lists its own rows' and those of the plain search (expected); *partitioned: how many ranks
 * finished it (the combinings' counters, combined_forget, are that run's). */
static void partitioned_shared(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                               const KnnwbNeighbors *expected, int *partitioned)
{
  RankRun runs[MAX_RANKS];
  if (!thread_share_next) { /* (every other run shares blocks) */
    run_ranks(2, data, NULL, options, runs);
    free_runs(runs, 2);
  }
  g_assert_true(thread_share_next);
  g_atomic_int_set(&partition_runs, 0);
  combined_forget();
  run_ranks(2, data, NULL, options, runs);
  *partitioned = g_atomic_int_get(&partition_runs);
  for (int r = 0; r < 2; r++) {
    g_assert_no_error(runs[r].error);
    assert_same_rows(expected, runs[r].result);
  }
  free_runs(runs, 2);
}

/* The combining's rounds through the ranks' shared blocks, a round's records a rank: where a round
 * is more than the host grants, the records go as messages; with rounds smaller than what a rank
 * sends (KNNWB_PARTITION_ROUND_BYTES) they go through the blocks in many rounds, each refilling
 * them. Where the run gives up after phase one (a rank's bounds pass short of memory), the plain
 * search gives the lists. The same bytes each way; ranks that took different numbers of rounds
 * would leave each other waiting (the test would not end). */
static void test_partitioned_blocks(void)
{
  g_log_set_default_handler(count_partitions, NULL);
  g_setenv("KNNWB_PARTITION_ROWS", "90", TRUE);
  g_autoptr(KnnwbMatrix) data = blob_matrix(1203, 7, FALSE, 23);
  KnnwbKnnOptions options;
  small_cpu_options(&options, KNNWB_METRIC_EUCLIDEAN, 5);
  options.memory_bytes = 0;
  options.group_own_rows = TRUE;
  g_setenv("KNNWB_PARTITION", "off", TRUE);
  g_autoptr(KnnwbNeighbors) expected = one_process_lists(NULL, data, &options);
  g_setenv("KNNWB_PARTITION", "on", TRUE);
  /* a record: its row and 5 neighbours (32-bit numbers, double distances) */
  const size_t record = 4 + 5 * (4 + 8);
  int partitioned = 0;
  /* one round, refused: as messages */
  g_atomic_int_set(&thread_share_refused, 0);
  g_atomic_int_set(&thread_share_granted, 0);
  thread_share_limit = 10 * record;
  partitioned_shared(data, &options, expected, &partitioned);
  g_assert_cmpint(partitioned, ==, 2);
  g_assert_cmpint(g_atomic_int_get(&thread_share_refused), >=, 2);
  g_assert_cmpint(g_atomic_int_get(&combined_messages), ==, 2);
  g_assert_cmpint(g_atomic_int_get(&combined_shared), ==, 0);
  g_assert_cmpint(g_atomic_int_get(&combined_rounds), ==, 1);
  /* rounds of 7 records: through the blocks the host grants, many times */
  g_autofree char *round = g_strdup_printf("%zu", 7 * record);
  g_setenv("KNNWB_PARTITION_ROUND_BYTES", round, TRUE);
  g_atomic_int_set(&thread_share_granted, 0);
  partitioned_shared(data, &options, expected, &partitioned);
  g_unsetenv("KNNWB_PARTITION_ROUND_BYTES");
  thread_share_limit = 0;
  g_assert_cmpint(partitioned, ==, 2);
  g_assert_cmpint(g_atomic_int_get(&thread_share_granted), >=, 2);
  g_assert_cmpint(g_atomic_int_get(&combined_shared), ==, 2);
  g_assert_cmpint(g_atomic_int_get(&combined_rounds), >, 10);
  g_setenv("KNNWB_PARTITION_BOUNDS_SHORT_RANK", "1", TRUE);
  partitioned_shared(data, &options, expected, &partitioned);
  g_unsetenv("KNNWB_PARTITION_BOUNDS_SHORT_RANK");
  g_assert_cmpint(partitioned, ==, 0);
  g_unsetenv("KNNWB_PARTITION");
  g_unsetenv("KNNWB_PARTITION_ROWS");
  g_log_set_default_handler(g_log_default_handler, NULL);
}

/* Three ranks run with the test hook `hook` set to `value` (unset after): every rank fails, short
 * of memory, with `text` in its message. */
static void assert_ranks_short(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                               const char *hook, const char *value, const char *text, RankRun *runs)
{
  g_setenv(hook, value, TRUE);
  run_ranks(3, data, NULL, options, runs);
  g_unsetenv(hook);
  for (int r = 0; r < 3; r++) {
    g_assert_null(runs[r].result);
    g_assert_error(runs[r].error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
    g_assert_nonnull(strstr(runs[r].error->message, text));
    g_clear_error(&runs[r].error);
  }
}

/* Split memory that may put clustered rows together (options.group_split_gather): the ranks
 * gather their rows and take the partitioned search, every rank's lists those of one process, with
 * even blocks and uneven ones (text read by byte ranges; the lists are re-cut to the blocks), one
 * of them empty (KNNWB_PARTITION_SPLIT=0). Without the option, when a rank lacks room
 * (KNNWB_PARTITION_GATHER_ROOM) or cannot allocate the rows when it comes to it, and by default,
 * each rank keeps to its block and brings the rows it searches (uneven blocks, one empty, one
 * holding every row, too): the same bytes.
 * Without the partition the split search runs. A rank that keeps to its block and cannot allocate
 * the rows it searches stops every rank with its message. A NaN in rank 2's block stops the
 * gathered search on every rank, and the split search names the row. */
static void test_partitioned_gathered(void)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_PEARSON,
                                        KNNWB_METRIC_ABS_PEARSON};
  static const size_t uneven[] = {0, 400, 400, 1203}, first_empty[] = {0, 0, 1000, 1203},
                      all_first[] = {0, 1203, 1203, 1203};
  g_log_set_default_handler(count_partitions, NULL);
  g_setenv("KNNWB_PARTITION_ROWS", "90", TRUE);
  /* (each cell its own group: the cells of a centre visit each other, so visitors travel) */
  g_setenv("KNNWB_PARTITION_GROUPS", "off", TRUE);
  g_autoptr(KnnwbMatrix) data = blob_matrix(1203, 7, FALSE, 29);
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
    KnnwbKnnOptions options;
    small_cpu_options(&options, metrics[m], 6);
    options.memory_bytes = 0;
    g_setenv("KNNWB_PARTITION", "off", TRUE);
    g_autoptr(KnnwbNeighbors) expected = one_process_lists(NULL, data, &options);
    g_setenv("KNNWB_PARTITION", "on", TRUE);
    const gint64 visits = one_process_visits(data, &options);
    options.group_split = TRUE;
    /* gathered: 2 and 3 ranks, all rows and own rows, uneven blocks; then the four ways not (the
     * last: a rank that cannot allocate the rows after all); then whatever the rows, as on GPUs
     * (KNNWB_PARTITION_GATHER_ALWAYS): the plain search with the partition off (10), the
     * partitioned one chosen again on the whole rows (11), uneven blocks both; and a rank that
     * cannot allocate the rows there (12): the split search, the partition not asked again */
    for (int c = 0; c < 17; c++) {
      const int ranks = c < 2 || c == 15 ? 2 : 3;
      /* (kept: each rank kept to its block for the partitioned search) */
      const gboolean kept = c == 6 || c == 7 || c == 9 || c >= 13;
      const gboolean split = c == 8 || c == 12, partitioned = c < 6 || c == 11 || kept;
      options.group_own_rows = c != 0 && c != 2 && c != 15;
      options.group_split_gather = c != 6;
      rank_cuts = c == 4 || (c >= 10 && c <= 13) ? uneven
                  : c == 5 || c == 14            ? first_empty
                  : c == 16                      ? all_first
                                                 : NULL;
      rank_copies = c == 4 || (c >= 10 && c <= 12);
      if (c >= 10 && c <= 12)
        g_setenv("KNNWB_PARTITION_GATHER_ALWAYS", "1", TRUE);
      if (c < 13) /* (the default keeps each rank to its block: 13 on) */
        g_setenv("KNNWB_PARTITION_SPLIT", "0", TRUE);
      if (c == 10)
        g_setenv("KNNWB_PARTITION", "off", TRUE);
      if (c == 7)
        g_setenv("KNNWB_PARTITION_GATHER_ROOM", "1000", TRUE);
      if (c == 9 || c == 12) /* rank 1 cannot allocate the rows when it comes to it */
        g_setenv("KNNWB_GATHER_ROWS_FAIL_RANK", "1", TRUE);
      if (c == 8)
        g_setenv("KNNWB_PARTITION", "off", TRUE);
      if (c == 14) /* (the lists travel in rounds of 9 records, to and from an empty block) */
        g_setenv("KNNWB_PARTITION_ROUND_BYTES", "684", TRUE);
      combined_forget();
      RankRun runs[MAX_RANKS];
      g_atomic_int_set(&partition_runs, 0);
      g_atomic_int_set(&kept_runs, 0);
      visits_forget();
      choices_capture(TRUE);
      run_ranks(ranks, data, NULL, &options, runs);
      g_autoptr(GPtrArray) asked = choices_capture(FALSE);
      if (c == 12) /* (no choice made after the rows could not be put together) */
        g_assert_cmpuint(asked->len, ==, 0);
      else if (c == 9 || c == 6)
        g_assert_cmpuint(asked->len, >, 0);
      g_unsetenv("KNNWB_PARTITION_GATHER_ROOM");
      g_unsetenv("KNNWB_GATHER_ROWS_FAIL_RANK");
      g_unsetenv("KNNWB_PARTITION_GATHER_ALWAYS");
      g_unsetenv("KNNWB_PARTITION_SPLIT");
      g_unsetenv("KNNWB_PARTITION_ROUND_BYTES");
      g_setenv("KNNWB_PARTITION", "on", TRUE);
      g_assert_cmpint(g_atomic_int_get(&partition_runs), ==, partitioned ? ranks : 0);
      if (c == 14)
        g_assert_cmpint(g_atomic_int_get(&combined_rounds), >, 10);
      g_assert_cmpint(g_atomic_int_get(&kept_runs), ==, kept ? ranks : 0);
      if (partitioned) { /* (every rank's count of the job's visits: one process's) */
        g_assert_cmpint(visits_said, ==, visits);
        g_assert_cmpint(g_atomic_int_get(&visits_differ), ==, 0);
      }
      for (int r = 0; r < ranks; r++) {
        g_assert_no_error(runs[r].error);
        /* (the split search says so in its backend) */
        g_assert_true(g_str_has_suffix(runs[r].result->backend_used, "(split)") == split);
        if (rank_cuts != NULL) {
          g_assert_cmpuint(runs[r].result->first_row, ==, rank_cuts[r]);
          g_assert_cmpuint(runs[r].result->n_queries, ==, rank_cuts[r + 1] - rank_cuts[r]);
        }
        assert_same_rows(expected, runs[r].result);
        knnwb_neighbors_free(runs[r].result);
      }
      rank_cuts = NULL;
      rank_copies = FALSE;
    }
  }
  /* a rank that keeps to its block and cannot allocate the rows it searches stops them all */
  KnnwbKnnOptions kept;
  small_cpu_options(&kept, KNNWB_METRIC_EUCLIDEAN, 5);
  kept.group_split = TRUE;
  RankRun short_runs[MAX_RANKS];
  assert_ranks_short(data, &kept, "KNNWB_PARTITION_SPLIT_SHORT_RANK", "1",
                     "cannot allocate the rows this rank searches", short_runs);
  /* so does one that cannot allocate the rows it sends in a later round, as messages (the host
   * refuses its shared blocks; rounds of 10 rows) */
  thread_share_next = TRUE;
  thread_share_limit = 1;
  g_setenv("KNNWB_PARTITION_ROUND_BYTES", "280", TRUE);
  g_atomic_int_set(&thread_share_refused, 0);
  assert_ranks_short(data, &kept, "KNNWB_PARTITION_SEND_SHORT_RANK", "1",
                     "cannot allocate the rows this rank sends to the others", short_runs);
  g_unsetenv("KNNWB_PARTITION_ROUND_BYTES");
  thread_share_limit = 0;
  g_assert_cmpint(g_atomic_int_get(&thread_share_refused), >=, 3);
  /* one that cannot allocate its block's lists in row order at the end stops them all too */
  assert_ranks_short(data, &kept, "KNNWB_PARTITION_ORDER_SHORT_RANK", "2",
                     "cannot allocate the lists of this rank's", short_runs);
  /* a rank's places are 32-bit: one that would hold more rows than they number stops them all
   * (the limit lowered by the test hook: 401 rows a block, and its groups' rows besides) */
  assert_ranks_short(data, &kept, "KNNWB_PARTITION_SPLIT_MAX_HELD", "500",
                     "a rank holds at most 500 rows", short_runs);
  /* (room for every row: the same lists as one process) */
  g_setenv("KNNWB_PARTITION_SPLIT_MAX_HELD", "1203", TRUE);
  g_setenv("KNNWB_PARTITION", "off", TRUE);
  g_autoptr(KnnwbNeighbors) whole = one_process_lists(NULL, data, &kept);
  g_setenv("KNNWB_PARTITION", "on", TRUE);
  g_atomic_int_set(&kept_runs, 0);
  run_ranks(3, data, NULL, &kept, short_runs);
  g_unsetenv("KNNWB_PARTITION_SPLIT_MAX_HELD");
  g_assert_cmpint(g_atomic_int_get(&kept_runs), ==, 3);
  for (int r = 0; r < 3; r++) {
    g_assert_no_error(short_runs[r].error);
    assert_same_rows(whole, short_runs[r].result);
    g_clear_pointer(&short_runs[r].result, knnwb_neighbors_free);
  }
  data->values[1100 * 7 + 2] = NAN; /* rows 802..1202 are rank 2's of 3 */
  KnnwbKnnOptions options;
  small_cpu_options(&options, KNNWB_METRIC_EUCLIDEAN, 5);
  options.group_split = options.group_split_gather = TRUE;
  RankRun runs[MAX_RANKS];
  run_ranks(3, data, NULL, &options, runs);
  assert_ranks_refused(runs, 3, "rank 2: row 1100, column 2 (both counted from 0) holds NaN");
  g_unsetenv("KNNWB_PARTITION");
  g_unsetenv("KNNWB_PARTITION_ROWS");
  g_unsetenv("KNNWB_PARTITION_GROUPS");
  g_log_set_default_handler(g_log_default_handler, NULL);
}

/* One process's lists of data by the plain search (KNNWB_PARTITION=off, left set), euclidean,
 * k neighbours, with options made the small CPU runs' (no memory budget). */
static KnnwbNeighbors *plain_euclidean_lists(const KnnwbMatrix *data, size_t k,
                                             KnnwbKnnOptions *options)
{
  small_cpu_options(options, KNNWB_METRIC_EUCLIDEAN, k);
  options->memory_bytes = 0;
  g_setenv("KNNWB_PARTITION", "off", TRUE);
  return one_process_lists(NULL, data, options);
}

/* Ranks that read the input whole (each block a share of the rank's own copy of the whole
 * matrix) and may put their rows together (KNNWB_PARTITION_SPLIT=0): put together without a
 * transfer, for the partitioned search (0: even blocks; 1: uneven)
 * and, as on GPUs, for the whole-input search (2); a rank whose block is a plain copy sends every
 * rank to the transfer (3). With room for the run but not for a copy of the rows: held rows go (4);
 * where one rank does not hold them, no rank does, and each rank keeps to its block for the
 * partitioned search (5), also when that rank alone has room for the copy (6: the others judge
 * their room with the rows). One process's lists every time. */
static void test_partitioned_gathered_held(void)
{
  static const size_t uneven[] = {0, 400, 400, 1203};
  g_log_set_default_handler(count_partitions, NULL);
  g_setenv("KNNWB_PARTITION_ROWS", "90", TRUE);
  g_autoptr(KnnwbMatrix) data = blob_matrix(1203, 7, FALSE, 31);
  KnnwbKnnOptions options;
  g_autoptr(KnnwbNeighbors) expected = plain_euclidean_lists(data, 6, &options);
  options.group_split = options.group_split_gather = options.group_own_rows = TRUE;
  static const int local_sizes[] = {3, 1, 3};
  g_setenv("KNNWB_PARTITION_SPLIT", "0", TRUE); /* (else each rank keeps to its block) */
  for (int c = 0; c < 7; c++) {
    g_setenv("KNNWB_PARTITION", c == 2 ? "off" : "on", TRUE);
    if (c == 2)
      g_setenv("KNNWB_PARTITION_GATHER_ALWAYS", "1", TRUE);
    /* (1203 x (7 floats + 6 list slots) needs 188 KB, 154 KB without the rows: a third of the
     * host's 1,020,000 bytes has room at half for the latter only, the whole of it for both) */
    if (c >= 4)
      g_setenv("KNNWB_PARTITION_GATHER_ROOM", "1020000", TRUE);
    rank_local_sizes = c == 6 ? local_sizes : NULL;
    rank_cuts = c == 1 ? uneven : NULL;
    rank_whole_views = TRUE;
    rank_not_whole = c == 3 || c >= 5 ? 1 : -1;
    RankRun runs[MAX_RANKS];
    g_atomic_int_set(&partition_runs, 0);
    g_atomic_int_set(&held_runs, 0);
    g_atomic_int_set(&kept_runs, 0);
    run_ranks(3, data, NULL, &options, runs);
    rank_cuts = NULL;
    rank_whole_views = FALSE;
    rank_not_whole = -1;
    g_unsetenv("KNNWB_PARTITION_GATHER_ALWAYS");
    g_unsetenv("KNNWB_PARTITION_GATHER_ROOM");
    rank_local_sizes = NULL;
    g_assert_cmpint(g_atomic_int_get(&held_runs), ==, c == 3 || c >= 5 ? 0 : 3);
    g_assert_cmpint(g_atomic_int_get(&partition_runs), ==, c == 2 ? 0 : 3);
    g_assert_cmpint(g_atomic_int_get(&kept_runs), ==, c >= 5 ? 3 : 0);
    for (int r = 0; r < 3; r++) {
      g_assert_no_error(runs[r].error);
      g_assert_false(g_str_has_suffix(runs[r].result->backend_used, "(split)"));
      assert_same_rows(expected, runs[r].result);
      knnwb_neighbors_free(runs[r].result);
    }
  }
  g_unsetenv("KNNWB_PARTITION_SPLIT");
  g_unsetenv("KNNWB_PARTITION");
  g_unsetenv("KNNWB_PARTITION_ROWS");
  g_log_set_default_handler(g_log_default_handler, NULL);
}

/* The gathered sample is the one one process takes, also when it is a part of the rows (33,000
 * rows of 4 values: 32,768 sampled, across three uneven blocks): every rank logs the cluster
 * counts one process tries and the work each would leave, line for line; the lists are the same
 * bytes. Lists of exact partitions cannot tell a wrong sample, so the lines are compared. */
static void test_partitioned_gathered_sample(void)
{
  static const size_t cuts[] = {0, 5000, 21000, 33000};
  g_log_set_default_handler(count_partitions, NULL);
  g_setenv("KNNWB_PARTITION", "on", TRUE);
  g_autoptr(KnnwbMatrix) data = blob_matrix(33000, 4, FALSE, 31);
  KnnwbKnnOptions options;
  small_cpu_options(&options, KNNWB_METRIC_EUCLIDEAN, 5);
  options.memory_bytes = 0;
  choices_capture(TRUE);
  g_autoptr(KnnwbNeighbors) expected = one_process_lists(NULL, data, &options);
  g_autoptr(GPtrArray) one = choices_capture(FALSE);
  g_assert_cmpuint(one->len, >=, 1);
  choices_capture(TRUE);
  options.group_split = options.group_split_gather = options.group_own_rows = TRUE;
  rank_cuts = cuts;
  rank_copies = TRUE;
  RankRun runs[MAX_RANKS];
  g_atomic_int_set(&partition_runs, 0);
  run_ranks(3, data, NULL, &options, runs);
  rank_cuts = NULL;
  rank_copies = FALSE;
  g_autoptr(GPtrArray) ranks = choices_capture(FALSE);
  g_assert_cmpint(g_atomic_int_get(&partition_runs), ==, 3);
  g_assert_cmpuint(ranks->len, ==, 3 * one->len);
  for (guint t = 0; t < one->len; t++) {
    guint seen = 0;
    for (guint u = 0; u < ranks->len; u++)
      seen += g_strcmp0(g_ptr_array_index(one, t), g_ptr_array_index(ranks, u)) == 0;
    g_assert_cmpuint(seen, ==, 3);
  }
  for (int r = 0; r < 3; r++) {
    g_assert_no_error(runs[r].error);
    assert_same_rows(expected, runs[r].result);
    knnwb_neighbors_free(runs[r].result);
  }
  g_unsetenv("KNNWB_PARTITION");
  g_log_set_default_handler(g_log_default_handler, NULL);
}

/* Blocks of different widths with the gathering allowed: every rank refuses them with the split
 * search's reason before anything travels (a gather would take the widths as equal). */
static void test_partitioned_gathered_widths(void)
{
  g_autoptr(KnnwbMatrix) data = blob_matrix(1203, 7, FALSE, 33);
  g_setenv("KNNWB_PARTITION", "on", TRUE);
  KnnwbKnnOptions options;
  small_cpu_options(&options, KNNWB_METRIC_EUCLIDEAN, 5);
  options.group_split = options.group_split_gather = TRUE;
  RankRun runs[MAX_RANKS];
  rank_narrow = 1;
  run_ranks(3, data, NULL, &options, runs);
  rank_narrow = -1;
  for (int r = 0; r < 3; r++) {
    g_assert_null(runs[r].result);
    g_assert_error(runs[r].error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(runs[r].error->message, "blocks have different numbers of columns"));
    g_clear_error(&runs[r].error);
  }
  g_unsetenv("KNNWB_PARTITION");
}

/* A NaN in rank 2's block: with the partition forced on, rank 2 finds it while assigning its
 * rows, the ranks give up together and the plain search names the row on every rank. */
static void test_partitioned_failing_rank(void)
{
  g_autoptr(KnnwbMatrix) data = blob_matrix(1203, 7, FALSE, 25);
  data->values[1100 * 7 + 2] = NAN; /* rows 802..1202 are rank 2's of 3 */
  g_setenv("KNNWB_PARTITION", "on", TRUE);
  g_setenv("KNNWB_PARTITION_ROWS", "90", TRUE);
  KnnwbKnnOptions options;
  small_cpu_options(&options, KNNWB_METRIC_EUCLIDEAN, 5);
  RankRun runs[MAX_RANKS];
  run_ranks(3, data, NULL, &options, runs);
  assert_ranks_refused(runs, 3, "rank 2: row 1100, column 2 (both counted from 0) holds NaN");
  g_unsetenv("KNNWB_PARTITION");
  g_unsetenv("KNNWB_PARTITION_ROWS");
}

/* Ranks that keep to their blocks, one of them weighing work by the GPU's model as a rank on a
 * GPU would among ranks on CPUs (KNNWB_PARTITION_GPU_MODEL_RANK): the ranks agree on one model
 * before they give phase two's groups out, so every rank gives them to the same ranks and the
 * lists are one process's (weighed apart, rank 1 gave five of the nine visited groups to other
 * ranks than the others did, and the lists differed from one process's). */
static void test_partitioned_mixed_models(void)
{
  g_log_set_default_handler(count_partitions, NULL);
  g_setenv("KNNWB_PARTITION_ROWS", "90", TRUE);
  /* (each cell its own group: the cells of a centre visit each other, so visitors travel) */
  g_setenv("KNNWB_PARTITION_GROUPS", "off", TRUE);
  g_autoptr(KnnwbMatrix) data = blob_matrix(1203, 7, FALSE, 37);
  KnnwbKnnOptions options;
  g_autoptr(KnnwbNeighbors) expected = plain_euclidean_lists(data, 6, &options);
  g_setenv("KNNWB_PARTITION", "on", TRUE);
  const gint64 visits = one_process_visits(data, &options);
  g_assert_cmpint(visits, >, 0);
  options.group_split = options.group_split_gather = options.group_own_rows = TRUE;
  for (int ranks = 2; ranks <= 3; ranks++) {
    g_setenv("KNNWB_PARTITION_GPU_MODEL_RANK", "1", TRUE);
    /* (a GPU model far from the CPU's: a row brought costs more than any group's work, so by it
     * every group with visitors would stay where phase one searched it) */
    g_setenv("KNNWB_PARTITION_GPU_COSTS", "1e15:0", TRUE);
    RankRun runs[MAX_RANKS];
    g_atomic_int_set(&kept_runs, 0);
    g_atomic_int_set(&partition_runs, 0);
    visits_forget();
    run_ranks(ranks, data, NULL, &options, runs);
    g_unsetenv("KNNWB_PARTITION_GPU_MODEL_RANK");
    g_unsetenv("KNNWB_PARTITION_GPU_COSTS");
    g_assert_cmpint(g_atomic_int_get(&kept_runs), ==, ranks);
    g_assert_cmpint(g_atomic_int_get(&partition_runs), ==, ranks);
    g_assert_cmpint(visits_said, ==, visits);
    for (int r = 0; r < ranks; r++) {
      g_assert_no_error(runs[r].error);
      assert_same_rows(expected, runs[r].result);
    }
    free_runs(runs, ranks);
  }
  g_unsetenv("KNNWB_PARTITION");
  g_unsetenv("KNNWB_PARTITION_ROWS");
  g_unsetenv("KNNWB_PARTITION_GROUPS");
  g_log_set_default_handler(g_log_default_handler, NULL);
}

/* Ranks whose partitions differ (a rank on another CPU, simulated by a hook that changes rank 1's
 * digest): every rank takes the plain search together (split ranks: the split search, and their
 * debug lines say so), none partitions, none waits for the others forever, and the lists are the
 * plain search's. */
static void test_partitioned_ranks_differ(void)
{
  g_autoptr(KnnwbMatrix) data = blob_matrix(1203, 7, FALSE, 27);
  KnnwbKnnOptions options;
  small_cpu_options(&options, KNNWB_METRIC_COSINE, 6);
  options.memory_bytes = 0;
  g_setenv("KNNWB_PARTITION", "off", TRUE);
  g_autoptr(KnnwbNeighbors) expected = one_process_lists(NULL, data, &options);
  g_setenv("KNNWB_PARTITION", "on", TRUE);
  g_setenv("KNNWB_PARTITION_ROWS", "90", TRUE);
  g_setenv("KNNWB_PARTITION_DIFFER_RANK", "1", TRUE);
  g_log_set_default_handler(count_partitions, NULL);
  /* every rank holding every row, then split ranks that may put their rows together */
  for (int c = 0; c < 4; c++) {
    const int ranks = 2 + c % 2;
    options.group_split = options.group_split_gather = c >= 2;
    RankRun runs[MAX_RANKS];
    g_atomic_int_set(&partition_runs, 0);
    g_atomic_int_set(&differ_plain, 0);
    g_atomic_int_set(&differ_split, 0);
    run_ranks(ranks, data, NULL, &options, runs);
    g_assert_cmpint(g_atomic_int_get(&partition_runs), ==, 0);
    g_assert_cmpint(g_atomic_int_get(c >= 2 ? &differ_split : &differ_plain), ==, ranks);
    g_assert_cmpint(g_atomic_int_get(c >= 2 ? &differ_plain : &differ_split), ==, 0);
    for (int r = 0; r < ranks; r++) {
      g_assert_no_error(runs[r].error);
      assert_same_rows(expected, runs[r].result);
      knnwb_neighbors_free(runs[r].result);
    }
  }
  g_log_set_default_handler(g_log_default_handler, NULL);
  g_unsetenv("KNNWB_PARTITION_DIFFER_RANK");
  g_unsetenv("KNNWB_PARTITION");
  g_unsetenv("KNNWB_PARTITION_ROWS");
}

static void cancel_now(uint64_t done, uint64_t total, void *data)
{
  (void)done;
  (void)total;
  g_atomic_int_set((volatile gint *)data, 1);
}

/* A partitioned run cancelled in its sub-searches (at the first progress report of any rank):
 * every rank ends with the cancellation, none waits for the others forever. */
static void test_partitioned_cancelled(void)
{
  g_autoptr(KnnwbMatrix) data = blob_matrix(1203, 7, FALSE, 23);
  static volatile gint cancel;
  g_setenv("KNNWB_PARTITION", "on", TRUE);
  g_setenv("KNNWB_PARTITION_ROWS", "90", TRUE);
  for (int ranks = 2; ranks <= 3; ranks++) {
    KnnwbKnnOptions options;
    small_cpu_options(&options, KNNWB_METRIC_EUCLIDEAN, 5);
    g_atomic_int_set(&cancel, 0);
    options.cancel = &cancel;
    options.progress = cancel_now;
    options.progress_data = (void *)&cancel;
    RankRun runs[MAX_RANKS];
    run_ranks(ranks, data, NULL, &options, runs);
    for (int r = 0; r < ranks; r++) {
      g_assert_null(runs[r].result);
      g_assert_error(runs[r].error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
      g_clear_error(&runs[r].error);
    }
  }
  g_unsetenv("KNNWB_PARTITION");
  g_unsetenv("KNNWB_PARTITION_ROWS");
}

/* One rank of the split planner's test: its blocks of the whole prepared rows (packed copies, as a
 * split run holds them), planned with the others. */
typedef struct {
  ThreadRank rank;
  const KnnwbPrepared *whole, *reference; /* reference NULL: a self run */
  size_t first, count, reference_first, reference_count, k, kc, chosen;
  size_t needed[KNNWB_MARGIN_SAMPLE];
} PlanRun;

/* Rows [first, first + count) of p packed into the returned buffer as a split run holds its
 * block, viewed in block. */
static char *plan_block(const KnnwbPrepared *p, size_t first, size_t count, KnnwbPrepared *block)
{
  const KnnwbSplitLayout layout = knnwb_split_layout(p->metric, p->scale_exponent, p->d);
  g_autofree unsigned char *flags = g_malloc0(p->n);
  if (p->invalid != NULL)
    memcpy(flags, p->invalid, p->n);
  g_autofree int64_t *rows = g_new(int64_t, MAX(count, (size_t)1));
  for (size_t t = 0; t < count; t++)
    rows[t] = (int64_t)(first + t);
  char *buffer = g_malloc(MAX(knnwb_split_bytes(&layout, count), (size_t)1));
  knnwb_split_pack(&layout, p, flags, rows, count, buffer);
  knnwb_split_view(&layout, p, buffer, count, block);
  return buffer;
}

static gpointer plan_main(gpointer data)
{
  PlanRun *run = data;
  const gboolean self = run->reference == NULL;
  KnnwbPrepared block, reference_block;
  g_autofree char *buffer = plan_block(run->whole, run->first, run->count, &block);
  g_autofree char *reference_buffer = self ? NULL
                                           : plan_block(run->reference, run->reference_first,
                                                        run->reference_count, &reference_block);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  KnnwbSplitRun split = {.options = &options, .group = &run->rank.group, .threads = 2};
  const KnnwbSplitRows plan = {
      &split,        &block,     self ? &block : &reference_block,
      block.invalid, run->first, self ? run->first : run->reference_first,
      self,          run->k,     self ? run->whole->n - 1 : run->reference->n,
      NULL};
  g_autoptr(GError) error = NULL;
  run->chosen = run->kc;
  memset(run->needed, 0xff, sizeof run->needed);
  g_assert_true(
      knnwb_split_plan(&plan, run->whole->n, SIZE_MAX, &run->chosen, run->needed, &error));
  g_assert_no_error(error);
  return NULL;
}

/* Runs the planner on ranks threads (the rows of p cut at cut[]; a query run against reference's
 * rows cut evenly, or a self run when reference is NULL), checks every rank's counts against one
 * process's planner's for the sample rows in its block and that every rank took one process's
 * plan, and returns it. */
static size_t plan_check(const KnnwbPrepared *p, const KnnwbPrepared *reference, int ranks,
                         const size_t *cut, size_t k, size_t kc)
{
  ThreadJob job = {.size = ranks};
  g_mutex_init(&job.lock);
  g_cond_init(&job.cond);
  PlanRun runs[MAX_RANKS];
  GThread *threads[MAX_RANKS];
  for (int r = 0; r < ranks; r++) {
    runs[r] = (PlanRun){.whole = p,
                        .reference = reference,
                        .first = cut[r],
                        .count = cut[r + 1] - cut[r],
                        .k = k,
                        .kc = kc};
    if (reference != NULL) {
      size_t last;
      knnwb_knn_group_rows(reference->n, r, ranks, &runs[r].reference_first, &last);
      runs[r].reference_count = last - runs[r].reference_first;
    }
    runs[r].rank.job = &job;
    runs[r].rank.group = thread_group(r, ranks, FALSE);
    threads[r] = g_thread_new("rank", plan_main, &runs[r]);
  }
  /* one process: KNNWB_MARGIN_SAMPLE rows spread over all of p, their counts and its plan */
  size_t sample[KNNWB_MARGIN_SAMPLE], needed[KNNWB_MARGIN_SAMPLE];
  const size_t n_sample = MIN((size_t)KNNWB_MARGIN_SAMPLE, p->n);
  knnwb_margin_sample_rows(0, p->n, n_sample, sample);
  const size_t largest = knnwb_margin_choose(
      p, reference != NULL ? reference : p, reference == NULL, 0, p->n, k, kc,
      reference != NULL ? reference->n : p->n - 1, SIZE_MAX, KNNWB_MARGIN_SAMPLE, 2, NULL, needed);
  for (int r = 0; r < ranks; r++) {
    g_thread_join(threads[r]);
    size_t at = 0; /* the rank's counts: those of the sample rows in its block, in order */
    for (size_t s = 0; s < n_sample; s++)
      if (sample[s] >= runs[r].first && sample[s] < runs[r].first + runs[r].count) {
        g_assert_cmpuint(runs[r].needed[at], ==, needed[s]);
        g_assert_cmpuint(needed[s], >, k); /* (every sample row was counted) */
        at++;
      }
    g_assert_cmpuint(runs[r].chosen, ==, largest);
  }
  g_mutex_clear(&job.lock);
  g_cond_clear(&job.cond);
  return largest;
}

/* The split ranks' margin planner (core/split/knn_split_plan.c): one process's sample rows, each
 * counted on its block's rank bit for bit as one process counts it (the heaps built against each
 * block and merged on the row's owner), and every rank takes one process's plan.
 * Euclidean clusters far from the origin under FP16 (the plan rises past the screen's count),
 * pearson under FP16, cosine under FP32 (the screen's count stays); self and query runs, 2-4
 * ranks, uneven blocks, one of them empty, one a block of fewer rows than the sample. */
static void test_split_planned(void)
{
  static const struct {
    KnnwbMetric metric;
    KnnwbScreen screen;
    int rises; /* 1: past the screen's count, 0: the screen's, -1: either */
  } cases[] = {{KNNWB_METRIC_EUCLIDEAN, KNNWB_SCREEN_FP16, 1},
               {KNNWB_METRIC_PEARSON, KNNWB_SCREEN_FP16, -1},
               {KNNWB_METRIC_COSINE, KNNWB_SCREEN_FP32, 0}};
  static const size_t cuts[][MAX_RANKS + 1] = {
      {0, 1200, 3001}, {0, 700, 700, 3001}, {0, 900, 920, 2300, 3001}};
  const size_t n = 3001, k = 10, kc = 30;
  g_setenv("KNNWB_MARGIN_PILOT", "always", TRUE);
  g_autoptr(KnnwbMatrix) m = blob_matrix(n, 12, FALSE, 11);
  for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
    KnnwbPrepared p;
    g_autoptr(GError) error = NULL;
    g_assert_true(
        knnwb_prepared_init(&p, m, cases[c].metric, FALSE, "data", 2, NULL, NULL, &error));
    g_assert_no_error(error);
    knnwb_prepared_set_screen(&p, &p, cases[c].screen);
    /* queries: the even rows of m against the odd ones */
    g_autoptr(KnnwbMatrix) odd = knnwb_matrix_new(n / 2, m->n_cols, NULL);
    g_autoptr(KnnwbMatrix) even = knnwb_matrix_new(n - n / 2, m->n_cols, NULL);
    for (size_t i = 0; i < n; i++)
      memcpy((i % 2 ? odd : even)->values + i / 2 * m->n_cols, m->values + i * m->n_cols,
             m->n_cols * sizeof(float));
    KnnwbPrepared reference, queries;
    g_assert_true(knnwb_prepared_init(&reference, odd, cases[c].metric, FALSE, "reference", 2, NULL,
                                      NULL, &error));
    g_assert_true(knnwb_prepared_init(&queries, even, cases[c].metric, FALSE, "query", 2,
                                      &reference, NULL, &error));
    g_assert_no_error(error);
    knnwb_prepared_set_screen(&queries, &reference, cases[c].screen);
    static const size_t query_cuts[][MAX_RANKS + 1] = {
        {0, 600, 1501}, {0, 350, 350, 1501}, {0, 450, 460, 1150, 1501}};
    for (int ranks = 2; ranks <= MAX_RANKS; ranks++) {
      const size_t largest = plan_check(&p, NULL, ranks, cuts[ranks - 2], k, kc);
      const size_t queried = plan_check(&queries, &reference, ranks, query_cuts[ranks - 2], k, kc);
      if (cases[c].rises == 1)
        g_assert_cmpuint(MIN(largest, queried), >, kc);
      else if (cases[c].rises == 0)
        g_assert_cmpuint(MAX(largest, queried), ==, kc);
    }
    knnwb_prepared_clear(&queries);
    knnwb_prepared_clear(&reference);
    knnwb_prepared_clear(&p);
  }
  g_unsetenv("KNNWB_MARGIN_PILOT");
}

/* Whole-input ranks' margin planner (knnwb_knn_rounds_candidates with a group: every rank holds
 * every row and plans for its own range [first, first + count)): one process's sample rows, each
 * scored on the rank whose range holds it, and every rank takes one process's plan; 2-4 ranks,
 * uneven ranges, one of them empty. */
typedef struct {
  ThreadRank rank;
  const KnnwbPrepared *p;
  size_t first, count, available, chosen;
} WholePlanRun;

static gpointer whole_plan_main(gpointer data)
{
  WholePlanRun *run = data;
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 10;
  run->chosen = knnwb_knn_rounds_candidates(&options, run->p, run->p, TRUE, run->available, 2,
                                            &run->rank.group, run->first, run->count);
  return NULL;
}

static void test_whole_planned(void)
{
  static const size_t cuts[][MAX_RANKS + 1] = {
      {0, 1200, 3001}, {0, 700, 700, 3001}, {0, 900, 920, 2300, 3001}};
  const size_t n = 3001;
  g_setenv("KNNWB_MARGIN_PILOT", "always", TRUE);
  g_autoptr(KnnwbMatrix) m = blob_matrix(n, 12, FALSE, 11);
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_PEARSON};
  for (guint c = 0; c < G_N_ELEMENTS(metrics); c++) {
    KnnwbPrepared p;
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_prepared_init(&p, m, metrics[c], FALSE, "data", 2, NULL, NULL, &error));
    knnwb_prepared_set_screen(&p, &p, KNNWB_SCREEN_FP16);
    KnnwbKnnOptions options;
    knnwb_knn_options_init(&options);
    options.k = 10;
    const size_t one = knnwb_knn_rounds_candidates(&options, &p, &p, TRUE, n - 1, 2, NULL, 0, n);
    if (metrics[c] == KNNWB_METRIC_EUCLIDEAN)
      g_assert_cmpuint(one, >, knnwb_screen_candidates(KNNWB_SCREEN_FP16, 10)); /* it plans */
    for (int ranks = 2; ranks <= MAX_RANKS; ranks++) {
      ThreadJob job = {.size = ranks};
      g_mutex_init(&job.lock);
      g_cond_init(&job.cond);
      WholePlanRun runs[MAX_RANKS];
      GThread *threads[MAX_RANKS];
      for (int r = 0; r < ranks; r++) {
        const size_t *cut = cuts[ranks - 2];
        runs[r] = (WholePlanRun){
            .p = &p, .first = cut[r], .count = cut[r + 1] - cut[r], .available = n - 1};
        runs[r].rank.job = &job;
        runs[r].rank.group = thread_group(r, ranks, FALSE);
        threads[r] = g_thread_new("rank", whole_plan_main, &runs[r]);
      }
      for (int r = 0; r < ranks; r++) {
        g_thread_join(threads[r]);
        g_assert_cmpuint(runs[r].chosen, ==, one);
      }
      g_mutex_clear(&job.lock);
      g_cond_clear(&job.cond);
    }
    knnwb_prepared_clear(&p);
  }
  g_unsetenv("KNNWB_MARGIN_PILOT");
}

/* Split ranks' planner lines that raised the screen's count ("N candidates per row (the
 * screen's M; ..."), counted by the log handler while a planned run goes. */
static gint plans_raised;

static void count_plans(const gchar *domain, GLogLevelFlags level, const gchar *message,
                        gpointer data)
{
  const char *line = strstr(message, "margin planner: rank ");
  size_t chosen, screen;
  if ((level & G_LOG_LEVEL_DEBUG) && line != NULL &&
      sscanf(strchr(line, ',') + 1, " %zu candidates per row (the screen's %zu", &chosen,
             &screen) == 2 &&
      chosen > screen)
    g_atomic_int_inc(&plans_raised);
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    g_log_default_handler(domain, level, message, data);
}

/* Whole split runs that plan their first pass (KNNWB_MARGIN_PILOT=always: the CPU's FP32 screen
 * too) against the fixed count (KNNWB_MARGIN_PILOT=0): one process's lists either way, self and
 * query runs, 2-4 ranks, both ways of scoring a pair of blocks. Euclidean rows in two clusters 20
 * apart, their rows about 0.05 apart: FP32's window holds a few dozen rows, so every rank plans
 * more candidates than the screen's, and fewer rows are left to the re-selection (the first pass
 * took the plan). */
static void test_split_planned_run(void)
{
  g_setenv("KNNWB_MARGIN_PILOT", "always", TRUE);
  g_log_set_default_handler(count_plans, NULL);
  for (int panels = 0; panels <= 1; panels++) {
    if (panels)
      g_setenv("KNNWB_SPLIT_PANELS", "1", TRUE); /* (the path of GPU backends) */
    g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(1501, 6, 23);
    g_autoptr(KnnwbMatrix) queries = knnwb_test_random_matrix(233, 6, 29);
    for (size_t t = 0; t < data->n_rows * data->n_cols; t++)
      data->values[t] = (t / data->n_cols % 2 ? 10.0f : -10.0f) + 0.05f * data->values[t];
    for (size_t t = 0; t < queries->n_rows * queries->n_cols; t++)
      queries->values[t] = (t / queries->n_cols % 3 ? 10.0f : -10.0f) + 0.05f * queries->values[t];
    for (int query = 0; query <= 1; query++) {
      KnnwbKnnOptions options;
      small_cpu_options(&options, KNNWB_METRIC_EUCLIDEAN, 5);
      g_autoptr(KnnwbNeighbors) expected =
          one_process_lists(query ? queries : NULL, data, &options);
      options.group_split = options.group_own_rows = TRUE;
      for (int ranks = 2; ranks <= MAX_RANKS; ranks++) {
        size_t reselected[2] = {0, 0}; /* the fixed count's, the planned one's */
        for (int planned = 0; planned <= 1; planned++) {
          RankRun runs[MAX_RANKS];
          g_setenv("KNNWB_MARGIN_PILOT", planned ? "always" : "0", TRUE);
          g_atomic_int_set(&plans_raised, 0);
          run_ranks(ranks, query ? queries : data, query ? data : NULL, &options, runs);
          g_assert_cmpint(g_atomic_int_get(&plans_raised), ==, planned ? ranks : 0);
          reselected[planned] = runs[0].result->n_reselected;
          for (int r = 0; r < ranks; r++) {
            g_assert_no_error(runs[r].error);
            assert_same_rows(expected, runs[r].result);
            knnwb_neighbors_free(runs[r].result);
          }
        }
        /* the first pass took the planned count: fewer rows left to the re-selection */
        g_assert_cmpuint(reselected[1], <, reselected[0]);
      }
    }
    g_unsetenv("KNNWB_SPLIT_PANELS");
  }
  /* pearson and cosine, whatever the plan */
  check_case_split(KNNWB_METRIC_PEARSON, 613, 211, 9, 4, TRUE, 0, TRUE);
  check_case_split(KNNWB_METRIC_COSINE, 777, 0, 6, 6, FALSE, 2, TRUE);
  g_log_set_default_handler(g_log_default_handler, NULL);
  g_unsetenv("KNNWB_MARGIN_PILOT");
}

/* input_done's callback for test_split_input_done: the rank's block overwritten with NaN (1), then
 * also its values freed as knnwb knn frees them (2: a block of the rank's own copy of the whole,
 * so the whole's values go), after the checks that it comes once and on the rank's own thread. */
static int input_done_way;

static void input_done_poison(void *data)
{
  RankRun *run = data;
  g_assert_true(run->thread == g_thread_self());
  g_assert_nonnull(run->query_block);
  g_assert_cmpint(++run->input_done_calls, ==, 1);
  KnnwbMatrix *block = run->query_block;
  for (size_t c = 0; c < block->n_rows * block->n_cols; c++)
    block->values[c] = NAN;
  if (input_done_way == 2)
    knnwb_matrix_release_values(block);
}

/* The rows a split self run reads after input_done: none. Small integer values (many ties, so
 * rows go through the certify loop's re-selection and exhaustive rounds after the first pass), a
 * callback that poisons the rank's block and then frees it: for every metric's packed layout,
 * two-sided jobs and the two panels of other backends, 2-4 ranks (one block empty), each rank's
 * callback comes exactly once where the own rows are read from the shared window, and the lists
 * are one process's bytes. It never comes with KNNWB_SPLIT_OWN_PACKED=0, without a shared window,
 * when the lists go back by an exchange (KNNWB_SPLIT_BACK_SHARED=0), for one rank, for ranks that
 * each hold every row, nor for a split query run. */
static void test_split_input_done(void)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON,   KNNWB_METRIC_ABS_PEARSON,
                                        KNNWB_METRIC_SPEARMAN,  KNNWB_METRIC_EUCLIDEAN,
                                        KNNWB_METRIC_MANHATTAN, KNNWB_METRIC_COSINE};
  static const size_t three[] = {0, 60, 60, 131};
  const size_t n = 131, nq = 29, d = 3;
  g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
  g_autoptr(KnnwbMatrix) queries = knnwb_matrix_new(nq, d, NULL);
  g_autoptr(GRand) rng = g_rand_new_with_seed(91);
  for (size_t i = 0; i < (n + nq) * d; i++)
    *(i < n * d ? &data->values[i] : &queries->values[i - n * d]) =
        (float)g_rand_int_range(rng, -1, 2);
  for (size_t i = 0; i < n + nq; i++) { /* no constant row (correlations) */
    float *row = i < n ? data->values + i * d : queries->values + (i - n) * d;
    if (row[0] == row[1])
      row[1] = row[0] + 1.0f;
  }
  rank_copies = TRUE; /* (the callback overwrites the rank's own rows, not data's) */
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
    KnnwbKnnOptions options;
    small_cpu_options(&options, metrics[m], 6);
    g_autoptr(KnnwbNeighbors) expected = one_process_lists(NULL, data, &options);
    g_autoptr(KnnwbNeighbors) expected_query = one_process_lists(queries, data, &options);
    options.input_done = input_done_poison;
    options.group_split = TRUE;
    /* way 0: the rank's block poisoned; 1: poisoned and freed (a block of the rank's own copy of
     * the whole); 2-3: the same through the panels of other backends, their k best refined by the
     * backend; 4: the own rows' prepared copy kept; 5: no shared window; 6: the lists sent back;
     * 7: a query run; 8: every rank every row */
    size_t reselected = 0; /* rows the certify loop took after a callback */
    for (int way = 0; way < 9; way++) {
      input_done_way = way == 1 || way == 3 ? 2 : 1;
      rank_whole_views = input_done_way == 2;
      if (way == 2 || way == 3) {
        g_setenv("KNNWB_SPLIT_PANELS", "1", TRUE);
        g_setenv("KNNWB_SPLIT_TEST_EXACT", "3", TRUE);
      }
      if (way == 4)
        g_setenv("KNNWB_SPLIT_OWN_PACKED", "0", TRUE);
      if (way == 6)
        g_setenv("KNNWB_SPLIT_BACK_SHARED", "0", TRUE);
      options.group_split = way != 8;
      const gboolean query = way == 7, called = way < 4;
      for (int ranks = 1; ranks <= MAX_RANKS; ranks++) {
        rank_cuts = ranks == 3 && !query ? three : NULL;
        thread_share_next = way != 5;
        RankRun runs[MAX_RANKS];
        run_ranks(ranks, query ? queries : data, query ? data : NULL, &options, runs);
        for (int r = 0; r < ranks; r++) {
          g_assert_no_error(runs[r].error);
          g_assert_cmpint(runs[r].input_done_calls, ==, called && ranks > 1 ? 1 : 0);
          reselected += runs[r].input_done_calls * runs[r].result->n_reselected;
          assert_same_rows(query ? expected_query : expected, runs[r].result);
          knnwb_neighbors_free(runs[r].result);
        }
      }
      rank_cuts = NULL;
      g_unsetenv("KNNWB_SPLIT_PANELS");
      g_unsetenv("KNNWB_SPLIT_TEST_EXACT");
      g_unsetenv("KNNWB_SPLIT_OWN_PACKED");
      g_unsetenv("KNNWB_SPLIT_BACK_SHARED");
    }
    g_assert_cmpuint(reselected, >, 0);
  }
  rank_copies = rank_whole_views = FALSE;
}

/* Rows of a few columns (KNNWB_TREE=1: the k-d tree at any size, core/tree/): every rank builds
 * the tree of every row and searches its share; split ranks put their blocks together for it, even
 * uneven ones and where the run may not put them together otherwise (--mpi-input split). The lists
 * are one process's tile search's bytes, on each rank's rows or every row; copies of a row
 * included; and query rows, each rank its share of them. */
static void test_tree_ranks(void)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN,
                                        KNNWB_METRIC_PEARSON,   KNNWB_METRIC_ABS_PEARSON,
                                        KNNWB_METRIC_SPEARMAN,  KNNWB_METRIC_COSINE};
  static const size_t uneven[] = {0, 100, 101, 900, 1203};
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
    const size_t n = 1203, d = m < 2 ? 2 + m : 3 + m % 3;
    g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(n, d, (guint32)(41 + m));
    for (size_t c = 1; c <= 12; c++) /* copies of row 3 */
      memcpy(data->values + 7 * c * d, data->values + 3 * d, d * sizeof(float));
    KnnwbKnnOptions options;
    small_cpu_options(&options, metrics[m], 7);
    g_setenv("KNNWB_TREE", "0", TRUE);
    g_autoptr(KnnwbNeighbors) expected = one_process_lists(NULL, data, &options);
    g_setenv("KNNWB_TREE", "1", TRUE);
    for (int way = 0; way < 5; way++) {
      options.group_split = way >= 2; /* 0, 1: every rank holds every row */
      options.group_own_rows = way % 2 == 1 || way == 4;
      rank_cuts = way == 4 ? uneven : NULL; /* (4 split ranks' blocks of any sizes) */
      for (int ranks = way == 4 ? 4 : 2; ranks <= MAX_RANKS; ranks++) {
        RankRun runs[MAX_RANKS];
        run_ranks(ranks, data, NULL, &options, runs);
        size_t covered = 0;
        for (int r = 0; r < ranks; r++) {
          g_assert_no_error(runs[r].error);
          g_assert_true(g_str_has_prefix(runs[r].result->backend_used, "cpu (k-d tree) x "));
          if (options.group_own_rows) {
            g_assert_cmpuint(runs[r].result->first_row, ==, covered);
            covered += runs[r].result->n_queries;
          } else {
            g_assert_cmpuint(runs[r].result->n_queries, ==, n);
          }
          assert_same_rows(expected, runs[r].result);
          knnwb_neighbors_free(runs[r].result);
        }
        if (options.group_own_rows)
          g_assert_cmpuint(covered, ==, n);
      }
    }
    rank_cuts = NULL;
    /* Query rows against every row held by every rank: each rank its share of the queries. */
    g_autoptr(KnnwbMatrix) queries = knnwb_test_random_matrix(331, d, (guint32)(43 + m));
    g_setenv("KNNWB_TREE", "0", TRUE);
    options.group_split = FALSE;
    g_autoptr(KnnwbNeighbors) expected_queries = one_process_lists(queries, data, &options);
    g_setenv("KNNWB_TREE", "1", TRUE);
    for (int own = 0; own <= 1; own++) {
      options.group_own_rows = own;
      RankRun runs[MAX_RANKS];
      run_ranks(3, queries, data, &options, runs);
      for (int r = 0; r < 3; r++) {
        g_assert_no_error(runs[r].error);
        g_assert_cmpstr(runs[r].result->backend_used, ==, "cpu (k-d tree) x 3 ranks");
        size_t first, last;
        knnwb_knn_group_rows(331, r, 3, &first, &last);
        g_assert_cmpuint(runs[r].result->n_queries, ==, own ? last - first : 331);
        assert_same_rows(expected_queries, runs[r].result);
        knnwb_neighbors_free(runs[r].result);
      }
    }
  }
  g_unsetenv("KNNWB_TREE");
}

/* A degenerate row among the tree's rows under an angular metric (a constant row in rank 2's
 * block, labelled): every rank refuses the run with one process's words, the label included,
 * whole or split; dropped, the lists are one process's. */
static void test_tree_ranks_degenerate(void)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_COSINE};
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
    g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(301, 4, 19 + m);
    for (size_t i = 0; i < 301; i++) {
      g_autofree char *label = g_strdup_printf("cell-%zu", i);
      knnwb_matrix_set_row_label(data, i, label);
    }
    for (size_t j = 0; j < 4; j++) /* rows 200..300 are rank 2's of 3 */
      data->values[250 * 4 + j] = data->values[280 * 4 + j] =
          metrics[m] == KNNWB_METRIC_COSINE ? 0.0f : 1.5f;
    KnnwbKnnOptions options;
    small_cpu_options(&options, metrics[m], 5);
    g_autoptr(GError) alone = NULL, tree_alone = NULL;
    g_autoptr(KnnwbNeighbors) none = NULL;
    g_setenv("KNNWB_TREE", "0", TRUE); /* (the tile search's words) */
    g_assert_false(knnwb_knn_self(data, &options, &none, &alone));
    g_assert_nonnull(strstr(alone->message, "data row 250 (cell-250) (counted from 0)"));
    g_setenv("KNNWB_TREE", "1", TRUE);
    g_assert_false(knnwb_knn_self(data, &options, &none, &tree_alone));
    g_assert_cmpstr(tree_alone->message, ==, alone->message);
    for (int split = 0; split <= 1; split++) {
      options.group_split = split;
      RankRun runs[MAX_RANKS];
      run_ranks(3, data, NULL, &options, runs);
      assert_ranks_refused(runs, 3, alone->message); /* (no "rank R: " in front) */
    }
    /* Dropped: each rank warns (the host lets rank 0 speak), not fatal here. */
    GLogLevelFlags fatal = g_log_set_always_fatal(G_LOG_FATAL_MASK);
    options.drop_degenerate = TRUE;
    options.group_split = FALSE;
    g_setenv("KNNWB_TREE", "0", TRUE);
    g_autoptr(KnnwbNeighbors) expected = one_process_lists(NULL, data, &options);
    g_assert_cmpint(expected->n_found[250], ==, 0);
    g_setenv("KNNWB_TREE", "1", TRUE);
    for (int split = 0; split <= 1; split++) {
      options.group_split = split;
      assert_ranks_self_lists(data, &options, expected);
    }
    g_log_set_always_fatal(fatal);
  }
  g_unsetenv("KNNWB_TREE");
}

/* The tree's ranks agree on how a run ends: a NaN in rank 2's rows leaves the run to the tile
 * search, which names it on every rank; a raised cancel stops every rank. */
static void test_tree_ranks_fail(void)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(300, 2, 9);
  data->values[250 * 2 + 1] = NAN; /* rows 200..299 are rank 2's of 3 */
  KnnwbKnnOptions options;
  small_cpu_options(&options, KNNWB_METRIC_EUCLIDEAN, 4);
  g_setenv("KNNWB_TREE", "1", TRUE);
  for (int split = 0; split <= 1; split++) {
    options.group_split = split;
    RankRun runs[MAX_RANKS];
    run_ranks(3, data, NULL, &options, runs);
    assert_ranks_refused(runs, 3, "rank 2: row 250, column 1 (both counted from 0) holds NaN");
  }
  data->values[250 * 2 + 1] = 0.5f;
  static volatile gint cancel = 1;
  options.cancel = &cancel;
  for (int split = 0; split <= 1; split++) {
    options.group_split = split;
    RankRun runs[MAX_RANKS];
    run_ranks(3, data, NULL, &options, runs);
    for (int r = 0; r < 3; r++) {
      g_assert_null(runs[r].result);
      g_assert_error(runs[r].error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
      g_clear_error(&runs[r].error);
    }
  }
  g_unsetenv("KNNWB_TREE");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/distributed/group/every-metric", test_every_metric);
  g_test_add_func("/distributed/group/odd-sizes", test_odd_sizes);
  g_test_add_func("/distributed/group/duplicate-rows", test_duplicate_rows);
  g_test_add_func("/distributed/group/failing-rank", test_failing_rank);
  g_test_add_func("/distributed/group/cancelled", test_cancelled_rank);
  g_test_add_func("/distributed/group/agree-backend", test_ranks_agree_backend);
  g_test_add_func("/distributed/group/split-degenerate-row", test_split_degenerate_row);
  g_test_add_func("/distributed/group/split-global-statistics", test_split_global_statistics);
  g_test_add_func("/distributed/group/split-uneven-blocks", test_split_uneven_blocks);
  g_test_add_func("/distributed/group/split-thresholds-ties", test_split_thresholds_ties);
  g_test_add_func("/distributed/group/split-pair-chunks", test_split_pair_chunks);
  g_test_add_func("/distributed/group/split-dense-ties", test_split_dense_ties);
  g_test_add_func("/distributed/group/split-back-bound", test_split_back_bound);
  g_test_add_func("/distributed/group/whole-refined-ties", test_whole_refined_ties);
  g_test_add_func("/distributed/group/split-merge-order", test_split_merge_order);
  g_test_add_func("/distributed/group/split-progress", test_split_progress);
  g_test_add_func("/distributed/group/split-neighbourhood", test_split_neighbourhood);
  g_test_add_func("/distributed/group/split-planned", test_split_planned);
  g_test_add_func("/distributed/group/split-planned-run", test_split_planned_run);
  g_test_add_func("/distributed/group/whole-planned", test_whole_planned);
  g_test_add_func("/distributed/group/split-input-done", test_split_input_done);
  g_test_add_func("/distributed/group/tree-ranks", test_tree_ranks);
  g_test_add_func("/distributed/group/tree-ranks-fail", test_tree_ranks_fail);
  g_test_add_func("/distributed/group/tree-ranks-degenerate", test_tree_ranks_degenerate);
  g_test_add_func("/distributed/group/threshold-rounds", test_threshold_rounds);
  g_test_add_func("/distributed/group/threshold-board", test_threshold_board);
  g_test_add_func("/distributed/group/undirected-edges", test_undirected_edges);
  g_test_add_func("/distributed/group/partitioned", test_partitioned);
  g_test_add_func("/distributed/group/partitioned-blocks", test_partitioned_blocks);
  g_test_add_func("/distributed/group/partitioned-gathered", test_partitioned_gathered);
  g_test_add_func("/distributed/group/partitioned-gathered-sample",
                  test_partitioned_gathered_sample);
  g_test_add_func("/distributed/group/partitioned-gathered-held", test_partitioned_gathered_held);
  g_test_add_func("/distributed/group/partitioned-gathered-widths",
                  test_partitioned_gathered_widths);
  g_test_add_func("/distributed/group/partitioned-cancelled", test_partitioned_cancelled);
  g_test_add_func("/distributed/group/partitioned-failing-rank", test_partitioned_failing_rank);
  g_test_add_func("/distributed/group/partitioned-ranks-differ", test_partitioned_ranks_differ);
  g_test_add_func("/distributed/group/partitioned-mixed-models", test_partitioned_mixed_models);
  return g_test_run();
}
