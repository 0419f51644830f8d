/*
 * The GPU selection backend's planner: tile size, residency and schedule from the job's sizes and
 * a per-device memory budget, and the one list of device buffers that both the byte count and the
 * worker's allocations (kernels/worker_setup.cu) are made from. Host-only C, no CUDA: the unit
 * tests (tests/kernels/test_select_plan.c) run it where no GPU exists.
 */
#ifndef KNNWB_SELECT_PLAN_H
#define KNNWB_SELECT_PLAN_H

#include <stddef.h>

#include "knnwb_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tiles are square, between these sizes (rows), multiples of the smaller. Tiles above
 * KNNWB_SELECT_STREAM_MAX_TILE are planned only with every row resident: where the rows must
 * stream, the smaller tile's resident plan comes first. (One H200, alternating runs in one call:
 * tiles of 16,384 against 8,192 took the real-like tile loop, 1,533,876 x 128 Pearson k = 20,
 * from 2.46-2.49 s to 2.17 s; 12,288: 2.29 s; 32,768: 2.05-2.07 s against 2.04-2.07 s.) */
#define KNNWB_SELECT_MAX_TILE 16384
#define KNNWB_SELECT_STREAM_MAX_TILE 8192
#define KNNWB_SELECT_MIN_TILE 128
/* Full tiles a resident FP16 run must have for its tile GEMM to be chosen by timing (about 20
 * GEMMs of a tile: lt_gemm_choose, tile_scores.h); fewer take cublasGemmEx untimed. */
#define KNNWB_SELECT_CHOOSE_MIN_TILES 64
/* Selection counters (KNNWB_CUDA_TRACE=2) per kind of tile: candidates, merged rows, overflowed
 * lines and a spare; the ordinary tiles' set, then the fresh (diagonal) tiles' set. */
#define KNNWB_SELECT_STATS 4
/* Fixed device bytes on top of the buffers: cuBLAS workspace, context slack. */
#define KNNWB_SELECT_OVERHEAD_BYTES ((size_t)96 << 20)

typedef struct {
  int symmetric;       /* self job, upper triangle of tiles, state for all rows */
  int resident;        /* every row on the device (else blocks stream from the host) */
  int tile;            /* rows per tile side */
  int dpad;            /* row length on the device: knnwb_select_plan_dpad */
  int kc;              /* candidates per row */
  int cap;             /* candidate buffer per row */
  int lazy_limit;      /* candidates a row collects before it is merged (knnwb_select_plan_lazy) */
  int merge_blocks;    /* blocks of the merge kernel (each with its own scratch) */
  int lists_in_shared; /* merge lists fit shared memory (else out_key/out_index buffers) */
  int screen;          /* KnnwbScreenPrecision of the score GEMMs (FP32 for manhattan) */
  int row_bytes;       /* bytes of one device row: dpad floats, or dpad halves for FP16 */
  size_t state_rows;   /* rows with selection state: all (symmetric) or one panel */
  size_t bytes;        /* device bytes without the exact-distance buffers */
  int diagonal_ahead;  /* the next column's diagonal tile beside this column's tiles, with buffers
                          of its own (knnwb_select_plan_diagonal_ahead) */
} KnnwbSelectPlan;

