/*
 * What the tile filters of a finished tile (tile_filter.cu, tile_filter_half.cu) share: the score
 * of a product with the kind fixed at compile time, the read of one product, and the exact row and
 * column passes that a fast test sends rows and columns to. Included by those files only
 * (internal linkage in each).
 */
#pragma once

#include "tile_common.cuh"

#include <math.h>

namespace knnwb_cuda
{
namespace
{

/* The score of product v, as score_of, with the kind fixed at compile time. */
template <int kKind> __device__ __forceinline__ float kind_score(float v, float sq)
{
  if (kKind == KNNWB_SCORE_DOT)
    return 1.0f - v;
  if (kKind == KNNWB_SCORE_ABS_DOT)
    return 1.0f - fabsf(v);
  if (kKind == KNNWB_SCORE_L2)
    return sq - 2.0f * v;
  return v;
}

/* Product (i, j) of the tile, or NaN outside it (NaN fails every comparison). */
__device__ __forceinline__ float tile_product(const TileGeom &g, int i, int j)
{
  return i < g.n_rows && j < g.n_cols
             ? tile_value(g.tile, g.half_tile, g.tile_scale, (size_t)i * g.ld + j)
             : __int_as_float(0x7fc00000);
}

/*
 * The exact row pass of filter_kernel for the rows i0 + r of the block with bit r of warp_rows set
 * (the same mask in every lane): each lane's kCols columns against the row's threshold, with
 * invalid columns, group masking and the self pair; the warp's passing pairs of a row get
 * contiguous slots from one atomic. Reads the products again (cache hits: the fast test just read
 * them), so that the common path holds no code or registers for this.
 */
template <int kCols, int kKind, bool kGroups>
__device__ __noinline__ void filter_rows_exact(const SelectState &st, const TileGeom &g,
                                               unsigned warp_rows, int i0, int j0)
{
  const int lane = threadIdx.x & 31;
  bool col_ok[kCols];
  int col_grp[kCols];
  float col_sq[kCols];
#pragma unroll
  for (int u = 0; u < kCols; u++) {
    const int cand = g.col_global0 + j0 + u;
    const bool in = j0 + u < g.n_cols;
    col_ok[u] = in && !(g.invalid && g.invalid[cand]);
    col_grp[u] = (kGroups && in) ? g.col_group[cand] : -1;
    col_sq[u] = (kKind == KNNWB_SCORE_L2 && in) ? g.sqnorms[cand] : 0.0f;
  }
  for (; warp_rows; warp_rows &= warp_rows - 1) {
    const int i = i0 + __ffs(warp_rows) - 1;
    const float thr = st.thr[g.row_state0 + i];
    const int row_grp = kGroups ? g.row_group[g.row_global0 + i] : -2;
    float s[kCols];
    unsigned m = 0;
#pragma unroll
    for (int u = 0; u < kCols; u++) {
      s[u] = kind_score<kKind>(tile_product(g, i, j0 + u), col_sq[u]);
      const bool pass = col_ok[u] && s[u] < thr && (!kGroups || row_grp != col_grp[u]) &&
                        !(g.self && g.col_global0 + j0 + u == g.row_global0 + i);
      m |= (unsigned)pass << u;
    }
    if (!__any_sync(kFullMask, m))
      continue;
    const int n = __popc(m);
    const int incl = warp_inclusive_sum(n);
    const int total = __shfl_sync(kFullMask, incl, 31);
    const int row = g.row_state0 + i;
    int base = 0;
    if (lane == 31)
      base = reserve_candidates(st, row, total, i);
    base = __shfl_sync(kFullMask, base, 31);
    int pos = base + incl - n;
#pragma unroll
    for (int u = 0; u < kCols; u++) {
      if (m & (1u << u)) {
        if (pos < st.cap) {
          st.cand_score[(size_t)row * st.cap + pos] = s[u];
          st.cand_index[(size_t)row * st.cap + pos] = g.col_global0 + j0 + u;
        }
        pos++;
      }
    }
  }
}

/*
 * The exact column pass of filter_kernel (self jobs, off-diagonal tiles) for the thread's columns
 * j0 + u with bit u of col_hits set: the pair (i, j) offers i to row j; one atomic per column.
 */
template <int kRows, int kKind, bool kGroups>
__device__ __noinline__ void filter_cols_exact(const SelectState &st, const TileGeom &g,
                                               unsigned col_hits, int i0, int j0)
{
  for (; col_hits; col_hits &= col_hits - 1) {
    const int j = j0 + __ffs(col_hits) - 1;
    const int row = g.col_state0 + j;
    const float thr = st.thr[row];
    const int col_grp = kGroups ? g.col_group[g.col_global0 + j] : -1;
    unsigned ok = 0;
    for (int r = 0; r < kRows; r++) {
      const int i = i0 + r;
      const int rg = g.row_global0 + i;
      const float sq = (kKind == KNNWB_SCORE_L2 && i < g.n_rows) ? g.sqnorms[rg] : 0.0f;
      const bool pass = kind_score<kKind>(tile_product(g, i, j), sq) < thr &&
                        !(g.invalid && g.invalid[rg]) && (!kGroups || g.row_group[rg] != col_grp);
      ok |= (unsigned)pass << r;
    }
    if (ok == 0)
      continue;
    int pos = reserve_candidates(st, row, __popc(ok), (int)(kColumnFlag | (uint32_t)j));
    for (; ok; ok &= ok - 1) {
      const int i = i0 + __ffs(ok) - 1;
      const float sq = kKind == KNNWB_SCORE_L2 ? g.sqnorms[g.row_global0 + i] : 0.0f;
      if (pos < st.cap) {
        st.cand_score[(size_t)row * st.cap + pos] = kind_score<kKind>(tile_product(g, i, j), sq);
        st.cand_index[(size_t)row * st.cap + pos] = g.row_global0 + i;
      }
      pos++;
    }
  }
}

} // namespace
} // namespace knnwb_cuda
