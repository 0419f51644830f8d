/*
 * An ordinary tile issued in row panels (KNNWB_CUDA_PANELS=N): the GEMM writes the tile's rows a
 * panel at a time, and the selection stream filters each panel as soon as its GEMM is done, then
 * merges once for the whole tile. The tile buffer and its layout are the ones of a whole tile, so
 * the merge reads an overflowed line from it as usual; the same pairs pass, and the lists are the
 * same bytes.
 *
 * Why: at small d the tile loop is bound by memory traffic, not arithmetic. On 1,533,876 x 128
 * Pearson rows (one H200) a tile's GEMM took 0.055 ms, most of it writing the 128 MiB half tile,
 * and the filter 0.057 ms reading it back at half the DRAM bandwidth. A panel of 1,024 or 2,048
 * rows (16 or 32 MiB) is still in the 50 MB L2 when its filter reads it.
 */
#include "select_worker.h"
#include "tile_scores.h"

namespace knnwb_cuda
{

/* Rows per panel for geom (a multiple of 8, so panels start 16-byte aligned), or 0: the whole
 * tile at once (panels off, a fresh tile's column stages, manhattan's own kernel, a fused tile). */
int Worker::panel_rows(const TileGeom &geom) const
{
  const int panels = tile_panels();
  if (panels <= 1 || geom.fresh || run_.job->score_kind == KNNWB_SCORE_L1 || fused_wanted(geom))
    return 0;
  const int rows = (geom.n_rows + panels - 1) / panels;
  const int rounded = (rows + 7) / 8 * 8;
  return rounded < geom.n_rows ? rounded : 0;
}

/*
 * A tile in panels of `rows` query rows, both streams issued panel by panel: the GEMM of panel k
 * into its rows of tiles_[slot] (after the filter of panel k - 2, so that the GEMM runs at most two
 * panels ahead and a panel is still in L2 when its filter reads it), then on the selection stream
 * the filter of panel k, and after the last one the merge (gemm_tile and select_tile for the rest).
 */
bool Worker::panel_tile(int slot, TileRequest &request, int rows)
{
  const KnnwbSelectPlan &p = run_.plan;
  TileGeom &geom = request.geom;
  geom.tile = tiles_[slot];
  CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, select_done_[slot], 0));
  if (serial_tiles()) {
    CUDA_TRY(run_, cudaEventRecord(select_tail_, select_stream_));
    CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, select_tail_, 0));
  }
  if (gemm_start_[slot])
    CUDA_TRY(run_, cudaEventRecord(gemm_start_[slot], gemm_stream_));
  const size_t row_bytes = (size_t)p.dpad * (gemm_precision() == GemmPrecision::kFp16 ? 2 : 4);
  const size_t tile_row_bytes = (size_t)p.tile * (half_tiles_ ? 2 : 4);
  for (int k = 0, i0 = 0; i0 < geom.n_rows; k++, i0 += rows) {
    const int n = rows < geom.n_rows - i0 ? rows : geom.n_rows - i0;
    if (k >= 2)
      CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, panel_filtered_[slot][k - 2], 0));
    CUBLAS_TRY(run_, tile_scores_gemm(blas_, gemm_precision(),
                                      static_cast<const char *>(request.q) + (size_t)i0 * row_bytes,
                                      n, request.r, request.n_r, p.dpad, gemm_alpha(),
                                      reinterpret_cast<char *>(tiles_[slot]) + i0 * tile_row_bytes,
                                      p.tile, half_tiles_));
    CUDA_TRY(run_, cudaEventRecord(panel_done_[slot][k], gemm_stream_));
    CUDA_TRY(run_, cudaStreamWaitEvent(select_stream_, panel_done_[slot][k], 0));
    if (k == 0) {
      if (select_start_[slot])
        CUDA_TRY(run_, cudaEventRecord(select_start_[slot], select_stream_));
      CUDA_TRY(run_, launch_select_reset(state_, select_stream_));
    }
    /* tile-local rows, so that the rows queued for the merge are the whole tile's lines */
    TileGeom panel = geom;
    panel.row_begin = i0;
    panel.n_rows = i0 + n;
    launch_filter(state_, panel, select_stream_);
    CUDA_TRY(run_, cudaGetLastError());
    CUDA_TRY(run_, cudaEventRecord(panel_filtered_[slot][k], select_stream_));
  }
  if (gemm_end_[slot])
    CUDA_TRY(run_, cudaEventRecord(gemm_end_[slot], gemm_stream_));
  CUDA_TRY(run_, cudaEventRecord(gemm_done_[slot], gemm_stream_));
  CUDA_TRY(run_, launch_select_merge(state_, geom, select_stream_));
  if (select_end_[slot])
    CUDA_TRY(run_, cudaEventRecord(select_end_[slot], select_stream_));
  CUDA_TRY(run_, cudaEventRecord(select_done_[slot], select_stream_));
  return true;
}

} // namespace knnwb_cuda