/* Every device buffer of one worker. Pointers of the same kind alias where noted. */
typedef enum {
  KNNWB_BUFFER_REFERENCE_ROWS = 0, /* resident: n_reference x row_bytes (floats or halves) */
  KNNWB_BUFFER_QUERY_ROWS,         /* resident, query != reference */
  KNNWB_BUFFER_QUERY_BLOCK,        /* streaming: tile x dpad */
  KNNWB_BUFFER_REFERENCE_BLOCK_0,  /* streaming: tile x dpad, double-buffered */
  KNNWB_BUFFER_REFERENCE_BLOCK_1,
  KNNWB_BUFFER_SQNORMS,         /* L2: n_reference floats */
  KNNWB_BUFFER_INVALID,         /* reference_invalid given: n_reference bytes */
  KNNWB_BUFFER_QUERY_GROUP,     /* groups given: n_query int32 */
  KNNWB_BUFFER_REFERENCE_GROUP, /* groups given: n_reference int32 */
  KNNWB_BUFFER_TILE_0,          /* tile x tile scores (symmetric: also the final staging) */
  KNNWB_BUFFER_TILE_1,
  KNNWB_BUFFER_LIST_SCORE, /* state_rows x kc */
  KNNWB_BUFFER_LIST_INDEX,
  KNNWB_BUFFER_THRESHOLD, /* state_rows */
  KNNWB_BUFFER_COUNT,
  KNNWB_BUFFER_CANDIDATE_SCORE, /* state_rows x cap */
  KNNWB_BUFFER_CANDIDATE_INDEX,
  KNNWB_BUFFER_STATS,      /* trace counters */
  KNNWB_BUFFER_MERGE_LIST, /* 2 x tile ints */
  KNNWB_BUFFER_MERGE_COUNT,
  KNNWB_BUFFER_SCRATCH_KEY, /* merge_blocks x tile */
  KNNWB_BUFFER_SCRATCH_INDEX,
  KNNWB_BUFFER_OUT_KEY, /* lists not in shared memory: merge_blocks x kc */
  KNNWB_BUFFER_OUT_INDEX,
  KNNWB_BUFFER_STAGE_INDEX, /* panels: tile x kc int64 output staging */
  KNNWB_BUFFER_STAGE_SCORE,
  KNNWB_BUFFER_SCREEN_QUERY_BLOCK, /* streaming FP16: the blocks converted, tile x dpad halves */
  KNNWB_BUFFER_SCREEN_REFERENCE_BLOCK_0,
  KNNWB_BUFFER_SCREEN_REFERENCE_BLOCK_1,
  /* diagonal_ahead: the next column's diagonal tile (tile x tile), its GEMM's workspace, and its
   * selection's own merge list and scratch (the sizes of the ones above) */
  KNNWB_BUFFER_AHEAD_TILE,
  KNNWB_BUFFER_AHEAD_WORKSPACE,
  KNNWB_BUFFER_AHEAD_MERGE_LIST,
  KNNWB_BUFFER_AHEAD_MERGE_COUNT,
  KNNWB_BUFFER_AHEAD_SCRATCH_KEY,
  KNNWB_BUFFER_AHEAD_SCRATCH_INDEX,
  KNNWB_BUFFER_AHEAD_OUT_KEY,
  KNNWB_BUFFER_AHEAD_OUT_INDEX,
  /* exact distances (only when the run computes them on the device) */
  KNNWB_BUFFER_STAGE_DISTANCE,  /* panels: tile x kc doubles */
  KNNWB_BUFFER_EXACT_REFERENCE, /* n_reference x dim floats */
  KNNWB_BUFFER_EXACT_QUERY,     /* not the same rows */
  KNNWB_BUFFER_EXACT_REFERENCE_MEAN,
  KNNWB_BUFFER_EXACT_REFERENCE_SQUARES,
  KNNWB_BUFFER_EXACT_QUERY_MEAN,
  KNNWB_BUFFER_EXACT_QUERY_SQUARES,
  KNNWB_BUFFER_KINDS
} KnnwbSelectBuffer;

/** The first buffer that exists only with exact distances on the device. */
#define KNNWB_BUFFER_FIRST_EXACT KNNWB_BUFFER_STAGE_DISTANCE

/**
 * bytes[b] = size of buffer b for plan (0 = not allocated). exact: the exact-distance buffers
 * too; stats: the trace counters. The one place that lists the buffers.
 * Complexity: O(1).
 */
void knnwb_select_plan_buffers(const KnnwbSelectJob *job, const KnnwbSelectPlan *plan, int exact,
                               int stats, size_t bytes[KNNWB_BUFFER_KINDS]);

/** Device bytes of plan: the overhead plus every buffer (rounded as cudaMalloc does). */
size_t knnwb_select_plan_bytes(const KnnwbSelectJob *job, const KnnwbSelectPlan *plan, int exact);

/** The integer in environment variable name when it lies in [low, high], else fallback (knobs
 * kept to measure). O(1). */
int knnwb_select_plan_env(const char *name, int fallback, int low, int high);

/**
 * The row length on the device for dim components under screen: FP16 rows longer than 32 are
 * padded with zeros to a multiple of 64 halves (128 bytes, the K step of cuBLAS's Hopper kernels),
 * others to a multiple of 8. The zeros change no product, and the GEMMs are faster: on one H200
 * (M = N = 16,384, FP16 in and out) cuBLAS took 0.294 ms at K = 320 against 0.307 ms at K = 296
 * (d = 295), 0.171 ms at K = 64 against 0.176 ms at K = 56 (d = 50), and its fastest cuBLASLt
 * algorithms 0.268 ms and 0.147 ms. KNNWB_CUDA_DPAD_ROUND (8..64, a multiple of 8) sets the
 * multiple for FP16 rows, to measure (and to test the kernels on partly padded K steps). O(1).
 */
