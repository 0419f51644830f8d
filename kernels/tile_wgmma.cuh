/*
 * Hopper's primitives that the fused tiles' wgmma kernels share (tile_fused_wgmma.cu: a block of
 * 128 x 128 products; tile_fused_rows.cu: a block's 128 rows against a strip of columns): the
 * mbarriers that the Tensor Memory Accelerator's copies complete, the copies themselves, wgmma's
 * shared-memory descriptors and its m64n128k16 instruction, and the TMA map of a tile's FP16 rows.
 * Operands are boxes of 128 rows x 64 halves (128 bytes, the 128-byte swizzle: 16-byte chunk c of
 * row r at chunk c ^ (r mod 8), boxes 1024-byte aligned), which the copies write and wgmma's
 * descriptors read. Included by those files only, compiled for sm_90a alone (internal linkage in
 * each); empty unless KNNWB_WGMMA (the sm_90a objects).
 */
#pragma once

#include "tile_fused_common.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_fp16.h>
#include <mutex>

#if defined(KNNWB_WGMMA)
namespace knnwb_cuda
{
namespace
{

constexpr int kBlockK = 64;                              /* halves: a box's rows are 128 bytes */
constexpr int kOperandBytes = kFusedBlock * kBlockK * 2; /* one box: 16 KiB */

__device__ __forceinline__ void barrier_init(uint32_t bar, int count)
{
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

/* Makes the barriers' initialisation visible to the copies (after barrier_init, one thread). */
__device__ __forceinline__ void barrier_init_fence()
{
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* Arms the barrier's current phase for `bytes` of copies (this thread's arrival counts too). */
__device__ __forceinline__ void barrier_expect(uint32_t bar, int bytes)
{
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

/* One arrival on the barrier (no bytes). */
__device__ __forceinline__ void barrier_arrive(uint32_t bar)
{
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* Copies the box of rows row0.. and halves k0.. of map to shared memory at dst, completing bytes
 * on bar (rows and halves past the map arrive as zeros). */
__device__ __forceinline__ void copy_box(uint32_t dst, const CUtensorMap &map, int k0, int row0,
                                         uint32_t bar)
{
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(&map)), "r"(k0), "r"(row0), "r"(bar)
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

template <int kKind> __device__ __forceinline__ __half2 magnitude2(__half2 v)
{
  return kKind == KNNWB_SCORE_ABS_DOT ? __habs2(v) : v;
}

/* The larger of a pair's two halves as a float (NaN only when both are NaN). */
__device__ __forceinline__ float pair_max(__half2 v)
{
  return fmaxf(__low2float(v), __high2float(v));
}

/* The driver's cuTensorMapEncodeTiled, through the runtime (no link to libcuda), or NULL. */
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(void)
{
  static std::once_flag once;
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  std::call_once(once, [] {
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                             cudaEnableDefault, &found);
#else
    const cudaError_t err =
        cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found);
#endif
    if (err == cudaSuccess && found == cudaDriverEntryPointSuccess)
      encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    else
      (void)cudaGetLastError();
  });
  return encode;
}

/* The TMA map of n rows of dpad halves at rows (16-byte aligned, dpad a multiple of 8): boxes of
 * 128 rows x 64 halves in the 128-byte swizzle, zeros outside. */
bool encode_rows(CUtensorMap *map, const void *rows, int n, int dpad)
{
  const cuuint64_t dims[2] = {(cuuint64_t)dpad, (cuuint64_t)n};
  const cuuint64_t strides[1] = {(cuuint64_t)dpad * sizeof(__half)};
  const cuuint32_t box[2] = {kBlockK, kFusedBlock};
  const cuuint32_t element_strides[2] = {1, 1};
  return tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void *>(rows),
                              dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

} // namespace
} // namespace knnwb_cuda
#endif
