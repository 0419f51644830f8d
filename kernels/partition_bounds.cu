/*
 * The partitioned search's bounds pass on a GPU (knnwb_cuda_partition_bounds; the CPU's pass is
 * core/partition/partition_visits.c). After the clusters' own lists, each row's k-th distance
 * bounds the groups it must still visit; with many cells (304 at 10,000,000 rows of overlapping
 * clusters) core's pass takes 2-4 s of products on the host, which a GPU makes in milliseconds.
 *
 * Exactness: the visits must be core's, bit for bit, so every value is computed with core's
 * operations in core's order: the bound-space row (partition_space.c's knnwb_partition_space_row),
 * its squared norm, each product summed over the components in order with one multiply and one
 * add (partition_dots.c), the triangle test and the lower bound (partition_visits.c,
 * partition_internal.h). The _rn intrinsics keep nvcc from contracting them into fused
 * multiply-adds (core builds with -ffp-contract=off); IEEE division and square root round as the
 * host's do. A row visits a group when any of its cells is left by both tests: the order in which
 * cells are tested and skipped changes nothing, so the CPU's ordered cells and this plain loop give
 * the same visits.
 *
 * One thread a row. The row is read again (from the cache) for every cell it tests, its
 * bound-space values recomputed on the way, the same bits each time, so no row is held in
 * registers whatever its width. Rows go through in chunks on two streams: one chunk's copies
 * overlap the other's kernel.
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>

#include "cuda_check.h"
#include "host_staging.h"
#include "knnwb_kernels.h"
#include "select_trace.h"

namespace
{

using knnwb_cuda::seconds_now;
using knnwb_cuda::trace_enabled;

/* Bytes of rows a chunk takes (twice, pinned on the host and on the GPU, for each of two). */
constexpr size_t kChunkBytes = (size_t)32 << 20;
/* Rows a block: the block's rows transposed in shared memory take at most kSharedBytes, with
 * fewer threads for wide rows; rows wider than 32 threads allow are read in place. */
constexpr int kThreads = 128;
constexpr size_t kSharedBytes = (size_t)160 << 10;
/* Host threads of a chunk's copy into pinned memory (host_staging.h's parallel_copy: CUDA's own
 * staging of pageable memory moved 6 GB/s). */
constexpr int kCopyThreads = 8;

struct BoundsArgs {
  const float *values;
  int64_t rows, dim;
  int space;
  const int32_t *cell;
  const double *limit;
  int64_t m, words;
  const double *centroid, *centroid_sq, *radius, *gap;
  const int32_t *group_of;
  double margin_factor;
  unsigned long long *visits;
  int *bad;
};

/* A job of either kind through the same chunks: the bounds (visits: words of bits a row), or the
 * assignment (two words a row, unpacked into cell and reach). */
struct RowsJob {
  KnnwbBoundsJob b;
  bool assign;
  int32_t *cell;
  double *reach;
};

/* Component t of the row in the bound space: knnwb_partition_space_row's v[t] (mean 0 and scale 1
 * leave a euclidean row's values as they are, but the plain space skips them). The row's values
 * lie `stride` floats apart (the block's rows transposed in shared memory, or 1 in place). */
__device__ __forceinline__ double space_value(const float *x, int64_t t, int64_t stride, int space,
                                              double mean, double scale)
{
  const double v = (double)x[t * stride];
  return space == KNNWB_BOUND_SPACE_PLAIN ? v : __dmul_rn(__dsub_rn(v, mean), scale);
}

/* The row's product with centroid c: knnwb_partition_row_dot's sum, in order. */
__device__ __forceinline__ double row_dot(const float *x, int64_t stride, const double *c,
                                          int64_t dim, int space, double mean, double scale)
{
  double s = 0.0;
  for (int64_t t = 0; t < dim; t++)
    s = __dadd_rn(s, __dmul_rn(space_value(x, t, stride, space, mean, scale), c[t]));
  return s;
}

