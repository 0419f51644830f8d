/*
 * The selection planner (select_plan.h): a pure function of the job's sizes and the budget, in the
 * spirit of FAISS's chooseTileSize, with the device buffers listed once.
 */
#include "select_plan.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static size_t knnwb_select_plan_round_up(size_t x, size_t m)
{
  return (x + m - 1) / m * m;
}

static size_t knnwb_select_plan_max(size_t a, size_t b)
{
  return a > b ? a : b;
}

void knnwb_select_plan_buffers(const KnnwbSelectJob *job, const KnnwbSelectPlan *plan, int exact,
                               int stats, size_t bytes[KNNWB_BUFFER_KINDS])
{
  const size_t T = (size_t)plan->tile, kc = (size_t)plan->kc, cap = (size_t)plan->cap;
  const size_t row_bytes = (size_t)plan->row_bytes, rows = plan->state_rows;
  const size_t block_bytes = (size_t)plan->dpad * sizeof(float) * T;
  const int same = knnwb_select_job_same(job);
  const size_t tile_bytes = knnwb_select_plan_max(T * T * sizeof(float), kc * 12);
  for (int b = 0; b < KNNWB_BUFFER_KINDS; b++)
    bytes[b] = 0;
  if (plan->resident) {
    bytes[KNNWB_BUFFER_REFERENCE_ROWS] = row_bytes * job->n_reference;
    bytes[KNNWB_BUFFER_QUERY_ROWS] = same ? 0 : row_bytes * job->n_query;
  } else {
    /* float32 blocks from the host; FP16 converts them into blocks of its own */
    bytes[KNNWB_BUFFER_QUERY_BLOCK] = block_bytes;
    bytes[KNNWB_BUFFER_REFERENCE_BLOCK_0] = block_bytes;
    bytes[KNNWB_BUFFER_REFERENCE_BLOCK_1] = block_bytes;
    if (plan->screen == KNNWB_KERNELS_SCREEN_FP16) {
      bytes[KNNWB_BUFFER_SCREEN_QUERY_BLOCK] = row_bytes * T;
      bytes[KNNWB_BUFFER_SCREEN_REFERENCE_BLOCK_0] = row_bytes * T;
      bytes[KNNWB_BUFFER_SCREEN_REFERENCE_BLOCK_1] = row_bytes * T;
    }
  }
  if (job->score_kind == KNNWB_SCORE_L2)
    bytes[KNNWB_BUFFER_SQNORMS] = job->n_reference * sizeof(float);
  if (job->reference_invalid)
    bytes[KNNWB_BUFFER_INVALID] = job->n_reference;
  if (job->query_group && job->reference_group) {
    bytes[KNNWB_BUFFER_QUERY_GROUP] = job->n_query * sizeof(int);
    bytes[KNNWB_BUFFER_REFERENCE_GROUP] = job->n_reference * sizeof(int);
  }
  bytes[KNNWB_BUFFER_TILE_0] = tile_bytes;
  bytes[KNNWB_BUFFER_TILE_1] = tile_bytes;
  bytes[KNNWB_BUFFER_LIST_SCORE] = rows * kc * sizeof(float);
  bytes[KNNWB_BUFFER_LIST_INDEX] = rows * kc * sizeof(int);
  bytes[KNNWB_BUFFER_THRESHOLD] = rows * sizeof(float);
  bytes[KNNWB_BUFFER_COUNT] = rows * sizeof(int);
  bytes[KNNWB_BUFFER_CANDIDATE_SCORE] = rows * cap * sizeof(float);
  bytes[KNNWB_BUFFER_CANDIDATE_INDEX] = rows * cap * sizeof(int);
  if (stats)
    bytes[KNNWB_BUFFER_STATS] = 2 * KNNWB_SELECT_STATS * sizeof(unsigned long long);
  bytes[KNNWB_BUFFER_MERGE_LIST] = 2 * T * sizeof(int);
  bytes[KNNWB_BUFFER_MERGE_COUNT] = 2 * sizeof(int); /* rows queued, rows the warp merge defers */
  bytes[KNNWB_BUFFER_SCRATCH_KEY] = (size_t)plan->merge_blocks * T * sizeof(unsigned);
  bytes[KNNWB_BUFFER_SCRATCH_INDEX] = (size_t)plan->merge_blocks * T * sizeof(int);
  if (!plan->lists_in_shared) {
    bytes[KNNWB_BUFFER_OUT_KEY] = (size_t)plan->merge_blocks * kc * sizeof(unsigned);
    bytes[KNNWB_BUFFER_OUT_INDEX] = (size_t)plan->merge_blocks * kc * sizeof(int);
  }
  if (plan->diagonal_ahead) {
    bytes[KNNWB_BUFFER_AHEAD_TILE] = tile_bytes;
    bytes[KNNWB_BUFFER_AHEAD_WORKSPACE] = KNNWB_SELECT_LT_WORKSPACE_BYTES;
    for (int b = KNNWB_BUFFER_MERGE_LIST; b <= KNNWB_BUFFER_OUT_INDEX; b++)
      bytes[KNNWB_BUFFER_AHEAD_MERGE_LIST + (b - KNNWB_BUFFER_MERGE_LIST)] = bytes[b];
  }
  /* Symmetric runs extract through the tile buffers (their rows are done by then). */
  if (!plan->symmetric) {
    bytes[KNNWB_BUFFER_STAGE_INDEX] = T * kc * sizeof(long long);
    bytes[KNNWB_BUFFER_STAGE_SCORE] = T * kc * sizeof(float);
  }
  if (!exact)
    return;
  const int same_exact = job->self || job->exact_query == job->exact_reference;
  if (!plan->symmetric)
    bytes[KNNWB_BUFFER_STAGE_DISTANCE] = T * kc * sizeof(double);
  bytes[KNNWB_BUFFER_EXACT_REFERENCE] = job->n_reference * job->dim * sizeof(float);
  if (!same_exact)
    bytes[KNNWB_BUFFER_EXACT_QUERY] = job->n_query * job->dim * sizeof(float);
  if (job->exact_reference_mean)
    bytes[KNNWB_BUFFER_EXACT_REFERENCE_MEAN] = job->n_reference * sizeof(double);
  if (job->exact_reference_squares)
    bytes[KNNWB_BUFFER_EXACT_REFERENCE_SQUARES] = job->n_reference * sizeof(double);
  if (!same_exact && job->exact_query_mean)
    bytes[KNNWB_BUFFER_EXACT_QUERY_MEAN] = job->n_query * sizeof(double);
  if (!same_exact && job->exact_query_squares)
    bytes[KNNWB_BUFFER_EXACT_QUERY_SQUARES] = job->n_query * sizeof(double);
}

