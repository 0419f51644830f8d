/*
 * The CUDA backend of the candidate-selection job (knnwb_kernels.h): plans tiles from the memory
 * budget, runs one host thread per GPU, streams blocks, computes score tiles with cuBLAS SGEMM
 * (exact fp32, no TF32) or the manhattan kernel, and keeps the per-row selection on the device.
 *
 * Two schedules:
 *  - symmetric (self jobs whose selection state for all n rows fits the budget): the upper triangle
 *    of T x T tiles, tile (b, c) computed once feeding rows of b (row pass) and of c (column pass).
 *    Thresholds come first, so that no tile line is ever scanned in full against a +inf threshold
 *    (which would merge, for the column side with strided reads, every line of the first tiles):
 *    one GPU walks the columns c in order, diagonal tile (c, c) first, then (b, c) for b < c, so a
 *    row's first pairs are always its own block's. With G GPUs each keeps state for all rows: every
 *    GPU first runs the diagonal tiles of its own blocks (b % G == g), then takes the other rows'
 *    thresholds from their owners by peer access (without peer access: from a column sample of
 *    each other diagonal tile, the lists emptied again), then pieces of at most kPiece
 *    off-diagonal tiles go to GPUs from a shared counter (small pieces: even tails) while the GPUs
 *    keep importing each other's tighter thresholds. At the end GPU g gathers its slice of the rows
 *    from its peers' lists over NVLink, merges them and computes and downloads only that slice
 *    (without peer access: every GPU downloads all lists and the host merges them).
 *  - panels (query jobs, or state too large): query panels of T rows go to GPUs from a shared
 *    counter; each panel meets every reference block, and its lists go straight to the output.
 * Data are resident on each device when they fit the budget, otherwise reference blocks stream
 * from (registered, pinned) host memory with double buffering on a copy stream. Per tile, the GEMM
 * of the next tile (GEMM stream) overlaps the selection of this one (selection stream).
 *
 * KNNWB_CUDA_TRACE=1 prints phase timings; KNNWB_CUDA_NO_PEER_ACCESS=1 runs several GPUs as if
 * they had no peer access (the tests use it to cover the host-side paths on NVLink machines).
 */
#include "select_internal.h"

#include <knnwb_kernels.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace knnwb_cuda
{
namespace
{

constexpr size_t kOverheadBytes = 96u << 20; /* cuBLAS workspace, context slack */
constexpr int kMaxTile = 8192;
constexpr int kMinTile = 128;
constexpr int kPiece = 16;               /* off-diagonal tiles per work item with several GPUs */
constexpr int kExchangeItems = 1;       /* several GPUs: thresholds imported every this many pieces */
/* Per pinned host staging buffer. Page-locking costs about as much as copying the bytes several
 * times over, and with G GPUs it is paid G times at once, so buffers are small and kept in a
 * process-wide pool (pinned_pool) for the next call (the exact MST makes many). */
constexpr size_t kStagingBytes = 16u << 20;

/* KNNWB_CUDA_TRACE=1: phase timings on stderr (how the time splits, for the benchmark README);
 * 2: also selection counters (candidates, merges; device atomics, so slightly slower). */
int trace_level()
{
  static const int level = [] {
    const char *v = getenv("KNNWB_CUDA_TRACE");
    return v && *v ? atoi(v) : 0;
  }();
  return level;
}

bool trace_enabled()
{
  return trace_level() > 0;
}

double seconds_now()
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/*
 * memcpy split over a few threads: one core copies pageable memory at a fraction of the bandwidth
 * of a PCIe 5 DMA (and first-touch page faults of fresh output arrays are per core as well).
 */
void parallel_copy(void *dst, const void *src, size_t bytes, int threads)
{
  const size_t min_part = 2u << 20;
  int parts = (int)std::min<size_t>((size_t)std::max(threads, 1), bytes / min_part);
  if (parts <= 1) {
    memcpy(dst, src, bytes);
    return;
  }
  const size_t per = (bytes + parts - 1) / parts;
  std::vector<std::thread> workers;
  for (int t = 1; t < parts; t++) {
    size_t b0 = per * t;
    if (b0 >= bytes)
      break;
    workers.emplace_back([=] {
      memcpy((char *)dst + b0, (const char *)src + b0, std::min(per, bytes - b0));
    });
  }
  memcpy(dst, src, std::min(per, bytes));
  for (auto &w : workers)
    w.join();
}

/* Pinned host staging buffers of kStagingBytes, reused across calls and threads. */
class PinnedPool
{
public:
  void *take()
  {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        void *p = free_.back();
        free_.pop_back();
        return p;
      }
    }
    void *p = nullptr;
    if (cudaHostAlloc(&p, kStagingBytes, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError(); /* callers fall back to direct copies */
      return nullptr;
    }
    /* Registered after the CUDA runtime initialised (it just allocated), so this handler runs
     * before the runtime's own teardown: the cached buffers are freed, not leaked, at exit. */
    static std::once_flag registered;
    std::call_once(registered, [] { atexit(free_cached); });
    return p;
  }
  void give(void *p)
  {
    if (!p)
      return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.size() < kKeep) {
      free_.push_back(p);
      return;
    }
    cudaFreeHost(p);
  }

  static void free_cached();

private:
  static constexpr size_t kKeep = 48; /* 768 MiB at most stays pinned between calls */
  std::mutex mutex_;
  std::vector<void *> free_;
};

/* The object is never destroyed (its buffers are freed by free_cached at exit). */
PinnedPool &pinned_pool()
{
  static PinnedPool *pool = new PinnedPool;
  return *pool;
}

void PinnedPool::free_cached()
{
  PinnedPool &pool = pinned_pool();
  std::lock_guard<std::mutex> lock(pool.mutex_);
  for (void *p : pool.free_)
    cudaFreeHost(p);
  pool.free_.clear();
}

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

/* A work item of the symmetric schedule: tiles (b, c) for b in [b0, b1), after (c, c) if diagonal. */
struct Segment {
  int c, b0, b1;
  bool diagonal;
};

struct Plan {
  bool symmetric = false;
  bool resident = false;
  int tile = 0;
  int dpad = 0;
  int kc = 0;
  int cap = 0;
  int merge_blocks = 0;
  bool lists_in_shared = true;
  size_t state_rows = 0;
  size_t bytes = 0;
};

class Barrier
{
public:
  explicit Barrier(int n) : count_(n), waiting_(0), generation_(0)
  {
  }
  void wait()
  {
    std::unique_lock<std::mutex> lock(mutex_);
    int gen = generation_;
    if (++waiting_ == count_) {
      waiting_ = 0;
      generation_++;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen != generation_; });
    }
  }
  /* Leaves for good (a worker that failed before reaching it): the others no longer wait for it. */
  void drop()
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--count_ > 0 && waiting_ == count_) {
      waiting_ = 0;
      generation_++;
      cv_.notify_all();
    }
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_, waiting_, generation_;
};

/* What all device threads of one attempt share. */
struct Run {
  const KnnwbSelectJob *job = nullptr;
  Plan plan;
  int n_devices = 0;
  std::vector<int> ordinals;
  std::atomic<long> next_item{0};
  std::vector<Segment> segments; /* symmetric schedule */
  int copy_threads = 1;          /* host threads per GPU for staging copies */
  int merge_threads = 1;         /* host threads per GPU merging the per-GPU lists */
  std::atomic<bool> abort{false};
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
  /* several GPUs: each GPU's thresholds and lists, read by its peers (peer access between every
   * pair); the lists only once every GPU passed lists_barrier (its lists are final) */
  std::vector<const float *> device_thr;
  std::vector<const float *> device_list_score;
  std::vector<const int *> device_list_index;
  Barrier *lists_barrier = nullptr;
  std::atomic<bool> peers_ok{true};
  /* exact distances of the final lists computed on the devices (job asked, and they fit) */
  bool exact = false;
  /* several GPUs, resident rows: each GPU uploads a slice from the host and copies the others
   * from its peers, so the host sends the matrix once instead of once per GPU */
  std::vector<float *> device_reference, device_query;
  /* symmetric with several GPUs, no peer access: each GPU's lists, merged on the host (not
   * zero-filled: the downloads write every element, in parallel, which also spreads the page
   * faults) */
  std::vector<std::unique_ptr<int64_t[]>> partial_index;
  std::vector<std::unique_ptr<float[]>> partial_score;
  std::vector<std::unique_ptr<double[]>> partial_distance;

  void fail(int code, const char *format, ...)
  {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (status == KNNWB_KERNELS_OK) {
      status = code;
      va_list args;
      va_start(args, format);
      vsnprintf(message, sizeof message, format, args);
      va_end(args);
    }
    abort = true;
  }
  bool cancelled()
  {
    if (job->cancel && *job->cancel) {
      fail(KNNWB_KERNELS_CANCELLED, "cancelled");
      return true;
    }
    return abort.load();
  }
  void tile_finished()
  {
    uint64_t done = ++tiles_done;
    if (!job->progress)
      return;
    std::unique_lock<std::mutex> lock(progress_mutex, std::try_to_lock);
    if (!lock.owns_lock())
      return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_report >= std::chrono::milliseconds(100)) {
      last_report = now;
      job->progress(done, tiles_total, job->progress_data);
    }
  }
};