/* knnwb_partition_pair_lower: sq is |v|^2 + |c|^2. */
__device__ __forceinline__ double pair_lower(int space, double sq, double dot, double factor)
{
  const double plain = __dsub_rn(sq, __dmul_rn(2.0, dot));
  double nearer = plain;
  if (space == KNNWB_BOUND_SPACE_ABS) {
    const double other = __dadd_rn(sq, __dmul_rn(2.0, dot));
    nearer = plain < other ? plain : other;
  }
  const double t = __dsub_rn(nearer, __dmul_rn(sq, factor));
  return __dsqrt_rn(t > 0.0 ? t : 0.0);
}

/* knnwb_partition_pair_bounds's upper bound. */
__device__ __forceinline__ double pair_upper(double sq, double dot, double factor)
{
  const double t = __dadd_rn(__dsub_rn(sq, __dmul_rn(2.0, dot)), __dmul_rn(sq, factor));
  return __dsqrt_rn(t > 0.0 ? t : 0.0);
}

/* partition_visits.c's knnwb_partition_triangle_rules_out, its sums in C's order. */
__device__ __forceinline__ bool triangle_rules_out(double gap, double reach, double radius,
                                                   double limit)
{
  const double left = __dsub_rn(__dsub_rn(gap, reach), radius);
  const double slack = __dmul_rn(1e-9, __dadd_rn(__dadd_rn(__dadd_rn(gap, reach), radius), limit));
  return __dsub_rn(left, slack) > limit;
}

/* The row's mean and scale (knnwb_partition_space_row) and squared norm (block_fill's); false for
 * a row with no direction or a value that is not finite. */
__device__ bool row_frame(const float *x, int64_t stride, int64_t dim, int space, double *mean,
                          double *scale, double *sq)
{
  *mean = 0.0;
  *scale = 1.0;
  if (space != KNNWB_BOUND_SPACE_PLAIN) {
    if (space != KNNWB_BOUND_SPACE_SCALED) {
      for (int64_t t = 0; t < dim; t++)
        *mean = __dadd_rn(*mean, (double)x[t * stride]);
      *mean = __ddiv_rn(*mean, (double)dim);
    }
    double squares = 0.0;
    for (int64_t t = 0; t < dim; t++) {
      const double v = __dsub_rn((double)x[t * stride], *mean);
      squares = __dadd_rn(squares, __dmul_rn(v, v));
    }
    if (!(squares > 0.0))
      return false;
    *scale = __ddiv_rn(1.0, __dsqrt_rn(squares));
  }
  double s = 0.0;
  for (int64_t t = 0; t < dim; t++) {
    const double v = space_value(x, t, stride, space, *mean, *scale);
    s = __dadd_rn(s, __dmul_rn(v, v));
  }
  *sq = s;
  return isfinite(s);
}

/* One thread a row. staged: the block's rows are first copied into shared memory transposed
 * (component t of every row side by side), so that a warp's reads of its rows' component t are
 * one line rather than 32; the row is read again for every cell it tests. */
__device__ __forceinline__ const float *block_rows(const BoundsArgs &a, bool staged, float *rows_t,
                                                   int64_t *stride)
{
  const int64_t first = (int64_t)blockIdx.x * blockDim.x;
  if (staged) {
    const int64_t count = min((int64_t)blockDim.x, a.rows - first);
    for (int64_t e = threadIdx.x; e < count * a.dim; e += blockDim.x)
      rows_t[(e % a.dim) * blockDim.x + e / a.dim] = a.values[first * a.dim + e];
    __syncthreads();
  }
  *stride = staged ? blockDim.x : 1;
  return staged ? rows_t + threadIdx.x : a.values + (first + threadIdx.x) * a.dim;
}

