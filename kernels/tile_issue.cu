/*
 * Issuing one tile, for every schedule: its scores on the GEMM stream (tile_scores.h), then its
 * selection on the selection stream (launch_tile_select), with two tile buffers in flight: the
 * GEMM of the next tile overlaps the selection of this one. Or a fused tile (tile_fused.cu):
 * products and filter in one kernel on the GEMM stream, then the merge on the selection stream.
 * After issuing, the worker waits for the previous tile's selection, then counts it for progress
 * and (trace) times it.
 */
#include "select_worker.h"
#include "tile_scores.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace knnwb_cuda
{

/* The scores of a tile into tiles_[slot], once the selection that last read it is done (scaling:
 * gemm_alpha). */
bool Worker::gemm_tile(int slot, const void *q, int n_q, const void *r, int n_r)
{
  const KnnwbSelectPlan &p = run_.plan;
  CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, select_done_[slot], 0));
  if (serial_tiles()) {
    /* after everything the selection stream holds (the other slot's selection too) */
    CUDA_TRY(run_, cudaEventRecord(select_tail_, select_stream_));
    CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, select_tail_, 0));
  }
  if (gemm_start_[slot])
    CUDA_TRY(run_, cudaEventRecord(gemm_start_[slot], gemm_stream_));
  if (run_.job->score_kind == KNNWB_SCORE_L1) {
    CUDA_TRY(run_, launch_l1_tile((const float *)q, n_q, (const float *)r, n_r, p.dpad,
                                  tiles_[slot], (size_t)p.tile, gemm_stream_));
  } else {
    const bool full = n_q == p.tile && n_r == p.tile;
    /* full tiles on cuBLASLt's chosen algorithm (choose_gemm); one it refuses (it checks the
     * operands before any launch) leaves this and every later tile to cublasGemmEx */
    if (lt_gemm_.ready && full &&
        lt_gemm_run(lt_gemm_, q, r, gemm_alpha(), tiles_[slot], gemm_stream_) !=
            CUBLAS_STATUS_SUCCESS)
      lt_gemm_.ready = false;
    if (!lt_gemm_.ready || !full)
      CUBLAS_TRY(run_, tile_scores_gemm(blas_, gemm_precision(), q, n_q, r, n_r, p.dpad,
                                        gemm_alpha(), tiles_[slot], p.tile, half_tiles_));
  }
  if (gemm_end_[slot])
    CUDA_TRY(run_, cudaEventRecord(gemm_end_[slot], gemm_stream_));
  CUDA_TRY(run_, cudaEventRecord(gemm_done_[slot], gemm_stream_));
  return true;
}

/* Where a fused tile in slot keeps its pairs: the half of its tile buffer that half tiles leave
 * unused (a fused tile writes no tile), laid out by knnwb_select_plan_fused_pairs; false when they
 * would not fit there. */
bool Worker::fused_pairs(int slot, TileGeom *g) const
{
  KnnwbFusedPairs layout;
  if (!knnwb_select_plan_fused_pairs(run_.plan.tile, tile_bytes_, fused_pair_room(), &layout))
    return false;
  char *free_half = (char *)tiles_[slot] + tile_bytes_ / 2;
  g->pair_index = (int *)free_half;
  g->lost = (unsigned char *)(free_half + layout.lost_offset);
  g->pairs = (uint2 *)(free_half + layout.pairs_offset);
  g->pair_room = layout.pair_room;
  return true;
}

/* Empties rows [row0, row0 + n_rows) of the state on the selection stream; the next fused tile
 * waits for it (its thresholds go back to +inf, which a fused tile must not read from before). */
bool Worker::reset_state(int row0, int n_rows)
{
  CUDA_TRY(run_, launch_state_reset(state_, row0, n_rows, select_stream_));
  state_reset_ = true;
  return true;
}

/* Ordinary FP16 tiles of DOT and ABS_DOT scores without groups may be fused (tile_fused.cu), once
 * both their rows and their columns were filtered against fused_tiles_after() tiles: always,
 * never, or as fused_probe measured (fused_tiles_setting). */
