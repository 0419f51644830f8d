/*
 * The CPU backend of a selection job: the kc smallest float scores of every query row.
 *
 * Rows are cut into blocks; a tile is a (query block, reference block) pair whose dot products
 * come from one GEMM in the job's screening precision (gemm_cpu.c: FP32 or BF16), or whose scores
 * from the blocked L1 kernel, into a per-thread buffer. For a self job only tiles with rb >= qb are
 * computed: tile (qb, rb) is scanned by rows for block qb and by columns for block rb, so every
 * pair is scored once. Each row keeps a buffer of candidates below its threshold, cut to its kc
 * best when full (select_cpu_rows.c), and the scans compare 16 scores at a time with the
 * threshold. A block's rows are guarded by a mutex because two tiles may feed the same block at
 * once. A share of a job
 * (job->share_count > 1, one per process of a group) takes every share_count-th tile of the
 * enumeration, which spreads the long and short rows of the triangle evenly.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <knnwb/knn.h>
#include <knnwb/parallel.h>
#include "cpu/cpu_internal.h"

/* The largest tile side. */
#define KNNWB_SELECT_TILE 512

/* OpenBLAS's own thread count; we run one single-threaded SGEMM per worker instead. */
extern int openblas_get_num_threads(void);
extern void openblas_set_num_threads(int);

/* OpenBLAS takes a 128 MiB work buffer for every thread that calls SGEMM, and when that allocation
 * fails it retries for ever (the program hangs instead of failing). Under an address-space limit
 * (`ulimit -v`) the number of GEMM threads is therefore capped by the room left when they start
 * (called after every shared allocation of the selection): each started thread needs its buffer,
 * its stack, the 64 MiB heap glibc reserves for a new thread's malloc arena, and per_thread bytes
 * of its own buffers. Returns threads unchanged where there is no limit or /proc is unreadable.
 * (Seen on a 32-core GPU machine: a CUDA start that failed under the limit left less room than a
 * count taken before the lists were allocated assumed, and a worker spun in OpenBLAS for ever.) */
static int knnwb_select_threads_for_address_space(int threads, guint64 per_thread)
{
  struct rlimit limit;
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return threads;
  g_autofree char *status_text = NULL;
  if (!g_file_get_contents("/proc/self/status", &status_text, NULL, NULL))
    return threads;
  const char *line = strstr(status_text, "VmSize:");
  if (line == NULL)
    return threads;
  guint64 mapped = g_ascii_strtoull(line + strlen("VmSize:"), NULL, 10) * 1024;
  struct rlimit stack;
  guint64 stack_bytes = (guint64)8 << 20;
  if (getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY)
    stack_bytes = MAX(stack_bytes, (guint64)stack.rlim_cur);
  const guint64 blas_buffer = (guint64)136 << 20, arena = (guint64)64 << 20;
  const guint64 reserve = (guint64)128 << 20; /* the caller's later small allocations */
  guint64 room = (guint64)limit.rlim_cur > mapped + reserve ? limit.rlim_cur - mapped - reserve : 0;
  /* The calling thread needs its buffer and its own buffers; every started thread all of it. */
  guint64 caller = blas_buffer + per_thread, worker = caller + stack_bytes + arena;
  guint64 extra = room > caller ? (room - caller) / worker : 0;
  int fitting = (int)MIN((guint64)threads, 1 + extra);
  if (fitting < threads)
    g_debug("select: %d threads fit the address-space limit (of %d)", fitting, threads);
  return fitting;
}

