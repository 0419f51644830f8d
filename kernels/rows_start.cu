/*
 * A self search's rows uploaded to its one GPU ahead of the search. Between preparing the rows and
 * selecting, core still samples them (the margin planner, 0.05-0.08 s; the centroids that group
 * them, 0.04 s) while the GPU waits; the select then set up, uploaded (0.06-0.08 s at 1,533,876
 * rows) and converted the rows to halves before its first tile. knnwb_cuda_rows_start begins that
 * upload on a helper thread as soon as the rows and their screen's scale are known; the worker of
 * a select whose job has those rows, resident in half precision on that GPU, takes the device rows
 * instead of allocating and uploading them (rows_start_claim), and any other select frees them
 * first. The device rows are the same bytes either way (the same conversion, row_upload.cu).
 * KNNWB_CUDA_ROWS_START=0 leaves the upload to the select (to measure).
 */
#include "device_keep.h"
#include "host_staging.h"
#include "knnwb_kernels.h"
#include "row_upload.h"
#include "rows_start.h"
#include "select_plan.h"
#include "select_trace.h"
#include "tile_scores.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace
{

using namespace knnwb_cuda;

/* What an upload ahead is for, and its device rows once the helper is done. */
struct Ahead {
  int device = -1;
  const float *host = nullptr;
  size_t n = 0, dim = 0, row_bytes = 0, bytes = 0;
  int dpad = 0, exponent = 0;
  void *rows = nullptr; /* keep_malloc's on device, complete when the helper returned true */
  bool ok = false;
  /* Set by the helper (atomically: read without its join) while rows holds device memory, so
   * that the memory limits count as free only bytes the process holds: not those of an upload
   * that has not allocated yet (the driver counts them free already) or that failed. */
  bool held = false;
  int lanes = 1; /* of the upload (ahead_lanes) */
  /* Raised (atomically) when the rows are no longer wanted: the helper stops at its next chunk. */
  bool stop = false;
};

/* Lanes of the upload (upload_lanes), each a host thread with a pinned staging buffer and a
 * device chunk of its own, both halved into its two buffers: the margin planner, the centroids'
 * fit and the duplicate search run beside them. (As many as a one-GPU select's worker takes
 * threads for its copies at most, cuda_select.cu.) */
constexpr int kAheadLanes = 8;

/* The lanes an upload takes: kAheadLanes, or KNNWB_CUDA_UPLOAD_LANES (1 to kAheadLanes; 1 is one
 * lane whose chunks threads copy together, as before the lanes: parallel_copy's parts of 2 MiB make
 * that four threads on its 8 MiB chunks; to measure). */
int ahead_lanes()
{
  const char *v = getenv("KNNWB_CUDA_UPLOAD_LANES");
  const int n = v != nullptr ? atoi(v) : kAheadLanes;
  return n >= 1 && n <= kAheadLanes ? n : kAheadLanes;
}

std::mutex ahead_lock;    /* ahead, ahead_thread */
std::thread ahead_thread; /* joinable while an upload runs or has not been waited for */
Ahead ahead;

bool rows_start_wanted()
{
  const char *v = getenv("KNNWB_CUDA_ROWS_START");
  return v == nullptr || strcmp(v, "0") != 0;
}

/* The helper thread: after a tile GEMM's choice begun ahead (whose timings an upload beside them
 * would disturb), the rows in lanes (upload_lanes), each with pinned staging, device chunks and a
 * stream of its own. On any failure the rows are freed: the select uploads them itself. */
void upload_ahead(Ahead *a)
{
  const double t0 = seconds_now();
  knnwb_cuda_gemm_start_wait();
  const double t_start = seconds_now();
  if (__atomic_load_n(&a->stop, __ATOMIC_RELAXED))
    return; /* dropped before it began: nothing allocated */
  /* per lane: a stream, two events, a device chunk and a pinned buffer, each halved */
  cudaStream_t stream[kAheadLanes] = {};
  cudaEvent_t done[kAheadLanes][2] = {};
  float *scratch[kAheadLanes] = {};
  void *staging[kAheadLanes] = {};
  bool ok = cudaSetDevice(a->device) == cudaSuccess;
  for (int l = 0; l < kAheadLanes && ok; l++) {
    ok = cudaStreamCreateWithFlags(&stream[l], cudaStreamNonBlocking) == cudaSuccess &&
         cudaMalloc(&scratch[l], kStagingBytes) == cudaSuccess;
    for (int b = 0; b < 2 && ok; b++)
      ok = cudaEventCreateWithFlags(&done[l][b], cudaEventDisableTiming) == cudaSuccess;
  }
  bool staged = ok;
  for (int l = 0; l < kAheadLanes && staged; l++)
    staged = (staging[l] = staging_take()) != nullptr;
  if (!staged) /* no page-locked memory: one lane, from the rows themselves */
    for (int l = 0; l < kAheadLanes; l++) {
      staging_give(staging[l]);
      staging[l] = nullptr;
    }
  ok = ok && keep_malloc(a->device, &a->rows, a->bytes) == cudaSuccess;
  if (ok)
    __atomic_store_n(&a->held, true, __ATOMIC_RELEASE);
  if (ok) {
    RowUpload u[kAheadLanes] = {};
    const int lanes = staged ? a->lanes : 1;
    for (int l = 0; l < lanes; l++) {
      u[l].dst = static_cast<char *>(a->rows);
      u[l].row_bytes = a->row_bytes;
      u[l].dpad = a->dpad;
      u[l].convert = true;
      u[l].exponent = a->exponent;
      u[l].src = a->host;
      u[l].rows = a->n;
      u[l].dim = a->dim;
      for (int b = 0; b < 2; b++) {
        u[l].staging[b] =
            staged ? static_cast<char *>(staging[l]) + b * (kStagingBytes / 2) : nullptr;
        u[l].scratch[b] = scratch[l] + b * (kStagingBytes / 2 / sizeof(float));
        u[l].done[b] = done[l][b];
      }
      u[l].staging_bytes = kStagingBytes / 2;
      u[l].scratch_bytes = kStagingBytes / 2;
      u[l].stream = stream[l];
      u[l].threads = lanes == 1 ? kAheadLanes : 1;
      u[l].stop = [a] { return __atomic_load_n(&a->stop, __ATOMIC_RELAXED); };
    }
    bool stopped = false;
    ok = upload_lanes(u, lanes, a->device, &stopped) == cudaSuccess && !stopped;
  }
  for (int l = 0; l < kAheadLanes; l++) {
    staging_give(staging[l]);
    if (scratch[l])
      cudaFree(scratch[l]);
    for (int b = 0; b < 2; b++)
      if (done[l][b])
        cudaEventDestroy(done[l][b]);
    if (stream[l])
      cudaStreamDestroy(stream[l]);
  }
  if (!ok && a->rows) {
    __atomic_store_n(&a->held, false, __ATOMIC_RELEASE);
    keep_free(a->device, a->rows);
    a->rows = nullptr;
  }
  cudaGetLastError(); /* nothing of it may fail a search */
  a->ok = ok;
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda: %zu rows uploaded ahead to GPU %d in %.3f s, %d lane(s) (after %.3f s "
            "waiting for the tile GEMM's choice)%s\n",
            a->n, a->device, seconds_now() - t_start, staged ? a->lanes : 1, t_start - t0,
            ok ? "" : ": failed");
}

/* Device rows of GPU device freed on a thread of its own, so that the calling thread's current
 * device stays as it was: setting it back would create a context on a GPU this process never used
 * (a thread that never chose one is on device 0). */
void free_rows(int device, void *rows)
{
  auto free_on = [](int on, void *p) {
    if (cudaSetDevice(on) == cudaSuccess)
      keep_free(on, p);
    cudaGetLastError();
  };
  try {
    std::thread(free_on, device, rows).join();
  } catch (...) {
    free_on(device, rows); /* no thread: here, the current device changed */
  }
}

/* With ahead_lock held: the helper stopped and joined, its rows freed, nothing begun; the calling
 * thread's current device as it was. */
void drop_locked()
{
  __atomic_store_n(&ahead.stop, true, __ATOMIC_RELAXED);
  if (ahead_thread.joinable())
    ahead_thread.join();
  if (ahead.rows != nullptr)
    free_rows(ahead.device, ahead.rows);
  ahead = Ahead();
}

/* With ahead_lock held: whether the upload begun is of these rows, in this layout, on ordinal. */
bool ahead_matches(int ordinal, const float *rows, size_t n, size_t dim, int dpad, size_t row_bytes,
                   int exponent)
{
  return ordinal >= 0 && ahead.device == ordinal && ahead.host == rows && ahead.n == n &&
         ahead.dim == dim && ahead.dpad == dpad && ahead.row_bytes == row_bytes &&
         ahead.exponent == exponent;
}

} // namespace