#define KNNWB_SELECT_FP16_ROUND 64
int knnwb_select_plan_dpad(size_t dim, int screen);

/**
 * Candidates a row collects before it is merged (SelectState::lazy_limit) for a candidate buffer
 * of cap: for small buffers (cap up to KNNWB_SELECT_LAZY_SMALL_CAP) cap / 8, at least 8; for
 * larger ones cap / 2. KNNWB_CUDA_LAZY_DIVISOR (2 gives cap / 2 everywhere) or
 * KNNWB_CUDA_LAZY_LIMIT (1..cap) override it, to measure. A lower limit merges more often:
 * thresholds tighten sooner and fewer pairs reach the exact passes, but each merge costs O(kc), so
 * large lists merge at cap / 2. The lists are the same either way. Measured on one H200,
 * alternating runs in one call: real-like 1,533,876 x 128 Pearson k = 20 (cap 96), tiles of
 * 8,192: tile loop 2.32-2.34 s with 16 against 2.50-2.56 s with 48, 2.37-2.38 s with 24; tiles
 * of 16,384: 2.02-2.05 s with 12, 2.04-2.07 s with 16, 2.04-2.05 s with 8; 384,126 x 295 k =
 * 4,096: 2.27-2.29 s with cap / 8 against 2.19 s with cap / 2. O(1).
 */
#define KNNWB_SELECT_LAZY_SMALL_CAP 256
int knnwb_select_plan_lazy(int cap);

/* The side of a fused tile's blocks, whose passing pairs it keeps together (kernels/
 * tile_fused_common.cuh). */
#define KNNWB_SELECT_FUSED_BLOCK 128

/* Where a fused tile keeps its passing pairs (TileGeom.pairs): in the half of its tile buffer that
 * its tile of halves leaves free, offsets from that half's start. The index comes first: the
 * pool's count, then each block's start and count (ints). */
typedef struct {
  size_t lost_offset;  /* the tile's lost lines: 2 x tile bytes */
  size_t pairs_offset; /* the pool, 16-byte aligned, 8 bytes a pair */
  int pair_room;       /* pairs the pool holds: all that fit, at most room_limit */
} KnnwbFusedPairs;

/**
 * The layout of a fused tile's pairs for tiles of `tile` rows in tile buffers of tile_bytes, the
 * pool at most room_limit pairs. Returns 0 (out untouched) when the free half holds fewer pairs
 * than a tile has rows: such tiles are not fused. O(1).
 */
int knnwb_select_plan_fused_pairs(int tile, size_t tile_bytes, int room_limit,
                                  KnnwbFusedPairs *out);

/* What a worker does with a tile that may be fused (knnwb_select_plan_fused_probe). */
typedef enum {
  KNNWB_FUSED_PROBE_LAST = 0, /* the last decision's kind: filtered before the first */
  KNNWB_FUSED_PROBE_FUSED,    /* a fused window's tile */
  KNNWB_FUSED_PROBE_FILTERED, /* a filtered window's tile */
  KNNWB_FUSED_PROBE_DECIDE    /* the four windows are over: decide (knnwb_select_plan_fused_wins) */
} KnnwbFusedProbeStep;

/**
 * The measurement of fused against filtered tiles, for the n-th tile (from 0) that may be fused,
 * counted from the worker's origin (which knnwb_select_plan_probe_gap moves after each decision;
 * a negative n keeps the last decision), in windows of `window` tiles (at least 1): the first
 * first_windows windows are filtered (a fused tile whose rows' thresholds are still loose passes
 * so many pairs that its blocks lose lines, and measured there it would mislead); then, of every
 * 32 windows, the first four go fused, filtered, filtered, fused (a trend in the tiles' cost falls
 * on both alike), and the tile after them decides for the rest of the period. (A worker moves its
 * origin after each decision, so its periods are those of knnwb_select_plan_probe_gap.) *mark: the
 * window (0..4) whose start this tile is, whose time starts there (the worker marks its selection
 * stream before the tile), else -1. O(1).
 */
KnnwbFusedProbeStep knnwb_select_plan_fused_probe(long n, long window, long first_windows,
                                                  int *mark);