#define CUDA_TRY(run, call)                                                                        \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      (run).fail(err_ == cudaErrorMemoryAllocation ? KNNWB_KERNELS_OUT_OF_MEMORY                   \
                                                   : KNNWB_KERNELS_ERROR,                          \
                 "%s failed on GPU %d: %s (%s)", #call, device_ordinal_, cudaGetErrorName(err_),   \
                 cudaGetErrorString(err_));                                                        \
      return false;                                                                                \
    }                                                                                              \
  } while (0)

#define CUBLAS_TRY(run, call)                                                                      \
  do {                                                                                             \
    cublasStatus_t st_ = (call);                                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                            \
      (run).fail(st_ == CUBLAS_STATUS_ALLOC_FAILED ? KNNWB_KERNELS_OUT_OF_MEMORY                   \
                                                   : KNNWB_KERNELS_ERROR,                          \
                 "%s failed on GPU %d: %s", #call, device_ordinal_, cublasGetStatusString(st_));   \
      return false;                                                                                \
    }                                                                                              \
  } while (0)

size_t round_up(size_t x, size_t m)
{
  return (x + m - 1) / m * m;
}

/* Device bytes of a plan (everything cudaMalloc'd by a worker, plus fixed overhead). */
size_t plan_bytes(const KnnwbSelectJob *job, Plan &p)
{
  const size_t T = (size_t)p.tile, row_bytes = (size_t)p.dpad * sizeof(float);
  const bool same = job->self || job->query == job->reference;
  size_t bytes = kOverheadBytes;
  if (p.resident)
    bytes += row_bytes * (job->n_reference + (same ? 0 : job->n_query));
  else
    bytes += row_bytes * T * 3; /* query block + two reference buffers */
  if (job->score_kind == KNNWB_SCORE_L2)
    bytes += job->n_reference * sizeof(float);
  if (job->reference_invalid)
    bytes += job->n_reference;
  size_t tile_bytes = std::max(T * T * sizeof(float), (size_t)p.kc * 12);
  bytes += 2 * tile_bytes;
  p.state_rows = p.symmetric ? job->n_query : T;
  bytes += p.state_rows * (((size_t)p.kc + p.cap) * 8 + 8);
  bytes += 2 * T * sizeof(int) + 256;
  bytes += (size_t)p.merge_blocks * T * 8;
  if (!p.lists_in_shared)
    bytes += (size_t)p.merge_blocks * p.kc * 8;
  if (!p.symmetric)
    bytes += T * (size_t)p.kc * 12; /* panel output staging */
  p.bytes = bytes;
  return bytes;
}

/* Device bytes of the exact rows, their statistics and (panels) the distance staging. */
size_t exact_bytes(const KnnwbSelectJob *job, const Plan &p)
{
  const bool same = job->self || job->exact_query == job->exact_reference;
  const size_t rows = job->n_reference + (same ? 0 : job->n_query);
  size_t bytes = rows * job->dim * sizeof(float) + 2 * rows * sizeof(double) + 1024;
  if (!p.symmetric)
    bytes += (size_t)p.tile * p.kc * sizeof(double);
  return bytes;
}

/* The largest tile (then residency) that fits the budget; symmetric preferred for self jobs. */
bool plan_choose(const KnnwbSelectJob *job, size_t budget, int sm_count, int shared_kc, Plan *out)
{
  Plan p;
  p.lists_in_shared = job->kc <= (size_t)shared_kc;
  p.kc = (int)job->kc;
  p.cap = (int)round_up(std::max<size_t>(2 * job->kc, 64), 32);
  p.dpad = (int)round_up(job->dim, 8);
  size_t n_max = std::max(job->n_query, job->n_reference);
  int largest = (int)std::min<size_t>(kMaxTile, round_up(std::max<size_t>(n_max, 1), kMinTile));
  for (int symmetric = job->self ? 1 : 0; symmetric >= 0; symmetric--) {
    for (int tile = largest; tile >= kMinTile;
         tile = tile == kMinTile ? 0 : (int)round_up(tile / 2, kMinTile)) {
      for (int resident = 1; resident >= 0; resident--) {
        p.symmetric = symmetric;
        p.resident = resident;
        p.tile = tile;
        p.merge_blocks = std::max(1, std::min(p.lists_in_shared ? 4 * sm_count : sm_count, tile));
        if (plan_bytes(job, p) > budget)
          continue;
        /* symmetric state must leave most of the budget to tiles */
        if (symmetric && p.state_rows * ((size_t)p.kc + p.cap) * 8 > budget / 2)
          continue;
        *out = p;
        return true;
      }
    }
  }
  return false;
}

/* One GPU's worker: its streams, buffers and the tile loop. */
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
  void main();

private:
  bool setup();
  bool upload_resident();
  bool upload_peer_slices();
  bool upload_staged(float *dst, const float *src, size_t rows);
  void start_exact_upload();
  bool exact_upload();
  bool finish_exact_upload();
  bool load_rows(float *dst, const float *src, size_t first, size_t rows, cudaStream_t stream);
  bool gemm_tile(int slot, const float *q, int n_q, const float *r, int n_r);
  bool select_tile(int slot, const TileGeom &geom);
  bool finish_tile(long tile_counter);
  bool ensure_anchor(long c);
  bool symmetric_tile(long b, long c, int n_cols, bool counted);
  bool run_symmetric();
  bool run_panels();
  bool drain();
  bool extract_rows(size_t row0, size_t n_rows, size_t query0, int64_t *dst_index,
                    float *dst_score, double *dst_distance);
  bool merge_on_devices();
  void merge_partials();
  void release();
  void *device_alloc(size_t bytes, bool *ok);

  Run &run_;
  int index_;
  int device_ordinal_;
  cudaStream_t copy_stream_ = nullptr, gemm_stream_ = nullptr, select_stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cudaEvent_t copy_done_[2] = {}, gemm_done_[2] = {}, select_done_[2] = {}, query_free_ = nullptr,
              query_ready_ = nullptr;
  std::vector<void *> allocations_;
  float *query_data_ = nullptr, *reference_data_ = nullptr; /* resident */
  float *query_buffer_ = nullptr, *reference_buffer_[2] = {};
  float *tiles_[2] = {};
  float *sqnorms_ = nullptr;
  unsigned char *invalid_ = nullptr;
  int32_t *query_group_ = nullptr, *reference_group_ = nullptr; /* job groups, or NULL */
  int64_t *stage_index_ = nullptr;
  float *stage_score_ = nullptr;
  size_t stage_rows_ = 0;
  void *host_staging_[2] = {nullptr, nullptr}; /* pinned, kStagingBytes each, or NULL */
  size_t host_staging_bytes_ = 0;
  long anchor_block_ = -1; /* symmetric streaming: the block held in query_buffer_ */
  long tile_counter_ = 0;  /* symmetric: tiles issued */
  bool counted_[2] = {false, false};
  /* trace: timing of the selection kernels per slot, summed for diagonal ([1]) and other tiles */
  cudaEvent_t select_start_[2] = {}, select_end_[2] = {};
  bool diagonal_[2] = {false, false};
  double select_ms_[2] = {0, 0};
  long select_tiles_[2] = {0, 0};
  bool time_select(int slot);
  SelectState state_ = {};
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
  void quiesce();
};

void *Worker::device_alloc(size_t bytes, bool *ok)
{
  void *p = nullptr;
  cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 16));
  if (err != cudaSuccess) {
    run_.fail(err == cudaErrorMemoryAllocation ? KNNWB_KERNELS_OUT_OF_MEMORY : KNNWB_KERNELS_ERROR,
              "cudaMalloc(%zu bytes) failed on GPU %d: %s", bytes, device_ordinal_,
              cudaGetErrorString(err));
    *ok = false;
    return nullptr;
  }
  allocations_.push_back(p);
  return p;
}

void Worker::release()
{
  if (device_ordinal_ < 0)
    return;
  /* A failure sets run_.abort, which ends the upload early; otherwise it is already joined. */
  if (exact_thread_.joinable())
    exact_thread_.join();
  cudaSetDevice(device_ordinal_);
  for (cudaStream_t s : {copy_stream_, gemm_stream_, select_stream_, exact_stream_})
    if (s)
      cudaStreamSynchronize(s);
  for (void *p : allocations_)
    cudaFree(p);
  allocations_.clear();
  for (void *&p : host_staging_) {
    pinned_pool().give(p);
    p = nullptr;
  }
  pinned_pool().give(host_staging_distance_);
  host_staging_distance_ = nullptr;
  if (blas_)
    cublasDestroy(blas_);
  for (int i = 0; i < 2; i++)
    for (cudaEvent_t e : {copy_done_[i], gemm_done_[i], select_done_[i]})
      if (e)
        cudaEventDestroy(e);
  for (cudaEvent_t e : {query_free_, query_ready_, select_start_[0], select_start_[1],
                        select_end_[0], select_end_[1]})
    if (e)
      cudaEventDestroy(e);
  for (cudaStream_t s : {copy_stream_, gemm_stream_, select_stream_, exact_stream_})
    if (s)
      cudaStreamDestroy(s);
  blas_ = nullptr;
  copy_stream_ = gemm_stream_ = select_stream_ = exact_stream_ = nullptr;
  cudaGetLastError(); /* teardown errors must not leak into the next call */
  device_ordinal_ = -1;
}