namespace knnwb_cuda
{

void *rows_start_claim(int ordinal, const float *rows, size_t n, size_t dim, int dpad,
                       size_t row_bytes, int exponent)
{
  std::lock_guard<std::mutex> guard(ahead_lock);
  /* rows of another search are stopped, not waited for */
  if (!ahead_matches(ordinal, rows, n, dim, dpad, row_bytes, exponent)) {
    drop_locked();
    return nullptr;
  }
  if (ahead_thread.joinable())
    ahead_thread.join();
  if (ahead.ok && ahead.rows != nullptr) {
    void *taken = ahead.rows;
    ahead = Ahead();
    return taken;
  }
  drop_locked();
  return nullptr;
}

size_t rows_start_bytes(int ordinal)
{
  std::lock_guard<std::mutex> guard(ahead_lock);
  return ahead.device == ordinal && __atomic_load_n(&ahead.held, __ATOMIC_ACQUIRE) ? ahead.bytes
                                                                                   : 0;
}

} // namespace knnwb_cuda

extern "C" void knnwb_cuda_rows_start(int device, const float *rows, size_t n, size_t dim,
                                      double screen_row_norm)
{
  if (!rows_start_wanted() || rows == nullptr || n == 0 || dim == 0 || device < 0)
    return;
  std::lock_guard<std::mutex> guard(ahead_lock);
  drop_locked();
  ahead.device = device;
  ahead.host = rows;
  ahead.n = n;
  ahead.dim = dim;
  ahead.dpad = knnwb_select_plan_dpad(dim, KNNWB_KERNELS_SCREEN_FP16);
  ahead.row_bytes = (size_t)ahead.dpad * 2;
  ahead.bytes = n * ahead.row_bytes;
  ahead.exponent = screen_scale_exponent(screen_row_norm);
  ahead.lanes = ahead_lanes();
  try {
    ahead_thread = std::thread(upload_ahead, &ahead);
  } catch (...) {
    ahead = Ahead(); /* no thread: the select uploads, as without a start */
  }
}

extern "C" void knnwb_cuda_rows_start_drop(void)
{
  std::lock_guard<std::mutex> guard(ahead_lock);
  drop_locked();
}
