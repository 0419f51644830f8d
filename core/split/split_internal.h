/* The pieces of a split-memory group run (knnwb_knn_split_run, knn_split.c), shared between its
 * files: first the data that travels (knn_split_data.c: prepared rows between ranks, candidate
 * lists, where each rank's block lies, the rows of a certify round), then the run's steps (the
 * frame, the first pass's plan, the first pass, one selection, the refinement and re-selection,
 * the exhaustive round, progress). A function's full contract is beside its definition; the lines
 * here say what it is for, its errors and its cost. */
#ifndef KNNWB_SPLIT_INTERNAL_H
#define KNNWB_SPLIT_INTERNAL_H

#include <knnwb/knn_group.h>
#include "base/base.h"
#include "engine/engine.h"
#include "split/split.h"

/* The per-row arrays of a prepared set, in the order they travel (doubles first, for alignment).
 * Which ones a set has depends on the metric and the shared scale only: the same on every rank. */
enum { KNNWB_SPLIT_SEGMENTS = 7 };

typedef struct {
  size_t row_bytes[KNNWB_SPLIT_SEGMENTS]; /* 0: absent */
} KnnwbSplitLayout;

/* rows x kc candidates (global index, screen score, exact distance) in one buffer, which is also
 * what travels: indices, then distances, then scores. */
typedef struct {
  size_t rows, kc;
  char *buffer;
  gboolean borrowed; /* buffer belongs to someone else */
  int64_t *index;
  double *distance;
  float *score;
  /* Set by a backend that computed the exact distances of a job's candidates (the GPUs, bit for
   * bit as the host): knnwb_split_finish_as then keeps them. */
  int distances_filled;
} KnnwbSplitLists;

/* rows x k neighbours so far (global index, exact distance; by (distance, index), -1 and +inf
 * past those found) and each row's bound on the pairs left out, in one buffer, which is also what
 * travels: indices, distances, bounds (knn_split_best.c says what the bound means). */
typedef struct {
  size_t rows, k;
  char *buffer;
  gboolean borrowed;
  int64_t *index;
  double *distance;
  float *bound;
} KnnwbSplitBest;

/* A job's room: kc-wide lists of the larger side's rows (knnwb_split_lists_bytes); refine: the
 * backend is asked for each row's k best instead (knnwb_split_refine_wanted: GPUs), which it hands
 * over as they come off the device (KnnwbSplitTaker), so the room stays untouched unless it
 * declines; cross: it is asked to score a pair once for both sides (knnwb_split_cross_wanted). */
typedef struct {
  char *lists;
  gboolean refine, cross;
} KnnwbSplitRoom;

/* Where every rank's block lies: rows [first[r], first[r] + count[r]) of n, in rank order. */
typedef struct {
  int ranks;
  size_t n, largest;
  size_t *first, *count;
} KnnwbSplitBlocks;

KnnwbSplitLayout knnwb_split_layout(KnnwbMetric metric, int scale_exponent, size_t d);
void knnwb_split_arrays(const KnnwbPrepared *p, const unsigned char *invalid, const void **arrays);
size_t knnwb_split_bytes(const KnnwbSplitLayout *layout, size_t rows);
void knnwb_split_view(const KnnwbSplitLayout *layout, const KnnwbPrepared *like, char *buffer,
                      size_t rows, KnnwbPrepared *view);
void knnwb_split_pack(const KnnwbSplitLayout *layout, const KnnwbPrepared *p,
                      const unsigned char *invalid, const int64_t *rows, size_t count, char *out);
/* knnwb_split_pack of the first count rows on threads: a block written into fresh shared memory
 * faults its pages in at about 1 GB/s on one thread (0.8 s for 786 MB on one H200's host). */
void knnwb_split_pack_block(const KnnwbSplitLayout *layout, const KnnwbPrepared *p,
                            const unsigned char *invalid, size_t count, char *out, int threads);
size_t knnwb_split_lists_bytes(size_t rows, size_t kc);
/* rows x kc empty candidates (index -1, score +inf, distance NaN), emptied on threads threads, in
 * room (at least knnwb_split_lists_bytes(rows, kc) bytes, borrowed) or, room NULL, a buffer of
 * their own. Errors: KNNWB_ERROR_NO_MEMORY. */
