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
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <vector>

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
  /* rows in core's order: each chunk lands in host buffers first (the staging, else these) and
   * is spread into place from there (spread_ordered) */
  std::vector<int64_t> own_index;
  std::vector<float> own_score;
  std::vector<double> own_distance;
  if (run_.order && !staged) {
    own_index.resize(chunk_rows * kc);
    own_score.resize(chunk_rows * kc);
    own_distance.resize(dst_distance ? chunk_rows * kc : 0);
  }
  for (size_t done = 0; done < n_rows;) {
    size_t chunk = std::min(chunk_rows, n_rows - done);
    CUDA_TRY(run_, launch_extract(state_, (int)(row0 + done), (int)chunk, stage_index_,
                                  stage_score_, select_stream_));
    int64_t *to_index = staged              ? (int64_t *)host_staging_[0]
                        : own_index.empty() ? dst_index + done * kc
                                            : own_index.data();
    float *to_score = staged              ? (float *)host_staging_[1]
                      : own_score.empty() ? dst_score + done * kc
                                          : own_score.data();
    double *to_distance = !dst_distance          ? nullptr
                          : staged               ? (double *)host_staging_distance_
                          : own_distance.empty() ? dst_distance + done * kc
                                                 : own_distance.data();
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
    if (run_.order) {
      spread_ordered(to_index, to_score, to_distance, chunk, query0 + done, dst_index - query0 * kc,
                     dst_score - query0 * kc, dst_distance ? dst_distance - query0 * kc : nullptr);
    } else if (staged) {
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

} // namespace

/*
 * Rows in core's order: chunk rows of kc candidates (at places place0, place0 + 1, ... of the
 * order, their indices places too) into the arrays index/score/distance (NULL: none) of every
 * row, each at its row's own number with its indices mapped to the rows' own numbers.
 */
void Worker::spread_ordered(const int64_t *from_index, const float *from_score,
                            const double *from_distance, size_t rows, size_t place0, int64_t *index,
                            float *score, double *distance)
{
  const size_t kc = (size_t)run_.plan.kc;
  const int64_t *order = run_.order;
  parallel_rows(rows, run_.merge_threads, 256, [&](size_t a, size_t b) {
    for (size_t r = a; r < b; r++) {
      const size_t row = (size_t)order[place0 + r];
      for (size_t c = 0; c < kc; c++) {
        const int64_t j = from_index[r * kc + c];
        index[row * kc + c] = j >= 0 ? order[j] : j;
      }
      memcpy(score + row * kc, from_score + r * kc, kc * sizeof(float));
      if (distance)
        memcpy(distance + row * kc, from_distance + r * kc, kc * sizeof(double));
    }
  });
}

/*
 * The state of one refined download (extract_refined): how its rows are cut into chunks, the two
 * host sets the chunks come back to, the events that pace the two streams, and the trace's tallies.
 * Slot s (chunk c with s = c % 2) owns host sets 2 s (meta) and 2 s + 1 (distances) and, with
 * two_slots, half s of the device staging.
 */
struct RefinedDownload {
  size_t k = 0, kc = 0;
  size_t row0 = 0, n_rows = 0, query0 = 0;
  long long self0 = -1; /* the first row's own index in a self job, else -1 */
  RefinedOut out;       /* where the rows go: row query0 + r at out's row query0 + r - shift */
  size_t shift = 0;
  bool timed = false;
  /* What comes back per row: k indices and the two numbers (int32, in the first 4 (k + 2) bytes of
   * the row's 8 kc), and k distances. */
  size_t meta_width = 0, distance_width = 0;
  size_t row_pitch = 0; /* of both device regions */
  size_t meta_pitch = 0, distance_pitch = 0;
  bool own = false; /* buffers of their own (cudaHostAlloc), not the pool's */
  bool two_slots = false;
  size_t chunk_rows = 0;
  /* Pinned sets (meta, distances) x 2; pageable ones if page-locked memory is refused. */
  void *pinned[4] = {};
  std::unique_ptr<char[]> pageable[4];
  cudaEvent_t computed[2] = {}, copied[2] = {}, timing[2][3] = {};
  size_t chunk_first[2] = {0, 0}, chunk_count[2] = {0, 0};
  double device_ms[2] = {0, 0}, host_s = 0, wait_s = 0;
  /* With out.take: a chunk's rows laid out as the job's arrays, handed over from here. */
  std::vector<int64_t> take_index;
  std::vector<double> take_distance;
  std::vector<float> take_worst;
  std::vector<int32_t> take_valid;

  void choose_chunks(size_t stage_rows);
  bool take_buffers();
  bool take_host_sets();
  void release_host_sets();
  bool create_events();
  void give_back();
  char *host_buffer(int b)
  {
    return pinned[b] ? (char *)pinned[b] : pageable[b].get();
  }
};

/* Narrow rows come whole: the copy engines move short strided rows slowly. Chunks of at least 2,048
 * rows where the pool's 16 MiB buffers allow it, else of up to 64 MiB in buffers of their own: each
 * chunk is spread by all cores, and small ones paid more in starting threads than in copying
 * (k = 4,096: 751 chunks of 512 rows took 2.1 s, 188 of 2,048 rows 1.0 s). */
void RefinedDownload::choose_chunks(size_t stage_rows)
{
  meta_width = (k + 2) * sizeof(int32_t);
  distance_width = k * sizeof(double);
  row_pitch = kc * sizeof(double);
  meta_pitch = meta_width < 512 ? row_pitch : meta_width;
  distance_pitch = distance_width < 512 ? row_pitch : distance_width;
  const size_t per_row = std::max(meta_pitch, distance_pitch);
  own = per_row * 2048 > kStagingBytes;
  chunk_rows = std::max<size_t>(1, (own ? kChunkBytes : kStagingBytes) / per_row);
  two_slots = stage_rows >= 2;
  chunk_rows = std::min({chunk_rows, two_slots ? stage_rows / 2 : stage_rows, n_rows});
}

/*
 * The chunks' host buffers: the pinned (or pageable) sets and, with out.take, a chunk's arrays.
 * Where the host refuses them the chunks are halved, down to one row, before giving up: this runs
 * after the tiles, and a job that handed rows already (another side, another GPU) is never run
 * again, so a refusal here would fail the whole search. FALSE (nothing held) when not even one
 * row's buffers can be had.
 */
bool RefinedDownload::take_buffers()
{
  /* KNNWB_CUDA_TEST_HOST_ROWS=N: chunks of more than N rows refused, as a host out of memory
   * would (the tests' way to reach the shrinking) */
  const char *limit_text = getenv("KNNWB_CUDA_TEST_HOST_ROWS");
  const long limit = limit_text ? atol(limit_text) : 0;
  for (;;) {
    bool ok = limit <= 0 || chunk_rows <= (size_t)limit;
    ok = ok && take_host_sets();
    if (ok && out.take != nullptr) {
      try {
        take_index.resize(chunk_rows * k);
        take_distance.resize(chunk_rows * k);
        take_worst.resize(chunk_rows);
        take_valid.resize(chunk_rows);
      } catch (const std::bad_alloc &) {
        release_host_sets();
        ok = false;
      }
    }
    if (ok)
      return true;
    if (chunk_rows <= 1)
      return false;
    chunk_rows = (chunk_rows + 1) / 2;
  }
}

/* FALSE when not even pageable memory is left (the pinned sets are then released). */
bool RefinedDownload::take_host_sets()
{
  const size_t set_bytes[2] = {chunk_rows * meta_pitch, chunk_rows * distance_pitch};
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
        release_host_sets();
        return false;
      }
    }
  }
  return true;
}

