/*
 * The CPU backend of a selection job: the kc smallest float scores of every query row.
 *
 * Rows are cut into blocks of B; a tile is a (query block, reference block) pair whose scores come
 * from one SGEMM (or the blocked L1 kernel) into a per-thread B x B buffer. For a self job only
 * tiles with rb >= qb are computed: tile (qb, rb) is scanned by rows for block qb and by columns for
 * block rb, so every pair is scored once. Each row keeps a max-heap of its kc best; a per-row
 * threshold (the heap top) makes the scan a vectorisable compare with rare inserts. A block's
 * heaps are guarded by a mutex because two tiles may feed the same block at once. A share of a job
 * (job->share_count > 1, one per process of a group) takes every share_count-th tile of the
 * enumeration, which spreads the long and short rows of the triangle evenly.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <cblas.h>
#include "knn_internal.h"

/* OpenBLAS's own thread count; we run one single-threaded SGEMM per worker instead. */
extern int openblas_get_num_threads(void);
extern void openblas_set_num_threads(int);

/* OpenBLAS takes a 128 MiB work buffer for every thread that calls SGEMM, and when that allocation
 * fails it retries for ever (the program hangs instead of failing). Under an address-space limit
 * (`ulimit -v`) the number of GEMM threads is therefore capped by the room left: each needs its
 * buffer and its stack. Returns threads unchanged where there is no limit or /proc is unreadable. */
static int knnwb_select_threads_for_address_space(int threads)
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
  const guint64 blas_buffer = (guint64)136 << 20, reserve = (guint64)64 << 20;
  guint64 room = (guint64)limit.rlim_cur > mapped + reserve ? limit.rlim_cur - mapped - reserve : 0;
  /* The calling thread needs only its buffer; every started thread a buffer and a stack. */
  guint64 extra = room > blas_buffer ? (room - blas_buffer) / (blas_buffer + stack_bytes) : 0;
  int fitting = (int)MIN((guint64)threads, 1 + extra);
  if (fitting < threads)
    g_debug("select: %d threads fit the address-space limit (of %d)", fitting, threads);
  return fitting;
}

typedef struct {
  const KnnwbSelectJob *job;
  size_t block, n_query_blocks, n_reference_blocks;
  uint64_t n_tiles; /* of this share */
  uint64_t share_index, share_count;
  gssize next_tile; /* atomically advanced, in this share's tiles */
  gssize tiles_done;
  GMutex *query_locks;     /* one per query block */
  GMutex *reference_locks; /* self: the same array as query_locks */
  int32_t *heap_size;      /* n_query */
  float *threshold;        /* n_query: heap top when full, else +inf */
  GMutex progress_lock;
  gint64 last_progress_us;
  gint failed; /* cancelled */
} KnnwbCpuSelect;

/* Sift-down insert into a full or partial max-heap of (score, index) pairs. */
static void knnwb_heap_push(float *score, int64_t *index, int32_t *size, size_t capacity,
                            float value, int64_t id)
{
  size_t n = (size_t)*size;
  if (n < capacity) {
    size_t c = n;
    while (c > 0) {
      size_t parent = (c - 1) / 2;
      if (score[parent] >= value)
        break;
      score[c] = score[parent];
      index[c] = index[parent];
      c = parent;
    }
    score[c] = value;
    index[c] = id;
    *size = (int32_t)(n + 1);
    return;
  }
  size_t c = 0;
  for (;;) {
    size_t left = 2 * c + 1;
    if (left >= n)
      break;
    size_t child = left + 1 < n && score[left + 1] > score[left] ? left + 1 : left;
    if (score[child] <= value)
      break;
    score[c] = score[child];
    index[c] = index[child];
    c = child;
  }
  score[c] = value;
  index[c] = id;
}

