/*
 * The first tile of fresh rows (a symmetric run's diagonal tile, a panel's first tile; row pass
 * only) in one kernel: the block that owns a row finds the kc best of its valid products with a
 * radix select over their sortable keys and writes them straight into the row's list, with the
 * threshold the merge would set.
 *
 * Why: with +inf thresholds every product of such a tile passes, so the filter-and-merge path
 * reads the tile in column stages of doubling width, merging every row after each stage (about 8
 * stages of 4 launches). That took 1.12 ms a diagonal tile on one H200 (1,533,876 x 128 Pearson,
 * kc = 40) against 0.12 ms for an ordinary tile, and 2.3 ms in the sub-searches of a partitioned
 * run, where a row sees only 25 tiles and the diagonal ones were a quarter of the selection time.
 *
 * Not the default (KNNWB_CUDA_FRESH=kernel chooses it): measured on one H200 (fresh_check.sh), it
 * takes 0.42 ms a diagonal tile against 1.12 ms, with the same lists, but the ordinary tiles of the
 * same run then take 0.137-0.139 ms against 0.121-0.122 ms, so the select step is slower (2.87 s
 * against 2.71 s; d = 295: 4.18 s against 3.78 s). With serial tiles (KNNWB_CUDA_SERIAL_TILES=1:
 * no overlap with the GEMMs) the ordinary tiles slow down as much (0.092-0.095 ms against 0.078
 * ms), so it is not the overlap; why they do is not explained yet.
 *
 * The state afterwards is what the merge leaves: the list holds the kc lowest scores of the row's
 * valid pairs (list order is free, select_internal.h), thr[row] is the kc-th of them (when there
 * are kc; else it stays), count[row] is 0. The scores are the filter's, bit for bit (score_of on
 * tile_value), and a pair is valid exactly when the filter's row pass could append it: inside the
 * tile, not an invalid reference row, not the row itself, not of the row's group, and a score
 * below +inf. Of pairs tied at the kc-th score the first in a fixed order are kept (the merge
 * keeps the first in buffer order); the certificate does not depend on which.
 */
#include "tile_common.cuh"

#include <stdlib.h>
#include <string.h>

