/*
 * Core's refine of a row, on the device: the row's candidates (their exact distances already
 * computed by exact_distance.cu) sorted by (exact distance, index), cut to k, with the two numbers
 * core's certificate needs besides the k-th distance: the largest screened score among the
 * candidates and how many were valid. One block per row sorts it in shared memory (a bitonic
 * network over the next power of two, padding and invalid entries as (+inf, INT_MAX), which sort
 * last): for large k the host no longer receives kc (index, score, distance) triples per row nor
 * radix-sorts them, only the k it keeps (about 12.5 bytes per neighbour instead of 20 per
 * candidate: 35 GB -> 19 GB at 384,126 rows and k = 4,096).
 *
 * Same result as core/engine/refine.c's knnwb_refine_row with the backend's distances: both take
 * every valid candidate but the query row itself, order them by (distance, index) with no ties left
 * (the indices differ), and keep the first k; the worst score and the count are taken over the same
 * entries.
 */
#include "select_internal.h"

#include <cuda_runtime.h>

#include <climits>

namespace knnwb_cuda
{
namespace
{

/* Entries per row sorted in shared memory: 12 bytes each (distance, index). */
constexpr int kMinCapacity = 64;

int capacity_for(int kc)
{
  int cap = kMinCapacity;
  while (cap < kc)
    cap <<= 1;
  return cap;
}

__device__ __forceinline__ bool after(double da, int ia, double db, int ib)
{
  return da > db || (da == db && ia > ib);
}

/*
 * Row t = blockIdx.x of a chunk: index[t*kc ..] (int64), score[t*kc ..], distance[t*kc ..] in, and
 * (in place, the row's own slots only, after every thread has read them) out:
 *   ((int32_t *)index)[t*2kc + r] = the r-th neighbour's index (r < k; -1 past the valid ones),
 *   ((int32_t *)index)[t*2kc + k] = the worst score's bits, [.. + k + 1] = the valid count,
 *   distance[t*kc + r] = its distance (r < k; +inf past the valid ones).
 * self0 >= 0: the chunk's first query row in a self job (its own index is not a neighbour).
 */
__global__ void refine_rows_kernel(int64_t *index, const float *score, double *distance, int kc,
                                   int k, long long self0, const int *order, int cap)
{
  extern __shared__ double shared[];
  double *key = shared;
  int *item = (int *)(shared + cap);
  __shared__ float worst_part[32];
  __shared__ int count_part[32];
  const size_t row = blockIdx.x;
  const int64_t *in_index = index + row * kc;
  const float *in_score = score + row * kc;
  double *row_distance = distance + row * kc;
  long long self = self0 >= 0 ? self0 + (long long)row : -1;
  if (order != nullptr && self >= 0)
    self = order[self];
  float worst = -INFINITY;
  int count = 0;
  for (int i = threadIdx.x; i < cap; i += blockDim.x) {
    long long j = i < kc ? in_index[i] : -1;
    if (order != nullptr && j >= 0)
      j = order[j];
    bool valid = j >= 0 && j != self;
    if (j >= 0)
      worst = fmaxf(worst, in_score[i]);
    count += valid;
    key[i] = valid ? row_distance[i] : INFINITY;
    item[i] = valid ? (int)j : INT_MAX;
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    worst = fmaxf(worst, __shfl_xor_sync(0xffffffffu, worst, offset));
    count += __shfl_xor_sync(0xffffffffu, count, offset);
  }
  const int warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  if (threadIdx.x % 32 == 0) {
    worst_part[warp] = worst;
    count_part[warp] = count;
  }
  /* Bitonic network: blocks of size `size` sorted alternately up and down, merged by halving
   * strides; the last merge (size == cap) sorts everything up. */
  const int half = cap / 2;
  for (int size = 2; size <= cap; size <<= 1)
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      __syncthreads();
      for (int t = threadIdx.x; t < half; t += blockDim.x) {
        const int lo = 2 * t - (t & (stride - 1)), hi = lo + stride;
        const bool up = (lo & size) == 0;
        const double dl = key[lo], dh = key[hi];
        const int il = item[lo], ih = item[hi];
        if (after(dl, il, dh, ih) == up) {
          key[lo] = dh;
          key[hi] = dl;
          item[lo] = ih;
          item[hi] = il;
        }
      }
    }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; w++) {
      worst_part[0] = fmaxf(worst_part[0], worst_part[w]);
      count_part[0] += count_part[w];
    }
  }
  __syncthreads();
  const int valid = count_part[0];
  int32_t *out = (int32_t *)index + row * 2 * (size_t)kc;
  for (int r = threadIdx.x; r < k; r += blockDim.x) {
    const bool have = r < valid;
    out[r] = have ? item[r] : -1;
    row_distance[r] = have ? key[r] : INFINITY;
  }
  if (threadIdx.x == 0) {
    out[k] = __float_as_int(worst_part[0]);
    out[k + 1] = valid;
  }
}

} // namespace

int refine_kc_limit(void)
{
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  const size_t room = (size_t)optin > 1024 ? (size_t)optin - 1024 : 0;
  int cap = kMinCapacity;
  while ((size_t)cap * 2 * (sizeof(double) + sizeof(int)) <= room)
    cap <<= 1;
  return (size_t)cap * (sizeof(double) + sizeof(int)) <= room ? cap : 0;
}

cudaError_t prepare_refine_kernel(int kc)
{
  const size_t shared = (size_t)capacity_for(kc) * (sizeof(double) + sizeof(int));
  if (shared <= 48 * 1024 - 1024)
    return cudaSuccess;
  return cudaFuncSetAttribute(refine_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)shared);
}

cudaError_t launch_refine_rows(int64_t *index, const float *score, double *distance, int n_rows,
                               int kc, int k, long long self0, const int *order,
                               cudaStream_t stream)
{
  if (n_rows <= 0)
    return cudaSuccess;
  const int cap = capacity_for(kc);
  const int threads = cap / 2 < 1024 ? cap / 2 : 1024;
  const size_t shared = (size_t)cap * (sizeof(double) + sizeof(int));
  refine_rows_kernel<<<(unsigned)n_rows, threads, shared, stream>>>(index, score, distance, kc, k,
                                                                    self0, order, cap);
  return cudaGetLastError();
}

} // namespace knnwb_cuda