__global__ void bounds_kernel(BoundsArgs a, bool staged)
{
  extern __shared__ float rows_t[];
  const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t stride;
  const float *x = block_rows(a, staged, rows_t, &stride);
  if (r >= a.rows)
    return;
  double mean, scale, sq;
  if (!row_frame(x, stride, a.dim, a.space, &mean, &scale, &sq)) {
    atomicExch(a.bad, 1);
    return;
  }
  const int32_t own_cell = a.cell[r];
  const int32_t own = a.group_of[own_cell];
  unsigned long long *out = a.visits + r * a.words;
  double reach = 0.0;
  if (a.gap != nullptr)
    reach =
        pair_upper(__dadd_rn(sq, a.centroid_sq[own_cell]),
                   row_dot(x, stride, a.centroid + own_cell * a.dim, a.dim, a.space, mean, scale),
                   a.margin_factor);
  const double limit = a.limit[r];
  for (int64_t j = 0; j < a.m; j++) {
    const int32_t g = a.group_of[j];
    if (g == own || ((out[g >> 6] >> (g & 63)) & 1ull))
      continue;
    if (a.gap != nullptr &&
        triangle_rules_out(a.gap[own_cell * a.m + j], reach, a.radius[j], limit))
      continue;
    const double dot = row_dot(x, stride, a.centroid + j * a.dim, a.dim, a.space, mean, scale);
    const double lower = pair_lower(a.space, __dadd_rn(sq, a.centroid_sq[j]), dot, a.margin_factor);
    if (!(__dsub_rn(lower, a.radius[j]) > limit))
      out[g >> 6] |= 1ull << (g & 63);
  }
}

/* Each row's nearest centroid (partition_build.c's knnwb_partition_nearest: the lowest
 * |c|^2 - 2 v.c, ties to the lower centroid) and its reach there (knnwb_partition_pair_bounds's
 * upper bound), as two words a row: the centroid, then the reach's bits. */
__global__ void assign_kernel(BoundsArgs a, bool staged)
{
  extern __shared__ float rows_t[];
  const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t stride;
  const float *x = block_rows(a, staged, rows_t, &stride);
  if (r >= a.rows)
    return;
  double mean, scale, sq;
  if (!row_frame(x, stride, a.dim, a.space, &mean, &scale, &sq)) {
    atomicExch(a.bad, 1);
    return;
  }
  double lowest = HUGE_VAL, nearest_dot = 0.0;
  int64_t nearest = 0;
  for (int64_t j = 0; j < a.m; j++) {
    const double dot = row_dot(x, stride, a.centroid + j * a.dim, a.dim, a.space, mean, scale);
    const double score = __dsub_rn(a.centroid_sq[j], __dmul_rn(2.0, dot));
    if (score < lowest) {
      lowest = score;
      nearest = j;
      nearest_dot = dot;
    }
  }
  if (!(lowest < HUGE_VAL)) /* (no centroid scored: core takes the first, with its product) */
    nearest_dot = row_dot(x, stride, a.centroid, a.dim, a.space, mean, scale);
  a.visits[2 * r] = (unsigned long long)nearest;
  a.visits[2 * r + 1] = (unsigned long long)__double_as_longlong(
      pair_upper(__dadd_rn(sq, a.centroid_sq[nearest]), nearest_dot, a.margin_factor));
}

/* The GPU's copies of the job's cells and centroids, and two chunks' buffers. */
struct BoundsMemory {
  double *centroid = nullptr, *centroid_sq = nullptr, *radius = nullptr, *gap = nullptr;
  int32_t *group_of = nullptr;
  int *bad = nullptr;
  float *values[2] = {};
  float *staging[2] = {}; /* pinned host memory: the chunk's rows on their way */
  cudaEvent_t staged[2] = {};
  uint64_t *out[2] = {}; /* pinned host memory: the chunk's visits on their way back */
  cudaEvent_t done[2] = {};
  size_t out_first[2] = {}, out_rows[2] = {}; /* the chunk whose visits are in out[s] */
  double kernel_ms = 0, copy_s = 0, wait_s = 0;
  cudaEvent_t kernel_start[2] = {}, kernel_end[2] = {};
  int32_t *cell[2] = {};
  double *limit[2] = {};
  unsigned long long *visits[2] = {};
  cudaStream_t stream[2] = {};

  ~BoundsMemory()
  {
    for (int s = 0; s < 2; s++) {
      if (stream[s])
        cudaStreamSynchronize(stream[s]);
    }
    for (void *p : {(void *)centroid, (void *)centroid_sq, (void *)radius, (void *)gap,
                    (void *)group_of, (void *)bad})
      cudaFree(p);
    for (int s = 0; s < 2; s++) {
      cudaFree(values[s]);
      cudaFreeHost(staging[s]);
      cudaFreeHost(out[s]);
      for (cudaEvent_t e : {staged[s], done[s], kernel_start[s], kernel_end[s]})
        if (e)
          cudaEventDestroy(e);
      cudaFree(cell[s]);
      cudaFree(limit[s]);
      cudaFree(visits[s]);
      if (stream[s])
        cudaStreamDestroy(stream[s]);
    }
    cudaGetLastError();
  }
};

