/*
 * What the tile filters (tile_filter.cu, tile_fused.cu) and the per-row merge (tile_select.cu)
 * share: the flag that marks column entries of the
 * merge list, the score of a product and its sortable key, the read of one tile element, and the
 * appending of candidates. Included by those files only (internal
 * linkage in each).
 */
#pragma once

#include "select_internal.h"

#include <knnwb_kernels.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace knnwb_cuda
{
namespace
{

constexpr unsigned kFullMask = 0xffffffffu;
/* marks a column entry (a row of the tile seen from a column) in the merge list */
constexpr uint32_t kColumnFlag = 0x80000000u;

__device__ __forceinline__ float score_of(int kind, float v, float candidate_sqnorm)
{
  switch (kind) {
  case KNNWB_SCORE_DOT:
    return 1.0f - v;
  case KNNWB_SCORE_ABS_DOT:
    return 1.0f - fabsf(v);
  case KNNWB_SCORE_L2:
    return candidate_sqnorm - 2.0f * v;
  default:
    return v;
  }
}

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

/* A fused tile's kept pair (TileGeom.pairs): .x kColumnFlag for a column line, the line's offset
 * in its kFusedPairBlock-square block times kFusedPairBlock, plus the other end's offset; .y the
 * score's bits. */

__device__ __forceinline__ uint32_t fused_pair_meta(bool column, int line_offset)
{
  return (column ? kColumnFlag : 0u) | (uint32_t)line_offset * kFusedPairBlock;
}

__device__ __forceinline__ bool fused_pair_column(uint32_t meta)
{
  return (meta & kColumnFlag) != 0;
}

__device__ __forceinline__ int fused_pair_line(uint32_t meta)
{
  return (int)((meta & ~kColumnFlag) / kFusedPairBlock);
}

__device__ __forceinline__ int fused_pair_other(uint32_t meta)
{
  return (int)(meta % kFusedPairBlock);
}

/* Unsigned keys with the order of the floats (negative values flipped). */
__device__ __forceinline__ uint32_t float_key(float f)
{
  uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_float(uint32_t k)
{
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* Warp-aggregated histogram increment: equal digits of a warp add once (skewed keys are common).
 * Every lane of the warp calls it. */
__device__ __forceinline__ void histogram_add(unsigned *hist, bool active, unsigned digit)
{
  unsigned act = __ballot_sync(kFullMask, active);
  if (active) {
    unsigned peers = __match_any_sync(act, digit);
    if ((int)(threadIdx.x & 31) == __ffs(peers) - 1)
      atomicAdd(&hist[digit], __popc(peers));
  }
}

/* Element at of a tile as q.r (half tiles: times their exact power-of-two scale). */
__device__ __forceinline__ float tile_value(const void *tile, bool half_tile, float scale,
                                            size_t at)
{
  if (half_tile)
    return __half2float(__ldg(static_cast<const __half *>(tile) + at)) * scale;
  return __ldg(static_cast<const float *>(tile) + at);
}

/* Inclusive prefix sum of v over the lanes of a warp; every lane of the warp calls it. */
__device__ __forceinline__ int warp_inclusive_sum(int v)
{
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int t = __shfl_up_sync(kFullMask, v, off);
    if (lane >= off)
      v += t;
  }
  return v;
}

/* A radix select's shared state, for a block of 256 threads (one a bin). */
struct RadixShared {
  unsigned hist[256];
  unsigned warp_total[8];
  unsigned digit;
  /* in: the rank wanted (1-based); out: how many keys equal to the pivot belong to the smallest */
  unsigned kprime;
  unsigned equal_total; /* out: how many keys equal the pivot */
};

/*
 * The key of the rs.kprime-th smallest of a block's keys, a digit of 8 bits per pass (four passes),
 * for the tile merge (tile_select.cu) and the fresh tile's kernel (tile_fresh.cu). visit(prefix,
 * high_mask, shift) adds every key k with (k & high_mask) == prefix to rs.hist at digit
 * (k >> shift) & 0xff (histogram_add). Every thread of a block of 256 calls it, with rs.kprime set
 * and visible to all; on return rs.kprime and rs.equal_total are as RadixShared says.
 */
template <typename Visit>
__device__ __forceinline__ uint32_t radix_pivot(RadixShared &rs, Visit visit)
{
  uint32_t prefix = 0;
  for (int pass = 0; pass < 4; pass++) {
    const int shift = 24 - 8 * pass;
    const uint32_t high_mask = pass == 0 ? 0u : (0xffffffffu << (32 - 8 * pass));
    rs.hist[threadIdx.x] = 0;
    __syncthreads();
    visit(prefix, high_mask, shift);
    __syncthreads();
    /* block scan of the 256 bins; the bin holding the kprime-th key is the next digit */
    const unsigned h = rs.hist[threadIdx.x];
    const unsigned incl = (unsigned)warp_inclusive_sum((int)h);
    if ((threadIdx.x & 31) == 31)
      rs.warp_total[threadIdx.x >> 5] = incl;
    __syncthreads();
    unsigned before = incl - h;
    for (int w = 0; w < (int)(threadIdx.x >> 5); w++)
      before += rs.warp_total[w];
    const unsigned want = rs.kprime;
    __syncthreads();
    if (before < want && want <= before + h) {
      rs.digit = threadIdx.x;
      rs.kprime = want - before;
      rs.equal_total = h;
    }
    __syncthreads();
    prefix |= rs.digit << shift;
  }
  return prefix;
}

/*
 * Reserves n slots (n > 0) in state row `row`'s candidate buffer with one atomic and returns the
 * first (slots at cap and beyond are counted but not stored: the row overflowed), queues `entry`
 * (tile-local line, kColumnFlag for a column) for the merge when the count crosses lazy_limit, and
 * counts the candidates for the trace.
 */
__device__ __forceinline__ int reserve_candidates(const SelectState &st, int row, int n, int entry)
{
  const int base = atomicAdd(&st.count[row], n);
  if (base <= st.lazy_limit && base + n > st.lazy_limit) {
    const int slot = atomicAdd(st.merge_count, 1);
    st.merge_list[slot] = entry;
  }
  if (st.stats)
    atomicAdd(&st.stats[0], (unsigned long long)n);
  return base;
}

} // namespace
} // namespace knnwb_cuda