bool Worker::setup()
{
  const KnnwbSelectJob *job = run_.job;
  const Plan &p = run_.plan;
  CUDA_TRY(run_, cudaSetDevice(device_ordinal_));
  CUDA_TRY(run_, cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  CUDA_TRY(run_, cudaStreamCreateWithFlags(&gemm_stream_, cudaStreamNonBlocking));
  if (run_.exact)
    CUDA_TRY(run_, cudaStreamCreateWithFlags(&exact_stream_, cudaStreamNonBlocking));
  const char *no_peer = getenv("KNNWB_CUDA_NO_PEER_ACCESS");
  if (no_peer && *no_peer && strcmp(no_peer, "0") != 0)
    run_.peers_ok = false;
  else if (run_.n_devices > 1) {
    /* Peer access: slices of the rows are copied over NVLink, and thresholds read directly. Without
     * it for some pair, copies go through the host (still correct) and thresholds stay local. */
    for (int other : run_.ordinals) {
      if (other == device_ordinal_)
        continue;
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, device_ordinal_, other) != cudaSuccess || !can) {
        run_.peers_ok = false;
        continue;
      }
      if (!enable_peer_access(device_ordinal_, other))
        run_.peers_ok = false;
    }
  }
  /* Selection at the highest priority: its blocks are scheduled ahead of the next GEMM's pending
   * ones, so a tile's select never holds back the GEMM after next (two tile buffers). */
  int least_priority = 0, greatest_priority = 0;
  CUDA_TRY(run_, cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  CUDA_TRY(run_, cudaStreamCreateWithPriority(&select_stream_, cudaStreamNonBlocking,
                                              greatest_priority));
  for (int i = 0; i < 2; i++) {
    CUDA_TRY(run_, cudaEventCreateWithFlags(&copy_done_[i], cudaEventDisableTiming));
    CUDA_TRY(run_, cudaEventCreateWithFlags(&gemm_done_[i], cudaEventDisableTiming));
    CUDA_TRY(run_, cudaEventCreateWithFlags(&select_done_[i], cudaEventDisableTiming));
  }
  if (trace_enabled())
    for (int i = 0; i < 2; i++) {
      CUDA_TRY(run_, cudaEventCreate(&select_start_[i]));
      CUDA_TRY(run_, cudaEventCreate(&select_end_[i]));
    }
  CUDA_TRY(run_, cudaEventCreateWithFlags(&query_free_, cudaEventDisableTiming));
  CUDA_TRY(run_, cudaEventCreateWithFlags(&query_ready_, cudaEventDisableTiming));
  if (job->score_kind != KNNWB_SCORE_L1) {
    CUBLAS_TRY(run_, cublasCreate(&blas_));
    CUBLAS_TRY(run_, cublasSetStream(blas_, gemm_stream_));
    /* Plain fp32 FMA: TF32 would change which candidates are found. */
    CUBLAS_TRY(run_, cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
  }
  bool in_shared = true;
  CUDA_TRY(run_, prepare_merge_kernel(p.kc, &in_shared));
  if (in_shared != p.lists_in_shared) {
    run_.fail(KNNWB_KERNELS_ERROR, "GPU %d has less shared memory per block than GPU %d",
              device_ordinal_, run_.ordinals[0]);
    return false;
  }

  bool ok = true;
  const size_t T = (size_t)p.tile, row_bytes = (size_t)p.dpad * sizeof(float);
  const bool same = job->self || job->query == job->reference;
  if (p.resident) {
    reference_data_ = (float *)device_alloc(row_bytes * job->n_reference, &ok);
    query_data_ = same ? reference_data_ : (float *)device_alloc(row_bytes * job->n_query, &ok);
    run_.device_reference[index_] = reference_data_;
    run_.device_query[index_] = query_data_;
  } else {
    query_buffer_ = (float *)device_alloc(row_bytes * T, &ok);
    reference_buffer_[0] = (float *)device_alloc(row_bytes * T, &ok);
    reference_buffer_[1] = (float *)device_alloc(row_bytes * T, &ok);
  }
  if (job->score_kind == KNNWB_SCORE_L2)
    sqnorms_ = (float *)device_alloc(job->n_reference * sizeof(float), &ok);
  if (job->reference_invalid)
    invalid_ = (unsigned char *)device_alloc(job->n_reference, &ok);
  if (job->query_group && job->reference_group) {
    query_group_ = (int32_t *)device_alloc(job->n_query * sizeof(int32_t), &ok);
    reference_group_ = (int32_t *)device_alloc(job->n_reference * sizeof(int32_t), &ok);
  }
  size_t tile_bytes = std::max(T * T * sizeof(float), (size_t)p.kc * 12);
  tiles_[0] = (float *)device_alloc(tile_bytes, &ok);
  tiles_[1] = (float *)device_alloc(tile_bytes, &ok);
  size_t rows = p.state_rows;
  state_.kc = p.kc;
  state_.cap = p.cap;
  state_.lazy_limit = p.cap / 2;
  state_.list_score = (float *)device_alloc(rows * p.kc * sizeof(float), &ok);
  state_.list_index = (int *)device_alloc(rows * p.kc * sizeof(int), &ok);
  state_.thr = (float *)device_alloc(rows * sizeof(float), &ok);
  run_.device_thr[index_] = state_.thr;
  run_.device_list_score[index_] = state_.list_score;
  run_.device_list_index[index_] = state_.list_index;
  state_.count = (int *)device_alloc(rows * sizeof(int), &ok);
  state_.cand_score = (float *)device_alloc(rows * p.cap * sizeof(float), &ok);
  state_.cand_index = (int *)device_alloc(rows * p.cap * sizeof(int), &ok);
  if (trace_level() >= 2)
    state_.stats = (unsigned long long *)device_alloc(4 * sizeof(unsigned long long), &ok);
  state_.merge_list = (int *)device_alloc(2 * T * sizeof(int), &ok);
  state_.merge_count = (int *)device_alloc(sizeof(int), &ok);
  state_.merge_blocks = p.merge_blocks;
  state_.scratch_len = (int)T;
  state_.scratch_key = (uint32_t *)device_alloc((size_t)p.merge_blocks * T * sizeof(uint32_t), &ok);
  state_.scratch_index = (int *)device_alloc((size_t)p.merge_blocks * T * sizeof(int), &ok);
  if (!p.lists_in_shared) {
    state_.out_key =
        (uint32_t *)device_alloc((size_t)p.merge_blocks * p.kc * sizeof(uint32_t), &ok);
    state_.out_index = (int *)device_alloc((size_t)p.merge_blocks * p.kc * sizeof(int), &ok);
  }
  if (!p.symmetric) {
    stage_rows_ = T;
    stage_index_ = (int64_t *)device_alloc(T * p.kc * sizeof(int64_t), &ok);
    stage_score_ = (float *)device_alloc(T * p.kc * sizeof(float), &ok);
    if (run_.exact)
      stage_distance_ = (double *)device_alloc(T * p.kc * sizeof(double), &ok);
  } else {
    /* The final extraction reuses the tile buffers as staging: indices in the first, scores and
     * (aligned after them) distances in the second. */
    stage_rows_ = (tile_bytes - 256) / ((size_t)p.kc * 12);
    stage_index_ = (int64_t *)tiles_[0];
    stage_score_ = (float *)tiles_[1];
    if (run_.exact)
      stage_distance_ =
          (double *)((char *)tiles_[1] + round_up(stage_rows_ * p.kc * sizeof(float), 256));
  }
  if (run_.exact) {
    const bool same_exact = job->self || job->exact_query == job->exact_reference;
    float *ref = (float *)device_alloc(job->n_reference * job->dim * sizeof(float), &ok);
    float *qry = same_exact ? ref : (float *)device_alloc(job->n_query * job->dim * sizeof(float), &ok);
    auto stats = [&](const double *host, size_t n) {
      return host ? (double *)device_alloc(n * sizeof(double), &ok) : nullptr;
    };
    exact_.kind = job->exact_kind;
    exact_.dim = (int)job->dim;
    exact_.reference = ref;
    exact_.query = qry;
    exact_.reference_mean = stats(job->exact_reference_mean, job->n_reference);
    exact_.reference_squares = stats(job->exact_reference_squares, job->n_reference);
    exact_.query_mean = same_exact ? exact_.reference_mean : stats(job->exact_query_mean, job->n_query);
    exact_.query_squares =
        same_exact ? exact_.reference_squares : stats(job->exact_query_squares, job->n_query);
  }
  if (!ok)
    return false;
  /* Pinned staging for uploads and the final download; without it copies go direct (slower). */
  host_staging_bytes_ = std::min(kStagingBytes, tile_bytes);
  for (void *&h : host_staging_)
    h = pinned_pool().take();
  if (run_.exact)
    host_staging_distance_ = pinned_pool().take();
  if (!host_staging_[0] || !host_staging_[1] || (run_.exact && !host_staging_distance_)) {
    for (void *&h : host_staging_) {
      pinned_pool().give(h);
      h = nullptr;
    }
    pinned_pool().give(host_staging_distance_);
    host_staging_distance_ = nullptr;
  }
  /* Zero padding columns once: copies write only the first dim columns of each row. */
  if (state_.stats)
    CUDA_TRY(run_, cudaMemsetAsync(state_.stats, 0, 4 * sizeof(unsigned long long), copy_stream_));
  if (p.resident) {
    CUDA_TRY(run_, cudaMemsetAsync(reference_data_, 0, row_bytes * job->n_reference, copy_stream_));
    if (query_data_ != reference_data_)
      CUDA_TRY(run_, cudaMemsetAsync(query_data_, 0, row_bytes * job->n_query, copy_stream_));
  } else {
    CUDA_TRY(run_, cudaMemsetAsync(query_buffer_, 0, row_bytes * T, copy_stream_));
    CUDA_TRY(run_, cudaMemsetAsync(reference_buffer_[0], 0, row_bytes * T, copy_stream_));
    CUDA_TRY(run_, cudaMemsetAsync(reference_buffer_[1], 0, row_bytes * T, copy_stream_));
  }
  return true;
}

bool Worker::load_rows(float *dst, const float *src, size_t first, size_t rows, cudaStream_t stream)
{
  const KnnwbSelectJob *job = run_.job;
  if (rows == 0)
    return true;
  CUDA_TRY(run_, cudaMemcpy2DAsync(dst, (size_t)run_.plan.dpad * sizeof(float),
                                   src + first * job->dim, job->dim * sizeof(float),
                                   job->dim * sizeof(float), rows, cudaMemcpyHostToDevice, stream));
  return true;
}

/*
 * Pageable host rows to padded device rows: a parallel host memcpy into the two pinned staging
 * buffers, contiguous DMA into a free tile buffer, then a device-side pitched copy. Avoids both
 * registering gigabytes and the driver's slow pitched copies from pageable memory.
 */
bool Worker::upload_staged(float *dst, const float *src, size_t rows)
{
  const size_t dim = run_.job->dim, row_bytes = dim * sizeof(float);
  const size_t chunk_rows = host_staging_bytes_ / row_bytes;
  if (chunk_rows == 0 || run_.pinned || !host_staging_[0])
    return load_rows(dst, src, 0, rows, copy_stream_);
  bool ok = true;
  for (size_t first = 0, c = 0; first < rows && ok; first += chunk_rows, c++) {
    const int b = (int)(c % 2);
    const size_t n = std::min(chunk_rows, rows - first);
    cudaError_t err = cudaEventSynchronize(copy_done_[b]);
    if (err == cudaSuccess) {
      parallel_copy(host_staging_[b], src + first * dim, n * row_bytes, run_.copy_threads);
      err = cudaMemcpyAsync(tiles_[b], host_staging_[b], n * row_bytes, cudaMemcpyHostToDevice,
                            copy_stream_);
    }
    if (err == cudaSuccess)
      err = cudaMemcpy2DAsync(dst + first * run_.plan.dpad, (size_t)run_.plan.dpad * sizeof(float),
                              tiles_[b], row_bytes, row_bytes, n, cudaMemcpyDeviceToDevice,
                              copy_stream_);
    if (err == cudaSuccess)
      err = cudaEventRecord(copy_done_[b], copy_stream_);
    if (err != cudaSuccess) {
      run_.fail(KNNWB_KERNELS_ERROR, "staged upload to GPU %d failed: %s", device_ordinal_,
                cudaGetErrorString(err));
      ok = false;
    }
  }
  cudaError_t err = cudaStreamSynchronize(copy_stream_);
  if (ok && err != cudaSuccess) {
    run_.fail(KNNWB_KERNELS_ERROR, "cudaStreamSynchronize failed on GPU %d: %s", device_ordinal_,
              cudaGetErrorString(err));
    ok = false;
  }
  return ok;
}

/* Rows [first, last) of n that GPU g of G uploads from the host (all of them with one GPU). */
std::pair<size_t, size_t> slice_of(size_t n, int g, int G)
{
  return {n * (size_t)g / (size_t)G, n * (size_t)(g + 1) / (size_t)G};
}

bool Worker::upload_resident()
{
  const KnnwbSelectJob *job = run_.job;
  if (run_.plan.resident) {
    const size_t dpad = (size_t)run_.plan.dpad, dim = job->dim;
    auto r = slice_of(job->n_reference, index_, run_.n_devices);
    if (!upload_staged(reference_data_ + r.first * dpad, job->reference + r.first * dim,
                       r.second - r.first))
      return false;
    auto q = slice_of(job->n_query, index_, run_.n_devices);
    if (query_data_ != reference_data_ &&
        !upload_staged(query_data_ + q.first * dpad, job->query + q.first * dim, q.second - q.first))
      return false;
  }
  if (sqnorms_)
    CUDA_TRY(run_,
             cudaMemcpyAsync(sqnorms_, job->reference_sqnorms, job->n_reference * sizeof(float),
                             cudaMemcpyHostToDevice, copy_stream_));
  if (invalid_)
    CUDA_TRY(run_, cudaMemcpyAsync(invalid_, job->reference_invalid, job->n_reference,
                                   cudaMemcpyHostToDevice, copy_stream_));
  if (query_group_) {
    CUDA_TRY(run_, cudaMemcpyAsync(query_group_, job->query_group, job->n_query * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, copy_stream_));
    CUDA_TRY(run_, cudaMemcpyAsync(reference_group_, job->reference_group,
                                   job->n_reference * sizeof(int32_t), cudaMemcpyHostToDevice,
                                   copy_stream_));
  }
  CUDA_TRY(run_, cudaStreamSynchronize(copy_stream_));
  return true;
}

/* The slices the other GPUs uploaded (resident rows, several GPUs), device to device. */
bool Worker::upload_peer_slices()
{
  const KnnwbSelectJob *job = run_.job;
  const size_t row_bytes = (size_t)run_.plan.dpad * sizeof(float);
  for (int h = 0; h < run_.n_devices; h++) {
    if (h == index_)
      continue;
    auto r = slice_of(job->n_reference, h, run_.n_devices);
    if (r.second > r.first)
      CUDA_TRY(run_, cudaMemcpyPeerAsync(reference_data_ + r.first * run_.plan.dpad, device_ordinal_,
                                         run_.device_reference[h] + r.first * run_.plan.dpad,
                                         run_.ordinals[h], (r.second - r.first) * row_bytes,
                                         copy_stream_));
    auto q = slice_of(job->n_query, h, run_.n_devices);
    if (query_data_ != reference_data_ && q.second > q.first)
      CUDA_TRY(run_, cudaMemcpyPeerAsync(query_data_ + q.first * run_.plan.dpad, device_ordinal_,
                                         run_.device_query[h] + q.first * run_.plan.dpad,
                                         run_.ordinals[h], (q.second - q.first) * row_bytes,
                                         copy_stream_));
  }
  CUDA_TRY(run_, cudaStreamSynchronize(copy_stream_));
  return true;
}

/*
 * The exact rows and statistics (run_.exact), uploaded by a background thread while the tiles run:
 * the copy engine and the host cores are idle then. Own pinned staging, own stream.
 */
bool Worker::exact_upload()
{
  const KnnwbSelectJob *job = run_.job;
  CUDA_TRY(run_, cudaSetDevice(device_ordinal_));
  auto small = [&](const double *dst, const double *src, size_t n) {
    return !dst || !src ||
           cudaMemcpyAsync(const_cast<double *>(dst), src, n * sizeof(double),
                           cudaMemcpyHostToDevice, exact_stream_) == cudaSuccess;
  };
  const bool same = exact_.query == exact_.reference;
  if (!small(exact_.reference_mean, job->exact_reference_mean, job->n_reference) ||
      !small(exact_.reference_squares, job->exact_reference_squares, job->n_reference) ||
      (!same && (!small(exact_.query_mean, job->exact_query_mean, job->n_query) ||
                 !small(exact_.query_squares, job->exact_query_squares, job->n_query)))) {
    run_.fail(KNNWB_KERNELS_ERROR, "cudaMemcpyAsync of row statistics failed on GPU %d: %s",
              device_ordinal_, cudaGetErrorString(cudaGetLastError()));
    return false;
  }
  void *staging[2] = {nullptr, nullptr};
  cudaEvent_t done[2] = {nullptr, nullptr};
  bool ok = true;
  for (int b = 0; b < 2 && ok; b++)
    ok = (staging[b] = pinned_pool().take()) != nullptr &&
         cudaEventCreateWithFlags(&done[b], cudaEventDisableTiming) == cudaSuccess;
  const bool staged = ok;
  cudaGetLastError();
  cudaError_t err = cudaSuccess;
  const std::pair<const float *, const float *> arrays[2] = {
      {exact_.reference, job->exact_reference}, {same ? nullptr : exact_.query, job->exact_query}};
  const size_t counts[2] = {job->n_reference * job->dim, job->n_query * job->dim};
  for (int a = 0; a < 2 && err == cudaSuccess; a++) {
    float *dst = const_cast<float *>(arrays[a].first);
    const float *src = arrays[a].second;
    if (!dst)
      continue;
    if (!staged) {
      err = cudaMemcpyAsync(dst, src, counts[a] * sizeof(float), cudaMemcpyHostToDevice,
                            exact_stream_);
      continue;
    }
    const size_t chunk = kStagingBytes / sizeof(float);
    for (size_t first = 0, c = 0; first < counts[a] && err == cudaSuccess; first += chunk, c++) {
      if (run_.abort)
        break;
      const int b = (int)(c % 2);
      const size_t n = std::min(chunk, counts[a] - first);
      err = cudaEventSynchronize(done[b]);
      if (err != cudaSuccess)
        break;
      parallel_copy(staging[b], src + first, n * sizeof(float), run_.copy_threads);
      err = cudaMemcpyAsync(dst + first, staging[b], n * sizeof(float), cudaMemcpyHostToDevice,
                            exact_stream_);
      if (err == cudaSuccess)
        err = cudaEventRecord(done[b], exact_stream_);
    }
  }
  cudaError_t sync = cudaStreamSynchronize(exact_stream_);
  if (err == cudaSuccess)
    err = sync;
  for (int b = 0; b < 2; b++) {
    pinned_pool().give(staging[b]);
    if (done[b])
      cudaEventDestroy(done[b]);
  }
  if (err != cudaSuccess) {
    run_.fail(KNNWB_KERNELS_ERROR, "upload of the exact rows to GPU %d failed: %s",
              device_ordinal_, cudaGetErrorString(err));
    return false;
  }
  return !run_.abort;
}

void Worker::start_exact_upload()
{
  exact_ok_ = false;
  exact_thread_ = std::thread([this] { exact_ok_ = exact_upload(); });
}

bool Worker::finish_exact_upload()
{
  if (exact_thread_.joinable())
    exact_thread_.join();
  return exact_ok_;
}

/* tile[slot][i*T + j] = q_i . r_j: column-major C = R^T-view x Q, so rows of queries are
 * contiguous. */
bool Worker::gemm_tile(int slot, const float *q, int n_q, const float *r, int n_r)
{
  const Plan &p = run_.plan;
  CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, select_done_[slot], 0));
  if (run_.job->score_kind == KNNWB_SCORE_L1) {
    CUDA_TRY(run_,
             launch_l1_tile(q, n_q, r, n_r, p.dpad, tiles_[slot], (size_t)p.tile, gemm_stream_));
  } else {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_TRY(run_, cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, n_r, n_q, p.dpad, &one, r, p.dpad,
                                 q, p.dpad, &zero, tiles_[slot], p.tile));
  }
  CUDA_TRY(run_, cudaEventRecord(gemm_done_[slot], gemm_stream_));
  return true;
}

