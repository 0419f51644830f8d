/*
 * What the host threads of one selection attempt share (one worker thread per GPU): the plan, the
 * work items of the symmetric schedule, the first error (which stops every worker), progress, the
 * barriers between phases, and the device pointers the GPUs read from each other.
 */
#ifndef KNNWB_SELECT_RUN_H
#define KNNWB_SELECT_RUN_H

#include <knnwb_kernels.h>

#include "row_upload.h"
#include "select_plan.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace knnwb_cuda
{

constexpr int kPiece = 16;        /* off-diagonal tiles per work item of a share (process) */
constexpr int kExchangeItems = 1; /* several GPUs: thresholds imported every this many pieces */

/**
 * Off-diagonal tiles per work item: kPiece for shares of a group's job; whole columns (0) for the
 * GPUs of one process, where a column's pieces on two GPUs left each GPU's lists of the column's
 * rows with half its pairs: thresholds looser (candidates per tile 76,000 against 58,000 on one
 * GPU) and the off-diagonal phase 3% longer than with whole columns (1,533,876 x 295, 2 H200s).
 * KNNWB_CUDA_PIECE=N (1..4096) sets N for both (to measure).
 */
int piece_tiles(bool shares);
/** Pieces between threshold imports: kExchangeItems, or KNNWB_CUDA_EXCHANGE (to measure). */
int exchange_items();
/**
 * KNNWB_CUDA_SERIAL_TILES=1: a tile's GEMM waits for the previous tile's selection, so that the
 * two never share the GPU (to measure what their overlap gains or costs).
 */
bool serial_tiles();
/**
 * Several GPUs: a piece's import takes the peers' thresholds of the piece's own rows only (its
 * row blocks and its column block), not of all n rows; KNNWB_CUDA_IMPORT=all keeps the old import.
 */
bool import_piece_rows();

/* A work item of the symmetric schedule: tiles (b, c) for b in [b0, b1), after (c, c) if diagonal.
 */
struct Segment {
  int c, b0, b1;
  bool diagonal;
};

/**
 * The work items of the symmetric schedule over blocks blocks. One GPU: column by column, diagonal
 * first. Several: each column's off-diagonal tiles (their diagonal tiles run first on every GPU,
 * see schedule_symmetric.cu), in pieces of piece_tiles(), taken from a shared counter so that
 * tails are even.
 * A share of the job (share of shares > 1: one process of a group, KnnwbSelectJob.share_index)
 * keeps the pieces that balance the shares' work (the same choice in every process) and runs the
 * diagonal phase of several GPUs even with one GPU, each diagonal tile with one owner. *tiles: the
 * tiles this process computes in full.
 */
std::vector<Segment> symmetric_segments(int blocks, int n_devices, int share, int shares,
                                        uint64_t *tiles);

/**
 * Several GPUs of one process with peer access, KNNWB_CUDA_DIAGONALS=shared: the diagonal tiles
 * go to the GPUs from a shared counter, and a GPU waits only until every diagonal tile is done,
 * not for the other GPUs to arrive (a GPU that starts late takes fewer of them). Opt-in until
 * measured: by default each GPU runs the diagonal tiles of its own blocks (b % G) and all meet at
 * a barrier.
 */
bool shared_diagonals_wanted();

/** Rows [first, last) of n that GPU g of G handles alone (all of them with one GPU). */
std::pair<size_t, size_t> slice_of(size_t n, int g, int G);

/** A reusable barrier that a thread which failed early can leave for good. */
class Barrier
{
public:
  explicit Barrier(int n) : count_(n), waiting_(0), generation_(0)
  {
  }
  void wait();
  /** Leaves for good (a worker that failed before reaching it): the others no longer wait for it.
   */
  void drop();

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_, waiting_, generation_;
};

/** Counts done work down to zero; release() opens it for good (a failed or cancelled worker). */
class Latch
{
public:
  explicit Latch(long count) : left_(count)
  {
  }
  void count_down(long done);
  void release();
  /** Returns once the count reached zero or the latch was released. */
  void wait();

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  long left_;
  bool open_ = false;
};

struct RowOrder; /* row_order.h */

/* Where one side's k best go (the refine's outputs): row r of the side at place0 + r, or, with
 * take (KnnwbSelectJob.out_refined_take), handed to it as side side. */
struct RefinedOut {
  int64_t *index = nullptr;
  double *distance = nullptr;
  float *worst = nullptr;
  int32_t *valid = nullptr;
  void (*take)(void *, int, size_t, size_t, const int64_t *, const double *, const float *,
               const int32_t *) = nullptr;
  void *take_data = nullptr;
  int side = 0;
};

/*
 * A two-sided job (KnnwbSelectJob.out_reference_refined) run as a self job over the two sides'
 * rows one after the other: rows [0, n_a) are the job's query rows, [n_a, n) its reference rows,
 * only tiles across the two are scored (schedule_cross.cu), and each side's lists come back to its
 * own outputs with indices into the other side. The worker reads its host rows from here, not from
 * the run's job, whose query and reference stand for the combined rows (cuda_select.cu).
 */
struct CrossRows {
  size_t n_a = 0;
  HostRows rows[2];           /* each side's scored rows (host) */
  const float *exact[2] = {}; /* each side's exact rows (host) */
  RefinedOut out[2];
};

/* What all device threads of one attempt share. */
struct Run {
  const KnnwbSelectJob *job = nullptr;
  KnnwbSelectPlan plan = {};
  int n_devices = 0;
  std::vector<int> ordinals;
  std::atomic<long> next_item{0};
  std::vector<Segment> segments; /* symmetric schedule */
  int copy_threads = 1;          /* host threads per GPU for staging copies */
  int merge_threads = 1;         /* host threads per GPU merging the per-GPU lists */
  std::atomic<bool> abort{false};
  /* rows already handed to the job's out_refined_take: the job must not run again */
  std::atomic<bool> handed{false};
  bool pinned = false; /* the host rows are registered (page-locked) */
  std::mutex error_mutex;
  int status = KNNWB_KERNELS_OK;
  char message[512] = {0};
  std::atomic<uint64_t> tiles_done{0};
  uint64_t tiles_total = 0;
  std::mutex progress_mutex;
  std::chrono::steady_clock::time_point last_report;
  Barrier *barrier = nullptr;
  /* several GPUs, symmetric: between the diagonal phase and the off-diagonal pieces */
  Barrier *phase_barrier = nullptr;
  /* the same with shared_diagonals_wanted(): the next diagonal tile to take, and the tiles done */
  std::atomic<long> next_diagonal{0};
  Latch *diagonal_latch = nullptr;
  /* several GPUs: each GPU's thresholds and lists, read by its peers (peer access between every
   * pair); the lists only once every GPU passed lists_barrier (its lists are final) */
  std::vector<const float *> device_thr;
  std::vector<const float *> device_list_score;
  std::vector<const int *> device_list_index;
  Barrier *lists_barrier = nullptr;
  std::atomic<bool> peers_ok{true};
  /* trace: when the attempt started (seconds_now), so the workers' timelines share an origin */
  double trace_t0 = 0;
  /* rows grouped by their nearest centroid (row_order.h): wanted for this attempt; each row's
   * cell (filled by the GPUs); the order, built by worker 0 once every cell is known; and the order
   * itself (device row r is the job's row order[r]), else nullptr */
  bool order_wanted = false;
  std::vector<int32_t> cells;
  RowOrder *row_order = nullptr;
  const int64_t *order = nullptr;
  /* one GPU: its resident rows uploaded ahead of the search (rows_start.h), taken by its worker
   * instead of allocating and uploading them; else nullptr */
  void *staged_rows = nullptr;
  /* a two-sided job's sides (schedule_cross.cu), else nullptr */
  const CrossRows *cross = nullptr;
  /* exact distances of the final lists computed on the devices (job asked, and they fit) */
  bool exact = false;
  /* with them, core's refine too: the lists sorted and cut to out_k on the devices (job asked,
   * and a row's candidates fit the sort; lists_refine.cu) */
  bool refine = false;
  /* several GPUs, resident rows: each GPU uploads a slice from the host and copies the others
   * from its peers, so the host sends the matrix once instead of once per GPU */
  std::vector<char *> device_reference, device_query;
  /* symmetric with several GPUs, no peer access: each GPU's lists, merged on the host (not
   * zero-filled: the downloads write every element, in parallel, which also spreads the page
   * faults) */
  std::vector<std::unique_ptr<int64_t[]>> partial_index;
  std::vector<std::unique_ptr<float[]>> partial_score;
  std::vector<std::unique_ptr<double[]>> partial_distance;

  /** Records the first failure (printf-style message) and stops every worker. */
  void fail(int code, const char *format, ...) __attribute__((format(printf, 3, 4)));
  /** TRUE once the job was cancelled or a worker failed. */
  bool cancelled();
  /** Counts a finished tile and reports progress (at most every 100 ms, from one thread). */
  void tile_finished();
};

} // namespace knnwb_cuda

#endif