/** Tiles of a measurement window: KNNWB_CUDA_FUSED_PROBE (1 to 4,096), default 64. O(1). */
long knnwb_select_plan_probe_window(void);

/** Windows filtered before the first measurement: KNNWB_CUDA_FUSED_FIRST (0 to 1,024), default
 * 2 (on the real-like matrix 2, 4 and 8 measured alike and fused tiles won; 2 fuses the most
 * tiles; the clusters' measurements chose filtered tiles after each). O(1). */
long knnwb_select_plan_probe_first(void);

/** Windows from one measurement's first to the next one's after a clear decision for fused tiles
 * (knnwb_select_plan_probe_gap): KNNWB_CUDA_FUSED_PERIOD (5 to 4,096), default 64. O(1). */
long knnwb_select_plan_probe_period(void);

/** Whether the fused windows (ms[0] + ms[3], their times in ms) beat the filtered ones (ms[1] +
 * ms[2]); a tie goes to filtered. O(1). */
int knnwb_select_plan_fused_wins(const float ms[4]);

/**
 * Tiles from a decision on ms[4] (the windows' times, fresh tiles taken out) to the next
 * measurement's first: 4 windows when the fused and the filtered pair differ by less than a tenth
 * of the slower, or when the run's first measurement (first nonzero) goes against the fused tiles;
 * else the period's rest: 60 for fused tiles (knnwb_select_plan_probe_period less the
 * measurement's 4), 28 for filtered ones. Why: a close decision can be flipped by one window
 * that a concurrent kernel slowed (on the real-like matrix with the fresh kernel, fused windows
 * once took 54 ms against filtered ones' 52 ms, where fused tiles otherwise win by 32-38 ms to
 * 48-52 ms), and a wrong decision then held for 2,048 tiles. A clear decision holds for the
 * period, except a first one for filtered tiles: the one clear flip seen (the first search on a
 * fresh machine, d = 295, where fused windows otherwise take 74-75 ms against 91-92 ms) kept
 * filtered tiles for 1,792 tiles, 0.3 s; where filtered tiles do win clearly, the check costs one
 * more measurement. The clusters' filtered tiles win by 3-4%, so they are measured every 8
 * windows, 2 of them fused: about 1% slower there. Fused tiles only gain as the rows' thresholds
 * tighten, and a measurement costs more than its two losing windows (no diagonal tile is computed
 * ahead during one, and its fresh tiles wait for their selection): on the real-like matrix a
 * second measurement, 32 windows after the first, cost its tile loop 0.08 s, so a clear win for
 * them holds for 64 windows. O(1).
 */
long knnwb_select_plan_probe_gap(const float ms[4], long window, int first);

/** Fresh tiles (a row block's first) a measurement takes out of its windows: their selection,
 * several times an ordinary tile's, falls into whichever window holds it, and one more in a fused
 * window than in a filtered one would decide the measurement by the diagonal's place alone. */
#define KNNWB_SELECT_PROBE_FRESH 32

/**
 * Takes the selection times of n fresh tiles (fresh_ms[i], in ms, measured in window
 * fresh_window[i], 0..3; others ignored) out of the windows' times ms[4], none below 0, before
 * knnwb_select_plan_fused_wins. O(n).
 */
void knnwb_select_plan_probe_exclude(float ms[4], const float *fresh_ms, const int *fresh_window,
                                     int n);

/**
 * The first tile knnwb_select_plan_choose tries for n_query x n_reference rows: the rows rounded
 * up to KNNWB_SELECT_MIN_TILE, at most KNNWB_SELECT_MAX_TILE (or KNNWB_CUDA_MAX_TILE's). The plan
 * takes it whenever the GPU's budget holds it (on a GPU of tens of GiB, for up to about 10^8
 * rows of the widths users have). O(1).
 */
int knnwb_select_plan_first_tile(size_t n_query, size_t n_reference);

/** Whether a resident FP16 run of n_query x n_reference rows in tiles of tile times its GEMM's
 * choice (at least KNNWB_SELECT_CHOOSE_MIN_TILES full tiles). O(1). */
int knnwb_select_plan_times_gemm(size_t n_query, size_t n_reference, int tile);