template <typename T> cudaError_t upload(T **to, const T *from, size_t count)
{
  cudaError_t err = cudaMalloc(to, std::max(count, (size_t)1) * sizeof(T));
  if (err == cudaSuccess && count > 0)
    err = cudaMemcpy(*to, from, count * sizeof(T), cudaMemcpyHostToDevice);
  return err;
}

int bounds_setup(const RowsJob *rj, BoundsMemory *mem, size_t chunk, size_t words, char *message,
                 size_t message_size)
{
  const KnnwbBoundsJob *job = &rj->b;
  KNNWB_CUDA_CHECK_STATUS(cudaSetDevice(job->device));
  KNNWB_CUDA_CHECK_STATUS(upload(&mem->centroid, job->centroid, job->m * job->dim));
  KNNWB_CUDA_CHECK_STATUS(upload(&mem->centroid_sq, job->centroid_sq, job->m));
  if (!rj->assign) {
    KNNWB_CUDA_CHECK_STATUS(upload(&mem->radius, job->radius, job->m));
    KNNWB_CUDA_CHECK_STATUS(upload(&mem->group_of, job->group_of, job->m));
  }
  if (job->gap != nullptr && !rj->assign)
    KNNWB_CUDA_CHECK_STATUS(upload(&mem->gap, job->gap, job->m * job->m));
  KNNWB_CUDA_CHECK_STATUS(cudaMalloc(&mem->bad, sizeof(int)));
  KNNWB_CUDA_CHECK_STATUS(cudaMemset(mem->bad, 0, sizeof(int)));
  for (int s = 0; s < 2; s++) {
    KNNWB_CUDA_CHECK_STATUS(cudaStreamCreateWithFlags(&mem->stream[s], cudaStreamNonBlocking));
    KNNWB_CUDA_CHECK_STATUS(cudaMalloc(&mem->values[s], chunk * job->dim * sizeof(float)));
    KNNWB_CUDA_CHECK_STATUS(cudaMallocHost(&mem->staging[s], chunk * job->dim * sizeof(float)));
    KNNWB_CUDA_CHECK_STATUS(cudaEventCreateWithFlags(&mem->staged[s], cudaEventDisableTiming));
    KNNWB_CUDA_CHECK_STATUS(cudaMallocHost(&mem->out[s], chunk * words * sizeof(uint64_t)));
    KNNWB_CUDA_CHECK_STATUS(cudaEventCreateWithFlags(&mem->done[s], cudaEventDisableTiming));
    KNNWB_CUDA_CHECK_STATUS(cudaEventCreate(&mem->kernel_start[s]));
    KNNWB_CUDA_CHECK_STATUS(cudaEventCreate(&mem->kernel_end[s]));
    if (!rj->assign) {
      KNNWB_CUDA_CHECK_STATUS(cudaMalloc(&mem->cell[s], chunk * sizeof(int32_t)));
      KNNWB_CUDA_CHECK_STATUS(cudaMalloc(&mem->limit[s], chunk * sizeof(double)));
    }
    KNNWB_CUDA_CHECK_STATUS(cudaMalloc(&mem->visits[s], chunk * words * sizeof(uint64_t)));
  }
  return KNNWB_KERNELS_OK;
}

/* The launch's shape: threads a block and their shared bytes (0: rows read in place). */
void bounds_shape(size_t dim, int *threads, size_t *shared)
{
  const size_t fit = kSharedBytes / (std::max(dim, (size_t)1) * sizeof(float)) / 32 * 32;
  *threads = fit >= 32 ? (int)std::min(fit, (size_t)kThreads) : kThreads;
  *shared = fit >= 32 ? (size_t)*threads * dim * sizeof(float) : 0;
}

/* Waits for the chunk in buffers s (if any) and copies its visits (or cells and reaches) to the
 * job. */