bool Worker::fused_wanted(const TileGeom &geom)
{
  TileGeom probe = {};
  const int setting = fused_tiles_setting();
  if (setting == 0 || !half_tiles_ || geom.fresh || geom.row_group ||
      (geom.kind != KNNWB_SCORE_DOT && geom.kind != KNNWB_SCORE_ABS_DOT) ||
      geom.seen < fused_tiles_after() || !fused_pairs(0, &probe))
    return false;
  return setting == 1 || fused_probe();
}

/*
 * Whether the next tile that may be fused is, as knnwb_select_plan_fused_probe measures fused
 * against filtered tiles in windows: the selection stream is marked at each window's start, and
 * after the four windows their times decide for the rest of the period. Which is faster depends
 * on the data, not on the shape alone: fused tiles won on the real-like matrix and lost on the
 * clusters at every d measured (docs/performance-gpu.md). The lists are the same either way. A
 * decision waits for the selection of the tile before it (one tile of the pipeline, once a
 * period). A mark that cannot be recorded ends the measurements of this run.
 */
bool Worker::fused_probe()
{
  if (probe_off_)
    return fused_choice_ == 1;
  int mark = -1;
  const long window = knnwb_select_plan_probe_window(), first = knnwb_select_plan_probe_first();
  const long n = fusable_tiles_++;
  const KnnwbFusedProbeStep step =
      knnwb_select_plan_fused_probe(n - probe_origin_, window, first, &mark);
  /* a measurement times the tiles alone: a diagonal tile ahead still running is waited for */
  if (mark == 0 && !ahead_quiet())
    return fused_choice_ == 1;
  if (mark >= 0 && cudaEventRecord(probe_mark_[mark], select_stream_) != cudaSuccess) {
    (void)cudaGetLastError();
    probe_off_ = true;
    probe_window_ = -1;
    return fused_choice_ == 1;
  }
  if (mark == 0)
    probe_fresh_n_ = 0;
  if (mark >= 0)
    probe_window_ = mark < 4 ? mark : -1;
  if (step == KNNWB_FUSED_PROBE_FUSED || step == KNNWB_FUSED_PROBE_FILTERED)
    return step == KNNWB_FUSED_PROBE_FUSED;
  /* the next measurement begins gap tiles on, where the period's first windows would end */
  if (step == KNNWB_FUSED_PROBE_DECIDE)
    probe_origin_ = n + fused_decide(window) - first * window;
  return fused_choice_ == 1;
}

/* The decision after a measurement's four windows (fused_probe), from their times less the fresh
 * tiles' selections inside them. Returns the tiles until the next measurement
 * (knnwb_select_plan_probe_gap; the usual period when the times could not be read). */
long Worker::fused_decide(long window)
{
  float ms[4] = {0, 0, 0, 0};
  bool timed = cudaEventSynchronize(probe_mark_[4]) == cudaSuccess;
  for (int w = 0; w < 4 && timed; w++)
    timed = cudaEventElapsedTime(&ms[w], probe_mark_[w], probe_mark_[w + 1]) == cudaSuccess;
  float fresh_ms[KNNWB_SELECT_PROBE_FRESH];
  for (int i = 0; i < probe_fresh_n_ && timed; i++)
    timed = cudaEventElapsedTime(&fresh_ms[i], probe_fresh_[2 * i], probe_fresh_[2 * i + 1]) ==
            cudaSuccess;
  if (!timed) {
    (void)cudaGetLastError();
    std::fill(ms, ms + 4, 0.0f); /* a partial read must not look like a clear decision */
  }
  if (timed)
    knnwb_select_plan_probe_exclude(ms, fresh_ms, probe_fresh_window_, probe_fresh_n_);
  fused_choice_ = timed && knnwb_select_plan_fused_wins(ms);
  fused_probes_++;
  fused_chosen_ += fused_choice_;
  const long gap = knnwb_select_plan_probe_gap(ms, window, fused_probes_ == 1);
  if (trace_level() >= 2)
    fprintf(stderr,
            "knnwb cuda worker %d: fused tiles %s after %ld tiles that may be fused (%ld of each: "
            "fused %.3f ms, filtered %.3f ms, %d fresh tiles taken out); the next measurement in "
            "%ld tiles\n",
            index_, fused_choice_ ? "chosen" : "not chosen", fusable_tiles_, 2 * window,
            ms[0] + ms[3], ms[1] + ms[2], probe_fresh_n_, gap);
  return gap;
}

