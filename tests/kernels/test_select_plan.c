/*
 * The GPU selection planner (kernels/select_plan.c) without a GPU: plans fit their budget, the
 * byte count is the sum of the one buffer list, hand-computed sizes, the order of preference
 * (largest tile, resident before streaming, symmetric for self jobs) and the refusals.
 */
#include <string.h>
#include <glib.h>
#include <limits.h>
#include "select_plan.h"

static KnnwbSelectJob job_of(size_t n_query, size_t n_reference, size_t dim, size_t kc, int self,
                             int kind)
{
  static float rows[1]; /* never read: only the pointers' identity matters */
  static float other[1];
  KnnwbSelectJob job;
  memset(&job, 0, sizeof job);
  job.query = rows;
  job.reference = self ? rows : other;
  job.n_query = n_query;
  job.n_reference = n_reference;
  job.dim = dim;
  job.kc = kc;
  job.self = self;
  job.score_kind = kind;
  return job;
}

static size_t buffers_sum(const KnnwbSelectJob *job, const KnnwbSelectPlan *plan, int exact)
{
  size_t bytes[KNNWB_BUFFER_KINDS], total = KNNWB_SELECT_OVERHEAD_BYTES;
  knnwb_select_plan_buffers(job, plan, exact, 1, bytes);
  for (int b = 0; b < KNNWB_BUFFER_KINDS; b++)
    total += (bytes[b] + 511) / 512 * 512;
  return total;
}

/* A small self job: one resident symmetric tile, every buffer by hand. */
static void test_plan_hand_computed(void)
{
  KnnwbSelectJob job = job_of(1000, 1000, 10, 28, 1, KNNWB_SCORE_DOT);
  KnnwbSelectPlan plan;
  g_assert_true(knnwb_select_plan_choose(&job, (size_t)1 << 30, 132, 64, &plan));
  g_assert_true(plan.symmetric);
  g_assert_true(plan.resident);
  g_assert_cmpint(plan.tile, ==, 1024);
  g_assert_cmpint(plan.dpad, ==, 16);
  g_assert_cmpint(plan.cap, ==, 64);
  g_assert_cmpint(plan.merge_blocks, ==, 528);
  g_assert_cmpuint(plan.state_rows, ==, 1000);
  size_t bytes[KNNWB_BUFFER_KINDS];
  knnwb_select_plan_buffers(&job, &plan, 0, 0, bytes);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_REFERENCE_ROWS], ==, 1000 * 16 * 4);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_QUERY_ROWS], ==, 0); /* the same rows */
  g_assert_cmpuint(bytes[KNNWB_BUFFER_QUERY_BLOCK], ==, 0);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_TILE_0], ==, 1024 * 1024 * 4);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_LIST_SCORE], ==, 1000 * 28 * 4);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_CANDIDATE_INDEX], ==, 1000 * 64 * 4);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_SCRATCH_KEY], ==, 528 * 1024 * 4);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_SQNORMS], ==, 0);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_STATS], ==, 0);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_STAGE_INDEX], ==, 0); /* symmetric: the tiles stage */
  g_assert_cmpuint(bytes[KNNWB_BUFFER_OUT_KEY], ==, 0);
  for (int b = KNNWB_BUFFER_FIRST_EXACT; b < KNNWB_BUFFER_KINDS; b++)
    g_assert_cmpuint(bytes[b], ==, 0);
  g_assert_cmpuint(plan.bytes, ==, buffers_sum(&job, &plan, 0));
  g_assert_cmpuint(knnwb_select_plan_bytes(&job, &plan, 1), >, plan.bytes);
  /* exact distances: the exact rows (dim, not dpad) and no query copy of the same rows */
  knnwb_select_plan_buffers(&job, &plan, 1, 0, bytes);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_EXACT_REFERENCE], ==, 1000 * 10 * 4);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_EXACT_QUERY], ==, 0);
}

/* Query jobs never plan the symmetric schedule; their lists go out through panel staging. */
static void test_plan_query_job(void)
{
  KnnwbSelectJob job = job_of(300, 5000, 33, 9, 0, KNNWB_SCORE_L2);
  KnnwbSelectPlan plan;
  g_assert_true(knnwb_select_plan_choose(&job, (size_t)1 << 30, 100, 64, &plan));
  g_assert_false(plan.symmetric);
  g_assert_cmpint(plan.tile, ==, 5120);
  g_assert_cmpuint(plan.state_rows, ==, 5120);
  size_t bytes[KNNWB_BUFFER_KINDS];
  knnwb_select_plan_buffers(&job, &plan, 0, 0, bytes);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_QUERY_ROWS], ==, 300 * 40 * 4);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_SQNORMS], ==, 5000 * 4);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_STAGE_INDEX], ==, 5120 * 9 * 8);
}

/* Every budget from tiny to large: a plan fits it, or none exists below the smallest one; more
 * budget never gives a smaller tile; streaming only when resident rows do not fit. */
