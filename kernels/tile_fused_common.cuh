/*
 * What the two fused tiles (tile_fused.cu: mma.sync, any GPU from sm_80; tile_fused_wgmma.cu:
 * wgmma, Hopper only) share: the asynchronous copies of their operands to shared memory, and once
 * their products are tested, the exact passes over a block's products copied to shared memory as
 * cuBLAS's half tile would hold them, with the appending of a line's candidates. Blocks are 128 x 128 products in both. Included by those files only (internal
 * linkage in each).
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
constexpr int kFusedBlock = 128;
/* The epilogue's shared memory (it reuses the stages): the copy of a block's products, rows of 136
 * halves (272 bytes: the fragments' stores and the row passes' reads hit distinct banks), then
 * the rows' and columns' flags (a pass in the block) and thresholds. */
constexpr int kCopyPitch = kFusedBlock + 8;
constexpr int kRowFlagOffset = kFusedBlock * kCopyPitch * 2;
constexpr int kColFlagOffset = kRowFlagOffset + kFusedBlock;
constexpr int kRowThrOffset = kColFlagOffset + kFusedBlock;
constexpr int kColThrOffset = kRowThrOffset + kFusedBlock * 4;
constexpr int kCopyBytes = kColThrOffset + kFusedBlock * 4;

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
 * The flagged lines (flag[0..127] != 0) the calling warp takes: those of index w, w + warps, ...
 * in each group of 32, at most 32 (4 warps) or 16 (8 warps). Lane offset + l gets the l-th of
 * them in my_line (lanes outside keep theirs); returns how many. Called by the whole warp.
 */
template <int kThreads>
__device__ __forceinline__ int warp_lines(const unsigned char *flag, int offset, int &my_line)
{
  static_assert(kThreads == 128 || kThreads == 256, "4 or 8 warps share the lines");
  constexpr uint32_t kEveryWarp = kThreads == 256 ? 0x01010101u : 0x11111111u;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int count = 0;
#pragma unroll
  for (int base = 0; base < kFusedBlock; base += 32) {
    uint32_t m = __ballot_sync(kFullMask, flag[base + lane] != 0) & (kEveryWarp << warp);
    const int k = lane - offset - count, c = __popc(m);
    if (k >= 0 && k < c) {
      for (int t = 0; t < k; t++)
        m &= m - 1;
      my_line = base + __ffs(m) - 1;
    }
    count += c;
  }
  return count;
}

/* Row il of a block's copy: the lane's 4 products (columns 4 lane + u) that beat thr, as bits of
 * the result, with their scores (invalid references and the self pair excluded). */
template <int kKind>
__device__ __forceinline__ uint32_t row_passes(const TileGeom &g, const __half *copy, int il, int m0,
                                               int n0, float thr, float (&score)[4])
{
  const int lane = threadIdx.x & 31, i = m0 + il;
  /* one 8-byte read a lane: a warp reads the row's 256 bytes at once */
  const uint2 raw = *reinterpret_cast<const uint2 *>(copy + il * kCopyPitch + lane * 4);
  __half four[4];
  memcpy(four, &raw, sizeof four);
  uint32_t pass = 0;
#pragma unroll
  for (int u = 0; u < 4; u++) {
    const int j = n0 + lane * 4 + u;
    const int cand = g.col_global0 + j;
    score[u] = 1.0f - magnitude<kKind>(__half2float(four[u]) * g.tile_scale);
    const bool ok = j < g.n_cols && score[u] < thr && !(g.invalid && g.invalid[cand]) &&
                    !(g.self && cand == g.row_global0 + i);
    pass |= (uint32_t)ok << u;
  }
  return pass;
}

/* Column jl of a block's copy: the lane's 4 products (rows 32 u + lane) that beat thr. */
template <int kKind>
__device__ __forceinline__ uint32_t column_passes(const TileGeom &g, const __half *copy, int jl,
                                                  int m0, float thr, float (&score)[4])
{
  const int lane = threadIdx.x & 31;
  uint32_t pass = 0;
#pragma unroll
  for (int u = 0; u < 4; u++) {
    const int i = m0 + u * 32 + lane;
    const int cand = g.row_global0 + i;
    score[u] =
        1.0f - magnitude<kKind>(__half2float(copy[(u * 32 + lane) * kCopyPitch + jl]) * g.tile_scale);
    const bool ok = i < g.n_rows && score[u] < thr && !(g.invalid && g.invalid[cand]);
    pass |= (uint32_t)ok << u;
  }
  return pass;
}

