/*
 * Host side of the copies between host memory and the GPUs: pinned staging buffers from a
 * process-wide pool, a memcpy split over threads, and registration of large host arrays.
 */
#ifndef KNNWB_HOST_STAGING_H
#define KNNWB_HOST_STAGING_H

#include <stddef.h>

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

namespace knnwb_cuda
{

/* Per pinned host staging buffer. Page-locking costs about as much as copying the bytes several
 * times over, and with G GPUs it is paid G times at once, so buffers are small and kept in a
 * process-wide pool for the next call (the exact MST makes many). */
constexpr size_t kStagingBytes = 16u << 20;

/** A pinned buffer of kStagingBytes, or NULL when page-locked memory is refused (copy directly;
 * KNNWB_CUDA_TEST_NO_STAGING=1 refuses every one, for tests). */
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

/**
 * fn(begin, end) over [0, n) split among up to threads threads (this one included), parts of at
 * least min_rows; a part whose thread cannot start (memory or process limits) is done here.
 */
template <typename F> void parallel_rows(size_t n, int threads, size_t min_rows, F fn)
{
  int parts = (int)std::max<size_t>(
      1, std::min<size_t>((size_t)std::max(threads, 1), n / std::max<size_t>(min_rows, 1)));
  if (parts <= 1) {
    fn((size_t)0, n);
    return;
  }
  std::vector<std::thread> helpers;
  int started = 1;
  try {
    helpers.reserve((size_t)parts);
    for (; started < parts; started++)
      helpers.emplace_back(fn, n * started / parts, n * (started + 1) / parts);
  } catch (const std::exception &) {
    /* A thread that cannot start: this one does its part (below). */
  }
  for (int t = started; t < parts; t++)
    fn(n * t / parts, n * (t + 1) / parts);
  fn((size_t)0, n / parts);
  for (auto &h : helpers)
    h.join();
}

/** Registers host arrays for fast asynchronous copies; unregisters on destruction. */
struct HostPin {
  std::vector<void *> pinned;
  /** FALSE when p could not be registered (not fatal: copies then go through the driver). */
  bool pin(const void *p, size_t bytes);
  ~HostPin();
};

} // namespace knnwb_cuda

#endif
