/*
 * The FP16 GEMM of full tiles through cuBLASLt, with the algorithm timed on the device
 * (tile_scores.h). Why: cublasGemmEx takes cuBLAS's first heuristic choice, and for the tile's
 * shape (K small against M = N) another of cuBLASLt's candidates is often faster. On one H200
 * (M = N = 16,384, FP16 in and out, FP32 accumulation; eight candidates): cublasGemmEx 0.185 ms
 * at K = 128 against 0.174 ms for the fastest candidate, 0.294 ms at K = 320 against 0.268 ms,
 * 0.171 ms at K = 64 against 0.147 ms. Which one wins depends on K, the GPU and the library's
 * version, so each device times them once per shape on the run's own rows, and the choice is kept
 * on disk for the next process on the same GPU model and libraries (gemm_cache.h). Every candidate
 * accumulates in FP32 like cublasGemmEx, and the screen's bound holds for any order of the sums.
 */
#include "blas_library.h"
#include "device_keep.h"
#include "gemm_cache.h"
#include "select_plan.h"
#include "select_trace.h"
#include "tile_scores.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace knnwb_cuda
{

namespace
{

constexpr size_t kWorkspaceBytes = KNNWB_SELECT_LT_WORKSPACE_BYTES;
constexpr int kCandidates = 16;
constexpr int kTimedRuns = 3;

/* A device's choice for a shape: cuBLASLt's algo, or cublasGemmEx (lt false). */
struct Chosen {
  int device, tile, dpad;
  bool lt;
  cublasLtMatmulAlgo_t algo;
};

std::mutex chosen_lock;
std::vector<Chosen> chosen;

/* KNNWB_CUDA_GEMM: 0 timed choice (default), 1 cublasGemmEx ("ex"), 2 cuBLASLt's fastest ("lt") */
int gemm_override()
{
  const char *v = getenv("KNNWB_CUDA_GEMM");
  return v == nullptr ? 0 : strcmp(v, "ex") == 0 ? 1 : strcmp(v, "lt") == 0 ? 2 : 0;
}

/* The handle and workspace come from the keep (device_keep.h): a partitioned run makes this per
 * sub-search. */
bool create(LtGemm *g, int device, int tile, int dpad)
{
  const cublasOperation_t transposed = CUBLAS_OP_T, plain = CUBLAS_OP_N;
  g->device = device;
  /* a handle means the library is loaded */
  return keep_lt_take(device, &g->handle) == CUBLAS_STATUS_SUCCESS &&
         blas()->lt_desc_create(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
         blas()->lt_desc_set(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof transposed) ==
             CUBLAS_STATUS_SUCCESS &&
         blas()->lt_desc_set(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof plain) ==
             CUBLAS_STATUS_SUCCESS &&
         blas()->lt_layout_create(&g->rows, CUDA_R_16F, (uint64_t)dpad, (uint64_t)tile, dpad) ==
             CUBLAS_STATUS_SUCCESS &&
         blas()->lt_layout_create(&g->tile, CUDA_R_16F, (uint64_t)tile, (uint64_t)tile, tile) ==
             CUBLAS_STATUS_SUCCESS &&
         keep_malloc(device, &g->workspace, kWorkspaceBytes) == cudaSuccess;
}

/* Milliseconds per GEMM of run() on stream (kTimedRuns after one untimed), or -1 on failure. */
template <typename F> double time_gemm(F run, cudaStream_t stream)
{
  cudaEvent_t start = nullptr, end = nullptr;
  double ms = -1;
  if (cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&end) == cudaSuccess &&
      run() == CUBLAS_STATUS_SUCCESS && cudaEventRecord(start, stream) == cudaSuccess) {
    bool ok = true;
    for (int i = 0; i < kTimedRuns && ok; i++)
      ok = run() == CUBLAS_STATUS_SUCCESS;
    float elapsed = 0;
    if (ok && cudaEventRecord(end, stream) == cudaSuccess &&
        cudaEventSynchronize(end) == cudaSuccess &&
        cudaEventElapsedTime(&elapsed, start, end) == cudaSuccess)
      ms = elapsed / kTimedRuns;
  }
  if (start)
    cudaEventDestroy(start);
  if (end)
    cudaEventDestroy(end);
  cudaGetLastError();
  return ms;
}

/* The cached choice for (device, tile, dpad), if any. */
bool find_chosen(int device, int tile, int dpad, Chosen *out)
{
  std::lock_guard<std::mutex> guard(chosen_lock);
  for (const Chosen &c : chosen)
    if (c.device == device && c.tile == tile && c.dpad == dpad) {
      *out = c;
      return true;
    }
  return false;
}

/* The disk cache's key for device and shape (gemm_cache.h); false when the device or the driver
 * cannot say. */
bool cache_key(int device, int tile, int dpad, GemmCacheKey *key)
{
  cudaDeviceProp prop;
  int driver = 0;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess ||
      cudaDriverGetVersion(&driver) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  key->model = gemm_cache_model(prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  if (blas() == nullptr)
    return false;
  key->cublaslt = (long)blas()->lt_version();
  key->driver = driver;
  key->tile = tile;
  key->dpad = dpad;
  return true;
}

/* A choice from the disk cache made g's: cuBLASLt's algorithm once cuBLASLt accepts it on this
 * device (cublasLtMatmulAlgoCheck) and it ran once (which loads its kernel, as the timing did),
 * or cublasGemmEx. false (g empty) when the algorithm is refused or fails: then it is timed. */
bool take_cached(LtGemm *g, const GemmCacheEntry &e, int device, int tile, int dpad, float alpha,
                 const void *rows, void *out, cudaStream_t stream)
{
  static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof e.algo, "cuBLASLt's algorithm: 64 bytes");
  if (!e.lt)
    return true;
  cublasLtMatmulHeuristicResult_t check = {};
  bool ok = create(g, device, tile, dpad);
  memcpy(&g->algo, e.algo, sizeof e.algo);
  ok = ok &&
       blas()->lt_algo_check(g->handle, g->op, g->rows, g->rows, g->tile, g->tile, &g->algo,
                             &check) == CUBLAS_STATUS_SUCCESS &&
       check.state == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= kWorkspaceBytes &&
       lt_gemm_run(*g, rows, rows, alpha, out, stream) == CUBLAS_STATUS_SUCCESS &&
       cudaStreamSynchronize(stream) == cudaSuccess;
  if (!ok) {
    cudaStreamSynchronize(stream);
    cudaGetLastError();
    lt_gemm_destroy(g);
    return false;
  }
  g->ready = true;
  return true;
}

/* The choice for (device, tile, dpad) kept for this process. */
void keep_chosen(int device, int tile, int dpad, bool lt, const cublasLtMatmulAlgo_t &algo)
{
  std::lock_guard<std::mutex> guard(chosen_lock);
  chosen.push_back({device, tile, dpad, lt, algo});
}

} // namespace

void lt_gemm_choose(LtGemm *g, cublasHandle_t handle, int device, int tile, int dpad, float alpha,
                    const void *rows, void *out, cudaStream_t stream, double *ex_ms, double *lt_ms)
{
  *ex_ms = *lt_ms = 0;
  const int override = gemm_override();
  if (override == 1)
    return;
  Chosen known;
  if (override == 0 && find_chosen(device, tile, dpad, &known)) {
    if (known.lt && create(g, device, tile, dpad)) {
      g->algo = known.algo;
      g->ready = true;
    } else {
      lt_gemm_destroy(g);
    }
    return;
  }
  /* Timed before by a process on this GPU model with these libraries: taken from the disk. */
  GemmCacheKey key;
  const std::string cache = override == 0 ? gemm_cache_path() : std::string();
  const bool keyed = !cache.empty() && cache_key(device, tile, dpad, &key);
  GemmCacheEntry cached;
  if (keyed && gemm_cache_lookup(cache, key, &cached) &&
      take_cached(g, cached, device, tile, dpad, alpha, rows, out, stream)) {
    keep_chosen(device, tile, dpad, cached.lt, g->algo);
    if (trace_enabled())
      fprintf(stderr, "knnwb cuda: GPU %d's tile GEMM (%s) taken from %s\n", device,
              cached.lt ? "cuBLASLt" : "cublasGemmEx", cache.c_str());
    return;
  }
  if (!create(g, device, tile, dpad)) {
    lt_gemm_destroy(g);
    return;
  }
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulHeuristicResult_t results[kCandidates];
  int found = 0;
  const size_t workspace = kWorkspaceBytes;
  const BlasLibrary *l = blas(); /* loaded: create() took a handle */
  if (l->lt_preference_create(&preference) != CUBLAS_STATUS_SUCCESS ||
      l->lt_preference_set(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                           sizeof workspace) != CUBLAS_STATUS_SUCCESS ||
      l->lt_heuristic(g->handle, g->op, g->rows, g->rows, g->tile, g->tile, preference, kCandidates,
                      results, &found) != CUBLAS_STATUS_SUCCESS)
    found = 0;
  if (preference)
    l->lt_preference_destroy(preference);
  *ex_ms = time_gemm(
      [&] {
        return tile_scores_gemm(handle, GemmPrecision::kFp16, rows, tile, rows, tile, dpad, alpha,
                                out, tile, true);
      },
      stream);
  int best = -1;
  for (int i = 0; i < found; i++) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS || results[i].workspaceSize > workspace)
      continue;
    g->algo = results[i].algo;
    const double ms =
        time_gemm([&] { return lt_gemm_run(*g, rows, rows, alpha, out, stream); }, stream);
    if (ms > 0 && (best < 0 || ms < *lt_ms)) {
      best = i;
      *lt_ms = ms;
    }
  }
  const bool lt = best >= 0 && (override == 2 || *ex_ms <= 0 || *lt_ms < *ex_ms);
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda: GPU %d's tile GEMM timed: cublasGemmEx %.3f ms, %d of cuBLASLt's "
            "candidates, the fastest (number %d) %.3f ms\n",
            device, *ex_ms, found, best + 1, *lt_ms);
  if (lt) {
    g->algo = results[best].algo;
    g->ready = true;
  } else {
    cudaStreamSynchronize(stream); /* (a failed timing may leave GEMMs using the workspace) */
    cudaGetLastError();
    lt_gemm_destroy(g);
  }
  if (override != 0)
    return; /* a forced choice is not the device's own */
  const cublasLtMatmulAlgo_t algo = lt ? results[best].algo : cublasLtMatmulAlgo_t{};
  keep_chosen(device, tile, dpad, lt, algo);
  if (keyed && (lt || *ex_ms > 0)) { /* (a choice of cublasGemmEx by failed timings: not kept) */
    GemmCacheEntry entry;
    entry.key = key;
    entry.lt = lt;
    memcpy(entry.algo, &algo, sizeof entry.algo);
    gemm_cache_store(cache, entry);
  }
}

bool lt_gemm_known(int device, int tile, int dpad)
{
  Chosen known;
  return find_chosen(device, tile, dpad, &known);
}

cublasStatus_t lt_gemm_run(const LtGemm &g, const void *q, const void *r, float alpha, void *tile,
                           cudaStream_t stream, void *workspace)
{
  const float zero = 0.0f;
  return blas()->lt_matmul(g.handle, g.op, &alpha, r, g.rows, q, g.rows, &zero, tile, g.tile, tile,
                           g.tile, &g.algo, workspace ? workspace : g.workspace, kWorkspaceBytes,
                           stream);
}

void lt_gemm_destroy(LtGemm *g)
{
  /* what exists was made by the loaded library */
  if (g->tile)
    blas()->lt_layout_destroy(g->tile);
  if (g->rows)
    blas()->lt_layout_destroy(g->rows);
  if (g->op)
    blas()->lt_desc_destroy(g->op);
  keep_lt_give(g->device, g->handle);
  keep_free(g->device, g->workspace);
  *g = LtGemm{};
}

} // namespace knnwb_cuda