typedef struct {
  const KnnwbSelectJob *job;
  KnnwbCpuGemm *gemm;
  size_t block_query, block_reference, n_query_blocks, n_reference_blocks;
  uint64_t n_tiles; /* of this share */
  uint64_t share_index, share_count;
  gssize next_tile;        /* atomically advanced, in this share's tiles */
  gsize tiles_done;        /* (atomic) */
  GMutex *query_locks;     /* one per query block */
  GMutex *reference_locks; /* self: the same array as query_locks */
  KnnwbCandidateRows rows; /* n_query lists (then n_reference: two-sided jobs) */
  KnnwbProgressThrottle report;
  gint failed; /* a KNNWB_KERNELS_* status */
  GMutex failure_lock;
  char failure[256];
} KnnwbCpuSelect;

/* Manhattan tile rows [q0, q0+bq) x [r0, r0+br) into out (row stride ld): scores directly. */
static void knnwb_select_l1_tile(const KnnwbSelectJob *job, size_t q0, size_t bq, size_t r0,
                                 size_t br, float *out, size_t ld)
{
  const size_t d = job->dim;
  const float *q = job->query + q0 * d, *r = job->reference + r0 * d;
  for (size_t a = 0; a < bq; a++) {
    const float *x = q + a * d;
    for (size_t b = 0; b < br; b++) {
      const float *y = r + b * d;
      float acc[8] = {0};
      size_t j = 0;
      for (; j + 8 <= d; j += 8)
        for (int t = 0; t < 8; t++)
          acc[t] += fabsf(x[j + t] - y[j + t]);
      float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
      for (; j < d; j++)
        sum += fabsf(x[j] - y[j]);
      out[a * ld + b] = sum;
    }
  }
}

static KnnwbTileKind knnwb_select_tile_kind(const KnnwbSelectJob *job)
{
  switch (job->score_kind) {
  case KNNWB_SCORE_DOT:
    return KNNWB_TILE_DOT;
  case KNNWB_SCORE_ABS_DOT:
    return KNNWB_TILE_ABS_DOT;
  case KNNWB_SCORE_L2:
    return KNNWB_TILE_L2;
  default:
    return KNNWB_TILE_SCORES;
  }
}

static gboolean knnwb_select_tile(KnnwbCpuSelect *s, KnnwbCpuGemmWorker *worker, size_t qb,
                                  size_t rb, float *tile, float *scratch)
{
  const KnnwbSelectJob *job = s->job;
  const size_t ld = s->block_reference;
  const size_t q0 = qb * s->block_query, r0 = rb * s->block_reference;
  const size_t bq = MIN(s->block_query, job->n_query - q0);
  const size_t br = MIN(s->block_reference, job->n_reference - r0);
  if (job->score_kind == KNNWB_SCORE_L1) {
    knnwb_select_l1_tile(job, q0, bq, r0, br, tile, ld);
  } else {
    char message[256] = "";
    if (!knnwb_cpu_gemm_tile(worker, q0, bq, r0, br, tile, message, sizeof message)) {
      g_mutex_lock(&s->failure_lock);
      if (!g_atomic_int_get(&s->failed))
        g_strlcpy(s->failure, message, sizeof s->failure);
      g_atomic_int_set(&s->failed, KNNWB_KERNELS_ERROR);
      g_mutex_unlock(&s->failure_lock);
      return FALSE;
    }
  }
  /* Pairs that must never be candidates become NaN, which the scans never append. */
  const float masked = NAN;
  if (job->reference_invalid != NULL)
    for (size_t b = 0; b < br; b++)
      if (job->reference_invalid[r0 + b])
        for (size_t a = 0; a < bq; a++)
          tile[a * ld + b] = masked;
  const unsigned char *query_invalid = job->self ? job->reference_invalid : job->query_invalid;
  if (query_invalid != NULL)
    for (size_t a = 0; a < bq; a++)
      if (query_invalid[q0 + a])
        for (size_t b = 0; b < br; b++)
          tile[a * ld + b] = masked;
  if (job->query_group != NULL)
    for (size_t a = 0; a < bq; a++) {
      const int32_t group = job->query_group[q0 + a];
      const int32_t *reference_group = job->reference_group + r0;
      float *row = tile + a * ld;
      for (size_t b = 0; b < br; b++)
        if (reference_group[b] == group)
          row[b] = masked;
    }
  if (job->self && qb == rb)
    for (size_t a = 0; a < bq; a++)
      tile[a * ld + a] = masked;

  /* Rows of block qb. */
  const KnnwbTileKind kind = knnwb_select_tile_kind(job);
  g_mutex_lock(&s->query_locks[qb]);
  knnwb_candidate_rows_scan_rows(&s->rows, scratch, tile, ld, q0, bq, r0, br, kind,
                                 job->reference_sqnorms);
  g_mutex_unlock(&s->query_locks[qb]);

  /* Columns feed the rows of block rb (self jobs, off-diagonal tiles; two-sided jobs, every tile,
   * whose reference rows follow the query rows in the lists). L2 scores are not symmetric (|r|^2 -
   * 2 q.r): seen from row r0+b the score of q0+a is |q_a|^2 - 2 q.r. */
  const gboolean two_sided = !job->self && job->out_reference_index != NULL;
  if (job->self ? qb == rb : !two_sided)
    return TRUE;
  const size_t column0 = two_sided ? job->n_query + r0 : r0;
  g_mutex_lock(&s->reference_locks[rb]);
  knnwb_candidate_rows_scan_columns(&s->rows, scratch, tile, ld, q0, bq, column0, br, kind,
                                    two_sided ? job->query_sqnorms : job->reference_sqnorms);
  g_mutex_unlock(&s->reference_locks[rb]);
  return TRUE;
}

