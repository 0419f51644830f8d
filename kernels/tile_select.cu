/*
 * Per-row k-selection across tiles, kept on the device (see select_internal.h for the state).
 *
 * A tile goes through the filter (tile_filter.cu), which appends the pairs that beat a row's
 * threshold to the row's candidate buffer; merge_kernel then runs, one block per row that crossed
 * lazy_limit, an exact radix select (4 passes of 8 bits over order-preserving float keys) of list +
 * candidates: it works for any kc whose list fits in shared memory (tens of thousands), unlike
 * warp-register heaps (FAISS: 2048). Fresh tiles are filtered in stages, each merged a warp per
 * row.
 */
#include "tile_common.cuh"

#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace knnwb_cuda
{
namespace
{

constexpr int kMergeThreads = 256; /* one thread per radix bin */
constexpr uint32_t kEmptyKey = 0xffffffffu;

/* One line of a tile as seen from a state row (tile row or tile column). */
struct Line {
  const void *base; /* tile element of the line's first candidate */
  bool half_tile;
  float tile_scale;
  size_t stride;
  int length;
  int cand0;
  int self_index;            /* candidate equal to the row itself, or -1 */
  int group;                 /* the state row's group (with cand_group) */
  const int32_t *cand_group; /* candidates' groups by global index, or NULL */
  /* a fused tile's line (base NULL): the state row's FP16 row, the candidates' rows (dpad halves
   * each) and the products' scale */
  const __half *own_row;
  const __half *cand_rows;
  int dpad;
  float scale;
  /* a fused tile's line: its index in the tile, and whether it is a column */
  int fused_line = -1;
  bool fused_column = false;
};

/*
 * Product t of a line: read from the tile, or for a fused tile recomputed from the FP16 rows with
 * float32 accumulation (the screen's arithmetic in another order: within the same bound). Only an
 * overflowed line is read this way, rarely: O(dpad) per element.
 */
__device__ __forceinline__ float line_value(const Line &line, int t)
{
  if (line.base)
    return tile_value(line.base, line.half_tile, line.tile_scale, (size_t)t * line.stride);
  const __half2 *a = reinterpret_cast<const __half2 *>(line.own_row);
  const __half2 *b = reinterpret_cast<const __half2 *>(line.cand_rows + (size_t)t * line.dpad);
  float sum = 0.0f;
  for (int k = 0; k < line.dpad / 2; k++) {
    const float2 x = __half22float2(a[k]), y = __half22float2(__ldg(b + k));
    sum = fmaf(x.x, y.x, sum);
    sum = fmaf(x.y, y.y, sum);
  }
  return sum * line.scale;
}

static_assert(kMergeThreads == 256, "one thread a radix bin (RadixShared)");

struct MergeShared {
  RadixShared radix;
  int n_scratch;
  int n_out;
  int n_eq;
  uint32_t small_key[kMergeThreads]; /* merge_row_small */
  int small_index[kMergeThreads];
};

/* Entry t of row's merge input, the m = kc + buffered candidates: list slots first (empty ones,
 * and t >= m, give the empty key and index -1), then the candidate buffer. */
__device__ __forceinline__ void merge_entry(const SelectState &st, int row, int t, int m,
                                            uint32_t *key, int *idx)
{
  *key = kEmptyKey;
  *idx = -1;
  if (t < st.kc) {
    *idx = st.list_index[(size_t)row * st.kc + t];
    *key = *idx < 0 ? kEmptyKey : float_key(st.list_score[(size_t)row * st.kc + t]);
  } else if (t < m) {
    const size_t at = (size_t)row * st.cap + (t - st.kc);
    *idx = st.cand_index[at];
    *key = float_key(st.cand_score[at]);
  }
}

/*
 * Merges one state row whose list and candidates fit the block (kc + n_buffer <= 256, no overflowed
 * line): each element's rank is counted directly (ties by position), and the kc lowest go to their
 * rank's slot. A few hundred shared-memory compares per thread instead of the radix select's four
 * passes of histograms and block scans; most merges are of this size for the usual k (k + margin
 * <= 85 with the default candidate buffers). Every thread calls it with the same arguments.
 */
__device__ void merge_row_small(const SelectState &st, int row, int n_buffer, float thr_row,
                                MergeShared &sh)
{
  const float inf = __int_as_float(0x7f800000);
  const int m = st.kc + n_buffer, t = threadIdx.x;
  uint32_t key;
  int idx;
  merge_entry(st, row, t, m, &key, &idx);
  if (t < m) {
    sh.small_key[t] = key;
    sh.small_index[t] = idx;
  }
  __syncthreads(); /* every element read before any list slot is rewritten */
  if (t < m) {
    int rank = 0;
    for (int u = 0; u < m; u++) {
      const uint32_t other = sh.small_key[u];
      rank += other < key || (other == key && u < t);
    }
    if (rank < st.kc) {
      const float score = idx < 0 ? inf : key_float(key);
      st.list_index[(size_t)row * st.kc + rank] = idx;
      st.list_score[(size_t)row * st.kc + rank] = score;
      if (rank == st.kc - 1)
        st.thr[row] = fminf(thr_row, score); /* as merge_row: never loosened */
    }
  }
  if (t == 0)
    st.count[row] = 0;
  __syncthreads();
}

/*
 * Visits every element (key, index) of the merge: the list, the candidate buffer (minus entries of
 * the overflowed tile line, which the scratch holds in full) and the compacted line. All threads
 * run the same number of iterations (warp intrinsics inside fn); inactive ones get active = false.
 */
template <typename Fn>
__device__ __forceinline__ void
for_each_element(const SelectState &st, int row, int n_buffer, bool overflow, const Line &line,
                 const uint32_t *scratch_key, const int *scratch_index, int n_scratch, Fn fn)
{
  const float *ls = st.list_score + (size_t)row * st.kc;
  const int *li = st.list_index + (size_t)row * st.kc;
  for (int base = 0; base < st.kc; base += kMergeThreads) {
    int t = base + threadIdx.x;
    bool act = t < st.kc;
    int idx = act ? li[t] : -1;
    uint32_t key = act ? (idx < 0 ? kEmptyKey : float_key(ls[t])) : 0;
    fn(act, key, idx);
  }
  const float *cs = st.cand_score + (size_t)row * st.cap;
  const int *ci = st.cand_index + (size_t)row * st.cap;
  for (int base = 0; base < n_buffer; base += kMergeThreads) {
    int t = base + threadIdx.x;
    bool act = t < n_buffer;
    int idx = act ? ci[t] : -1;
    if (overflow && idx >= line.cand0 && idx < line.cand0 + line.length)
      act = false;
    uint32_t key = act ? float_key(cs[t]) : 0;
    fn(act, key, idx);
  }
  for (int base = 0; base < n_scratch; base += kMergeThreads) {
    int t = base + threadIdx.x;
    bool act = t < n_scratch;
    fn(act, act ? scratch_key[t] : 0, act ? scratch_index[t] : -1);
  }
}

/* Puts (score, cand) in the block's scratch where ok (sh.n_scratch counts them): one atomic per
 * warp. Every thread of the warp calls it. */
__device__ __forceinline__ void keep_in_scratch(bool ok, float score, int cand, MergeShared &sh,
                                                uint32_t *scratch_key, int *scratch_index)
{
  const unsigned ballot = __ballot_sync(kFullMask, ok);
  const int lane = threadIdx.x & 31;
  int warp_base = 0;
  if (lane == 0 && ballot)
    warp_base = atomicAdd(&sh.n_scratch, __popc(ballot));
  warp_base = __shfl_sync(kFullMask, warp_base, 0);
  if (ok) {
    const int pos = warp_base + __popc(ballot & ((1u << lane) - 1u));
    scratch_key[pos] = float_key(score);
    scratch_index[pos] = cand;
  }
}

/*
 * Appends the pairs of line that beat thr to the block's scratch (sh.n_scratch counts them); every
 * thread of the block calls it. Warp-aggregated: one atomic per warp and chunk.
 */
__device__ __forceinline__ void rescan_line(const TileGeom &g, const Line &line, float thr,
                                            MergeShared &sh, uint32_t *scratch_key,
                                            int *scratch_index)
{
  for (int base = 0; base < line.length; base += kMergeThreads) {
    int t = base + threadIdx.x;
    bool ok = false;
    float s = 0.0f;
    int cand = line.cand0 + t;
    if (t < line.length && cand != line.self_index && !(g.invalid && g.invalid[cand]) &&
        !(line.cand_group && line.cand_group[cand] == line.group)) {
      float sq = g.kind == KNNWB_SCORE_L2 ? g.sqnorms[cand] : 0.0f;
      s = score_of(g.kind, line_value(line, t), sq);
      ok = s < thr;
    }
    keep_in_scratch(ok, s, cand, sh, scratch_key, scratch_index);
  }
}

/*
 * As rescan_line for a fused tile's line that was not lost: its pairs that beat thr, taken from the
 * kept pairs of the blocks along the line (TileGeom.pairs; the fused kernel already excluded the
 * self pair and invalid references). Every thread of the block calls it.
 */
__device__ __forceinline__ void gather_pairs(const TileGeom &g, const Line &line, float thr,
                                             MergeShared &sh, uint32_t *scratch_key,
                                             int *scratch_index)
{
  const int blocks_x = (g.n_cols + kFusedPairBlock - 1) / kFusedPairBlock;
  const int blocks_y = (g.n_rows + kFusedPairBlock - 1) / kFusedPairBlock;
  const int along = line.fused_column ? blocks_y : blocks_x;
  const int fixed = line.fused_line / kFusedPairBlock;
  const int offset = line.fused_line % kFusedPairBlock;
  for (int k = 0; k < along; k++) {
    const int b = line.fused_column ? k * blocks_x + fixed : fixed * blocks_x + k;
    const int n = g.pair_index[2 + 2 * b];
    const uint2 *kept = g.pairs + g.pair_index[1 + 2 * b];
    for (int base = 0; base < n; base += kMergeThreads) {
      const int t = base + threadIdx.x;
      bool ok = false;
      float score = 0.0f;
      int cand = -1;
      if (t < n) {
        const uint2 pair = kept[t];
        if (fused_pair_column(pair.x) == line.fused_column && fused_pair_line(pair.x) == offset) {
          score = __uint_as_float(pair.y);
          cand = line.cand0 + k * kFusedPairBlock + fused_pair_other(pair.x);
          ok = score < thr;
        }
      }
      keep_in_scratch(ok, score, cand, sh, scratch_key, scratch_index);
    }
  }
}

/*
 * The key of the merge's sh.radix.kprime-th smallest element (1-based); on return sh.radix.kprime
 * is how many elements equal to it belong to the smallest (radix_pivot). Every thread of the block
 * calls it with the same arguments.
 */
__device__ __forceinline__ uint32_t select_pivot(const SelectState &st, int row, int n_buffer,
                                                 bool overflow, const Line &line,
                                                 const uint32_t *scratch_key,
                                                 const int *scratch_index, int n_scratch,
                                                 MergeShared &sh)
{
  return radix_pivot(sh.radix, [&](uint32_t prefix, uint32_t high_mask, int shift) {
    for_each_element(st, row, n_buffer, overflow, line, scratch_key, scratch_index, n_scratch,
                     [&](bool act, uint32_t key, int) {
                       bool match = act && (key & high_mask) == prefix;
                       histogram_add(sh.radix.hist, match, (key >> shift) & 0xffu);
                     });
  });
}

/* Merges one state row; every thread of the block calls it with the same arguments. */
__device__ void merge_row(const SelectState &st, const TileGeom &g, int row, bool has_line,
                          const Line &line, MergeShared &sh, uint32_t *out_key, int *out_index)
{
  const float inf = __int_as_float(0x7f800000);
  /* a fused tile's lost line: launch_fused_pairs queued it without appending any of its pairs */
  const bool lost =
      has_line && line.fused_line >= 0 &&
      g.lost[line.fused_column ? g.ld + (size_t)line.fused_line : (size_t)line.fused_line];
  const int count = st.count[row];
  const float thr_row = st.thr[row]; /* written below by thread 0 only after the block's barriers */
  const bool overflow = has_line && (lost || count > st.cap);
  const int n_buffer = count < st.cap ? count : st.cap;
  uint32_t *scratch_key = st.scratch_key + (size_t)blockIdx.x * st.scratch_len;
  int *scratch_index = st.scratch_index + (size_t)blockIdx.x * st.scratch_len;
  if (st.stats && threadIdx.x == 0) {
    atomicAdd(&st.stats[1], 1ull);
    if (overflow)
      atomicAdd(&st.stats[2], 1ull);
  }
  if (!overflow && st.kc + n_buffer <= kMergeThreads) {
    merge_row_small(st, row, n_buffer, thr_row, sh);
    return;
  }

  if (threadIdx.x == 0) {
    sh.n_scratch = 0;
    sh.radix.kprime = (unsigned)st.kc;
    sh.n_out = 0;
    sh.n_eq = 0;
  }
  __syncthreads();
  if (overflow) {
    /* The buffer lost pairs of this tile: take the whole line again (filtered by the same thr),
     * from a fused tile's kept pairs unless they lost some too. */
    if (line.fused_line >= 0 && !lost)
      gather_pairs(g, line, thr_row, sh, scratch_key, scratch_index);
    else
      rescan_line(g, line, thr_row, sh, scratch_key, scratch_index);
    __syncthreads();
  }
  const int n_scratch = overflow ? sh.n_scratch : 0;
  if (overflow)
    __threadfence_block(); /* scratch written above is read by other threads below */

  const uint32_t pivot =
      select_pivot(st, row, n_buffer, overflow, line, scratch_key, scratch_index, n_scratch, sh);
  const int take_equal = (int)sh.radix.kprime;

  for_each_element(st, row, n_buffer, overflow, line, scratch_key, scratch_index, n_scratch,
                   [&](bool act, uint32_t key, int idx) {
                     if (!act)
                       return;
                     bool take = key < pivot;
                     if (!take && key == pivot)
                       take = atomicAdd(&sh.n_eq, 1) < take_equal;
                     if (take) {
                       int pos = atomicAdd(&sh.n_out, 1);
                       out_key[pos] = key;
                       out_index[pos] = idx;
                     }
                   });
  __syncthreads();
  float *ls = st.list_score + (size_t)row * st.kc;
  int *li = st.list_index + (size_t)row * st.kc;
  for (int t = threadIdx.x; t < st.kc; t += kMergeThreads) {
    int idx = out_index[t];
    li[t] = idx;
    ls[t] = idx < 0 ? inf : key_float(out_key[t]);
  }
  if (threadIdx.x == 0) {
    /* min: a row may hold a bound imported from another GPU's lists (see launch_state_clear_lists),
     * which an emptier list here must not loosen; with a full list the pivot is never larger. */
    st.thr[row] = fminf(thr_row, pivot == kEmptyKey ? inf : key_float(pivot));
    st.count[row] = 0;
  }
  __syncthreads();
}

/*
 * Grid: state.merge_blocks persistent blocks of 256 threads; dynamic shared memory kc * 8 bytes.
 * Tile mode (n_final < 0): the rows queued by filter_kernel. Final mode: rows row0 ..
 * row0+n_final-1 with pending candidates.
 */
__global__ void __launch_bounds__(kMergeThreads)
    merge_kernel(SelectState st, TileGeom g, int row0, int n_final)
{
  extern __shared__ unsigned char dynamic_shared[];
  __shared__ MergeShared sh;
  uint32_t *out_key = reinterpret_cast<uint32_t *>(dynamic_shared);
  int *out_index = reinterpret_cast<int *>(dynamic_shared + (size_t)st.kc * sizeof(uint32_t));
  if (st.out_key) {
    out_key = st.out_key + (size_t)blockIdx.x * st.kc;
    out_index = st.out_index + (size_t)blockIdx.x * st.kc;
  }
  const bool final_mode = n_final >= 0;
  const int n_entries = final_mode ? n_final : *st.merge_count;
  for (int e = blockIdx.x; e < n_entries; e += gridDim.x) {
    Line line = {nullptr, false, 1.0f, 0, 0, 0, -1, -1, nullptr, nullptr, nullptr, 0, 1.0f};
    line.half_tile = g.half_tile != 0;
    line.tile_scale = g.tile_scale;
    line.dpad = g.dpad;
    line.scale = g.alpha * g.tile_scale;
    const __half *q_rows = static_cast<const __half *>(g.q_rows);
    const __half *r_rows = static_cast<const __half *>(g.r_rows);
    const size_t elem = g.half_tile ? sizeof(__half) : sizeof(float);
    int row;
    if (final_mode) {
      row = row0 + e;
      if (st.count[row] == 0)
        continue;
    } else {
      uint32_t entry = (uint32_t)st.merge_list[e];
      if (entry & kColumnFlag) {
        int j = (int)(entry & ~kColumnFlag);
        row = g.col_state0 + j;
        line.base = g.tile ? static_cast<const char *>(g.tile) + j * elem : nullptr;
        line.own_row = g.tile ? nullptr : r_rows + (size_t)j * g.dpad;
        line.fused_line = g.tile ? -1 : j;
        line.fused_column = true;
        line.cand_rows = q_rows;
        line.stride = g.ld;
        line.length = g.n_rows;
        line.cand0 = g.row_global0;
        line.self_index = g.self ? g.col_global0 + j : -1;
        if (g.row_group) {
          line.group = g.col_group[g.col_global0 + j];
          line.cand_group = g.row_group;
        }
      } else {
        int i = (int)entry;
        row = g.row_state0 + i;
        line.base = g.tile ? static_cast<const char *>(g.tile) + (size_t)i * g.ld * elem : nullptr;
        line.own_row = g.tile ? nullptr : q_rows + (size_t)i * g.dpad;
        line.fused_line = g.tile ? -1 : i;
        line.cand_rows = r_rows;
        line.stride = 1;
        line.length = g.n_cols;
        line.cand0 = g.col_global0;
        line.self_index = g.self ? g.row_global0 + i : -1;
        if (g.row_group) {
          line.group = g.row_group[g.row_global0 + i];
          line.cand_group = g.col_group;
        }
      }
    }
    merge_row(st, g, row, !final_mode, line, sh, out_key, out_index);
  }
}

/*
 * The merge of a fresh tile's stages (tile mode, rows only), one warp per queued row instead of one
 * block: a stage queues every row of the tile (8,192) with at most cap candidates each, so the
 * block merge spent most of its time with 256 threads waiting on one small row (a diagonal tile
 * took 0.94 ms, ncu). A row that fits (no overflow, kc + candidates <= 256) is merged as
 * merge_row_small does, with the same ranks (ties by position: the list first, then the
 * candidates in buffer order), so the lists are the same; any other row goes to defer_list for
 * merge_kernel. Grid: persistent blocks of kMergeThreads (8 warps), 2 KiB of shared memory a warp.
 */
__global__ void __launch_bounds__(kMergeThreads)
    merge_warp_kernel(SelectState st, TileGeom g, int *defer_list, int *defer_count)
{
  constexpr int kWarps = kMergeThreads / 32;
  /* keys read 4 at a time; padding past the row's m elements holds kEmptyKey, which ranks no
   * element lower (it is the largest key, and ties count only positions before the element) */
  __shared__ uint4 warp_key[kWarps][kMergeThreads / 4];
  __shared__ int warp_index[kWarps][kMergeThreads];
  const float inf = __int_as_float(0x7f800000);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t *sk = reinterpret_cast<uint32_t *>(warp_key[warp]);
  int *si = warp_index[warp];
  const int n_entries = *st.merge_count;
  for (int e = blockIdx.x * kWarps + warp; e < n_entries; e += gridDim.x * kWarps) {
    const int entry = st.merge_list[e];
    const int row = g.row_state0 + (int)(entry & ~kColumnFlag);
    const int count = st.count[row];
    if ((entry & (int)kColumnFlag) || count > st.cap || st.kc + count > kMergeThreads) {
      if (lane == 0)
        defer_list[atomicAdd(defer_count, 1)] = entry;
      continue;
    }
    if (st.stats && lane == 0)
      atomicAdd(&st.stats[1], 1ull);
    const float thr_row = st.thr[row];
    const int m = st.kc + count, m4 = (m + 3) / 4;
    for (int t = lane; t < 4 * m4; t += 32) {
      uint32_t key;
      int idx;
      merge_entry(st, row, t, m, &key, &idx);
      sk[t] = key;
      si[t] = idx;
    }
    __syncwarp(); /* every element read (and in shared memory) before any list slot is rewritten */
    for (int t = lane; t < m; t += 32) {
      const uint32_t key = sk[t];
      int rank = 0;
      for (int v4 = 0; v4 < m4; v4++) {
        const uint4 o = warp_key[warp][v4];
        const int v = 4 * v4;
        rank += (o.x < key || (o.x == key && v < t)) + (o.y < key || (o.y == key && v + 1 < t)) +
                (o.z < key || (o.z == key && v + 2 < t)) + (o.w < key || (o.w == key && v + 3 < t));
      }
      if (rank < st.kc) {
        const int idx = si[t];
        const float score = idx < 0 ? inf : key_float(key);
        st.list_index[(size_t)row * st.kc + rank] = idx;
        st.list_score[(size_t)row * st.kc + rank] = score;
        if (rank == st.kc - 1)
          st.thr[row] = fminf(thr_row, score); /* as merge_row: never loosened */
      }
    }
    if (lane == 0)
      st.count[row] = 0;
    __syncwarp(); /* the shared arrays are reused for the next row */
  }
}

/* Empties the lists and counts of rows [row0, row0 + n_rows); with reset_thr also their thresholds.
 */
__global__ void empty_kernel(SelectState st, int row0, int n_rows, bool reset_thr)
{
  const float inf = __int_as_float(0x7f800000);
  size_t total = (size_t)n_rows * st.kc;
  for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total;
       t += (size_t)gridDim.x * blockDim.x) {
    size_t at = (size_t)row0 * st.kc + t;
    st.list_score[at] = inf;
    st.list_index[at] = -1;
  }
  for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < (size_t)n_rows;
       t += (size_t)gridDim.x * blockDim.x) {
    if (reset_thr)
      st.thr[row0 + t] = inf;
    st.count[row0 + t] = 0;
  }
}

