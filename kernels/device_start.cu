/*
 * The GPUs' start, begun with the call and on every GPU at once. The driver's initialisation (the
 * first cudaGetDeviceCount) and each GPU's context cost 0.3 s on one H200 and 0.9 s on four, one
 * after another, between core's prepare and its duplicate search. knnwb_cuda_start runs them on a
 * helper thread (the contexts on a thread each) while core checks and prepares the rows;
 * knnwb_cuda_device_count, the first CUDA call the engine makes, waits for it.
 */
#include <cuda_runtime.h>

#include <mutex>
#include <thread>
#include <vector>

#include "knnwb_kernels.h"

namespace
{

std::mutex start_lock;
std::thread start_thread; /* joinable while a start runs or has not been waited for */
bool counted = false;
int device_count = 0;

void count_devices()
{
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    n = 0;
  }
  device_count = n;
  counted = true;
}

/* The driver, then the primary context of each GPU in ordinals (all when empty) at once. */
void start_devices(std::vector<int> ordinals)
{
  count_devices();
  if (ordinals.empty())
    for (int i = 0; i < device_count; i++)
      ordinals.push_back(i);
  std::vector<std::thread> threads;
  for (int ordinal : ordinals) {
    if (ordinal < 0 || ordinal >= device_count)
      continue;
    try {
      threads.emplace_back([ordinal] {
        if (cudaSetDevice(ordinal) == cudaSuccess)
          cudaFree(nullptr);
        cudaGetLastError();
      });
    } catch (...) {
      break; /* no thread: the workers create what is left */
    }
  }
  for (std::thread &t : threads)
    t.join();
}

/* With start_lock held: the start finished and joined. */
void wait_locked()
{
  if (start_thread.joinable())
    start_thread.join();
}

} // namespace

extern "C" void knnwb_cuda_start(const int *devices, int n_devices)
{
  std::lock_guard<std::mutex> guard(start_lock);
  if (counted || start_thread.joinable())
    return;
  std::vector<int> ordinals;
  for (int i = 0; i < n_devices; i++)
    ordinals.push_back(devices != nullptr ? devices[i] : i);
  try {
    start_thread = std::thread(start_devices, ordinals);
  } catch (...) {
    /* no thread: knnwb_cuda_device_count starts the driver itself */
  }
}

extern "C" void knnwb_cuda_start_wait(void)
{
  std::lock_guard<std::mutex> guard(start_lock);
  wait_locked();
}

extern "C" int knnwb_cuda_device_count(void)
{
  std::lock_guard<std::mutex> guard(start_lock);
  wait_locked();
  if (!counted)
    count_devices();
  return device_count;
}

extern "C" int knnwb_cuda_started(void)
{
  std::lock_guard<std::mutex> guard(start_lock);
  wait_locked();
  return counted && device_count > 0;
}

extern "C" size_t knnwb_cuda_free_bytes(int device)
{
  size_t free_bytes = 0, total_bytes = 0;
  if (device < 0 || device >= knnwb_cuda_device_count() || cudaSetDevice(device) != cudaSuccess ||
      cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return free_bytes;
}
