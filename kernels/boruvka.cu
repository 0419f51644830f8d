/*
 * Minimum spanning forest on one GPU by Borůvka (the kNN-Borůvka-GPU idea).
 *
 * Ties: edges are ranked once by (weight, edge id) with a stable sort, so every comparison after
 * that is on a 32-bit rank and the forest is the unique one under that order, equal to the CPU's.
 * Each round: every active edge offers key = (rank << 32 | slot) to both end components
 * (atomicMin on 64 bits); every component points at the component across its pick; the lower of
 * a mutual pair becomes a root; pointer jumping flattens the trees; roots are numbered by a scan;
 * edges are relabelled and those now inside a component removed. Rounds stop when no edge is left.
 *
 * Shapes (device): cu, cv, rank: n_active int32 each (component labels of the two ends, edge
 * rank); best: n_components uint64; parent, label: n_components int32; in_forest: n_edges bytes.
 */
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include <cuda_runtime.h>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/remove.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/system_error.h>
#include <thrust/tuple.h>

#include "cuda_check.h"
#include "knnwb_kernels.h"
#include "knnwb_kernels_boruvka.h"

namespace
{

constexpr unsigned long long kNoEdge = ~0ull;
constexpr int kThreads = 256;

inline unsigned blocks_for(long long n)
{
  return (unsigned)((n + kThreads - 1) / kThreads);
}

__global__ void boruvka_load(const int *from, const int *to, const int *rank_of_edge, int n_edges,
                             int *cu, int *cv, int *rank)
{
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n_edges)
    return;
  cu[e] = from[e];
  cv[e] = to[e];
  rank[e] = rank_of_edge[e];
}

__global__ void boruvka_scatter_rank(const int *sorted_edge, int n_edges, int *rank_of_edge)
{
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n_edges)
    rank_of_edge[sorted_edge[r]] = r;
}

__global__ void boruvka_fill_best(unsigned long long *best, int n_components)
{
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < n_components)
    best[c] = kNoEdge;
}

__global__ void boruvka_pick(const int *cu, const int *cv, const int *rank, int n_active,
                             unsigned long long *best)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_active)
    return;
  unsigned long long key = ((unsigned long long)(unsigned)rank[i] << 32) | (unsigned)i;
  atomicMin(&best[cu[i]], key);
  atomicMin(&best[cv[i]], key);
}

__global__ void boruvka_point(const unsigned long long *best, const int *cu, const int *cv,
                              int n_components, int *parent)
{
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= n_components)
    return;
  unsigned long long key = best[c];
  if (key == kNoEdge) {
    parent[c] = c;
    return;
  }
  int i = (int)(key & 0xffffffffu);
  parent[c] = cu[i] == c ? cv[i] : cu[i];
}

/* A mutual pick is one edge; its lower component becomes the root and does not record it. Only
 * the lower one writes, so reading the partner's pointer is race-free. */
__global__ void boruvka_roots_and_record(const unsigned long long *best, const int *sorted_edge,
                                         int n_components, int *parent, unsigned char *in_forest)
{
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= n_components)
    return;
  int p = parent[c];
  if (p == c)
    return;
  if (parent[p] == c && c < p) {
    parent[c] = c;
    return;
  }
  int r = (int)(best[c] >> 32);
  in_forest[sorted_edge[r]] = 1;
}

__global__ void boruvka_jump(int *parent, int n_components, int *changed)
{
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= n_components)
    return;
  int p = parent[c], g = parent[p];
  if (p != g) {
    parent[c] = g;
    *changed = 1;
  }
}

__global__ void boruvka_root_flags(const int *parent, int n_components, int *flag)
{
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < n_components)
    flag[c] = parent[c] == c ? 1 : 0;
}

__global__ void boruvka_relabel(const int *parent, const int *label, int n_active, int *cu, int *cv)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_active)
    return;
  cu[i] = label[parent[cu[i]]];
  cv[i] = label[parent[cv[i]]];
}

struct SameEnds {
  __host__ __device__ bool operator()(const thrust::tuple<int, int, int> &t) const
  {
    return thrust::get<0>(t) == thrust::get<1>(t);
  }
};

struct DeviceBuffers {
  std::vector<void *> pointers;
  ~DeviceBuffers()
  {
    for (void *p : pointers)
      cudaFree(p);
  }
};

} // namespace

#define KNNWB_BORUVKA_CHECK(call) KNNWB_CUDA_CHECK_STATUS(call)

