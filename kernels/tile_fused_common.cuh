/*
 * What the two fused tiles (tile_fused.cu: mma.sync, any GPU from sm_80; tile_fused_wgmma.cu:
 * wgmma, Hopper only) share: the asynchronous copies of their operands to shared memory, and once
 * their products are tested, the exact passes over a block's products copied to shared memory as
 * cuBLAS's half tile would hold them, with the keeping of a line's passing pairs. Blocks are 128 x
 * 128 products in both. Included by those files only (internal linkage in each).
 */
#pragma once

#include "tile_common.cuh"

#include <cuda_fp16.h>
#include <string.h>

namespace knnwb_cuda
{
namespace
{

/* a fused block's products: 128 rows x 128 columns */
constexpr int kFusedBlock = kFusedPairBlock;
/* the epilogue's copy of a block's products in shared memory: rows of 136 halves (272 bytes: the
 * fragments' stores and the row passes' reads hit distinct banks), then the lines' flags and
 * thresholds (BlockLines) */
constexpr int kCopyPitch = kFusedBlock + 8;
constexpr int kFlagsOffset = kFusedBlock * kCopyPitch * 2;
constexpr int kThresholdsOffset = kFlagsOffset + 2 * kFusedBlock;
constexpr int kCopyBytes = kThresholdsOffset + 2 * kFusedBlock * (int)sizeof(float);
/* then, during the exact passes, the block's kept pairs (BlockPairs) */
constexpr int kPairCountOffset = (kCopyBytes + 15) / 16 * 16;

__device__ __forceinline__ uint32_t shared_address(const void *p)
{
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, zero-filled when !valid (then nothing is read). */
__device__ __forceinline__ void copy_async_16(uint32_t dst, const void *src, bool valid)
{
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void copy_async_commit()
{
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int kPending> __device__ __forceinline__ void copy_async_wait()
{
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

template <int kKind> __device__ __forceinline__ float magnitude(float v)
{
  return kKind == KNNWB_SCORE_ABS_DOT ? fabsf(v) : v;
}

/*
 * A fused block's lines in shared memory, after the copy of its products: whether some product of
 * row i / column j passes (flags), and the threshold it passes, as the kernel read it (a merge may
 * have lowered it since: more pairs pass, never fewer; the selection stream tests them again).
 */
struct BlockLines {
  unsigned char *row_flag, *col_flag;
  float *row_thr, *col_thr;
};

__device__ __forceinline__ BlockLines block_lines_at(unsigned char *smem)
{
  BlockLines b;
  b.row_flag = smem + kFlagsOffset;
  b.col_flag = b.row_flag + kFusedBlock;
  b.row_thr = reinterpret_cast<float *>(smem + kThresholdsOffset);
  b.col_thr = b.row_thr + kFusedBlock;
  return b;
}

/*
 * A fused block's kept pairs in shared memory, after the copy of its products: the count, the
 * block's start in the tile's pool (flush_pairs), then the pairs themselves.
 */
struct BlockPairs {
  int *count; /* [0] pairs kept (may pass room), [1] their start in the pool */
  uint2 *pairs;
  int room;
};

__device__ __forceinline__ BlockPairs block_pairs_at(unsigned char *smem, int smem_bytes)
{
  BlockPairs b;
  b.count = reinterpret_cast<int *>(smem + kPairCountOffset);
  b.pairs = reinterpret_cast<uint2 *>(smem + kPairCountOffset + 16);
  b.room = (smem_bytes - kPairCountOffset - 16) / (int)sizeof(uint2);
  return b;
}

/* The tile line of a kept pair of block (blockIdx.x, blockIdx.y), as TileGeom.lost indexes it. */
__device__ __forceinline__ size_t kept_pair_line(const TileGeom &g, uint32_t meta)
{
  return fused_pair_column(meta)
             ? g.ld + (size_t)blockIdx.x * kFusedPairBlock + (size_t)fused_pair_line(meta)
             : (size_t)blockIdx.y * kFusedPairBlock + (size_t)fused_pair_line(meta);
}

/*
 * Keeps the pairs of a line that pass (n passes of this lane, bits in `pass` for its slots u =
 * 0..3, the other end of slot u at offset other(u) in the block) in the block's shared memory
 * (meta: the line's flag and offset in the block): one shared-memory atomic per warp and line, so
 * that no warp waits for a round trip to global memory. Pairs past the block's room are dropped
 * and their line is marked lost. Called by the whole warp.
 */
template <typename Other>
__device__ __forceinline__ void keep_line(const TileGeom &g, const BlockPairs &kept, uint32_t meta,
                                          uint32_t pass, const float (&score)[4], Other other)
{
  const int lane = threadIdx.x & 31;
  const int n = __popc(pass);
  const int incl = warp_inclusive_sum(n);
  const int total = __shfl_sync(kFullMask, incl, 31);
  if (total == 0)
    return;
  int base = 0;
  if (lane == 31)
    base = atomicAdd(kept.count, total);
  base = __shfl_sync(kFullMask, base, 31);
  int pos = base + incl - n;
  for (int u = 0; u < 4; u++)
    if (pass & (1u << u)) {
      if (pos < kept.room)
        kept.pairs[pos] = make_uint2(meta | (uint32_t)other(u), __float_as_uint(score[u]));
      pos++;
    }
  if (lane == 31 && base + total > kept.room)
    g.lost[kept_pair_line(g, meta)] = 1;
}

/*
 * After the exact passes, every thread of the block: its kept pairs from shared memory to the
 * tile's pool (TileGeom.pairs) with one global atomic for the block, and the block's start and
 * count to pair_index; pairs the pool has no room for mark their lines lost.
 */
__device__ __forceinline__ void flush_pairs(const TileGeom &g, const BlockPairs &kept)
{
  __syncthreads();
  const int n = min(kept.count[0], kept.room);
  if (threadIdx.x == 0)
    kept.count[1] = n > 0 ? atomicAdd(&g.pair_index[0], n) : 0;
  __syncthreads();
  const int start = kept.count[1];
  const int fit = max(0, min(n, g.pair_room - start));
  for (int t = threadIdx.x; t < n; t += blockDim.x) {
    const uint2 pair = kept.pairs[t];
    if (t < fit)
      g.pairs[start + t] = pair;
    else
      g.lost[kept_pair_line(g, pair.x)] = 1;
  }
  if (threadIdx.x == 0) {
    const int b = blockIdx.y * gridDim.x + blockIdx.x;
    g.pair_index[1 + 2 * b] = start;
    g.pair_index[2 + 2 * b] = fit;
  }
}

/*
 * The exact passes of a fused block over its products in shared memory (copy: 128 x 128 halves,
 * pitch kCopyPitch, the values cuBLAS's half tile would hold): warps take the flagged rows and
 * columns in turn (kEveryWarp), a lane 4 products of each. Pairs of one row beating its threshold
 * (lines: flags and thresholds) are kept among the block's pairs (keep_line; invalid references
 * and the self pair excluded), likewise for columns (do_cols), in the block's shared memory (kept;
 * flush_pairs then moves them to the tile's pool).
 */
template <int kKind, int kThreads>
__device__ __noinline__ void exact_passes(const TileGeom &g, const __half *copy,
                                          const BlockLines &lines, int m0, int n0,
                                          const BlockPairs &kept)
{
  const unsigned char *row_flag = lines.row_flag, *col_flag = lines.col_flag;
  static_assert(kThreads == 128 || kThreads == 256, "4 or 8 warps share the lines");
  /* warp w takes the lines w, w + warps, ... of each group of 32 */
  constexpr uint32_t kEveryWarp = kThreads == 256 ? 0x01010101u : 0x11111111u;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int base = 0; base < kFusedBlock; base += 32) {
    uint32_t rows = __ballot_sync(kFullMask, row_flag[base + lane] != 0) & (kEveryWarp << warp);
    for (; rows; rows &= rows - 1) {
      const int il = base + __ffs(rows) - 1;
      const int i = m0 + il;
      const float thr = lines.row_thr[il];
      float score[4];
      uint32_t pass = 0;
      /* one 8-byte read a lane: a warp reads the row's 256 bytes at once */
      const uint2 raw = *reinterpret_cast<const uint2 *>(copy + il * kCopyPitch + lane * 4);
      __half four[4];
      memcpy(four, &raw, sizeof four);
      for (int u = 0; u < 4; u++) {
        const int j = n0 + lane * 4 + u;
        const int cand = g.col_global0 + j;
        score[u] = 1.0f - magnitude<kKind>(__half2float(four[u]) * g.tile_scale);
        const bool ok = j < g.n_cols && score[u] < thr && !(g.invalid && g.invalid[cand]) &&
                        !(g.self && cand == g.row_global0 + i);
        pass |= (uint32_t)ok << u;
      }
      keep_line(g, kept, fused_pair_meta(false, il), pass, score,
                [&](int u) { return lane * 4 + u; });
    }
  }
  if (!g.do_cols)
    return;
  for (int base = 0; base < kFusedBlock; base += 32) {
    uint32_t cols = __ballot_sync(kFullMask, col_flag[base + lane] != 0) & (kEveryWarp << warp);
    for (; cols; cols &= cols - 1) {
      const int jl = base + __ffs(cols) - 1;
      const float thr = lines.col_thr[jl];
      float score[4];
      uint32_t pass = 0;
      for (int u = 0; u < 4; u++) {
        const int i = m0 + u * 32 + lane;
        const int cand = g.row_global0 + i;
        score[u] = 1.0f - magnitude<kKind>(__half2float(copy[(u * 32 + lane) * kCopyPitch + jl]) *
                                           g.tile_scale);
        const bool ok = i < g.n_rows && score[u] < thr && !(g.invalid && g.invalid[cand]);
        pass |= (uint32_t)ok << u;
      }
      keep_line(g, kept, fused_pair_meta(true, jl), pass, score,
                [&](int u) { return u * 32 + lane; });
    }
  }
}

} // namespace
} // namespace knnwb_cuda
