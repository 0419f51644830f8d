/*
 * What the two fused tiles (tile_fused.cu: mma.sync, any GPU from sm_80; tile_fused_wgmma.cu:
 * wgmma, Hopper only) share: the asynchronous copies of their operands to shared memory, and once
 * their products are tested, the exact passes over a block's products copied to shared memory as
 * cuBLAS's half tile would hold them, with the appending of a line's candidates. Blocks are 128 x
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
constexpr int kFusedBlock = 128;
/* the epilogue's copy of a block's products in shared memory: rows of 136 halves (272 bytes: the
 * fragments' stores and the row passes' reads hit distinct banks), then 2 x 128 flags */
constexpr int kCopyPitch = kFusedBlock + 8;
constexpr int kCopyBytes = kFusedBlock * kCopyPitch * 2 + 2 * kFusedBlock;

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
 * Appends the pairs of a line that pass to state row `row` (n passes of this lane, bits in
 * `pass` for its slots u = 0..3 with candidates cand(u)): one atomic per warp and line, as the
 * filter's exact passes (tile_filter.cu); queues the line for the merge when it crosses
 * lazy_limit. Called by the whole warp. (Measured: doing the lines of a warp in one batch, their
 * thresholds and atomics at once, was slower on the wgmma kernel, 205 against 191 us a launch.)
 */
template <typename Cand>
__device__ __forceinline__ void append_line(const SelectState &st, int row, int entry,
                                            uint32_t pass, const float (&score)[4], Cand cand)
{
  const int lane = threadIdx.x & 31;
  const int n = __popc(pass);
  const int incl = warp_inclusive_sum(n);
  const int total = __shfl_sync(kFullMask, incl, 31);
  if (total == 0)
    return;
  int base = 0;
  if (lane == 31)
    base = reserve_candidates(st, row, total, entry);
  int pos = __shfl_sync(kFullMask, base, 31) + incl - n;
  for (int u = 0; u < 4; u++)
    if (pass & (1u << u)) {
      if (pos < st.cap) {
        st.cand_score[(size_t)row * st.cap + pos] = score[u];
        st.cand_index[(size_t)row * st.cap + pos] = cand(u);
      }
      pos++;
    }
}

/*
 * The exact passes of a fused block over its products in shared memory (copy: 128 x 128 halves,
 * pitch kCopyPitch, the values cuBLAS's half tile would hold): warps take the flagged rows and
 * columns in turn (kEveryWarp), a lane 4 products of each. Pairs of one row beating its threshold
 * go to its candidate buffer (invalid references and the self pair excluded), likewise for
 * columns (do_cols).
 */
template <int kKind, int kThreads>
__device__ __noinline__ void exact_passes(const SelectState &st, const TileGeom &g,
                                          const __half *copy, const unsigned char *row_flag,
                                          const unsigned char *col_flag, int m0, int n0)
{
  static_assert(kThreads == 128 || kThreads == 256, "4 or 8 warps share the lines");
  /* warp w takes the lines w, w + warps, ... of each group of 32 */
  constexpr uint32_t kEveryWarp = kThreads == 256 ? 0x01010101u : 0x11111111u;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int base = 0; base < kFusedBlock; base += 32) {
    uint32_t rows = __ballot_sync(kFullMask, row_flag[base + lane] != 0) & (kEveryWarp << warp);
    for (; rows; rows &= rows - 1) {
      const int il = base + __ffs(rows) - 1;
      const int i = m0 + il;
      const float thr = st.thr[g.row_state0 + i];
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
      append_line(st, g.row_state0 + i, i, pass, score,
                  [&](int u) { return g.col_global0 + n0 + lane * 4 + u; });
    }
  }
  if (!g.do_cols)
    return;
  for (int base = 0; base < kFusedBlock; base += 32) {
    uint32_t cols = __ballot_sync(kFullMask, col_flag[base + lane] != 0) & (kEveryWarp << warp);
    for (; cols; cols &= cols - 1) {
      const int jl = base + __ffs(cols) - 1;
      const int j = n0 + jl;
      const float thr = st.thr[g.col_state0 + j];
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
      append_line(st, g.col_state0 + j, (int)(kColumnFlag | (uint32_t)j), pass, score,
                  [&](int u) { return g.row_global0 + m0 + u * 32 + lane; });
    }
  }
}

} // namespace
} // namespace knnwb_cuda
