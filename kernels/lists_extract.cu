/*
 * Final lists to host memory: the lists of a range of state rows (and, when the run computes them
 * on the device, their exact distances) through pinned staging, in chunks that fit the staging
 * buffers on the device (the panel staging, or the tile buffers of a finished symmetric run). When
 * core asked for its refine on the device (run_.refine), each chunk's lists are sorted and cut to
 * k there (lists_refine.cu) and only that comes back, pipelined: the device computes chunk c and
 * copies it to pinned memory while the host spreads chunk c - 1 into the job's arrays.
 */
#include "host_staging.h"
#include "select_worker.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>

namespace knnwb_cuda
{

/*
 * Lists of state rows [row0, row0 + n_rows) to host arrays, through pinned staging when there is;
 * with dst_distance (run_.exact) also their exact distances, the state rows being query rows
 * query0, query0 + 1, ...
 */
bool Worker::extract_rows(size_t row0, size_t n_rows, size_t query0, int64_t *dst_index,
                          float *dst_score, double *dst_distance, bool allow_refine)
{
  const size_t kc = (size_t)run_.plan.kc;
  if (dst_distance && allow_refine && run_.refine)
    return extract_refined(row0, n_rows, query0);
  if (dst_distance && !finish_exact_upload())
    return false;
  const double t0 = seconds_now();
  double host_s = 0;
  size_t chunk_rows = stage_rows_;
  bool staged = host_staging_[0] != nullptr;
  if (staged) {
    chunk_rows = std::min(chunk_rows, host_staging_bytes_ / (kc * sizeof(int64_t)));
    if (chunk_rows == 0) {
      chunk_rows = stage_rows_;
      staged = false;
    }
  }
  for (size_t done = 0; done < n_rows;) {
    size_t chunk = std::min(chunk_rows, n_rows - done);
    CUDA_TRY(run_, launch_extract(state_, (int)(row0 + done), (int)chunk, stage_index_,
                                  stage_score_, select_stream_));
    int64_t *to_index = staged ? (int64_t *)host_staging_[0] : dst_index + done * kc;
    float *to_score = staged ? (float *)host_staging_[1] : dst_score + done * kc;
    double *to_distance =
        dst_distance ? (staged ? (double *)host_staging_distance_ : dst_distance + done * kc)
                     : nullptr;
    if (to_distance)
      CUDA_TRY(run_, launch_exact_distances(exact_, stage_index_, chunk, (int)kc, query0 + done,
                                            stage_distance_, select_stream_));
    CUDA_TRY(run_, cudaMemcpyAsync(to_index, stage_index_, chunk * kc * sizeof(int64_t),
                                   cudaMemcpyDeviceToHost, select_stream_));
    CUDA_TRY(run_, cudaMemcpyAsync(to_score, stage_score_, chunk * kc * sizeof(float),
                                   cudaMemcpyDeviceToHost, select_stream_));
    if (to_distance)
      CUDA_TRY(run_, cudaMemcpyAsync(to_distance, stage_distance_, chunk * kc * sizeof(double),
                                     cudaMemcpyDeviceToHost, select_stream_));
    CUDA_TRY(run_, cudaStreamSynchronize(select_stream_));
    const double t_host = seconds_now();
    if (staged) {
      parallel_copy(dst_index + done * kc, to_index, chunk * kc * sizeof(int64_t),
                    run_.copy_threads);
      parallel_copy(dst_score + done * kc, to_score, chunk * kc * sizeof(float), run_.copy_threads);
      if (to_distance)
        parallel_copy(dst_distance + done * kc, to_distance, chunk * kc * sizeof(double),
                      run_.copy_threads);
    }
    host_s += seconds_now() - t_host;
    done += chunk;
  }
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda worker %d: %zu lists of %zu candidates to the host: %.3f s (host copies "
            "%.3f s)\n",
            index_, n_rows, kc, seconds_now() - t0, host_s);
  return true;
}

namespace
{

/* Bytes per pinned buffer of the refined download. */
constexpr size_t kChunkBytes = 64u << 20;

/* fn(begin, end) over [0, n) split among up to threads threads (this one included). */
template <typename F> void parallel_rows(size_t n, int threads, size_t min_rows, F fn)
{
  int parts = (int)std::max<size_t>(
      1, std::min<size_t>((size_t)std::max(threads, 1), n / std::max<size_t>(min_rows, 1)));
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

} // namespace

/*
 * Rows [row0, row0 + n_rows) refined on the device (query rows query0, ...) into the job's k-lists:
 * per chunk, the lists with their exact distances into the staging (select stream), sorted and cut
 * (launch_refine_rows), copied to pinned memory on the copy stream, and spread into
 * out_k_index/out_k_distance/out_worst_score/out_valid by the host while the next chunk runs. Two
 * device halves of the staging and two pinned sets, so chunk c + 1 computes while chunk c copies.
 */
bool Worker::extract_refined(size_t row0, size_t n_rows, size_t query0)
{
  const KnnwbSelectJob *job = run_.job;
  const size_t kc = (size_t)run_.plan.kc, k = job->out_k;
  if (!finish_exact_upload())
    return false;
  if (n_rows == 0)
    return true;
  const double t0 = seconds_now();
  CUDA_TRY(run_, prepare_refine_kernel((int)kc));
  /* What comes back per row: k indices and the two numbers (int32, in the first 4 (k + 2) bytes of
   * the row's 8 kc), and k distances. Narrow rows come whole: the copy engines move short strided
   * rows slowly. */
  const size_t meta_width = (k + 2) * sizeof(int32_t), distance_width = k * sizeof(double);
  const size_t row_pitch = kc * sizeof(double); /* of both device regions */
  const size_t meta_pitch = meta_width < 512 ? row_pitch : meta_width;
  const size_t distance_pitch = distance_width < 512 ? row_pitch : distance_width;
  /* Chunks of at least 2,048 rows where the pool's 16 MiB buffers allow it, else of up to 64 MiB
   * in buffers of their own: each chunk is spread by all cores, and small ones paid more in
   * starting threads than in copying (k = 4,096: 751 chunks of 512 rows took 2.1 s, 188 of 2,048
   * rows 1.0 s). */
  const size_t per_row = std::max(meta_pitch, distance_pitch);
  const bool own = per_row * 2048 > kStagingBytes;
  size_t chunk_rows = std::max<size_t>(1, (own ? kChunkBytes : kStagingBytes) / per_row);
  const bool two_slots = stage_rows_ >= 2;
  chunk_rows = std::min({chunk_rows, two_slots ? stage_rows_ / 2 : stage_rows_, n_rows});
  /* Pinned sets (meta, distances) x 2; pageable ones if page-locked memory is refused. */
  void *pinned[4] = {};
  std::unique_ptr<char[]> pageable[4];
  const size_t set_bytes[2] = {chunk_rows * meta_pitch, chunk_rows * distance_pitch};
  auto release_pinned = [&]() {
    for (void *&p : pinned) {
      if (p && own)
        cudaFreeHost(p);
      else
        staging_give(p);
      p = nullptr;
    }
  };
  for (int b = 0; b < 4; b++) {
    if (own && cudaHostAlloc(&pinned[b], set_bytes[b % 2], cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      pinned[b] = nullptr;
    } else if (!own) {
      pinned[b] = staging_take();
    }
    if (!pinned[b]) {
      pageable[b].reset(new (std::nothrow) char[set_bytes[b % 2]]);
      if (!pageable[b]) {
        release_pinned();
        run_.fail(KNNWB_KERNELS_OUT_OF_MEMORY, "cannot allocate host staging for GPU %d",
                  device_ordinal_);
        return false;
      }
    }
  }
  auto host_buffer = [&](int b) { return pinned[b] ? (char *)pinned[b] : pageable[b].get(); };
  cudaEvent_t computed[2] = {}, copied[2] = {}, timing[2][3] = {};
  const bool timed = trace_enabled();
  bool ok = true;
  auto give_back = [&]() {
    release_pinned();
    for (int s = 0; s < 2; s++) {
      for (cudaEvent_t e : {computed[s], copied[s], timing[s][0], timing[s][1], timing[s][2]})
        if (e)
          cudaEventDestroy(e);
    }
  };
  for (int s = 0; s < 2 && ok; s++) {
    ok = cudaEventCreateWithFlags(&computed[s], cudaEventDisableTiming) == cudaSuccess &&
         cudaEventCreateWithFlags(&copied[s], cudaEventDisableTiming) == cudaSuccess;
    for (int e = 0; e < 3 && ok && timed; e++)
      ok = cudaEventCreate(&timing[s][e]) == cudaSuccess;
  }
  if (!ok) {
    give_back();
    run_.fail(KNNWB_KERNELS_ERROR, "cudaEventCreate failed on GPU %d", device_ordinal_);
    return false;
  }
  const long long self0 = job->self ? (long long)query0 : -1;
  double device_ms[2] = {0, 0}, host_s = 0, wait_s = 0;
  size_t chunk_first[2] = {0, 0}, chunk_count[2] = {0, 0};
  /* Spreads chunk slot s (already on the host) into the job's arrays. */
  auto spread = [&](int s) -> cudaError_t {
    const double tw = seconds_now();
    cudaError_t synced = cudaEventSynchronize(copied[s]);
    if (synced != cudaSuccess)
      return synced;
    const double th = seconds_now();
    wait_s += th - tw;
    if (timed) {
      float a = 0, b = 0;
      cudaEventElapsedTime(&a, timing[s][0], timing[s][1]);
      cudaEventElapsedTime(&b, timing[s][1], timing[s][2]);
      device_ms[0] += a;
      device_ms[1] += b;
    }
    const char *meta = host_buffer(2 * s), *dist = host_buffer(2 * s + 1);
    const size_t first = query0 + chunk_first[s];
    int64_t *out_index = job->out_k_index + first * k;
    double *out_distance = job->out_k_distance + first * k;
    float *out_worst = job->out_worst_score + first;
    int32_t *out_valid = job->out_valid + first;
    parallel_rows(chunk_count[s], run_.merge_threads, 32, [&](size_t a, size_t b) {
      for (size_t r = a; r < b; r++) {
        const int32_t *m = (const int32_t *)(meta + r * meta_pitch);
        int64_t *to = out_index + r * k;
        for (size_t c = 0; c < k; c++)
          to[c] = m[c];
        memcpy(&out_worst[r], &m[k], sizeof(float));
        out_valid[r] = m[k + 1];
        memcpy(out_distance + r * k, dist + r * distance_pitch, distance_width);
      }
    });
    host_s += seconds_now() - th;
    return cudaSuccess;
  };
  size_t c = 0;
  cudaError_t err = cudaSuccess;
  for (size_t done = 0; done < n_rows && err == cudaSuccess; done += chunk_rows, c++) {
    const int s = (int)(c % 2);
    const size_t rows = std::min(chunk_rows, n_rows - done);
    const size_t at = two_slots ? (size_t)s * chunk_rows * kc : 0;
    int64_t *d_index = stage_index_ + at;
    float *d_score = stage_score_ + at;
    double *d_distance = stage_distance_ + at;
    /* The device half is free once its previous chunk was copied out (never recorded: free). */
    err = cudaStreamWaitEvent(select_stream_, copied[two_slots ? s : 1 - s], 0);
    if (err == cudaSuccess && timed)
      err = cudaEventRecord(timing[s][0], select_stream_);
    if (err == cudaSuccess)
      err = launch_extract(state_, (int)(row0 + done), (int)rows, d_index, d_score, select_stream_);
    if (err == cudaSuccess)
      err = launch_exact_distances(exact_, d_index, rows, (int)kc, query0 + done, d_distance,
                                   select_stream_);
    if (err == cudaSuccess && timed)
      err = cudaEventRecord(timing[s][1], select_stream_);
    if (err == cudaSuccess)
      err = launch_refine_rows(d_index, d_score, d_distance, (int)rows, (int)kc, (int)k,
                               self0 >= 0 ? self0 + (long long)done : -1, select_stream_);
    if (err == cudaSuccess && timed)
      err = cudaEventRecord(timing[s][2], select_stream_);
    if (err == cudaSuccess)
      err = cudaEventRecord(computed[s], select_stream_);
    /* The pinned set s was spread (chunk c - 2) in the previous iteration. */
    if (err == cudaSuccess)
      err = cudaStreamWaitEvent(copy_stream_, computed[s], 0);
    if (err == cudaSuccess)
      err = cudaMemcpy2DAsync(host_buffer(2 * s), meta_pitch, d_index, row_pitch,
                              meta_pitch == row_pitch ? row_pitch : meta_width, rows,
                              cudaMemcpyDeviceToHost, copy_stream_);
    if (err == cudaSuccess)
      err = cudaMemcpy2DAsync(host_buffer(2 * s + 1), distance_pitch, d_distance, row_pitch,
                              distance_pitch == row_pitch ? row_pitch : distance_width, rows,
                              cudaMemcpyDeviceToHost, copy_stream_);
    if (err == cudaSuccess)
      err = cudaEventRecord(copied[s], copy_stream_);
    chunk_first[s] = done;
    chunk_count[s] = rows;
    if (err == cudaSuccess && c > 0)
      err = spread(1 - s);
  }
  if (err == cudaSuccess && c > 0)
    err = spread((int)((c - 1) % 2));
  if (err == cudaSuccess) {
    err = cudaStreamSynchronize(copy_stream_);
  } else { /* nothing may still write into the staging returned to the pool */
    cudaStreamSynchronize(select_stream_);
    cudaStreamSynchronize(copy_stream_);
    cudaGetLastError();
  }
  give_back();
  if (err != cudaSuccess) {
    run_.fail(knnwb_cuda_status_of(err), "refining the lists on GPU %d failed: %s", device_ordinal_,
              cudaGetErrorString(err));
    return false;
  }
  if (timed)
    fprintf(stderr,
            "knnwb cuda worker %d: %zu lists refined to k = %zu of %zu candidates: %.3f s (device: "
            "lists + exact distances %.3f s, sort %.3f s; host: spreading %.3f s, waiting %.3f s; "
            "%zu chunks of %zu rows)\n",
            index_, n_rows, k, kc, seconds_now() - t0, device_ms[0] / 1e3, device_ms[1] / 1e3,
            host_s, wait_s, c, chunk_rows);
  return true;
}

/* Several GPUs without peer access: all of this GPU's lists to host arrays of its own, which
 * merge_partials (lists_merge_host.cu) merges once every GPU has its. */
bool Worker::extract_partials()
{
  const size_t n = run_.job->n_query, cells = n * (size_t)run_.plan.kc;
  run_.partial_index[index_].reset(new (std::nothrow) int64_t[cells]);
  run_.partial_score[index_].reset(new (std::nothrow) float[cells]);
  if (run_.exact)
    run_.partial_distance[index_].reset(new (std::nothrow) double[cells]);
  if (!run_.partial_index[index_] || !run_.partial_score[index_] ||
      (run_.exact && !run_.partial_distance[index_])) {
    run_.fail(KNNWB_KERNELS_OUT_OF_MEMORY,
              "cannot allocate host memory for the candidate lists of GPU %d (%zu rows)",
              device_ordinal_, n);
    return false;
  }
  return extract_rows(0, n, 0, run_.partial_index[index_].get(), run_.partial_score[index_].get(),
                      run_.exact ? run_.partial_distance[index_].get() : nullptr, false);
}

} // namespace knnwb_cuda