size_t knnwb_select_plan_bytes(const KnnwbSelectJob *job, const KnnwbSelectPlan *plan, int exact)
{
  size_t bytes[KNNWB_BUFFER_KINDS];
  knnwb_select_plan_buffers(job, plan, exact, 1, bytes);
  size_t total = KNNWB_SELECT_OVERHEAD_BYTES;
  for (int b = 0; b < KNNWB_BUFFER_KINDS; b++)
    if (bytes[b] > 0)
      total += knnwb_select_plan_round_up(bytes[b], 512);
  return total;
}

int knnwb_select_plan_env(const char *name, int fallback, int low, int high)
{
  const char *v = getenv(name);
  const int x = v != NULL && *v != 0 ? atoi(v) : fallback;
  return x < low || x > high ? fallback : x;
}

int knnwb_select_plan_lazy(int cap)
{
  const int limit = knnwb_select_plan_env("KNNWB_CUDA_LAZY_LIMIT", 0, 1, cap);
  const int divisor = knnwb_select_plan_env("KNNWB_CUDA_LAZY_DIVISOR", 0, 2, 1 << 20);
  if (limit > 0)
    return limit;
  if (divisor == 0 && cap > KNNWB_SELECT_LAZY_SMALL_CAP)
    return cap / 2;
  int lazy = cap / (divisor > 0 ? divisor : 8);
  lazy = lazy > 8 ? lazy : 8;
  return lazy < cap / 2 ? lazy : cap / 2;
}