/* row < n_query: a query row's list; above (a two-sided job's reference rows): out_reference. */
static void knnwb_select_offer(KnnwbCpuSelect *s, size_t row, float value, int64_t id)
{
  const KnnwbSelectJob *job = s->job;
  const size_t kc = job->kc;
  const gboolean transposed = !job->self && row >= job->n_query;
  const size_t slot = transposed ? row - job->n_query : row;
  float *score = (transposed ? job->out_reference_score : job->out_score) + slot * kc;
  int64_t *index = (transposed ? job->out_reference_index : job->out_index) + slot * kc;
  knnwb_heap_push(score, index, &s->heap_size[row], kc, value, id);
  if ((size_t)s->heap_size[row] == kc)
    s->threshold[row] = score[0];
}

/* Scores tile rows [q0, q0+bq) x [r0, r0+br) into out (bq x br, row-major). */
static void knnwb_select_score_tile(const KnnwbSelectJob *job, size_t q0, size_t bq, size_t r0,
                                    size_t br, float *out)
{
  const size_t d = job->dim;
  const float *q = job->query + q0 * d, *r = job->reference + r0 * d;
  if (job->score_kind == KNNWB_SCORE_L1) {
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
        out[a * br + b] = sum;
      }
    }
    return;
  }
  if (d == 0) {
    memset(out, 0, bq * br * sizeof(float));
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)br, (int)d, 1.0f, q, (int)d,
                r, (int)d, 0.0f, out, (int)br);
  }
  for (size_t a = 0; a < bq; a++) {
    float *row = out + a * br;
    switch (job->score_kind) {
    case KNNWB_SCORE_DOT:
      for (size_t b = 0; b < br; b++)
        row[b] = 1.0f - row[b];
      break;
    case KNNWB_SCORE_ABS_DOT:
      for (size_t b = 0; b < br; b++)
        row[b] = 1.0f - fabsf(row[b]);
      break;
    default: {
      const float *sq = job->reference_sqnorms + r0;
      for (size_t b = 0; b < br; b++)
        row[b] = sq[b] - 2.0f * row[b];
    }
    }
  }
}

static void knnwb_select_tile(KnnwbCpuSelect *s, size_t qb, size_t rb, float *tile)
{
  const KnnwbSelectJob *job = s->job;
  const size_t B = s->block;
  const size_t q0 = qb * B, r0 = rb * B;
  const size_t bq = MIN(B, job->n_query - q0), br = MIN(B, job->n_reference - r0);
  knnwb_select_score_tile(job, q0, bq, r0, br, tile);
  if (job->reference_invalid != NULL)
    for (size_t b = 0; b < br; b++)
      if (job->reference_invalid[r0 + b])
        for (size_t a = 0; a < bq; a++)
          tile[a * br + b] = INFINITY;
  const unsigned char *query_invalid = job->self ? job->reference_invalid : job->query_invalid;
  if (query_invalid != NULL)
    for (size_t a = 0; a < bq; a++)
      if (query_invalid[q0 + a])
        for (size_t b = 0; b < br; b++)
          tile[a * br + b] = INFINITY;
  if (job->query_group != NULL)
    for (size_t a = 0; a < bq; a++) {
      const int32_t group = job->query_group[q0 + a];
      const int32_t *reference_group = job->reference_group + r0;
      float *row = tile + a * br;
      for (size_t b = 0; b < br; b++)
        if (reference_group[b] == group)
          row[b] = INFINITY;
    }
  if (job->self && qb == rb)
    for (size_t a = 0; a < bq; a++)
      tile[a * br + a] = INFINITY;

  /* Rows of block qb. */
  g_mutex_lock(&s->query_locks[qb]);
  for (size_t a = 0; a < bq; a++) {
    const float *row = tile + a * br;
    float threshold = s->threshold[q0 + a];
    for (size_t b = 0; b < br; b++)
      if (row[b] < threshold) {
        knnwb_select_offer(s, q0 + a, row[b], (int64_t)(r0 + b));
        threshold = s->threshold[q0 + a];
      }
  }
  g_mutex_unlock(&s->query_locks[qb]);

  /* Columns feed the rows of block rb (self jobs, off-diagonal tiles; two-sided jobs, every tile,
   * whose reference rows follow the query rows in the heaps). */
  const gboolean two_sided = !job->self && job->out_reference_index != NULL;
  if (job->self ? qb == rb : !two_sided)
    return;
  const size_t column0 = two_sided ? job->n_query + r0 : r0;
  g_mutex_lock(&s->reference_locks[rb]);
  float *threshold = s->threshold + column0;
  /* L2 scores are not symmetric (|r|^2 - 2 q.r): seen from row r0+b the score of q0+a is
   * tile - |r_b|^2 + |q_a|^2. The other kinds are symmetric. */
  const gboolean l2 = job->score_kind == KNNWB_SCORE_L2;
  const float *sq = job->reference_sqnorms;
  const float *query_sq = two_sided ? job->query_sqnorms : sq;
  for (size_t a = 0; a < bq; a++) {
    const float *row = tile + a * br;
    const float shift = l2 ? query_sq[q0 + a] : 0.0f;
    for (size_t b = 0; b < br; b++) {
      float value = l2 ? row[b] - sq[r0 + b] + shift : row[b];
      if (value < threshold[b])
        knnwb_select_offer(s, column0 + b, value, (int64_t)(q0 + a));
    }
  }
  g_mutex_unlock(&s->reference_locks[rb]);
}