static void test_plan_budgets(void)
{
  for (int self = 0; self <= 1; self++) {
    KnnwbSelectJob job = job_of(100003, 100003, 295, 28, self, KNNWB_SCORE_DOT);
    int last_tile = 0, planned = 0;
    for (size_t budget = (size_t)64 << 20; budget <= ((size_t)64 << 30); budget += budget / 7) {
      KnnwbSelectPlan plan;
      if (!knnwb_select_plan_choose(&job, budget, 132, 64, &plan)) {
        g_assert_cmpint(planned, ==, 0); /* a larger budget never loses its plan */
        continue;
      }
      planned = 1;
      g_assert_cmpuint(plan.bytes, <=, budget);
      g_assert_cmpuint(plan.bytes, ==, buffers_sum(&job, &plan, 0));
      g_assert_cmpint(plan.tile % KNNWB_SELECT_MIN_TILE, ==, 0);
      g_assert_cmpint(plan.tile, <=, KNNWB_SELECT_MAX_TILE);
      if (plan.symmetric == last_tile / 100000)
        g_assert_cmpint(plan.tile, >=, last_tile % 100000);
      last_tile = plan.symmetric * 100000 + plan.tile;
      if (plan.tile > KNNWB_SELECT_STREAM_MAX_TILE)
        g_assert_true(plan.resident);
      if (!plan.resident) {
        /* the resident variant of the same tile would not have fit */
        KnnwbSelectPlan resident = plan;
        resident.resident = 1;
        g_assert_cmpuint(knnwb_select_plan_bytes(&job, &resident, 0), >, budget);
      }
      if (plan.symmetric)
        g_assert_true(self);
    }
    g_assert_true(planned);
  }
}

/* The largest tile only with resident rows: a budget too small for it plans the next tile size
 * resident (it fits), not the largest streaming, and never a tile above the rows. */
static void test_plan_large_tiles(void)
{
  KnnwbSelectJob job = job_of(1533876, 1533876, 128, 40, 1, KNNWB_SCORE_DOT);
  job.screen = KNNWB_KERNELS_SCREEN_FP16;
  KnnwbSelectPlan plan;
  g_assert_true(knnwb_select_plan_choose(&job, (size_t)64 << 30, 132, 64, &plan));
  g_assert_cmpint(plan.tile, ==, KNNWB_SELECT_MAX_TILE);
  g_assert_true(plan.resident && plan.symmetric);
  KnnwbSelectPlan smaller = plan;
  smaller.tile = KNNWB_SELECT_STREAM_MAX_TILE;
  /* (symmetric state takes at most half the budget) */
  const size_t state = plan.state_rows * (size_t)(plan.kc + plan.cap) * 8;
  const size_t between = MAX(knnwb_select_plan_bytes(&job, &smaller, 0), 2 * state) + (1 << 20);
  g_assert_cmpuint(between, <, plan.bytes);
  g_assert_true(knnwb_select_plan_choose(&job, between, 132, 64, &plan));
  g_assert_cmpint(plan.tile, ==, KNNWB_SELECT_STREAM_MAX_TILE);
  g_assert_true(plan.resident && plan.symmetric);
  job = job_of(12000, 12000, 50, 40, 1, KNNWB_SCORE_L2);
  g_assert_true(knnwb_select_plan_choose(&job, (size_t)64 << 30, 132, 64, &plan));
  g_assert_cmpint(plan.tile, ==, 12032); /* the rows rounded up to 128 */
}

/* The merge's lazy limit: cap / 8 (at least 8) for small candidate buffers, cap / 2 for large
 * ones, in the plan; the environment's overrides within 1..cap. */
static void test_plan_lazy_limit(void)
{
  g_unsetenv("KNNWB_CUDA_LAZY_LIMIT");
  g_unsetenv("KNNWB_CUDA_LAZY_DIVISOR");
  g_assert_cmpint(knnwb_select_plan_lazy(64), ==, 8);
  g_assert_cmpint(knnwb_select_plan_lazy(96), ==, 12);
  g_assert_cmpint(knnwb_select_plan_lazy(KNNWB_SELECT_LAZY_SMALL_CAP), ==, 32);
  g_assert_cmpint(knnwb_select_plan_lazy(KNNWB_SELECT_LAZY_SMALL_CAP + 32), ==, 144);
  g_assert_cmpint(knnwb_select_plan_lazy(8192), ==, 4096);
  g_assert_cmpint(knnwb_select_plan_lazy(8), ==, 4); /* never above cap / 2 */
  KnnwbSelectJob job = job_of(1000, 1000, 10, 40, 1, KNNWB_SCORE_DOT);
  KnnwbSelectPlan plan;
  g_assert_true(knnwb_select_plan_choose(&job, (size_t)1 << 30, 132, 64, &plan));
  g_assert_cmpint(plan.cap, ==, 96);
  g_assert_cmpint(plan.lazy_limit, ==, 12);
  g_setenv("KNNWB_CUDA_LAZY_DIVISOR", "2", TRUE);
  g_assert_cmpint(knnwb_select_plan_lazy(96), ==, 48);
  g_assert_cmpint(knnwb_select_plan_lazy(8192), ==, 4096);
  g_setenv("KNNWB_CUDA_LAZY_DIVISOR", "1", TRUE); /* out of range: the default */
  g_assert_cmpint(knnwb_select_plan_lazy(96), ==, 12);
  g_setenv("KNNWB_CUDA_LAZY_LIMIT", "5", TRUE);
  g_assert_cmpint(knnwb_select_plan_lazy(96), ==, 5);
  g_setenv("KNNWB_CUDA_LAZY_LIMIT", "97", TRUE); /* above cap: ignored */
  g_assert_cmpint(knnwb_select_plan_lazy(96), ==, 12);
  g_unsetenv("KNNWB_CUDA_LAZY_LIMIT");
  g_unsetenv("KNNWB_CUDA_LAZY_DIVISOR");
}

/* Device rows: FP16 rows longer than 32 padded to 64 halves, others to 8; the plan takes that
 * length and its bytes; the environment's multiple (8..64) for FP16 rows, to measure. */
