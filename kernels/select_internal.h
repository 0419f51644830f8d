/*
 * Internal C++ interface between the CUDA files of the selection backend (the host side, from
 * cuda_select.cu down, drives; tile_filter.cu filters a tile, tile_select.cu merges;
 * tile_scores_l1.cu computes manhattan tiles; exact_distance.cu recomputes the final distances).
 * Not installed, not for core.
 *
 * Selection state, per resident row r (device memory):
 *   list_score/list_index[r*kc ..]  the kc best (score, reference index) so far, any order;
 *                                   empty slots have index -1 and score +inf;
 *   thr[r]                          an upper bound on the kc-th best score (the list's kc-th,
 *                                   +inf while not full, or a tighter bound imported from the
 *                                   rows' diagonal tile on another GPU): a new pair can only
 *                                   matter when its score is strictly below it;
 *   cand_score/cand_index[r*cap ..] candidates that passed thr, appended by the tile filter;
 *   count[r]                        candidates appended (may exceed cap: the row "overflowed").
 * A row is merged (list + candidates -> new list, new thr) once its count passes lazy_limit, so the
 * expensive k-selection runs rarely; an overflowed row is merged from the tile itself, which is
 * still on the device (or, for a fused tile, from its line recomputed from the rows).
 */
#ifndef KNNWB_SELECT_INTERNAL_H
#define KNNWB_SELECT_INTERNAL_H

#include "select_plan.h"

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