gboolean knnwb_split_lists_init_in(KnnwbSplitLists *lists, size_t rows, size_t kc, char *room,
                                   int threads, GError **error);
gboolean knnwb_split_lists_init(KnnwbSplitLists *lists, size_t rows, size_t kc, int threads,
                                GError **error);
/* rows x kc lists laid out in buffer as knnwb_split_lists_init_in lays them (what another rank
 * wrote there), taken as they are: borrowed, not emptied. */
KnnwbSplitLists knnwb_split_lists_over(char *buffer, size_t rows, size_t kc);
void knnwb_split_lists_clear(KnnwbSplitLists *lists);
void knnwb_split_merge(KnnwbSplitLists *lists, const KnnwbSplitLists *incoming, size_t at,
                       int threads);
gboolean knnwb_split_shift(const KnnwbKnnGroup *group, int to, const void *send, size_t send_bytes,
                           int from, void *receive, size_t receive_bytes, GError **error);
gboolean knnwb_split_blocks_init(const KnnwbKnnGroup *group, size_t mine, KnnwbSplitBlocks *blocks,
                                 GError **error);
void knnwb_split_blocks_clear(KnnwbSplitBlocks *blocks);
void knnwb_split_rows_of(const KnnwbSplitBlocks *blocks, int rank, size_t *first, size_t *count);
gboolean knnwb_split_fetch(const KnnwbKnnGroup *group, const KnnwbSplitLayout *layout,
                           const KnnwbPrepared *own, const unsigned char *own_invalid, int to,
                           int from, size_t rows, char *buffer, KnnwbPrepared *view,
                           GError **error);

/* ---- The run's steps ---------------------------------------------------------------------------
 */

/* The rows [first, first + count) of a prepared set, numbered global + t in the whole run. */
typedef struct {
  const KnnwbPrepared *rows;
  size_t first, count;
  size_t global;
} KnnwbSplitSide;

/* What every job of a run needs (knnwb_knn_split_run fills it; the re-selection raises kc). */
typedef struct {
  const KnnwbKnnOptions *options;
  const KnnwbKnnGroup *group;
  KnnwbSelectFunc select;
  const char *backend;
  int threads;
  size_t kc;
  gboolean two_sided; /* the backend scores a pair for both sides in one job (the CPU's) */
  struct KnnwbSplitProgress *progress; /* rank 0's progress line, else NULL */
  /* Tests (KNNWB_SPLIT_TEST_EXACT): 1, the CPU returns its jobs' exact distances as a GPU does;
   * 2, every other job, as a GPU that declines; 3, each row's k best, as a GPU asked to refine
   * them (knnwb_split_refine_wanted); 4, as 3, and a pair's two panels (KNNWB_SPLIT_PANELS=1) as
   * one job for both sides, as a GPU does (knnwb_split_cross_wanted), two pairs in three (the
   * third declines, as a GPU without room for both sides). 0: the backend's own way. */
  int test_exact;
} KnnwbSplitRun;

/* Rank 0's progress through a pass, in thousandths of a step of the schedule: the steps' ends, and
 * within a step its jobs' own tile counts (never backwards: a step's second job starts again at 0
 * and is shown only once it passes the first). */
#define KNNWB_SPLIT_PROGRESS_UNIT 1000
typedef struct KnnwbSplitProgress {
  uint64_t step, steps, shown;
} KnnwbSplitProgress;

/* Candidate rows lie anywhere in a block: each loop that computes exact distances
 * (knn_split_select.c, knn_split_refine.c) fetches the next candidate's exact row while it computes
 * the current one's distance (as refine.c does). */
static inline void knnwb_split_prefetch(const KnnwbPrepared *p, size_t row)
{
  const char *at = (const char *)(p->exact + row * p->d);
  for (size_t offset = 0; offset < p->d * sizeof(float); offset += 64)
    __builtin_prefetch(at + offset);
}