void RefinedDownload::release_host_sets()
{
  for (void *&p : pinned) {
    if (p && own)
      cudaFreeHost(p);
    else
      staging_give(p);
    p = nullptr;
  }
}

/* Events without timing are the cheaper to record and wait on; timed ones exist for the trace. */
bool RefinedDownload::create_events()
{
  bool ok = true;
  for (int s = 0; s < 2 && ok; s++) {
    ok = cudaEventCreateWithFlags(&computed[s], cudaEventDisableTiming) == cudaSuccess &&
         cudaEventCreateWithFlags(&copied[s], cudaEventDisableTiming) == cudaSuccess;
    for (int e = 0; e < 3 && ok && timed; e++)
      ok = cudaEventCreate(&timing[s][e]) == cudaSuccess;
  }
  return ok;
}

/* Only once nothing may still write into the host sets: the pool hands them to the next caller. */
void RefinedDownload::give_back()
{
  release_host_sets();
  for (int s = 0; s < 2; s++) {
    for (cudaEvent_t e : {computed[s], copied[s], timing[s][0], timing[s][1], timing[s][2]})
      if (e)
        cudaEventDestroy(e);
  }
}

/*
 * Rows [row0, row0 + n_rows) refined on the device (query rows query0, ...) into the job's k-lists:
 * per chunk, the lists with their exact distances into the staging (select stream), sorted and cut
 * (launch_refine_rows), copied to pinned memory on the copy stream, and spread into
 * out_k_index/out_k_distance/out_worst_score/out_valid by the host while the next chunk runs (or,
 * with the job's out_refined_take, laid out so in arrays of the chunk's and handed to it, each
 * thread's rows at once). Two device halves of the staging and two pinned sets, so chunk c + 1
 * computes while chunk c copies. out (a two-sided job's side): those arrays (or take) instead,
 * query row q at their row q - shift.
 */