/* thr[i] = min(thr[i], peers' thr[i]): reads other GPUs' memory over NVLink while they run. */
__global__ void import_kernel(SelectState st, PeerThresholds peers, int row0, int n_rows)
{
  for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < (size_t)n_rows;
       t += (size_t)gridDim.x * blockDim.x) {
    const size_t row = (size_t)row0 + t;
    float v = st.thr[row];
    for (int p = 0; p < peers.count; p++)
      v = fminf(v, *((volatile const float *)peers.thr[p] + row));
    st.thr[row] = v;
  }
}

/* See launch_gather_lists: one thread per (row, peer entry), reading the peers over NVLink. */
__global__ void gather_kernel(SelectState st, PeerLists peers, int row0, int n_rows)
{
  const size_t per_row = (size_t)peers.count * st.kc;
  const size_t total = (size_t)n_rows * per_row;
  for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total;
       t += (size_t)gridDim.x * blockDim.x) {
    const size_t row = (size_t)row0 + t / per_row, slot = t % per_row;
    const int p = (int)(slot / st.kc);
    const size_t at = row * st.kc + slot % st.kc;
    const int idx = peers.index[p][at];
    st.cand_index[row * st.cap + slot] = idx;
    st.cand_score[row * st.cap + slot] = idx < 0 ? __int_as_float(0x7fc00000) : peers.score[p][at];
    if (slot == 0)
      st.count[row] = (int)per_row;
  }
}

