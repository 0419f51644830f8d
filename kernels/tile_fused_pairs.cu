/*
 * A fused tile's passing pairs into the selection state, on the selection stream.
 *
 * The fused kernels (tile_fused.cu, tile_fused_wgmma.cu) keep the pairs that pass among their
 * block's pairs (TileGeom.pairs) instead of appending them to the rows' candidate buffers: the
 * buffers, counts and merge queue belong to the selection stream, which may still be merging the
 * previous tile, so a fused tile that touched them would have to wait for that merge (measured on
 * the real-like matrix: 0.29 ms of fused kernel and 0.44 ms of merge a tile, one after the other).
 * Kept pairs need only a shared-memory atomic a warp and line, and the kernel reads nothing of the
 * state but thresholds, which a merge only ever lowers: a fused tile that reads one before the
 * merge lowered it lets more pairs through, never fewer. launch_fused_pairs then appends the pairs
 * that still beat their row's threshold, as the filter kernel appends a tile's (tile_filter.cu),
 * and the merge (tile_select.cu) of a row that overflowed its buffer takes the tile's pairs of its
 * line from the blocks' pairs, or recomputes a lost line from the rows (it knows one by its flag).
 */
#include "tile_common.cuh"

#include <limits.h>

namespace knnwb_cuda
{
namespace
{

constexpr int kPairThreads = 256;

/*
 * Grid-stride over the blocks' pairs (a warp a block) and then over the tile's lines (a thread a
 * line). A pair of a lost line is skipped, and the line is queued for the merge, which recomputes
 * it whole. (No pair of it is appended, so nothing else queues it.)
 */
__global__ void __launch_bounds__(kPairThreads)
    fused_pairs_kernel(const __grid_constant__ SelectState st, const __grid_constant__ TileGeom g)
{
  const int blocks_x = (g.n_cols + kFusedPairBlock - 1) / kFusedPairBlock;
  const int blocks = blocks_x * ((g.n_rows + kFusedPairBlock - 1) / kFusedPairBlock);
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * (kPairThreads / 32);
  for (int b = blockIdx.x * (kPairThreads / 32) + (threadIdx.x >> 5); b < blocks; b += warps) {
    const int n = g.pair_index[2 + 2 * b];
    if (n == 0)
      continue;
    const int m0 = b / blocks_x * kFusedPairBlock, n0 = b % blocks_x * kFusedPairBlock;
    const uint2 *kept = g.pairs + g.pair_index[1 + 2 * b];
    for (int t = lane; t < n; t += 32) {
      const uint2 pair = kept[t];
      const bool column = fused_pair_column(pair.x);
      const int line = (column ? n0 : m0) + fused_pair_line(pair.x);
      const int other = (column ? m0 : n0) + fused_pair_other(pair.x);
      if (g.lost[column ? g.ld + (size_t)line : (size_t)line])
        continue;
      const int row = column ? g.col_state0 + line : g.row_state0 + line;
      const float score = __uint_as_float(pair.y);
      if (!(score < st.thr[row]))
        continue;
      const int pos = reserve_candidates(st, row, 1, column ? (int)(kColumnFlag | line) : line);
      if (pos < st.cap) {
        st.cand_score[(size_t)row * st.cap + pos] = score;
        st.cand_index[(size_t)row * st.cap + pos] =
            column ? g.row_global0 + other : g.col_global0 + other;
      }
    }
  }
  const int lines = g.n_rows + (g.do_cols ? g.n_cols : 0);
  for (int t = blockIdx.x * kPairThreads + threadIdx.x; t < lines; t += gridDim.x * kPairThreads) {
    const bool column = t >= g.n_rows;
    const int line = column ? t - g.n_rows : t;
    if (!g.lost[column ? g.ld + (size_t)line : (size_t)line])
      continue;
    st.merge_list[atomicAdd(st.merge_count, 1)] = column ? (int)(kColumnFlag | line) : line;
  }
}

} // namespace

/* Read at every tile (a getenv, no cache), as KNNWB_CUDA_FUSED, so that a test can compare the
 * settings in one process. */
int fused_pair_room(void)
{
  return knnwb_select_plan_env("KNNWB_CUDA_FUSED_ROOM", INT_MAX, 1, INT_MAX);
}

bool fused_overlap_wanted(void)
{
  return knnwb_select_plan_env("KNNWB_CUDA_FUSED_OVERLAP", 1, 0, 1) == 1;
}

cudaError_t launch_fused_pairs(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  cudaError_t err = cudaMemsetAsync(state.merge_count, 0, 2 * sizeof(int), stream);
  if (err != cudaSuccess)
    return err;
  fused_pairs_kernel<<<state.merge_blocks, kPairThreads, 0, stream>>>(state, geom);
  return cudaGetLastError();
}

} // namespace knnwb_cuda
