/*
 * A self job's rows visited grouped by their nearest centroid (row_order.h; whether a run does is
 * knnwb_select_plan_groups_rows's): the host's part (the order, the exact rows' gather) and the
 * device's (nearest centroids, the gathers), and the worker's steps between the upload and the tile
 * loop.
 */
#include "row_order.h"
#include "host_staging.h"
#include "select_worker.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace knnwb_cuda
{

namespace
{

/* One warp per row: its products with every centroid, the largest r . c - half_sq[c] (the first
 * of equal ones). */
__global__ void nearest_cells_kernel(const __half2 *rows, long long n, int pairs,
                                     const __half2 *centroids, const float *half_sq, int m,
                                     int32_t *cell)
{
  const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n)
    return;
  const __half2 *x = rows + row * pairs;
  float best = -INFINITY;
  int best_c = 0;
  for (int c = 0; c < m; c++) {
    const __half2 *y = centroids + (size_t)c * pairs;
    float acc = 0.0f;
    for (int t = lane; t < pairs; t += 32) {
      const float2 a = __half22float2(x[t]), b = __half22float2(__ldg(y + t));
      acc = fmaf(a.x, b.x, fmaf(a.y, b.y, acc));
    }
    for (int width = 16; width > 0; width >>= 1)
      acc += __shfl_xor_sync(0xffffffffu, acc, width);
    const float score = acc - half_sq[c];
    if (score > best) {
      best = score;
      best_c = c;
    }
  }
  if (lane == 0)
    cell[row] = best_c;
}

template <typename W>
__global__ void gather_kernel(const W *src, W *dst, const int *order, long long n, int words)
{
  const long long total = n * words;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / words, w = i % words;
    dst[i] = src[(long long)order[r] * words + w];
  }
}

template <typename W>
cudaError_t gather_words(const void *src, void *dst, const int *order, size_t n, size_t words,
                         cudaStream_t stream)
{
  const long long total = (long long)(n * words);
  if (total == 0)
    return cudaSuccess;
  const int threads = 256;
  const long long blocks = std::min<long long>((total + threads - 1) / threads, 1 << 20);
  gather_kernel<W><<<(unsigned)blocks, threads, 0, stream>>>((const W *)src, (W *)dst, order,
                                                             (long long)n, (int)words);
  return cudaGetLastError();
}

} // namespace

void RowOrder::build(const KnnwbSelectJob *job, const int32_t *cell, int threads)
{
  const size_t rows = job->n_query, m = job->order_cells, keys = m + 1;
  const unsigned char *invalid = job->reference_invalid;
  auto key = [&](size_t i) { return invalid && invalid[i] ? m : (size_t)cell[i]; };
  /* A counting sort by cell, invalid rows (never queried) last, in parts of the rows: each part
   * counts its keys, then places its rows from its own offsets, which follow the earlier parts'
   * within a key: rows ascending within a cell, as one thread would place them. Serial, with its
   * arrays zeroed first, it took 0.027 s at 1,533,876 rows (one H200's host). */
  const size_t parts =
      std::max<size_t>(1, std::min<size_t>((size_t)std::max(threads, 1), rows / 65536));
  auto first_row = [&](size_t p) { return rows * p / parts; };
  std::vector<size_t> at(parts * keys, 0);
  parallel_rows(parts, (int)parts, 1, [&](size_t a, size_t b) {
    for (size_t p = a; p < b; p++)
      for (size_t i = first_row(p), end = first_row(p + 1); i < end; i++)
        at[p * keys + key(i)]++;
  });
  for (size_t c = 0, next = 0; c < keys; c++)
    for (size_t p = 0; p < parts; p++) {
      const size_t count = at[p * keys + c];
      at[p * keys + c] = next;
      next += count;
    }
  order.reset(new int64_t[std::max<size_t>(rows, 1)]);
  narrow.reset(new int[std::max<size_t>(rows, 1)]);
  n = rows;
  parallel_rows(parts, (int)parts, 1, [&](size_t a, size_t b) {
    for (size_t p = a; p < b; p++)
      for (size_t i = first_row(p), end = first_row(p + 1); i < end; i++) {
        const size_t r = at[p * keys + key(i)]++;
        order[r] = (int64_t)i;
        narrow[r] = (int)i;
      }
  });
}