__global__ void extract_kernel(SelectState st, int row0, int n_rows, int64_t *out_index,
                               float *out_score)
{
  size_t total = (size_t)n_rows * st.kc;
  for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total;
       t += (size_t)gridDim.x * blockDim.x) {
    size_t at = (size_t)row0 * st.kc + t;
    out_index[t] = st.list_index[at];
    out_score[t] = st.list_score[at];
  }
}

unsigned grid_for(size_t work, unsigned threads)
{
  size_t blocks = (work + threads - 1) / threads;
  if (blocks < 1)
    blocks = 1;
  if (blocks > 65535u * 8u)
    blocks = 65535u * 8u;
  return (unsigned)blocks;
}

} // namespace

cudaError_t launch_state_reset(const SelectState &state, int row0, int n_rows, cudaStream_t stream)
{
  if (n_rows <= 0)
    return cudaSuccess;
  empty_kernel<<<grid_for((size_t)n_rows * state.kc, 256), 256, 0, stream>>>(state, row0, n_rows,
                                                                             true);
  return cudaGetLastError();
}

cudaError_t launch_state_clear_lists(const SelectState &state, int row0, int n_rows,
                                     cudaStream_t stream)
{
  if (n_rows <= 0)
    return cudaSuccess;
  empty_kernel<<<grid_for((size_t)n_rows * state.kc, 256), 256, 0, stream>>>(state, row0, n_rows,
                                                                             false);
  return cudaGetLastError();
}

