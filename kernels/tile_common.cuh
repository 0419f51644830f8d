/*
 * What the tile filter (tile_filter.cu) and the per-row merge (tile_select.cu) share: the flag
 * that marks column entries of the merge list, the score of a product, and the read of one tile
 * element. Included by those two files only (internal linkage in each).
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

/* Element at of a tile as q.r (half tiles: times their exact power-of-two scale). */
__device__ __forceinline__ float tile_value(const void *tile, bool half_tile, float scale,
                                            size_t at)
{
  if (half_tile)
    return __half2float(__ldg(static_cast<const __half *>(tile) + at)) * scale;
  return __ldg(static_cast<const float *>(tile) + at);
}

} // namespace
} // namespace knnwb_cuda
