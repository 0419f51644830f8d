/*
 * A CUDA driver function reached through the runtime, so that kernels/ needs no link to libcuda
 * (the driver is whatever the system has): the TMA map encoder of the wgmma kernel
 * (tile_fused_wgmma.cu) and the primary context's state asked before a GPU is given back
 * (device_release.cu). Host code only.
 */
#ifndef KNNWB_DRIVER_ENTRY_H
#define KNNWB_DRIVER_ENTRY_H

#include <cuda_runtime.h>

namespace knnwb_cuda
{

/* The driver's `name` as of its CUDA 12.0 signature, or NULL where the driver lacks it; clears
 * the runtime's error. Not cached: callers that ask often keep the pointer. */
static inline void *driver_entry(const char *name)
{
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
#else
  const cudaError_t err = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return fn;
}

} // namespace knnwb_cuda

#endif