/* The own rows of a run and what its certify rounds (knn_split.c: re-selection, exhaustive) need
 * of them: rows are local numbers (0 .. query->n), query_first + i in the whole run. */
typedef struct {
  KnnwbSplitRun *run;
  const KnnwbPrepared *query, *reference;
  const unsigned char *query_invalid;
  size_t query_first, reference_first;
  gboolean self;
  size_t k, available;
  KnnwbNeighbors *result;
} KnnwbSplitRows;

/* Rows every rank sent every rank for a certify round: rank r's counts[r] rows, packed at
 * packed + offset[r] (knnwb_split_pack), numbered global[start[r] ..] in the whole run. */
typedef struct {
  size_t ranks, total;
  int64_t *counts;
  size_t *start, *offset;
  int64_t *global;
  char *packed;
} KnnwbSplitShared;

/* knn_split_frame.c */
/** The shared frame of the run into frame (column_mean and scale_exponent only). Collective;
 * errors: the group's transport. O(m d) per rank and d doubles sent to every rank. */
gboolean knnwb_split_frame(const KnnwbKnnGroup *group, const KnnwbMatrix *query,
                           const KnnwbMatrix *reference, size_t n_reference, KnnwbMetric metric,
                           KnnwbPrepared *frame, GError **error);
/** A double >= 0 as int64 bits in the same order (an int64 maximum over the ranks finds the
 * largest), and back. */
int64_t knnwb_split_double_bits(double value);
double knnwb_split_bits_double(int64_t bits);

/* Bytes before each rank's block in a shared window: the chunk counter of knnwb_split_pair_chunks
 * (a cache line, so the block stays aligned). */
#define KNNWB_SPLIT_HEADER ((size_t)64)

/* A self run's blocks in the window of ranks that share memory (knn_split_window.c): each rank's
 * part holds a header, its prepared block packed (knnwb_split_pack) and, when back_shared, the
 * lists that go back to it, back_offset bytes into the part. */
typedef struct {
  gboolean shared;      /* open: every rank reads the others' blocks in place */
  gboolean back_shared; /* the lists that go back lie in the window too */
  size_t back_offset;
  void **parts;         /* every rank's part, in rank order */
  KnnwbPrefault *ahead; /* this rank's part faulting in on helpers (knnwb_split_window_begin) */
} KnnwbSplitWindow;

/* knn_split_window.c */
/** A self run's window in two halves, so that a rank's part faults in while it prepares its rows.
 * begin: a window for rows laid out as layout (blocks: every rank's rows) with room for the lists
 * that go back where the host's shared memory allows it (KNNWB_SPLIT_BACK_SHARED=0: never), else
 * for the blocks alone, this rank's part faulting in on threads helpers. TRUE with window->shared
 * FALSE: no window (the group cannot share memory, or too little room: the blocks travel as
 * exchanges). fill: stops the helpers, packs own (prepared in that layout) and publishes it.
 * Both collective: every rank alike; errors: the group's transport. Memory: the block packed and
 * the back lists, in shared memory. knnwb_split_window_close after begin alone stops the helpers
 * first. */
gboolean knnwb_split_window_begin(const KnnwbKnnGroup *group, const KnnwbSplitLayout *layout,
                                  size_t k, const KnnwbSplitBlocks *blocks, int threads,
                                  KnnwbSplitWindow *window, GError **error);
gboolean knnwb_split_window_fill(const KnnwbSplitRun *run, const KnnwbPrepared *own,
                                 const unsigned char *own_invalid, const KnnwbSplitBlocks *blocks,
                                 KnnwbSplitWindow *window, GError **error);
/** Gives the window back (if still open) and frees window's parts. Collective when it is open,
 * as every rank's is then. Errors: the group's transport. */
gboolean knnwb_split_window_close(const KnnwbKnnGroup *group, KnnwbSplitWindow *window,
                                  GError **error);

/* knn_split_pass.c */
/** The first pass of a self graph into best (this rank's rows, k wide, empty: taken in step by
 * step), the blocks read in place from window where it is open (knnwb_split_window_begin and _fill;
 * without back_shared the pass gives it back after its last step, for the exchange of the lists
 * that go back), else fetched. Collective: the ranks agree after each step, so an allocation,
 * backend, transport or cancel error on one rank fails the pass on every rank. Time: about (R/2)
 * m^2 d scores per rank. */