static void test_plan_dpad(void)
{
  g_unsetenv("KNNWB_CUDA_DPAD_ROUND");
  const int fp16 = KNNWB_KERNELS_SCREEN_FP16, fp32 = KNNWB_KERNELS_SCREEN_FP32;
  g_assert_cmpint(knnwb_select_plan_dpad(295, fp16), ==, 320);
  g_assert_cmpint(knnwb_select_plan_dpad(128, fp16), ==, 128);
  g_assert_cmpint(knnwb_select_plan_dpad(50, fp16), ==, 64);
  g_assert_cmpint(knnwb_select_plan_dpad(33, fp16), ==, 64);
  g_assert_cmpint(knnwb_select_plan_dpad(32, fp16), ==, 32);
  g_assert_cmpint(knnwb_select_plan_dpad(10, fp16), ==, 16);
  g_assert_cmpint(knnwb_select_plan_dpad(295, fp32), ==, 296);
  g_assert_cmpint(knnwb_select_plan_dpad(295, KNNWB_KERNELS_SCREEN_TF32), ==, 296);
  KnnwbSelectJob job = job_of(1533876, 1533876, 295, 40, 1, KNNWB_SCORE_DOT);
  job.screen = fp16;
  KnnwbSelectPlan plan;
  g_assert_true(knnwb_select_plan_choose(&job, (size_t)64 << 30, 132, 64, &plan));
  g_assert_cmpint(plan.dpad, ==, 320);
  g_assert_cmpint(plan.row_bytes, ==, 640);
  job = job_of(12000, 12000, 50, 40, 1, KNNWB_SCORE_L1); /* manhattan: fp32 rows */
  job.screen = fp16;
  g_assert_true(knnwb_select_plan_choose(&job, (size_t)64 << 30, 132, 64, &plan));
  g_assert_cmpint(plan.dpad, ==, 56);
  g_setenv("KNNWB_CUDA_DPAD_ROUND", "8", TRUE);
  g_assert_cmpint(knnwb_select_plan_dpad(295, fp16), ==, 296);
  g_setenv("KNNWB_CUDA_DPAD_ROUND", "36", TRUE); /* a multiple of 8 below it */
  g_assert_cmpint(knnwb_select_plan_dpad(295, fp16), ==, 320);
  g_setenv("KNNWB_CUDA_DPAD_ROUND", "128", TRUE); /* out of range: the default */
  g_assert_cmpint(knnwb_select_plan_dpad(295, fp16), ==, 320);
  g_unsetenv("KNNWB_CUDA_DPAD_ROUND");
}

/* Too small a budget is refused; merge lists outside shared memory get their buffers. */
static void test_plan_refusals(void)
{
  KnnwbSelectJob job = job_of(1000, 1000, 10, 28, 1, KNNWB_SCORE_DOT);
  KnnwbSelectPlan plan;
  g_assert_false(knnwb_select_plan_choose(&job, KNNWB_SELECT_OVERHEAD_BYTES, 132, 64, &plan));
  job.kc = 999;
  g_assert_true(knnwb_select_plan_choose(&job, (size_t)1 << 30, 132, 500, &plan));
  g_assert_false(plan.lists_in_shared);
  g_assert_cmpint(plan.merge_blocks, ==, 132);
  size_t bytes[KNNWB_BUFFER_KINDS];
  knnwb_select_plan_buffers(&job, &plan, 0, 0, bytes);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_OUT_KEY], ==, 132 * 999 * 4);
}

/* The tile a GEMM choice begun ahead (kernels/gemm_start.cu) is made for is the tile the plan
 * takes with a GPU's budget, for self and query jobs; the choice is timed from 64 full tiles on. */
static void test_plan_first_tile(void)
{
  const size_t sizes[][2] = {{1000, 1000},     {16383, 16383},     {131072, 131072},
                             {200000, 200000}, {1533876, 1533876}, {10000000, 10000000},
                             {5000, 2000000},  {2000000, 130000}};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
    const size_t nq = sizes[i][0], nr = sizes[i][1];
    KnnwbSelectJob job = job_of(nq, nr, 50, 50, nq == nr, KNNWB_SCORE_L2);
    job.screen = KNNWB_KERNELS_SCREEN_FP16;
    KnnwbSelectPlan plan;
    g_assert_true(knnwb_select_plan_choose(&job, (size_t)100 << 30, 132, 64, &plan));
    g_assert_cmpint(knnwb_select_plan_first_tile(nq, nr), ==, plan.tile);
    g_assert_cmpint(plan.dpad, ==, knnwb_select_plan_dpad(50, KNNWB_KERNELS_SCREEN_FP16));
  }
  g_assert_cmpint(knnwb_select_plan_first_tile(1000, 1000), ==, 1024);
  g_assert_cmpint(knnwb_select_plan_first_tile(0, 0), ==, KNNWB_SELECT_MIN_TILE);
  /* 8 x 8 full tiles of 16,384 and more: timed; 7 x 9 or 8 x 7: not */
  g_assert_true(knnwb_select_plan_times_gemm(131072, 131072, 16384));
  g_assert_false(knnwb_select_plan_times_gemm(131071, 131072, 16384));
  g_assert_false(knnwb_select_plan_times_gemm(16384 * 7, 16384 * 9, 16384));
  g_assert_true(knnwb_select_plan_times_gemm(16384 * 2, 16384 * 32, 16384));
  g_assert_false(knnwb_select_plan_times_gemm(1000, 1000, 1024));
}

