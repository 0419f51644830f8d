/*
 * Whether a tile's products that stay in L2 would make the tile loop cheaper: a 16,384^2 half tile
 * of products (K = 320 by default, d = 295 padded as the tile GEMM pads it) made by cuBLAS
 * (cublasGemmEx, half output, float accumulation) and read back by a streaming kernel (one
 * maximum a product, as the filter's fast test), the whole tile at once against strips of W
 * columns in a ring of two buffers (16,384 x 1,024 halves are 32 MiB; the H200's L2 is 50 MiB).
 * Prints milliseconds a 16,384^2 tile for the GEMMs alone, the reads alone, and both on two
 * streams, each strip's read after its GEMM and each buffer's next GEMM after its read.
 *
 * Measured (one H200, 2026-12-01), ms a tile at K = 320 for strips of 16,384 / 4,096 / 2,048 /
 * 1,024 / 512 columns: GEMM 0.300 / 0.320 / 0.342 / 0.401 / 0.449, read 0.124 / 0.137 / 0.153 /
 * 0.178 / 0.139, both 0.427 / 0.467 / 0.515 / 0.569 / 0.573: the narrower GEMMs lose more than
 * reads from L2 gain, so the tile loop keeps whole tiles (docs/performance-gpu.md).
 *
 * Usage: bench_l2_strips [K]
 */
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "bench_check.h"

namespace
{

constexpr int kN = 16384, kReps = 20, kSlots = 2, kEvents = 64;

__global__ void generate(__half *h, size_t n, unsigned seed)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    h[i] = __float2half((float)(x & 0xffff) / 65536.0f - 0.5f);
  }
}

/* Reads n8 groups of 8 halves, one maximum each; writes only when the result is impossible, so
 * that the reads are not optimised away. */
__global__ void read_tile(const __half *c, size_t n8, __half2 *sink)
{
  __half2 m = __float2half2_rn(-60000.0f);
  const uint4 *p = reinterpret_cast<const uint4 *>(c);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8;
       i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = p[i];
    const __half2 *h = reinterpret_cast<const __half2 *>(&v);
    m = __hmax2(m, __hmax2(__hmax2(h[0], h[1]), __hmax2(h[2], h[3])));
  }
  if (__hlt(__low2half(m), __float2half(-50000.0f)))
    sink[threadIdx.x] = m;
}

} // namespace

int main(int argc, char **argv)
{
  const int k = argc > 1 ? atoi(argv[1]) : 320;
  if (k <= 0 || k % 8 != 0) {
    fprintf(stderr, "K must be a positive multiple of 8\n");
    return 2;
  }
  __half *a, *b, *c;
  __half2 *sink;
  CHECK_CUDA(cudaMalloc(&a, (size_t)kN * k * sizeof(__half)));
  CHECK_CUDA(cudaMalloc(&b, (size_t)kN * k * sizeof(__half)));
  CHECK_CUDA(cudaMalloc(&c, (size_t)kSlots * kN * kN * sizeof(__half)));
  CHECK_CUDA(cudaMalloc(&sink, 4096));
  generate<<<1024, 256>>>(a, (size_t)kN * k, 1);
  generate<<<1024, 256>>>(b, (size_t)kN * k, 2);
  CHECK_CUDA(cudaGetLastError());
  cublasHandle_t blas;
  CHECK_BLAS(cublasCreate(&blas));
  cudaStream_t gemm, read;
  CHECK_CUDA(cudaStreamCreateWithFlags(&gemm, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&read, cudaStreamNonBlocking));
  cudaEvent_t start, stop, made[kEvents], done[kEvents];
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int e = 0; e < kEvents; e++) {
    CHECK_CUDA(cudaEventCreateWithFlags(&made[e], cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&done[e], cudaEventDisableTiming));
  }
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const float alpha = 1.0f / 512, beta = 0.0f;
  const int widths[] = {16384, 4096, 2048, 1024, 512};
  static const char *const modes[] = {"gemm", "read", "both"};
  CHECK_BLAS(cublasSetStream(blas, gemm));
  for (int mode = 0; mode < 3; mode++)
    for (int w : widths) {
      const int strips = kN / w;
      float ms = 0.0f;
      for (int pass = 0; pass < 2; pass++) { /* the first pass warms up */
        CHECK_CUDA(cudaDeviceSynchronize());
        CHECK_CUDA(cudaEventRecord(start, gemm));
        CHECK_CUDA(cudaStreamWaitEvent(read, start, 0));
        for (int q = 0; q < kReps * strips; q++) {
          const int s = q % strips, e = q % kEvents;
          __half *out = c + (size_t)(q % kSlots) * kN * w;
          if (mode != 1) {
            if (mode == 2 && q >= kSlots)
              CHECK_CUDA(cudaStreamWaitEvent(gemm, done[(q - kSlots) % kEvents], 0));
            CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, kN, w, k, &alpha, a, CUDA_R_16F,
                                    k, b + (size_t)s * w * k, CUDA_R_16F, k, &beta, out, CUDA_R_16F,
                                    kN, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            CHECK_CUDA(cudaEventRecord(made[e], gemm));
          }
          if (mode != 0) {
            if (mode == 2)
              CHECK_CUDA(cudaStreamWaitEvent(read, made[e], 0));
            read_tile<<<sms * 8, 256, 0, read>>>(out, (size_t)kN * w / 8, sink);
            CHECK_CUDA(cudaGetLastError());
            CHECK_CUDA(cudaEventRecord(done[e], read));
          }
        }
        CHECK_CUDA(cudaEventRecord(stop, read));
        CHECK_CUDA(cudaStreamWaitEvent(gemm, stop, 0));
        CHECK_CUDA(cudaEventRecord(stop, gemm));
        CHECK_CUDA(cudaEventSynchronize(stop));
        CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
      }
      printf("K %d %s, strips of %5d columns: %.3f ms a 16384^2 tile\n", k, modes[mode], w,
             ms / kReps);
    }
  cublasDestroy(blas);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaFree(sink);
  return 0;
}