void gather_floats(float *dst, const float *base, const int64_t *order, size_t first, size_t count,
                   size_t dim, int threads)
{
  if (count == 0 || dim == 0)
    return;
  /* whole rows in parallel; a range's partial first and last rows here */
  const size_t row_a = (first + dim - 1) / dim, row_b = (first + count) / dim;
  if (row_a > row_b) { /* inside one row */
    memcpy(dst, base + (size_t)order[first / dim] * dim + first % dim, count * sizeof(float));
    return;
  }
  const size_t head = row_a * dim - first;
  if (head > 0)
    memcpy(dst, base + (size_t)order[row_a - 1] * dim + (dim - head), head * sizeof(float));
  float *rows_dst = dst + head;
  parallel_rows(row_b - row_a, threads, 2048, [&](size_t a, size_t b) {
    for (size_t r = a; r < b; r++)
      memcpy(rows_dst + r * dim, base + (size_t)order[row_a + r] * dim, dim * sizeof(float));
  });
  const size_t tail = first + count - row_b * dim;
  if (tail > 0)
    memcpy(rows_dst + (row_b - row_a) * dim, base + (size_t)order[row_b] * dim,
           tail * sizeof(float));
}

cudaError_t launch_nearest_cells(const void *rows, size_t n, int dpad, const void *centroids,
                                 const float *half_sq, int m, int32_t *cell, cudaStream_t stream)
{
  if (n == 0)
    return cudaSuccess;
  const int threads = 256;
  const long long blocks = ((long long)n * 32 + threads - 1) / threads;
  nearest_cells_kernel<<<(unsigned)blocks, threads, 0, stream>>>(
      (const __half2 *)rows, (long long)n, dpad / 2, (const __half2 *)centroids, half_sq, m, cell);
  return cudaGetLastError();
}

cudaError_t launch_gather_items(const void *src, void *dst, const int *order, size_t n,
                                size_t item_bytes, cudaStream_t stream)
{
  if (item_bytes % sizeof(uint4) == 0)
    return gather_words<uint4>(src, dst, order, n, item_bytes / sizeof(uint4), stream);
  if (item_bytes % sizeof(uint32_t) == 0)
    return gather_words<uint32_t>(src, dst, order, n, item_bytes / sizeof(uint32_t), stream);
  return gather_words<unsigned char>(src, dst, order, n, item_bytes, stream);
}

/* The worker's steps (select_worker.cu runs them between the upload and the tile loop, with the
 * run's barrier between them). */

/* Cells of this GPU's slice of the resident rows into run_.cells. */
bool Worker::order_cells()
{
  order_t_[0] = seconds_now();
  const KnnwbSelectJob *job = run_.job;
  const KnnwbSelectPlan &p = run_.plan;
  const size_t m = job->order_cells, d = job->dim;
  const auto slice = slice_of(job->n_query, index_, run_.n_devices);
  const size_t rows = slice.second - slice.first;
  /* the centroids as the rows: halves scaled by 2^screen_exponent_, and half their squares */
  std::vector<float> half_sq(m);
  for (size_t c = 0; c < m; c++) {
    double sq = 0.0;
    for (size_t t = 0; t < d; t++)
      sq += (double)job->order_centroids[c * d + t] * job->order_centroids[c * d + t];
    half_sq[c] = (float)(std::ldexp(sq, 2 * screen_exponent_) / 2.0);
  }
  void *blocks[4] = {};
  const size_t bytes[4] = {m * d * sizeof(float), m * (size_t)p.dpad * sizeof(__half),
                           m * sizeof(float), std::max<size_t>(rows, 1) * sizeof(int32_t)};
  for (int b = 0; b < 4; b++) {
    CUDA_TRY(run_, cudaMalloc(&blocks[b], bytes[b]));
    allocations_.push_back(blocks[b]);
  }
  CUDA_TRY(run_, cudaMemcpyAsync(blocks[0], job->order_centroids, bytes[0], cudaMemcpyHostToDevice,
                                 copy_stream_));
  CUDA_TRY(run_, launch_rows_to_half((const float *)blocks[0], d, m, (int)d, blocks[1], p.dpad,
                                     screen_exponent_, copy_stream_));
  CUDA_TRY(run_, cudaMemcpyAsync(blocks[2], half_sq.data(), bytes[2], cudaMemcpyHostToDevice,
                                 copy_stream_));
  CUDA_TRY(run_, launch_nearest_cells(reference_data_ + slice.first * (size_t)p.row_bytes, rows,
                                      p.dpad, blocks[1], (const float *)blocks[2], (int)m,
                                      (int32_t *)blocks[3], copy_stream_));
  CUDA_TRY(run_, cudaMemcpyAsync(run_.cells.data() + slice.first, blocks[3], rows * sizeof(int32_t),
                                 cudaMemcpyDeviceToHost, copy_stream_));
  CUDA_TRY(run_, cudaStreamSynchronize(copy_stream_));
  order_t_[1] = seconds_now();
  return true;
}

