/*
 * The fused tile on Hopper's warpgroup tensor-core instructions (wgmma, sm_90a): the FP16 score
 * GEMM and the threshold filter in one kernel, like tile_fused.cu's mma.sync kernel, which stays
 * the path of GPUs other than compute capability 9.0 (and of KNNWB_CUDA_FUSED_MMA=sync).
 *
 * Why a second kernel: the mma.sync one is exact but issue-bound (one warp instruction per
 * 16 x 8 x 16 products; 0.22 ms a tile against 0.085 ms for cuBLAS's Hopper GEMM, ncu), so fusing
 * the filter cost more than it saved. One wgmma m64n128k16 does 64 x 128 x 16 products from
 * shared memory for a whole warpgroup, asynchronously, and the Tensor Memory Accelerator (TMA)
 * copies a stage's operands with one instruction: the two that cuBLAS's kernel is built on.
 *
 * Block: 128 x 128 products, 1 warpgroup (128 threads) issuing two m64n128k16 MMAs a K step of 16,
 * one for rows 0-63 (acc0) and one for rows 64-127 (acc1) against all 128 columns: 128
 * accumulators a thread. K in steps of 64 halves: each operand's stage is 128 rows of 128 bytes
 * in the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r mod 8); stages 1024-byte
 * aligned) that both the TMA copies write and wgmma's descriptors read. 2 stages (64 KiB), each
 * with an mbarrier that the copies complete; rows past the tile and K past dpad arrive as zeros
 * (the TMA's out-of-bounds fill), so every stage does 4 steps of 16. Three blocks fit an SM (166
 * registers, 65 KiB of shared memory each): while one block tests its products, two compute.
 * (Two warpgroups a block, 64 rows each, in 3 stages of 96 KiB took 481-555 us a tile under ncu
 * against 413-458 us for this; d = 295 tile loop 2.256-2.262 s against 2.045-2.061 s, library
 * call 2.77-2.82 s against 2.55-2.61 s, the same lists: its blocks fit 2 an SM, and a block
 * testing held its stages while the SM's other block alone computed.)
 *
 * Each of acc0 and acc1 is then the layout of mma.sync's m16n8 fragments repeated over the 16
 * column groups: acc[nt * 4 + h * 2 + e] is row 16 warp + lane / 4 + 8 h of its 64 rows, column
 * 8 nt + 2 (lane mod 4) + e. The filter's tests compare each line's largest product, rounded to
 * the half value cuBLAS's half tile would hold (times alpha, a power of two): a row's products lie
 * within one warp; a column passes when the maximum over some warp's 32 rows passes, so each warp
 * flags the columns it passes and one barrier follows the tests. Only blocks with a pass copy
 * their products to shared memory for the exact passes (tile_fused_common.cuh), as in
 * tile_fused.cu: the decisions are those of the filter kernel on cuBLAS's tile, up to the order
 * of the sums.
 *
 * Where a block of the two-warpgroup kernel's time went at d = 295 (ncu, a 16,384^2 tile, clocks
 * locked): 473-479 us without the copy, exact passes and flush, 310 us with nothing after the
 * MMAs, 487-564 us whole: the post-MMA part holds the block's shared memory, and with two blocks
 * an SM the next block's copies wait for it (which the one-warpgroup blocks, three an SM, answer).
 * The tests as written now (floats, per-warp column flags, one barrier instead of three) took
 * 446-475 us against 495-508 us (same machine): real-like tile loop 1.111-1.120 s against
 * 1.150-1.153 s; d = 295's loop, where the selection stream's kernels share the SMs, the
 * same. Tried and left out: K steps of 32 halves in 6 stages (d = 295 loop 2.45 s against 2.22
 * s), and the exact passes' lines dealt to the warps in one list (no change). Also left out
 * (commit 3635f96): a kernel block taking a chain of a block row's blocks, the next one's first
 * stages copied while this one tests. Chains of 4 took 504-584 us a tile against 519-598 us for
 * chains of 1, but that kernel at chain 1 took 40 us more than the two-warpgroup kernel it came
 * from (479-554 us), and in the d = 295 loop every chain lost (2.28-2.32 s against 2.23 s; longer
 * chains hold the SMs from the selection stream's merges). Whatever thread 0 does between a stage's
 * barrier and its copies shows: three integer divisions there (a chain's block coordinates) cost 80
 * us a tile. Nor did a refill issued by whichever of the two warpgroups released its stage last,
 * instead of by thread 0 after a block barrier, gain (d = 295 loop 2.265-2.277 s
 * against 2.235-2.260 s).
 *
 * Earlier forms of the two-warpgroup kernel, measured (one H200, 1,533,876 x 295 Pearson k = 20,
 * fused_check.sh wgmma and profile): exact (lists digest unchanged, the CUDA tests and memcheck
 * pass), 0.176 ms a tile in the loop against
 * 0.22 ms for the mma.sync kernel, 4.30 s end to end against 5.02 s; but cuBLAS + the filter
 * kernel take 0.168 ms a tile and 3.42-3.46 s (then the kernel appended to the candidate buffers
 * itself and waited for the previous tile's merge; since its pairs are kept for the selection
 * stream, tile_fused_pairs.cu, it wins where few lines pass, as on the real-like matrix: tile loop
 * 1.57 s against 1.91 s, docs/performance-gpu.md). ncu, one launch
 * (n = 200,000): 191 us, the tensor pipe active 24% of the time (cuBLAS's GEMM: 61%, 87 us) and
 * twice cuBLAS's L2 reads (its 256 x 128 tiles in clusters of 2 share operands by multicast); PC
 * samples 30% in the main loop (waits for the copies and the MMAs), 22% in the tests, 38% in the
 * exact passes. Doing a warp's exact passes in one batch (thresholds and atomics at once) was
 * slower (205 us). Two blocks of 90 registers a thread fill an SM's registers, so a block's waits
 * on memory are what it mostly does: its thresholds are read while its operands are on their way
 * (real-like tile loop 1.25 s against 1.57 s when read after the products). Tried and left out:
 * persistent blocks copying the next block's operands during this one's tests (no gain, and less
 * room for kept pairs), and exact passes on the registers (slower: instruction cache, bank
 * conflicts). Clusters of 2 and 4 blocks that share their operands' copies by multicast (commit
 * 20231f8) read 30% fewer bytes from L2 (4 blocks, ncu) but took 0.66 and 0.75 ms a tile in the
 * loop against 0.52 ms (d = 295): fewer bytes did not make it faster, so its L2 reads do not
 * bound it. A warp of its own copying the operands (commit ffeceaf: no warpgroup waits for a
 * refill, the barriers after the loop named for the warpgroups) was slower too, alone (0.58 ms a
 * tile, ncu, against 0.50) and in clusters as slow as before (docs/performance-gpu.md).
 *
 * Built only for sm_90a (kernels/CMakeLists.txt): wgmma is an arch-specific instruction with no
 * forward compatibility, so without 90 among the architectures the launcher reports
 * cudaErrorNotSupported and the mma.sync kernel runs instead.
 */
