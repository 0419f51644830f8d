/*
 * One GPU's worker of the selection backend: its streams, buffers and tile loop. The methods are
 * spread over files by job, each named after it:
 *   worker_setup.cu        streams, cuBLAS, peer access, the plan's buffers; release
 *   gemm_warm_up.cu        the first score GEMM's lazy set-up, on a helper thread
 *   row_upload.cu          rows to the device (resident slices, peers' slices, exact rows, blocks)
 *   row_order.cu           resident rows grouped by their nearest centroid (core's centroids)
 *   tile_issue.cu          one tile: operands, scores (tile_scores.h) or the fused tile
 *                          (tile_fused.cu), selection, bookkeeping
 *   schedule_symmetric.cu  self jobs: upper triangle of tiles, thresholds first
 *   schedule_ahead.cu      one GPU: the next column's diagonal tile beside this column's
 *   schedule_panels.cu     query panels against every reference block
 *   schedule_cross.cu      two-sided jobs: each tile across the two sides feeds both
 *   lists_extract.cu       final lists (and exact distances) to host memory
 *   lists_refine.cu        or, for core, the lists sorted by exact distance and cut to k
 *   lists_merge_peers.cu   several GPUs with peer access: lists merged on the devices
 *   lists_merge_host.cu    several GPUs without: lists merged on the host
 *   select_worker.cu       the worker's phases, in order
 */
#ifndef KNNWB_SELECT_WORKER_H
#define KNNWB_SELECT_WORKER_H

#include "cuda_check.h"
#include "select_internal.h"
#include "select_run.h"
#include "select_trace.h"
#include "tile_scores.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <thread>
#include <vector>

