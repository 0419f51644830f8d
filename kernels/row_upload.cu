/*
 * Rows to the device: the resident matrix (each GPU a slice from the host, the rest from its
 * peers), the exact rows on a background thread, and, when the rows do not fit, blocks streamed
 * into double buffers on the copy stream, ordered against the GEMMs that read them by events.
 */
#include "host_staging.h"
#include "row_order.h"
#include "row_upload.h"
#include "select_worker.h"
#include "tile_scores.h"

#include <algorithm>
#include <exception>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace knnwb_cuda
{

bool Worker::load_rows(float *dst, const float *src, size_t first, size_t rows, cudaStream_t stream)
{
  const KnnwbSelectJob *job = run_.job;
  if (rows == 0)
    return true;
  CUDA_TRY(run_, cudaMemcpy2DAsync(dst, (size_t)run_.plan.dpad * sizeof(float),
                                   src + first * job->dim, job->dim * sizeof(float),
                                   job->dim * sizeof(float), rows, cudaMemcpyHostToDevice, stream));
  return true;
}

/*
 * Streaming: host rows [first, first + rows) into the block buffer of slot, once the GEMM and the
 * selection that last read it are done (FP16: converted into the slot's half block, on the same
 * stream); the next GEMM waits for the copy. *rows_out: the rows the GEMM reads.
 */
bool Worker::stream_block(int slot, const float *host, size_t first, int rows,
                          const void **rows_out)
{
  const KnnwbSelectPlan &p = run_.plan;
  CUDA_TRY(run_, cudaStreamWaitEvent(copy_stream_, gemm_done_[slot], 0));
  /* a fused tile's merge may read the rows again (a lost line, tile_fused_pairs.cu) */
  CUDA_TRY(run_, cudaStreamWaitEvent(copy_stream_, select_done_[slot], 0));
  if (!load_rows(reference_buffer_[slot], host, first, (size_t)rows, copy_stream_))
    return false;
  *rows_out = reference_buffer_[slot];
  if (screen_reference_block_[slot]) {
    CUDA_TRY(run_, launch_rows_to_half(reference_buffer_[slot], (size_t)p.dpad, (size_t)rows,
                                       (int)run_.job->dim, screen_reference_block_[slot], p.dpad,
                                       screen_exponent_, copy_stream_));
    *rows_out = screen_reference_block_[slot];
  }
  CUDA_TRY(run_, cudaEventRecord(copy_done_[slot], copy_stream_));
  CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, copy_done_[slot], 0));
  return true;
}

/* The rows load_anchor placed, as the GEMM reads them. */
const void *Worker::anchor_rows() const
{
  return screen_query_block_ ? screen_query_block_ : (const void *)query_buffer_;
}

/*
 * Streaming: host rows [first, first + rows) into query_buffer_ (a panel's queries, or the
 * symmetric schedule's column block; FP16: converted into its half block), once every GEMM
 * reading the previous contents is done.
 */
bool Worker::load_anchor(const float *host, size_t first, int rows)
{
  const KnnwbSelectPlan &p = run_.plan;
  CUDA_TRY(run_, cudaEventRecord(query_free_, gemm_stream_));
  CUDA_TRY(run_, cudaStreamWaitEvent(copy_stream_, query_free_, 0));
  if (fused_tiles_ > 0) {
    /* a fused tile's merge may still read these rows (a lost line, tile_fused_pairs.cu) */
    CUDA_TRY(run_, cudaEventRecord(select_tail_, select_stream_));
    CUDA_TRY(run_, cudaStreamWaitEvent(copy_stream_, select_tail_, 0));
  }
  if (!load_rows(query_buffer_, host, first, (size_t)rows, copy_stream_))
    return false;
  if (screen_query_block_)
    CUDA_TRY(run_,
             launch_rows_to_half(query_buffer_, (size_t)p.dpad, (size_t)rows, (int)run_.job->dim,
                                 screen_query_block_, p.dpad, screen_exponent_, copy_stream_));
  CUDA_TRY(run_, cudaEventRecord(query_ready_, copy_stream_));
  CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, query_ready_, 0));
  return true;
}

void HostRows::copy(size_t at, size_t count, size_t dim, float *out) const
{
  if (rows != nullptr)
    memcpy(out, rows + at * dim, count * dim * sizeof(float));
  else if (count > 0)
    fill(source, first + at, count, out);
}