int bounds_collect(const RowsJob *rj, BoundsMemory *mem, int s, size_t words, char *message,
                   size_t message_size)
{
  if (mem->out_rows[s] == 0)
    return KNNWB_KERNELS_OK;
  const double t0 = seconds_now();
  KNNWB_CUDA_CHECK_STATUS(cudaEventSynchronize(mem->done[s]));
  mem->wait_s += seconds_now() - t0;
  float ms = 0;
  KNNWB_CUDA_CHECK_STATUS(cudaEventElapsedTime(&ms, mem->kernel_start[s], mem->kernel_end[s]));
  mem->kernel_ms += ms;
  if (rj->assign) {
    for (size_t r = 0; r < mem->out_rows[s]; r++) {
      rj->cell[mem->out_first[s] + r] = (int32_t)mem->out[s][2 * r];
      memcpy(&rj->reach[mem->out_first[s] + r], &mem->out[s][2 * r + 1], sizeof(double));
    }
  } else {
    memcpy(rj->b.visits + mem->out_first[s] * words, mem->out[s],
           mem->out_rows[s] * words * sizeof(uint64_t));
  }
  mem->out_rows[s] = 0;
  return KNNWB_KERNELS_OK;
}

/* Rows [first, first + rows) of the job through buffers s: copies in, kernel, visits out (to the
 * job when buffers s are next needed, or at the end). */
int bounds_chunk(const RowsJob *rj, BoundsMemory *mem, int s, size_t first, size_t rows,
                 size_t words, char *message, size_t message_size)
{
  const KnnwbBoundsJob *job = &rj->b;
  cudaStream_t stream = mem->stream[s];
  const size_t bytes = rows * job->dim * sizeof(float);
  /* buffers s are free once their previous chunk is done: its visits then go to the job */
  int status = bounds_collect(rj, mem, s, words, message, message_size);
  if (status != KNNWB_KERNELS_OK)
    return status;
  const double t0 = seconds_now();
  knnwb_cuda::parallel_copy(mem->staging[s], job->values + first * job->dim, bytes, kCopyThreads);
  mem->copy_s += seconds_now() - t0;
  KNNWB_CUDA_CHECK_STATUS(
      cudaMemcpyAsync(mem->values[s], mem->staging[s], bytes, cudaMemcpyHostToDevice, stream));
  KNNWB_CUDA_CHECK_STATUS(cudaEventRecord(mem->staged[s], stream));
  if (!rj->assign) {
    KNNWB_CUDA_CHECK_STATUS(cudaMemcpyAsync(mem->cell[s], job->cell + first, rows * sizeof(int32_t),
                                            cudaMemcpyHostToDevice, stream));
    KNNWB_CUDA_CHECK_STATUS(cudaMemcpyAsync(mem->limit[s], job->limit + first,
                                            rows * sizeof(double), cudaMemcpyHostToDevice, stream));
    KNNWB_CUDA_CHECK_STATUS(
        cudaMemsetAsync(mem->visits[s], 0, rows * words * sizeof(uint64_t), stream));
  }
  BoundsArgs a;
  a.values = mem->values[s];
  a.rows = (int64_t)rows;
  a.dim = (int64_t)job->dim;
  a.space = job->space;
  a.cell = mem->cell[s];
  a.limit = mem->limit[s];
  a.m = (int64_t)job->m;
  a.words = (int64_t)words;
  a.centroid = mem->centroid;
  a.centroid_sq = mem->centroid_sq;
  a.radius = mem->radius;
  a.gap = mem->gap;
  a.group_of = mem->group_of;
  a.margin_factor = job->margin_factor;
  a.visits = mem->visits[s];
  a.bad = mem->bad;
  int threads;
  size_t shared;
  bounds_shape(job->dim, &threads, &shared);
  const unsigned blocks = (unsigned)((rows + threads - 1) / threads);
  KNNWB_CUDA_CHECK_STATUS(cudaEventRecord(mem->kernel_start[s], stream));
  if (rj->assign)
    assign_kernel<<<blocks, threads, shared, stream>>>(a, shared > 0);
  else
    bounds_kernel<<<blocks, threads, shared, stream>>>(a, shared > 0);
  KNNWB_CUDA_CHECK_STATUS(cudaGetLastError());
  KNNWB_CUDA_CHECK_STATUS(cudaEventRecord(mem->kernel_end[s], stream));
  KNNWB_CUDA_CHECK_STATUS(cudaMemcpyAsync(mem->out[s], mem->visits[s],
                                          rows * words * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                          stream));
  KNNWB_CUDA_CHECK_STATUS(cudaEventRecord(mem->done[s], stream));
  mem->out_first[s] = first;
  mem->out_rows[s] = rows;
  return KNNWB_KERNELS_OK;
}

