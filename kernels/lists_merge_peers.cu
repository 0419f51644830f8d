/*
 * Several GPUs with peer access, symmetric, after the final merge: this GPU's slice of the rows
 * takes the peers' lists as candidates (as many peers per merge as the candidate buffers hold) and
 * keeps the kc best, then only that slice is extracted, with its exact distances, straight into
 * the job's output. Device traffic is (G - 1) kc n / G entries per GPU over NVLink; the host no
 * longer receives G copies of every list, nor merges them.
 */
#include "select_worker.h"

#include <algorithm>

namespace knnwb_cuda
{

bool Worker::merge_on_devices()
{
  const KnnwbSelectJob *job = run_.job;
  const size_t n = job->n_query, kc = (size_t)run_.plan.kc;
  const int G = run_.n_devices;
  if (!drain()) /* this GPU's lists are final */
    return false;
  const double t0 = seconds_now();
  run_.lists_barrier->wait();
  lists_passed_ = true;
  const double t1 = seconds_now();
  lists_wait_s_ = t1 - t0;
  if (run_.abort)
    return false;
  const auto mine = slice_of(n, index_, G);
  const int row0 = (int)mine.first, rows = (int)(mine.second - mine.first);
  const int per_merge = std::max(1, std::min<int>(PeerLists::kMax, state_.cap / (int)kc));
  PeerLists peers = {};
  for (int h = 0; h < G; h++) {
    if (h != index_) {
      peers.score[peers.count] = run_.device_list_score[h];
      peers.index[peers.count] = run_.device_list_index[h];
      peers.count++;
    }
    if (peers.count > 0 && (peers.count == per_merge || h == G - 1)) {
      CUDA_TRY(run_, launch_gather_lists(state_, peers, row0, rows, select_stream_));
      CUDA_TRY(run_, launch_final_merge(state_, row0, rows, select_stream_));
      peers.count = 0;
    }
  }
  if (trace_enabled()) {
    CUDA_TRY(run_, cudaStreamSynchronize(select_stream_));
    device_merge_s_ = seconds_now() - t1;
  }
  return extract_rows(mine.first, (size_t)rows, mine.first, job->out_index + mine.first * kc,
                      job->out_score + mine.first * kc,
                      run_.exact ? job->out_distance + mine.first * kc : nullptr);
}

} // namespace knnwb_cuda
