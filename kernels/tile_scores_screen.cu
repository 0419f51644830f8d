/*
 * The rows of the FP16 screen (tile_scores.h): float32 rows scaled by a power of two (exact) and
 * rounded to half precision, the padding columns zeroed, for cublasGemmEx on the tensor cores.
 */
#include "tile_scores.h"

#include <cuda_fp16.h>

#include <cmath>

namespace knnwb_cuda
{
namespace
{

/* One thread per pair of columns of a destination row: grid covers n * dpad / 2 pairs. */
__global__ void rows_to_half_kernel(const float *__restrict__ src, size_t src_pitch, size_t n,
                                    int dim, __half2 *__restrict__ dst, int half_pairs, float scale)
{
  const size_t pair = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (pair >= n * (size_t)half_pairs)
    return;
  const size_t i = pair / (size_t)half_pairs;
  const int j = (int)(pair % (size_t)half_pairs) * 2;
  const float *row = src + i * src_pitch;
  const float a = j < dim ? row[j] * scale : 0.0f;
  const float b = j + 1 < dim ? row[j + 1] * scale : 0.0f;
  dst[pair] = __floats2half2_rn(a, b);
}

} // namespace

int screen_scale_exponent(double row_norm)
{
  if (!(row_norm > 0.0) || !std::isfinite(row_norm))
    return 0;
  int exponent = 0;
  std::frexp(row_norm, &exponent); /* row_norm <= 2^exponent */
  return 14 - exponent;
}

cudaError_t launch_rows_to_half(const float *src, size_t src_pitch, size_t n, int dim, void *dst,
                                int dpad, int scale_exponent, cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  const int half_pairs = dpad / 2;
  const size_t pairs = n * (size_t)half_pairs;
  const int threads = 256;
  const size_t blocks = (pairs + threads - 1) / threads;
  rows_to_half_kernel<<<(unsigned)blocks, threads, 0, stream>>>(
      src, src_pitch, n, dim, (__half2 *)dst, half_pairs, std::ldexp(1.0f, scale_exponent));
  return cudaGetLastError();
}

} // namespace knnwb_cuda