int knnwb_select_plan_fused_pairs(int tile, size_t tile_bytes, int room_limit, KnnwbFusedPairs *out)
{
  const size_t T = (size_t)tile;
  const size_t side = (T + KNNWB_SELECT_FUSED_BLOCK - 1) / KNNWB_SELECT_FUSED_BLOCK;
  const size_t index_bytes = (1 + 2 * side * side) * sizeof(int);
  const size_t head = knnwb_select_plan_round_up(index_bytes + 2 * T, 16);
  const size_t free_bytes = tile_bytes / 2;
  /* the tile's halves (T x T x 2 bytes) fill the first half */
  if (tile <= 0 || room_limit <= 0 || free_bytes < T * T * 2 || free_bytes < head + T * 8)
    return 0;
  size_t room = (free_bytes - head) / 8;
  room = room < (size_t)room_limit ? room : (size_t)room_limit;
  room = room < (size_t)INT_MAX / 2 ? room : (size_t)INT_MAX / 2;
  out->lost_offset = index_bytes;
  out->pairs_offset = head;
  out->pair_room = (int)room;
  return 1;
}

KnnwbFusedProbeStep knnwb_select_plan_fused_probe(long n, long window, long first_windows,
                                                  int *mark)
{
  const long every = 32 * window, first = first_windows * window;
  *mark = -1;
  if (n < first)
    return KNNWB_FUSED_PROBE_LAST;
  const long phase = (n - first) % every;
  if (phase > 4 * window)
    return KNNWB_FUSED_PROBE_LAST;
  if (phase % window == 0)
    *mark = (int)(phase / window);
  if (phase == 4 * window)
    return KNNWB_FUSED_PROBE_DECIDE;
  const long w = phase / window;
  return w == 0 || w == 3 ? KNNWB_FUSED_PROBE_FUSED : KNNWB_FUSED_PROBE_FILTERED;
}

long knnwb_select_plan_probe_window(void)
{
  return knnwb_select_plan_env("KNNWB_CUDA_FUSED_PROBE", 64, 1, 4096);
}

long knnwb_select_plan_probe_first(void)
{
  return knnwb_select_plan_env("KNNWB_CUDA_FUSED_FIRST", 2, 0, 1024);
}

long knnwb_select_plan_probe_period(void)
{
  return knnwb_select_plan_env("KNNWB_CUDA_FUSED_PERIOD", 64, 5, 4096);
}

int knnwb_select_plan_fused_wins(const float ms[4])
{
  return ms[0] + ms[3] < ms[1] + ms[2];
}

long knnwb_select_plan_probe_gap(const float ms[4], long window, int first)
{
  const float fused = ms[0] + ms[3], filtered = ms[1] + ms[2];
  const float slower = fused > filtered ? fused : filtered;
  const float diff = fused > filtered ? fused - filtered : filtered - fused;
  const int first_against = first && slower > 0.0f && !knnwb_select_plan_fused_wins(ms);
  if (diff < 0.1f * slower || first_against)
    return 4 * window;
  return (knnwb_select_plan_fused_wins(ms) ? knnwb_select_plan_probe_period() - 4 : 28) * window;
}

void knnwb_select_plan_probe_exclude(float ms[4], const float *fresh_ms, const int *fresh_window,
                                     int n)
{
  for (int i = 0; i < n; i++) {
    const int w = fresh_window[i];
    if (w < 0 || w > 3)
      continue;
    ms[w] = ms[w] > fresh_ms[i] ? ms[w] - fresh_ms[i] : 0.0f;
  }
}

int knnwb_select_plan_dpad(size_t dim, int screen)
{
  int round = 8;
  if (screen == KNNWB_KERNELS_SCREEN_FP16 && dim > 32) {
    round = knnwb_select_plan_env("KNNWB_CUDA_DPAD_ROUND", KNNWB_SELECT_FP16_ROUND, 8,
                                  KNNWB_SELECT_FP16_ROUND);
    round = round / 8 * 8;
  }
  return (int)knnwb_select_plan_round_up(dim, (size_t)round);
}