/* A fused tile's pairs live in the free half of its tile buffer (the planner's tile buffers: T x T
 * floats, the tile of halves in the first half): the index, the lost lines and the pool neither
 * overlap each other nor leave that half, the pool is 16-byte aligned and holds all that fits, at
 * most the limit; a half too small for a pair a row fuses nothing. */
static void test_plan_fused_pairs(void)
{
  const int tiles[] = {128, 1024, 1000, 16384};
  for (size_t i = 0; i < G_N_ELEMENTS(tiles); i++) {
    const size_t T = (size_t)tiles[i], bytes = T * T * sizeof(float);
    const size_t side = (T + KNNWB_SELECT_FUSED_BLOCK - 1) / KNNWB_SELECT_FUSED_BLOCK;
    KnnwbFusedPairs layout;
    g_assert_true(knnwb_select_plan_fused_pairs(tiles[i], bytes, INT_MAX, &layout));
    g_assert_cmpuint(layout.lost_offset, >=, (1 + 2 * side * side) * sizeof(int));
    g_assert_cmpuint(layout.pairs_offset, >=, layout.lost_offset + 2 * T);
    g_assert_cmpuint(layout.pairs_offset % 16, ==, 0);
    g_assert_cmpuint(layout.pairs_offset + (size_t)layout.pair_room * 8, <=, bytes / 2);
    g_assert_cmpuint(layout.pairs_offset + ((size_t)layout.pair_room + 1) * 8, >, bytes / 2);
    g_assert_cmpint(layout.pair_room, >=, tiles[i]);
    g_assert_true(knnwb_select_plan_fused_pairs(tiles[i], bytes, 100, &layout));
    g_assert_cmpint(layout.pair_room, ==, 100);
  }
  KnnwbFusedPairs untouched = {1, 2, 3};
  /* the tile of halves alone fills a buffer of T x T x 2 bytes; a limit below one pair */
  g_assert_false(knnwb_select_plan_fused_pairs(1024, (size_t)1024 * 1024 * 2, INT_MAX, &untouched));
  g_assert_false(knnwb_select_plan_fused_pairs(1024, (size_t)1024 * 1024 * 4, 0, &untouched));
  g_assert_false(knnwb_select_plan_fused_pairs(0, 4096, INT_MAX, &untouched));
  g_assert_cmpint(untouched.pair_room, ==, 3);
}

/* The measurement of fused against filtered tiles, step by step for windows of 4: the first 32
 * tiles keep the last kind, then fused, filtered, filtered, fused windows with a mark at each
 * start, the decision with the fifth mark, the rest of the period kept, and the next period 128
 * tiles later; the decision from the windows' times. */