#include "driver_entry.h"
#include "tile_fused_common.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_fp16.h>
#include <mutex>

namespace knnwb_cuda
{

#if defined(KNNWB_WGMMA)
namespace
{

constexpr int kBlockK = 64; /* halves: a stage's rows are 128 bytes, the swizzle's width */
constexpr int kStages = 2;
constexpr int kThreads = 128;
constexpr int kOperandBytes = kFusedBlock * kBlockK * 2; /* 16 KiB */
constexpr int kStageBytes = 2 * kOperandBytes;
/* stages, plus the slack that aligns them to 1024 bytes (dynamic shared memory is only 16-byte
 * aligned by contract) */
constexpr int kSmemBytes = kStages * kStageBytes + 1024;
/* after the loop: the copy of the products (kCopyBytes), then the kept pairs */
static_assert(kCopyBytes < kStages * kStageBytes, "the epilogue fits the stages");
/* one thread per column clears the columns' flags (the kernel's first lines) */
static_assert(kThreads == kFusedBlock, "a thread per column");

__device__ __forceinline__ void barrier_init(uint32_t bar, int count)
{
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

/* Arms the stage's barrier for its two copies (bytes) and issues them: K step kt of the rows
 * m0.. of q and n0.. of r. One thread. */
__device__ __forceinline__ void load_stage(uint32_t stage, uint32_t bar, const CUtensorMap &map_q,
                                           const CUtensorMap &map_r, int m0, int n0, int kt)
{
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
               "r"(kStageBytes)
               : "memory");
  const int k0 = kt * kBlockK;
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(stage),
               "l"(reinterpret_cast<uint64_t>(&map_q)), "r"(k0), "r"(m0), "r"(bar)
               : "memory");
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(stage + kOperandBytes),
               "l"(reinterpret_cast<uint64_t>(&map_r)), "r"(k0), "r"(n0), "r"(bar)
               : "memory");
}