/* First tile of row i of the upper triangle of nb x nb blocks (unsigned: i = 0 gives 0). */
static inline uint64_t knnwb_triangle_start(uint64_t i, uint64_t nb)
{
  return i * nb - i * (i - 1) / 2;
}

/* Tile t of a self job enumerates the upper triangle row by row; otherwise the full grid. */
static void knnwb_select_tile_coordinates(const KnnwbCpuSelect *s, uint64_t t, size_t *qb,
                                          size_t *rb)
{
  if (!s->job->self) {
    *qb = (size_t)(t / s->n_reference_blocks);
    *rb = (size_t)(t % s->n_reference_blocks);
    return;
  }
  /* Row i of the triangle starts at S(i) = i nb - i (i - 1) / 2: solve S(i) <= t in closed form
   * (double), then correct the rounding by a step either way. O(1) per tile. */
  const uint64_t nb = s->n_query_blocks;
  const double b = 2.0 * (double)nb + 1.0;
  uint64_t i = (uint64_t)floor((b - sqrt(b * b - 8.0 * (double)t)) / 2.0);
  while (i > 0 && knnwb_triangle_start(i, nb) > t)
    i--;
  while (i + 1 < nb && knnwb_triangle_start(i + 1, nb) <= t)
    i++;
  *qb = (size_t)i;
  *rb = (size_t)(i + (t - knnwb_triangle_start(i, nb)));
}

/* Offers the tiles done to the job's progress (knnwb_progress_throttle_offer); `last` once the
 * workers are joined. */
static void knnwb_select_report(KnnwbCpuSelect *s, gboolean last)
{
  knnwb_progress_throttle_offer(&s->report, &s->tiles_done, s->n_tiles, last, s->job->progress,
                                s->job->progress_data);
}

