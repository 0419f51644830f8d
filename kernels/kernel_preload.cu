/*
 * The search's kernels loaded onto each GPU ahead of its first search. CUDA loads a kernel onto a
 * device when it is first launched there (lazy loading, CUDA 12's default), and the loads queue on
 * the driver: in a partitioned run of 2,000,000 x 50 rows on an H200 the first sub-search on each
 * worker took 0.08-0.19 s for six tiles that later sub-searches finish in 0.011-0.015 s. Loading
 * every kernel of the process when its context starts (CUDA_MODULE_LOADING=EAGER) loads cuBLAS's
 * thousands too and made the whole command 1.5-2.5 s slower. So each GPU's start thread
 * (device_start.cu) asks, once its context exists, for the attributes of the kernels a search
 * launches, which loads those alone, while core reads, checks, prepares and partitions the rows.
 * A search that starts meanwhile finds the kernels loaded or waits on the driver for the one it
 * needs, as it would have. KNNWB_CUDA_PRELOAD=0 leaves every kernel to its first launch.
 */
#include "select_internal.h"
#include "select_trace.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace knnwb_cuda
{

namespace
{

bool preload_wanted()
{
  static const bool on = [] {
    const char *v = getenv("KNNWB_CUDA_PRELOAD");
    return v == nullptr || strcmp(v, "0") != 0;
  }();
  return on;
}

} // namespace

int preload_kernels(void)
{
  if (!preload_wanted())
    return 0;
  const double t0 = seconds_now();
  std::vector<const void *> kernels;
  try {
    add_screen_kernels(kernels);
    add_filter_kernels(kernels);
    add_fresh_kernels(kernels);
    add_select_kernels(kernels);
    add_fused_wgmma_kernels(kernels);
    add_fused_pair_kernels(kernels);
    add_exact_kernels(kernels);
    add_refine_kernels(kernels);
    add_l1_kernels(kernels);
  } catch (...) {
    return 0; /* no memory for the list: each kernel loads at its first launch */
  }
  int loaded = 0;
  for (const void *kernel : kernels) {
    cudaFuncAttributes attributes;
    if (cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess)
      loaded++;
    else
      cudaGetLastError();
  }
  if (trace_enabled()) {
    int device = -1;
    cudaGetDevice(&device);
    fprintf(stderr, "knnwb cuda: GPU %d: %d of %zu kernels loaded ahead in %.3f s\n", device,
            loaded, kernels.size(), seconds_now() - t0);
  }
  return loaded;
}

} // namespace knnwb_cuda