namespace knnwb_cuda
{

/** Device-side selection state for a set of resident rows (see the file comment). */
struct SelectState {
  int kc;
  int cap;
  int lazy_limit;
  float *list_score;
  int *list_index;
  float *thr;
  float *cand_score;
  int *cand_index;
  int *count;
  /* rows to merge after the current tile: tile-local line, bit 31 set for a tile column (2 x tile
   * entries: a fresh tile's stages queue rows only, and its second half holds the rows that the
   * warp merge leaves to the block merge, counted in merge_count[1]) */
  int *merge_list;
  int *merge_count;
  /* per merge block: room for one compacted tile line (key, index) */
  uint32_t *scratch_key;
  int *scratch_index;
  int scratch_len;
  int merge_blocks;
  /* per merge block: the new list (kc entries), when it does not fit in shared memory; else NULL */
  uint32_t *out_key;
  int *out_index;
  /* KNNWB_CUDA_TRACE=2: counters (candidates appended, rows merged, overflowed lines), else NULL */
  unsigned long long *stats;
  /* fresh tiles by launch_fresh_select where it fits (knnwb_select_plan_fresh_kernel) */
  int fresh_kernel;
};

/** The side of a fused tile's blocks, whose passing pairs it keeps together (TileGeom.pairs). */
constexpr int kFusedPairBlock = KNNWB_SELECT_FUSED_BLOCK;

/**
 * One tile of products: tile[i*ld + j] = q_i . r_j (or sum |q_i - r_j| for L1) for i < n_rows
 * (queries), j < n_cols (references); float, or with half_tile __half values that times
 * tile_scale (a power of two) give q_i . r_j exactly. The row pass updates state rows
 * row_state0 + i with candidates col_global0 + j; when do_cols (self job, off-diagonal tile) the
 * column pass updates state rows col_state0 + j with candidates row_global0 + i.
 */
struct TileGeom {
  const void *tile;
  int half_tile;
  float tile_scale; /* half_tile only */
  size_t ld;
  int n_rows;
  int n_cols;
  int row_global0;
  int col_global0;
  int row_state0;
  int col_state0;
  int do_cols;
  int self;
  /* the rows have seen no pair yet (+inf thresholds): see launch_tile_select */
  int fresh;
  /* tiles the rows or the columns of this one, whichever fewer, were filtered against before
   * (the symmetric schedule; INT_MAX where a schedule does not count them): the first tiles
   * after a row's diagonal pass many pairs, which the filter kernel handles better than a fused
   * tile (Worker::fused_wanted) */
  int seen;
  int kind;
  const float *sqnorms;         /* reference squared norms by global index (L2 only) */
  const unsigned char *invalid; /* reference rows never to be candidates, or NULL */
  const int32_t *row_group;     /* query rows' groups by global index, or NULL (no groups) */
  const int32_t *col_group;     /* reference rows' groups by global index (with row_group) */
  /* fused tiles (tile == NULL, launch_fused_filter): the FP16 rows of the tile's queries
   * (n_rows x dpad halves) and references (n_cols x dpad), and the GEMM's alpha; the products
   * are alpha * tile_scale * (q_rows_i . r_rows_j) */
  const void *q_rows;
  const void *r_rows;
  int dpad;
  /* halves of a row that may be nonzero (the rows' width rounded up to 8, at most dpad): the
   * wgmma kernel's copies read no further (the rest is zero padding); 0 reads dpad */
  int dread;
  float alpha;
  /* fused tiles: the pairs that passed, found by the fused kernel and appended to the candidate
   * buffers by launch_tile_select (launch_fused_pairs), so that the kernel touches no selection
   * state but the thresholds it reads. A pool of pair_room pairs; pair_index[0] counts the pool's
   * pairs, and kFusedPairBlock-square block b (block row * blocks per row + block column) holds
   * pair_index[2 + 2b] of them from pairs[pair_index[1 + 2b]]. A line some of whose pairs did not
   * fit is marked in lost (lost[i]: row line i, lost[ld + j]: column line j); its merge
   * recomputes it from the rows. */
  uint2 *pairs;
  int *pair_index;
  unsigned char *lost;
  int pair_room;
};

/** Empties rows [row0, row0 + n_rows) of the state. */
cudaError_t launch_state_reset(const SelectState &state, int row0, int n_rows, cudaStream_t stream);

/**
 * Empties the lists and pending candidates of rows [row0, row0 + n_rows) but keeps thr. Valid only
 * when another GPU's lists hold, for each such row, kc pairs scoring at most its thr (the owner of
 * the row's diagonal tile): pairs dropped here by that bound are then never needed in the union.
 */
cudaError_t launch_state_clear_lists(const SelectState &state, int row0, int n_rows,
                                     cudaStream_t stream);

/** Other GPUs' threshold arrays (device pointers readable from this GPU by peer access). */
struct PeerThresholds {
  static constexpr int kMax = 16;
  const float *thr[kMax];
  int count;
};

/**
 * thr[i] = min(thr[i], every peer's thr[i]) for rows [row0, row0 + n_rows). Valid only once every
 * GPU's thresholds are backed by its own lists (after the diagonal phase): each peer value then
 * bounds kc pairs that the union of the lists keeps, so pairs it filters out are never needed.
 * That holds row by row, so any subset of the rows may be imported.
 */
cudaError_t launch_import_thresholds(const SelectState &state, const PeerThresholds &peers,
                                     int row0, int n_rows, cudaStream_t stream);

/** Other GPUs' final lists (device pointers readable from this GPU by peer access). */
struct PeerLists {
  static constexpr int kMax = 16;
  const float *score[kMax];
  const int *index[kMax];
  int count;
};

/**
 * Appends the peers' lists of rows [row0, row0 + n_rows) to those rows' candidate buffers
 * (count[row] = peers.count * kc; empty entries get a NaN score, which orders after every real
 * one). Needs count[row] == 0 (a final merge ran) and peers.count * kc <= cap; a final merge of
 * the rows then keeps the kc best of the union. The lists of different GPUs never share a pair
 * (every tile is computed once), so that union is exactly what the host merge would build.
 */
cudaError_t launch_gather_lists(const SelectState &state, const PeerLists &peers, int row0,
                                int n_rows, cudaStream_t stream);

/**
 * Appends a fused tile's pairs (geom.pairs, filled by launch_fused_filter) that beat their row's
 * threshold to the candidate buffers, as launch_filter appends a tile's, and queues their rows for
 * the merge; a lost line is queued without any, and its merge recomputes it whole
 * (tile_fused_pairs.cu). Empties the merge queue first. O(pairs + lines).
 */
cudaError_t launch_fused_pairs(const SelectState &state, const TileGeom &geom, cudaStream_t stream);

/** The most pairs a fused tile keeps (KNNWB_CUDA_FUSED_ROOM, at least 1, for tests of lost lines;
 * INT_MAX when unset: what fits its buffer, Worker::fused_pairs). */
int fused_pair_room(void);

/** Whether a fused tile may start before the previous tile's merge ended (it then reads thresholds
 * that the merge may still lower, which lets more pairs through, never fewer;
 * KNNWB_CUDA_FUSED_OVERLAP=0: it waits, as before). */
bool fused_overlap_wanted(void);

/**
 * Launches the threshold filter of tile geom on stream (tile_filter.cu): pairs that beat their
 * row's (and, for column passes, column's) threshold go to the candidate buffers, rows that cross
 * lazy_limit are queued in merge_list. Errors: the caller reads cudaGetLastError(). O(tile) reads.
 */
void launch_filter(const SelectState &state, const TileGeom &geom, cudaStream_t stream);

/**
 * Whether ordinary FP16 tiles of DOT and ABS_DOT scores are fused: KNNWB_CUDA_FUSED=1 (always), 0
 * (never), or unset: -1, each worker measures both on its first tiles and keeps the faster
 * (Worker::fused_probe). Neither wins everywhere (one H200, tile loop: real-like 1,533,876 x 128
 * Pearson k = 20 fused 1.55 s against 1.90 s; 1,000,000 x 32..128 rows of 50 clusters, cosine k =
 * 30, 1.02-1.27 s against 0.90-1.08 s; docs/performance-gpu.md). Read at every tile (a getenv,
 * no cache), so that a test can compare the paths in one process.
 */
int fused_tiles_setting(void);

/** How many tiles a fused tile's rows and columns must have been filtered against before
 * (TileGeom.seen; KNNWB_CUDA_FUSED_AFTER, default 2). */
int fused_tiles_after(void);

/**
 * The fused tile (tile_fused.cu): the products of geom.q_rows and geom.r_rows on the tensor
 * cores, filtered in registers as launch_filter filters a tile, without writing the tile. For
 * geom.kind DOT or ABS_DOT, no groups, rows with thresholds (not fresh); geom.dpad a multiple of
 * 8 and the rows 16-byte aligned. Writes only geom.pairs, pair_index and lost (emptied first):
 * launch_tile_select with geom.tile NULL then appends the pairs and merges. *wgmma: whether the
 * wgmma kernel ran (launch_fused_wgmma, the default where the device runs it;
 * KNNWB_CUDA_FUSED_MMA=sync forces the mma.sync one). Errors: the launch's. O(n_rows n_cols dpad)
 * tensor-core work.
 */
cudaError_t launch_fused_filter(const SelectState &state, const TileGeom &geom, cudaStream_t stream,
                                bool *wgmma);

/** Empties the pairs' index and lost lines of a fused tile of geom's size (before its kernel). */
cudaError_t clear_fused_pairs(const TileGeom &geom, cudaStream_t stream);

/**
 * launch_fused_filter's kernel on Hopper's wgmma instructions (tile_fused_wgmma.cu), same
 * contract; cudaErrorNotSupported (nothing launched) where it cannot run: a device other than
 * compute capability 9.0, or a build without sm_90 among the architectures.
 */
cudaError_t launch_fused_wgmma(const SelectState &state, const TileGeom &geom, cudaStream_t stream);

/**
 * Filters a finished tile into the state and merges the rows that need it. A tile of fresh rows
 * (geom.fresh, row pass only) goes to launch_fresh_select where fresh_select_fits; otherwise it
 * is filtered in column stages of doubling width, every row with candidates merged after each
 * stage, so that thresholds exist before most of a line is read: in one pass every pair would beat
 * a +inf threshold and every line would overflow into a full re-read by the merge (about 8x the
 * cost of an ordinary tile's selection, measured).
 */
cudaError_t launch_tile_select(const SelectState &state, const TileGeom &geom, cudaStream_t stream);

/**
 * Whether launch_fresh_select takes tile geom (tile_fresh.cu): where state.fresh_kernel, a fresh
 * tile's row pass (of a tile in memory) whose rows hold at most 512 list and candidate slots
 * (kc + cap). Otherwise the column stages run.
 */
bool fresh_select_fits(const SelectState &state, const TileGeom &geom);

/**
 * Selects a fresh tile's rows in one kernel, a block per row: each row's list becomes the kc best
 * of its list, its pending candidates (at most cap) and its line, equal keys at the boundary
 * taken in that order; its threshold the kc-th (never raised) and its count 0. Needs
 * fresh_select_fits. Errors: the launch's. O(n_cols) a row, one read of the tile (two for a row
 * of many equal keys).
 */
cudaError_t launch_fresh_select(const SelectState &state, const TileGeom &geom,
                                cudaStream_t stream);

/** Merges the pending candidates of rows [row0, row0 + n_rows) into their lists. */
cudaError_t launch_final_merge(const SelectState &state, int row0, int n_rows, cudaStream_t stream);

/** Copies the lists of rows [row0, row0 + n_rows) to out_index (int64) and out_score. */
cudaError_t launch_extract(const SelectState &state, int row0, int n_rows, int64_t *out_index,
                           float *out_score, cudaStream_t stream);

/**
 * Prepares the merge kernel for kc on the current device. *in_shared says whether the new lists
 * are built in shared memory; when FALSE, the state needs out_key/out_index (merge_blocks x kc).
 */
cudaError_t prepare_merge_kernel(int kc, bool *in_shared);

/** Largest kc whose merge lists fit in shared memory on the current device. */
int shared_memory_kc_limit(void);

/**
 * Manhattan tile: out[i*ld + j] = sum_k |q[i*dpad + k] - r[j*dpad + k]| for i < n_q, j < n_r.
 * dpad is a multiple of 8 (zero padding), ld a multiple of 128 and at least the rounded-up n_r.
 */
cudaError_t launch_l1_tile(const float *q, int n_q, const float *r, int n_r, int dpad, float *out,
                           size_t ld, cudaStream_t stream);

/** Exact rows on the device for launch_exact_distances (statistics NULL = all zero). */
struct ExactRows {
  int kind; /* KnnwbExactKind */
  int dim;
  const float *query;     /* n_query x dim */
  const float *reference; /* n_reference x dim */
  const double *query_mean, *query_squares, *reference_mean, *reference_squares;
};

/**
 * out[t*kc + c] = core's exact distance of query row query0 + t and reference row
 * index[t*kc + c] (NaN where the index is negative), for t < n_rows. Bit-identical to
 * knnwb_pair_distance; see exact_distance.cu.
 */
cudaError_t launch_exact_distances(const ExactRows &rows, const int64_t *index, size_t n_rows,
                                   int kc, size_t query0, double *out, cudaStream_t stream);

/** Largest kc whose rows launch_refine_rows sorts in shared memory on the current device. */
int refine_kc_limit(void);

/** Prepares launch_refine_rows for kc on the current device (its shared memory). */
cudaError_t prepare_refine_kernel(int kc);

/**
 * Core's refine of n_rows rows on the device (see lists_refine.cu): in index (int64, n_rows x kc),
 * score and distance (the exact distances, from launch_exact_distances), in place, per row r:
 * ((int32_t *)index)[r*2kc + c] = the c-th nearest valid candidate by (distance, index) for
 * c < k (-1 past the valid ones), then the largest score of the row's candidates (float bits) and
 * the number of valid ones; distance[r*kc + c] = its distance (+inf past them). self0 >= 0: a self
 * job whose first row here is query row self0 (a row is never its own neighbour). order (NULL:
 * none): the rows are in core's order (row_order.h), index holds places in it, and the row and its
 * candidates are order[place] (the indices sorted and written; self0 a place too). kc <=
 * refine_kc_limit(), k <= kc.
 */
cudaError_t launch_refine_rows(int64_t *index, const float *score, double *distance, int n_rows,
                               int kc, int k, long long self0, const int *order,
                               cudaStream_t stream);

} // namespace knnwb_cuda

#endif