/*
 * A fused tile in slot's place on the GEMM stream, so that the streaming schedules' copies order
 * against it as against a GEMM (they wait for gemm_done_): the products and the filter in one
 * kernel, which keeps the pairs that pass in the slot (fused_pairs) and reads thresholds. It starts
 * once the slot's previous selection is done; the selection stream's later work (the previous
 * tile's merge, imported thresholds, cleared lists) only lowers thresholds or touches lists, so it
 * need not wait for that, except after the state was reset (thresholds back to +inf) or with
 * KNNWB_CUDA_FUSED_OVERLAP=0. The pairs are then appended and merged on the selection stream
 * (select_tile, geom.tile NULL).
 */
bool Worker::fused_tile(int slot, TileRequest &request)
{
  TileGeom &g = request.geom;
  g.tile = nullptr;
  g.q_rows = request.q;
  g.r_rows = request.r;
  g.dpad = run_.plan.dpad;
  g.dread = (int)std::min<size_t>((size_t)g.dpad, (run_.job->dim + 7) / 8 * 8);
  g.alpha = gemm_alpha();
  if (!fused_pairs(slot, &g)) {
    run_.fail(KNNWB_KERNELS_ERROR, "the fused tile's pairs do not fit its tile buffer");
    return false;
  }
  CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, select_done_[slot], 0));
  if (state_reset_ || !fused_overlap_wanted()) {
    CUDA_TRY(run_, cudaEventRecord(select_tail_, select_stream_));
    CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, select_tail_, 0));
    state_reset_ = false;
  }
  if (gemm_start_[slot])
    CUDA_TRY(run_, cudaEventRecord(gemm_start_[slot], gemm_stream_));
  bool wgmma = false;
  CUDA_TRY(run_, launch_fused_filter(state_, g, gemm_stream_, &wgmma));
  fused_wgmma_tiles_ += wgmma;
  if (gemm_end_[slot])
    CUDA_TRY(run_, cudaEventRecord(gemm_end_[slot], gemm_stream_));
  CUDA_TRY(run_, cudaEventRecord(gemm_done_[slot], gemm_stream_));
  fused_tiles_++;
  return true;
}

bool Worker::select_tile(int slot, const TileGeom &geom)
{
  CUDA_TRY(run_, cudaStreamWaitEvent(select_stream_, gemm_done_[slot], 0));
  if (select_start_[slot])
    CUDA_TRY(run_, cudaEventRecord(select_start_[slot], select_stream_));
  /* trace 2: a fresh tile's counters apart from the others' */
  SelectState state = state_;
  if (state.stats && geom.fresh)
    state.stats += KNNWB_SELECT_STATS;
  /* a fresh tile inside a fused measurement's window: bracketed, taken out of it (fused_decide) */
  const int fresh_mark =
      geom.fresh && probe_window_ >= 0 && probe_fresh_n_ < KNNWB_SELECT_PROBE_FRESH
          ? probe_fresh_n_++
          : -1;
  if (fresh_mark >= 0) {
    probe_fresh_window_[fresh_mark] = probe_window_;
    CUDA_TRY(run_, cudaEventRecord(probe_fresh_[2 * fresh_mark], select_stream_));
  }
  CUDA_TRY(run_, launch_tile_select(state, geom, select_stream_));
  if (fresh_mark >= 0) {
    CUDA_TRY(run_, cudaEventRecord(probe_fresh_[2 * fresh_mark + 1], select_stream_));
    /* The next tiles wait for it: a fresh selection running beside them slows them by the SMs
     * it takes (the fresh tiles' kernel fills them), and with that kernel fused tiles lost some
     * measurements they win. Alone, it leaves the windows timing the tiles alone. */
    CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, probe_fresh_[2 * fresh_mark + 1], 0));
  }
  if (select_end_[slot])
    CUDA_TRY(run_, cudaEventRecord(select_end_[slot], select_stream_));
  CUDA_TRY(run_, cudaEventRecord(select_done_[slot], select_stream_));
  return true;
}