static void test_plan_fused_probe(void)
{
  int mark = 0;
  for (long n = 0; n < 32; n++) {
    g_assert_cmpint(knnwb_select_plan_fused_probe(n, 4, 8, &mark), ==, KNNWB_FUSED_PROBE_LAST);
    g_assert_cmpint(mark, ==, -1);
  }
  for (long period = 0; period < 3; period++) {
    const long start = 32 + 128 * period;
    for (long t = 0; t < 16; t++) {
      const KnnwbFusedProbeStep step = knnwb_select_plan_fused_probe(start + t, 4, 8, &mark);
      const long w = t / 4;
      g_assert_cmpint(step, ==,
                      w == 0 || w == 3 ? KNNWB_FUSED_PROBE_FUSED : KNNWB_FUSED_PROBE_FILTERED);
      g_assert_cmpint(mark, ==, t % 4 == 0 ? (int)w : -1);
    }
    g_assert_cmpint(knnwb_select_plan_fused_probe(start + 16, 4, 8, &mark), ==,
                    KNNWB_FUSED_PROBE_DECIDE);
    g_assert_cmpint(mark, ==, 4);
    for (long t = 17; t < 128; t++) {
      g_assert_cmpint(knnwb_select_plan_fused_probe(start + t, 4, 8, &mark), ==,
                      KNNWB_FUSED_PROBE_LAST);
      g_assert_cmpint(mark, ==, -1);
    }
  }
  /* no window filtered first: the first tile starts the first measurement; two: its 8th */
  g_assert_cmpint(knnwb_select_plan_fused_probe(0, 4, 0, &mark), ==, KNNWB_FUSED_PROBE_FUSED);
  g_assert_cmpint(mark, ==, 0);
  g_assert_cmpint(knnwb_select_plan_fused_probe(7, 4, 2, &mark), ==, KNNWB_FUSED_PROBE_LAST);
  g_assert_cmpint(knnwb_select_plan_fused_probe(8, 4, 2, &mark), ==, KNNWB_FUSED_PROBE_FUSED);
  g_assert_cmpint(mark, ==, 0);
  /* windows of one tile: every tile of the four is a window's start */
  for (long t = 0; t < 5; t++) {
    knnwb_select_plan_fused_probe(8 + t, 1, 8, &mark);
    g_assert_cmpint(mark, ==, (int)t);
  }
  const float fused_faster[4] = {1.0f, 2.0f, 2.0f, 1.5f},
              filtered_faster[4] = {3.0f, 1.0f, 1.0f, 0.5f}, tie[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  g_assert_true(knnwb_select_plan_fused_wins(fused_faster));
  g_assert_false(knnwb_select_plan_fused_wins(filtered_faster));
  g_assert_false(knnwb_select_plan_fused_wins(tie));
  /* a fresh tile in a fused window lost it the measurement; taken out, the fused windows win */
  float with_fresh[4] = {3.2f, 2.0f, 2.0f, 1.5f};
  const float fresh_ms[3] = {2.2f, 0.5f, 9.0f};
  const int fresh_window[3] = {0, 4, -1};
  g_assert_false(knnwb_select_plan_fused_wins(with_fresh));
  knnwb_select_plan_probe_exclude(with_fresh, fresh_ms, fresh_window, 3);
  g_assert_cmpfloat_with_epsilon(with_fresh[0], 1.0f, 1e-6);
  g_assert_cmpfloat(with_fresh[1], ==, 2.0f);
  g_assert_true(knnwb_select_plan_fused_wins(with_fresh));
  /* a close decision is measured again 4 windows on, a clear one for fused tiles 60 (every 64
   * windows), one for filtered tiles 28 (every 32) except the first measurement's (4); unread
   * times (zeros) 28 */
  const float close[4] = {27.0f, 26.0f, 26.5f, 27.5f}, clear[4] = {18.0f, 25.0f, 26.0f, 19.0f};
  const float against[4] = {25.0f, 18.0f, 19.0f, 26.0f};
  g_assert_cmpint(knnwb_select_plan_probe_gap(close, 64, 0), ==, 4 * 64);
  g_assert_cmpint(knnwb_select_plan_probe_gap(close, 64, 1), ==, 4 * 64);
  g_assert_cmpint(knnwb_select_plan_probe_gap(clear, 64, 0), ==, 60 * 64);
  g_assert_cmpint(knnwb_select_plan_probe_gap(clear, 64, 1), ==, 60 * 64);
  g_assert_false(knnwb_select_plan_fused_wins(against));
  g_assert_cmpint(knnwb_select_plan_probe_gap(against, 64, 0), ==, 28 * 64);
  g_assert_cmpint(knnwb_select_plan_probe_gap(against, 64, 1), ==, 4 * 64);
  g_assert_cmpint(knnwb_select_plan_probe_gap(tie, 16, 0), ==, 4 * 16);
  const float none[4] = {0, 0, 0, 0};
  g_assert_cmpint(knnwb_select_plan_probe_gap(none, 16, 0), ==, 28 * 16);
  g_assert_cmpint(knnwb_select_plan_probe_gap(none, 16, 1), ==, 28 * 16);
  /* another period moves only a clear decision for fused tiles */
  g_assert_cmpint(knnwb_select_plan_probe_period(), ==, 64);
  g_setenv("KNNWB_CUDA_FUSED_PERIOD", "32", TRUE);
  g_assert_cmpint(knnwb_select_plan_probe_period(), ==, 32);
  g_assert_cmpint(knnwb_select_plan_probe_gap(clear, 16, 0), ==, 28 * 16);
  g_assert_cmpint(knnwb_select_plan_probe_gap(close, 16, 0), ==, 4 * 16);
  g_assert_cmpint(knnwb_select_plan_probe_gap(against, 16, 1), ==, 4 * 16);
  g_setenv("KNNWB_CUDA_FUSED_PERIOD", "100", TRUE);
  g_assert_cmpint(knnwb_select_plan_probe_gap(clear, 16, 0), ==, 96 * 16);
  g_assert_cmpint(knnwb_select_plan_probe_gap(against, 16, 0), ==, 28 * 16);
  g_setenv("KNNWB_CUDA_FUSED_PERIOD", "4", TRUE); /* out of range: the default */
  g_assert_cmpint(knnwb_select_plan_probe_gap(clear, 16, 0), ==, 60 * 16);
  g_unsetenv("KNNWB_CUDA_FUSED_PERIOD");
  /* the worker's origin after a decision at tile n_decide: the next measurement's first tile is
   * gap tiles on, its first windows counted as already passed */
  const long first = 2, window = 4, n_decide = 8 + 16;
  const long origin = n_decide + knnwb_select_plan_probe_gap(close, window, 0) - first * window;
  for (long t = n_decide + 1; t < n_decide + 4 * window; t++) {
    g_assert_cmpint(knnwb_select_plan_fused_probe(t - origin, window, first, &mark), ==,
                    KNNWB_FUSED_PROBE_LAST);
    g_assert_cmpint(mark, ==, -1);
  }
  g_assert_cmpint(
      knnwb_select_plan_fused_probe(n_decide + 4 * window - origin, window, first, &mark), ==,
      KNNWB_FUSED_PROBE_FUSED);
  g_assert_cmpint(mark, ==, 0);
  /* never below 0 */
  float small[4] = {0.5f, 1.0f, 1.0f, 1.0f};
  const float big = 2.0f;
  const int in_third = 3;
  knnwb_select_plan_probe_exclude(small, &big, &in_third, 1);
  g_assert_cmpfloat(small[3], ==, 0.0f);
  g_assert_cmpfloat(small[0], ==, 0.5f);
  g_setenv("KNNWB_CUDA_FUSED_PROBE", "16", TRUE);
  g_assert_cmpint(knnwb_select_plan_probe_window(), ==, 16);
  g_setenv("KNNWB_CUDA_FUSED_PROBE", "0", TRUE);
  g_assert_cmpint(knnwb_select_plan_probe_window(), ==, 64);
  g_unsetenv("KNNWB_CUDA_FUSED_PROBE");
  g_assert_cmpint(knnwb_select_plan_probe_window(), ==, 64);
}

/* Which fresh tiles the one kernel selects (knnwb_select_plan_fresh_kernel): rows of 64 to 255
 * columns on one GPU by default, the column stages at the edges of that range and on two GPUs;
 * KNNWB_CUDA_FRESH forces either, an unknown value leaves the default. */
static void test_plan_fresh_kernel(void)
{
  g_unsetenv("KNNWB_CUDA_FRESH");
  g_assert_true(knnwb_select_plan_fresh_kernel(128, 1));
  g_assert_true(knnwb_select_plan_fresh_kernel(64, 1));
  g_assert_true(knnwb_select_plan_fresh_kernel(255, 1));
  g_assert_false(knnwb_select_plan_fresh_kernel(63, 1));
  g_assert_false(knnwb_select_plan_fresh_kernel(256, 1));
  g_assert_false(knnwb_select_plan_fresh_kernel(295, 1));
  g_assert_false(knnwb_select_plan_fresh_kernel(128, 2));
  g_setenv("KNNWB_CUDA_FRESH", "kernel", TRUE);
  g_assert_true(knnwb_select_plan_fresh_kernel(295, 1));
  g_assert_true(knnwb_select_plan_fresh_kernel(32, 2));
  g_setenv("KNNWB_CUDA_FRESH", "stages", TRUE);
  g_assert_false(knnwb_select_plan_fresh_kernel(128, 1));
  g_setenv("KNNWB_CUDA_FRESH", "sometimes", TRUE);
  g_assert_true(knnwb_select_plan_fresh_kernel(128, 1));
  g_assert_false(knnwb_select_plan_fresh_kernel(295, 1));
  g_unsetenv("KNNWB_CUDA_FRESH");
}

/* When a run groups its rows by centroid (knnwb_select_plan_groups_rows): a resident FP16 self
 * job of one process with centroids; not without them, nor for query jobs, shares, groups,
 * starting bounds, other screens, streamed rows, or where neither a tile buffer nor the budget
 * holds a second copy of the rows. */
static void test_plan_groups_rows(void)
{
  static const float centroids[2 * 40];
  static const int32_t groups[1];
  static const float bounds[1];
  KnnwbSelectJob job = job_of(300000, 300000, 40, 24, 1, KNNWB_SCORE_DOT);
  job.screen = KNNWB_KERNELS_SCREEN_FP16;
  job.order_centroids = centroids;
  job.order_cells = 2;
  const size_t budget = (size_t)8 << 30;
  KnnwbSelectPlan plan;
  g_assert_true(knnwb_select_plan_choose(&job, budget, 132, 64, &plan));
  g_assert_true(plan.resident && plan.symmetric);
  g_assert_true(knnwb_select_plan_groups_rows(&job, &plan, budget));
  KnnwbSelectJob other = job;
  other.order_cells = 1;
  g_assert_false(knnwb_select_plan_groups_rows(&other, &plan, budget));
  other = job;
  other.order_centroids = NULL;
  g_assert_false(knnwb_select_plan_groups_rows(&other, &plan, budget));
  other = job;
  other.share_count = 2;
  g_assert_false(knnwb_select_plan_groups_rows(&other, &plan, budget));
  other = job;
  other.query_group = other.reference_group = groups;
  g_assert_false(knnwb_select_plan_groups_rows(&other, &plan, budget));
  other = job;
  other.query_bounds = bounds;
  g_assert_false(knnwb_select_plan_groups_rows(&other, &plan, budget));
  other = job_of(300000, 200000, 40, 24, 0, KNNWB_SCORE_DOT);
  other.screen = KNNWB_KERNELS_SCREEN_FP16;
  other.order_centroids = centroids;
  other.order_cells = 2;
  KnnwbSelectPlan query_plan;
  g_assert_true(knnwb_select_plan_choose(&other, budget, 132, 64, &query_plan));
  g_assert_false(knnwb_select_plan_groups_rows(&other, &query_plan, budget));
  KnnwbSelectPlan changed = plan;
  changed.screen = KNNWB_KERNELS_SCREEN_FP32;
  g_assert_false(knnwb_select_plan_groups_rows(&job, &changed, budget));
  changed = plan;
  changed.resident = 0;
  g_assert_false(knnwb_select_plan_groups_rows(&job, &changed, budget));
  /* rows larger than a tile buffer: a second copy needs the budget beyond the plan */
  size_t bytes[KNNWB_BUFFER_KINDS];
  knnwb_select_plan_buffers(&job, &plan, 0, 0, bytes);
  const size_t rows_bytes = job.n_reference * (size_t)plan.row_bytes;
  changed = plan;
  changed.tile = plan.tile / 16;
  knnwb_select_plan_buffers(&job, &changed, 0, 0, bytes);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_TILE_0], <, rows_bytes);
  changed.bytes = knnwb_select_plan_bytes(&job, &changed, 0);
  /* the grouping's own arrays (cells and order of every row, the centroids) count too */
  const size_t held = knnwb_select_plan_order_bytes(&job, &changed);
  g_assert_cmpuint(held, >=, 2 * job.n_query * sizeof(int32_t));
  g_assert_true(knnwb_select_plan_groups_rows(&job, &changed, changed.bytes + held + rows_bytes));
  g_assert_false(
      knnwb_select_plan_groups_rows(&job, &changed, changed.bytes + held + rows_bytes - 1));
  g_assert_false(knnwb_select_plan_groups_rows(&job, &changed, changed.bytes - 1));
  /* rows that fit a tile buffer still need room for the grouping's arrays */
  g_assert_true(knnwb_select_plan_groups_rows(&job, &plan, plan.bytes + held));
  g_assert_false(knnwb_select_plan_groups_rows(&job, &plan, plan.bytes + held - 1));
  /* a job with exact rows and distances: their buffers count where the budget gives them to the
   * run (beyond it, the run goes without them and so may the grouping) */
  static const float exact_rows[1];
  static double exact_out[1];
  KnnwbSelectJob exact = job;
  exact.exact_query = exact.exact_reference = exact_rows;
  exact.out_distance = exact_out;
  const size_t with_exact = knnwb_select_plan_bytes(&exact, &plan, 1);
  g_assert_cmpuint(with_exact, >, plan.bytes + held);
  g_assert_true(knnwb_select_plan_groups_rows(&exact, &plan, with_exact + held));
  g_assert_false(knnwb_select_plan_groups_rows(&exact, &plan, with_exact + held - 1));
  g_assert_true(knnwb_select_plan_groups_rows(&exact, &plan, with_exact - 1));
}