template <typename T>
static cudaError_t knnwb_boruvka_alloc(DeviceBuffers &buffers, T **pointer, size_t count)
{
  cudaError_t status = cudaMalloc((void **)pointer, sizeof(T) * (count > 0 ? count : 1));
  if (status == cudaSuccess)
    buffers.pointers.push_back(*pointer);
  return status;
}

static int knnwb_boruvka_run(int device, int64_t n_vertices, int64_t n_edges, const int64_t *from,
                             const int64_t *to, const double *weights, unsigned char *in_forest,
                             int *n_rounds, char *message, size_t message_size)
{
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    snprintf(message, message_size, "no CUDA device");
    return KNNWB_KERNELS_NO_DEVICE;
  }
  if (device < 0 || device >= count) {
    snprintf(message, message_size, "CUDA device %d does not exist (%d visible)", device, count);
    return KNNWB_KERNELS_NO_DEVICE;
  }
  if (n_vertices >= 0x7fffffff || n_edges >= 0x7fffffff) {
    snprintf(message, message_size, "GPU Borůvka needs fewer than 2^31 - 1 vertices and edges");
    return KNNWB_KERNELS_ERROR;
  }
  KNNWB_BORUVKA_CHECK(cudaSetDevice(device));
  int n = (int)n_vertices, m = (int)n_edges;
  if (n_rounds)
    *n_rounds = 0;
  memset(in_forest, 0, (size_t)m);
  if (m == 0 || n == 0)
    return KNNWB_KERNELS_OK;

  /* 32-bit endpoints on the host side first: half the transfer. */
  std::vector<int> host_from((size_t)m), host_to((size_t)m);
  for (int e = 0; e < m; e++) {
    host_from[(size_t)e] = (int)from[e];
    host_to[(size_t)e] = (int)to[e];
  }
  DeviceBuffers buffers;
  int *d_from, *d_to, *sorted_edge, *rank_of_edge, *cu, *cv, *rank, *parent, *label, *changed;
  double *d_weights;
  unsigned long long *best;
  unsigned char *d_forest;
  KNNWB_BORUVKA_CHECK(knnwb_boruvka_alloc(buffers, &d_from, (size_t)m));
  KNNWB_BORUVKA_CHECK(knnwb_boruvka_alloc(buffers, &d_to, (size_t)m));
  KNNWB_BORUVKA_CHECK(knnwb_boruvka_alloc(buffers, &d_weights, (size_t)m));
  KNNWB_BORUVKA_CHECK(knnwb_boruvka_alloc(buffers, &sorted_edge, (size_t)m));
  KNNWB_BORUVKA_CHECK(knnwb_boruvka_alloc(buffers, &rank_of_edge, (size_t)m));
  KNNWB_BORUVKA_CHECK(knnwb_boruvka_alloc(buffers, &d_forest, (size_t)m));
  KNNWB_BORUVKA_CHECK(knnwb_boruvka_alloc(buffers, &best, (size_t)n));
  KNNWB_BORUVKA_CHECK(knnwb_boruvka_alloc(buffers, &parent, (size_t)n));
  KNNWB_BORUVKA_CHECK(knnwb_boruvka_alloc(buffers, &label, (size_t)n + 1));
  KNNWB_BORUVKA_CHECK(knnwb_boruvka_alloc(buffers, &changed, 1));
  KNNWB_BORUVKA_CHECK(
      cudaMemcpy(d_from, host_from.data(), sizeof(int) * (size_t)m, cudaMemcpyHostToDevice));
  KNNWB_BORUVKA_CHECK(
      cudaMemcpy(d_to, host_to.data(), sizeof(int) * (size_t)m, cudaMemcpyHostToDevice));
  KNNWB_BORUVKA_CHECK(
      cudaMemcpy(d_weights, weights, sizeof(double) * (size_t)m, cudaMemcpyHostToDevice));
  KNNWB_BORUVKA_CHECK(cudaMemset(d_forest, 0, (size_t)m));

  /* Rank by (weight, id): a stable sort of ids keyed by weight keeps equal weights in id order. */
  thrust::device_ptr<double> weight_ptr(d_weights);
  thrust::device_ptr<int> sorted_ptr(sorted_edge);
  thrust::sequence(thrust::device, sorted_ptr, sorted_ptr + m);
  thrust::stable_sort_by_key(thrust::device, weight_ptr, weight_ptr + m, sorted_ptr);
  boruvka_scatter_rank<<<blocks_for(m), kThreads>>>(sorted_edge, m, rank_of_edge);
  KNNWB_BORUVKA_CHECK(cudaGetLastError());
  /* The active edge arrays reuse the input buffers: from -> cu, to -> cv, weights -> rank. */
  cu = d_from;
  cv = d_to;
  rank = (int *)d_weights;
  boruvka_load<<<blocks_for(m), kThreads>>>(d_from, d_to, rank_of_edge, m, cu, cv, rank);
  KNNWB_BORUVKA_CHECK(cudaGetLastError());

  auto zip_begin = thrust::make_zip_iterator(thrust::make_tuple(
      thrust::device_ptr<int>(cu), thrust::device_ptr<int>(cv), thrust::device_ptr<int>(rank)));
  int n_active =
      (int)(thrust::remove_if(thrust::device, zip_begin, zip_begin + m, SameEnds()) - zip_begin);
  int n_components = n;
  int rounds = 0;
  while (n_active > 0) {
    rounds++;
    boruvka_fill_best<<<blocks_for(n_components), kThreads>>>(best, n_components);
    boruvka_pick<<<blocks_for(n_active), kThreads>>>(cu, cv, rank, n_active, best);
    boruvka_point<<<blocks_for(n_components), kThreads>>>(best, cu, cv, n_components, parent);
    boruvka_roots_and_record<<<blocks_for(n_components), kThreads>>>(
        best, sorted_edge, n_components, parent, d_forest);
    KNNWB_BORUVKA_CHECK(cudaGetLastError());
    for (;;) {
      int host_changed = 0;
      KNNWB_BORUVKA_CHECK(cudaMemset(changed, 0, sizeof(int)));
      boruvka_jump<<<blocks_for(n_components), kThreads>>>(parent, n_components, changed);
      KNNWB_BORUVKA_CHECK(cudaMemcpy(&host_changed, changed, sizeof(int), cudaMemcpyDeviceToHost));
      if (!host_changed)
        break;
    }
    /* label = exclusive scan of root flags; its last entry + flag = the new component count. */
    boruvka_root_flags<<<blocks_for(n_components), kThreads>>>(parent, n_components, label);
    KNNWB_BORUVKA_CHECK(cudaGetLastError());
    int last_flag = 0, last_label = 0;
    KNNWB_BORUVKA_CHECK(
        cudaMemcpy(&last_flag, label + n_components - 1, sizeof(int), cudaMemcpyDeviceToHost));
    thrust::device_ptr<int> label_ptr(label);
    thrust::exclusive_scan(thrust::device, label_ptr, label_ptr + n_components, label_ptr);
    KNNWB_BORUVKA_CHECK(
        cudaMemcpy(&last_label, label + n_components - 1, sizeof(int), cudaMemcpyDeviceToHost));
    boruvka_relabel<<<blocks_for(n_active), kThreads>>>(parent, label, n_active, cu, cv);
    KNNWB_BORUVKA_CHECK(cudaGetLastError());
    n_active =
        (int)(thrust::remove_if(thrust::device, zip_begin, zip_begin + n_active, SameEnds()) -
              zip_begin);
    n_components = last_label + last_flag;
  }
  KNNWB_BORUVKA_CHECK(cudaDeviceSynchronize());
  KNNWB_BORUVKA_CHECK(cudaMemcpy(in_forest, d_forest, (size_t)m, cudaMemcpyDeviceToHost));
  if (n_rounds)
    *n_rounds = rounds;
  return KNNWB_KERNELS_OK;
}

extern "C" int knnwb_cuda_boruvka_forest(int device, int64_t n_vertices, int64_t n_edges,
                                         const int64_t *from, const int64_t *to,
                                         const double *weights, unsigned char *in_forest,
                                         int *n_rounds, char *message, size_t message_size)
{
  /* thrust reports failures by exceptions; none may cross into C. */
  try {
    return knnwb_boruvka_run(device, n_vertices, n_edges, from, to, weights, in_forest, n_rounds,
                             message, message_size);
  } catch (const std::bad_alloc &) {
    snprintf(message, message_size, "out of host or device memory");
    return KNNWB_KERNELS_OUT_OF_MEMORY;
  } catch (const thrust::system_error &e) {
    snprintf(message, message_size, "thrust: %s", e.what());
    return KNNWB_KERNELS_ERROR;
  } catch (...) {
    snprintf(message, message_size, "unexpected C++ exception");
    return KNNWB_KERNELS_ERROR;
  }
}
