/*
 * A self job's row order honoured by the CUDA backend (row_order.h).
 */
#include "row_order.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>

namespace knnwb_cuda
{

bool row_order_honoured(const KnnwbSelectJob *job, const KnnwbSelectPlan &plan)
{
  return job->row_order != nullptr && job->self && plan.resident && plan.symmetric &&
         job->share_count <= 1 && job->query_group == nullptr && job->query_bounds == nullptr &&
         job->n_query == job->n_reference;
}

namespace
{

/* fn(begin, end) over [0, n) in up to threads parts of at least min_part items (this thread
 * included); a part whose thread cannot start is done here. */
template <typename F> void split(size_t n, int threads, size_t min_part, F fn)
{
  const int parts =
      (int)std::max<size_t>(1, std::min<size_t>((size_t)std::max(threads, 1), n / min_part));
  if (parts <= 1) {
    fn((size_t)0, n);
    return;
  }
  std::vector<std::thread> helpers;
  int started = 1;
  try {
    helpers.reserve((size_t)parts);
    for (; started < parts; started++)
      helpers.emplace_back(fn, n * started / parts, n * (started + 1) / parts);
  } catch (const std::exception &) {
    /* A thread that cannot start (memory or process limits): this one does its part. */
  }
  for (int t = started; t < parts; t++)
    fn(n * t / parts, n * (t + 1) / parts);
  fn((size_t)0, n / parts);
  for (auto &h : helpers)
    h.join();
}

template <typename T> void gather(std::vector<T> &out, const T *in, const int64_t *order, size_t n)
{
  if (in == nullptr)
    return;
  out.resize(n);
  for (size_t r = 0; r < n; r++)
    out[r] = in[order[r]];
}

} // namespace

void OrderedJob::build(const KnnwbSelectJob *from)
{
  const size_t n = from->n_query;
  const int64_t *order = from->row_order;
  job = *from;
  gather(sqnorms, from->reference_sqnorms, order, n);
  gather(invalid, from->reference_invalid, order, n);
  gather(mean, from->exact_reference_mean, order, n);
  gather(squares, from->exact_reference_squares, order, n);
  if (from->reference_sqnorms)
    job.reference_sqnorms = sqnorms.data();
  if (from->reference_invalid)
    job.reference_invalid = invalid.data();
  /* a self job's query and reference statistics are the same rows' */
  job.exact_reference_mean = job.exact_query_mean = from->exact_reference_mean ? mean.data() : nullptr;
  job.exact_reference_squares = job.exact_query_squares =
      from->exact_reference_squares ? squares.data() : nullptr;
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
  split(row_b - row_a, threads, 2048, [&](size_t a, size_t b) {
    for (size_t r = a; r < b; r++)
      memcpy(rows_dst + r * dim, base + (size_t)order[row_a + r] * dim, dim * sizeof(float));
  });
  const size_t tail = first + count - row_b * dim;
  if (tail > 0)
    memcpy(rows_dst + (row_b - row_a) * dim, base + (size_t)order[row_b] * dim,
           tail * sizeof(float));
}

void gather_rows(float *dst, const float *base, const int64_t *order, size_t n, size_t dim,
                 int threads)
{
  gather_floats(dst, base, order, 0, n * dim, dim, threads);
}

cudaError_t order_to_device(const int64_t *order, size_t n, int **device, cudaStream_t stream)
{
  std::vector<int> narrow(n);
  for (size_t r = 0; r < n; r++)
    narrow[r] = (int)order[r];
  void *allocated = nullptr;
  cudaError_t err = cudaMalloc(&allocated, std::max<size_t>(n, 1) * sizeof(int));
  if (err != cudaSuccess)
    return err;
  *device = (int *)allocated;
  err = cudaMemcpyAsync(*device, narrow.data(), n * sizeof(int), cudaMemcpyHostToDevice, stream);
  if (err == cudaSuccess) /* narrow is pageable and local: the copy must be done with it */
    err = cudaStreamSynchronize(stream);
  return err;
}

} // namespace knnwb_cuda