HostRows job_rows(const KnnwbSelectJob *job, int side)
{
  HostRows h;
  h.rows = side ? job->reference : job->query;
  if (h.rows == nullptr && job->rows_fill != nullptr) {
    h.fill = job->rows_fill;
    h.source = side ? job->reference_source : job->query_source;
    h.first = side ? job->reference_source_first : job->query_source_first;
  }
  return h;
}

/* Derived rows [first, first + n) filled into a staging buffer on up to threads threads (parts
 * of 1,024 rows or more: a fill is a pass over the exact rows, as cheap as their copy). */
static void fill_staging(const HostRows &rows, size_t first, size_t n, size_t dim, int threads,
                         void *staging)
{
  parallel_rows(n, threads, 1024, [&](size_t a, size_t b) {
    rows.copy(first + a, b - a, dim, (float *)staging + a * dim);
  });
}

cudaError_t upload_rows(const RowUpload &u, bool *stopped)
{
  const size_t row_floats = u.dim * sizeof(float);
  const bool staged = u.staging[0] != nullptr && u.staging[1] != nullptr;
  const size_t room = staged ? std::min(u.staging_bytes, u.scratch_bytes) : u.scratch_bytes;
  const size_t chunk_rows = row_floats > 0 ? room / row_floats : 0;
  if (chunk_rows == 0 || u.chunk_step == 0 || (u.derived.derived() && !staged))
    return cudaErrorInvalidValue;
  cudaError_t err = cudaSuccess;
  for (size_t c = u.chunk_first, b = 0;
       c < (u.rows + chunk_rows - 1) / chunk_rows && err == cudaSuccess;
       c += u.chunk_step, b ^= 1) {
    const size_t first = c * chunk_rows;
    const size_t n = std::min(chunk_rows, u.rows - first);
    if (u.stop && u.stop()) {
      if (stopped)
        *stopped = true;
      break;
    }
    err = cudaEventSynchronize(u.done[b]);
    if (err == cudaSuccess && staged) {
      if (u.derived.derived())
        fill_staging(u.derived, first, n, u.dim, u.threads, u.staging[b]);
      else
        parallel_copy(u.staging[b], u.src + first * u.dim, n * row_floats, u.threads);
      err = cudaMemcpyAsync(u.scratch[b], u.staging[b], n * row_floats, cudaMemcpyHostToDevice,
                            u.stream);
    } else if (err == cudaSuccess) {
      err = cudaMemcpyAsync(u.scratch[b], u.src + first * u.dim, n * row_floats,
                            cudaMemcpyHostToDevice, u.stream);
    }
    if (err == cudaSuccess && u.convert)
      err = launch_rows_to_half(u.scratch[b], u.dim, n, (int)u.dim, u.dst + first * u.row_bytes,
                                u.dpad, u.exponent, u.stream);
    else if (err == cudaSuccess)
      err = cudaMemcpy2DAsync(u.dst + first * u.row_bytes, u.row_bytes, u.scratch[b], row_floats,
                              row_floats, n, cudaMemcpyDeviceToDevice, u.stream);
    if (err == cudaSuccess)
      err = cudaEventRecord(u.done[b], u.stream);
  }
  const cudaError_t synced = cudaStreamSynchronize(u.stream);
  return err != cudaSuccess ? err : synced;
}

cudaError_t upload_lanes(RowUpload *lanes, int n, int device, bool *stopped)
{
  if (n <= 0)
    return cudaErrorInvalidValue;
  for (int l = 0; l < n; l++) {
    const bool staged = lanes[l].staging[0] != nullptr && lanes[l].staging[1] != nullptr;
    const bool staged0 = lanes[0].staging[0] != nullptr && lanes[0].staging[1] != nullptr;
    if (staged != staged0 || lanes[l].scratch_bytes != lanes[0].scratch_bytes ||
        (staged && lanes[l].staging_bytes != lanes[0].staging_bytes))
      return cudaErrorInvalidValue;
    lanes[l].chunk_first = (size_t)l;
    lanes[l].chunk_step = (size_t)n;
  }
  std::vector<cudaError_t> errors((size_t)n, cudaSuccess);
  std::vector<char> lane_stopped((size_t)n, 0);
  /* a lane a thread (parallel_rows: one that cannot start leaves its lane to this thread) */
  parallel_rows((size_t)n, n, 1, [&](size_t first, size_t last) {
    for (size_t l = first; l < last; l++) {
      bool s = false;
      cudaError_t err = cudaSetDevice(device);
      if (err == cudaSuccess)
        err = upload_rows(lanes[l], &s);
      errors[l] = err;
      lane_stopped[l] = s;
    }
  });
  cudaError_t first = cudaSuccess;
  for (int l = 0; l < n; l++) {
    if (first == cudaSuccess)
      first = errors[(size_t)l];
    if (stopped && lane_stopped[(size_t)l])
      *stopped = true;
  }
  return first;
}

