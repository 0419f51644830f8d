/*
 * The selection of a fresh tile (TileGeom.fresh: rows that have seen no pair yet, their diagonal
 * tile or a panel's first; row pass only) in one kernel. A block per row holds the row's line as
 * sortable keys in shared memory, with the row's list and pending candidates in front, finds the
 * kc-th smallest key by a radix select over shared memory (four passes of 8 bits) and writes the
 * kc best as the row's new list, in the order of their places (list, candidates, then the line's
 * columns): equal keys at the boundary are taken first-placed first, so the list does not depend
 * on the order in which threads ran.
 *
 * Why: with +inf thresholds every pair passes a filter, so tile_select.cu filters such a tile in
 * column stages of doubling width, a filter and a merge launched over all the tile's rows each
 * time (about 20 launches a tile). One read of the tile and shared memory instead.
 */
#include "tile_common.cuh"

#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace knnwb_cuda
{
namespace
{

constexpr int kFreshThreads = 512;
constexpr int kFreshWarps = kFreshThreads / 32;
constexpr uint32_t kFreshEmpty = 0xffffffffu;
/* the line's sample whose kc-th key bounds the row's (about this many columns), and the room for
 * the keys under that bound: with a line of 16,384 columns three blocks fit an SM's 228 KB */
constexpr int kFreshSample = 2048;
constexpr int kFreshRoom = 1024;

struct FreshShared {
  unsigned hist[256];
  unsigned warp_total[kFreshWarps];
  unsigned warp_equal[kFreshWarps];
  unsigned digit;
  unsigned kprime;
  unsigned valid;
  unsigned n_room;
};

/* Exclusive prefix sums over the block of each thread's (less, equal) counts, in thread order;
 * every thread calls it. *total_less: the block's sum of less. */
__device__ __forceinline__ void block_scan_pair(int less, int equal, FreshShared &sh,
                                                int *less_before, int *equal_before,
                                                int *total_less)
{
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int incl_less = warp_inclusive_sum(less), incl_equal = warp_inclusive_sum(equal);
  if (lane == 31) {
    sh.warp_total[warp] = (unsigned)incl_less;
    sh.warp_equal[warp] = (unsigned)incl_equal;
  }
  __syncthreads();
  int before_less = incl_less - less, before_equal = incl_equal - equal, all_less = 0;
  for (int w = 0; w < kFreshWarps; w++) {
    if (w < warp) {
      before_less += (int)sh.warp_total[w];
      before_equal += (int)sh.warp_equal[w];
    }
    all_less += (int)sh.warp_total[w];
  }
  *less_before = before_less;
  *equal_before = before_equal;
  *total_less = all_less;
  __syncthreads();
}

/*
 * The key of the kprime-th smallest (1-based) of keys[0], keys[stride], ... (n keys), a digit per
 * pass; on return sh.kprime is how many keys equal to it belong to the kprime smallest. Every
 * thread calls it.
 */
__device__ uint32_t fresh_pivot(const uint32_t *keys, int n, int stride, unsigned kprime,
                                FreshShared &sh)
{
  if (threadIdx.x == 0)
    sh.kprime = kprime;
  uint32_t prefix = 0;
  for (int pass = 0; pass < 4; pass++) {
    const int shift = 24 - 8 * pass;
    const uint32_t high_mask = pass == 0 ? 0u : (0xffffffffu << (32 - 8 * pass));
    if (threadIdx.x < 256)
      sh.hist[threadIdx.x] = 0;
    __syncthreads();
    /* every lane of a warp runs the same iterations (histogram_add's warp intrinsics) */
    for (int base = 0; base < n; base += kFreshThreads) {
      const int t = base + (int)threadIdx.x;
      const uint32_t key = t < n ? keys[(size_t)t * stride] : 0u;
      histogram_add(sh.hist, t < n && (key & high_mask) == prefix, (key >> shift) & 0xffu);
    }
    __syncthreads();
    /* the block scans the 256 bins; the bin holding the kprime-th key is the next digit */
    const unsigned h = threadIdx.x < 256 ? sh.hist[threadIdx.x] : 0u;
    const unsigned incl = (unsigned)warp_inclusive_sum((int)h);
    if ((threadIdx.x & 31) == 31)
      sh.warp_total[threadIdx.x >> 5] = incl;
    __syncthreads();
    unsigned before = incl - h;
    for (int w = 0; w < (int)(threadIdx.x >> 5); w++)
      before += sh.warp_total[w];
    const unsigned want = sh.kprime;
    __syncthreads();
    if (before < want && want <= before + h) {
      sh.digit = threadIdx.x;
      sh.kprime = want - before;
    }
    __syncthreads();
    prefix |= sh.digit << shift;
  }
  return prefix;
}

/* The key of line element t (product v) of a row: its score's, or kFreshEmpty where the pair may
 * not enter (the row itself, an invalid reference, the row's own group), as the filter decides:
 * only a score strictly below the row's threshold, never NaN. */
__device__ __forceinline__ uint32_t line_key(const TileGeom &g, float v, int t, int self, int group,
                                             float thr_row)
{
  const int cand = g.col_global0 + t;
  const float s = score_of(g.kind, v, g.kind == KNNWB_SCORE_L2 ? g.sqnorms[cand] : 0.0f);
  const bool ok = cand != self && !(g.invalid && g.invalid[cand]) &&
                  !(g.row_group && g.col_group[cand] == group) && s < thr_row;
  return ok ? float_key(s) : kFreshEmpty;
}

/*
 * Copies the keys of keys[0, n) at most bound to room (kFreshRoom keys), in any order; returns
 * how many there are (more than kFreshRoom: room holds only some). Every thread calls it.
 */
__device__ int keys_under(const uint32_t *keys, int n, uint32_t bound, uint32_t *room,
                          FreshShared &sh)
{
  if (threadIdx.x == 0)
    sh.n_room = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  for (int base = 0; base < n; base += kFreshThreads) {
    const int t = base + (int)threadIdx.x;
    const uint32_t key = t < n ? keys[t] : kFreshEmpty;
    const bool under = t < n && key <= bound;
    const unsigned ballot = __ballot_sync(kFullMask, under);
    int first = 0;
    if (lane == 0 && ballot)
      first = (int)atomicAdd(&sh.n_room, (unsigned)__popc(ballot));
    first = __shfl_sync(kFullMask, first, 0);
    const int at = first + __popc(ballot & ((1u << lane) - 1u));
    if (under && at < kFreshRoom)
      room[at] = key;
  }
  __syncthreads();
  return (int)sh.n_room;
}

/*
 * The kc-th smallest of keys[0, line0 + n_cols) (the list's and candidates' keys, then the line's
 * from line0),
 * with sh.kprime as fresh_pivot leaves it. The kc-th key of every step-th column bounds it from
 * above (a subset's kc-th is never smaller), so the radix select runs on the keys under that
 * bound alone, about kc * step of them, instead of all; where they do not fit room, on all.
 */
__device__ uint32_t row_pivot(const uint32_t *keys, int line0, int n_cols, int kc, uint32_t *room,
                              FreshShared &sh)
{
  const int n = line0 + n_cols;
  const int step = n_cols / kFreshSample;
  if (step >= 4 && 2 * kc * step <= kFreshRoom) {
    const uint32_t bound = fresh_pivot(keys + line0, n_cols / step, step, (unsigned)kc, sh);
    if (bound != kFreshEmpty) {
      const int under = keys_under(keys, n, bound, room, sh);
      if (under <= kFreshRoom)
        return fresh_pivot(room, under, 1, (unsigned)kc, sh);
    }
  }
  return fresh_pivot(keys, n, 1, (unsigned)kc, sh);
}

/*
 * Grid: one block of kFreshThreads per row of the tile; dynamic shared memory: the keys of the
 * list and candidate slots (kc + cap, rounded up to 4) and of the line (n_cols), the slots'
 * indices, kFreshRoom keys. Reads the row's list, its pending candidates (at
 * most cap: a fresh row has not overflowed) and its line; writes its list, threshold and count.
 */
/* three blocks an SM, as many as the shared memory of a line of 16,384 columns allows: at most 42
 * registers a thread (without the bound the compiler took 40 and spilled) */
__global__ void __launch_bounds__(kFreshThreads, 3) fresh_kernel(SelectState st, TileGeom g)
{
  extern __shared__ __align__(16) uint32_t fresh_shared[];
  __shared__ FreshShared sh;
  const int held = st.kc + st.cap;   /* list and candidate slots before the line */
  const int line0 = (held + 3) & ~3; /* the line's keys 16-byte aligned, empty keys between */
  const int n = line0 + g.n_cols;
  uint32_t *keys = fresh_shared;
  int *held_index = reinterpret_cast<int *>(fresh_shared + n);
  uint32_t *room = fresh_shared + n + held;
  const int i = blockIdx.x, row = g.row_state0 + i;
  const float thr_row = st.thr[row];
  const int buffered = min(st.count[row], st.cap);
  if (threadIdx.x == 0) {
    sh.kprime = (unsigned)st.kc;
    sh.valid = 0;
  }
  __syncthreads();

  int valid = 0;
  for (int t = threadIdx.x; t < held; t += kFreshThreads) {
    int idx = -1;
    float score = 0.0f;
    if (t < st.kc) {
      idx = st.list_index[(size_t)row * st.kc + t];
      score = st.list_score[(size_t)row * st.kc + t];
    } else if (t - st.kc < buffered) {
      idx = st.cand_index[(size_t)row * st.cap + (t - st.kc)];
      score = st.cand_score[(size_t)row * st.cap + (t - st.kc)];
    }
    keys[t] = idx < 0 ? kFreshEmpty : float_key(score);
    held_index[t] = idx;
    valid += idx >= 0;
  }
  const size_t elem = g.half_tile ? sizeof(__half) : sizeof(float);
  const void *line = static_cast<const char *>(g.tile) + (size_t)i * g.ld * elem;
  const int self = g.self ? g.row_global0 + i : -1;
  const int group = g.row_group ? g.row_group[g.row_global0 + i] : 0;
  uint32_t *line_keys = keys + line0;
  for (int t = held + threadIdx.x; t < line0; t += kFreshThreads)
    keys[t] = kFreshEmpty;
  int vectored = 0; /* columns read 8 at a time */
  if (g.half_tile && g.ld % 8 == 0 && reinterpret_cast<uintptr_t>(g.tile) % 16 == 0) {
    /* 8 halves a load, every load of the thread in flight at once: the line is read in about one
     * memory latency, where one half a load waited for memory once per 4 */
    const uint4 *vectors = static_cast<const uint4 *>(line);
    const int n_vectors = g.n_cols / 8;
#pragma unroll 4
    for (int v = threadIdx.x; v < n_vectors; v += kFreshThreads) {
      const uint4 raw = __ldg(vectors + v);
      const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
      uint32_t key[8];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        __half2 pair;
        memcpy(&pair, &words[u], sizeof pair);
        const float2 f = __half22float2(pair);
        key[2 * u] = line_key(g, f.x * g.tile_scale, 8 * v + 2 * u, self, group, thr_row);
        key[2 * u + 1] = line_key(g, f.y * g.tile_scale, 8 * v + 2 * u + 1, self, group, thr_row);
      }
#pragma unroll
      for (int u = 0; u < 8; u++)
        valid += key[u] != kFreshEmpty;
      reinterpret_cast<uint4 *>(line_keys)[2 * v] = make_uint4(key[0], key[1], key[2], key[3]);
      reinterpret_cast<uint4 *>(line_keys)[2 * v + 1] = make_uint4(key[4], key[5], key[6], key[7]);
    }
    vectored = 8 * n_vectors;
  }
  for (int t = vectored + threadIdx.x; t < g.n_cols; t += kFreshThreads) {
    const float v = tile_value(line, g.half_tile != 0, g.tile_scale, (size_t)t);
    line_keys[t] = line_key(g, v, t, self, group, thr_row);
    valid += line_keys[t] != kFreshEmpty;
  }
  atomicAdd(&sh.valid, (unsigned)valid);
  __syncthreads();

  /* fewer than kc pairs: every one is taken and the list keeps empty slots */
  const bool full = sh.valid >= (unsigned)st.kc;
  const uint32_t pivot = full ? row_pivot(keys, line0, g.n_cols, st.kc, room, sh) : kFreshEmpty;
  const int take_equal = full ? (int)sh.kprime : 0;

  /* each thread's places form a run, so that the output keeps the places' order */
  const int per = (n + kFreshThreads - 1) / kFreshThreads;
  const int t0 = min((int)threadIdx.x * per, n), t1 = min(t0 + per, n);
  int less = 0, equal = 0;
  for (int t = t0; t < t1; t++) {
    less += keys[t] < pivot;
    equal += keys[t] == pivot;
  }
  int out, equal_before, total_less;
  block_scan_pair(less, equal, sh, &out, &equal_before, &total_less);
  float *list_score = st.list_score + (size_t)row * st.kc;
  int *list_index = st.list_index + (size_t)row * st.kc;
  const int taken = total_less + take_equal;
  /* a key's slot: the keys taken before its place, the smaller ones and the equal ones taken */
  for (int t = t0; t < t1; t++) {
    const uint32_t key = keys[t];
    int slot = -1;
    if (key < pivot)
      slot = out++ + min(equal_before, take_equal);
    else if (key == pivot && equal_before < take_equal)
      slot = out + equal_before;
    equal_before += key == pivot;
    if (slot < 0)
      continue;
    list_index[slot] = t < held ? held_index[t] : g.col_global0 + (t - line0);
    list_score[slot] = key_float(key);
  }
  const float inf = __int_as_float(0x7f800000);
  for (int t = taken + (int)threadIdx.x; t < st.kc; t += kFreshThreads) {
    list_index[t] = -1;
    list_score[t] = inf;
  }
  if (threadIdx.x == 0) {
    /* min: a row may hold a bound imported from another GPU's lists, never loosened */
    st.thr[row] = fminf(thr_row, full ? key_float(pivot) : inf);
    st.count[row] = 0;
    if (st.stats) {
      atomicAdd(&st.stats[0], (unsigned long long)taken);
      atomicAdd(&st.stats[1], 1ull);
    }
  }
}

/* KNNWB_CUDA_FRESH=stages: fresh tiles filtered in column stages (to compare). Read at every
 * fresh tile (a getenv, no cache), so that a test can compare the two in one process. */
bool fresh_stages_only(void)
{
  const char *v = getenv("KNNWB_CUDA_FRESH");
  return v != nullptr && strcmp(v, "stages") == 0;
}

size_t fresh_shared_bytes(const SelectState &state, const TileGeom &geom)
{
  const size_t held = (size_t)state.kc + (size_t)state.cap;
  const size_t line0 = (held + 3) & ~(size_t)3;
  return (line0 + (size_t)geom.n_cols + kFreshRoom) * sizeof(uint32_t) + held * sizeof(int);
}

} // namespace

bool fresh_select_fits(const SelectState &state, const TileGeom &geom)
{
  if (fresh_stages_only() || !geom.tile || !geom.fresh || geom.do_cols)
    return false;
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return fresh_shared_bytes(state, geom) + sizeof(FreshShared) <= (size_t)optin;
}

cudaError_t launch_fresh_select(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  const size_t shared = fresh_shared_bytes(state, geom);
  cudaError_t err =
      cudaFuncSetAttribute(fresh_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared);
  if (err != cudaSuccess)
    return err;
  fresh_kernel<<<geom.n_rows, kFreshThreads, shared, stream>>>(state, geom);
  return cudaGetLastError();
}

} // namespace knnwb_cuda
