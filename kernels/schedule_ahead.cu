/*
 * One GPU's symmetric schedule walks the columns c in order, diagonal tile (c, c) first. That tile
 * starts its rows from +inf thresholds, so its selection (column stages or tile_fresh.cu's kernel)
 * takes several ordinary tiles' time, and the column's next tiles, which read the thresholds it
 * sets, waited for it on the two-tile pipeline (d = 295 on an H200: the GEMM stream busy 1.97 s of
 * a 2.28 s loop). Under plan.diagonal_ahead the worker computes the next column's diagonal tile on
 * a stream of its own while this column's tiles run, and the next column only waits for it to be
 * done. Measured (one H200, alternating): d = 295 loop 2.234-2.286 s against 2.268-2.301 s (the
 * diagonals' selection off the selection stream, the GEMMs 0.04-0.07 s slower beside them);
 * real-like d = 128 loop 1.148-1.163 s against 1.166-1.186 s (docs/performance-gpu.md).
 *
 * Why it is safe: diagonal tile (c + 1, c + 1) reads and writes the selection state of block c +
 * 1's rows only, and no tile of column c, (b, c) for b <= c, touches them (their rows are blocks b
 * and c). Its selection has a merge list and scratch of its own (the plan's AHEAD buffers), its
 * GEMM a cuBLASLt workspace of its own, its scores a tile buffer of their own. Only full diagonal
 * tiles go ahead, with cuBLASLt's GEMM (which takes a stream per call); the last, shorter one and
 * any run without that GEMM take their diagonals in line, as before.
 *
 * While the fused tiles' measurement runs (fused_probe), nothing goes ahead, and one in flight is
 * waited for at its start: the measurement times the tiles alone, as the in-line diagonals inside
 * it are taken out of its windows.
 */
#include "select_worker.h"

