/*
 * The k-means labels of the partitioned search's choice on a GPU (knnwb_cuda_labels_*; core's own
 * are core/partition/partition_build.c's). The choice clusters a sample of at most 32,768 rows in
 * the bound space with k-means, several cluster counts in turn; with many centroids each Lloyd
 * round is all of the sample's products with them: 1,024 centroids took 0.37 s of a 10,000,000-row
 * command's choice on 16 cores, 915 centroids 0.30 s at 30,000,000 rows.
 *
 * Exactness: the labels must be core's, bit for bit (the centroids that follow, and the ranks of an
 * MPI job, which compare their partitions, depend on them), so each product is summed over the
 * components in order with one multiply and one add (partition_dots.c), and each score is the
 * centroid's squared norm less twice the product, the lowest taken with ties to the lower centroid
 * (partition_build.c's knnwb_partition_nearest, whose minimum in lanes picks the same centroid).
 * The _rn intrinsics keep nvcc from contracting them into fused multiply-adds, as core builds with
 * -ffp-contract=off.
 *
 * One thread a row; a block's rows are staged in shared memory transposed, so that a warp's reads
 * of component t are one line; every thread of a warp reads the same centroid value at once.
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <new>

#include "cuda_check.h"
#include "knnwb_kernels.h"

struct KnnwbCudaLabels {
  int device = -1;
  size_t rows = 0, dim = 0, max_m = 0;
  cudaStream_t stream = nullptr;
  double *values = nullptr, *centroid = nullptr, *centroid_sq = nullptr;
  int32_t *label = nullptr;
};

namespace
{

constexpr int kThreads = 128;
constexpr size_t kSharedBytes = (size_t)96 << 10;

__global__ void labels_kernel(const double *values, int64_t rows, int64_t dim,
                              const double *centroid, const double *centroid_sq, int64_t m,
                              int32_t *label, bool staged)
{
  extern __shared__ double rows_t[];
  const int64_t first = (int64_t)blockIdx.x * blockDim.x;
  const int64_t r = first + threadIdx.x;
  if (staged) {
    const int64_t count = min((int64_t)blockDim.x, rows - first);
    for (int64_t e = threadIdx.x; e < count * dim; e += blockDim.x)
      rows_t[(e % dim) * blockDim.x + e / dim] = values[first * dim + e];
    __syncthreads();
  }
  if (r >= rows)
    return;
  const double *x = staged ? rows_t + threadIdx.x : values + r * dim;
  const int64_t stride = staged ? blockDim.x : 1;
  double lowest = HUGE_VAL;
  int64_t nearest = 0;
  for (int64_t j = 0; j < m; j++) {
    const double *c = centroid + j * dim;
    double s = 0.0;
    for (int64_t t = 0; t < dim; t++)
      s = __dadd_rn(s, __dmul_rn(x[t * stride], c[t]));
    const double score = __dsub_rn(centroid_sq[j], __dmul_rn(2.0, s));
    if (score < lowest) {
      lowest = score;
      nearest = j;
    }
  }
  label[r] = (int32_t)nearest;
}

void labels_release(KnnwbCudaLabels *l)
{
  if (l->device >= 0 && cudaSetDevice(l->device) == cudaSuccess) {
    cudaFree(l->values);
    cudaFree(l->centroid);
    cudaFree(l->centroid_sq);
    cudaFree(l->label);
    if (l->stream != nullptr)
      cudaStreamDestroy(l->stream);
  }
  delete l;
}

int labels_setup(KnnwbCudaLabels *l, const double *values, char *message, size_t message_size)
{
  KNNWB_CUDA_CHECK_STATUS(cudaSetDevice(l->device));
  KNNWB_CUDA_CHECK_STATUS(cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking));
  KNNWB_CUDA_CHECK_STATUS(cudaMalloc(&l->values, l->rows * l->dim * sizeof(double)));
  KNNWB_CUDA_CHECK_STATUS(cudaMalloc(&l->centroid, l->max_m * l->dim * sizeof(double)));
  KNNWB_CUDA_CHECK_STATUS(cudaMalloc(&l->centroid_sq, l->max_m * sizeof(double)));
  KNNWB_CUDA_CHECK_STATUS(cudaMalloc(&l->label, l->rows * sizeof(int32_t)));
  KNNWB_CUDA_CHECK_STATUS(cudaMemcpyAsync(l->values, values, l->rows * l->dim * sizeof(double),
                                          cudaMemcpyHostToDevice, l->stream));
  KNNWB_CUDA_CHECK_STATUS(cudaStreamSynchronize(l->stream));
  return KNNWB_KERNELS_OK;
}

} // namespace

extern "C" KnnwbCudaLabels *knnwb_cuda_labels_new(const double *values, size_t rows, size_t dim,
                                                  size_t max_m, int device, char *message,
                                                  size_t message_size)
{
  if (rows == 0 || dim == 0 || max_m == 0 || rows > (size_t)INT32_MAX) {
    snprintf(message, message_size, "no rows, columns or centroids to label");
    return nullptr;
  }
  KnnwbCudaLabels *l = new (std::nothrow) KnnwbCudaLabels;
  if (l == nullptr) {
    snprintf(message, message_size, "out of host memory");
    return nullptr;
  }
  l->device = device;
  l->rows = rows;
  l->dim = dim;
  l->max_m = max_m;
  if (labels_setup(l, values, message, message_size) != KNNWB_KERNELS_OK) {
    labels_release(l);
    return nullptr;
  }
  return l;
}

extern "C" int knnwb_cuda_labels_run(KnnwbCudaLabels *l, const double *centroid,
                                     const double *centroid_sq, size_t m, int32_t *label,
                                     char *message, size_t message_size)
{
  if (m == 0 || m > l->max_m) {
    snprintf(message, message_size, "%zu centroids where at most %zu were planned", m, l->max_m);
    return KNNWB_KERNELS_ERROR;
  }
  KNNWB_CUDA_CHECK_STATUS(cudaSetDevice(l->device));
  KNNWB_CUDA_CHECK_STATUS(cudaMemcpyAsync(l->centroid, centroid, m * l->dim * sizeof(double),
                                          cudaMemcpyHostToDevice, l->stream));
  KNNWB_CUDA_CHECK_STATUS(cudaMemcpyAsync(l->centroid_sq, centroid_sq, m * sizeof(double),
                                          cudaMemcpyHostToDevice, l->stream));
  /* (a block's rows transposed in shared memory where 32 of them fit; wider rows in place) */
  const size_t fit = kSharedBytes / (l->dim * sizeof(double));
  const int threads = fit >= 32 ? (int)std::min((size_t)kThreads, fit / 32 * 32) : kThreads;
  const size_t shared = fit >= 32 ? (size_t)threads * l->dim * sizeof(double) : 0;
  if (shared > 48 * 1024)
    KNNWB_CUDA_CHECK_STATUS(cudaFuncSetAttribute(
        labels_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared));
  const unsigned blocks = (unsigned)((l->rows + threads - 1) / threads);
  labels_kernel<<<blocks, threads, shared, l->stream>>>(
      l->values, (int64_t)l->rows, (int64_t)l->dim, l->centroid, l->centroid_sq, (int64_t)m,
      l->label, shared > 0);
  KNNWB_CUDA_CHECK_STATUS(cudaGetLastError());
  KNNWB_CUDA_CHECK_STATUS(cudaMemcpyAsync(label, l->label, l->rows * sizeof(int32_t),
                                          cudaMemcpyDeviceToHost, l->stream));
  KNNWB_CUDA_CHECK_STATUS(cudaStreamSynchronize(l->stream));
  return KNNWB_KERNELS_OK;
}

extern "C" void knnwb_cuda_labels_free(KnnwbCudaLabels *l)
{
  if (l != nullptr)
    labels_release(l);
}