namespace knnwb_cuda
{
namespace
{

constexpr int kFreshThreads = 256;
constexpr int kFreshWarps = kFreshThreads / 32;
constexpr int kFreshPerThread = 32; /* a line of up to 8,192 products in registers */
constexpr uint32_t kNoKey = 0xffffffffu;

struct FreshShared {
  unsigned hist[256];
  unsigned warp_sum[kFreshWarps];
  unsigned digit, below;
  uint32_t lowest, highest;
};

/* Exclusive prefix of v over the block's threads in thread order, and the total; every thread of
 * the block calls it (two barriers). */
__device__ __forceinline__ unsigned block_exclusive(unsigned v, FreshShared &sh, unsigned *total)
{
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned incl = (unsigned)warp_inclusive_sum((int)v);
  if (lane == 31)
    sh.warp_sum[warp] = incl;
  __syncthreads();
  unsigned before = 0, all = 0;
#pragma unroll
  for (int w = 0; w < kFreshWarps; w++) {
    before += w < warp ? sh.warp_sum[w] : 0u;
    all += sh.warp_sum[w];
  }
  __syncthreads(); /* warp_sum may be reused */
  *total = all;
  return before + incl - v;
}

/*
 * The key of the rank-th lowest (1-based) of the block's valid keys, by 8-bit digit passes from
 * the highest bit where the lowest and highest valid key differ (the bits above are common: a
 * first pass over them would put every key in one bin); *tied_taken: how many keys equal to it
 * belong to the rank lowest. Needs 1 <= rank < valid count.
 */
__device__ __forceinline__ uint32_t block_radix_select(const uint32_t (&key)[kFreshPerThread],
                                                       unsigned rank, FreshShared &sh,
                                                       unsigned *tied_taken)
{
  uint32_t lowest = kNoKey, highest = 0;
#pragma unroll
  for (int u = 0; u < kFreshPerThread; u++)
    if (key[u] != kNoKey) {
      lowest = min(lowest, key[u]);
      highest = max(highest, key[u]);
    }
  lowest = __reduce_min_sync(kFullMask, lowest);
  highest = __reduce_max_sync(kFullMask, highest);
  if ((threadIdx.x & 31) == 0) {
    atomicMin(&sh.lowest, lowest);
    atomicMax(&sh.highest, highest);
  }
  __syncthreads();
  const uint32_t differ = sh.lowest ^ sh.highest; /* not 0: more than one distinct valid key... */
  /* ...or all equal (then any window finds them) */
  const int top = differ ? 31 - __clz(differ) : 7;
  uint32_t prefix = top >= 31 ? 0u : sh.lowest & ~((2u << top) - 1u);
  uint32_t mask = top >= 31 ? 0u : ~((2u << top) - 1u);
  for (int shift = top - 7;; shift -= 8) {
    const int s = shift > 0 ? shift : 0; /* the last window may overlap the one before */
    sh.hist[threadIdx.x] = 0;
    __syncthreads();
    /* plain shared atomics: a warp's keys are 32 columns of one line, spread over the bins
     * (warp-aggregated adds with __match_any_sync made the kernel 0.69 ms a tile, ncu) */
#pragma unroll
    for (int u = 0; u < kFreshPerThread; u++)
      if (key[u] != kNoKey && (key[u] & mask) == prefix)
        atomicAdd(&sh.hist[(key[u] >> s) & 255u], 1u);
    __syncthreads();
    const unsigned count = sh.hist[threadIdx.x];
    unsigned total;
    const unsigned before = block_exclusive(count, sh, &total);
    if (before < rank && before + count >= rank) {
      sh.digit = threadIdx.x;
      sh.below = before;
    }
    __syncthreads();
    prefix = (prefix & ~(255u << s)) | (sh.digit << s);
    mask |= 255u << s;
    rank -= sh.below;
    __syncthreads(); /* digit and below are rewritten by the next pass */
    if (s == 0)
      break;
  }
  *tied_taken = rank;
  return prefix;
}

template <int kKind, bool kGroups>
__global__ void __launch_bounds__(kFreshThreads)
    fresh_select_kernel(const __grid_constant__ SelectState st, const __grid_constant__ TileGeom g)
{
  __shared__ FreshShared sh;
  if (threadIdx.x == 0) {
    sh.lowest = kNoKey;
    sh.highest = 0;
  }
  const int i = blockIdx.x, row = g.row_state0 + i, global_row = g.row_global0 + i;
  const int row_group = kGroups ? g.row_group[global_row] : -1;
  const float inf = __int_as_float(0x7f800000);
  uint32_t key[kFreshPerThread];
  unsigned valid = 0;
#pragma unroll
  for (int u = 0; u < kFreshPerThread; u++) {
    const int j = u * kFreshThreads + (int)threadIdx.x, cand = g.col_global0 + j;
    key[u] = kNoKey;
    if (j >= g.n_cols || (g.invalid && g.invalid[cand]) || (g.self && cand == global_row) ||
        (kGroups && g.col_group[cand] == row_group))
      continue;
    const float v = tile_value(g.tile, g.half_tile, g.tile_scale, (size_t)i * g.ld + j);
    const float s = score_of(kKind, v, kKind == KNNWB_SCORE_L2 ? g.sqnorms[cand] : 0.0f);
    if (s < inf) { /* what the filter appends under a +inf threshold (never NaN) */
      key[u] = float_key(s);
      valid++;
    }
  }
  unsigned n_valid;
  (void)block_exclusive(valid, sh, &n_valid);
  const unsigned kc = (unsigned)st.kc;
  /* the kc lowest: every key below the kc-th, and of the keys equal to it the first `tied` in
   * column order; all of them when there are at most kc */
  uint32_t kth = kNoKey;
  unsigned tied = 0;
  if (n_valid > kc)
    kth = block_radix_select(key, kc, sh, &tied);
  unsigned less = 0, equal = 0;
#pragma unroll
  for (int u = 0; u < kFreshPerThread; u++) {
    less += key[u] != kNoKey && key[u] < kth;
    equal += key[u] != kNoKey && key[u] == kth;
  }
  /* both prefixes in one scan: each count fits 16 bits (at most 8,192 a line) */
  unsigned totals;
  const unsigned before = block_exclusive(less | equal << 16, sh, &totals);
  const unsigned n_less = totals & 0xffffu;
  unsigned slot = before & 0xffffu, tie = n_less + (before >> 16);
  float *list_score = st.list_score + (size_t)row * st.kc;
  int *list_index = st.list_index + (size_t)row * st.kc;
#pragma unroll
  for (int u = 0; u < kFreshPerThread; u++) {
    const int column = g.col_global0 + u * kFreshThreads + (int)threadIdx.x;
    if (key[u] != kNoKey && key[u] < kth) {
      list_score[slot] = key_float(key[u]);
      list_index[slot++] = column;
    } else if (key[u] != kNoKey && key[u] == kth) {
      /* ties at the kc-th in a fixed order (thread, then u): the first `tied` of them */
      if (tie < n_less + tied) {
        list_score[tie] = key_float(kth);
        list_index[tie] = column;
      }
      tie++;
    }
  }
  /* slots past the row's valid pairs stay empty, as the merge leaves them */
  const unsigned filled = n_valid > kc ? kc : n_valid;
  for (unsigned t = filled + threadIdx.x; t < kc; t += kFreshThreads) {
    list_score[t] = inf;
    list_index[t] = -1;
  }
  __syncthreads(); /* every slot written before thread 0 reads them (n_valid == kc) */
  if (threadIdx.x == 0) {
    if (n_valid >= kc) {
      float worst = key_float(kth);
      if (n_valid == kc) { /* every valid pair is in: the kc-th is the largest of them */
        worst = -inf;
        for (unsigned t = 0; t < kc; t++)
          worst = fmaxf(worst, list_score[t]);
      }
      st.thr[row] = fminf(st.thr[row], worst); /* as the merge: never loosened */
    }
    st.count[row] = 0;
    if (st.stats)
      atomicAdd(&st.stats[1], 1ull);
  }
}

template <bool kGroups>
void launch_fresh_kind(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  const dim3 grid((unsigned)geom.n_rows);
  switch (geom.kind) {
  case KNNWB_SCORE_DOT:
    fresh_select_kernel<KNNWB_SCORE_DOT, kGroups><<<grid, kFreshThreads, 0, stream>>>(state, geom);
    break;
  case KNNWB_SCORE_ABS_DOT:
    fresh_select_kernel<KNNWB_SCORE_ABS_DOT, kGroups>
        <<<grid, kFreshThreads, 0, stream>>>(state, geom);
    break;
  case KNNWB_SCORE_L2:
    fresh_select_kernel<KNNWB_SCORE_L2, kGroups><<<grid, kFreshThreads, 0, stream>>>(state, geom);
    break;
  default:
    fresh_select_kernel<KNNWB_SCORE_L1, kGroups><<<grid, kFreshThreads, 0, stream>>>(state, geom);
    break;
  }
}

} // namespace

bool fresh_select_applies(const TileGeom &geom)
{
  static int chosen = -1; /* KNNWB_CUDA_FRESH=kernel: this kernel; else the staged path */
  if (chosen < 0) {
    const char *v = getenv("KNNWB_CUDA_FRESH");
    chosen = v != nullptr && strcmp(v, "kernel") == 0;
  }
  return chosen && geom.fresh && !geom.do_cols && geom.tile != nullptr && geom.n_rows > 0 &&
         geom.n_cols <= kFreshThreads * kFreshPerThread;
}

cudaError_t launch_fresh_select(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (geom.row_group)
    launch_fresh_kind<true>(state, geom, stream);
  else
    launch_fresh_kind<false>(state, geom, stream);
  return cudaGetLastError();
}

} // namespace knnwb_cuda
