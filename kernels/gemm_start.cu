/*
 * The tile GEMM's choice, begun with the call. Before its first full tile, each GPU run timed
 * cublasGemmEx and cuBLASLt's candidates for the tile's shape (lt_gemm_choose, tile_scores.h), and
 * those first calls load cuBLAS's kernels: 0.15-0.19 s of every GPU run on an H200 (the trace's
 * "tile GEMM ... s" line), on every GPU, with nothing else on the GPU meanwhile. The shape follows
 * from the rows' count and width, known as soon as the rows are read, so knnwb_cuda_gemm_start
 * makes the choice on a helper thread per GPU while core checks, prepares and partitions the rows
 * (0.2 s and more), and the worker finds it made (lt_gemm_choose keeps it per device and shape).
 * Scratch rows of constant halves stand in for the run's: a GEMM's time does not depend on its
 * values, and whichever algorithm is chosen, the lists are the same (the screen's bound holds for
 * any order of the sums). knnwb_cuda_select waits for it, so its memory is free again before the
 * select plans. KNNWB_CUDA_GEMM_START=0 leaves the choice to the worker, as before (to measure).
 */
#include "knnwb_kernels.h"
#include "select_plan.h"
#include "select_trace.h"
#include "tile_scores.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace
{

using namespace knnwb_cuda;

std::mutex gemm_lock;    /* gemm_thread */
std::thread gemm_thread; /* joinable while a choice runs or has not been waited for */

bool gemm_start_wanted()
{
  const char *v = getenv("KNNWB_CUDA_GEMM_START");
  return v == nullptr || strcmp(v, "0") != 0;
}

/* Same-model GPUs share one timed choice (lt_gemm_adopt) unless KNNWB_CUDA_GEMM_SHARE=0. */
bool gemm_share_wanted()
{
  const char *v = getenv("KNNWB_CUDA_GEMM_SHARE");
  return v == nullptr || strcmp(v, "0") != 0;
}

/* A GPU's model as far as the GEMM's speed goes: its name, compute capability and multiprocessor
 * count (read without a context). Unreadable: a model of its own. */
std::string device_model(int device)
{
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return "?" + std::to_string(device);
  }
  return std::string(prop.name) + "/" + std::to_string(prop.major) + "." +
         std::to_string(prop.minor) + "/" + std::to_string(prop.multiProcessorCount);
}

/* The GPU that times the choice for the others of its model; done is ready once it has. */
struct Leader {
  int device;
  std::shared_future<void> done;
};

/* One device's choice for tiles of tile x dpad halves, on a handle and stream of its own: timed
 * here (leader NULL), or the leader's taken once it is made (lt_gemm_adopt), timed here if that
 * fails. finished is set on every path: the followers of this device wait for it. */
void choose_on(int device, int tile, int dpad, const Leader *leader, std::promise<void> *finished)
{
  const double t0 = seconds_now();
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  void *buffer = nullptr;
  const size_t rows_bytes = ((size_t)tile * (size_t)dpad * 2 + 255) / 256 * 256;
  const size_t tile_bytes = (size_t)tile * (size_t)tile * 2;
  bool adopted = false;
  double ready_at = 0;
  if (cudaSetDevice(device) == cudaSuccess &&
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
      cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS &&
      cublasSetStream(blas, stream) == CUBLAS_STATUS_SUCCESS &&
      cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS &&
      cudaMalloc(&buffer, rows_bytes + tile_bytes) == cudaSuccess &&
      cudaMemsetAsync(buffer, 0x3c, rows_bytes, stream) == cudaSuccess) {
    /* (halves of 0x3c3c: 1.06 each) */
    ready_at = seconds_now() - t0;
    LtGemm gemm;
    const float alpha = ldexpf(1.0f, kHalfTileExponent);
    void *out = static_cast<char *>(buffer) + rows_bytes;
    if (leader != nullptr) {
      leader->done.wait();
      adopted = lt_gemm_adopt(&gemm, blas, device, leader->device, tile, dpad, alpha, buffer, out,
                              stream);
    }
    double ex_ms = 0, lt_ms = 0;
    if (!adopted)
      lt_gemm_choose(&gemm, blas, device, tile, dpad, alpha, buffer, out, stream, &ex_ms, &lt_ms);
    cudaStreamSynchronize(stream);
    lt_gemm_destroy(&gemm);
  }
  if (finished != nullptr)
    finished->set_value();
  if (buffer)
    cudaFree(buffer);
  if (blas)
    cublasDestroy(blas);
  if (stream)
    cudaStreamDestroy(stream);
  cudaGetLastError(); /* best effort: nothing of it may fail a search */
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda: GPU %d's tile GEMM %s in %.3f s (its context and buffers %.3f s)\n",
            device, adopted ? "taken from its model's first GPU" : "timed", seconds_now() - t0,
            ready_at);
}