bool Worker::select_tile(int slot, const TileGeom &geom)
{
  CUDA_TRY(run_, cudaStreamWaitEvent(select_stream_, gemm_done_[slot], 0));
  if (select_start_[slot])
    CUDA_TRY(run_, cudaEventRecord(select_start_[slot], select_stream_));
  CUDA_TRY(run_, launch_tile_select(state_, geom, select_stream_));
  if (select_end_[slot])
    CUDA_TRY(run_, cudaEventRecord(select_end_[slot], select_stream_));
  CUDA_TRY(run_, cudaEventRecord(select_done_[slot], select_stream_));
  return true;
}

/* Trace: adds the selection time of the (finished) tile in slot to its kind's sum. */
bool Worker::time_select(int slot)
{
  if (!select_end_[slot])
    return true;
  float ms = 0;
  CUDA_TRY(run_, cudaEventElapsedTime(&ms, select_start_[slot], select_end_[slot]));
  select_ms_[diagonal_[slot]] += ms;
  select_tiles_[diagonal_[slot]]++;
  return true;
}

/* Keeps at most two tiles in flight: waits for the previous tile, then reports it. */
bool Worker::finish_tile(long tile_counter)
{
  if (tile_counter >= 1) {
    CUDA_TRY(run_, cudaEventSynchronize(select_done_[(tile_counter - 1) % 2]));
    run_.tile_finished();
  }
  return true;
}