namespace knnwb_cuda
{

/* One refined download's chunks, host sets and events (lists_extract.cu). */
struct RefinedDownload;

/** A tile to issue: operands on the device and its geometry (geom.tile is filled in). */
struct TileRequest {
  const void *q; /* rows of the plan's row_bytes (halves for FP16) */
  int n_q;
  const void *r;
  int n_r;
  TileGeom geom;
  bool counted; /* one of the progress total's tiles (not a threshold-only sample) */
};

/* The next column's diagonal tile, computed on a stream of its own while this column's tiles run
 * (plan.diagonal_ahead; schedule_ahead.cu). */
struct DiagonalAhead {
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr; /* its selection ended */
  /* the worker's streams' work before the first diagonal ahead (uploads, order, reset) */
  cudaEvent_t after = nullptr;
  cudaEvent_t start = nullptr; /* trace: its GEMM's start (timed to done) */
  float *tile = nullptr;
  void *workspace = nullptr; /* its GEMM's own cuBLASLt workspace */
  SelectState state = {};    /* the worker's, with a merge list and scratch of its own */
  long block = -1;           /* the block whose diagonal was issued and not yet taken */
  bool first = true;         /* none issued yet in this schedule */
  long taken = 0;            /* trace: diagonals taken, and their GPU time */
  double ms = 0;
};

class Worker
{
public:
  Worker(Run &run, int index) : run_(run), index_(index), device_ordinal_(run.ordinals[index])
  {
  }
  ~Worker()
  {
    release();
  }
  Worker(const Worker &) = delete;
  Worker &operator=(const Worker &) = delete;
  /** Runs this GPU's share of the job; failures are recorded in the run. */
  void main();

private:
  /* worker_setup.cu */
  bool setup();
  bool setup_streams();
  bool setup_peer_access();
  bool setup_select_stream();
  bool setup_events();
  bool setup_blas();
  bool setup_merge_kernel();
  bool allocate_buffers(void *buffer[KNNWB_BUFFER_KINDS], size_t bytes[KNNWB_BUFFER_KINDS]);
  void *allocate_extra(size_t bytes);
  void bind_buffers(void *const buffer[KNNWB_BUFFER_KINDS], const size_t bytes[KNNWB_BUFFER_KINDS]);
  void bind_state(void *const buffer[KNNWB_BUFFER_KINDS]);
  void bind_stage(void *const buffer[KNNWB_BUFFER_KINDS]);
  void bind_exact_rows(void *const buffer[KNNWB_BUFFER_KINDS]);
  void take_host_staging();
  bool clear_buffers();
  void release();
  void quiesce();
  /* row_upload.cu */
  bool upload_resident();
  bool upload_peer_slices();
  bool upload_staged(char *dst, const HostRows &src, size_t rows);
  bool load_rows(float *dst, const float *src, size_t first, size_t rows, cudaStream_t stream);
  bool stream_block(int slot, const float *host, size_t first, int rows, const void **rows_out);
  const void *anchor_rows() const;
  bool load_anchor(const float *host, size_t first, int rows);
  /* row_order.cu */
  bool order_cells();
  void order_publish();
  bool order_apply();
  void start_exact_upload();
  bool exact_upload();
  bool finish_exact_upload();
  /* gemm_warm_up.cu */
  GemmPrecision gemm_precision() const;
  float gemm_alpha() const;
  void warm_up();
  void start_warm_up();
  void finish_warm_up();
  void choose_gemm();
  /* tile_issue.cu */
  bool issue_tile(TileRequest &request);
  bool finish_last_tile();
  bool gemm_tile(int slot, const void *q, int n_q, const void *r, int n_r);
  bool fused_pairs(int slot, TileGeom *g) const;
  bool fused_wanted(const TileGeom &geom);
  bool fused_probe();
  long fused_decide(long window);
  bool reset_state(int row0, int n_rows);
  bool fused_tile(int slot, TileRequest &request);
  bool select_tile(int slot, const TileGeom &geom);
  bool time_select(int slot);
  bool drain();
  bool loop_time_end();
  TileGeom tile_geom(int n_rows, int n_cols, size_t row0, size_t col0) const;
  int slot() const
  {
    return (int)(tile_counter_ % 2);
  }
  /* schedule_symmetric.cu, schedule_panels.cu */
  bool symmetric_tile(long b, long c, int n_cols, bool counted);
  bool symmetric_thresholds(const PeerThresholds &peers);
  bool symmetric_diagonals_shared(const PeerThresholds &peers);
  bool import_rows(const PeerThresholds &peers, size_t row0, size_t n_rows, size_t row1 = 0,
                   size_t n_rows1 = 0);
  bool run_symmetric();
  /* schedule_ahead.cu */
  bool ahead_setup(void *const buffer[KNNWB_BUFFER_KINDS]);
  bool ahead_issue(long c);
  bool ahead_take(long c, bool *taken);
  bool ahead_quiet();
  void ahead_release();
  bool run_panels();
  bool panel_tiles(size_t q0, int n_q);
  bool panel_bounds(size_t q0, int n_q, bool *bounded);
  /* schedule_cross.cu */
  bool run_cross();
  bool cross_bounds();
  bool cross_tile(size_t q0, int n_q, size_t r0, int n_r);
  /* schedule_share_bounds.cu */
  bool share_bounds_wanted() const;
  bool share_bounds_round();
  /* lists_*.cu */
  bool extract_rows(size_t row0, size_t n_rows, size_t query0, int64_t *dst_index, float *dst_score,
                    double *dst_distance, bool allow_refine = true);
  void spread_ordered(const int64_t *from_index, const float *from_score,
                      const double *from_distance, size_t rows, size_t place0, int64_t *index,
                      float *score, double *distance);
  bool extract_refined(size_t row0, size_t n_rows, size_t query0, const RefinedOut *out = nullptr,
                       size_t shift = 0);
  cudaError_t refined_issue_chunk(RefinedDownload &download, size_t c, size_t done);
  cudaError_t refined_spread_chunk(RefinedDownload &download, int s);
  void refined_trace(const RefinedDownload &download, size_t chunks, double seconds);
  bool extract_partials();
  bool merge_on_devices();
  void merge_partials();