/*
 * The exact passes of the warp's flagged lines over a block's products in shared memory (epi:
 * the layout above): its rows (kRows) and its columns (kColumns), in one batch of at most 32
 * lines. In three rounds, so that the global latencies of the lines overlap instead of adding up
 * line after line: the warp counts each line's passes; every lane reserves its line's slots at
 * once (reserve_candidates: one atomic a line, the merge queue); the warp stores each line's
 * candidates. Called by the whole warp.
 */
template <int kKind, int kThreads, bool kRows, bool kColumns>
__device__ __forceinline__ void pass_lines(const SelectState &st, const TileGeom &g,
                                           const unsigned char *epi, int m0, int n0)
{
  const int lane = threadIdx.x & 31;
  const __half *copy = reinterpret_cast<const __half *>(epi);
  int line = -1;
  const int n_rows = kRows ? warp_lines<kThreads>(epi + kRowFlagOffset, 0, line) : 0;
  const int n_lines =
      n_rows + (kColumns ? warp_lines<kThreads>(epi + kColFlagOffset, n_rows, line) : 0);
  if (n_lines == 0)
    return;
  const bool column = lane >= n_rows;
  /* the lane's line: its threshold, state row and merge-queue entry */
  const float *thr = reinterpret_cast<const float *>(epi + (column ? kColThrOffset : kRowThrOffset));
  const float my_thr = line >= 0 ? thr[line] : 0.0f;
  const int state_row = column ? g.col_state0 + n0 + line : g.row_state0 + m0 + line;
  auto passes = [&](int l, float (&score)[4]) {
    const int il = __shfl_sync(kFullMask, line, l);
    const float t = __shfl_sync(kFullMask, my_thr, l);
    return l >= n_rows ? column_passes<kKind>(g, copy, il, m0, t, score)
                       : row_passes<kKind>(g, copy, il, m0, n0, t, score);
  };
  int my_total = 0;
  for (int l = 0; l < n_lines; l++) {
    float score[4];
    const int total = __shfl_sync(kFullMask, warp_inclusive_sum(__popc(passes(l, score))), 31);
    if (lane == l)
      my_total = total;
  }
  int my_base = 0;
  if (line >= 0 && my_total > 0)
    my_base = reserve_candidates(st, state_row, my_total,
                                 column ? (int)(kColumnFlag | (uint32_t)(n0 + line)) : m0 + line);
  for (int l = 0; l < n_lines; l++) {
    if (__shfl_sync(kFullMask, my_total, l) == 0)
      continue;
    float score[4];
    const uint32_t pass = passes(l, score);
    const int n = __popc(pass);
    const size_t at = (size_t)__shfl_sync(kFullMask, state_row, l) * st.cap;
    int pos = __shfl_sync(kFullMask, my_base, l) + warp_inclusive_sum(n) - n;
#pragma unroll
    for (int u = 0; u < 4; u++)
      if (pass & (1u << u)) {
        if (pos < st.cap) {
          st.cand_score[at + pos] = score[u];
          st.cand_index[at + pos] = l >= n_rows ? g.row_global0 + m0 + u * 32 + lane
                                                : g.col_global0 + n0 + lane * 4 + u;
        }
        pos++;
      }
  }
}

/*
 * The exact passes of a fused block over its products in shared memory (epi: the copy, 128 x 128
 * halves at pitch kCopyPitch, the values cuBLAS's half tile would hold, then the lines' flags and
 * thresholds): the flagged rows and (do_cols) columns, the warps taking them in turn
 * (warp_lines), a lane 4 products of each. Pairs of one row beating its threshold go to its
 * candidate buffer, likewise for columns; a line crossing lazy_limit is queued for the merge.
 */
template <int kKind, int kThreads>
__device__ __noinline__ void exact_passes(const SelectState &st, const TileGeom &g,
                                          const unsigned char *epi, int m0, int n0)
{
  if (kThreads == 256 && g.do_cols) {
    /* 8 warps: at most 16 rows and 16 columns a warp, one batch */
    pass_lines<kKind, kThreads, true, true>(st, g, epi, m0, n0);
    return;
  }
  pass_lines<kKind, kThreads, true, false>(st, g, epi, m0, n0);
  if (g.do_cols)
    pass_lines<kKind, kThreads, false, true>(st, g, epi, m0, n0);
}

} // namespace
} // namespace knnwb_cuda
