/*
 * With two GPUs in one process, the second GPU's diagonal phase ended 0.15-0.31 s after the
 * first's in every run, and the first GPU waited that long at the phase barrier. The selection
 * kernels took the same time on both GPUs; the difference was in the second GPU's GEMMs, whose
 * total was 0.15-0.30 s more (1,533,876 x 295 on 2 H200s, KNNWB_CUDA_TRACE=1 timeline). The
 * guess, not measured: cuBLAS sets up its kernel lazily on a device's first call of a shape, and
 * the two GPUs' first calls queue behind each other. So each worker can make one GEMM of the real
 * tile shape on a helper thread as soon as its handle exists, while the rows upload. The GEMM
 * writes into a buffer of its own, because the upload stages through the tile buffers. Best
 * effort: without memory or a thread there is no warm-up, and the first tiles pay the cost as
 * before. KNNWB_CUDA_WARM_UP=1/0 turns it on/off; off by default until measured.
 */
#include "select_worker.h"
#include "tile_scores.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace knnwb_cuda
{

namespace
{

/* Off until measured on two GPUs; KNNWB_CUDA_WARM_UP=1 or 0 decides. */
constexpr bool kWarmUpDefault = false;

bool warm_up_wanted()
{
  static const bool on = [] {
    const char *v = getenv("KNNWB_CUDA_WARM_UP");
    return v == nullptr || *v == 0 ? kWarmUpDefault : strcmp(v, "0") != 0;
  }();
  return on;
}

} // namespace

GemmPrecision Worker::gemm_precision() const
{
  const KnnwbSelectPlan &p = run_.plan;
  return p.screen == KNNWB_KERNELS_SCREEN_FP16   ? GemmPrecision::kFp16
         : p.screen == KNNWB_KERNELS_SCREEN_TF32 ? GemmPrecision::kTf32
                                                 : GemmPrecision::kFp32;
}

/* FP16 rows are scaled by 2^s, so their products by 2^2s: alpha = 2^-2s undoes it exactly (float
 * tiles), or alpha = 2^kHalfTileExponent keeps half tiles at magnitude about 1 (tile_scores.h). */
float Worker::gemm_alpha() const
{
  return half_tiles_                                     ? ldexpf(1.0f, kHalfTileExponent)
         : run_.plan.screen == KNNWB_KERNELS_SCREEN_FP16 ? ldexpf(1.0f, -2 * screen_exponent_)
                                                         : 1.0f;
}

/* The helper thread: one T x T GEMM of zero rows on the GEMM stream, into its own buffer. */
void Worker::warm_up()
{
  const KnnwbSelectPlan &p = run_.plan;
  const double t0 = seconds_now();
  const size_t T = (size_t)p.tile;
  const size_t rows_bytes = (T * (size_t)p.row_bytes + 255) / 256 * 256;
  const size_t tile_bytes = T * T * (half_tiles_ ? 2 : 4);
  void *buffer = nullptr;
  if (cudaSetDevice(device_ordinal_) != cudaSuccess ||
      cudaMallocAsync(&buffer, rows_bytes + tile_bytes, gemm_stream_) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  char *rows = static_cast<char *>(buffer);
  if (cudaMemsetAsync(rows, 0, rows_bytes, gemm_stream_) == cudaSuccess)
    tile_scores_gemm(blas_, gemm_precision(), rows, (int)T, rows, (int)T, p.dpad, gemm_alpha(),
                     rows + rows_bytes, p.tile, half_tiles_);
  cudaFreeAsync(buffer, gemm_stream_);
  cudaStreamSynchronize(gemm_stream_);
  cudaGetLastError(); /* best effort: nothing of it may fail the run */
  warm_up_s_ = seconds_now() - t0;
}

/* The GEMM of full FP16 tiles: cuBLASLt's fastest algorithm when it beats cublasGemmEx, timed on
 * the resident rows once per device and shape (lt_gemm_choose), before the first tile. */
void Worker::choose_gemm()
{
  const KnnwbSelectPlan &p = run_.plan;
  const KnnwbSelectJob *job = run_.job;
  if (!half_tiles_ || !blas_ || !p.resident || job->score_kind == KNNWB_SCORE_L1 ||
      !knnwb_select_plan_times_gemm(job->n_query, job->n_reference, p.tile) ||
      cudaStreamSynchronize(copy_stream_) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  const double t0 = seconds_now();
  double ex_ms = 0, lt_ms = 0;
  lt_gemm_choose(&lt_gemm_, blas_, device_ordinal_, p.tile, p.dpad, gemm_alpha(), reference_data_,
                 tiles_[0], gemm_stream_, &ex_ms, &lt_ms);
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda worker %d: tile GEMM (%d x %d, K = %d) on %s (cublasGemmEx %.4f ms, "
            "cuBLASLt's fastest %.4f ms; 0: chosen before), %.3f s\n",
            index_, p.tile, p.tile, p.dpad, lt_gemm_.ready ? "cuBLASLt" : "cublasGemmEx", ex_ms,
            lt_ms, seconds_now() - t0);
}

void Worker::start_warm_up()
{
  if (!warm_up_wanted() || !blas_ || run_.job->score_kind == KNNWB_SCORE_L1)
    return;
  try {
    warm_up_thread_ = std::thread([this] { warm_up(); });
  } catch (const std::system_error &) {
    /* no thread to spare: the first tile loads the kernel, as without a warm-up */
  }
}

void Worker::finish_warm_up()
{
  if (!warm_up_thread_.joinable())
    return;
  const double t0 = seconds_now();
  warm_up_thread_.join();
  warm_up_wait_s_ = seconds_now() - t0;
}

} // namespace knnwb_cuda
