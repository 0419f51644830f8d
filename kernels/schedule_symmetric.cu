/*
 * The symmetric schedule (self jobs whose selection state for all n rows fits the budget): the
 * upper triangle of T x T tiles, tile (b, c) computed once and feeding the rows of b (row pass)
 * and of c (column pass). Thresholds come first, so that no tile line is ever scanned in full
 * against a +inf threshold (which would merge, for the column side with strided reads, every line
 * of the first tiles): one GPU walks the columns c in order, diagonal tile (c, c) first, then
 * (b, c) for b < c, so a row's first pairs are always its own block's (the next column's diagonal
 * computed beside this column's tiles where the plan allows: schedule_ahead.cu). With G GPUs each
 * keeps state for all rows: every GPU first runs the diagonal tiles of its own blocks (b % G == g),
 * then takes the other rows' thresholds from their owners by peer access (without peer access: from
 * a column sample of each other diagonal tile, the lists emptied again), then the columns'
 * off-diagonal tiles (whole columns in one process, pieces of kPiece for shares of a group; see
 * piece_tiles) go to GPUs from a shared counter while the GPUs keep importing each other's
 * tighter thresholds for the rows of their next piece.
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
  /* one GPU's order: block b's rows saw (b, b) .. (b, c - 1), block c's (c, c), (0, c) ..
   * (b - 1, c); other GPUs' orders differ little, and thresholds imported from them only help */
  t.geom.seen = (int)std::min(c - b, b + 1);
  t.counted = counted;
  return issue_tile(t);
}

/*
 * Several GPUs: rows [row0, row0 + n_rows) and [row1, row1 + n_rows1) take the peers' thresholds
 * (min), on the selection stream, so in order with this GPU's tiles (trace: timed, each import's
 * time added at the next one, long done by then).
 */
bool Worker::import_rows(const PeerThresholds &peers, size_t row0, size_t n_rows, size_t row1,
                         size_t n_rows1)
{
  if (import_pending_) {
    float ms = 0;
    CUDA_TRY(run_, cudaEventSynchronize(import_end_));
    CUDA_TRY(run_, cudaEventElapsedTime(&ms, import_start_, import_end_));
    import_ms_ += ms;
    import_pending_ = false;
  }
  if (peers.count == 0 || n_rows + n_rows1 == 0)
    return true;
  if (import_start_)
    CUDA_TRY(run_, cudaEventRecord(import_start_, select_stream_));
  CUDA_TRY(run_, launch_import_thresholds(state_, peers, (int)row0, (int)n_rows, select_stream_));
  CUDA_TRY(run_, launch_import_thresholds(state_, peers, (int)row1, (int)n_rows1, select_stream_));
  if (import_end_) {
    CUDA_TRY(run_, cudaEventRecord(import_end_, select_stream_));
    import_pending_ = true;
  }
  imports_++;
  return true;
}

/*
 * shared_diagonals_wanted(): the diagonal tiles from a shared counter, each in full on the GPU that
 * takes it (it owns those lists); then this GPU waits until every diagonal tile is done, wherever,
 * and imports the others' thresholds, which that makes backed by lists. A GPU that comes late
 * finds the latch open. Every GPU reset its state in setup, before the upload's barriers, so a peer
 * that reads this GPU's thresholds before its schedule starts reads +inf, never stale memory.
 */
bool Worker::symmetric_diagonals_shared(const PeerThresholds &peers)
{
  const size_t n = run_.job->n_query, T = (size_t)run_.plan.tile;
  const long blocks = (long)((n + T - 1) / T);
  long taken = 0;
  bool ok = true;
  while (ok && !run_.cancelled()) {
    const long b = run_.next_diagonal++;
    if (b >= blocks)
      break;
    ok = symmetric_tile(b, b, (int)std::min(T, n - (size_t)b * T), true);
    taken++;
  }
  if (ok && !run_.cancelled())
    ok = drain();
  if (!ok || run_.cancelled()) {
    run_.diagonal_latch->release(); /* a tile taken here may never be done: nobody waits for it */
    return false;
  }
  t_phase_done_ = seconds_now();
  run_.diagonal_latch->count_down(taken);
  run_.diagonal_latch->wait();
  phase_passed_ = true;
  t_phase_passed_ = seconds_now();
  if (run_.abort)
    return false;
  return import_rows(peers, 0, n);
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
  if (shares == 1 && peers.count > 0 && run_.diagonal_latch && shared_diagonals_wanted())
    return symmetric_diagonals_shared(peers);
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
  t_phase_done_ = seconds_now();
  run_.phase_barrier->wait();
  phase_passed_ = true;
  t_phase_passed_ = seconds_now();
  if (!import_rows(peers, 0, n))
    return false;
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
  if (!reset_state(0, (int)n))
    return false;
  if (loop_start_)
    CUDA_TRY(run_, cudaEventRecord(loop_start_, select_stream_));
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
     * tighten G times slower and let G times more candidates through. The piece's tiles read the
     * thresholds of its rows only (blocks b0..b1 - 1 and c): importing those (1 + kPiece blocks
     * of n / T) costs a fraction of all n rows' import. */
    const Segment sg = run_.segments[item];
    if (peers.count > 0 && done_items % exchange_items() == exchange_items() - 1) {
      const bool rows = import_piece_rows();
      const size_t lo = rows ? (size_t)sg.b0 * T : 0, hi = rows ? (size_t)sg.b1 * T : n;
      const size_t c0 = (size_t)sg.c * T, c1 = std::min(n, c0 + T);
      if (!import_rows(peers, lo, std::min(hi, n) - lo, c0, rows ? c1 - c0 : 0))
        return false;
    }
    tiles_issued += (uint64_t)(sg.b1 - sg.b0) + (sg.diagonal ? 1 : 0);
    if (sg.diagonal) {
      bool taken = false;
      if (!ahead_take(sg.c, &taken) ||
          (!taken && !symmetric_tile(sg.c, sg.c, block_rows(sg.c), true)))
        return false;
    }
    /* one GPU: the next column's diagonal tile beside this column's (schedule_ahead.cu) */
    if (item + 1 < (long)run_.segments.size() && run_.segments[(size_t)item + 1].diagonal &&
        !ahead_issue(run_.segments[(size_t)item + 1].c))
      return false;
    for (long b = sg.b0; b < sg.b1 && !run_.cancelled(); b++)
      if (!symmetric_tile(b, sg.c, block_rows(sg.c), true))
        return false;
  }
  if (!finish_last_tile() || !import_rows(PeerThresholds{}, 0, 0))
    return false;
  t_tiles_done_ = seconds_now();
  if (!loop_time_end())
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