static gpointer knnwb_select_worker(gpointer user)
{
  KnnwbCpuSelect *s = user;
  float *tile = g_try_malloc(s->block_query * s->block_reference * sizeof(float));
  float *scratch = g_try_malloc(s->rows.cap * sizeof(float)); /* for cutting candidate lists */
  KnnwbCpuGemmWorker *worker = s->gemm ? knnwb_cpu_gemm_worker_new(s->gemm) : NULL;
  if (tile == NULL || scratch == NULL || (s->gemm != NULL && worker == NULL)) {
    g_atomic_int_set(&s->failed, KNNWB_KERNELS_OUT_OF_MEMORY);
    g_free(tile);
    g_free(scratch);
    knnwb_cpu_gemm_worker_free(worker);
    return NULL;
  }
  for (;;) {
    if (g_atomic_int_get(&s->failed))
      break;
    if (s->job->cancel != NULL && *s->job->cancel) {
      g_atomic_int_set(&s->failed, KNNWB_KERNELS_CANCELLED);
      break;
    }
    gssize t = g_atomic_pointer_add(&s->next_tile, 1);
    if ((uint64_t)t >= s->n_tiles)
      break;
    size_t qb, rb;
    knnwb_select_tile_coordinates(s, s->share_index + (uint64_t)t * s->share_count, &qb, &rb);
    if (!knnwb_select_tile(s, worker, qb, rb, tile, scratch))
      break;
    g_atomic_pointer_add(&s->tiles_done, 1);
    knnwb_select_report(s, FALSE);
  }
  knnwb_cpu_gemm_worker_free(worker);
  g_free(scratch);
  g_free(tile);
  return NULL;
}

/* Blocks of at most limit rows (a multiple of 32), as even as the count of blocks allows, so that
 * the last block is not a sliver (BF16 tiles are computed whole). */
static size_t knnwb_select_block(size_t n, size_t limit)
{
  size_t blocks = (n + limit - 1) / limit;
  size_t even = (n + blocks - 1) / blocks;
  return MIN(limit, (even + 31) / 32 * 32);
}

/* Rows of the candidate buffers finished by one thread each. */
typedef struct {
  KnnwbCpuSelect *s;
} KnnwbSelectFinish;

/* Lists [first, last): query rows' into out_index/out_score, a two-sided job's reference rows'
 * (after the query rows) into out_reference_index/out_reference_score. */
static void knnwb_select_finish_rows(size_t first, size_t last, void *user)
{
  KnnwbSelectFinish *finish = user;
  const KnnwbSelectJob *job = finish->s->job;
  const size_t nq = job->n_query;
  if (first < nq)
    knnwb_candidate_rows_finish(&finish->s->rows, first, MIN(last, nq), 0, job->out_index,
                                job->out_score);
  if (last > nq)
    knnwb_candidate_rows_finish(&finish->s->rows, MAX(first, nq), last, nq,
                                job->out_reference_index, job->out_reference_score);
}

/* The tiles from the budget: threads * B^2 floats, B in [32, KNNWB_SELECT_TILE] and a multiple
 * of 32 (a tile near the caches while the GEMM still runs at full speed), and this share's count of
 * them. A share takes the group's smallest B (KnnwbSelectJob.share_plan): B follows each process's
 * threads, and shares of different tilings would miss pairs. Returns the threads worth starting,
 * 0 when the group's B could not be had. */
static int knnwb_cpu_select_tiles(KnnwbCpuSelect *s, int threads)
{
  const KnnwbSelectJob *job = s->job;
  const size_t nq = job->n_query, nr = job->n_reference;
  size_t budget = job->memory_bytes ? job->memory_bytes : (size_t)256 << 20;
  size_t B = (size_t)sqrt((double)budget / (4.0 * threads));
  B = MIN((size_t)KNNWB_SELECT_TILE, MAX((size_t)32, B / 32 * 32));
  if (job->share_count > 1 && job->share_plan != NULL) {
    int64_t values[KNNWB_SELECT_SHARE_PLAN_VALUES] = {(int64_t)B};
    if (!job->share_plan(values, KNNWB_SELECT_SHARE_PLAN_VALUES, job->share_plan_data) ||
        values[0] < 32)
      return 0;
    B = (size_t)values[0];
  }
  s->block_query = knnwb_select_block(nq, B);
  s->block_reference = job->self ? s->block_query : knnwb_select_block(nr, B);
  s->n_query_blocks = (nq + s->block_query - 1) / s->block_query;
  s->n_reference_blocks = (nr + s->block_reference - 1) / s->block_reference;
  const uint64_t all_tiles = job->self ? (uint64_t)s->n_query_blocks * (s->n_query_blocks + 1) / 2
                                       : (uint64_t)s->n_query_blocks * s->n_reference_blocks;
  s->share_count = job->share_count > 1 ? (uint64_t)job->share_count : 1;
  s->share_index = s->share_count > 1 ? (uint64_t)job->share_index : 0;
  s->n_tiles = all_tiles > s->share_index
                   ? (all_tiles - s->share_index + s->share_count - 1) / s->share_count
                   : 0;
  return (int)MAX((uint64_t)1, MIN((uint64_t)threads, s->n_tiles));
}