gboolean knnwb_split_self_pass(const KnnwbSplitRun *run, const KnnwbPrepared *own,
                               const unsigned char *own_invalid, const KnnwbSplitBlocks *blocks,
                               KnnwbSplitWindow *window, KnnwbSplitBest *best, GError **error);
/** The first pass of a query run into best (the own query rows). Collective, errors as
 * knnwb_split_self_pass. Time: m x n_reference scores per rank, R - 1 block fetches. */
gboolean knnwb_split_query_pass(const KnnwbSplitRun *run, const KnnwbPrepared *query,
                                size_t query_first, const KnnwbPrepared *reference,
                                const unsigned char *reference_invalid,
                                const KnnwbSplitBlocks *blocks, KnnwbSplitBest *best,
                                GError **error);

/* knn_split_best.c */
size_t knnwb_split_best_bytes(size_t rows, size_t k);
/** rows x k empty lists (bounds +inf) in room (at least knnwb_split_best_bytes, borrowed) or,
 * room NULL, a buffer of their own; emptied on threads threads. Errors: KNNWB_ERROR_NO_MEMORY. */
gboolean knnwb_split_best_init_in(KnnwbSplitBest *best, size_t rows, size_t k, char *room,
                                  int threads, GError **error);
/** Lists laid out in buffer as knnwb_split_best_init_in lays them (another rank's), as they are. */
KnnwbSplitBest knnwb_split_best_over(char *buffer, size_t rows, size_t k);
/** Rows [first, first + rows) of best, in place (owns nothing). */
KnnwbSplitBest knnwb_split_best_window(const KnnwbSplitBest *best, size_t first, size_t rows);
void knnwb_split_best_clear(KnnwbSplitBest *best);
/** A job's candidates (lists: rows' rows against of's, made global by knnwb_split_finish_as) taken
 * into best's rows [at, at + lists->rows) while of's rows are present: the exact distances the
 * backend did not return computed, except for candidates provably farther than the row's k-th;
 * the k best by (distance, index) kept; a full list (kc candidates, fewer than complete_at, the
 * rows the job chose from) lowers the row's bound to its worst score. O(rows kc log kc), at most
 * rows x kc exact distances, on run->threads. */
void knnwb_split_best_take(const KnnwbSplitRun *run, KnnwbSplitBest *best, size_t at,
                           KnnwbSplitLists *lists, const KnnwbSplitSide *rows,
                           const KnnwbSplitSide *of, size_t complete_at);
/* One side of a job whose backend refines its rows' lists on its device and hands them over as
 * they come (KnnwbSelectJob.out_refined_take): where they go (best's rows from at), what they are
 * (rows' rows among of's, from kc candidates a row; the rows the job chose from: complete_at). */
typedef struct {
  KnnwbSplitBest *best;
  size_t at, kc, complete_at;
  const KnnwbSplitSide *rows, *of;
} KnnwbSplitTaker;
/** Rows [first, first + count) of taker's side as a backend refined them (count x k job-local
 * indices and exact distances by (distance, index), -1 past the valid ones; each row's worst
 * score and valid count) taken into its best, as knnwb_split_best_take takes kc lists. On the
 * calling thread; calls for disjoint rows may run at once. O(count k). */
void knnwb_split_best_take_rows(const KnnwbSplitTaker *taker, size_t first, size_t count, size_t k,
                                const int64_t *index, const double *distance, const float *worst,
                                const int32_t *valid);
/** incoming's rows merged into best's rows [at, at + incoming->rows): the k best of both, the
 * lesser bound. O(rows k) on threads. */
void knnwb_split_best_merge(KnnwbSplitBest *best, const KnnwbSplitBest *incoming, size_t at,
                            int threads);
/** Each row's starting threshold for the next job (rows: the prepared rows of best's, from row
 * first; reference: what the certificate bounds against): its bound, or less once it holds k
 * neighbours, the least score provably farther than its k-th (knnwb_refine_score_bound).
 * O(rows) on run->threads. */