cudaError_t launch_import_thresholds(const SelectState &state, const PeerThresholds &peers,
                                     int row0, int n_rows, cudaStream_t stream)
{
  if (n_rows <= 0 || peers.count == 0)
    return cudaSuccess;
  import_kernel<<<grid_for((size_t)n_rows, 256), 256, 0, stream>>>(state, peers, row0, n_rows);
  return cudaGetLastError();
}

cudaError_t launch_gather_lists(const SelectState &state, const PeerLists &peers, int row0,
                                int n_rows, cudaStream_t stream)
{
  if (n_rows <= 0 || peers.count <= 0)
    return cudaSuccess;
  if ((size_t)peers.count * state.kc > (size_t)state.cap)
    return cudaErrorInvalidValue;
  gather_kernel<<<grid_for((size_t)n_rows * peers.count * state.kc, 256), 256, 0, stream>>>(
      state, peers, row0, n_rows);
  return cudaGetLastError();
}

namespace
{

/* KNNWB_CUDA_BLOCK_MERGE=1: fresh stages merge one block per row (to compare with the warps). */
bool block_merge_only(void)
{
  static int only = -1;
  if (only < 0) {
    const char *v = getenv("KNNWB_CUDA_BLOCK_MERGE");
    only = v != nullptr && strcmp(v, "1") == 0;
  }
  return only != 0;
}

/* One filter pass over geom and the merge of the rows it queued; warp_merge: a fresh tile's stage
 * (rows only), merged by merge_warp_kernel and the rows it defers by merge_kernel. */
cudaError_t filter_and_merge(const SelectState &state, const TileGeom &geom, bool warp_merge,
                             cudaStream_t stream)
{
  /* a fused tile (no tile) was filtered on the GEMM stream, which kept its pairs */
  if (!geom.tile) {
    const cudaError_t err = launch_fused_pairs(state, geom, stream);
    if (err != cudaSuccess)
      return err;
  } else {
    cudaError_t err = cudaMemsetAsync(state.merge_count, 0, 2 * sizeof(int), stream);
    if (err != cudaSuccess)
      return err;
    launch_filter(state, geom, stream);
    err = cudaGetLastError();
    if (err != cudaSuccess)
      return err;
  }
  size_t shared = state.out_key ? 0 : (size_t)state.kc * (sizeof(uint32_t) + sizeof(int));
  if (!warp_merge) {
    merge_kernel<<<state.merge_blocks, kMergeThreads, shared, stream>>>(state, geom, 0, -1);
    return cudaGetLastError();
  }
  SelectState deferred = state;
  deferred.merge_list = state.merge_list + geom.ld;
  deferred.merge_count = state.merge_count + 1;
  merge_warp_kernel<<<state.merge_blocks, kMergeThreads, 0, stream>>>(
      state, geom, deferred.merge_list, deferred.merge_count);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return err;
  merge_kernel<<<state.merge_blocks, kMergeThreads, shared, stream>>>(deferred, geom, 0, -1);
  return cudaGetLastError();
}

} // namespace