  Run &run_;
  int index_;
  int device_ordinal_;
  cudaStream_t copy_stream_ = nullptr, gemm_stream_ = nullptr, select_stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  LtGemm lt_gemm_; /* full FP16 tiles' GEMM when cuBLASLt's is the faster (choose_gemm) */
  cudaEvent_t copy_done_[2] = {}, gemm_done_[2] = {}, select_done_[2] = {}, query_free_ = nullptr,
              query_ready_ = nullptr;
  /* fused tiles: the selection stream's work so far, which the fused kernel waits for after a
   * reset of the state (state_reset_, set by reset_state) */
  cudaEvent_t select_tail_ = nullptr;
  bool state_reset_ = false;
  std::vector<void *> allocations_;
  char *query_data_ = nullptr, *reference_data_ = nullptr;    /* resident, plan.row_bytes a row */
  float *query_buffer_ = nullptr, *reference_buffer_[2] = {}; /* streaming, float32 */
  void *screen_query_block_ = nullptr, *screen_reference_block_[2] = {}; /* streaming FP16 */
  int screen_exponent_ = 0; /* FP16: rows scaled by 2^screen_exponent_ */
  bool half_tiles_ = false; /* FP16 with the job's screen_half_scores: tiles of halves */
  float *tiles_[2] = {};    /* float, or __half with half_tiles_ (then half of it is used) */
  size_t tile_bytes_ = 0;
  float *sqnorms_ = nullptr;
  unsigned char *invalid_ = nullptr;
  int32_t *query_group_ = nullptr, *reference_group_ = nullptr; /* job groups, or NULL */
  int64_t *stage_index_ = nullptr;
  float *stage_score_ = nullptr;
  size_t stage_rows_ = 0;
  void *host_staging_[2] = {nullptr, nullptr}; /* pinned, kStagingBytes each, or NULL */
  size_t host_staging_bytes_ = 0;
  long anchor_block_ = -1;     /* symmetric streaming: the block held in query_buffer_ */
  long tile_counter_ = 0;      /* tiles issued */
  long fused_tiles_ = 0;       /* of which fused (tile_fused.cu) */
  long fused_wgmma_tiles_ = 0; /* of those, on wgmma (tile_fused_wgmma.cu) */
  /* fused_probe: tiles that could be fused so far, the last choice (0 filtered, 1 fused), and the
   * selection stream's marks at the windows' bounds */
  long fusable_tiles_ = 0;
  long probe_origin_ = 0; /* the fusable tile the measurements' periods count from */
  int fused_choice_ = 0;
  bool probe_off_ = false;
  long fused_probes_ = 0, fused_chosen_ = 0; /* measurements, and of those won by fused tiles */
  cudaEvent_t probe_mark_[5] = {};
  /* fused_probe: the window being measured (0..3, else -1), and the fresh tiles' selections in
   * it, bracketed on the selection stream, whose times the decision takes out of their windows */
  int probe_window_ = -1;
  int probe_fresh_n_ = 0;
  int probe_fresh_window_[KNNWB_SELECT_PROBE_FRESH] = {};
  cudaEvent_t probe_fresh_[2 * KNNWB_SELECT_PROBE_FRESH] = {};
  bool counted_[2] = {false, false};
  /* trace: timing of the selection kernels per slot, summed for fresh ([1]) and other tiles */
  cudaEvent_t select_start_[2] = {}, select_end_[2] = {};
  bool fresh_[2] = {false, false};
  double select_ms_[2] = {0, 0};
  long select_tiles_[2] = {0, 0};
  SelectState state_ = {};
  DiagonalAhead ahead_;
  /* exact distances (run_.exact): rows uploaded by a background thread during the tile loop */
  ExactRows exact_ = {};
  cudaStream_t exact_stream_ = nullptr;
  double *stage_distance_ = nullptr;
  void *host_staging_distance_ = nullptr;
  std::thread exact_thread_;
  bool exact_ok_ = true;
  bool phase_passed_ = false;
  bool lists_passed_ = false;
  double lists_wait_s_ = 0, device_merge_s_ = 0; /* trace: waiting for the peers, merging */
  /* trace: the timeline (seconds_now) of the symmetric schedule's phases, the host's wait for
   * tiles, and GPU times of the imports, the GEMMs and the whole tile loop */
  double t_phase_done_ = 0, t_phase_passed_ = 0, t_tiles_done_ = 0, host_wait_s_ = 0;
  cudaEvent_t import_start_ = nullptr, import_end_ = nullptr, gemm_start_[2] = {},
              gemm_end_[2] = {}, loop_start_ = nullptr, loop_end_ = nullptr;
  bool import_pending_ = false;
  double import_ms_ = 0, gemm_ms_ = 0, loop_ms_ = 0;
  long imports_ = 0;
  /* the GEMM warm-up's thread; its time and the worker's wait for it (trace) */
  std::thread warm_up_thread_;
  double warm_up_s_ = 0, warm_up_wait_s_ = 0;
  double setup_parts_s_[4] =
      {}; /* streams and events, handles, device memory, staging and clears */
  /* a share of a group's job: thresholds shared with the other processes (rounds used, buffers) */
  int bounds_rounds_ = 0;
  float *bounds_device_ = nullptr;
  std::unique_ptr<float[]> bounds_host_;
  void *bounds_pinned_ = nullptr; /* a staging buffer for the bounds when n floats fit it */
  /* rows in core's order (run_.order): the order as device ints, which the device's refine maps
   * the lists' indices through (row_order.h), else NULL */
  int *order_device_ = nullptr;
  bool rows_staged_ = false;   /* reference_data_ is run_.staged_rows, uploaded already */
  double order_t_[2] = {0, 0}; /* trace: when the nearest centroids began and ended */
  /* a query job's starting thresholds of one panel (schedule_panels.cu), or NULL */
  float *start_bounds_ = nullptr;
};

} // namespace knnwb_cuda

#endif