void knnwb_split_best_thresholds(const KnnwbSplitRun *run, const KnnwbSplitBest *best,
                                 const KnnwbPrepared *rows, size_t first,
                                 const KnnwbPrepared *reference, float *bounds);
/** The lists of the own rows (query's, local numbers) into result, and the local numbers of the
 * rows their bound cannot certify appended to left (rows flagged invalid: empty, certified). No
 * errors. O(rows k) on run->threads. */
void knnwb_split_best_certify(const KnnwbSplitRun *run, const KnnwbSplitBest *best,
                              const KnnwbPrepared *query, const KnnwbPrepared *reference,
                              size_t available, KnnwbNeighbors *result, GArray *left);

/* knn_split_select.c */
/** The rows of side not flagged invalid. O(count). */
size_t knnwb_split_valid(const KnnwbSplitSide *side);
/** A job's candidates in lists (local to side of) made global, with their exact distances from
 * rows' rows when distances (else NaN, for the refinement). O(rows kc d) on run->threads. */
void knnwb_split_finish_as(const KnnwbSplitRun *run, const KnnwbSplitSide *rows,
                           const KnnwbSplitSide *of, KnnwbSplitLists *lists, gboolean distances);
/** A select job of query's rows against reference's, kc candidates a row into out (index, score),
 * with the run's backend settings; the caller adds bounds, self and the two-sided outputs. O(1). */
void knnwb_split_fill_job(const KnnwbSplitRun *run, KnnwbSelectJob *job,
                          const KnnwbSplitSide *query, const KnnwbSplitSide *reference, size_t kc,
                          KnnwbSplitLists *out);
/** Runs job, filled by knnwb_split_fill_job from the sides query and reference, on the run's
 * backend (with rank 0's progress). Errors: the backend's status as a GError (cancelled, out of
 * memory, device). Time: the backend's. */
gboolean knnwb_split_run_job(const KnnwbSplitRun *run, const KnnwbSelectJob *job,
                             const KnnwbSplitSide *query, const KnnwbSplitSide *reference,
                             GError **error);
/** Whether a pair's two panels go to the backend as one job that scores each pair once for both
 * sides and returns both sides' k best (KnnwbSelectJob.out_reference_refined; GPUs; not on a
 * two-sided backend, which does it with kc lists). KNNWB_SPLIT_CROSS=0: never (to compare). */
gboolean knnwb_split_cross_wanted(const KnnwbSplitRun *run);
/** Whether the run's jobs ask the backend for each row's k best (GPUs; KNNWB_SPLIT_TEST_EXACT=3
 * emulates it on the CPU). */
gboolean knnwb_split_refine_wanted(const KnnwbSplitRun *run);
/** One job of query's rows among reference's (NULL: query against itself, self pairs excluded),
 * from the rows' thresholds bounds (NULL: none), in room, taken into best's rows [at, ..) while
 * reference's rows are present. Errors: allocation, the backend's. Time: |query| |reference| d
 * scores on the backend, then knnwb_split_best_take's. */
gboolean knnwb_split_panel(const KnnwbSplitRun *run, const KnnwbSplitSide *query,
                           const KnnwbSplitSide *reference, const float *bounds,
                           const KnnwbSplitRoom *room, KnnwbSplitBest *best, size_t at,
                           GError **error);
/** The candidates of a pair of sides taken into a_best's rows [a_at, ..) and b_best (b->count
 * rows: the window of the lists that go back to b's owner), or, b NULL, of a against itself: one
 * two-sided job on the CPU, two panels (knnwb_split_panel, b's first) elsewhere. room: as large as
 * the larger side's. Errors: allocation, the backend's. Time: |a| |b| d scores on the backend. */
gboolean knnwb_split_select(const KnnwbSplitRun *run, const KnnwbSplitSide *a,
                            const KnnwbSplitSide *b, const float *a_bounds, const float *b_bounds,
                            const KnnwbSplitRoom *room, KnnwbSplitBest *a_best, size_t a_at,
                            KnnwbSplitBest *b_best, GError **error);