bool Worker::drain()
{
  CUDA_TRY(run_, cudaStreamSynchronize(gemm_stream_));
  CUDA_TRY(run_, cudaStreamSynchronize(select_stream_));
  CUDA_TRY(run_, cudaStreamSynchronize(copy_stream_));
  return true;
}

/*
 * Lists of state rows [row0, row0 + n_rows) to host arrays, through pinned staging when there is;
 * with dst_distance (run_.exact) also their exact distances, the state rows being query rows
 * query0, query0 + 1, ...
 */
bool Worker::extract_rows(size_t row0, size_t n_rows, size_t query0, int64_t *dst_index,
                          float *dst_score, double *dst_distance)
{
  const size_t kc = (size_t)run_.plan.kc;
  if (dst_distance && !finish_exact_upload())
    return false;
  size_t chunk_rows = stage_rows_;
  bool staged = host_staging_[0] != nullptr;
  if (staged) {
    chunk_rows = std::min(chunk_rows, host_staging_bytes_ / (kc * sizeof(int64_t)));
    if (chunk_rows == 0) {
      chunk_rows = stage_rows_;
      staged = false;
    }
  }
  for (size_t done = 0; done < n_rows;) {
    size_t chunk = std::min(chunk_rows, n_rows - done);
    CUDA_TRY(run_, launch_extract(state_, (int)(row0 + done), (int)chunk, stage_index_,
                                  stage_score_, select_stream_));
    int64_t *to_index = staged ? (int64_t *)host_staging_[0] : dst_index + done * kc;
    float *to_score = staged ? (float *)host_staging_[1] : dst_score + done * kc;
    double *to_distance = dst_distance ? (staged ? (double *)host_staging_distance_
                                                 : dst_distance + done * kc)
                                       : nullptr;
    if (to_distance)
      CUDA_TRY(run_, launch_exact_distances(exact_, stage_index_, chunk, (int)kc, query0 + done,
                                            stage_distance_, select_stream_));
    CUDA_TRY(run_, cudaMemcpyAsync(to_index, stage_index_, chunk * kc * sizeof(int64_t),
                                   cudaMemcpyDeviceToHost, select_stream_));
    CUDA_TRY(run_, cudaMemcpyAsync(to_score, stage_score_, chunk * kc * sizeof(float),
                                   cudaMemcpyDeviceToHost, select_stream_));
    if (to_distance)
      CUDA_TRY(run_, cudaMemcpyAsync(to_distance, stage_distance_, chunk * kc * sizeof(double),
                                     cudaMemcpyDeviceToHost, select_stream_));
    CUDA_TRY(run_, cudaStreamSynchronize(select_stream_));
    if (staged) {
      parallel_copy(dst_index + done * kc, to_index, chunk * kc * sizeof(int64_t),
                    run_.copy_threads);
      parallel_copy(dst_score + done * kc, to_score, chunk * kc * sizeof(float), run_.copy_threads);
      if (to_distance)
        parallel_copy(dst_distance + done * kc, to_distance, chunk * kc * sizeof(double),
                      run_.copy_threads);
    }
    done += chunk;
  }
  return true;
}

/* Streaming symmetric schedule: block c (the tile columns) held in query_buffer_. */
bool Worker::ensure_anchor(long c)
{
  if (anchor_block_ == c)
    return true;
  const size_t n = run_.job->n_query, T = (size_t)run_.plan.tile, c0 = (size_t)c * T;
  /* reloaded once every GEMM using the previous anchor is done */
  CUDA_TRY(run_, cudaEventRecord(query_free_, gemm_stream_));
  CUDA_TRY(run_, cudaStreamWaitEvent(copy_stream_, query_free_, 0));
  if (!load_rows(query_buffer_, run_.job->reference, c0, std::min(T, n - c0), copy_stream_))
    return false;
  CUDA_TRY(run_, cudaEventRecord(query_ready_, copy_stream_));
  CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, query_ready_, 0));
  anchor_block_ = c;
  return true;
}