/* The GEMM of the job's scores (none for L1, which has no GEMM form). Returns a status. */
static int knnwb_cpu_select_gemm(KnnwbCpuSelect *s, int threads, char *message, size_t message_size)
{
  const KnnwbSelectJob *job = s->job;
  if (job->score_kind == KNNWB_SCORE_L1 && knnwb_select_job_derived(job)) {
    snprintf(message, message_size, "the CPU backend takes L1 rows as given only");
    return KNNWB_KERNELS_ERROR;
  }
  if (job->score_kind == KNNWB_SCORE_L1)
    return KNNWB_KERNELS_OK;
  const int precision = job->screen == KNNWB_KERNELS_SCREEN_BF16 ? KNNWB_KERNELS_SCREEN_BF16
                                                                 : KNNWB_KERNELS_SCREEN_FP32;
  if (job->screen != KNNWB_KERNELS_SCREEN_FP32 && job->screen != KNNWB_KERNELS_SCREEN_BF16) {
    snprintf(message, message_size, "the CPU backend screens in FP32 or BF16 only");
    return KNNWB_KERNELS_ERROR;
  }
  s->gemm =
      knnwb_cpu_gemm_new(precision, job, s->block_query, s->block_reference, message, message_size);
  if (s->gemm == NULL)
    return KNNWB_KERNELS_ERROR;
  g_debug("select: %s, %zu x %zu tiles, %d thread(s)", knnwb_cpu_gemm_name(s->gemm), s->block_query,
          s->block_reference, threads);
  return KNNWB_KERNELS_OK;
}

/* The locks of the lists' blocks, progress and failure (init, or clear and free). */
static void knnwb_cpu_select_locks(KnnwbCpuSelect *s, gboolean init)
{
  const gboolean self = s->job->self;
  if (init) {
    s->query_locks = g_new(GMutex, s->n_query_blocks);
    s->reference_locks = self ? s->query_locks : g_new(GMutex, s->n_reference_blocks);
  }
  for (size_t b = 0; b < s->n_query_blocks; b++)
    init ? g_mutex_init(&s->query_locks[b]) : g_mutex_clear(&s->query_locks[b]);
  for (size_t b = 0; !self && b < s->n_reference_blocks; b++)
    init ? g_mutex_init(&s->reference_locks[b]) : g_mutex_clear(&s->reference_locks[b]);
  if (init) {
    knnwb_progress_throttle_init(&s->report);
    g_mutex_init(&s->failure_lock);
    return;
  }
  knnwb_progress_throttle_clear(&s->report);
  g_mutex_clear(&s->failure_lock);
  if (!self)
    g_free(s->reference_locks);
  g_free(s->query_locks);
}

/* Tiles are taken from a shared counter by this thread and up to threads - 1 workers: a thread
 * that cannot start (memory or process limits) leaves its tiles to the others. Returns the
 * threads that ran. */