int knnwb_select_plan_first_tile(size_t n_query, size_t n_reference)
{
  const size_t n_max = knnwb_select_plan_max(n_query, n_reference);
  const size_t rounded =
      knnwb_select_plan_round_up(knnwb_select_plan_max(n_max, 1), KNNWB_SELECT_MIN_TILE);
  int largest = (int)(rounded < KNNWB_SELECT_MAX_TILE ? rounded : KNNWB_SELECT_MAX_TILE);
  /* KNNWB_CUDA_MAX_TILE: another largest tile (up to twice the default), for measurements of
   * the tile size */
  const char *cap = getenv("KNNWB_CUDA_MAX_TILE");
  if (cap != NULL && atoi(cap) >= KNNWB_SELECT_MIN_TILE && atoi(cap) <= 2 * KNNWB_SELECT_MAX_TILE) {
    const size_t want = knnwb_select_plan_round_up((size_t)atoi(cap), KNNWB_SELECT_MIN_TILE);
    largest = (int)(want < rounded ? want : rounded);
  }
  return largest;
}

int knnwb_select_plan_times_gemm(size_t n_query, size_t n_reference, int tile)
{
  const size_t full = (n_query / (size_t)tile) * (n_reference / (size_t)tile);
  return full >= KNNWB_SELECT_CHOOSE_MIN_TILES;
}

/* The plan's fields that do not depend on the schedule, tile or residency. */
static KnnwbSelectPlan knnwb_select_plan_base(const KnnwbSelectJob *job, int shared_kc)
{
  KnnwbSelectPlan p = {0};
  p.lists_in_shared = job->kc <= (size_t)shared_kc;
  p.kc = (int)job->kc;
  p.cap = (int)knnwb_select_plan_round_up(knnwb_select_plan_max(2 * job->kc, 64), 32);
  p.lazy_limit = knnwb_select_plan_lazy(p.cap);
  p.screen = job->score_kind == KNNWB_SCORE_L1 ? KNNWB_KERNELS_SCREEN_FP32 : job->screen;
  p.dpad = knnwb_select_plan_dpad(job->dim, p.screen);
  p.row_bytes = p.dpad * (p.screen == KNNWB_KERNELS_SCREEN_FP16 ? 2 : 4);
  return p;
}

/* Whether *p with this schedule, tile and residency fits budget bytes (then *p is that plan). */
static int knnwb_select_plan_fits(const KnnwbSelectJob *job, KnnwbSelectPlan *p, int symmetric,
                                  int tile, int resident, size_t budget, int sm_count)
{
  p->symmetric = symmetric;
  p->resident = resident;
  p->tile = tile;
  int blocks = p->lists_in_shared ? 4 * sm_count : sm_count;
  blocks = blocks < tile ? blocks : tile;
  p->merge_blocks = blocks > 1 ? blocks : 1;
  p->state_rows = symmetric ? job->n_query : (size_t)tile;
  p->bytes = knnwb_select_plan_bytes(job, p, 0);
  if (p->bytes > budget)
    return 0;
  /* symmetric state must leave most of the budget to tiles */
  return !(symmetric && p->state_rows * ((size_t)p->kc + (size_t)p->cap) * 8 > budget / 2);
}

int knnwb_select_plan_choose(const KnnwbSelectJob *job, size_t budget, int sm_count, int shared_kc,
                             KnnwbSelectPlan *out)
{
  KnnwbSelectPlan p = knnwb_select_plan_base(job, shared_kc);
  const int largest = knnwb_select_plan_first_tile(job->n_query, job->n_reference);
  const int symmetric_first = job->self && knnwb_select_plan_env("KNNWB_CUDA_SYMMETRIC", 1, 0, 1);
  for (int symmetric = symmetric_first; symmetric >= 0; symmetric--)
    for (int tile = largest; tile >= KNNWB_SELECT_MIN_TILE;
         tile = tile == KNNWB_SELECT_MIN_TILE
                    ? 0
                    : (int)knnwb_select_plan_round_up((size_t)tile / 2, KNNWB_SELECT_MIN_TILE))
      for (int resident = 1; resident >= (tile > KNNWB_SELECT_STREAM_MAX_TILE ? 1 : 0); resident--)
        if (knnwb_select_plan_fits(job, &p, symmetric, tile, resident, budget, sm_count)) {
          *out = p;
          return 1;
        }
  return 0;
}

