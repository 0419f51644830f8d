/*
 * Exact double-precision distances of selected candidates, on the device, bit for bit as core's
 * knnwb_pair_distance (core/engine/metric.c) computes them on the host: that function sums eight
 * lanes, lane t taking the products of columns t, t + 8, ... in order, combines the lanes as
 * ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)), adds the remaining d mod 8 columns summed in order
 * from zero, and finishes with IEEE division and square root. Here eight threads are the eight
 * lanes and a butterfly of shuffles combines them in the same tree (IEEE addition commutes exactly,
 * so every thread ends with the same bits). Every operation is an explicit round-to-nearest
 * intrinsic, which the compiler never contracts into an FMA: the host build uses -ffp-contract=off
 * for the same reason. The host therefore only sorts, and the graph stays identical to the CPU
 * backend's.
 */
#include "select_internal.h"

#include <knnwb_kernels.h>

#include <cuda_runtime.h>

namespace knnwb_cuda
{
namespace
{

constexpr int kLanes = 8;
constexpr int kThreads = 256;

__device__ __forceinline__ double lane_term(int kind, double x, double y, double mx, double my)
{
  switch (kind) {
  case KNNWB_EXACT_EUCLIDEAN: {
    double c = __dsub_rn(x, y);
    return __dmul_rn(c, c);
  }
  case KNNWB_EXACT_MANHATTAN:
    return fabs(__dsub_rn(x, y));
  default:
    return __dmul_rn(__dsub_rn(x, mx), __dsub_rn(y, my));
  }
}

/* One pair per group of eight threads: pair p = (query row query0 + p / kc, index[p]). */
__global__ void __launch_bounds__(kThreads)
    exact_distance_kernel(ExactRows e, const int64_t *index, long long n_pairs, int kc,
                          long long query0, double *out)
{
  const long long pair = ((long long)blockIdx.x * kThreads + threadIdx.x) / kLanes;
  const int lane = threadIdx.x % kLanes;
  const bool active = pair < n_pairs;
  const long long j = active ? index[pair] : -1;
  const bool valid = j >= 0;
  const long long q = query0 + (active ? pair / kc : 0);
  const int dim = e.dim, d8 = dim - dim % kLanes;
  double mx = 0.0, my = 0.0;
  if (valid && e.kind != KNNWB_EXACT_EUCLIDEAN && e.kind != KNNWB_EXACT_MANHATTAN) {
    mx = e.query_mean ? e.query_mean[q] : 0.0;
    my = e.reference_mean ? e.reference_mean[j] : 0.0;
  }
  const float *x = e.query + (valid ? q : 0) * (size_t)dim;
  const float *y = e.reference + (valid ? j : 0) * (size_t)dim;
  double acc = 0.0;
  if (valid)
    for (int c = lane; c < d8; c += kLanes)
      acc = __dadd_rn(acc, lane_term(e.kind, (double)__ldg(x + c), (double)__ldg(y + c), mx, my));
  /* lanes 2m and 2m+1, then pairs of pairs, then the halves: core's tree */
  for (int width = 1; width < kLanes; width <<= 1)
    acc = __dadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, width, kLanes));
  if (!active || lane != 0)
    return;
  if (!valid) {
    out[pair] = __longlong_as_double(0x7ff8000000000000LL); /* NaN: no candidate */
    return;
  }
  double tail = 0.0;
  for (int c = d8; c < dim; c++)
    tail = __dadd_rn(tail, lane_term(e.kind, (double)x[c], (double)y[c], mx, my));
  const double sum = __dadd_rn(acc, tail);
  double result;
  switch (e.kind) {
  case KNNWB_EXACT_EUCLIDEAN:
    result = __dsqrt_rn(sum);
    break;
  case KNNWB_EXACT_MANHATTAN:
    result = sum;
    break;
  default: {
    const double sx = e.query_squares ? e.query_squares[q] : 0.0;
    const double sy = e.reference_squares ? e.reference_squares[j] : 0.0;
    const double norms = __dsqrt_rn(__dmul_rn(sx, sy));
    double r = norms > 0.0 ? __ddiv_rn(sum, norms) : 0.0;
    r = r > 1.0 ? 1.0 : (r < -1.0 ? -1.0 : r);
    result = __dsub_rn(1.0, e.kind == KNNWB_EXACT_ABS_CORRELATION ? fabs(r) : r);
  }
  }
  out[pair] = result;
}

} // namespace

cudaError_t launch_exact_distances(const ExactRows &rows, const int64_t *index, size_t n_rows,
                                   int kc, size_t query0, double *out, cudaStream_t stream)
{
  const long long pairs = (long long)n_rows * kc;
  if (pairs == 0)
    return cudaSuccess;
  const long long blocks = (pairs * kLanes + kThreads - 1) / kThreads;
  exact_distance_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>(rows, index, pairs, kc,
                                                                   (long long)query0, out);
  return cudaGetLastError();
}

} // namespace knnwb_cuda