/*
 * Issues tile (b, c), b <= c: rows of block b against the first n_cols rows of block c; the row
 * pass feeds rows of b, the column pass (b < c) rows of c. counted: the tile is one of the
 * B (B + 1) / 2 of the progress total (not a threshold-only sample).
 */
bool Worker::symmetric_tile(long b, long c, int n_cols, bool counted)
{
  const KnnwbSelectJob *job = run_.job;
  const Plan &p = run_.plan;
  const size_t n = job->n_query, T = (size_t)p.tile;
  const int slot = (int)(tile_counter_ % 2);
  const size_t q0 = (size_t)b * T, r0 = (size_t)c * T;
  const int n_q = (int)std::min(T, n - q0);
  const float *q, *r;
  if (p.resident) {
    q = query_data_ + q0 * p.dpad;
    r = reference_data_ + r0 * p.dpad;
  } else {
    if (!ensure_anchor(c))
      return false;
    r = query_buffer_;
    if (b == c) {
      q = query_buffer_;
    } else {
      CUDA_TRY(run_, cudaStreamWaitEvent(copy_stream_, gemm_done_[slot], 0));
      if (!load_rows(reference_buffer_[slot], job->reference, q0, (size_t)n_q, copy_stream_))
        return false;
      CUDA_TRY(run_, cudaEventRecord(copy_done_[slot], copy_stream_));
      CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, copy_done_[slot], 0));
      q = reference_buffer_[slot];
    }
  }
  if (!gemm_tile(slot, q, n_q, r, n_cols))
    return false;
  TileGeom g = {};
  g.tile = tiles_[slot];
  g.ld = T;
  g.n_rows = n_q;
  g.n_cols = n_cols;
  g.row_global0 = (int)q0;
  g.col_global0 = (int)r0;
  g.row_state0 = (int)q0;
  g.col_state0 = (int)r0;
  g.do_cols = b != c;
  g.self = 1;
  g.fresh = b == c; /* every schedule gives a block's rows their diagonal tile first */
  g.kind = job->score_kind;
  g.sqnorms = sqnorms_;
  g.invalid = invalid_;
  g.row_group = query_group_;
  g.col_group = reference_group_;
  if (!select_tile(slot, g))
    return false;
  /* at most two tiles in flight: wait for the previous one, then report it */
  if (tile_counter_ >= 1) {
    const int previous = (int)((tile_counter_ - 1) % 2);
    CUDA_TRY(run_, cudaEventSynchronize(select_done_[previous]));
    if (counted_[previous])
      run_.tile_finished();
    if (!time_select(previous))
      return false;
  }
  counted_[slot] = counted;
  diagonal_[slot] = b == c;
  tile_counter_++;
  return true;
}

bool Worker::run_symmetric()
{
  const KnnwbSelectJob *job = run_.job;
  const Plan &p = run_.plan;
  const size_t n = job->n_query, T = (size_t)p.tile;
  const long blocks = (long)((n + T - 1) / T);
  const int G = run_.n_devices;
  auto block_rows = [&](long b) { return (int)std::min(T, n - (size_t)b * T); };
  CUDA_TRY(run_, launch_state_reset(state_, 0, (int)n, select_stream_));
  PeerThresholds peers = {};
  if (G > 1 && run_.peers_ok)
    for (int h = 0; h < G && peers.count < PeerThresholds::kMax; h++)
      if (h != index_)
        peers.thr[peers.count++] = run_.device_thr[h];
  const long shares = job->share_count > 1 ? job->share_count : 1;
  const long share = shares > 1 ? job->share_index : 0;
  if (G > 1 || shares > 1) {
    /* Thresholds for every row before any off-diagonal tile. Each GPU runs the diagonal tiles of
     * its own blocks (b % G == g) in full. With peer access the others' rows then import the
     * owners' thresholds directly. Without it, a column sample of each other diagonal tile sets
     * thr and the lists are emptied again: the owner's lists hold kc pairs scoring at most that
     * thr (the owner saw every sampled pair), so no pair is counted twice. */
    const int sample = (int)std::max<size_t>(T / 4, 4 * (size_t)p.kc);
    /* With shares (one per process of a group) diagonal tile b belongs to process b % shares,
     * there to GPU (b / shares) % G; GPUs of the other processes sample it like non-owners (the
     * owner process's lists hold kc pairs under the sampled threshold, and the merge of the
     * processes' lists keeps them). */
    for (long b = 0; b < blocks && !run_.cancelled(); b++) {
      const bool owner_here = b % shares == share;
      const bool owner = owner_here && (b / shares) % G == index_;
      const int n_b = block_rows(b);
      if (!owner && owner_here && peers.count > 0)
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
  }
  for (long done_items = 0;; done_items++) {
    long item = run_.next_item++;
    if (item >= (long)run_.segments.size() || run_.cancelled())
      break;
    /* Each GPU sees only its share of a row's pairs: without the others' thresholds its own would
     * tighten G times slower and let G times more candidates through. */
    if (peers.count > 0 && done_items % kExchangeItems == kExchangeItems - 1)
      CUDA_TRY(run_, launch_import_thresholds(state_, peers, (int)n, select_stream_));
    const Segment sg = run_.segments[item];
    if (sg.diagonal && !symmetric_tile(sg.c, sg.c, block_rows(sg.c), true))
      return false;
    for (long b = sg.b0; b < sg.b1 && !run_.cancelled(); b++)
      if (!symmetric_tile(b, sg.c, block_rows(sg.c), true))
        return false;
  }
  if (!drain())
    return false;
  if (tile_counter_ >= 1 && counted_[(tile_counter_ - 1) % 2])
    run_.tile_finished();
  if (tile_counter_ >= 1 && !time_select((int)((tile_counter_ - 1) % 2)))
    return false;
  if (run_.abort)
    return false;
  CUDA_TRY(run_, launch_final_merge(state_, 0, (int)n, select_stream_));
  if (run_.n_devices == 1)
    return extract_rows(0, n, 0, job->out_index, job->out_score,
                        run_.exact ? job->out_distance : nullptr);
  if (run_.peers_ok)
    return merge_on_devices();
  const size_t cells = n * (size_t)p.kc;
  run_.partial_index[index_].reset(new (std::nothrow) int64_t[cells]);
  run_.partial_score[index_].reset(new (std::nothrow) float[cells]);
  if (run_.exact)
    run_.partial_distance[index_].reset(new (std::nothrow) double[cells]);
  if (!run_.partial_index[index_] || !run_.partial_score[index_] ||
      (run_.exact && !run_.partial_distance[index_])) {
    run_.fail(KNNWB_KERNELS_OUT_OF_MEMORY,
              "cannot allocate host memory for the candidate lists of GPU %d (%zu rows)",
              device_ordinal_, n);
    return false;
  }
  return extract_rows(0, n, 0, run_.partial_index[index_].get(), run_.partial_score[index_].get(),
                      run_.exact ? run_.partial_distance[index_].get() : nullptr);
}

bool Worker::run_panels()
{
  const KnnwbSelectJob *job = run_.job;
  const Plan &p = run_.plan;
  const size_t nq = job->n_query, nr = job->n_reference, T = (size_t)p.tile;
  const long panels = (long)((nq + T - 1) / T), blocks = (long)((nr + T - 1) / T);
  long tile_counter = 0;
  for (;;) {
    long panel = run_.next_item++;
    if (panel >= panels || run_.cancelled())
      break;
    const size_t q0 = (size_t)panel * T;
    const int n_q = (int)std::min(T, nq - q0);
    CUDA_TRY(run_, launch_state_reset(state_, 0, n_q, select_stream_));
    const float *q;
    if (p.resident) {
      q = query_data_ + q0 * p.dpad;
    } else {
      CUDA_TRY(run_, cudaEventRecord(query_free_, gemm_stream_));
      CUDA_TRY(run_, cudaStreamWaitEvent(copy_stream_, query_free_, 0));
      if (!load_rows(query_buffer_, job->query, q0, (size_t)n_q, copy_stream_))
        return false;
      CUDA_TRY(run_, cudaEventRecord(query_ready_, copy_stream_));
      CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, query_ready_, 0));
      q = query_buffer_;
    }
    for (long c = 0; c < blocks; c++) {
      if (run_.cancelled())
        break;
      const int slot = (int)(tile_counter % 2);
      const size_t r0 = (size_t)c * T;
      const int n_r = (int)std::min(T, nr - r0);
      const float *r;
      if (p.resident) {
        r = reference_data_ + r0 * p.dpad;
      } else {
        CUDA_TRY(run_, cudaStreamWaitEvent(copy_stream_, gemm_done_[slot], 0));
        if (!load_rows(reference_buffer_[slot], job->reference, r0, (size_t)n_r, copy_stream_))
          return false;
        CUDA_TRY(run_, cudaEventRecord(copy_done_[slot], copy_stream_));
        CUDA_TRY(run_, cudaStreamWaitEvent(gemm_stream_, copy_done_[slot], 0));
        r = reference_buffer_[slot];
      }
      if (!gemm_tile(slot, q, n_q, r, n_r))
        return false;
      TileGeom g = {};
      g.tile = tiles_[slot];
      g.ld = T;
      g.n_rows = n_q;
      g.n_cols = n_r;
      g.row_global0 = (int)q0;
      g.col_global0 = (int)r0;
      g.row_state0 = 0;
      g.col_state0 = 0;
      g.do_cols = 0;
      g.self = job->self ? 1 : 0;
      g.fresh = c == 0; /* the panel's state was just emptied */
      g.kind = job->score_kind;
      g.sqnorms = sqnorms_;
      g.invalid = invalid_;
      g.row_group = query_group_;
      g.col_group = reference_group_;
      if (!select_tile(slot, g) || !finish_tile(tile_counter))
        return false;
      tile_counter++;
    }
    if (run_.abort)
      break;
    CUDA_TRY(run_, launch_final_merge(state_, 0, n_q, select_stream_));
    if (!extract_rows(0, (size_t)n_q, q0, job->out_index + q0 * p.kc, job->out_score + q0 * p.kc,
                      run_.exact ? job->out_distance + q0 * p.kc : nullptr))
      return false;
  }
  if (!drain())
    return false;
  if (tile_counter >= 1)
    run_.tile_finished();
  return !run_.abort;
}