static int knnwb_cpu_select_workers(KnnwbCpuSelect *s, int threads)
{
  int saved_blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  GThread **workers = g_try_new(GThread *, threads);
  int started = 1;
  while (workers != NULL && started < threads) {
    workers[started] = knnwb_thread_try_start("knnwb-select", knnwb_select_worker, s);
    if (workers[started] == NULL)
      break;
    started++;
  }
  knnwb_select_worker(s);
  for (int t = 1; t < started; t++)
    g_thread_join(workers[t]);
  g_free(workers);
  openblas_set_num_threads(saved_blas_threads);
  return started;
}

int knnwb_cpu_select(const KnnwbSelectJob *job, char *message, size_t message_size)
{
  const size_t nq = job->n_query, nr = job->n_reference;
  if (nq == 0 || job->kc == 0)
    return KNNWB_KERNELS_OK;
  if (nr > (size_t)G_MAXINT32 || nq > (size_t)G_MAXINT32) {
    snprintf(message, message_size,
             "the CPU backend takes at most 2^31 - 1 rows a side (got %zu x %zu)", nq, nr);
    return KNNWB_KERNELS_ERROR;
  }
  KnnwbCpuSelect s = {0};
  s.job = job;
  int threads = knnwb_cpu_select_tiles(&s, knnwb_thread_count(MAX(1, job->n_threads)));
  if (threads == 0) {
    snprintf(message, message_size, "the group's processes could not agree on their tiles");
    return KNNWB_KERNELS_ERROR;
  }
  int status = knnwb_cpu_select_gemm(&s, threads, message, message_size);
  if (status != KNNWB_KERNELS_OK)
    return status;
  /* A two-sided job keeps the lists of its reference rows after those of its query rows. */
  const size_t lists = !job->self && job->out_reference_index != NULL ? nq + nr : nq;
  const gboolean seeded =
      job->query_bounds != NULL && (lists == nq || job->reference_bounds != NULL);
  if (!knnwb_candidate_rows_init(&s.rows, lists, job->kc, seeded)) {
    knnwb_cpu_gemm_free(s.gemm);
    snprintf(message, message_size, "cannot allocate the candidate lists of %zu rows x %zu", lists,
             job->kc);
    return KNNWB_KERNELS_OUT_OF_MEMORY;
  }
  /* Starting thresholds from the caller: a row then appends only what beats what it already has
   * elsewhere (fewer appends and cuts; the scans are the same). */
  if (job->query_bounds != NULL)
    memcpy(s.rows.threshold, job->query_bounds, nq * sizeof(float));
  if (lists > nq && job->reference_bounds != NULL)
    memcpy(s.rows.threshold + nq, job->reference_bounds, nr * sizeof(float));
  knnwb_cpu_select_locks(&s, TRUE);
  /* Counted now, after the lists and GEMM copies exist: what is left is what the workers get. */
  threads = knnwb_select_threads_for_address_space(
      threads, (guint64)s.block_query * s.block_reference * sizeof(float) +
                   (guint64)s.rows.cap * sizeof(float) + knnwb_cpu_gemm_worker_bytes(s.gemm));
  const int started = knnwb_cpu_select_workers(&s, threads);
  if (!s.failed)
    knnwb_select_report(&s, TRUE);
  status = g_atomic_int_get(&s.failed);
  if (status == KNNWB_KERNELS_OUT_OF_MEMORY)
    snprintf(message, message_size,
             "cannot allocate a thread's buffers for tiles of %zu x %zu rows; lower --memory",
             s.block_query, s.block_reference);
  else if (status == KNNWB_KERNELS_CANCELLED)
    snprintf(message, message_size, "cancelled");
  else if (status != KNNWB_KERNELS_OK)
    snprintf(message, message_size, "%s", s.failure);
  if (status == KNNWB_KERNELS_OK) {
    KnnwbSelectFinish finish = {&s};
    knnwb_parallel_for(started, lists, 256, knnwb_select_finish_rows, &finish);
  }
  knnwb_cpu_select_locks(&s, FALSE);
  knnwb_candidate_rows_clear(&s.rows);
  knnwb_cpu_gemm_free(s.gemm);
  return status;
}