/** Every rank's count rows (local numbers mine) sent to every rank into shared. Collective;
 * errors: the group's transport. Memory: the packed rows of every rank. */
gboolean knnwb_split_share_rows(const KnnwbSplitRows *rows, const KnnwbSplitLayout *layout,
                                const int64_t *mine, size_t count, KnnwbSplitShared *shared,
                                GError **error);
/** A prepared view of rank r's rows in shared (owns nothing). O(rows). */
void knnwb_split_shared_view(const KnnwbSplitShared *shared, const KnnwbSplitLayout *layout,
                             const KnnwbPrepared *like, size_t r, KnnwbPrepared *view);
void knnwb_split_shared_clear(KnnwbSplitShared *shared);
/** found[r] (lists of rank r's shared rows, kc wide) go back to rank r; back[r] (count rows, given)
 * receives this rank's rows' lists from rank r. Collective; errors: the group's transport. */
gboolean knnwb_split_return_lists(const KnnwbKnnGroup *group, const KnnwbSplitShared *shared,
                                  KnnwbSplitLists *found, size_t count, size_t kc,
                                  KnnwbSplitLists *back, GError **error);

/* knn_split_refine.c */
/** One re-selection round of the own uncertified rows (mine: count local numbers) with
 * rows->run->kc candidates, against every rank's reference block; those still uncertified are
 * appended to left. Collective; errors: allocation, the backend's, the group's transport (the same
 * on every rank). Memory: batches within the budget. */
gboolean knnwb_split_retry(const KnnwbSplitRows *rows, const int64_t *mine, size_t count,
                           GArray *left, GError **error);

/* knn_split_exhaustive.c */
/** The exact lists of the own rows mine (count local numbers) compared with every reference row:
 * each rank's exact k best of its block for every rank's rows, merged by (distance, index) on the
 * rows' owner. Collective; errors: allocation, cancel, the group's transport (the same on every
 * rank). Time: (rows of all ranks) x (own block) exact distances a rank; memory: batches within the
 * budget. */
gboolean knnwb_split_exhaustive(const KnnwbSplitRows *rows, const int64_t *mine, size_t count,
                                GError **error);

/* knn_split_plan.c */
/** The first pass's candidates per row: *kc (the screen's) in, the ranks' plan out. Where the
 * ranks agree to plan (knnwb_margin_wanted for the run's n_query rows), the KNNWB_MARGIN_SAMPLE
 * rows knnwb_margin_choose samples over all n_query rows are scored against every rank's reference
 * block, each rank counts those of its block (their counts in needed, in row order, as many as
 * the sample rows in its block, at most KNNWB_MARGIN_SAMPLE; may be NULL), and every rank takes
 * the plan of all the counts, within the smallest max_kc: one process's plan and counts when the
 * blocks are prepared as one process prepares the rows. A cancel flag raised on any rank keeps *kc
 * (needed all 0). Collective (one reduction when nothing is planned); errors: the group's
 * transport. Time: the sample against the own block, O(s m d) for s = KNNWB_MARGIN_SAMPLE; memory
 * O(s (d + 4 kc)). */
gboolean knnwb_split_plan(const KnnwbSplitRows *rows, size_t n_query, size_t max_kc, size_t *kc,
                          size_t *needed, GError **error);

/* knn_split_progress.c */
/** The select job's progress callback of a run with a progress line (data: the KnnwbSplitRun). */
void knnwb_split_job_progress(uint64_t done, uint64_t total, void *data);
/** Rank 0's progress line: done of total steps of the pass are over. O(1). */
void knnwb_split_progress(const KnnwbSplitRun *run, uint64_t done, uint64_t total);
/** TRUE, with KNNWB_ERROR_CANCELLED set, once the run's cancel flag is set. O(1). */
gboolean knnwb_split_cancelled(const KnnwbSplitRun *run, GError **error);
/** A debug line: what took the seconds since *since (then reset to now), and the CPU time. */
void knnwb_split_mark(const KnnwbKnnGroup *group, const char *what, gint64 *since);

#endif