/* Waits until phase `parity` of the barrier completed (the stage's copies landed). */
__device__ __forceinline__ void barrier_wait(uint32_t bar, uint32_t parity)
{
  asm volatile("{\n"
               ".reg .pred done;\n"
               "wait:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra wait;\n"
               "}\n" ::"r"(bar),
               "r"(parity)
               : "memory");
}

/*
 * wgmma's shared-memory matrix descriptor of a K-major operand in the 128-byte swizzle: start
 * address in 16-byte units (bits 0-13), leading byte offset 1 (unused by swizzled K-major
 * layouts), stride byte offset 1024 bytes between groups of 8 rows (bits 32-45), swizzle mode
 * 128 bytes (bits 62-63 = 1). A step of 16 halves along K adds 32 bytes to the start address:
 * the hardware applies the swizzle to the address bits, as the TMA did when writing.
 */
__device__ __forceinline__ uint64_t smem_descriptor(uint32_t address)
{
  return (uint64_t)((address & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) |
         ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

__device__ __forceinline__ void wgmma_fence()
{
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int kPending> __device__ __forceinline__ void wgmma_wait()
{
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

/* Keeps the compiler from moving reads or writes of the accumulators across the asynchronous
 * MMAs (their registers change between the issue and the wait). */
__device__ __forceinline__ void fence_accumulators(float (&d)[64])
{
#pragma unroll
  for (int i = 0; i < 64; i++)
    asm volatile("" : "+f"(d[i])::"memory");
}

/* D(64 x 128, float) += A(64 x 16, K-major) . B(128 x 16, K-major)^T, both FP16 in shared memory */
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b)
{
  asm volatile("{\n"
               ".reg .pred p;\n"
               "setp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
               " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
               " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
               " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},"
               " %64, %65, p, 1, 1, 0, 0;\n"
               "}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
                 "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
                 "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                 "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
                 "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
                 "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
                 "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
                 "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
                 "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
                 "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(desc_a), "l"(desc_b), "r"(1));
}

/* b where up, else a: a choice between values (one between two array elements' places made the
 * compiler keep the arrays in local memory). */
__device__ __forceinline__ __half2 pick(bool up, __half2 a, __half2 b)
{
  return up ? b : a;
}

/*
 * Grid: (ceil(n_cols / 128), ceil(n_rows / 128)); block: 1 warpgroup, see the file comment.
 * map_q, map_r: the TMA maps of g.q_rows and g.r_rows (launch_fused_wgmma).
 */
template <int kKind>
__global__ void __launch_bounds__(kThreads, 3)
    fused_wgmma_kernel(const __grid_constant__ SelectState st, const __grid_constant__ TileGeom g,
                       const __grid_constant__ CUtensorMap map_q,
                       const __grid_constant__ CUtensorMap map_r)
{
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[kStages];
  __shared__ unsigned char line_flags[2 * kFusedBlock];
  __shared__ float line_thresholds[2 * kFusedBlock];
  const BlockLines lines = {line_flags, line_flags + kFusedBlock, line_thresholds,
                            line_thresholds + kFusedBlock};
  const uint32_t raw = shared_address(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char *smem = smem_raw + (base - raw);
  const int m0 = blockIdx.y * kFusedBlock, n0 = blockIdx.x * kFusedBlock;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_k = (g.dpad + kBlockK - 1) / kBlockK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; s++)
      barrier_init(shared_address(&full[s]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  lines.col_flag[threadIdx.x] = 0; /* a column's flag is only ever set (by any warp) */
  __syncthreads();
  if (threadIdx.x == 0)
    for (int s = 0; s < kStages && s < n_k; s++)
      load_stage(base + s * kStageBytes, shared_address(&full[s]), map_q, map_r, m0, n0, s);

  /* this thread's rows: row_base + 8 h + 64 half (q = 2 half + h); its columns nt, e as above;
   * the column pairs whose maxima over the warp's rows this lane tests: nt0 and nt0 + 1 (see the
   * columns' test below). The thresholds are read while the operands are on their way. */
  const int row_base = warp * 16 + (lane >> 2);
  const int col_base = (lane & 3) * 2;
  const int nt0 = (lane & 16 ? 8 : 0) + (lane & 8 ? 4 : 0) + (lane & 4 ? 2 : 0);
  const float inf = __int_as_float(0x7f800000);
  float row_thr[4], col_thr[4];
#pragma unroll
  for (int q = 0; q < 4; q++) {
    const int i = m0 + row_base + (q & 1) * 8 + (q >> 1) * 64;
    row_thr[q] = i < g.n_rows ? st.thr[g.row_state0 + i] : -inf;
  }
#pragma unroll
  for (int u = 0; u < 4; u++) {
    const int j = n0 + (nt0 + (u >> 1)) * 8 + col_base + (u & 1);
    col_thr[u] = g.do_cols && j < g.n_cols ? st.thr[g.col_state0 + j] : -inf;
  }

  float acc0[64], acc1[64];
#pragma unroll
  for (int i = 0; i < 64; i++) {
    acc0[i] = 0.0f;
    acc1[i] = 0.0f;
  }
  /* One K step's MMAs in flight behind the next: step kt's are issued, then the warpgroup waits
   * for step kt - 1's only, whose stage is refilled with step kt + 1. */
  for (int kt = 0; kt < n_k; kt++) {
    const int slot = kt % kStages;
    barrier_wait(shared_address(&full[slot]), (uint32_t)(kt / kStages) & 1u);
    const uint32_t stage = base + slot * kStageBytes;
    const uint32_t a = stage, b = stage + kOperandBytes;
    fence_accumulators(acc0);
    fence_accumulators(acc1);
    wgmma_fence();
    /* all 4 steps, also past dpad (zeros): a data-dependent branch between the MMAs makes ptxas
     * wait for each one before the next (its warning C7519), which costs more than the padding */
#pragma unroll
    for (int s = 0; s < kBlockK / 16; s++) {
      wgmma_m64n128k16(acc0, smem_descriptor(a + s * 32), smem_descriptor(b + s * 32));
      wgmma_m64n128k16(acc1, smem_descriptor(a + 64 * 128 + s * 32), smem_descriptor(b + s * 32));
    }
    wgmma_commit();
    wgmma_wait<1>();
    fence_accumulators(acc0);
    fence_accumulators(acc1);
    /* step kt - 1's MMAs are done: wgmma is one operation of the warpgroup, so thread 0's wait
     * stands for its warps (the assumption CUTLASS's consumer_release makes, one thread a
     * warpgroup after its wait); no barrier before the copy, whose issue is latency-critical */
    const int refill = kt - 1 + kStages;
    if (threadIdx.x == 0 && kt >= 1 && refill < n_k) {
      const int prev = (kt - 1) % kStages;
      load_stage(base + prev * kStageBytes, shared_address(&full[prev]), map_q, map_r, m0, n0,
                 refill);
    }
  }
  wgmma_wait<0>();
  fence_accumulators(acc0);
  fence_accumulators(acc1);

  /* NaN marks products outside the tile: __hmax2 and fmaxf skip it, every comparison fails */
  const float nan = __int_as_float(0x7fc00000);
  if (m0 + kFusedBlock > g.n_rows || n0 + kFusedBlock > g.n_cols) {
#pragma unroll
    for (int i = 0; i < 64; i++) {
      const int il = row_base + ((i >> 1) & 1) * 8, jl = (i >> 2) * 8 + col_base + (i & 1);
      if (n0 + jl >= g.n_cols || m0 + il >= g.n_rows)
        acc0[i] = nan;
      if (n0 + jl >= g.n_cols || m0 + il + 64 >= g.n_rows)
        acc1[i] = nan;
    }
  }
  /*
   * The tests on the products as floats: rounding to a half (after alpha, a power of two) is
   * monotone and commutes with |.|, so a line's largest half value, the one cuBLAS's half tile
   * would hold, is its largest product rounded; only the maxima are rounded. (Rounding every
   * product first, then testing halves, took 64 multiplies and 32 conversions a thread on every
   * block where only the blocks with a pass need the halves, for their copy below.)
   */
  const float alpha = g.alpha;
  /* Rows: a row's 128 products are in the 4 lanes of one quad of one warp. */
  bool row_hit[4];
#pragma unroll
  for (int q = 0; q < 4; q++) {
    const int h = q & 1;
    const float *acc = q >> 1 ? acc1 : acc0;
    float best = magnitude<kKind>(acc[h * 2]);
#pragma unroll
    for (int i = 1; i < 32; i++)
      best = fmaxf(best, magnitude<kKind>(acc[(i >> 1) * 4 + h * 2 + (i & 1)]));
    best = fmaxf(best, __shfl_xor_sync(kFullMask, best, 1));
    best = fmaxf(best, __shfl_xor_sync(kFullMask, best, 2));
    row_hit[q] = 1.0f - __half2float(__float2half_rn(best * alpha)) * g.tile_scale < row_thr[q];
  }
  if ((lane & 3) == 0) {
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const int il = row_base + (q & 1) * 8 + (q >> 1) * 64;
      lines.row_flag[il] = row_hit[q];
      lines.row_thr[il] = row_thr[q];
    }
  }
  /*
   * Columns: each warp's largest product of each column over its 32 rows, as halves in column
   * pairs (nt), reduced over the 8 lanes of a column pair by halving exchanges (a lane keeps half
   * its pairs at each of 3 steps: 14 shuffles instead of 48). A column passes when some warp's
   * maximum passes (the test is monotone in the product), so each warp flags the columns it
   * passes itself: no reduction over the warps, and one barrier after the tests. The threshold
   * stored with a flag is the one that warp read (warps may have read different values while a
   * merge lowered it: any of them is a value it had, see BlockLines).
   */
  bool col_hit = false;
  if (g.do_cols) {
    __half2 c[16];
#pragma unroll
    for (int nt = 0; nt < 16; nt++)
      c[nt] = __floats2half2_rn(
          fmaxf(fmaxf(magnitude<kKind>(acc0[nt * 4]), magnitude<kKind>(acc0[nt * 4 + 2])),
                fmaxf(magnitude<kKind>(acc1[nt * 4]), magnitude<kKind>(acc1[nt * 4 + 2]))) *
              alpha,
          fmaxf(fmaxf(magnitude<kKind>(acc0[nt * 4 + 1]), magnitude<kKind>(acc0[nt * 4 + 3])),
                fmaxf(magnitude<kKind>(acc1[nt * 4 + 1]), magnitude<kKind>(acc1[nt * 4 + 3]))) *
              alpha);
    const bool up16 = lane & 16, up8 = lane & 8, up4 = lane & 4;
    __half2 c8[8], c4[4], c2[2];
#pragma unroll
    for (int i = 0; i < 8; i++)
      c8[i] = __hmax2(pick(up16, c[i], c[i + 8]),
                      __shfl_xor_sync(kFullMask, pick(up16, c[i + 8], c[i]), 16));
#pragma unroll
    for (int i = 0; i < 4; i++)
      c4[i] = __hmax2(pick(up8, c8[i], c8[i + 4]),
                      __shfl_xor_sync(kFullMask, pick(up8, c8[i + 4], c8[i]), 8));
#pragma unroll
    for (int i = 0; i < 2; i++)
      c2[i] = __hmax2(pick(up4, c4[i], c4[i + 2]),
                      __shfl_xor_sync(kFullMask, pick(up4, c4[i + 2], c4[i]), 4));
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const float best = u & 1 ? __high2float(c2[u >> 1]) : __low2float(c2[u >> 1]);
      if (1.0f - best * g.tile_scale < col_thr[u]) {
        const int jl = (nt0 + (u >> 1)) * 8 + col_base + (u & 1);
        lines.col_flag[jl] = 1;
        lines.col_thr[jl] = col_thr[u];
        col_hit = true;
      }
    }
  }
  /* every warp is done with the stages too: the copy may overwrite them */
  if (!__syncthreads_or(row_hit[0] || row_hit[1] || row_hit[2] || row_hit[3] || col_hit))
    return;

  /* Lines with a pass: the products go to shared memory as the half tile cuBLAS would write. */
  __half *copy = reinterpret_cast<__half *>(smem);
#pragma unroll
  for (int nt = 0; nt < 16; nt++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      *reinterpret_cast<__half2 *>(copy + (row_base + h * 8) * kCopyPitch + nt * 8 + col_base) =
          __floats2half2_rn(acc0[nt * 4 + h * 2] * alpha, acc0[nt * 4 + h * 2 + 1] * alpha);
      *reinterpret_cast<__half2 *>(copy + (row_base + 64 + h * 8) * kCopyPitch + nt * 8 +
                                   col_base) =
          __floats2half2_rn(acc1[nt * 4 + h * 2] * alpha, acc1[nt * 4 + h * 2 + 1] * alpha);
    }
  const BlockPairs kept = block_pairs_at(smem, kStages * kStageBytes);
  if (threadIdx.x == 0)
    kept.count[0] = 0;
  __syncthreads();
  exact_passes<kKind, kThreads>(g, copy, lines, m0, n0, kept);
  flush_pairs(g, kept);
}

/* The driver's cuTensorMapEncodeTiled, through the runtime (no link to libcuda), or NULL. */
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(void)
{
  static std::once_flag once;
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  std::call_once(once, [] {
    encode =
        reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(driver_entry("cuTensorMapEncodeTiled"));
  });
  return encode;
}

/* The TMA map of n rows of dpad halves at rows (16-byte aligned, dpad a multiple of 8), of which
 * the first dread (a multiple of 8) are read: boxes of 128 rows x 64 halves in the 128-byte
 * swizzle, zeros outside. The halves past dread are the rows' zero padding: the copies fill them
 * without reading them (d = 295: 24 of every 320 halves). */
bool encode_rows(CUtensorMap *map, const void *rows, int n, int dpad, int dread)
{
  const cuuint64_t dims[2] = {(cuuint64_t)dread, (cuuint64_t)n};
  const cuuint64_t strides[1] = {(cuuint64_t)dpad * sizeof(__half)};
  const cuuint32_t box[2] = {kBlockK, kFusedBlock};
  const cuuint32_t element_strides[2] = {1, 1};
  return tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void *>(rows),
                              dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* Whether the kernel runs on the current device (compute capability 9.0: sm_90a code only; the
 * driver's TMA maps), with its shared memory granted; asked once per device. */
bool wgmma_ready(void)
{
  static int state[64]; /* 0 unknown, 1 ready, 2 not */
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64)
    return false;
  if (__atomic_load_n(&state[device], __ATOMIC_RELAXED) == 0) {
    int major = 0, minor = 0;
    bool ok =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
        major == 9 && minor == 0 && tensor_map_encoder() != nullptr;
    /* 65 KiB of dynamic shared memory, and all of L1 as shared memory so that three blocks fit
     * an SM (the exact passes' reads are few) */
    for (auto kernel :
         {fused_wgmma_kernel<KNNWB_SCORE_DOT>, fused_wgmma_kernel<KNNWB_SCORE_ABS_DOT>})
      ok = ok &&
           cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes) ==
               cudaSuccess &&
           cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                cudaSharedmemCarveoutMaxShared) == cudaSuccess;

    if (!ok)
      (void)cudaGetLastError(); /* a refused attribute is an answer, not a pending error */
    __atomic_store_n(&state[device], ok ? 1 : 2, __ATOMIC_RELAXED);
  }
  return __atomic_load_n(&state[device], __ATOMIC_RELAXED) == 1;
}

} // namespace

cudaError_t launch_fused_wgmma(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (!wgmma_ready())
    return cudaErrorNotSupported;
  /* the maps travel as kernel parameters (__grid_constant__): nothing to free */
  CUtensorMap map_q, map_r;
  const int dread = geom.dread > 0 ? geom.dread : geom.dpad;
  if (!encode_rows(&map_q, geom.q_rows, geom.n_rows, geom.dpad, dread) ||
      !encode_rows(&map_r, geom.r_rows, geom.n_cols, geom.dpad, dread))
    return cudaErrorInvalidValue;
  const dim3 grid((geom.n_cols + kFusedBlock - 1) / kFusedBlock,
                  (geom.n_rows + kFusedBlock - 1) / kFusedBlock);
  const cudaError_t err = clear_fused_pairs(geom, stream);
  if (err != cudaSuccess)
    return err;
  if (geom.kind == KNNWB_SCORE_ABS_DOT)
    fused_wgmma_kernel<KNNWB_SCORE_ABS_DOT>
        <<<grid, kThreads, kSmemBytes, stream>>>(state, geom, map_q, map_r);
  else
    fused_wgmma_kernel<KNNWB_SCORE_DOT>
        <<<grid, kThreads, kSmemBytes, stream>>>(state, geom, map_q, map_r);
  return cudaGetLastError();
}

#else

cudaError_t launch_fused_wgmma(const SelectState &, const TileGeom &, cudaStream_t)
{
  return cudaErrorNotSupported;
}

#endif

} // namespace knnwb_cuda