/*
 * Several GPUs with peer access, symmetric, after the final merge: this GPU's slice of the rows
 * takes the peers' lists as candidates (as many peers per merge as the candidate buffers hold) and
 * keeps the kc best, then only that slice is extracted, with its exact distances, straight into
 * the job's output. Device traffic is (G - 1) kc n / G entries per GPU over NVLink; the host no
 * longer receives G copies of every list, nor merges them.
 */
bool Worker::merge_on_devices()
{
  const KnnwbSelectJob *job = run_.job;
  const size_t n = job->n_query, kc = (size_t)run_.plan.kc;
  const int G = run_.n_devices;
  if (!drain()) /* this GPU's lists are final */
    return false;
  const double t0 = seconds_now();
  run_.lists_barrier->wait();
  lists_passed_ = true;
  const double t1 = seconds_now();
  lists_wait_s_ = t1 - t0;
  if (run_.abort)
    return false;
  const auto mine = slice_of(n, index_, G);
  const int row0 = (int)mine.first, rows = (int)(mine.second - mine.first);
  const int per_merge = std::max(1, std::min<int>(PeerLists::kMax, state_.cap / (int)kc));
  PeerLists peers = {};
  for (int h = 0; h < G; h++) {
    if (h != index_) {
      peers.score[peers.count] = run_.device_list_score[h];
      peers.index[peers.count] = run_.device_list_index[h];
      peers.count++;
    }
    if (peers.count > 0 && (peers.count == per_merge || h == G - 1)) {
      CUDA_TRY(run_, launch_gather_lists(state_, peers, row0, rows, select_stream_));
      CUDA_TRY(run_, launch_final_merge(state_, row0, rows, select_stream_));
      peers.count = 0;
    }
  }
  if (trace_enabled()) {
    CUDA_TRY(run_, cudaStreamSynchronize(select_stream_));
    device_merge_s_ = seconds_now() - t1;
  }
  return extract_rows(mine.first, (size_t)rows, mine.first, job->out_index + mine.first * kc,
                      job->out_score + mine.first * kc,
                      run_.exact ? job->out_distance + mine.first * kc : nullptr);
}

/*
 * Several GPUs without peer access, symmetric: row i's candidates are spread over the GPUs' lists
 * (no pair twice). Each worker merges its share of the rows with copy_threads host threads.
 */
void Worker::merge_partials()
{
  const KnnwbSelectJob *job = run_.job;
  const size_t n = job->n_query, kc = job->kc;
  const int G = run_.n_devices;
  const bool exact = run_.exact;
  struct Entry {
    float score;
    int64_t index;
    double distance;
    bool operator<(const Entry &o) const
    {
      return score != o.score ? score < o.score : index < o.index;
    }
  };
  auto merge_range = [&](size_t begin, size_t end) {
    std::vector<Entry> pool;
    pool.reserve(kc * G);
    for (size_t i = begin; i < end; i++) {
      pool.clear();
      for (int g = 0; g < G; g++)
        for (size_t t = 0; t < kc; t++) {
          int64_t idx = run_.partial_index[g][i * kc + t];
          if (idx >= 0)
            pool.push_back({run_.partial_score[g][i * kc + t], idx,
                            exact ? run_.partial_distance[g][i * kc + t] : 0.0});
        }
      size_t take = std::min(kc, pool.size());
      if (pool.size() > kc)
        std::nth_element(pool.begin(), pool.begin() + (kc - 1), pool.end());
      for (size_t t = 0; t < kc; t++) {
        job->out_index[i * kc + t] = t < take ? pool[t].index : -1;
        job->out_score[i * kc + t] = t < take ? pool[t].score : __builtin_inff();
        if (exact)
          job->out_distance[i * kc + t] = t < take ? pool[t].distance : __builtin_nan("");
      }
    }
  };
  auto mine = slice_of(n, index_, G);
  const int threads = std::max(1, run_.merge_threads);
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; t++) {
    auto part = slice_of(mine.second - mine.first, t, threads);
    helpers.emplace_back(merge_range, mine.first + part.first, mine.first + part.second);
  }
  auto part = slice_of(mine.second - mine.first, 0, threads);
  merge_range(mine.first + part.first, mine.first + part.second);
  for (auto &h : helpers)
    h.join();
}

void Worker::quiesce()
{
  for (cudaStream_t s : {copy_stream_, gemm_stream_, select_stream_, exact_stream_})
    if (s)
      cudaStreamSynchronize(s);
  cudaGetLastError();
}

void Worker::main()
{
  const double t0 = seconds_now();
  bool ok = setup();
  const double t_setup = seconds_now();
  /* every worker must have its memory before any starts: an OOM anywhere retries them all */
  run_.barrier->wait();
  if (ok && !run_.abort)
    ok = upload_resident();
  if (run_.n_devices > 1 && run_.plan.resident) {
    run_.barrier->wait(); /* every slice is on its GPU */
    if (ok && !run_.abort)
      ok = upload_peer_slices();
    run_.barrier->wait(); /* no GPU frees its rows while a peer still reads them */
  }
  if (ok && !run_.abort && run_.exact)
    start_exact_upload();
  const double t_upload = seconds_now();
  if (ok && !run_.abort)
    ok = run_.plan.symmetric ? run_symmetric() : run_panels();
  if (ok && run_.exact)
    ok = finish_exact_upload(); /* a GPU that extracted nothing (no panel) still waits here */
  const double t_run = seconds_now();
  if (!ok)
    run_.abort = true;
  if (run_.plan.symmetric && run_.n_devices > 1) {
    if (!phase_passed_)
      run_.phase_barrier->drop(); /* failed before the diagonal phase ended */
    if (!lists_passed_)
      run_.lists_barrier->drop(); /* failed before its lists were final (or no peer access) */
    quiesce(); /* no kernel of ours may read a peer's thresholds or lists once it frees them */
    run_.barrier->wait();
    if (!run_.abort && !run_.peers_ok)
      merge_partials();
  }
  const double t_merge = seconds_now();
  unsigned long long stats[4] = {0, 0, 0, 0};
  if (state_.stats && cudaSetDevice(device_ordinal_) == cudaSuccess)
    cudaMemcpy(stats, state_.stats, sizeof stats, cudaMemcpyDeviceToHost);
  release();
  if (select_tiles_[0] + select_tiles_[1] > 0)
    fprintf(stderr,
            "knnwb cuda worker %d: selection kernels %.3f ms per diagonal tile (%ld), %.3f ms per "
            "other tile (%ld)\n",
            index_, select_ms_[1] / (double)std::max(1L, select_tiles_[1]), select_tiles_[1],
            select_ms_[0] / (double)std::max(1L, select_tiles_[0]), select_tiles_[0]);
  if (state_.stats)
    fprintf(stderr,
            "knnwb cuda worker %d: %llu candidates, %llu merged rows, %llu overflowed lines "
            "(%.0f candidates and %.0f merges per tile)\n",
            index_, stats[0], stats[1], stats[2], stats[0] / (double)std::max(1L, tile_counter_),
            stats[1] / (double)std::max(1L, tile_counter_));
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda worker %d (GPU %d): setup %.3f s, upload %.3f s, tiles + extract %.3f s "
            "(%ld tiles; of which waiting for peers %.3f s, device merge %.3f s), host merge "
            "%.3f s, release %.3f s\n",
            index_, run_.ordinals[index_], t_setup - t0, t_upload - t_setup, t_run - t_upload,
            tile_counter_, lists_wait_s_, device_merge_s_, t_merge - t_run,
            seconds_now() - t_merge);
}

