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
#include "blas_library.h"
#include "knnwb_kernels.h"
#include "select_plan.h"
#include "select_trace.h"
#include "tile_scores.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace
{

using namespace knnwb_cuda;

std::mutex gemm_lock;    /* gemm_thread, gemm_shape */
std::thread gemm_thread; /* joinable while a choice runs or has not been waited for */
/* what gemm_thread chooses for: tile, dpad, then the ordinals asked for (none: every GPU) */
std::vector<int> gemm_shape;

bool gemm_start_wanted()
{
  const char *v = getenv("KNNWB_CUDA_GEMM_START");
  return v == nullptr || strcmp(v, "0") != 0;
}

/* One device's choice for tiles of tile x dpad halves, on a handle and stream of its own. */
void choose_on(int device, int tile, int dpad)
{
  const double t0 = seconds_now();
  cudaStream_t stream = nullptr;
  cublasHandle_t handle = nullptr;
  void *buffer = nullptr;
  const BlasLibrary *l = blas();
  const size_t rows_bytes = ((size_t)tile * (size_t)dpad * 2 + 255) / 256 * 256;
  const size_t tile_bytes = (size_t)tile * (size_t)tile * 2;
  double ready_at = 0;
  const double loaded_at = seconds_now() - t0;
  double context_at = 0, handle_at = 0;
  if (l != nullptr && cudaSetDevice(device) == cudaSuccess &&
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
      (context_at = seconds_now() - t0) >= 0 && l->create(&handle) == CUBLAS_STATUS_SUCCESS &&
      (handle_at = seconds_now() - t0) >= 0 &&
      l->set_stream(handle, stream) == CUBLAS_STATUS_SUCCESS &&
      l->set_math_mode(handle, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS &&
      cudaMalloc(&buffer, rows_bytes + tile_bytes) == cudaSuccess &&
      cudaMemsetAsync(buffer, 0x3c, rows_bytes, stream) == cudaSuccess) {
    /* (halves of 0x3c3c: 1.06 each) */
    ready_at = seconds_now() - t0;
    LtGemm gemm;
    double ex_ms = 0, lt_ms = 0;
    lt_gemm_choose(&gemm, handle, device, tile, dpad, ldexpf(1.0f, kHalfTileExponent), buffer,
                   static_cast<char *>(buffer) + rows_bytes, stream, &ex_ms, &lt_ms);
    cudaStreamSynchronize(stream);
    lt_gemm_destroy(&gemm);
  }
  if (buffer)
    cudaFree(buffer);
  if (handle)
    l->destroy(handle);
  if (stream)
    cudaStreamDestroy(stream);
  cudaGetLastError(); /* best effort: nothing of it may fail a search */
  /* On the 2-GPU H200 host the timing itself took 0.11-0.14 s on each GPU, one GPU or two alike;
   * what two GPUs add is the driver's start and the contexts (before this line's first figure). */
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda: GPU %d's tile GEMM chosen in %.3f s (its context and buffers %.3f s: "
            "cuBLAS loaded at %.3f s, the context at %.3f s, the handle at %.3f s)\n",
            device, seconds_now() - t0, ready_at, loaded_at, context_at, handle_at);
}

/* The helper thread: the driver's count, then every GPU of ordinals (when empty: the share's,
 * knnwb_device_share) at once. */
void choose_all(std::vector<int> ordinals, int share, int shares, int tile, int dpad)
{
  const double t0 = seconds_now();
  const int count = knnwb_cuda_device_count();
  const double counted = seconds_now() - t0;
  if (ordinals.empty() && count > 0) {
    ordinals.resize((size_t)count);
    ordinals.resize((size_t)knnwb_cuda_share_devices(share, shares, ordinals.data(), count));
  }
  std::vector<std::thread> threads;
  for (int ordinal : ordinals) {
    if (ordinal < 0 || ordinal >= count || lt_gemm_known(ordinal, tile, dpad))
      continue;
    try {
      threads.emplace_back(choose_on, ordinal, tile, dpad);
    } catch (...) {
      break; /* no thread: the workers choose for what is left */
    }
  }
  for (std::thread &t : threads)
    t.join();
  if (trace_enabled() && !threads.empty())
    fprintf(stderr,
            "knnwb cuda: tile GEMM (%d x %d, K = %d) chosen ahead on %zu GPU(s) in %.3f s (the "
            "driver's count %.3f s)\n",
            tile, tile, dpad, threads.size(), seconds_now() - t0, counted);
}

/* With gemm_lock held: a choice begun before has finished and is joined. */
void wait_locked()
{
  if (gemm_thread.joinable())
    gemm_thread.join();
}

} // namespace

extern "C" void knnwb_cuda_gemm_start(const int *devices, int n_devices, int share, int shares,
                                      size_t n_query, size_t n_reference, size_t dim)
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
  std::vector<int> shape = {tile, dpad, n_devices > 0 ? 0 : share, n_devices > 0 ? 1 : shares};
  shape.insert(shape.end(), ordinals.begin(), ordinals.end());
  std::lock_guard<std::mutex> guard(gemm_lock);
  /* Begun already for this shape (from an input's header, before its values were read): the
   * search finds it under way or made, and must not wait for it here. */
  if (gemm_thread.joinable() && shape == gemm_shape)
    return;
  wait_locked();
  try {
    gemm_thread = std::thread(choose_all, ordinals, share, shares, tile, dpad);
    gemm_shape = shape;
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