/*
 * Resident rows to the device (upload_rows) through the worker's pinned staging (host rows not
 * page-locked) and its tile buffers, or straight from page-locked rows: avoids both registering
 * gigabytes and the driver's slow pitched copies from pageable memory. Derived rows are filled
 * into the staging (pageable buffers of the same size where no pinned staging was had).
 */
bool Worker::upload_staged(char *dst, const HostRows &src, size_t rows)
{
  const KnnwbSelectPlan &p = run_.plan;
  const size_t dim = run_.job->dim, row_bytes = dim * sizeof(float);
  const bool convert = p.screen == KNNWB_KERNELS_SCREEN_FP16;
  const bool derived = src.derived();
  bool staged = !run_.pinned && host_staging_[0] && host_staging_bytes_ >= row_bytes;
  if (!staged && !convert && !derived)
    return load_rows((float *)dst, src.rows, 0, rows, copy_stream_);
  if (tile_bytes_ < row_bytes) {
    run_.fail(KNNWB_KERNELS_ERROR, "rows of %zu floats do not fit a tile buffer of GPU %d", dim,
              device_ordinal_);
    return false;
  }
  std::vector<float> pageable[2];
  if (derived && !staged) {
    try {
      for (auto &buffer : pageable)
        buffer.resize(std::max(std::min(kStagingBytes, tile_bytes_) / sizeof(float), dim));
    } catch (const std::bad_alloc &) {
      run_.fail(KNNWB_KERNELS_ERROR, "no host memory to stage rows for GPU %d", device_ordinal_);
      return false;
    }
    staged = true;
  }
  RowUpload u = {};
  u.dst = dst;
  u.row_bytes = (size_t)p.row_bytes;
  u.dpad = p.dpad;
  u.convert = convert;
  u.exponent = screen_exponent_;
  u.src = src.rows;
  u.derived = src;
  u.rows = rows;
  u.dim = dim;
  for (int b = 0; b < 2; b++) {
    u.staging[b] = !staged               ? nullptr
                   : pageable[b].empty() ? host_staging_[b]
                                         : (void *)pageable[b].data();
    u.scratch[b] = tiles_[b];
    u.done[b] = copy_done_[b];
  }
  u.staging_bytes = pageable[0].empty() ? host_staging_bytes_ : pageable[0].size() * sizeof(float);
  u.scratch_bytes = tile_bytes_;
  u.stream = copy_stream_;
  u.threads = run_.copy_threads;
  u.stop = [this] { return run_.cancelled(); }; /* which records why */
  bool stopped = false;
  const cudaError_t err = upload_rows(u, &stopped);
  if (stopped && err == cudaSuccess)
    return false;
  if (err != cudaSuccess) {
    run_.fail(KNNWB_KERNELS_ERROR, "staged upload to GPU %d failed: %s", device_ordinal_,
              cudaGetErrorString(err));
    return false;
  }
  return true;
}