bool Worker::extract_refined(size_t row0, size_t n_rows, size_t query0, const RefinedOut *out,
                             size_t shift)
{
  const KnnwbSelectJob *job = run_.job;
  const size_t kc = (size_t)run_.plan.kc;
  if (!finish_exact_upload())
    return false;
  if (n_rows == 0)
    return true;
  const double t0 = seconds_now();
  CUDA_TRY(run_, prepare_refine_kernel((int)kc));
  RefinedDownload download;
  download.k = job->out_k;
  download.kc = kc;
  download.row0 = row0;
  download.n_rows = n_rows;
  download.query0 = query0;
  /* a two-sided job's rows are never each other's (its candidates lie across the sides) */
  download.self0 = job->self && run_.cross == nullptr ? (long long)query0 : -1;
  if (out != nullptr) {
    download.out = *out;
    download.shift = shift;
  } else {
    download.out.index = job->out_k_index;
    download.out.distance = job->out_k_distance;
    download.out.worst = job->out_worst_score;
    download.out.valid = job->out_valid;
    download.out.take = job->out_refined_take;
    download.out.take_data = job->out_refined_take_data;
    download.out.side = 0;
  }
  download.choose_chunks(stage_rows_);
  if (!download.take_buffers()) {
    run_.fail(KNNWB_KERNELS_OUT_OF_MEMORY, "cannot allocate host staging for GPU %d",
              device_ordinal_);
    return false;
  }
  download.timed = trace_enabled();
  if (!download.create_events()) {
    download.give_back();
    run_.fail(KNNWB_KERNELS_ERROR, "cudaEventCreate failed on GPU %d", device_ordinal_);
    return false;
  }
  size_t c = 0;
  cudaError_t err = cudaSuccess;
  for (size_t done = 0; done < n_rows && err == cudaSuccess; done += download.chunk_rows, c++) {
    err = refined_issue_chunk(download, c, done);
    /* chunk c - 1 is spread while chunk c computes and copies */
    if (err == cudaSuccess && c > 0)
      err = refined_spread_chunk(download, (int)((c - 1) % 2));
  }
  if (err == cudaSuccess && c > 0)
    err = refined_spread_chunk(download, (int)((c - 1) % 2));
  if (err == cudaSuccess) {
    err = cudaStreamSynchronize(copy_stream_);
  } else { /* nothing may still write into the staging returned to the pool */
    cudaStreamSynchronize(select_stream_);
    cudaStreamSynchronize(copy_stream_);
    cudaGetLastError();
  }
  download.give_back();
  if (err != cudaSuccess) {
    run_.fail(knnwb_cuda_status_of(err), "refining the lists on GPU %d failed: %s", device_ordinal_,
              cudaGetErrorString(err));
    return false;
  }
  if (download.timed)
    refined_trace(download, c, seconds_now() - t0);
  return true;
}

/* Issues chunk c (rows done, ...) into slot c % 2; its first failure is returned, the rest of the
 * chunk not issued. */
cudaError_t Worker::refined_issue_chunk(RefinedDownload &download, size_t c, size_t done)
{
  const size_t kc = download.kc;
  const int s = (int)(c % 2);
  const size_t rows = std::min(download.chunk_rows, download.n_rows - done);
  const size_t at = download.two_slots ? (size_t)s * download.chunk_rows * kc : 0;
  int64_t *d_index = stage_index_ + at;
  float *d_score = stage_score_ + at;
  double *d_distance = stage_distance_ + at;
  cudaEvent_t *timing = download.timing[s];
  const bool timed = download.timed;
  /* The device half is free once its previous chunk was copied out (never recorded: free). */
  cudaError_t err =
      cudaStreamWaitEvent(select_stream_, download.copied[download.two_slots ? s : 1 - s], 0);
  if (err == cudaSuccess && timed)
    err = cudaEventRecord(timing[0], select_stream_);
  if (err == cudaSuccess)
    err = launch_extract(state_, (int)(download.row0 + done), (int)rows, d_index, d_score,
                         select_stream_);
  if (err == cudaSuccess)
    err = launch_exact_distances(exact_, d_index, rows, (int)kc, download.query0 + done, d_distance,
                                 select_stream_);
  if (err == cudaSuccess && timed)
    err = cudaEventRecord(timing[1], select_stream_);
  if (err == cudaSuccess)
    err = launch_refine_rows(d_index, d_score, d_distance, (int)rows, (int)kc, (int)download.k,
                             download.self0 >= 0 ? download.self0 + (long long)done : -1,
                             order_device_, select_stream_);
  if (err == cudaSuccess && timed)
    err = cudaEventRecord(timing[2], select_stream_);
  if (err == cudaSuccess)
    err = cudaEventRecord(download.computed[s], select_stream_);
  /* The pinned set s was spread (chunk c - 2) in the previous iteration. */
  if (err == cudaSuccess)
    err = cudaStreamWaitEvent(copy_stream_, download.computed[s], 0);
  const size_t row_pitch = download.row_pitch;
  const size_t meta_pitch = download.meta_pitch, distance_pitch = download.distance_pitch;
  if (err == cudaSuccess)
    err = cudaMemcpy2DAsync(download.host_buffer(2 * s), meta_pitch, d_index, row_pitch,
                            meta_pitch == row_pitch ? row_pitch : download.meta_width, rows,
                            cudaMemcpyDeviceToHost, copy_stream_);
  if (err == cudaSuccess)
    err = cudaMemcpy2DAsync(download.host_buffer(2 * s + 1), distance_pitch, d_distance, row_pitch,
                            distance_pitch == row_pitch ? row_pitch : download.distance_width, rows,
                            cudaMemcpyDeviceToHost, copy_stream_);
  if (err == cudaSuccess)
    err = cudaEventRecord(download.copied[s], copy_stream_);
  download.chunk_first[s] = done;
  download.chunk_count[s] = rows;
  return err;
}