/* Either kind of job, its rows in chunks through two streams. */
int run_rows(const RowsJob *rj, char *message, size_t message_size)
{
  const KnnwbBoundsJob *job = &rj->b;
  if (job->n_rows == 0)
    return KNNWB_KERNELS_OK;
  const size_t words = rj->assign ? 2 : (job->groups + 63) / 64;
  size_t chunk = std::max((size_t)1024, kChunkBytes / (job->dim * sizeof(float) + 1));
  /* (tests: chunks of that many rows, so that both streams and their buffers' reuse run) */
  if (const char *v = getenv("KNNWB_CUDA_BOUNDS_CHUNK"))
    chunk = std::max(1L, atol(v));
  chunk = std::min(job->n_rows, chunk);
  const double t_start = seconds_now();
  BoundsMemory mem;
  int status = bounds_setup(rj, &mem, chunk, words, message, message_size);
  const double t_setup = seconds_now();
  int threads;
  size_t shared;
  bounds_shape(job->dim, &threads, &shared);
  if (status != KNNWB_KERNELS_OK)
    return status;
  if (shared > 48 * 1024)
    KNNWB_CUDA_CHECK_STATUS(cudaFuncSetAttribute(rj->assign ? assign_kernel : bounds_kernel,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)shared));
  for (size_t first = 0, c = 0; status == KNNWB_KERNELS_OK && first < job->n_rows;
       first += chunk, c++) {
    if (job->cancel != nullptr && *job->cancel) {
      snprintf(message, message_size, "cancelled");
      return KNNWB_KERNELS_CANCELLED;
    }
    /* (buffers c % 2 are free again once their stream's previous chunk is done) */
    status = bounds_chunk(rj, &mem, (int)(c % 2), first, std::min(chunk, job->n_rows - first),
                          words, message, message_size);
  }
  for (int s = 0; s < 2 && status == KNNWB_KERNELS_OK; s++)
    status = bounds_collect(rj, &mem, s, words, message, message_size);
  if (status != KNNWB_KERNELS_OK)
    return status;
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda: %s of %zu rows, %zu cells on GPU %d: %.3f s (set up %.3f s; rows "
            "into pinned memory %.3f s, waits %.3f s, kernels %.3f s)\n",
            rj->assign ? "nearest centroids" : "bounds", job->n_rows, job->m, job->device,
            seconds_now() - t_start, t_setup - t_start, mem.copy_s, mem.wait_s,
            mem.kernel_ms / 1e3);
  int bad = 0;
  KNNWB_CUDA_CHECK_STATUS(cudaMemcpy(&bad, mem.bad, sizeof bad, cudaMemcpyDeviceToHost));
  if (bad) {
    snprintf(message, message_size, "a row has no direction or a value that is not finite");
    return KNNWB_KERNELS_ERROR;
  }
  return KNNWB_KERNELS_OK;
}

} // namespace

extern "C" int knnwb_cuda_partition_bounds(const KnnwbBoundsJob *job, char *message,
                                           size_t message_size)
{
  RowsJob rj = {*job, false, nullptr, nullptr};
  return run_rows(&rj, message, message_size);
}

extern "C" int knnwb_cuda_partition_assign(const KnnwbAssignJob *job, char *message,
                                           size_t message_size)
{
  RowsJob rj = {};
  rj.b.values = job->values;
  rj.b.n_rows = job->n_rows;
  rj.b.dim = job->dim;
  rj.b.space = job->space;
  rj.b.m = job->m;
  rj.b.centroid = job->centroid;
  rj.b.centroid_sq = job->centroid_sq;
  rj.b.margin_factor = job->margin_factor;
  rj.b.device = job->device;
  rj.b.cancel = job->cancel;
  rj.assign = true;
  rj.cell = job->cell;
  rj.reach = job->reach;
  return run_rows(&rj, message, message_size);
}