bool Worker::upload_resident()
{
  const KnnwbSelectJob *job = run_.job;
  if (run_.cross != nullptr) {
    /* a two-sided job: its sides one after the other, on its one GPU */
    const CrossRows &x = *run_.cross;
    if (!upload_staged(reference_data_, x.rows[0], x.n_a) ||
        !upload_staged(reference_data_ + x.n_a * (size_t)run_.plan.row_bytes, x.rows[1],
                       job->n_reference - x.n_a))
      return false;
  } else if (run_.plan.resident && !rows_staged_) {
    const size_t row_bytes = (size_t)run_.plan.row_bytes, dim = job->dim;
    auto r = slice_of(job->n_reference, index_, run_.n_devices);
    if (!upload_staged(reference_data_ + r.first * row_bytes, job_rows(job, 1).from(r.first, dim),
                       r.second - r.first))
      return false;
    auto q = slice_of(job->n_query, index_, run_.n_devices);
    if (query_data_ != reference_data_ &&
        !upload_staged(query_data_ + q.first * row_bytes, job_rows(job, 0).from(q.first, dim),
                       q.second - q.first))
      return false;
  }
  if (sqnorms_)
    CUDA_TRY(run_,
             cudaMemcpyAsync(sqnorms_, job->reference_sqnorms, job->n_reference * sizeof(float),
                             cudaMemcpyHostToDevice, copy_stream_));
  if (invalid_)
    CUDA_TRY(run_, cudaMemcpyAsync(invalid_, job->reference_invalid, job->n_reference,
                                   cudaMemcpyHostToDevice, copy_stream_));
  if (query_group_) {
    CUDA_TRY(run_, cudaMemcpyAsync(query_group_, job->query_group, job->n_query * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, copy_stream_));
    CUDA_TRY(run_, cudaMemcpyAsync(reference_group_, job->reference_group,
                                   job->n_reference * sizeof(int32_t), cudaMemcpyHostToDevice,
                                   copy_stream_));
  }
  CUDA_TRY(run_, cudaStreamSynchronize(copy_stream_));
  return true;
}

/* The slices the other GPUs uploaded (resident rows, several GPUs), device to device. */
bool Worker::upload_peer_slices()
{
  const KnnwbSelectJob *job = run_.job;
  const size_t row_bytes = (size_t)run_.plan.row_bytes;
  for (int h = 0; h < run_.n_devices; h++) {
    if (h == index_)
      continue;
    auto r = slice_of(job->n_reference, h, run_.n_devices);
    if (r.second > r.first)
      CUDA_TRY(run_,
               cudaMemcpyPeerAsync(reference_data_ + r.first * row_bytes, device_ordinal_,
                                   run_.device_reference[h] + r.first * row_bytes, run_.ordinals[h],
                                   (r.second - r.first) * row_bytes, copy_stream_));
    auto q = slice_of(job->n_query, h, run_.n_devices);
    if (query_data_ != reference_data_ && q.second > q.first)
      CUDA_TRY(run_,
               cudaMemcpyPeerAsync(query_data_ + q.first * row_bytes, device_ordinal_,
                                   run_.device_query[h] + q.first * row_bytes, run_.ordinals[h],
                                   (q.second - q.first) * row_bytes, copy_stream_));
  }
  CUDA_TRY(run_, cudaStreamSynchronize(copy_stream_));
  return true;
}

/*
 * The exact rows and statistics (run_.exact), uploaded by a background thread while the tiles run:
 * the copy engine and the host cores are idle then. Own pinned staging, own stream.
 */