namespace knnwb_cuda
{

/* The stream, events and state of the diagonal ahead, when the plan gave it its buffers. */
bool Worker::ahead_setup(void *const buffer[KNNWB_BUFFER_KINDS])
{
  if (!run_.plan.diagonal_ahead || !buffer[KNNWB_BUFFER_AHEAD_TILE])
    return true;
  ahead_.tile = (float *)buffer[KNNWB_BUFFER_AHEAD_TILE];
  ahead_.workspace = buffer[KNNWB_BUFFER_AHEAD_WORKSPACE];
  ahead_.state = state_;
  ahead_.state.merge_list = (int *)buffer[KNNWB_BUFFER_AHEAD_MERGE_LIST];
  ahead_.state.merge_count = (int *)buffer[KNNWB_BUFFER_AHEAD_MERGE_COUNT];
  ahead_.state.scratch_key = (uint32_t *)buffer[KNNWB_BUFFER_AHEAD_SCRATCH_KEY];
  ahead_.state.scratch_index = (int *)buffer[KNNWB_BUFFER_AHEAD_SCRATCH_INDEX];
  ahead_.state.out_key = (uint32_t *)buffer[KNNWB_BUFFER_AHEAD_OUT_KEY];
  ahead_.state.out_index = (int *)buffer[KNNWB_BUFFER_AHEAD_OUT_INDEX];
  /* the lowest priority, below the GEMM stream's (setup_streams): its blocks take the SMs the
   * tiles leave, at the end of each tile's kernels and while the GEMM stream waits */
  CUDA_TRY(run_, cudaStreamCreateWithFlags(&ahead_.stream, cudaStreamNonBlocking));
  const unsigned timing = trace_enabled() ? cudaEventDefault : cudaEventDisableTiming;
  CUDA_TRY(run_, cudaEventCreateWithFlags(&ahead_.done, timing));
  CUDA_TRY(run_, cudaEventCreateWithFlags(&ahead_.after, cudaEventDisableTiming));
  if (trace_enabled())
    CUDA_TRY(run_, cudaEventCreate(&ahead_.start));
  return true;
}

/*
 * Issues diagonal tile (c, c) on the ahead stream, when it may go ahead: the plan's buffers, a
 * full block, cuBLASLt's GEMM, no other one pending, no measurement of the fused tiles running,
 * tiles not serialised for a measurement (KNNWB_CUDA_SERIAL_TILES). Otherwise nothing: the column
 * takes its diagonal in line.
 */
bool Worker::ahead_issue(long c)
{
  const KnnwbSelectPlan &p = run_.plan;
  const size_t n = run_.job->n_query, T = (size_t)p.tile, q0 = (size_t)c * T;
  if (!ahead_.stream || !lt_gemm_.ready || serial_tiles() || probe_window_ >= 0 ||
      ahead_.block >= 0 || q0 + T > n || run_.cancelled())
    return true;
  if (ahead_.first) {
    /* after the rows' uploads and order, and the state's reset */
    for (cudaStream_t s : {copy_stream_, gemm_stream_, select_stream_}) {
      CUDA_TRY(run_, cudaEventRecord(ahead_.after, s));
      CUDA_TRY(run_, cudaStreamWaitEvent(ahead_.stream, ahead_.after, 0));
    }
    ahead_.first = false;
  }
  TileGeom g = tile_geom((int)T, (int)T, q0, q0);
  g.row_state0 = (int)q0;
  g.col_state0 = (int)q0;
  g.do_cols = 0;
  g.fresh = 1;
  g.seen = 0;
  g.tile = ahead_.tile;
  const char *rows = query_data_ + q0 * (size_t)p.row_bytes;
  if (ahead_.start)
    CUDA_TRY(run_, cudaEventRecord(ahead_.start, ahead_.stream));
  /* one that cuBLASLt refuses (it checks the operands before any launch) leaves this diagonal
   * and the later tiles to the in-line path, as gemm_tile does */
  if (lt_gemm_run(lt_gemm_, rows, rows, gemm_alpha(), ahead_.tile, ahead_.stream,
                  ahead_.workspace) != CUBLAS_STATUS_SUCCESS) {
    lt_gemm_.ready = false;
    return true;
  }
  SelectState state = ahead_.state;
  if (state.stats)
    state.stats += KNNWB_SELECT_STATS; /* a fresh tile's counters */
  CUDA_TRY(run_, launch_tile_select(state, g, ahead_.stream));
  CUDA_TRY(run_, cudaEventRecord(ahead_.done, ahead_.stream));
  ahead_.block = c;
  return true;
}

/* Column c begins: its diagonal, if it went ahead, is waited for by both streams (*taken), and
 * counted. Else *taken is false and the column issues it in line. */
bool Worker::ahead_take(long c, bool *taken)
{
  *taken = c >= 0 && ahead_.block == c;
  if (!*taken)
    return true;
  if (!ahead_quiet())
    return false;
  ahead_.block = -1;
  if (ahead_.start) { /* trace: the host waits; the tiles wait for it anyway */
    float ms = 0;
    CUDA_TRY(run_, cudaEventSynchronize(ahead_.done));
    CUDA_TRY(run_, cudaEventElapsedTime(&ms, ahead_.start, ahead_.done));
    ahead_.ms += ms;
  }
  ahead_.taken++;
  run_.tile_finished();
  return true;
}

/* Both streams wait for a diagonal in flight (a measurement of the fused tiles begins). */
bool Worker::ahead_quiet()
{
  if (ahead_.block < 0)
    return true;
  CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, ahead_.done, 0));
  CUDA_TRY(run_, cudaStreamWaitEvent(select_stream_, ahead_.done, 0));
  return true;
}

/* After its work (release() synchronised the stream): the handles; the trace's counts stay. */
void Worker::ahead_release()
{
  for (cudaEvent_t e : {ahead_.done, ahead_.after, ahead_.start})
    if (e)
      cudaEventDestroy(e);
  if (ahead_.stream)
    cudaStreamDestroy(ahead_.stream);
  ahead_.done = ahead_.after = ahead_.start = nullptr;
  ahead_.stream = nullptr;
}

} // namespace knnwb_cuda