/* The next column's diagonal tile ahead (knnwb_select_plan_diagonal_ahead): one GPU, one process,
 * a resident FP16 symmetric plan of 3 or more blocks, and room for its buffers, which are the
 * tile's and the merge scratch's sizes again and count in plan.bytes. */
static void test_plan_diagonal_ahead(void)
{
  KnnwbSelectJob job = job_of(300000, 300000, 40, 24, 1, KNNWB_SCORE_DOT);
  job.screen = KNNWB_KERNELS_SCREEN_FP16;
  const size_t budget = (size_t)8 << 30;
  KnnwbSelectPlan plan;
  g_assert_true(knnwb_select_plan_choose(&job, budget, 132, 64, &plan));
  g_assert_true(plan.resident && plan.symmetric);
  g_assert_false(plan.diagonal_ahead);
  const size_t before = plan.bytes;
  KnnwbSelectPlan ahead = plan;
  knnwb_select_plan_diagonal_ahead(&job, &ahead, 1, budget);
  g_assert_true(ahead.diagonal_ahead);
  size_t bytes[KNNWB_BUFFER_KINDS];
  knnwb_select_plan_buffers(&job, &ahead, 0, 0, bytes);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_AHEAD_TILE], ==, bytes[KNNWB_BUFFER_TILE_0]);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_AHEAD_WORKSPACE], ==, KNNWB_SELECT_LT_WORKSPACE_BYTES);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_AHEAD_MERGE_LIST], ==, bytes[KNNWB_BUFFER_MERGE_LIST]);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_AHEAD_MERGE_COUNT], ==, bytes[KNNWB_BUFFER_MERGE_COUNT]);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_AHEAD_SCRATCH_KEY], ==, bytes[KNNWB_BUFFER_SCRATCH_KEY]);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_AHEAD_SCRATCH_INDEX], ==, bytes[KNNWB_BUFFER_SCRATCH_INDEX]);
  g_assert_cmpuint(bytes[KNNWB_BUFFER_AHEAD_OUT_KEY], ==, bytes[KNNWB_BUFFER_OUT_KEY]);
  g_assert_cmpuint(ahead.bytes, ==, knnwb_select_plan_bytes(&job, &ahead, 0));
  g_assert_cmpuint(ahead.bytes, >=, before + bytes[KNNWB_BUFFER_AHEAD_TILE]);
  /* not for two GPUs, a group's share, panels, a streaming or FP32 plan,
   * KNNWB_CUDA_DIAGONAL_AHEAD=0 */
  KnnwbSelectPlan other = plan;
  knnwb_select_plan_diagonal_ahead(&job, &other, 2, budget);
  g_assert_false(other.diagonal_ahead);
  g_assert_cmpuint(other.bytes, ==, before);
  KnnwbSelectJob shared = job;
  shared.share_count = 2;
  knnwb_select_plan_diagonal_ahead(&shared, &other, 1, budget);
  g_assert_false(other.diagonal_ahead);
  other.symmetric = 0;
  knnwb_select_plan_diagonal_ahead(&job, &other, 1, budget);
  g_assert_false(other.diagonal_ahead);
  other = plan;
  other.resident = 0;
  knnwb_select_plan_diagonal_ahead(&job, &other, 1, budget);
  g_assert_false(other.diagonal_ahead);
  other = plan;
  other.screen = KNNWB_KERNELS_SCREEN_FP32;
  knnwb_select_plan_diagonal_ahead(&job, &other, 1, budget);
  g_assert_false(other.diagonal_ahead);
  g_setenv("KNNWB_CUDA_DIAGONAL_AHEAD", "0", TRUE);
  other = plan;
  knnwb_select_plan_diagonal_ahead(&job, &other, 1, budget);
  g_assert_false(other.diagonal_ahead);
  g_setenv("KNNWB_CUDA_DIAGONAL_AHEAD", "1", TRUE);
  other = plan;
  knnwb_select_plan_diagonal_ahead(&job, &other, 1, budget);
  g_assert_true(other.diagonal_ahead);
  g_unsetenv("KNNWB_CUDA_DIAGONAL_AHEAD");
  /* fewer than three blocks: the diagonals are most of the work, nothing to hide them behind */
  other = plan;
  KnnwbSelectJob small =
      job_of(2 * (size_t)plan.tile, 2 * (size_t)plan.tile, 40, 24, 1, KNNWB_SCORE_DOT);
  small.screen = KNNWB_KERNELS_SCREEN_FP16;
  knnwb_select_plan_diagonal_ahead(&small, &other, 1, budget);
  g_assert_false(other.diagonal_ahead);
  small.n_query = small.n_reference = 2 * (size_t)plan.tile + 1;
  knnwb_select_plan_diagonal_ahead(&small, &other, 1, budget);
  g_assert_true(other.diagonal_ahead);
  /* the budget: the plan with the ahead buffers must fit it, exact buffers counted when wanted */
  other = plan;
  knnwb_select_plan_diagonal_ahead(&job, &other, 1, ahead.bytes);
  g_assert_true(other.diagonal_ahead);
  other = plan;
  knnwb_select_plan_diagonal_ahead(&job, &other, 1, ahead.bytes - 1);
  g_assert_false(other.diagonal_ahead);
  g_assert_cmpuint(other.bytes, ==, before);
  static const float exact_rows[1];
  static double exact_out[1];
  KnnwbSelectJob exact = job;
  exact.exact_query = exact.exact_reference = exact_rows;
  exact.out_distance = exact_out;
  other = plan;
  knnwb_select_plan_diagonal_ahead(&exact, &other, 1, ahead.bytes);
  g_assert_false(other.diagonal_ahead);
  knnwb_select_plan_diagonal_ahead(&exact, &other, 1, knnwb_select_plan_bytes(&exact, &ahead, 1));
  g_assert_true(other.diagonal_ahead);
}