/* Spreads chunk slot s, once on the host, into the job's arrays. */
cudaError_t Worker::refined_spread_chunk(RefinedDownload &download, int s)
{
  const double tw = seconds_now();
  cudaError_t synced = cudaEventSynchronize(download.copied[s]);
  if (synced != cudaSuccess)
    return synced;
  const double th = seconds_now();
  download.wait_s += th - tw;
  if (download.timed) {
    float a = 0, b = 0;
    cudaEventElapsedTime(&a, download.timing[s][0], download.timing[s][1]);
    cudaEventElapsedTime(&b, download.timing[s][1], download.timing[s][2]);
    download.device_ms[0] += a;
    download.device_ms[1] += b;
  }
  const size_t k = download.k, meta_pitch = download.meta_pitch;
  const size_t distance_pitch = download.distance_pitch, distance_width = download.distance_width;
  const char *meta = download.host_buffer(2 * s), *dist = download.host_buffer(2 * s + 1);
  const size_t first = download.query0 + download.chunk_first[s];
  const int64_t *order = run_.order; /* the device's indices are already the rows' own */
  const RefinedOut &out = download.out;
  if (out.take != nullptr)
    run_.handed.store(true);
  parallel_rows(download.chunk_count[s], run_.merge_threads, 32, [&](size_t a, size_t b) {
    for (size_t r = a; r < b; r++) {
      const size_t row = (order ? (size_t)order[first + r] : first + r) - download.shift;
      /* with take, the chunk's own arrays at the row's place in the chunk */
      const size_t at = out.take != nullptr ? r : row;
      int64_t *index = out.take != nullptr ? download.take_index.data() : out.index;
      double *distance = out.take != nullptr ? download.take_distance.data() : out.distance;
      float *worst = out.take != nullptr ? download.take_worst.data() : out.worst;
      int32_t *valid = out.take != nullptr ? download.take_valid.data() : out.valid;
      const int32_t *m = (const int32_t *)(meta + r * meta_pitch);
      for (size_t c = 0; c < k; c++)
        index[at * k + c] = m[c];
      memcpy(&worst[at], &m[k], sizeof(float));
      valid[at] = m[k + 1];
      memcpy(distance + at * k, dist + r * distance_pitch, distance_width);
      if (out.take != nullptr && order != nullptr) /* rows in core's order: one at a time */
        out.take(out.take_data, out.side, row, 1, index + at * k, distance + at * k, worst + at,
                 valid + at);
    }
    if (out.take != nullptr && order == nullptr && b > a)
      out.take(out.take_data, out.side, first + a - download.shift, b - a,
               download.take_index.data() + a * k, download.take_distance.data() + a * k,
               download.take_worst.data() + a, download.take_valid.data() + a);
  });
  download.host_s += seconds_now() - th;
  return cudaSuccess;
}

void Worker::refined_trace(const RefinedDownload &download, size_t chunks, double seconds)
{
  fprintf(stderr,
          "knnwb cuda worker %d: %zu lists refined to k = %zu of %zu candidates: %.3f s (device: "
          "lists + exact distances %.3f s, sort %.3f s; host: spreading %.3f s, waiting %.3f s; "
          "%zu chunks of %zu rows)\n",
          index_, download.n_rows, download.k, download.kc, seconds, download.device_ms[0] / 1e3,
          download.device_ms[1] / 1e3, download.host_s, download.wait_s, chunks,
          download.chunk_rows);
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
