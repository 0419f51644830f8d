/*
 * The panel schedule (query jobs, or self jobs whose state for all rows does not fit): query
 * panels of T rows go to GPUs from a shared counter; each panel meets every reference block, and
 * its lists (with their exact distances) go straight to the output. A query job's starting
 * thresholds (KnnwbSelectJob.query_bounds) become the panel's thresholds once it is emptied.
 * A share of the job (KnnwbSelectJob.share_count > 1: one rank of a whole-input group) scores
 * every share_count-th panel, from its share_index on; the other panels' rows get empty lists
 * (index -1), written as any panel's, so the union of the shares' lists holds every pair once.
 */
#include "select_worker.h"

#include <algorithm>
#include <cmath>

namespace knnwb_cuda
{

/* The job's starting thresholds of query rows [q0, q0 + n_q) into the emptied panel's state, on
 * the selection stream (before the panel's first filter): a pair that does not beat its row's
 * never becomes a candidate, and merges only lower them. *bounded: every row of the panel has a
 * finite one, so its first tile needs no column stages (they serve rows that start from +inf). */
bool Worker::panel_bounds(size_t q0, int n_q, bool *bounded)
{
  const KnnwbSelectJob *job = run_.job;
  *bounded = false;
  if (job->query_bounds == nullptr || job->self)
    return true;
  *bounded = true;
  for (int t = 0; t < n_q && *bounded; t++)
    *bounded = std::isfinite(job->query_bounds[q0 + t]);
  if (start_bounds_ == nullptr &&
      (start_bounds_ = (float *)allocate_extra((size_t)run_.plan.tile * sizeof(float))) == nullptr)
    return false;
  CUDA_TRY(run_, cudaMemcpyAsync(start_bounds_, job->query_bounds + q0, (size_t)n_q * sizeof(float),
                                 cudaMemcpyHostToDevice, select_stream_));
  PeerThresholds start = {};
  start.thr[0] = start_bounds_;
  start.count = 1;
  CUDA_TRY(run_, launch_import_thresholds(state_, start, 0, n_q, select_stream_));
  return true;
}

/* Panel [q0, q0 + n_q)'s tiles against every reference block, into its emptied state. */
bool Worker::panel_tiles(size_t q0, int n_q)
{
  const KnnwbSelectJob *job = run_.job;
  const KnnwbSelectPlan &p = run_.plan;
  const size_t nr = job->n_reference, T = (size_t)p.tile;
  const long blocks = (long)((nr + T - 1) / T);
  bool bounded = false;
  if (!panel_bounds(q0, n_q, &bounded))
    return false;
  const void *q = nullptr;
  if (p.resident)
    q = query_data_ + q0 * p.row_bytes;
  else if (load_anchor(job->query, q0, n_q))
    q = anchor_rows();
  else
    return false;
  for (long c = 0; c < blocks && !run_.cancelled(); c++) {
    const size_t r0 = (size_t)c * T;
    const int n_r = (int)std::min(T, nr - r0);
    TileRequest t = {};
    t.q = q;
    t.n_q = n_q;
    t.n_r = n_r;
    if (p.resident)
      t.r = reference_data_ + r0 * p.row_bytes;
    else if (!stream_block(slot(), job->reference, r0, n_r, &t.r))
      return false;
    t.geom = tile_geom(n_q, n_r, q0, r0);
    t.geom.fresh = c == 0 && !bounded; /* the panel's state was just emptied */
    t.counted = true;
    if (!issue_tile(t))
      return false;
  }
  return true;
}

bool Worker::run_panels()
{
  const KnnwbSelectJob *job = run_.job;
  const KnnwbSelectPlan &p = run_.plan;
  const size_t nq = job->n_query, T = (size_t)p.tile;
  const long panels = (long)((nq + T - 1) / T);
  const long shares = job->share_count > 1 ? job->share_count : 1;
  const long share = shares > 1 ? job->share_index : 0;
  for (;;) {
    long panel = run_.next_item++;
    if (panel >= panels || run_.cancelled())
      break;
    const size_t q0 = (size_t)panel * T;
    const int n_q = (int)std::min(T, nq - q0);
    if (!reset_state(0, n_q))
      return false;
    if (panel % shares == share && !panel_tiles(q0, n_q))
      return false;
    if (run_.abort)
      break;
    CUDA_TRY(run_, launch_final_merge(state_, 0, n_q, select_stream_));
    if (!extract_rows(0, (size_t)n_q, q0, job->out_index + q0 * p.kc, job->out_score + q0 * p.kc,
                      run_.exact ? job->out_distance + q0 * p.kc : nullptr))
      return false;
  }
  if (!finish_last_tile())
    return false;
  return !run_.abort;
}

} // namespace knnwb_cuda