/* Self jobs take the symmetric schedule while its state (every row's lists) leaves half the
 * budget to tiles, and query panels beyond: the schedule of a whole-input rank's share of 300,007
 * rows under --gpu-memory 400M. KNNWB_CUDA_SYMMETRIC=0 takes panels on any input (for tests). */
static void test_plan_panels(void)
{
  KnnwbSelectJob job = job_of(3001, 3001, 21, 28, 1, KNNWB_SCORE_DOT);
  job.screen = KNNWB_KERNELS_SCREEN_FP16;
  KnnwbSelectPlan plan;
  g_assert_true(knnwb_select_plan_choose(&job, (size_t)100 << 20, 132, 64, &plan));
  g_assert_true(plan.symmetric);
  g_setenv("KNNWB_CUDA_SYMMETRIC", "0", TRUE);
  g_assert_true(knnwb_select_plan_choose(&job, (size_t)100 << 20, 132, 64, &plan));
  g_assert_false(plan.symmetric);
  g_unsetenv("KNNWB_CUDA_SYMMETRIC");
  KnnwbSelectJob big = job_of(300007, 300007, 50, 30, 1, KNNWB_SCORE_DOT);
  big.screen = KNNWB_KERNELS_SCREEN_FP16;
  g_assert_true(knnwb_select_plan_choose(&big, (size_t)400 << 20, 132, 64, &plan));
  g_assert_false(plan.symmetric);
  g_assert_true(knnwb_select_plan_choose(&big, (size_t)8 << 30, 132, 64, &plan));
  g_assert_true(plan.symmetric);
  /* A group's agreed plan (KnnwbSelectJob.share_plan): the smallest schedule and tile of the
   * ranks' choices, taken as such by a rank that would have chosen more; none that cannot be. */
  KnnwbSelectPlan agreed;
  g_assert_true(knnwb_select_plan_choose_agreed(&big, (size_t)8 << 30, 132, 64, 0, 1024, &agreed));
  g_assert_false(agreed.symmetric);
  g_assert_cmpint(agreed.tile, ==, 1024);
  g_assert_true(
      knnwb_select_plan_choose_agreed(&big, (size_t)8 << 30, 132, 64, 1, plan.tile, &agreed));
  g_assert_true(agreed.symmetric);
  g_assert_cmpint(agreed.tile, ==, plan.tile);
  g_assert_cmpint(agreed.resident, ==, plan.resident);
  g_assert_cmpuint(agreed.bytes, ==, plan.bytes);
  g_assert_false(
      knnwb_select_plan_choose_agreed(&big, (size_t)400 << 20, 132, 64, 1, 4096, &agreed));
  g_assert_false(knnwb_select_plan_choose_agreed(&big, (size_t)8 << 30, 132, 64, 0, 64, &agreed));
  KnnwbSelectJob query = job_of(3001, 5003, 21, 28, 0, KNNWB_SCORE_DOT);
  query.screen = KNNWB_KERNELS_SCREEN_FP16;
  g_assert_false(
      knnwb_select_plan_choose_agreed(&query, (size_t)1 << 30, 132, 64, 1, 512, &agreed));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/select-plan/hand-computed", test_plan_hand_computed);
  g_test_add_func("/kernels/select-plan/query-job", test_plan_query_job);
  g_test_add_func("/kernels/select-plan/budgets", test_plan_budgets);
  g_test_add_func("/kernels/select-plan/large-tiles", test_plan_large_tiles);
  g_test_add_func("/kernels/select-plan/lazy-limit", test_plan_lazy_limit);
  g_test_add_func("/kernels/select-plan/dpad", test_plan_dpad);
  g_test_add_func("/kernels/select-plan/refusals", test_plan_refusals);
  g_test_add_func("/kernels/select-plan/first-tile", test_plan_first_tile);
  g_test_add_func("/kernels/select-plan/fused-pairs", test_plan_fused_pairs);
  g_test_add_func("/kernels/select-plan/fused-probe", test_plan_fused_probe);
  g_test_add_func("/kernels/select-plan/groups-rows", test_plan_groups_rows);
  g_test_add_func("/kernels/select-plan/fresh-kernel", test_plan_fresh_kernel);
  g_test_add_func("/kernels/select-plan/diagonal-ahead", test_plan_diagonal_ahead);
  g_test_add_func("/kernels/select-plan/panels", test_plan_panels);
  return g_test_run();
}
