/*
 * The GPUs' start, begun with the call and on every GPU at once. The driver's initialisation (the
 * first cudaGetDeviceCount) and each GPU's context cost 0.3 s on one H200 and 0.9 s on four, one
 * after another, between core's prepare and its duplicate search. knnwb_cuda_start runs them on a
 * helper thread (the contexts on a thread each) while core reads, checks and prepares the rows;
 * knnwb_cuda_device_count, the first CUDA call the engine makes, waits for the driver only: the
 * contexts go on while core works, and a worker's first call on a GPU meets its context there.
 *
 * The driver starts every GPU CUDA_VISIBLE_DEVICES shows (0.44-0.46 s with two H200s visible,
 * 0.05 s with one), whichever a run uses, and reads the variable only then. So a start for a rank's
 * share of its host's GPUs, and knnwb_cuda_narrow_to for the GPUs a command names, first narrow
 * the variable to them, where the driver is untouched and the GPUs can be counted without it.
 */
#include <cuda_runtime.h>

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "blas_library.h"
#include "device_keep.h"
#include "host_staging.h"
#include "knnwb_kernels.h"

namespace
{

std::mutex start_lock;    /* start_thread */
std::thread start_thread; /* joinable while a start runs or has not been waited for */
std::mutex count_lock;    /* the count's state */
std::condition_variable count_known;
bool counting = false; /* a start's thread is initialising the driver */
bool counted = false;
int device_count = 0;
std::atomic<bool> narrowed{false}; /* CUDA_VISIBLE_DEVICES shows only the start's share */

void count_devices()
{
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    n = 0;
  }
  {
    std::lock_guard<std::mutex> guard(count_lock);
    device_count = n;
    counted = true;
    counting = false;
  }
  count_known.notify_all();
}

/* The count once known, or -1 while a start is counting, or -2 when nobody counts yet. */
int count_state()
{
  std::lock_guard<std::mutex> guard(count_lock);
  return counted ? device_count : counting ? -1 : -2;
}

/* Pinned staging buffers made and handed back to the pool (host_staging.h), on the thread of the
 * run's first GPU once its context is there (a thread that never chose a GPU would make GPU 0's
 * context, which the run may not use): the rows' upload ahead takes eight (one a lane), and
 * page-locking them there, right after the rows were prepared, held up the upload and the
 * duplicate search beside it (a whole command on 1,533,876 x 128 rows: the upload 0.030-0.050 s
 * with them made here, 0.106-0.119 s without; knn step 1.59-1.61 s against 1.62-1.69 s). Here they
 * overlap the input's read. KNNWB_CUDA_STAGING_WARM=N (0 to 16) makes N instead, to measure;
 * anything else: 8. */
void warm_staging()
{
  const char *v = getenv("KNNWB_CUDA_STAGING_WARM");
  char *end = nullptr;
  const long asked = v != nullptr ? strtol(v, &end, 10) : -1;
  const int n =
      v != nullptr && end != v && *end == '\0' && asked >= 0 && asked <= 16 ? (int)asked : 8;
  void *taken[16] = {};
  for (int i = 0; i < n; i++)
    taken[i] = knnwb_cuda::staging_take();
  for (int i = 0; i < n; i++)
    knnwb_cuda::staging_give(taken[i]);
}

/* knnwb_device_share of count GPUs, or every one of them once narrow made the share all
 * the driver shows. */
int share_of(int share, int shares, int count, int *ordinals, int max)
{
  return narrowed ? knnwb_device_share(0, 1, count, ordinals, max)
                  : knnwb_device_share(share, shares, count, ordinals, max);
}

/* Whether nothing in this process has started CUDA's driver (it is not even loaded, or it says
 * it is not initialised): only then does CUDA_VISIBLE_DEVICES still decide what it shows. */
bool driver_untouched()
{
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver == nullptr)
    return true;
  using DeviceCount = int (*)(int *);
  const auto count = reinterpret_cast<DeviceCount>(dlsym(driver, "cuDeviceGetCount"));
  int n = 0;
  const bool untouched = count != nullptr && count(&n) == 3; /* CUDA_ERROR_NOT_INITIALIZED */
  dlclose(driver);
  return untouched;
}

/* The GPUs the driver will show when CUDA_VISIBLE_DEVICES is unset, without starting it: its
 * folders in /proc, where as many device files /dev/nvidiaN are there for this process to open (a
 * container may show the host's folders but only its own devices); -1 when unknown. */
int system_gpu_count()
{
  DIR *folder = opendir("/proc/driver/nvidia/gpus");
  if (folder == nullptr)
    return -1;
  int gpus = 0;
  for (const dirent *entry = readdir(folder); entry != nullptr; entry = readdir(folder))
    gpus += entry->d_name[0] != '.';
  closedir(folder);
  int files = 0;
  for (int minor = 0; minor < 256; minor++) {
    char path[32];
    snprintf(path, sizeof path, "/dev/nvidia%d", minor);
    files += access(path, R_OK | W_OK) == 0;
  }
  return gpus > 0 && gpus == files ? gpus : -1;
}

/* Whether CUDA_VISIBLE_DEVICES may still be narrowed: KNNWB_GPU_NARROW is not 0 and nothing
 * started the driver, which reads the variable only then. */