/**
 * Whether the fresh tiles (a row block's first: +inf thresholds) of a run with rows of dim columns
 * on n_devices GPUs are selected by the one kernel of tile_fresh.cu instead of column stages:
 * KNNWB_CUDA_FRESH=kernel or =stages decides; by default the kernel for 64 <= dim < 256 on one GPU.
 * Why (one H200, the tile loop, runs alternating): on the real-like matrix (d = 128) the kernel's
 * 1.1 ms a tile against the stages' 2.1 ms took the loop from 1.26-1.27 s to 1.17-1.18 s; where the
 * GEMMs bound the loop it fills the SMs they need (d = 295: the GEMMs 2.08 s against 2.00 s, the
 * loop no faster), on 1,000,000 x 32 clusters it lost 0.02-0.06 s, at d = 50 they were even, and
 * on two GPUs it was last measured 0.05 s slower (docs/performance-gpu.md). O(1).
 */
int knnwb_select_plan_fresh_kernel(size_t dim, int n_devices);

/** The workspace of a cuBLASLt tile GEMM (tile_scores_lt.cu); the diagonal ahead has one of its
 * own, since two GEMMs at once must not share one. */
#define KNNWB_SELECT_LT_WORKSPACE_BYTES ((size_t)4 << 20)

/**
 * Sets plan->diagonal_ahead (and plan->bytes with its buffers) for a run of job on n_devices GPUs
 * with budget bytes per device, or leaves the plan as it is. Ahead: one GPU walks the columns of
 * the symmetric schedule with each column's diagonal tile first, whose selection from +inf
 * thresholds (1.1-1.7 ms a 16,384-row tile on an H200, several ordinary tiles' time) the column's
 * next tiles waited for; computing the next column's diagonal on a stream of its own while this
 * column's tiles run hides it. The diagonal touches only its block's rows, which no tile of the
 * column before touches. Wanted: KNNWB_CUDA_DIAGONAL_AHEAD=0 never, otherwise a symmetric
 * resident FP16 plan of one process on one GPU with at least 3 blocks of rows, and room in the
 * budget for a third tile and a second merge scratch (the exact-distance buffers and a second
 * copy of the rows for the grouping counted too, so that neither is given up for it). O(1).
 */
void knnwb_select_plan_diagonal_ahead(const KnnwbSelectJob *job, KnnwbSelectPlan *plan,
                                      int n_devices, size_t budget);

/**
 * Whether a run of job under plan with budget bytes per device visits the rows grouped by their
 * nearest centroid (job->order_centroids; kernels/row_order.h): centroids given, a self job of one
 * process (no share), without groups or starting bounds, its rows resident in half precision, and
 * room beyond the plan (with the exact distances' buffers where the run will have them) for what
 * the grouping holds through the run (knnwb_select_plan_order_bytes) and for a second copy of the
 * rows while they are gathered: the first tile buffer, or else the budget beyond both. O(1).
 */
int knnwb_select_plan_groups_rows(const KnnwbSelectJob *job, const KnnwbSelectPlan *plan,
                                  size_t budget);

/**
 * Device bytes that grouping job's rows by centroid holds beyond plan until the run ends
 * (kernels/row_order.cu): the centroids as floats and as halves with their squares, every row's
 * cell and the order. O(1).
 */
size_t knnwb_select_plan_order_bytes(const KnnwbSelectJob *job, const KnnwbSelectPlan *plan);

/**
 * The largest tile (then residency) that fits budget bytes per device; the symmetric schedule is
 * preferred for self jobs while its state leaves at least half the budget to tiles
 * (KNNWB_CUDA_SYMMETRIC=0: never, so that tests run the panel schedule on small inputs). sm_count
 * and shared_kc (largest kc whose merge lists fit shared memory) describe the smallest device.
 * Returns 0 when even the smallest tiles do not fit. Complexity: O(log(n) ) plans tried.
 */
int knnwb_select_plan_choose(const KnnwbSelectJob *job, size_t budget, int sm_count, int shared_kc,
                             KnnwbSelectPlan *out);

/**
 * The plan with exactly this schedule (symmetric: 1, panels: 0) and tile, resident where that fits
 * budget bytes per device, else streamed: the plan a shared job's processes agreed on
 * (KnnwbSelectJob.share_plan: the smallest schedule and tile of theirs, which fit wherever a
 * larger one did). Returns 0 when it fits neither way (or asks for symmetric tiles of a job that
 * is not self, or a tile below KNNWB_SELECT_MIN_TILE). O(1).
 */
int knnwb_select_plan_choose_agreed(const KnnwbSelectJob *job, size_t budget, int sm_count,
                                    int shared_kc, int symmetric, int tile, KnnwbSelectPlan *out);

#ifdef __cplusplus
}
#endif

#endif