/* Worker 0, once every slice has its cells: the order, for every worker. */
void Worker::order_publish()
{
  run_.row_order->build(run_.job, run_.cells.data(), run_.copy_threads);
  run_.order = run_.row_order->order.get();
}

/* This GPU's rows, squared norms and invalid marks gathered into the order, through a second copy
 * of the rows: a tile buffer where they fit it (free until the tile loop), else memory of its own
 * in the budget. */
bool Worker::order_apply()
{
  const double t0 = seconds_now();
  const size_t n = run_.job->n_query, row_bytes = (size_t)run_.plan.row_bytes;
  const cudaError_t err = order_to_device(*run_.row_order, &order_device_, copy_stream_);
  if (order_device_)
    allocations_.push_back(order_device_);
  CUDA_TRY(run_, err);
  const bool own = n * row_bytes > tile_bytes_; /* (knnwb_select_plan_groups_rows counted it) */
  void *copy = own ? nullptr : (void *)tiles_[1];
  if (own)
    CUDA_TRY(run_, cudaMalloc(&copy, std::max<size_t>(n * row_bytes, 1)));
  struct Items {
    void *data;
    size_t bytes;
  } items[3] = {{reference_data_, row_bytes}, {sqnorms_, sizeof(float)}, {invalid_, 1}};
  cudaError_t status = cudaSuccess;
  for (const Items &it : items) {
    if (it.data == nullptr || status != cudaSuccess)
      continue;
    status = launch_gather_items(it.data, copy, order_device_, n, it.bytes, copy_stream_);
    if (status == cudaSuccess)
      status = cudaMemcpyAsync(it.data, copy, n * it.bytes, cudaMemcpyDeviceToDevice, copy_stream_);
  }
  const cudaError_t synced = cudaStreamSynchronize(copy_stream_);
  if (own)
    cudaFree(copy);
  CUDA_TRY(run_, status);
  CUDA_TRY(run_, synced);
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda worker %d: rows grouped by %zu centroids: nearest centroids %.3f s, the "
            "order %.3f s, the gathers %.3f s%s\n",
            index_, run_.job->order_cells, order_t_[1] - order_t_[0], t0 - order_t_[1],
            seconds_now() - t0, own ? " (through memory of their own)" : "");
  return true;
}

cudaError_t order_to_device(const RowOrder &order, int **device, cudaStream_t stream)
{
  const size_t n = order.n;
  void *allocated = nullptr;
  cudaError_t err = cudaMalloc(&allocated, std::max<size_t>(n, 1) * sizeof(int));
  if (err != cudaSuccess)
    return err;
  *device = (int *)allocated;
  err =
      cudaMemcpyAsync(*device, order.narrow.get(), n * sizeof(int), cudaMemcpyHostToDevice, stream);
  if (err == cudaSuccess) /* pageable memory: the copy is done with it only once it completes */
    err = cudaStreamSynchronize(stream);
  return err;
}

} // namespace knnwb_cuda