/* The helper thread: the driver's count, then every GPU of ordinals (all when empty) at once, the
 * first of each model timing the choice for the others (lt_gemm_adopt). */
void choose_all(std::vector<int> ordinals, int tile, int dpad)
{
  const double t0 = seconds_now();
  const int count = knnwb_cuda_device_count();
  if (ordinals.empty())
    for (int i = 0; i < count; i++)
      ordinals.push_back(i);
  std::vector<int> devices;
  for (int ordinal : ordinals)
    if (ordinal >= 0 && ordinal < count && !lt_gemm_known(ordinal, tile, dpad))
      devices.push_back(ordinal);
  /* promises[i]: set when devices[i]'s choice is made; leaders[i]: whose choice it takes */
  std::vector<std::promise<void>> promises(devices.size());
  std::vector<std::shared_future<void>> done;
  for (std::promise<void> &p : promises)
    done.push_back(p.get_future().share());
  std::vector<Leader> leaders(devices.size());
  std::vector<bool> follows(devices.size(), false);
  std::vector<std::string> models;
  for (size_t i = 0; i < devices.size(); i++) {
    models.push_back(gemm_share_wanted() ? device_model(devices[i]) : std::to_string(i));
    for (size_t j = 0; j < i && !follows[i]; j++)
      if (!follows[j] && models[j] == models[i]) {
        leaders[i] = Leader{devices[j], done[j]};
        follows[i] = true;
      }
  }
  std::vector<std::thread> threads;
  size_t started = 0;
  for (; started < devices.size(); started++) {
    try {
      threads.emplace_back(choose_on, devices[started], tile, dpad,
                           follows[started] ? &leaders[started] : nullptr, &promises[started]);
    } catch (...) {
      break; /* no thread: the workers choose for what is left */
    }
  }
  /* a leader without a thread: its followers must not wait for it */
  for (size_t i = started; i < devices.size(); i++)
    promises[i].set_value();
  for (std::thread &t : threads)
    t.join();
  if (trace_enabled() && !threads.empty())
    fprintf(stderr,
            "knnwb cuda: tile GEMM (%d x %d, K = %d) chosen ahead on %zu GPU(s) in %.3f s\n", tile,
            tile, dpad, threads.size(), seconds_now() - t0);
}

/* With gemm_lock held: a choice begun before has finished and is joined. */
void wait_locked()
{
  if (gemm_thread.joinable())
    gemm_thread.join();
}

} // namespace

extern "C" void knnwb_cuda_gemm_start(const int *devices, int n_devices, size_t n_query,
                                      size_t n_reference, size_t dim)
{
  if (!gemm_start_wanted() || dim == 0)
    return;
  const int tile = knnwb_select_plan_first_tile(n_query, n_reference);
  if (!knnwb_select_plan_times_gemm(n_query, n_reference, tile))
    return;
  const int dpad = knnwb_select_plan_dpad(dim, KNNWB_KERNELS_SCREEN_FP16);
  std::vector<int> ordinals;
  for (int i = 0; i < n_devices; i++)
    ordinals.push_back(devices != nullptr ? devices[i] : i);
  std::lock_guard<std::mutex> guard(gemm_lock);
  wait_locked();
  try {
    gemm_thread = std::thread(choose_all, ordinals, tile, dpad);
  } catch (...) {
    /* no thread: the workers choose, as without a start */
  }
}

extern "C" void knnwb_cuda_gemm_start_wait(void)
{
  std::lock_guard<std::mutex> guard(gemm_lock);
  wait_locked();
}

extern "C" int knnwb_cuda_gemm_known(int device, size_t n_query, size_t n_reference, size_t dim)
{
  const int tile = knnwb_select_plan_first_tile(n_query, n_reference);
  return lt_gemm_known(device, tile, knnwb_select_plan_dpad(dim, KNNWB_KERNELS_SCREEN_FP16)) ? 1
                                                                                             : 0;
}
