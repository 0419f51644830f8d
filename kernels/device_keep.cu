/*
 * Device memory and cuBLAS/cuBLASLt handles kept between searches inside a keep scope
 * (device_keep.h). One lock guards the lists; CUDA's freeing calls, which wait for the device,
 * run outside it.
 */
#include "blas_library.h"
#include "device_keep.h"
#include "device_keep_policy.h"
#include "knnwb_kernels.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace knnwb_cuda
{
namespace
{

using Block = KeptBlock;

std::mutex keep_lock;
int scopes = 0;                             /* open keep scopes */
std::unordered_map<void *, Block> live;     /* blocks of keep_malloc in use */
std::vector<Block> kept;                    /* free blocks, oldest first */
std::vector<std::pair<int, void *>> blases; /* kept cublasHandle_t, by device */
std::vector<std::pair<int, void *>> lts;    /* kept cublasLtHandle_t, by device */

/* Kept bytes a device may hold: beyond it the oldest blocks are freed (blocks of a size no
 * later request fits would otherwise stay until the scope ends). An eighth of the GPU's memory:
 * several sub-searches' sets at the scales a partitioned run makes. */
size_t kept_cap(int ordinal)
{
  static std::mutex cap_lock;
  static std::unordered_map<int, size_t> caps;
  std::lock_guard<std::mutex> guard(cap_lock);
  auto it = caps.find(ordinal);
  if (it != caps.end())
    return it->second;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    total_bytes = (size_t)32 << 30;
  }
  const size_t cap = std::max(total_bytes / 8, (size_t)4 << 30);
  caps[ordinal] = cap;
  return cap;
}

/* Frees blocks on their devices, restoring the caller's current device. */
void free_blocks(const std::vector<Block> &blocks)
{
  if (blocks.empty())
    return;
  int current = -1;
  cudaGetDevice(&current);
  for (const Block &b : blocks) {
    cudaSetDevice(b.ordinal);
    cudaFree(b.p);
  }
  if (current >= 0)
    cudaSetDevice(current);
  cudaGetLastError();
}

/* A kept handle of device ordinal from list, else one made by create (its status). */
template <typename Handle, typename Create>
cublasStatus_t take_handle(std::vector<std::pair<int, void *>> &list, int ordinal, Handle *handle,
                           Create create)
{
  *handle = nullptr;
  {
    std::lock_guard<std::mutex> guard(keep_lock);
    for (auto it = list.begin(); it != list.end(); ++it)
      if (it->first == ordinal) {
        *handle = (Handle)it->second;
        list.erase(it);
        return CUBLAS_STATUS_SUCCESS;
      }
  }
  return create(handle);
}

/* handle (NULL ignored) into list inside a scope, else destroyed. */
template <typename Handle, typename Destroy>
void give_handle(std::vector<std::pair<int, void *>> &list, int ordinal, Handle handle,
                 Destroy destroy)
{
  if (handle == nullptr)
    return;
  {
    std::lock_guard<std::mutex> guard(keep_lock);
    if (scopes > 0) {
      list.push_back({ordinal, (void *)handle});
      return;
    }
  }
  destroy(handle);
}

} // namespace

cudaError_t keep_malloc(int ordinal, void **p, size_t bytes)
{
  *p = nullptr;
  {
    std::lock_guard<std::mutex> guard(keep_lock);
    const long best = keep_best_fit(kept, ordinal, bytes);
    if (best >= 0) {
      const Block b = kept[(size_t)best];
      kept.erase(kept.begin() + best);
      *p = b.p;
      live[b.p] = b;
      return cudaSuccess;
    }
  }
  cudaError_t err = cudaMalloc(p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    std::vector<Block> spare;
    {
      std::lock_guard<std::mutex> guard(keep_lock);
      keep_evict(kept, ordinal, 0, &spare);
    }
    if (!spare.empty()) {
      free_blocks(spare);
      cudaSetDevice(ordinal);
      err = cudaMalloc(p, bytes);
    }
  }
  if (err != cudaSuccess) {
    *p = nullptr;
    return err;
  }
  std::lock_guard<std::mutex> guard(keep_lock);
  live[*p] = Block{ordinal, *p, bytes};
  return cudaSuccess;
}

void keep_free(int ordinal, void *p)
{
  if (p == nullptr)
    return;
  std::vector<Block> evicted;
  {
    std::lock_guard<std::mutex> guard(keep_lock);
    auto it = live.find(p);
    Block b = it != live.end() ? it->second : Block{ordinal, p, 0};
    if (it != live.end())
      live.erase(it);
    if (scopes > 0 && b.bytes > 0) {
      kept.push_back(b);
      keep_evict(kept, ordinal, kept_cap(ordinal), &evicted);
    } else {
      evicted.push_back(b);
    }
  }
  free_blocks(evicted);
}

size_t keep_bytes(int ordinal)
{
  std::lock_guard<std::mutex> guard(keep_lock);
  size_t bytes = 0;
  for (const Block &b : kept)
    bytes += b.ordinal == ordinal ? b.bytes : 0;
  return bytes;
}

cublasStatus_t keep_blas_take(int ordinal, cublasHandle_t *handle)
{
  const BlasLibrary *l = blas();
  *handle = nullptr;
  return l != nullptr ? take_handle(blases, ordinal, handle, l->create)
                      : CUBLAS_STATUS_NOT_INITIALIZED;
}

void keep_blas_give(int ordinal, cublasHandle_t handle)
{
  if (handle != nullptr) /* made by the loaded library */
    give_handle(blases, ordinal, handle, blas()->destroy);
}

cublasStatus_t keep_lt_take(int ordinal, cublasLtHandle_t *handle)
{
  const BlasLibrary *l = blas();
  *handle = nullptr;
  return l != nullptr ? take_handle(lts, ordinal, handle, l->lt_create)
                      : CUBLAS_STATUS_NOT_INITIALIZED;
}

void keep_lt_give(int ordinal, cublasLtHandle_t handle)
{
  if (handle != nullptr)
    give_handle(lts, ordinal, handle, blas()->lt_destroy);
}

} // namespace knnwb_cuda

using namespace knnwb_cuda;

extern "C" void knnwb_cuda_keep_begin(void)
{
  std::lock_guard<std::mutex> guard(keep_lock);
  scopes++;
}

extern "C" void knnwb_cuda_keep_end(void)
{
  std::vector<Block> blocks;
  std::vector<std::pair<int, void *>> blas_handles, lt_handles;
  {
    std::lock_guard<std::mutex> guard(keep_lock);
    if (scopes == 0 || --scopes > 0)
      return;
    blocks.swap(kept);
    blas_handles.swap(blases);
    lt_handles.swap(lts);
  }
  free_blocks(blocks);
  int current = -1;
  cudaGetDevice(&current);
  /* handles were made by the loaded library (none: nothing to load) */
  const BlasLibrary *l = blas_handles.empty() && lt_handles.empty() ? nullptr : blas();
  for (const auto &h : blas_handles) {
    cudaSetDevice(h.first);
    l->destroy((cublasHandle_t)h.second);
  }
  for (const auto &h : lt_handles) {
    cudaSetDevice(h.first);
    l->lt_destroy((cublasLtHandle_t)h.second);
  }
  if (current >= 0)
    cudaSetDevice(current);
  cudaGetLastError();
}
