/*
 * A worker's GPU resources: streams and events, the cuBLAS handle, peer access, and the device
 * buffers of the plan, allocated from the planner's one list (select_plan.h) so that the byte
 * count the plan was chosen with and the allocations cannot disagree. Released in reverse.
 */
#include "blas_library.h"
#include "device_keep.h"
#include "host_staging.h"
#include "select_worker.h"
#include "tile_scores.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

namespace knnwb_cuda
{
namespace
{

/*
 * Lets the current device (ordinal device) read peer's memory. Peer access stays enabled for the
 * life of the process and enabling it again is an error (which compute-sanitizer reports), so the
 * pairs already enabled are remembered.
 */
bool enable_peer_access(int device, int peer)
{
  static std::mutex mutex;
  static std::set<std::pair<int, int>> enabled;
  std::lock_guard<std::mutex> lock(mutex);
  if (enabled.count({device, peer}))
    return true;
  cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  cudaGetLastError(); /* "already enabled" (by other code in this process) is not an error */
  if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled)
    return false;
  enabled.insert({device, peer});
  return true;
}

size_t round_up(size_t x, size_t m)
{
  return (x + m - 1) / m * m;
}

} // namespace

/* Peer access: slices of the rows are copied over NVLink, and thresholds and lists read directly.
 * Without it for some pair, copies go through the host (still correct) and thresholds stay local.
 */
bool Worker::setup_peer_access()
{
  const char *no_peer = getenv("KNNWB_CUDA_NO_PEER_ACCESS");
  if (no_peer && *no_peer && strcmp(no_peer, "0") != 0) {
    run_.peers_ok = false;
    return true;
  }
  if (run_.n_devices == 1)
    return true;
  for (int other : run_.ordinals) {
    if (other == device_ordinal_)
      continue;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, device_ordinal_, other) != cudaSuccess || !can) {
      cudaGetLastError();
      run_.peers_ok = false;
      continue;
    }
    if (!enable_peer_access(device_ordinal_, other))
      run_.peers_ok = false;
  }
  return true;
}

/* Each step records its failure in the run; the order of the CUDA calls is that of the steps. */
bool Worker::setup()
{
  const double t0 = seconds_now();
  CUDA_TRY(run_, cudaSetDevice(device_ordinal_));
  if (!setup_streams() || !setup_peer_access() || !setup_select_stream() || !setup_events())
    return false;
  const double t_streams = seconds_now();
  if (!setup_blas() || !setup_merge_kernel())
    return false;
  const double t_blas = seconds_now();
  void *buffer[KNNWB_BUFFER_KINDS] = {};
  size_t bytes[KNNWB_BUFFER_KINDS];
  if (!allocate_buffers(buffer, bytes))
    return false;
  bind_buffers(buffer, bytes);
  bind_state(buffer);
  if (!ahead_setup(buffer))
    return false;
  bind_stage(buffer);
  bind_exact_rows(buffer);
  const double t_memory = seconds_now();
  take_host_staging();
  const bool ok = clear_buffers();
  const double t_end = seconds_now();
  setup_parts_s_[0] = t_streams - t0;
  setup_parts_s_[1] = t_blas - t_streams;
  setup_parts_s_[2] = t_memory - t_blas;
  setup_parts_s_[3] = t_end - t_memory;
  return ok;
}

