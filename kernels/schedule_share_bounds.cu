/*
 * A share of a self job (one process of a group, KnnwbSelectJob.share_index) with one GPU: its
 * thresholds made common with the other processes' through the job's share_bounds callback (the
 * group's reduction), so that each process filters its tiles against the whole job's thresholds
 * and not only its own share's: without them a row's threshold tightens share_count times slower
 * and about as many candidates reach the selection as in the whole job. The snapshot may race
 * with the selection kernels: every value read was a valid bound when it was written, and the
 * import takes the minimum with the current one. KNNWB_CUDA_NO_SHARE_BOUNDS=1 turns the rounds off
 * (to measure what they bring; the caller still completes them).
 */
#include "host_staging.h"
#include "select_worker.h"

#include <cstdlib>
#include <new>

namespace knnwb_cuda
{

bool Worker::share_bounds_wanted() const
{
  const KnnwbSelectJob *job = run_.job;
  /* The callback is collective and called from the calling thread: the worker of one GPU only
   * (with several GPUs per process the caller completes the rounds). */
  static const bool off = getenv("KNNWB_CUDA_NO_SHARE_BOUNDS") != nullptr;
  return job->share_bounds != nullptr && job->share_count > 1 && job->share_bound_rounds > 0 &&
         run_.n_devices == 1 && !off;
}

/* One round: thresholds down, the group's minimum up, imported on the selection stream (so in
 * order with the tiles). The host's copy is a pinned staging buffer when the rows' floats fit one
 * (16 MiB: 4 M rows): the two copies of a pageable array took 2-3 ms each at 1.5 M rows, a round
 * now costs about as much on a board (ranks of one host, no wait). A buffer that cannot be had
 * gives nothing this round (the caller still takes part in the collective). */
bool Worker::share_bounds_round()
{
  const KnnwbSelectJob *job = run_.job;
  const size_t n = job->n_query;
  if (bounds_rounds_ >= job->share_bound_rounds)
    return true;
  bounds_rounds_++;
  if (bounds_device_ == nullptr && bounds_host_ == nullptr && bounds_pinned_ == nullptr) {
    if (n * sizeof(float) <= kStagingBytes)
      bounds_pinned_ = staging_take();
    if (bounds_pinned_ == nullptr)
      bounds_host_.reset(new (std::nothrow) float[n]);
    void *device = nullptr;
    if ((bounds_pinned_ != nullptr || bounds_host_ != nullptr) &&
        cudaMalloc(&device, n * sizeof(float)) == cudaSuccess) {
      allocations_.push_back(device);
      bounds_device_ = (float *)device;
    } else {
      cudaGetLastError();
    }
  }
  float *host = bounds_pinned_ != nullptr ? (float *)bounds_pinned_ : bounds_host_.get();
  if (bounds_device_ == nullptr || host == nullptr) {
    job->share_bounds(nullptr, n, job->share_bounds_data);
    return true;
  }
  CUDA_TRY(run_, cudaMemcpyAsync(host, state_.thr, n * sizeof(float), cudaMemcpyDeviceToHost,
                                 select_stream_));
  CUDA_TRY(run_, cudaStreamSynchronize(select_stream_));
  if (!job->share_bounds(host, n, job->share_bounds_data))
    return true;
  CUDA_TRY(run_, cudaMemcpyAsync(bounds_device_, host, n * sizeof(float), cudaMemcpyHostToDevice,
                                 select_stream_));
  PeerThresholds common = {};
  common.thr[0] = bounds_device_;
  common.count = 1;
  CUDA_TRY(run_, launch_import_thresholds(state_, common, 0, (int)n, select_stream_));
  return true;
}

} // namespace knnwb_cuda
