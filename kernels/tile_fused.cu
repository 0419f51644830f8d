/*
 * The fused tile: the FP16 score GEMM and the threshold filter in one kernel, for ordinary tiles
 * of DOT and ABS_DOT screens (see launch_fused_filter in select_internal.h), where a worker's
 * measurement chose it (Worker::fused_probe; KNNWB_CUDA_FUSED=1 always, 0 never). On compute
 * capability 9.0 the wgmma kernel runs
 * (tile_fused_wgmma.cu, faster); this mma.sync kernel is the path of other GPUs and of
 * KNNWB_CUDA_FUSED_MMA=sync.
 *
 * Why: with cuBLAS, a tile's scores go to memory (8192^2 halves, 128 MiB) and the filter reads
 * them back; on one H200 the GEMM took 0.085 ms and the filter 0.072-0.077 ms a tile (ncu), the
 * selection about as long as the GEMM it follows. Here the products stay in registers: each warp
 * tests its block of accumulators against the rows' and columns' thresholds, and only lines with
 * a pass (about one per row and column of a tile, after a row's first tiles) are copied to shared
 * memory for the exact passes. The arithmetic is the FP16 screen's: half inputs, float32
 * accumulation, so the bound of core's certificate holds for any order of the sum.
 *
 * The GEMM is a plain Ampere-style tensor-core kernel (mma.sync m16n8k16, ldmatrix from swizzled
 * shared memory, a 3-stage cp.async pipeline, fragments double-buffered): blocks of 128 x 128
 * products, K in steps of 32. The pairs that pass are kept for the selection stream
 * (tile_fused_pairs.cu); a row that overflows its candidate buffer is merged from the kept pairs of
 * its line, or from its line recomputed by the merge (tile_select.cu) when some did not fit.
 *
 * Measured (one H200, fused_check.sh): exact (the lists digest of 1,533,876 x 295 unchanged, the
 * CUDA tests pass both ways), and the selection left on the selection stream falls from 2.81 s to
 * 0.66 s (the merges), but this GEMM reaches about 180 TFLOP/s (0.22 ms a tile, 2 warps per
 * scheduler, ncu: issue-bound at 33% of the issue slots) against cuBLAS's Hopper kernel (wgmma,
 * 0.085 ms alone): 5.0-5.1 s end to end against 3.4-3.5 s; hence the wgmma kernel.
 */
#include "tile_fused_common.cuh"

#include <cuda_fp16.h>

#ifndef KNNWB_FUSED_WARP_N
#define KNNWB_FUSED_WARP_N 64
#endif

#include <algorithm>
#include <stdlib.h>
#include <string.h>