bool narrowing_allowed()
{
  const char *knob = getenv("KNNWB_GPU_NARROW");
  return !(knob != nullptr && strcmp(knob, "0") == 0) && driver_untouched();
}

/* The GPUs a narrowed variable picks from when CUDA_VISIBLE_DEVICES is unset (0 when it is set:
 * its entries are those). */
int unset_count(const char *visible)
{
  return visible != nullptr ? 0 : system_gpu_count();
}

/* CUDA_VISIBLE_DEVICES set to value (a string to free, or NULL: nothing to narrow), so that the
 * driver starts those GPUs only (the count took 0.44-0.46 s with two H200s visible, 0.05 s with
 * one). Whether it was set. */
bool narrow_to(char *value)
{
  const bool set = value != nullptr && setenv("CUDA_VISIBLE_DEVICES", value, 1) == 0;
  free(value);
  return set;
}

/* The driver, then the primary context of each GPU in ordinals (when empty: the share's of every
 * visible one, knnwb_device_share) and cuBLAS's libraries (blas_library.h), all at once. */
void start_devices(std::vector<int> ordinals, int share, int shares)
{
  count_devices();
  if (ordinals.empty() && device_count > 0) {
    ordinals.resize((size_t)device_count);
    ordinals.resize((size_t)share_of(share, shares, device_count, ordinals.data(), device_count));
  }
  std::vector<std::thread> threads;
  if (device_count > 0) {
    try {
      threads.emplace_back([] { knnwb_cuda::blas(); });
    } catch (...) {
      /* no thread: the first GEMM's setup loads them */
    }
  }
  bool warm = true; /* on the first GPU's thread */
  for (int ordinal : ordinals) {
    if (ordinal < 0 || ordinal >= device_count)
      continue;
    try {
      threads.emplace_back([ordinal, warm] {
        if (cudaSetDevice(ordinal) == cudaSuccess && cudaFree(nullptr) == cudaSuccess && warm)
          warm_staging();
        cudaGetLastError();
      });
      warm = false;
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

extern "C" void knnwb_cuda_start(const int *devices, int n_devices, int share, int shares)
{
  std::lock_guard<std::mutex> guard(start_lock);
  if (count_state() != -2 || start_thread.joinable())
    return;
  std::vector<int> ordinals;
  for (int i = 0; i < n_devices; i++)
    ordinals.push_back(devices != nullptr ? devices[i] : i);
  if (n_devices == 0 && shares > 1 && narrowing_allowed()) {
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    narrowed = narrow_to(knnwb_device_share_visible(visible, unset_count(visible), share, shares));
  }
  {
    std::lock_guard<std::mutex> count_guard(count_lock);
    counting = true;
  }
  try {
    start_thread = std::thread(start_devices, ordinals, share, shares);
  } catch (...) {
    /* no thread: knnwb_cuda_device_count starts the driver itself */
    {
      std::lock_guard<std::mutex> count_guard(count_lock);
      counting = false;
    }
    count_known.notify_all();
  }
}

extern "C" int knnwb_cuda_narrow_to(const int *devices, int n_devices)
{
  std::lock_guard<std::mutex> guard(start_lock);
  if (count_state() != -2 || start_thread.joinable() || devices == nullptr || n_devices <= 0 ||
      !narrowing_allowed())
    return 0;
  const char *visible = getenv("CUDA_VISIBLE_DEVICES");
  return narrow_to(knnwb_device_visible_of(visible, unset_count(visible), devices, n_devices));
}

extern "C" void knnwb_cuda_start_wait(void)
{
  std::lock_guard<std::mutex> guard(start_lock);
  wait_locked();
}

/* KNNWB_GPU_START_WAIT=1: the count waits for every context too, and the count "now" for it, as
 * before (to measure). */
static bool wait_for_contexts()
{
  static const bool all = [] {
    const char *v = getenv("KNNWB_GPU_START_WAIT");
    return v != nullptr && strcmp(v, "1") == 0;
  }();
  return all;
}

extern "C" int knnwb_cuda_device_count(void)
{
  if (wait_for_contexts()) {
    std::lock_guard<std::mutex> guard(start_lock);
    wait_locked();
  }
  {
    std::unique_lock<std::mutex> lock(count_lock);
    count_known.wait(lock, [] { return !counting; });
    if (counted)
      return device_count;
  }
  /* no start: count here, once (the lock orders this with a start begun meanwhile) */
  std::lock_guard<std::mutex> guard(start_lock);
  wait_locked();
  if (count_state() == -2)
    count_devices();
  return count_state();
}

extern "C" int knnwb_cuda_device_count_now(void)
{
  const int state = count_state();
  return state == -2 || wait_for_contexts() ? knnwb_cuda_device_count() : state;
}

extern "C" int knnwb_cuda_share_devices(int share, int shares, int *ordinals, int max)
{
  return share_of(share, shares, knnwb_cuda_device_count(), ordinals, max);
}

extern "C" int knnwb_cuda_started(void)
{
  std::lock_guard<std::mutex> guard(start_lock);
  wait_locked();
  return count_state() > 0;
}

extern "C" size_t knnwb_cuda_free_bytes(int device)
{
  size_t free_bytes = 0, total_bytes = 0;
  if (device < 0 || device >= knnwb_cuda_device_count() || cudaSetDevice(device) != cudaSuccess ||
      cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return free_bytes + knnwb_cuda::keep_bytes(device);
}