/* First tile of row i of the upper triangle of nb x nb blocks (unsigned: i = 0 gives 0). */
static inline uint64_t knnwb_triangle_start(uint64_t i, uint64_t nb)
{
  return i * nb - i * (i - 1) / 2;
}

/* Tile t of a self job enumerates the upper triangle row by row; otherwise the full grid. */
static void knnwb_select_tile_coordinates(const KnnwbCpuSelect *s, uint64_t t, size_t *qb, size_t *rb)
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

static void knnwb_select_report(KnnwbCpuSelect *s, gboolean force)
{
  const KnnwbSelectJob *job = s->job;
  if (job->progress == NULL || !g_mutex_trylock(&s->progress_lock))
    return;
  gint64 now = g_get_monotonic_time();
  if (force || now - s->last_progress_us >= 100000) {
    s->last_progress_us = now;
    job->progress((uint64_t)g_atomic_pointer_get(&s->tiles_done), s->n_tiles,
                  job->progress_data);
  }
  g_mutex_unlock(&s->progress_lock);
}

static gpointer knnwb_select_worker(gpointer user)
{
  KnnwbCpuSelect *s = user;
  const size_t B = s->block;
  float *tile = g_try_malloc(B * B * sizeof(float));
  if (tile == NULL) {
    g_atomic_int_set(&s->failed, KNNWB_KERNELS_OUT_OF_MEMORY);
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
    knnwb_select_tile(s, qb, rb, tile);
    g_atomic_pointer_add(&s->tiles_done, 1);
    knnwb_select_report(s, FALSE);
  }
  g_free(tile);
  return NULL;
}