namespace knnwb_cuda
{
namespace
{

constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 32, kStages = 3;
/* warps of 64 x kWarpN products: 64 x 64 (4 warps, 128 accumulators a thread, the default) or
 * 64 x 32 (8 warps, 64 accumulators: twice the warps per scheduler; measured the same, 5.08-5.11 s
 * against 5.00-5.06 s end to end, and it spills 8 bytes at 128 registers) */
constexpr int kWarpN = KNNWB_FUSED_WARP_N, kNT = kWarpN / 8, kWarpsN = kBlockN / kWarpN;
constexpr int kFusedThreads = 32 * (kBlockM / 64) * kWarpsN;
constexpr int kStageHalves = (kBlockM + kBlockN) * kBlockK; /* 16 KiB a stage */
static_assert(kBlockM == kFusedBlock && kBlockN == kFusedBlock, "the epilogue's blocks");
static_assert(kPairCountOffset + (int)sizeof(int) <= kStages * kStageHalves * 2,
              "the epilogue's copy and count fit the stages");
static_assert(kFusedThreads >= kBlockM && kFusedThreads >= kBlockN, "a thread per row and column");

__device__ __forceinline__ void load_matrix_x4(uint32_t (&r)[4], uint32_t address)
{
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1)
{
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/*
 * Offset in halves of 16-byte chunk c (0..3) of row r in a stage's [rows][32] operand: the chunk
 * index XOR bits 1-2 of the row, so the 8 rows an ldmatrix phase reads hit 8 different bank
 * groups (rows are 64 bytes: unswizzled, rows r and r + 2 share banks).
 */
__device__ __forceinline__ int swizzled(int r, int c)
{
  return r * kBlockK + ((c ^ ((r >> 1) & 3)) << 3);
}

/* Issues the copies of K step kt of both operands into stage s (zero beyond the rows or dpad). */
__device__ __forceinline__ void load_stage(__half *stage, const __half *q, int n_q, const __half *r,
                                           int n_r, int dpad, int m0, int n0, int kt)
{
  const int k0 = kt * kBlockK;
#pragma unroll
  for (int it = 0; it < (kBlockM * 4) / kFusedThreads; it++) {
    const int idx = threadIdx.x + it * kFusedThreads;
    const int row = idx >> 2, c = idx & 3;
    const int k = k0 + c * 8;
    const bool ok = m0 + row < n_q && k < dpad;
    copy_async_16(shared_address(stage + swizzled(row, c)),
                  ok ? q + (size_t)(m0 + row) * dpad + k : q, ok);
  }
  __half *stage_b = stage + kBlockM * kBlockK;
#pragma unroll
  for (int it = 0; it < (kBlockN * 4) / kFusedThreads; it++) {
    const int idx = threadIdx.x + it * kFusedThreads;
    const int row = idx >> 2, c = idx & 3;
    const int k = k0 + c * 8;
    const bool ok = n0 + row < n_r && k < dpad;
    copy_async_16(shared_address(stage_b + swizzled(row, c)),
                  ok ? r + (size_t)(n0 + row) * dpad + k : r, ok);
  }
}

/* One warp's operands of one step of 16: 4 row tiles of 16 (a) and 8 column tiles of 8 (b). */
struct Fragments {
  uint32_t a[4][4];
  uint32_t b[kNT][2];
};

/* The fragments of step kk (0 or 1) of the stage at `stage`, for the warp's 64 x 64 block. */
__device__ __forceinline__ void load_fragments(Fragments &f, const __half *stage, int kk, int wm,
                                               int wn, int lane)
{
  const __half *sb = stage + kBlockM * kBlockK;
#pragma unroll
  for (int mt = 0; mt < 4; mt++) {
    const int row = wm + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    load_matrix_x4(f.a[mt], shared_address(stage + swizzled(row, kk * 2 + (lane >> 4))));
  }
#pragma unroll
  for (int np = 0; np < kNT / 2; np++) {
    const int row = wn + np * 16 + (lane & 7) + (lane >> 4) * 8;
    uint32_t t[4];
    load_matrix_x4(t, shared_address(sb + swizzled(row, kk * 2 + ((lane >> 3) & 1))));
    f.b[2 * np][0] = t[0];
    f.b[2 * np][1] = t[1];
    f.b[2 * np + 1][0] = t[2];
    f.b[2 * np + 1][1] = t[3];
  }
}

__device__ __forceinline__ void mma_fragments(float (&acc)[4][kNT][4], const Fragments &f)
{
#pragma unroll
  for (int mt = 0; mt < 4; mt++)
#pragma unroll
    for (int nt = 0; nt < kNT; nt++)
      mma_16816(acc[mt][nt], f.a[mt], f.b[nt][0], f.b[nt][1]);
}

/*
 * Grid: (ceil(n_cols / 128), ceil(n_rows / 128)); block: 4 warps, warp w computes the 64 x 64
 * products of rows (w / 2) * 64 and columns (w % 2) * 64 of the block. Accumulator layout of
 * mma m16n8k16: acc[mt][nt][h * 2 + e] is row mt * 16 + lane / 4 + h * 8, column nt * 8 +
 * (lane % 4) * 2 + e of the warp's block. Then the filter's tests on the registers, and the exact
 * passes (exact_passes) for the lines with a pass, about one per row and column of a tile.
 */
template <int kKind>
__global__ void __launch_bounds__(kFusedThreads, 2)
    fused_kernel(const __grid_constant__ SelectState st, const __grid_constant__ TileGeom g)
{
  __shared__ __align__(128) __half smem[kStages * kStageHalves];
  const __half *q = static_cast<const __half *>(g.q_rows);
  const __half *r = static_cast<const __half *>(g.r_rows);
  const int m0 = blockIdx.y * kBlockM, n0 = blockIdx.x * kBlockN;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = (warp / kWarpsN) * 64, wn = (warp % kWarpsN) * kWarpN;
  const int n_k = (g.dpad + kBlockK - 1) / kBlockK;
  const float inf = __int_as_float(0x7f800000);

#pragma unroll
  for (int s = 0; s < kStages - 1; s++) {
    if (s < n_k)
      load_stage(smem + s * kStageHalves, q, g.n_rows, r, g.n_cols, g.dpad, m0, n0, s);
    copy_async_commit();
  }

  float acc[4][kNT][4];
#pragma unroll
  for (int mt = 0; mt < 4; mt++)
#pragma unroll
    for (int nt = 0; nt < kNT; nt++)
#pragma unroll
      for (int v = 0; v < 4; v++)
        acc[mt][nt][v] = 0.0f;

  /* Fragments double-buffered in registers: the ldmatrix of one step of 16 is issued before the
   * mma of the other, so that with two warps per scheduler the tensor pipe does not wait for
   * shared memory (ncu: without, stalls on fixed-latency dependencies dominated). Stage kt + 2
   * goes into the slot of stage kt - 1, which every warp finished reading before the previous
   * iteration's barrier. */
  copy_async_wait<kStages - 2>();
  __syncthreads(); /* stage 0 landed for every thread */
  Fragments f[2];
  load_fragments(f[0], smem, 0, wm, wn, lane);
  for (int kt = 0; kt < n_k; kt++) {
    const int next = kt + kStages - 1;
    if (next < n_k)
      load_stage(smem + (next % kStages) * kStageHalves, q, g.n_rows, r, g.n_cols, g.dpad, m0, n0,
                 next);
    copy_async_commit();
    /* dpad is a multiple of 8: the second step of 16 of the last stage may be all padding */
    const bool second = kt * kBlockK + 16 < g.dpad;
    if (second)
      load_fragments(f[1], smem + (kt % kStages) * kStageHalves, 1, wm, wn, lane);
    mma_fragments(acc, f[0]);
    copy_async_wait<kStages - 2>();
    __syncthreads(); /* stage kt + 1 landed for every thread; stage kt is read */
    if (kt + 1 < n_k)
      load_fragments(f[0], smem + ((kt + 1) % kStages) * kStageHalves, 0, wm, wn, lane);
    if (second)
      mma_fragments(acc, f[1]);
  }
  copy_async_wait<0>();

  /* the thresholds (read after the products: held through the loop they cost 24 registers) */
  float row_thr[8], col_thr[2 * kNT];
#pragma unroll
  for (int mt = 0; mt < 4; mt++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int i = m0 + wm + mt * 16 + (lane >> 2) + h * 8;
      row_thr[mt * 2 + h] = i < g.n_rows ? st.thr[g.row_state0 + i] : -inf;
    }
#pragma unroll
  for (int nt = 0; nt < kNT; nt++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const int j = n0 + wn + nt * 8 + (lane & 3) * 2 + e;
      col_thr[nt * 2 + e] = (g.do_cols && j < g.n_cols) ? st.thr[g.col_state0 + j] : -inf;
    }

  /* The tests, on the registers: the largest product (magnitude) of each of the thread's 8 rows
   * over the warp's kWarpN columns (4 lanes share a row) and of its 2 kNT columns over the warp's
   * 64 rows (8 lanes share a column), times the positive scale. NaN marks products outside the tile
   * (fmaxf skips it, every comparison fails). */
  const float scale = g.alpha * g.tile_scale;
  const float nan = __int_as_float(0x7fc00000);
  if (m0 + kBlockM > g.n_rows || n0 + kBlockN > g.n_cols) {
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
      for (int nt = 0; nt < kNT; nt++)
#pragma unroll
        for (int v = 0; v < 4; v++) {
          const int i = m0 + wm + mt * 16 + (lane >> 2) + (v >> 1) * 8;
          const int j = n0 + wn + nt * 8 + (lane & 3) * 2 + (v & 1);
          if (i >= g.n_rows || j >= g.n_cols)
            acc[mt][nt][v] = nan;
        }
  }
  uint32_t row_hits = 0, col_hits = 0;
#pragma unroll
  for (int mt = 0; mt < 4; mt++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      float best = nan;
#pragma unroll
      for (int nt = 0; nt < kNT; nt++) {
        best = fmaxf(best, magnitude<kKind>(acc[mt][nt][h * 2]));
        best = fmaxf(best, magnitude<kKind>(acc[mt][nt][h * 2 + 1]));
      }
      best = fmaxf(best, __shfl_xor_sync(kFullMask, best, 1));
      best = fmaxf(best, __shfl_xor_sync(kFullMask, best, 2));
      row_hits |= (uint32_t)(1.0f - best * scale < row_thr[mt * 2 + h]) << (mt * 2 + h);
    }
  if (g.do_cols) {
#pragma unroll
    for (int nt = 0; nt < kNT; nt++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        float best = nan;
#pragma unroll
        for (int mt = 0; mt < 4; mt++) {
          best = fmaxf(best, magnitude<kKind>(acc[mt][nt][e]));
          best = fmaxf(best, magnitude<kKind>(acc[mt][nt][2 + e]));
        }
        best = fmaxf(best, __shfl_xor_sync(kFullMask, best, 4));
        best = fmaxf(best, __shfl_xor_sync(kFullMask, best, 8));
        best = fmaxf(best, __shfl_xor_sync(kFullMask, best, 16));
        col_hits |= (uint32_t)(1.0f - best * scale < col_thr[nt * 2 + e]) << (nt * 2 + e);
      }
  }

  /* Lines with a pass: the block's products go to shared memory (the stages are free now) as the
   * half tile cuBLAS would write, and the exact passes read them there in compact loops; unrolled
   * over the registers they made the kernel too large for the instruction cache (ncu: most
   * stalls were instruction fetch). */
  __syncthreads(); /* every warp is done with the stages */
  const BlockLines lines = block_lines_at(reinterpret_cast<unsigned char *>(smem));
  if (threadIdx.x < kBlockM)
    lines.row_flag[threadIdx.x] = 0;
  if (threadIdx.x < kBlockN)
    lines.col_flag[threadIdx.x] = 0;
  __syncthreads();
#pragma unroll
  for (int b = 0; b < 8; b++)
    if (row_hits & (1u << b)) {
      const int il = wm + (b >> 1) * 16 + (lane >> 2) + (b & 1) * 8;
      lines.row_flag[il] = 1;
      lines.row_thr[il] = row_thr[b];
    }
#pragma unroll
  for (int b = 0; b < 2 * kNT; b++)
    if (col_hits & (1u << b)) {
      const int jl = wn + (b >> 1) * 8 + (lane & 3) * 2 + (b & 1);
      lines.col_flag[jl] = 1;
      lines.col_thr[jl] = col_thr[b];
    }
  if (!__syncthreads_or((row_hits | col_hits) != 0))
    return;
  __half *copy = smem;
#pragma unroll
  for (int mt = 0; mt < 4; mt++)
#pragma unroll
    for (int nt = 0; nt < kNT; nt++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int il = wm + mt * 16 + (lane >> 2) + h * 8;
        const int jl = wn + nt * 8 + (lane & 3) * 2;
        *reinterpret_cast<__half2 *>(copy + il * kCopyPitch + jl) =
            __floats2half2_rn(acc[mt][nt][h * 2] * g.alpha, acc[mt][nt][h * 2 + 1] * g.alpha);
      }
  const BlockPairs kept = block_pairs_at(reinterpret_cast<unsigned char *>(smem), (int)sizeof smem);
  if (threadIdx.x == 0)
    kept.count[0] = 0;
  __syncthreads();
  exact_passes<kKind, kFusedThreads>(g, copy, lines, m0, n0, kept);
  flush_pairs(g, kept);
}

} // namespace

int fused_tiles_setting(void)
{
  const char *v = getenv("KNNWB_CUDA_FUSED");
  return v == nullptr || *v == 0 ? -1 : strcmp(v, "0") != 0;
}

/* Read at every tile, as fused_tiles_setting. */
int fused_tiles_after(void)
{
  const char *v = getenv("KNNWB_CUDA_FUSED_AFTER");
  return v == nullptr || *v == 0 ? 2 : std::max(0, atoi(v));
}

/* The wgmma kernel where the device runs it, unless KNNWB_CUDA_FUSED_MMA=sync (comparisons). */
static bool wgmma_wanted(void)
{
  const char *v = getenv("KNNWB_CUDA_FUSED_MMA");
  return v == nullptr || strcmp(v, "sync") != 0;
}

cudaError_t clear_fused_pairs(const TileGeom &geom, cudaStream_t stream)
{
  const size_t blocks = (size_t)((geom.n_cols + kBlockN - 1) / kBlockN) *
                        (size_t)((geom.n_rows + kBlockM - 1) / kBlockM);
  const cudaError_t err =
      cudaMemsetAsync(geom.pair_index, 0, (1 + 2 * blocks) * sizeof(int), stream);
  return err != cudaSuccess ? err : cudaMemsetAsync(geom.lost, 0, 2 * geom.ld, stream);
}

cudaError_t launch_fused_filter(const SelectState &state, const TileGeom &geom, cudaStream_t stream,
                                bool *wgmma)
{
  *wgmma = false;
  if (wgmma_wanted()) {
    const cudaError_t err = launch_fused_wgmma(state, geom, stream);
    if (err != cudaErrorNotSupported) {
      *wgmma = err == cudaSuccess;
      return err;
    }
  }
  const dim3 grid((geom.n_cols + kBlockN - 1) / kBlockN, (geom.n_rows + kBlockM - 1) / kBlockM);
  const cudaError_t err = clear_fused_pairs(geom, stream);
  if (err != cudaSuccess)
    return err;
  if (geom.kind == KNNWB_SCORE_ABS_DOT)
    fused_kernel<KNNWB_SCORE_ABS_DOT><<<grid, kFusedThreads, 0, stream>>>(state, geom);
  else
    fused_kernel<KNNWB_SCORE_DOT><<<grid, kFusedThreads, 0, stream>>>(state, geom);
  return cudaGetLastError();
}

} // namespace knnwb_cuda