int knnwb_select_plan_choose_agreed(const KnnwbSelectJob *job, size_t budget, int sm_count,
                                    int shared_kc, int symmetric, int tile, KnnwbSelectPlan *out)
{
  if ((symmetric && !job->self) || tile < KNNWB_SELECT_MIN_TILE)
    return 0;
  KnnwbSelectPlan p = knnwb_select_plan_base(job, shared_kc);
  for (int resident = 1; resident >= (tile > KNNWB_SELECT_STREAM_MAX_TILE ? 1 : 0); resident--)
    if (knnwb_select_plan_fits(job, &p, symmetric, tile, resident, budget, sm_count)) {
      *out = p;
      return 1;
    }
  return 0;
}

int knnwb_select_plan_fresh_kernel(size_t dim, int n_devices)
{
  const char *v = getenv("KNNWB_CUDA_FRESH");
  if (v != NULL && strcmp(v, "kernel") == 0)
    return 1;
  if (v != NULL && strcmp(v, "stages") == 0)
    return 0;
  return n_devices == 1 && dim >= 64 && dim < 256;
}

void knnwb_select_plan_diagonal_ahead(const KnnwbSelectJob *job, KnnwbSelectPlan *plan,
                                      int n_devices, size_t budget)
{
  const char *v = getenv("KNNWB_CUDA_DIAGONAL_AHEAD");
  const size_t T = (size_t)plan->tile;
  if ((v != NULL && strcmp(v, "0") == 0) || !plan->symmetric || !plan->resident ||
      plan->screen != KNNWB_KERNELS_SCREEN_FP16 || n_devices != 1 || job->share_count > 1 ||
      job->n_query < 2 * T + 1)
    return;
  KnnwbSelectPlan with = *plan;
  with.diagonal_ahead = 1;
  size_t bytes[KNNWB_BUFFER_KINDS];
  knnwb_select_plan_buffers(job, &with, 0, 0, bytes);
  const size_t rows_bytes = job->n_reference * (size_t)plan->row_bytes;
  const size_t second_rows = rows_bytes <= bytes[KNNWB_BUFFER_TILE_0] ? 0 : rows_bytes;
  const int exact = job->exact_query && job->exact_reference && job->out_distance;
  const size_t grouping = job->order_centroids != NULL && job->order_cells >= 2
                              ? knnwb_select_plan_order_bytes(job, plan)
                              : 0;
  const size_t need = knnwb_select_plan_bytes(job, &with, exact);
  if (need > budget || second_rows > budget - need || grouping > budget - need - second_rows)
    return;
  plan->diagonal_ahead = 1;
  plan->bytes = knnwb_select_plan_bytes(job, plan, 0);
}

size_t knnwb_select_plan_order_bytes(const KnnwbSelectJob *job, const KnnwbSelectPlan *plan)
{
  const size_t m = job->order_cells,
               cells = m * (job->dim * sizeof(float) + (size_t)plan->dpad * 2 + sizeof(float));
  return cells + 2 * (job->n_query > 0 ? job->n_query : 1) * sizeof(int32_t);
}

int knnwb_select_plan_groups_rows(const KnnwbSelectJob *job, const KnnwbSelectPlan *plan,
                                  size_t budget)
{
  if (job->order_centroids == NULL || job->order_cells < 2 || !job->self || !plan->resident ||
      !plan->symmetric || plan->screen != KNNWB_KERNELS_SCREEN_FP16 || plan->row_bytes % 16 != 0 ||
      job->share_count > 1 || job->query_group != NULL || job->query_bounds != NULL ||
      job->n_query != job->n_reference)
    return 0;
  size_t bytes[KNNWB_BUFFER_KINDS];
  knnwb_select_plan_buffers(job, plan, 0, 0, bytes);
  const size_t rows_bytes = job->n_reference * (size_t)plan->row_bytes;
  const size_t held = knnwb_select_plan_order_bytes(job, plan);
  /* the exact distances' buffers where the run will have them (cuda_select.cu: run.exact) */
  const size_t with_exact = knnwb_select_plan_bytes(job, plan, 1);
  const int exact =
      job->exact_query && job->exact_reference && job->out_distance && with_exact <= budget;
  const size_t need = exact ? with_exact : plan->bytes;
  if (need > budget || held > budget - need)
    return 0;
  return rows_bytes <= bytes[KNNWB_BUFFER_TILE_0] || rows_bytes <= budget - need - held;
}