int knnwb_cpu_select(const KnnwbSelectJob *job, char *message, size_t message_size)
{
  const size_t nq = job->n_query, nr = job->n_reference;
  if (nq == 0 || job->kc == 0)
    return KNNWB_KERNELS_OK;
  int threads = knnwb_thread_count(MAX(1, job->n_threads));
  /* Square tiles from the budget: threads * B^2 floats, B in [32, 1024] and a multiple of 32.
   * 1024 keeps a tile (4 MiB) near the caches while SGEMM still runs at full speed. */
  size_t budget = job->memory_bytes ? job->memory_bytes : (size_t)256 << 20;
  size_t B = (size_t)sqrt((double)budget / (4.0 * threads));
  B = MIN((size_t)1024, MAX((size_t)32, B / 32 * 32));
  B = MIN(B, MAX(nq, nr));
  KnnwbCpuSelect s = {0};
  s.job = job;
  s.block = B;
  s.n_query_blocks = (nq + B - 1) / B;
  s.n_reference_blocks = (nr + B - 1) / B;
  const uint64_t all_tiles = job->self ? (uint64_t)s.n_query_blocks * (s.n_query_blocks + 1) / 2
                                       : (uint64_t)s.n_query_blocks * s.n_reference_blocks;
  s.share_count = job->share_count > 1 ? (uint64_t)job->share_count : 1;
  s.share_index = s.share_count > 1 ? (uint64_t)job->share_index : 0;
  s.n_tiles = all_tiles > s.share_index
                  ? (all_tiles - s.share_index + s.share_count - 1) / s.share_count
                  : 0;
  threads = (int)MAX((uint64_t)1, MIN((uint64_t)threads, s.n_tiles));
  threads = knnwb_select_threads_for_address_space(threads);
  /* A two-sided job keeps the heaps of its reference rows after those of its query rows. */
  const size_t heaps = !job->self && job->out_reference_index != NULL ? nq + nr : nq;
  s.heap_size = g_try_malloc0(heaps * sizeof(int32_t));
  s.threshold = g_try_malloc(heaps * sizeof(float));
  s.query_locks = g_new(GMutex, s.n_query_blocks);
  s.reference_locks = job->self ? s.query_locks : g_new(GMutex, s.n_reference_blocks);
  if (s.heap_size == NULL || s.threshold == NULL) {
    g_free(s.heap_size);
    g_free(s.threshold);
    g_free(s.query_locks);
    if (!job->self)
      g_free(s.reference_locks);
    snprintf(message, message_size, "cannot allocate the selection state of %zu rows", nq);
    return KNNWB_KERNELS_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < heaps; i++)
    s.threshold[i] = INFINITY;
  for (size_t b = 0; b < s.n_query_blocks; b++)
    g_mutex_init(&s.query_locks[b]);
  if (!job->self)
    for (size_t b = 0; b < s.n_reference_blocks; b++)
      g_mutex_init(&s.reference_locks[b]);
  g_mutex_init(&s.progress_lock);

  int saved_blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  /* Tiles are taken from a shared counter: a thread that cannot start (memory or process limits)
   * leaves its tiles to the others. */
  GThread **workers = g_try_new(GThread *, threads);
  int started = 1;
  while (workers != NULL && started < threads) {
    workers[started] = knnwb_thread_try_start("knnwb-select", knnwb_select_worker, &s);
    if (workers[started] == NULL)
      break;
    started++;
  }
  knnwb_select_worker(&s);
  for (int t = 1; t < started; t++)
    g_thread_join(workers[t]);
  g_free(workers);
  openblas_set_num_threads(saved_blas_threads);
  if (!s.failed)
    knnwb_select_report(&s, TRUE);

  int status = g_atomic_int_get(&s.failed);
  if (status == KNNWB_KERNELS_OUT_OF_MEMORY)
    snprintf(message, message_size, "cannot allocate a %zu x %zu tile buffer; lower --memory", B, B);
  else if (status == KNNWB_KERNELS_CANCELLED)
    snprintf(message, message_size, "cancelled");
  /* Rows whose heap is not full (only when kc exceeds the valid references) pad with -1. */
  for (size_t i = 0; i < heaps && status == KNNWB_KERNELS_OK; i++) {
    const gboolean transposed = i >= nq;
    int64_t *index =
        transposed ? job->out_reference_index + (i - nq) * job->kc : job->out_index + i * job->kc;
    float *score =
        transposed ? job->out_reference_score + (i - nq) * job->kc : job->out_score + i * job->kc;
    for (size_t c = (size_t)s.heap_size[i]; c < job->kc; c++) {
      index[c] = -1;
      score[c] = INFINITY;
    }
  }
  for (size_t b = 0; b < s.n_query_blocks; b++)
    g_mutex_clear(&s.query_locks[b]);
  if (!job->self) {
    for (size_t b = 0; b < s.n_reference_blocks; b++)
      g_mutex_clear(&s.reference_locks[b]);
    g_free(s.reference_locks);
  }
  g_mutex_clear(&s.progress_lock);
  g_free(s.query_locks);
  g_free(s.heap_size);
  g_free(s.threshold);
  return status;
}
