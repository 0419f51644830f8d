/*
 * Final lists to host memory: the lists of a range of state rows (and, when the run computes them
 * on the device, their exact distances) through pinned staging, in chunks that fit the staging
 * buffers on the device (the panel staging, or the tile buffers of a finished symmetric run).
 */
#include "host_staging.h"
#include "select_worker.h"

#include <algorithm>
#include <new>

namespace knnwb_cuda
{

/*
 * Lists of state rows [row0, row0 + n_rows) to host arrays, through pinned staging when there is;
 * with dst_distance (run_.exact) also their exact distances, the state rows being query rows
 * query0, query0 + 1, ...
 */
bool Worker::extract_rows(size_t row0, size_t n_rows, size_t query0, int64_t *dst_index,
                          float *dst_score, double *dst_distance)
{
  const size_t kc = (size_t)run_.plan.kc;
  if (dst_distance && !finish_exact_upload())
    return false;
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
    if (staged) {
      parallel_copy(dst_index + done * kc, to_index, chunk * kc * sizeof(int64_t),
                    run_.copy_threads);
      parallel_copy(dst_score + done * kc, to_score, chunk * kc * sizeof(float), run_.copy_threads);
      if (to_distance)
        parallel_copy(dst_distance + done * kc, to_distance, chunk * kc * sizeof(double),
                      run_.copy_threads);
    }
    done += chunk;
  }
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
                      run_.exact ? run_.partial_distance[index_].get() : nullptr);
}

} // namespace knnwb_cuda