bool Worker::setup_streams()
{
  CUDA_TRY(run_, cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  /* With a diagonal ahead (schedule_ahead.cu) at the lowest priority, the GEMM stream one above
   * it: the diagonal then takes the SMs the tiles leave (KNNWB_CUDA_AHEAD_PRIORITY=same: equal). */
  int least = 0, greatest = 0;
  CUDA_TRY(run_, cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const char *same = getenv("KNNWB_CUDA_AHEAD_PRIORITY");
  const bool above = run_.plan.diagonal_ahead && least - 1 > greatest &&
                     !(same != nullptr && strcmp(same, "same") == 0);
  CUDA_TRY(run_, cudaStreamCreateWithPriority(&gemm_stream_, cudaStreamNonBlocking,
                                              above ? least - 1 : least));
  if (run_.exact)
    CUDA_TRY(run_, cudaStreamCreateWithFlags(&exact_stream_, cudaStreamNonBlocking));
  return true;
}

/* Selection at the highest priority: its blocks are scheduled ahead of the next GEMM's pending
 * ones, so a tile's select never holds back the GEMM after next (two tile buffers). */
bool Worker::setup_select_stream()
{
  int least_priority = 0, greatest_priority = 0;
  CUDA_TRY(run_, cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  CUDA_TRY(run_,
           cudaStreamCreateWithPriority(&select_stream_, cudaStreamNonBlocking, greatest_priority));
  return true;
}

/* Events without timing are the cheaper to record and wait on; timed ones exist for the trace. */
bool Worker::setup_events()
{
  for (int i = 0; i < 2; i++) {
    CUDA_TRY(run_, cudaEventCreateWithFlags(&copy_done_[i], cudaEventDisableTiming));
    CUDA_TRY(run_, cudaEventCreateWithFlags(&gemm_done_[i], cudaEventDisableTiming));
    CUDA_TRY(run_, cudaEventCreateWithFlags(&select_done_[i], cudaEventDisableTiming));
  }
  if (trace_enabled()) {
    for (int i = 0; i < 2; i++) {
      CUDA_TRY(run_, cudaEventCreate(&select_start_[i]));
      CUDA_TRY(run_, cudaEventCreate(&select_end_[i]));
      CUDA_TRY(run_, cudaEventCreate(&gemm_start_[i]));
      CUDA_TRY(run_, cudaEventCreate(&gemm_end_[i]));
    }
    for (cudaEvent_t *e : {&import_start_, &import_end_, &loop_start_, &loop_end_})
      CUDA_TRY(run_, cudaEventCreate(e));
  }
  for (cudaEvent_t &e : probe_mark_)
    CUDA_TRY(run_, cudaEventCreate(&e));
  for (cudaEvent_t &e : probe_fresh_)
    CUDA_TRY(run_, cudaEventCreate(&e));
  CUDA_TRY(run_, cudaEventCreateWithFlags(&query_free_, cudaEventDisableTiming));
  CUDA_TRY(run_, cudaEventCreateWithFlags(&query_ready_, cudaEventDisableTiming));
  CUDA_TRY(run_, cudaEventCreateWithFlags(&select_tail_, cudaEventDisableTiming));
  return true;
}

/* L1 scores are not a GEMM: no handle. */
bool Worker::setup_blas()
{
  if (run_.job->score_kind != KNNWB_SCORE_L1) {
    CUBLAS_TRY(run_, keep_blas_take(device_ordinal_, &blas_));
    CUBLAS_TRY(run_, blas()->set_stream(blas_, gemm_stream_));
    /* Plain fp32 FMA unless a screening precision says otherwise (tile_scores.h). */
    CUBLAS_TRY(run_, blas()->set_math_mode(blas_, CUBLAS_DEFAULT_MATH));
  }
  return true;
}

/* The plan chose where the merge keeps its lists on the first GPU; every GPU must agree. */
bool Worker::setup_merge_kernel()
{
  const KnnwbSelectPlan &p = run_.plan;
  bool in_shared = true;
  CUDA_TRY(run_, prepare_merge_kernel(p.kc, &in_shared));
  if (in_shared != (bool)p.lists_in_shared) {
    run_.fail(KNNWB_KERNELS_ERROR, "GPU %d has less shared memory per block than GPU %d",
              device_ordinal_, run_.ordinals[0]);
    return false;
  }
  return true;
}

/* A device buffer of this worker's beyond the plan's (a schedule's own), freed by release();
 * NULL (the run failed) when the GPU has no room. */
void *Worker::allocate_extra(size_t bytes)
{
  void *device = nullptr;
  const cudaError_t err = keep_malloc(device_ordinal_, &device, bytes);
  if (err != cudaSuccess) {
    run_.fail(knnwb_cuda_status_of(err), "cudaMalloc(%zu bytes) failed on GPU %d: %s", bytes,
              device_ordinal_, cudaGetErrorString(err));
    return nullptr;
  }
  allocations_.push_back(device);
  return device;
}

/* The plan's buffers, from the same list the plan's byte count summed (NULL where it has none).
 * Each is in allocations_ as soon as it exists, so release() frees it on any failure. */
bool Worker::allocate_buffers(void *buffer[KNNWB_BUFFER_KINDS], size_t bytes[KNNWB_BUFFER_KINDS])
{
  knnwb_select_plan_buffers(run_.job, &run_.plan, run_.exact, trace_level() >= 2, bytes);
  for (int b = 0; b < KNNWB_BUFFER_KINDS; b++) {
    if (bytes[b] == 0)
      continue;
    if (b == KNNWB_BUFFER_REFERENCE_ROWS && run_.staged_rows != nullptr) {
      /* the rows uploaded ahead (rows_start_claim checked their size), freed as the others */
      buffer[b] = run_.staged_rows;
      run_.staged_rows = nullptr;
      rows_staged_ = true;
      allocations_.push_back(buffer[b]);
      if (trace_enabled())
        fprintf(stderr, "knnwb cuda worker %d: rows uploaded ahead taken (%zu bytes)\n", index_,
                bytes[b]);
      continue;
    }
    cudaError_t err = keep_malloc(device_ordinal_, &buffer[b], bytes[b]);
    if (err != cudaSuccess) {
      run_.fail(knnwb_cuda_status_of(err), "cudaMalloc(%zu bytes) failed on GPU %d: %s", bytes[b],
                device_ordinal_, cudaGetErrorString(err));
      return false;
    }
    allocations_.push_back(buffer[b]);
  }
  return true;
}

/* Rows, blocks and tiles; the peers find this GPU's rows through the run. */
void Worker::bind_buffers(void *const buffer[KNNWB_BUFFER_KINDS],
                          const size_t bytes[KNNWB_BUFFER_KINDS])
{
  const KnnwbSelectJob *job = run_.job;
  const KnnwbSelectPlan &p = run_.plan;
  reference_data_ = (char *)buffer[KNNWB_BUFFER_REFERENCE_ROWS];
  query_data_ =
      buffer[KNNWB_BUFFER_QUERY_ROWS] ? (char *)buffer[KNNWB_BUFFER_QUERY_ROWS] : reference_data_;
  run_.device_reference[index_] = reference_data_;
  run_.device_query[index_] = query_data_;
  query_buffer_ = (float *)buffer[KNNWB_BUFFER_QUERY_BLOCK];
  reference_buffer_[0] = (float *)buffer[KNNWB_BUFFER_REFERENCE_BLOCK_0];
  reference_buffer_[1] = (float *)buffer[KNNWB_BUFFER_REFERENCE_BLOCK_1];
  screen_query_block_ = buffer[KNNWB_BUFFER_SCREEN_QUERY_BLOCK];
  screen_reference_block_[0] = buffer[KNNWB_BUFFER_SCREEN_REFERENCE_BLOCK_0];
  screen_reference_block_[1] = buffer[KNNWB_BUFFER_SCREEN_REFERENCE_BLOCK_1];
  screen_exponent_ = screen_scale_exponent(job->screen_row_norm);
  /* Half tiles need their rescaling 2^(-kHalfTileExponent - 2 s) to be a normal float (any
   * sensible row norm); core's bound covers half scores whenever it asked for them. */
  half_tiles_ = p.screen == KNNWB_KERNELS_SCREEN_FP16 && job->screen_half_scores &&
                std::abs(-kHalfTileExponent - 2 * screen_exponent_) <= 100;
  sqnorms_ = (float *)buffer[KNNWB_BUFFER_SQNORMS];
  invalid_ = (unsigned char *)buffer[KNNWB_BUFFER_INVALID];
  query_group_ = (int32_t *)buffer[KNNWB_BUFFER_QUERY_GROUP];
  reference_group_ = (int32_t *)buffer[KNNWB_BUFFER_REFERENCE_GROUP];
  tile_bytes_ = bytes[KNNWB_BUFFER_TILE_0];
  tiles_[0] = (float *)buffer[KNNWB_BUFFER_TILE_0];
  tiles_[1] = (float *)buffer[KNNWB_BUFFER_TILE_1];
}

/* The selection state; the peers read its lists and thresholds through the run. */
void Worker::bind_state(void *const buffer[KNNWB_BUFFER_KINDS])
{
  const KnnwbSelectPlan &p = run_.plan;
  state_.kc = p.kc;
  state_.cap = p.cap;
  state_.lazy_limit = p.lazy_limit;
  state_.list_score = (float *)buffer[KNNWB_BUFFER_LIST_SCORE];
  state_.list_index = (int *)buffer[KNNWB_BUFFER_LIST_INDEX];
  state_.thr = (float *)buffer[KNNWB_BUFFER_THRESHOLD];
  state_.count = (int *)buffer[KNNWB_BUFFER_COUNT];
  state_.cand_score = (float *)buffer[KNNWB_BUFFER_CANDIDATE_SCORE];
  state_.cand_index = (int *)buffer[KNNWB_BUFFER_CANDIDATE_INDEX];
  state_.stats = (unsigned long long *)buffer[KNNWB_BUFFER_STATS];
  state_.merge_list = (int *)buffer[KNNWB_BUFFER_MERGE_LIST];
  state_.merge_count = (int *)buffer[KNNWB_BUFFER_MERGE_COUNT];
  state_.merge_blocks = p.merge_blocks;
  state_.scratch_len = p.tile;
  state_.scratch_key = (uint32_t *)buffer[KNNWB_BUFFER_SCRATCH_KEY];
  state_.scratch_index = (int *)buffer[KNNWB_BUFFER_SCRATCH_INDEX];
  state_.out_key = (uint32_t *)buffer[KNNWB_BUFFER_OUT_KEY];
  state_.out_index = (int *)buffer[KNNWB_BUFFER_OUT_INDEX];
  state_.fresh_kernel = knnwb_select_plan_fresh_kernel(run_.job->dim, run_.n_devices);
  run_.device_thr[index_] = state_.thr;
  run_.device_list_score[index_] = state_.list_score;
  run_.device_list_index[index_] = state_.list_index;
}

/* The device staging of the final extraction (lists_extract.cu). */
void Worker::bind_stage(void *const buffer[KNNWB_BUFFER_KINDS])
{
  const KnnwbSelectPlan &p = run_.plan;
  if (!p.symmetric) {
    stage_rows_ = (size_t)p.tile;
    stage_index_ = (int64_t *)buffer[KNNWB_BUFFER_STAGE_INDEX];
    stage_score_ = (float *)buffer[KNNWB_BUFFER_STAGE_SCORE];
    stage_distance_ = (double *)buffer[KNNWB_BUFFER_STAGE_DISTANCE];
  } else {
    /* The final extraction reuses the tile buffers as staging: indices in the first, scores and
     * (aligned after them) distances in the second. */
    stage_rows_ = (tile_bytes_ - 256) / ((size_t)p.kc * 12);
    stage_index_ = (int64_t *)tiles_[0];
    stage_score_ = (float *)tiles_[1];
    if (run_.exact)
      stage_distance_ =
          (double *)((char *)tiles_[1] + round_up(stage_rows_ * p.kc * sizeof(float), 256));
  }
}

/* The rows the exact distances are computed from (run_.exact), uploaded later (row_upload.cu). */
void Worker::bind_exact_rows(void *const buffer[KNNWB_BUFFER_KINDS])
{
  if (!run_.exact)
    return;
  exact_.kind = run_.job->exact_kind;
  exact_.dim = (int)run_.job->dim;
  exact_.reference = (const float *)buffer[KNNWB_BUFFER_EXACT_REFERENCE];
  exact_.query = buffer[KNNWB_BUFFER_EXACT_QUERY] ? (const float *)buffer[KNNWB_BUFFER_EXACT_QUERY]
                                                  : exact_.reference;
  exact_.reference_mean = (const double *)buffer[KNNWB_BUFFER_EXACT_REFERENCE_MEAN];
  exact_.reference_squares = (const double *)buffer[KNNWB_BUFFER_EXACT_REFERENCE_SQUARES];
  const bool same_exact = exact_.query == exact_.reference;
  exact_.query_mean =
      same_exact ? exact_.reference_mean : (const double *)buffer[KNNWB_BUFFER_EXACT_QUERY_MEAN];
  exact_.query_squares = same_exact ? exact_.reference_squares
                                    : (const double *)buffer[KNNWB_BUFFER_EXACT_QUERY_SQUARES];
}

/* Pinned staging for uploads and the final download; without it copies go direct (slower), and
 * all of it or none: the copies choose their path by host_staging_[0] alone. */
void Worker::take_host_staging()
{
  host_staging_bytes_ = std::min(kStagingBytes, tile_bytes_);
  for (void *&h : host_staging_)
    h = staging_take();
  if (run_.exact)
    host_staging_distance_ = staging_take();
  if (!host_staging_[0] || !host_staging_[1] || (run_.exact && !host_staging_distance_)) {
    for (void *&h : host_staging_) {
      staging_give(h);
      h = nullptr;
    }
    staging_give(host_staging_distance_);
    host_staging_distance_ = nullptr;
  }
}

/* What the tile loop expects zeroed or reset before it starts. */
bool Worker::clear_buffers()
{
  const KnnwbSelectJob *job = run_.job;
  const KnnwbSelectPlan &p = run_.plan;
  const size_t T = (size_t)p.tile, row_bytes = (size_t)p.row_bytes;
  const size_t block_bytes = (size_t)p.dpad * sizeof(float) * T;
  if (state_.stats)
    CUDA_TRY(run_,
             cudaMemsetAsync(state_.stats, 0, 2 * KNNWB_SELECT_STATS * sizeof(unsigned long long),
                             copy_stream_));
  /* Shared diagonal tiles: a peer may read this GPU's thresholds before its schedule starts (it
   * resets them again there, to the same +inf). */
  if (p.symmetric && run_.n_devices > 1 && shared_diagonals_wanted()) {
    if (!reset_state(0, (int)job->n_query))
      return false;
    CUDA_TRY(run_, cudaStreamSynchronize(select_stream_));
  }
  /* Zero padding columns once: copies write only the first dim columns of each row (the
   * conversion to halves writes every column: rows uploaded ahead are complete). */
  if (p.resident) {
    if (!rows_staged_)
      CUDA_TRY(run_,
               cudaMemsetAsync(reference_data_, 0, row_bytes * job->n_reference, copy_stream_));
    if (query_data_ != reference_data_)
      CUDA_TRY(run_, cudaMemsetAsync(query_data_, 0, row_bytes * job->n_query, copy_stream_));
  } else {
    CUDA_TRY(run_, cudaMemsetAsync(query_buffer_, 0, block_bytes, copy_stream_));
    CUDA_TRY(run_, cudaMemsetAsync(reference_buffer_[0], 0, block_bytes, copy_stream_));
    CUDA_TRY(run_, cudaMemsetAsync(reference_buffer_[1], 0, block_bytes, copy_stream_));
  }
  return true;
}

void Worker::quiesce()
{
  for (cudaStream_t s : {copy_stream_, gemm_stream_, select_stream_, exact_stream_, ahead_.stream})
    if (s)
      cudaStreamSynchronize(s);
  cudaGetLastError();
}

void Worker::release()
{
  if (device_ordinal_ < 0)
    return;
  /* A failure sets run_.abort, which ends the upload early; otherwise it is already joined. */
  if (exact_thread_.joinable())
    exact_thread_.join();
  finish_warm_up();
  cudaSetDevice(device_ordinal_);
  quiesce();
  ahead_release();
  for (void *p : allocations_)
    keep_free(device_ordinal_, p);
  allocations_.clear();
  for (void *&p : host_staging_) {
    staging_give(p);
    p = nullptr;
  }
  staging_give(host_staging_distance_);
  host_staging_distance_ = nullptr;
  staging_give(bounds_pinned_);
  bounds_pinned_ = nullptr;
  lt_gemm_destroy(&lt_gemm_);
  keep_blas_give(device_ordinal_, blas_);
  for (int i = 0; i < 2; i++)
    for (cudaEvent_t e : {copy_done_[i], gemm_done_[i], select_done_[i]})
      if (e)
        cudaEventDestroy(e);
  for (cudaEvent_t &e : probe_mark_) {
    if (e)
      cudaEventDestroy(e);
    e = nullptr;
  }
  for (cudaEvent_t &e : probe_fresh_) {
    if (e)
      cudaEventDestroy(e);
    e = nullptr;
  }
  for (cudaEvent_t e :
       {query_free_, query_ready_, select_tail_, select_start_[0], select_start_[1], select_end_[0],
        select_end_[1], gemm_start_[0], gemm_start_[1], gemm_end_[0], gemm_end_[1], import_start_,
        import_end_, loop_start_, loop_end_})
    if (e)
      cudaEventDestroy(e);
  gemm_start_[0] = gemm_start_[1] = gemm_end_[0] = gemm_end_[1] = nullptr;
  import_start_ = import_end_ = loop_start_ = loop_end_ = nullptr;
  for (cudaStream_t s : {copy_stream_, gemm_stream_, select_stream_, exact_stream_})
    if (s)
      cudaStreamDestroy(s);
  blas_ = nullptr;
  copy_stream_ = gemm_stream_ = select_stream_ = exact_stream_ = nullptr;
  cudaGetLastError(); /* teardown errors must not leak into the next call */
  device_ordinal_ = -1;
}

} // namespace knnwb_cuda