cudaError_t launch_tile_select(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (geom.n_rows <= 0 || geom.n_cols <= 0)
    return cudaSuccess;
  /* First stage: cap columns (all pass, none overflows); then each stage as wide as the columns
   * already seen, so about kc pairs of it beat the kc-th best of those. Every row with candidates
   * merges after each stage (lazy limit 0), so the next stage filters against fresh thresholds.
   * cap is a multiple of 32: sub-tiles stay 16-byte aligned for the filter's vector loads. */
  if (!geom.fresh || geom.do_cols || geom.n_cols <= state.cap)
    return filter_and_merge(state, geom, false, stream);
  if (fresh_select_fits(state, geom))
    return launch_fresh_select(state, geom, stream);
  SelectState eager = state;
  eager.lazy_limit = 0;
  /* rows of kc + cap entries fit a warp's merge; larger ones would all be deferred */
  const bool warp_merge = state.kc + state.cap <= kMergeThreads && !block_merge_only();
  for (int c0 = 0, width = state.cap; c0 < geom.n_cols; c0 += width, width = c0) {
    TileGeom stage = geom;
    stage.tile = static_cast<const char *>(geom.tile) +
                 (size_t)c0 * (geom.half_tile ? sizeof(__half) : sizeof(float));
    stage.n_cols = width < geom.n_cols - c0 ? width : geom.n_cols - c0;
    stage.col_global0 = geom.col_global0 + c0;
    stage.col_state0 = geom.col_state0 + c0;
    cudaError_t err = filter_and_merge(eager, stage, warp_merge, stream);
    if (err != cudaSuccess)
      return err;
  }
  return cudaSuccess;
}