bool Worker::exact_upload()
{
  const KnnwbSelectJob *job = run_.job;
  CUDA_TRY(run_, cudaSetDevice(device_ordinal_));
  /* with rows in core's order (a self job's), the statistics in it: gathered into host arrays
   * that live until the stream is synchronized below */
  std::vector<double> gathered_stats[4];
  int gathered_count = 0;
  auto small = [&](const double *dst, const double *src, size_t n) {
    if (dst && src && run_.order) {
      std::vector<double> &to = gathered_stats[gathered_count++];
      to.resize(n);
      for (size_t r = 0; r < n; r++)
        to[r] = src[run_.order[r]];
      src = to.data();
    }
    return !dst || !src ||
           cudaMemcpyAsync(const_cast<double *>(dst), src, n * sizeof(double),
                           cudaMemcpyHostToDevice, exact_stream_) == cudaSuccess;
  };
  const bool same = exact_.query == exact_.reference;
  if (!small(exact_.reference_mean, job->exact_reference_mean, job->n_reference) ||
      !small(exact_.reference_squares, job->exact_reference_squares, job->n_reference) ||
      (!same && (!small(exact_.query_mean, job->exact_query_mean, job->n_query) ||
                 !small(exact_.query_squares, job->exact_query_squares, job->n_query)))) {
    run_.fail(KNNWB_KERNELS_ERROR, "cudaMemcpyAsync of row statistics failed on GPU %d: %s",
              device_ordinal_, cudaGetErrorString(cudaGetLastError()));
    return false;
  }
  void *staging[2] = {nullptr, nullptr};
  cudaEvent_t done[2] = {nullptr, nullptr};
  bool ok = true;
  for (int b = 0; b < 2 && ok; b++)
    ok = (staging[b] = staging_take()) != nullptr &&
         cudaEventCreateWithFlags(&done[b], cudaEventDisableTiming) == cudaSuccess;
  /* rows in core's order without pinned staging: gathered into one pageable buffer, each chunk's
   * copy waited for (so the events, which may be missing, are not needed) */
  std::vector<float> gathered;
  if (!ok && run_.order) {
    gathered.resize(kStagingBytes / sizeof(float));
    for (int b = 0; b < 2; b++) {
      staging_give(staging[b]);
      staging[b] = gathered.data();
    }
    ok = true;
  }
  const bool staged = ok;
  cudaGetLastError();
  cudaError_t err = cudaSuccess;
  std::pair<const float *, const float *> arrays[2] = {
      {exact_.reference, job->exact_reference}, {same ? nullptr : exact_.query, job->exact_query}};
  size_t counts[2] = {job->n_reference * job->dim, job->n_query * job->dim};
  if (run_.cross != nullptr) { /* a two-sided job: its sides one after the other */
    const CrossRows &x = *run_.cross;
    arrays[0] = {exact_.reference, x.exact[0]};
    arrays[1] = {exact_.reference + x.n_a * job->dim, x.exact[1]};
    counts[0] = x.n_a * job->dim;
    counts[1] = (job->n_reference - x.n_a) * job->dim;
  }
  for (int a = 0; a < 2 && err == cudaSuccess; a++) {
    float *dst = const_cast<float *>(arrays[a].first);
    const float *src = arrays[a].second;
    if (!dst)
      continue;
    if (!staged) {
      err = cudaMemcpyAsync(dst, src, counts[a] * sizeof(float), cudaMemcpyHostToDevice,
                            exact_stream_);
      continue;
    }
    const size_t chunk = kStagingBytes / sizeof(float);
    for (size_t first = 0, c = 0; first < counts[a] && err == cudaSuccess; first += chunk, c++) {
      if (run_.abort)
        break;
      const int b = (int)(c % 2);
      const size_t n = std::min(chunk, counts[a] - first);
      err = done[b] ? cudaEventSynchronize(done[b]) : cudaSuccess;
      if (err != cudaSuccess)
        break;
      if (run_.order)
        gather_floats((float *)staging[b], src, run_.order, first, n, job->dim, run_.copy_threads);
      else
        parallel_copy(staging[b], src + first, n * sizeof(float), run_.copy_threads);
      err = cudaMemcpyAsync(dst + first, staging[b], n * sizeof(float), cudaMemcpyHostToDevice,
                            exact_stream_);
      if (err == cudaSuccess && done[b])
        err = cudaEventRecord(done[b], exact_stream_);
      if (err == cudaSuccess && !gathered.empty()) /* one pageable buffer: the copy done first */
        err = cudaStreamSynchronize(exact_stream_);
    }
  }
  cudaError_t sync = cudaStreamSynchronize(exact_stream_);
  if (err == cudaSuccess)
    err = sync;
  for (int b = 0; b < 2; b++) {
    if (gathered.empty())
      staging_give(staging[b]);
    if (done[b])
      cudaEventDestroy(done[b]);
  }
  if (err != cudaSuccess) {
    run_.fail(KNNWB_KERNELS_ERROR, "upload of the exact rows to GPU %d failed: %s", device_ordinal_,
              cudaGetErrorString(err));
    return false;
  }
  return !run_.abort;
}

void Worker::start_exact_upload()
{
  exact_ok_ = false;
  try {
    /* An exception must not leave the thread (that would terminate the process): it fails the
     * attempt, as one in a worker's own thread does (cuda_select.cu). */
    exact_thread_ = std::thread([this] {
      try {
        exact_ok_ = exact_upload();
      } catch (const std::bad_alloc &) {
        run_.fail(KNNWB_KERNELS_OUT_OF_MEMORY, "out of host memory uploading the exact rows");
      } catch (const std::exception &e) {
        run_.fail(KNNWB_KERNELS_ERROR, "the upload of the exact rows failed on the host side: %s",
                  e.what());
      }
    });
  } catch (const std::system_error &) {
    /* No thread to spare (memory or process limits): upload now, before the tiles. */
    exact_ok_ = exact_upload();
  }
}

bool Worker::finish_exact_upload()
{
  if (exact_thread_.joinable())
    exact_thread_.join();
  return exact_ok_;
}

} // namespace knnwb_cuda
