/*
 * The two-sided schedule (KnnwbSelectJob.out_reference_refined, one GPU): the state holds both
 * sides' rows, the query side's first (select_run.h, CrossRows), and every tile pairs a block of
 * query rows with a block of reference rows and feeds both, the query rows by its row pass and the
 * reference rows by its column pass, as the symmetric schedule's off-diagonal tiles do. So a pair
 * of blocks costs one panel of tiles where the two one-sided jobs of the same pair cost two. No
 * pair within a side is a candidate: there are no diagonal tiles, and instead of them the rows
 * start from the job's bounds (core gives the k-th best each row already holds), so the first tiles
 * do not pass every pair. Reference blocks in order, each against every query block.
 */
#include "select_worker.h"

#include <algorithm>
#include <vector>

namespace knnwb_cuda
{

/* The job's starting thresholds of all rows (both sides, as cuda_select.cu laid them out) into
 * the emptied state, on the selection stream: a pair that does not beat its row's never becomes a
 * candidate of that row. The device copy lives until the worker's release. */
bool Worker::cross_bounds()
{
  const KnnwbSelectJob *job = run_.job;
  const size_t n = job->n_query;
  if (job->query_bounds == nullptr || n == 0)
    return true;
  void *device = allocate_extra(n * sizeof(float));
  if (device == nullptr)
    return false;
  CUDA_TRY(run_, cudaMemcpyAsync(device, job->query_bounds, n * sizeof(float),
                                 cudaMemcpyHostToDevice, select_stream_));
  PeerThresholds start = {};
  start.thr[0] = (const float *)device;
  start.count = 1;
  CUDA_TRY(run_, launch_import_thresholds(state_, start, 0, (int)n, select_stream_));
  /* the copy's host array is the job's: done before the schedule returns (extraction waits) */
  return true;
}

/* Query rows [q0, q0 + n_q) against reference rows [r0, r0 + n_r), state rows both. */
bool Worker::cross_tile(size_t q0, int n_q, size_t r0, int n_r)
{
  const size_t row_bytes = (size_t)run_.plan.row_bytes;
  TileRequest t = {};
  t.q = reference_data_ + q0 * row_bytes;
  t.r = reference_data_ + r0 * row_bytes;
  t.n_q = n_q;
  t.n_r = n_r;
  t.geom = tile_geom(n_q, n_r, q0, r0);
  t.geom.row_state0 = (int)q0;
  t.geom.col_state0 = (int)r0;
  t.geom.do_cols = 1;
  t.counted = true;
  return issue_tile(t);
}

/*
 * The schedule, then each side's lists refined into its own outputs: the refine maps a candidate
 * of the other side to its index there (state row n_a + j is reference row j), through the map
 * the refine already takes for rows in core's order.
 */
bool Worker::run_cross()
{
  const KnnwbSelectJob *job = run_.job;
  const CrossRows &x = *run_.cross;
  const size_t n = job->n_query, na = x.n_a, T = (size_t)run_.plan.tile;
  if (!reset_state(0, (int)n) || !cross_bounds())
    return false;
  std::vector<int> map(n);
  for (size_t g = 0; g < n; g++)
    map[g] = (int)(g < na ? g : g - na);
  void *device_map = allocate_extra(n * sizeof(int));
  if (device_map == nullptr)
    return false;
  order_device_ = (int *)device_map;
  CUDA_TRY(run_, cudaMemcpyAsync(device_map, map.data(), n * sizeof(int), cudaMemcpyHostToDevice,
                                 copy_stream_));
  if (loop_start_)
    CUDA_TRY(run_, cudaEventRecord(loop_start_, select_stream_));
  for (size_t r0 = na; r0 < n && !run_.cancelled(); r0 += T)
    for (size_t q0 = 0; q0 < na && !run_.cancelled(); q0 += T)
      if (!cross_tile(q0, (int)std::min(T, na - q0), r0, (int)std::min(T, n - r0)))
        return false;
  if (!finish_last_tile())
    return false;
  t_tiles_done_ = seconds_now();
  if (!loop_time_end())
    return false;
  /* the map and the bounds are on the device before their host arrays go */
  CUDA_TRY(run_, cudaStreamSynchronize(copy_stream_));
  CUDA_TRY(run_, cudaStreamSynchronize(select_stream_));
  if (run_.abort)
    return false;
  CUDA_TRY(run_, launch_final_merge(state_, 0, (int)n, select_stream_));
  return extract_refined(0, na, 0, &x.out[0], 0) && extract_refined(na, n - na, na, &x.out[1], na);
}

} // namespace knnwb_cuda