/* Trace: adds the selection time of the (finished) tile in slot to its kind's sum. */
bool Worker::time_select(int slot)
{
  if (!select_end_[slot])
    return true;
  float ms = 0;
  CUDA_TRY(run_, cudaEventElapsedTime(&ms, select_start_[slot], select_end_[slot]));
  select_ms_[fresh_[slot]] += ms;
  select_tiles_[fresh_[slot]]++;
  if (gemm_end_[slot]) {
    CUDA_TRY(run_, cudaEventElapsedTime(&ms, gemm_start_[slot], gemm_end_[slot]));
    gemm_ms_ += ms;
  }
  return true;
}

/* The fields of a tile's geometry every schedule sets alike (rows and columns by global index). */
TileGeom Worker::tile_geom(int n_rows, int n_cols, size_t row0, size_t col0) const
{
  const KnnwbSelectJob *job = run_.job;
  TileGeom g = {};
  g.ld = (size_t)run_.plan.tile;
  g.half_tile = half_tiles_ ? 1 : 0;
  g.tile_scale = half_tiles_ ? ldexpf(1.0f, -kHalfTileExponent - 2 * screen_exponent_) : 1.0f;
  g.n_rows = n_rows;
  g.n_cols = n_cols;
  g.row_global0 = (int)row0;
  g.col_global0 = (int)col0;
  g.self = job->self ? 1 : 0;
  g.kind = job->score_kind;
  g.sqnorms = sqnorms_;
  g.invalid = invalid_;
  g.row_group = query_group_;
  g.col_group = reference_group_;
  g.seen = INT_MAX;
  return g;
}

bool Worker::issue_tile(TileRequest &request)
{
  const int s = slot();
  if (fused_wanted(request.geom)) {
    if (!fused_tile(s, request))
      return false;
  } else {
    if (!gemm_tile(s, request.q, request.n_q, request.r, request.n_r))
      return false;
    request.geom.tile = tiles_[s];
  }
  if (!select_tile(s, request.geom))
    return false;
  /* at most two tiles in flight: wait for the previous one, then report it */
  if (tile_counter_ >= 1) {
    const int previous = (int)((tile_counter_ - 1) % 2);
    const double waited = seconds_now();
    CUDA_TRY(run_, cudaEventSynchronize(select_done_[previous]));
    host_wait_s_ += seconds_now() - waited;
    if (counted_[previous])
      run_.tile_finished();
    if (!time_select(previous))
      return false;
  }
  counted_[s] = request.counted;
  fresh_[s] = request.geom.fresh != 0;
  tile_counter_++;
  return true;
}

/* Trace: the tile loop's GPU time, from loop_start_ (recorded when the loop began) to now. */
bool Worker::loop_time_end()
{
  if (!loop_start_)
    return true;
  float ms = 0;
  CUDA_TRY(run_, cudaEventRecord(loop_end_, select_stream_));
  CUDA_TRY(run_, cudaEventSynchronize(loop_end_));
  CUDA_TRY(run_, cudaEventElapsedTime(&ms, loop_start_, loop_end_));
  loop_ms_ = ms;
  return true;
}
bool Worker::drain()
{
  CUDA_TRY(run_, cudaStreamSynchronize(gemm_stream_));
  CUDA_TRY(run_, cudaStreamSynchronize(select_stream_));
  CUDA_TRY(run_, cudaStreamSynchronize(copy_stream_));
  if (ahead_.stream)
    CUDA_TRY(run_, cudaStreamSynchronize(ahead_.stream));
  return true;
}

/* After a schedule's last tile: everything done, the last tile counted and timed. */
bool Worker::finish_last_tile()
{
  if (!drain())
    return false;
  if (tile_counter_ >= 1) {
    const int last = (int)((tile_counter_ - 1) % 2);
    if (counted_[last])
      run_.tile_finished();
    counted_[last] = false;
    if (!time_select(last))
      return false;
  }
  return true;
}

} // namespace knnwb_cuda
