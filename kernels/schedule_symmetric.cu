/*
 * The symmetric schedule (self jobs whose selection state for all n rows fits the budget): the
 * upper triangle of T x T tiles, tile (b, c) computed once and feeding the rows of b (row pass)
 * and of c (column pass). Thresholds come first, so that no tile line is ever scanned in full
 * against a +inf threshold (which would merge, for the column side with strided reads, every line
 * of the first tiles): one GPU walks the columns c in order, diagonal tile (c, c) first, then
 * (b, c) for b < c, so a row's first pairs are always its own block's. With G GPUs each keeps
 * state for all rows: every GPU first runs the diagonal tiles of its own blocks (b % G == g), then
 * takes the other rows' thresholds from their owners by peer access (without peer access: from a
 * column sample of each other diagonal tile, the lists emptied again), then pieces of at most
 * kPiece off-diagonal tiles go to GPUs from a shared counter (small pieces: even tails) while the
 * GPUs keep importing each other's tighter thresholds.
 */
#include "select_worker.h"

#include <algorithm>

namespace knnwb_cuda
{

/*
 * Issues tile (b, c), b <= c: rows of block b against the first n_cols rows of block c; the row
 * pass feeds rows of b, the column pass (b < c) rows of c. counted: the tile is one of the
 * B (B + 1) / 2 of the progress total (not a threshold-only sample).
 */
bool Worker::symmetric_tile(long b, long c, int n_cols, bool counted)
{
  const KnnwbSelectJob *job = run_.job;
  const KnnwbSelectPlan &p = run_.plan;
  const size_t n = job->n_query, T = (size_t)p.tile;
  const size_t q0 = (size_t)b * T, r0 = (size_t)c * T;
  const int n_q = (int)std::min(T, n - q0);
  TileRequest t = {};
  if (p.resident) {
    t.q = query_data_ + q0 * p.row_bytes;
    t.r = reference_data_ + r0 * p.row_bytes;
  } else {
    /* streaming: block c (the tile columns) held in query_buffer_ */
    if (anchor_block_ != c) {
      if (!load_anchor(job->reference, r0, (int)std::min(T, n - r0)))
        return false;
      anchor_block_ = c;
    }
    t.r = anchor_rows();
    if (b == c)
      t.q = anchor_rows();
    else if (!stream_block(slot(), job->reference, q0, n_q, &t.q))
      return false;
  }
  t.n_q = n_q;
  t.n_r = n_cols;
  t.geom = tile_geom(n_q, n_cols, q0, r0);
  t.geom.row_state0 = (int)q0;
  t.geom.col_state0 = (int)r0;
  t.geom.do_cols = b != c;
  t.geom.fresh = b == c; /* every schedule gives a block's rows their diagonal tile first */
  t.counted = counted;
  return issue_tile(t);
}

/*
 * Several GPUs: thresholds for every row before any off-diagonal tile. Each GPU runs the diagonal
 * tiles of its own blocks (b % G == g) in full. With peer access the others' rows then import the
 * owners' thresholds directly. Without it, a column sample of each other diagonal tile sets thr
 * and the lists are emptied again: the owner's lists hold kc pairs scoring at most that thr (the
 * owner saw every sampled pair), so no pair is counted twice.
 */
bool Worker::symmetric_thresholds(const PeerThresholds &peers)
{
  const KnnwbSelectPlan &p = run_.plan;
  const size_t n = run_.job->n_query, T = (size_t)p.tile;
  const long blocks = (long)((n + T - 1) / T);
  const int G = run_.n_devices;
  const int sample = (int)std::max<size_t>(T / 4, 4 * (size_t)p.kc);
  /* With shares (one per process of a group) diagonal tile b belongs to process b % shares, there
   * to GPU (b / shares) % G; the GPUs of the other processes sample it like non-owners (the
   * owner's lists hold kc pairs under the sampled threshold, and the merge of the processes' lists
   * keeps them). */
  const long shares = run_.job->share_count > 1 ? run_.job->share_count : 1;
  const long share = shares > 1 ? run_.job->share_index : 0;
  /* When the processes make their thresholds common right after this phase (share_bounds_round
   * below), the owner's thresholds reach the other processes there, backed by the owner's lists,
   * so sampling another process's diagonal tiles would only repeat that: each process then runs
   * its own diagonal tiles alone (2 ranks at n = 1.5 M: 94 tiles each instead of 188). */
  const bool others_from_round = shares > 1 && share_bounds_wanted();
  for (long b = 0; b < blocks && !run_.cancelled(); b++) {
    const bool owner_here = b % shares == share;
    const bool owner = owner_here && (b / shares) % G == index_;
    const int n_b = (int)std::min(T, n - (size_t)b * T);
    if (!owner && owner_here && peers.count > 0)
      continue;
    if (!owner_here && others_from_round)
      continue;
    if (!symmetric_tile(b, b, owner ? n_b : std::min(n_b, sample), owner))
      return false;
    if (!owner)
      CUDA_TRY(run_, launch_state_clear_lists(state_, (int)((size_t)b * T), n_b, select_stream_));
  }
  /* From here on every threshold is backed by lists that already exist (the owners have seen
   * their diagonal tiles in full, and the kernels are done), so GPUs may tighten each other's. */
  if (!drain())
    return false;
  run_.phase_barrier->wait();
  phase_passed_ = true;
  if (peers.count > 0)
    CUDA_TRY(run_, launch_import_thresholds(state_, peers, (int)n, select_stream_));
  /* Every process's thresholds are backed by its lists now: make them common. */
  if (share_bounds_wanted() && !share_bounds_round())
    return false;
  return true;
}

bool Worker::run_symmetric()
{
  const KnnwbSelectJob *job = run_.job;
  const size_t n = job->n_query, T = (size_t)run_.plan.tile;
  const int G = run_.n_devices;
  auto block_rows = [&](long b) { return (int)std::min(T, n - (size_t)b * T); };
  CUDA_TRY(run_, launch_state_reset(state_, 0, (int)n, select_stream_));
  PeerThresholds peers = {};
  if (G > 1 && run_.peers_ok)
    for (int h = 0; h < G && peers.count < PeerThresholds::kMax; h++)
      if (h != index_)
        peers.thr[peers.count++] = run_.device_thr[h];
  /* A share of the job (one process of a group) has no lists of the diagonal tiles it does not
   * own either: thresholds first, as with several GPUs. */
  if ((G > 1 || run_.job->share_count > 1) && !symmetric_thresholds(peers))
    return false;
  /* A share of a group's job imports the other processes' thresholds at even steps of its tiles,
   * as GPUs do from their peers: alone its own would tighten share_count times slower. */
  const bool share_bounds = share_bounds_wanted();
  const uint64_t share_tiles = run_.tiles_total;
  uint64_t tiles_issued = 0;
  for (long done_items = 0;; done_items++) {
    long item = run_.next_item++;
    if (item >= (long)run_.segments.size() || run_.cancelled())
      break;
    if (share_bounds && bounds_rounds_ < job->share_bound_rounds &&
        tiles_issued * (uint64_t)job->share_bound_rounds >=
            share_tiles * (uint64_t)bounds_rounds_ &&
        !share_bounds_round())
      return false;
    /* Each GPU sees only its share of a row's pairs: without the others' thresholds its own would
     * tighten G times slower and let G times more candidates through. */
    if (peers.count > 0 && done_items % kExchangeItems == kExchangeItems - 1)
      CUDA_TRY(run_, launch_import_thresholds(state_, peers, (int)n, select_stream_));
    const Segment sg = run_.segments[item];
    tiles_issued += (uint64_t)(sg.b1 - sg.b0) + (sg.diagonal ? 1 : 0);
    if (sg.diagonal && !symmetric_tile(sg.c, sg.c, block_rows(sg.c), true))
      return false;
    for (long b = sg.b0; b < sg.b1 && !run_.cancelled(); b++)
      if (!symmetric_tile(b, sg.c, block_rows(sg.c), true))
        return false;
  }
  if (!finish_last_tile())
    return false;
  if (run_.abort)
    return false;
  CUDA_TRY(run_, launch_final_merge(state_, 0, (int)n, select_stream_));
  /* One GPU: the lists are the answer. Several: merged on the devices, or on the host. */
  if (G == 1)
    return extract_rows(0, n, 0, job->out_index, job->out_score,
                        run_.exact ? job->out_distance : nullptr);
  if (run_.peers_ok)
    return merge_on_devices();
  return extract_partials();
}

} // namespace knnwb_cuda
