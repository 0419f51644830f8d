/*
 * Manhattan distance tiles (no GEMM form): the shared-memory tiled kernel of Chang et al. (seed
 * 002), register-blocked like an SGEMM so each loaded value is used 8 times from registers: a 128 x
 * 128 output block per 256 threads, 8 x 8 outputs per thread, the feature dimension in steps of 8.
 */
#include "select_internal.h"

namespace knnwb_cuda
{
namespace
{

constexpr int kBlock = 128;
constexpr int kStep = 8;
constexpr int kThreads = 256;

/*
 * q: n_q x dpad, r: n_r x dpad (row-major, zero padded, dpad % 8 == 0).
 * out[i*ld + j] for i < n_q and j < ceil(n_r / 128) * 128 (columns past n_r get garbage-free
 * values of zero rows, never read as candidates).
 * Grid: (ceil(n_r / 128), ceil(n_q / 128)), block 256.
 */
__global__ void __launch_bounds__(kThreads)
    l1_tile_kernel(const float *__restrict__ q, int n_q, const float *__restrict__ r, int n_r,
                   int dpad, float *__restrict__ out, size_t ld)
{
  __shared__ __align__(16) float qs[kStep][kBlock + 4];
  __shared__ __align__(16) float rs[kStep][kBlock + 4];
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int i0 = blockIdx.y * kBlock, j0 = blockIdx.x * kBlock;
  /* loader: 128 rows x 8 features = 256 float4 per operand, one per thread */
  const int load_row = threadIdx.x >> 1, load_k = (threadIdx.x & 1) * 4;
  float acc[8][8];
#pragma unroll
  for (int a = 0; a < 8; a++)
#pragma unroll
    for (int b = 0; b < 8; b++)
      acc[a][b] = 0.0f;

  for (int k0 = 0; k0 < dpad; k0 += kStep) {
    float4 qv = make_float4(0.f, 0.f, 0.f, 0.f), rv = qv;
    if (i0 + load_row < n_q)
      qv = *reinterpret_cast<const float4 *>(q + (size_t)(i0 + load_row) * dpad + k0 + load_k);
    if (j0 + load_row < n_r)
      rv = *reinterpret_cast<const float4 *>(r + (size_t)(j0 + load_row) * dpad + k0 + load_k);
    __syncthreads();
    qs[load_k + 0][load_row] = qv.x;
    qs[load_k + 1][load_row] = qv.y;
    qs[load_k + 2][load_row] = qv.z;
    qs[load_k + 3][load_row] = qv.w;
    rs[load_k + 0][load_row] = rv.x;
    rs[load_k + 1][load_row] = rv.y;
    rs[load_k + 2][load_row] = rv.z;
    rs[load_k + 3][load_row] = rv.w;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kStep; k++) {
      float a[8], b[8];
      /* rows ty*4 .. +3 and 64 + ty*4 .. +3; columns likewise: conflict-free float4 reads */
      float4 a0 = *reinterpret_cast<const float4 *>(&qs[k][ty * 4]);
      float4 a1 = *reinterpret_cast<const float4 *>(&qs[k][64 + ty * 4]);
      float4 b0 = *reinterpret_cast<const float4 *>(&rs[k][tx * 4]);
      float4 b1 = *reinterpret_cast<const float4 *>(&rs[k][64 + tx * 4]);
      a[0] = a0.x, a[1] = a0.y, a[2] = a0.z, a[3] = a0.w;
      a[4] = a1.x, a[5] = a1.y, a[6] = a1.z, a[7] = a1.w;
      b[0] = b0.x, b[1] = b0.y, b[2] = b0.z, b[3] = b0.w;
      b[4] = b1.x, b[5] = b1.y, b[6] = b1.z, b[7] = b1.w;
#pragma unroll
      for (int x = 0; x < 8; x++)
#pragma unroll
        for (int y = 0; y < 8; y++)
          acc[x][y] += fabsf(a[x] - b[y]);
    }
  }
#pragma unroll
  for (int x = 0; x < 8; x++) {
    int i = i0 + (x < 4 ? ty * 4 + x : 64 + ty * 4 + x - 4);
    if (i >= n_q)
      continue;
    float *row = out + (size_t)i * ld + j0;
    *reinterpret_cast<float4 *>(row + tx * 4) =
        make_float4(acc[x][0], acc[x][1], acc[x][2], acc[x][3]);
    *reinterpret_cast<float4 *>(row + 64 + tx * 4) =
        make_float4(acc[x][4], acc[x][5], acc[x][6], acc[x][7]);
  }
}

} // namespace

cudaError_t launch_l1_tile(const float *q, int n_q, const float *r, int n_r, int dpad, float *out,
                           size_t ld, cudaStream_t stream)
{
  if (n_q <= 0 || n_r <= 0)
    return cudaSuccess;
  dim3 grid((n_r + kBlock - 1) / kBlock, (n_q + kBlock - 1) / kBlock);
  l1_tile_kernel<<<grid, kThreads, 0, stream>>>(q, n_q, r, n_r, dpad, out, ld);
  return cudaGetLastError();
}

} // namespace knnwb_cuda
