/*
 * Host side of the copies between host memory and the GPUs: pinned staging buffers from a
 * process-wide pool, a memcpy split over threads, and registration of large host arrays.
 */
#ifndef KNNWB_HOST_STAGING_H
#define KNNWB_HOST_STAGING_H

#include <stddef.h>

#include <vector>

namespace knnwb_cuda
{

/* Per pinned host staging buffer. Page-locking costs about as much as copying the bytes several
 * times over, and with G GPUs it is paid G times at once, so buffers are small and kept in a
 * process-wide pool for the next call (the exact MST makes many). */
constexpr size_t kStagingBytes = 16u << 20;

/** A pinned buffer of kStagingBytes, or NULL when page-locked memory is refused (copy directly). */
void *staging_take();

/** Returns a buffer of staging_take (NULL is ignored); kept for reuse, freed at exit. */
void staging_give(void *buffer);

/** Frees the pool's buffers that no caller holds (at exit, or when the GPUs are given back). */
void staging_free_cached();

/**
 * memcpy split over up to threads threads (parts of at least 2 MiB): one core copies pageable
 * memory at a fraction of a PCIe 5 DMA's bandwidth, and first-touch page faults are per core.
 */
void parallel_copy(void *dst, const void *src, size_t bytes, int threads);

/** Registers host arrays for fast asynchronous copies; unregisters on destruction. */
struct HostPin {
  std::vector<void *> pinned;
  /** FALSE when p could not be registered (not fatal: copies then go through the driver). */
  bool pin(const void *p, size_t bytes);
  ~HostPin();
};

} // namespace knnwb_cuda

#endif
