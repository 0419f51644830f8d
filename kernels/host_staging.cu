/*
 * Pinned staging pool, parallel host copies and host registration (host_staging.h).
 */
#include "host_staging.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

namespace knnwb_cuda
{
namespace
{

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

} // namespace

void *staging_take()
{
  /* KNNWB_CUDA_TEST_NO_STAGING=1 (tests): as if the host refused page-locked memory */
  const char *refuse = getenv("KNNWB_CUDA_TEST_NO_STAGING");
  if (refuse != nullptr && strcmp(refuse, "1") == 0)
    return nullptr;
  return pinned_pool().take();
}

void staging_give(void *buffer)
{
  pinned_pool().give(buffer);
}

void staging_free_cached()
{
  PinnedPool::free_cached();
}

void parallel_copy(void *dst, const void *src, size_t bytes, int threads)
{
  const size_t min_part = 2u << 20;
  int parts = (int)std::min<size_t>((size_t)std::max(threads, 1), bytes / min_part);
  if (parts <= 1) {
    memcpy(dst, src, bytes);
    return;
  }
  const size_t per = (bytes + parts - 1) / parts;
  auto copy_part = [=](int t) {
    size_t b0 = per * (size_t)t;
    if (b0 < bytes)
      memcpy((char *)dst + b0, (const char *)src + b0, std::min(per, bytes - b0));
  };
  std::vector<std::thread> workers;
  int started = 1;
  try {
    workers.reserve((size_t)parts);
    for (; started < parts; started++)
      workers.emplace_back(copy_part, started);
  } catch (const std::exception &) {
    /* A thread that cannot start (memory or process limits): this thread copies its parts. */
  }
  for (int t = started; t < parts; t++)
    copy_part(t);
  copy_part(0);
  for (auto &w : workers)
    w.join();
}

bool HostPin::pin(const void *p, size_t bytes)
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

HostPin::~HostPin()
{
  for (void *p : pinned)
    cudaHostUnregister(p);
  cudaGetLastError();
}

} // namespace knnwb_cuda