cudaError_t launch_final_merge(const SelectState &state, int row0, int n_rows, cudaStream_t stream)
{
  if (n_rows <= 0)
    return cudaSuccess;
  TileGeom none = {};
  size_t shared = state.out_key ? 0 : (size_t)state.kc * (sizeof(uint32_t) + sizeof(int));
  int blocks = n_rows < state.merge_blocks ? n_rows : state.merge_blocks;
  merge_kernel<<<blocks, kMergeThreads, shared, stream>>>(state, none, row0, n_rows);
  return cudaGetLastError();
}

cudaError_t launch_extract(const SelectState &state, int row0, int n_rows, int64_t *out_index,
                           float *out_score, cudaStream_t stream)
{
  if (n_rows <= 0)
    return cudaSuccess;
  extract_kernel<<<grid_for((size_t)n_rows * state.kc, 256), 256, 0, stream>>>(
      state, row0, n_rows, out_index, out_score);
  return cudaGetLastError();
}

int shared_memory_kc_limit(void)
{
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  size_t fixed = sizeof(MergeShared) + 1024;
  size_t room = (size_t)optin > fixed ? (size_t)optin - fixed : 0;
  return (int)(room / (sizeof(uint32_t) + sizeof(int)));
}

cudaError_t prepare_merge_kernel(int kc, bool *in_shared)
{
  size_t shared = (size_t)kc * (sizeof(uint32_t) + sizeof(int));
  *in_shared = kc <= shared_memory_kc_limit();
  if (!*in_shared || shared <= 48 * 1024 - sizeof(MergeShared))
    return cudaSuccess;
  return cudaFuncSetAttribute(merge_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)shared);
}

} // namespace knnwb_cuda