void set_message(char *message, size_t size, const char *format, ...)
{
  if (!message || size == 0)
    return;
  va_list args;
  va_start(args, format);
  vsnprintf(message, size, format, args);
  va_end(args);
}

/* Registers host arrays for fast asynchronous copies; unregisters on destruction. */
struct HostPin {
  std::vector<void *> pinned;
  bool pin(const void *p, size_t bytes)
  {
    if (!p || bytes == 0)
      return false;
    if (cudaHostRegister(const_cast<void *>(p), bytes, cudaHostRegisterPortable) == cudaSuccess) {
      pinned.push_back(const_cast<void *>(p));
      return true;
    }
    cudaGetLastError(); /* not fatal: copies then go through the driver's staging */
    return false;
  }
  ~HostPin()
  {
    for (void *p : pinned)
      cudaHostUnregister(p);
    cudaGetLastError();
  }
};

} // namespace
} // namespace knnwb_cuda

using namespace knnwb_cuda;

extern "C" int knnwb_cuda_device_count(void)
{
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

extern "C" int knnwb_cuda_select(const KnnwbSelectJob *job, char *message, size_t message_size)
{
  set_message(message, message_size, "ok");
  if (!job || (job->n_query > 0 &&
               (!job->query || !job->reference || !job->out_index || !job->out_score))) {
    set_message(message, message_size, "knnwb_cuda_select: invalid job");
    return KNNWB_KERNELS_ERROR;
  }
  if (job->n_query == 0 || job->kc == 0)
    return KNNWB_KERNELS_OK;
  if (job->n_query > 0x7fffffffu || job->n_reference > 0x7fffffffu || job->dim > 0x7ffffff0u) {
    set_message(message, message_size, "knnwb_cuda_select: more than 2^31 rows is not supported");
    return KNNWB_KERNELS_ERROR;
  }
  if (job->score_kind == KNNWB_SCORE_L2 && !job->reference_sqnorms) {
    set_message(message, message_size, "knnwb_cuda_select: L2 scores need reference_sqnorms");
    return KNNWB_KERNELS_ERROR;
  }
  int available = knnwb_cuda_device_count();
  if (available <= 0) {
    set_message(message, message_size, "no usable CUDA device");
    return KNNWB_KERNELS_NO_DEVICE;
  }
  std::vector<int> ordinals;
  if (job->devices && job->n_devices > 0) {
    for (int i = 0; i < job->n_devices; i++) {
      if (job->devices[i] < 0 || job->devices[i] >= available) {
        set_message(message, message_size, "CUDA device %d does not exist (%d visible)",
                    job->devices[i], available);
        return KNNWB_KERNELS_NO_DEVICE;
      }
      ordinals.push_back(job->devices[i]);
    }
  } else {
    for (int i = 0; i < available; i++)
      ordinals.push_back(i);
  }

  /* Budget: the smallest device's (an explicit budget is per device). */
  size_t budget = SIZE_MAX;
  int sm_count = 1 << 30, shared_kc = 1 << 30;
  for (int ordinal : ordinals) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaError_t err = cudaSetDevice(ordinal);
    if (err == cudaSuccess)
      err = cudaMemGetInfo(&free_bytes, &total_bytes);
    int sms = 0;
    if (err == cudaSuccess)
      err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal);
    if (err != cudaSuccess) {
      set_message(message, message_size, "cudaMemGetInfo on GPU %d failed: %s", ordinal,
                  cudaGetErrorString(err));
      cudaGetLastError();
      return KNNWB_KERNELS_NO_DEVICE;
    }
    size_t device_budget = job->memory_bytes ? job->memory_bytes : free_bytes / 10 * 9;
    budget = std::min(budget, device_budget);
    sm_count = std::min(sm_count, sms);
    shared_kc = std::min(shared_kc, shared_memory_kc_limit());
  }

  const bool same = job->self || job->query == job->reference;
  int status = KNNWB_KERNELS_OUT_OF_MEMORY;
  for (int attempt = 0; attempt < 8; attempt++) {
    Plan plan;
    if (!plan_choose(job, budget, sm_count, shared_kc, &plan)) {
      set_message(message, message_size,
                  "out of GPU memory: a budget of %zu bytes per device cannot hold the smallest "
                  "tiles for %zu x %zu rows, dim %zu, kc %zu",
                  budget, job->n_query, job->n_reference, job->dim, job->kc);
      return KNNWB_KERNELS_OUT_OF_MEMORY;
    }
    HostPin pins;
    bool pinned = false;
    if (!plan.resident) {
      pinned = pins.pin(job->reference, job->n_reference * job->dim * sizeof(float));
      if (!same)
        pinned = pins.pin(job->query, job->n_query * job->dim * sizeof(float)) && pinned;
    }
    Run run;
    run.job = job;
    run.plan = plan;
    run.ordinals = ordinals;
    run.n_devices = (int)ordinals.size();
    run.pinned = pinned;
    size_t T = (size_t)plan.tile;
    size_t qb = (job->n_query + T - 1) / T, rb = (job->n_reference + T - 1) / T;
    run.tiles_total = plan.symmetric ? qb * (qb + 1) / 2 : qb * rb;
    run.last_report = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    Barrier barrier(run.n_devices), phase_barrier(run.n_devices), lists_barrier(run.n_devices);
    run.barrier = &barrier;
    run.phase_barrier = &phase_barrier;
    run.lists_barrier = &lists_barrier;
    run.device_thr.assign(run.n_devices, nullptr);
    run.device_list_score.assign(run.n_devices, nullptr);
    run.device_list_index.assign(run.n_devices, nullptr);
    run.partial_index.resize(run.n_devices);
    run.partial_score.resize(run.n_devices);
    run.partial_distance.resize(run.n_devices);
    run.device_reference.assign(run.n_devices, nullptr);
    run.device_query.assign(run.n_devices, nullptr);
    run.exact = job->exact_query && job->exact_reference && job->out_distance &&
                plan.bytes + exact_bytes(job, plan) <= budget;
    {
      unsigned hw = std::thread::hardware_concurrency();
      run.copy_threads = std::max(1, std::min(8, (int)(hw ? hw : 1) / run.n_devices));
      run.merge_threads = std::max(1, (int)(hw ? hw : 1) / run.n_devices);
    }
    if (plan.symmetric) {
      /* One GPU: column by column, diagonal first. Several: pieces of off-diagonal tiles (their
       * diagonal tiles run first on every GPU, see run_symmetric). A share of the job (one process
       * of a group, job->share_count > 1) keeps every share_count-th piece, a piece's diagonal
       * tile included with one GPU; with several, run_symmetric gives each diagonal one owner. */
      const int shares = job->share_count > 1 ? job->share_count : 1;
      const int share = shares > 1 ? job->share_index : 0;
      long piece = 0;
      uint64_t tiles = 0;
      for (int c = 0; c < (int)qb; c++) {
        if (run.n_devices == 1 && shares == 1) {
          run.segments.push_back({c, 0, c, true});
          continue;
        }
        for (int b0 = 0; b0 < c; b0 += kPiece) {
          Segment sg = {c, b0, std::min(c, b0 + kPiece), false};
          if (piece++ % shares != share)
            continue;
          run.segments.push_back(sg);
          tiles += (uint64_t)(sg.b1 - sg.b0);
        }
        if (c % shares == share)
          tiles += 1; /* this process owns diagonal tile c (on one of its GPUs) */
      }
      if (shares > 1)
        run.tiles_total = tiles;
    }
    if (trace_enabled())
      fprintf(stderr,
              "knnwb cuda: %zu x %zu rows, dim %zu, kc %zu on %d GPU(s): %s, %s, tile %d, "
              "%.2f GiB per device, exact distances on the %s\n",
              job->n_query, job->n_reference, job->dim, job->kc, run.n_devices,
              plan.symmetric ? "symmetric" : "panels", plan.resident ? "resident" : "streaming",
              plan.tile, plan.bytes / (double)(1u << 30), run.exact ? "GPU" : "host");
    {
      std::vector<std::thread> threads;
      std::vector<Worker *> workers;
      for (int g = 0; g < run.n_devices; g++)
        workers.push_back(new Worker(run, g));
      for (int g = 1; g < run.n_devices; g++)
        threads.emplace_back([w = workers[g]] { w->main(); });
      workers[0]->main();
      for (auto &t : threads)
        t.join();
      for (Worker *w : workers)
        delete w;
    }
    status = run.status;
    if (status == KNNWB_KERNELS_OUT_OF_MEMORY) {
      budget = budget / 4 * 3; /* the allocator disagreed with our arithmetic: smaller tiles */
      set_message(message, message_size, "%s", run.message);
      continue;
    }
    if (status != KNNWB_KERNELS_OK) {
      set_message(message, message_size, "%s", run.message);
      return status;
    }
    if (run.exact && job->out_distance_filled)
      *job->out_distance_filled = 1;
    if (job->progress)
      job->progress(run.tiles_total, run.tiles_total, job->progress_data);
    return KNNWB_KERNELS_OK;
  }
  return status;
}
