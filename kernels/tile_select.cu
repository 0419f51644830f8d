/*
 * Per-row k-selection across tiles, kept on the device (see select_internal.h for the state).
 *
 * filter_kernel reads a tile once and, for both the row pass and (self jobs, off-diagonal tiles)
 * the column pass, appends pairs whose score beats the row's threshold to that row's candidate
 * buffer. After the first tile of a row almost nothing passes, so the kernel is a streaming read.
 * merge_kernel then runs, one block per row that crossed lazy_limit, an exact radix select
 * (4 passes of 8 bits over order-preserving float keys) of list + candidates: it works for any kc
 * whose list fits in shared memory (tens of thousands), unlike warp-register heaps (FAISS: 2048).
 */
#include "select_internal.h"

#include <knnwb_kernels.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace knnwb_cuda
{
namespace
{

constexpr int kFilterThreads = 256;
/* rows per thread: 8 float4 loads of float tiles, 16 8-byte loads of half tiles */
template <typename T> constexpr int kFilterRows = sizeof(T) == 2 ? 16 : 8;
constexpr int kFilterCols = kFilterThreads * 4;
constexpr int kMergeThreads = 256; /* one thread per radix bin */
constexpr uint32_t kEmptyKey = 0xffffffffu;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr uint32_t kColumnFlag = 0x80000000u;

__device__ __forceinline__ float score_of(int kind, float v, float candidate_sqnorm)
{
  switch (kind) {
  case KNNWB_SCORE_DOT:
    return 1.0f - v;
  case KNNWB_SCORE_ABS_DOT:
    return 1.0f - fabsf(v);
  case KNNWB_SCORE_L2:
    return candidate_sqnorm - 2.0f * v;
  default:
    return v;
  }
}

/* Unsigned keys with the order of the floats (negative values flipped). */
__device__ __forceinline__ uint32_t float_key(float f)
{
  uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_float(uint32_t k)
{
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ __forceinline__ void enqueue_merge(const SelectState &st, int entry)
{
  int slot = atomicAdd(st.merge_count, 1);
  st.merge_list[slot] = entry;
}

/* The score of product v, as score_of, with the kind fixed at compile time. */
template <int kKind> __device__ __forceinline__ float kind_score(float v, float sq)
{
  if (kKind == KNNWB_SCORE_DOT)
    return 1.0f - v;
  if (kKind == KNNWB_SCORE_ABS_DOT)
    return 1.0f - fabsf(v);
  if (kKind == KNNWB_SCORE_L2)
    return sq - 2.0f * v;
  return v;
}

/*
 * Reductions for the filter's test "does any of these products beat the threshold": the lowest
 * score of products sharing sq. For DOT and ABS_DOT the score falls as the product (its magnitude)
 * rises and rounding is monotone, so the lowest score is the score of the largest product, bit for
 * bit: one max per product instead of a subtraction and a min. NaN (the filler of products outside
 * the tile) is ignored by fmaxf/fminf and fails every comparison.
 */
template <int kKind> struct LowestScore {
  float acc; /* start with NaN */
  __device__ __forceinline__ void add(float v, float sq)
  {
    if (kKind == KNNWB_SCORE_DOT)
      acc = fmaxf(acc, v);
    else if (kKind == KNNWB_SCORE_ABS_DOT)
      acc = fmaxf(acc, fabsf(v));
    else
      acc = fminf(acc, kind_score<kKind>(v, sq));
  }
  __device__ __forceinline__ float score() const
  {
    return kKind == KNNWB_SCORE_DOT || kKind == KNNWB_SCORE_ABS_DOT ? 1.0f - acc : acc;
  }
};

/* Element at of a tile as q.r (half tiles: times their exact power-of-two scale). */
__device__ __forceinline__ float tile_value(const void *tile, bool half_tile, float scale,
                                            size_t at)
{
  if (half_tile)
    return __half2float(__ldg(static_cast<const __half *>(tile) + at)) * scale;
  return __ldg(static_cast<const float *>(tile) + at);
}

/* Product (i, j) of the tile, or NaN outside it (NaN fails every comparison). */
__device__ __forceinline__ float tile_product(const TileGeom &g, int i, int j)
{
  return i < g.n_rows && j < g.n_cols
             ? tile_value(g.tile, g.half_tile, g.tile_scale, (size_t)i * g.ld + j)
             : __int_as_float(0x7fc00000);
}

/*
 * Four adjacent products (j .. j + 3) of a tile row: one 16-byte load of floats, or one 8-byte
 * load of halves (kept raw until used, so that 16 rows fit the registers, then converted and
 * scaled). Outside the tile: NaN.
 */
template <typename T> struct ProductLoad;

template <> struct ProductLoad<float> {
  using Raw = float4;
  static __device__ __forceinline__ Raw load(const TileGeom &g, int i, int j)
  {
    return __ldg(reinterpret_cast<const float4 *>(static_cast<const float *>(g.tile) +
                                                  (size_t)i * g.ld + j));
  }
  static __device__ __forceinline__ Raw outside()
  {
    const float nan = __int_as_float(0x7fc00000);
    return make_float4(nan, nan, nan, nan);
  }
  static __device__ __forceinline__ float4 products(const Raw &raw, float)
  {
    return raw;
  }
};

template <> struct ProductLoad<__half> {
  using Raw = uint2;
  static __device__ __forceinline__ Raw load(const TileGeom &g, int i, int j)
  {
    return __ldg(reinterpret_cast<const uint2 *>(static_cast<const __half *>(g.tile) +
                                                 (size_t)i * g.ld + j));
  }
  static __device__ __forceinline__ Raw outside()
  {
    return make_uint2(0x7e007e00u, 0x7e007e00u); /* half NaNs */
  }
  static __device__ __forceinline__ float4 products(const Raw &raw, float scale)
  {
    __half2 lo, hi;
    memcpy(&lo, &raw.x, sizeof lo);
    memcpy(&hi, &raw.y, sizeof hi);
    const float2 a = __half22float2(lo), b = __half22float2(hi);
    return make_float4(a.x * scale, a.y * scale, b.x * scale, b.y * scale);
  }
};

/*
 * The exact row pass of filter_kernel for the rows i0 + r of the block with bit r of warp_rows set
 * (the same mask in every lane): each lane's kCols columns against the row's threshold, with
 * invalid columns, group masking and the self pair; the warp's passing pairs of a row get
 * contiguous slots from one atomic. Reads the products again (cache hits: the fast test just read
 * them), so that the common path holds no code or registers for this.
 */
template <int kCols, int kKind, bool kGroups>
__device__ __noinline__ void filter_rows_exact(const SelectState &st, const TileGeom &g,
                                               unsigned warp_rows, int i0, int j0)
{
  const int lane = threadIdx.x & 31;
  bool col_ok[kCols];
  int col_grp[kCols];
  float col_sq[kCols];
#pragma unroll
  for (int u = 0; u < kCols; u++) {
    const int cand = g.col_global0 + j0 + u;
    const bool in = j0 + u < g.n_cols;
    col_ok[u] = in && !(g.invalid && g.invalid[cand]);
    col_grp[u] = (kGroups && in) ? g.col_group[cand] : -1;
    col_sq[u] = (kKind == KNNWB_SCORE_L2 && in) ? g.sqnorms[cand] : 0.0f;
  }
  for (; warp_rows; warp_rows &= warp_rows - 1) {
    const int i = i0 + __ffs(warp_rows) - 1;
    const float thr = st.thr[g.row_state0 + i];
    const int row_grp = kGroups ? g.row_group[g.row_global0 + i] : -2;
    float s[kCols];
    unsigned m = 0;
#pragma unroll
    for (int u = 0; u < kCols; u++) {
      s[u] = kind_score<kKind>(tile_product(g, i, j0 + u), col_sq[u]);
      const bool pass = col_ok[u] && s[u] < thr && (!kGroups || row_grp != col_grp[u]) &&
                        !(g.self && g.col_global0 + j0 + u == g.row_global0 + i);
      m |= (unsigned)pass << u;
    }
    if (!__any_sync(kFullMask, m))
      continue;
    const int n = __popc(m);
    int incl = n;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const int t = __shfl_up_sync(kFullMask, incl, off);
      if (lane >= off)
        incl += t;
    }
    const int total = __shfl_sync(kFullMask, incl, 31);
    const int row = g.row_state0 + i;
    int base = 0;
    if (lane == 31) {
      base = atomicAdd(&st.count[row], total);
      if (base <= st.lazy_limit && base + total > st.lazy_limit)
        enqueue_merge(st, i);
      if (st.stats)
        atomicAdd(&st.stats[0], (unsigned long long)total);
    }
    base = __shfl_sync(kFullMask, base, 31);
    int pos = base + incl - n;
#pragma unroll
    for (int u = 0; u < kCols; u++) {
      if (m & (1u << u)) {
        if (pos < st.cap) {
          st.cand_score[(size_t)row * st.cap + pos] = s[u];
          st.cand_index[(size_t)row * st.cap + pos] = g.col_global0 + j0 + u;
        }
        pos++;
      }
    }
  }
}

/*
 * The exact column pass of filter_kernel (self jobs, off-diagonal tiles) for the thread's columns
 * j0 + u with bit u of col_hits set: the pair (i, j) offers i to row j; one atomic per column.
 */
template <int kRows, int kKind, bool kGroups>
__device__ __noinline__ void filter_cols_exact(const SelectState &st, const TileGeom &g,
                                               unsigned col_hits, int i0, int j0)
{
  for (; col_hits; col_hits &= col_hits - 1) {
    const int j = j0 + __ffs(col_hits) - 1;
    const int row = g.col_state0 + j;
    const float thr = st.thr[row];
    const int col_grp = kGroups ? g.col_group[g.col_global0 + j] : -1;
    unsigned ok = 0;
    for (int r = 0; r < kRows; r++) {
      const int i = i0 + r;
      const int rg = g.row_global0 + i;
      const float sq = (kKind == KNNWB_SCORE_L2 && i < g.n_rows) ? g.sqnorms[rg] : 0.0f;
      const bool pass = kind_score<kKind>(tile_product(g, i, j), sq) < thr &&
                        !(g.invalid && g.invalid[rg]) && (!kGroups || g.row_group[rg] != col_grp);
      ok |= (unsigned)pass << r;
    }
    if (ok == 0)
      continue;
    const int n = __popc(ok);
    int pos = atomicAdd(&st.count[row], n);
    if (pos <= st.lazy_limit && pos + n > st.lazy_limit)
      enqueue_merge(st, (int)(kColumnFlag | (uint32_t)j));
    if (st.stats)
      atomicAdd(&st.stats[0], (unsigned long long)n);
    for (; ok; ok &= ok - 1) {
      const int i = i0 + __ffs(ok) - 1;
      const float sq = kKind == KNNWB_SCORE_L2 ? g.sqnorms[g.row_global0 + i] : 0.0f;
      if (pos < st.cap) {
        st.cand_score[(size_t)row * st.cap + pos] = kind_score<kKind>(tile_product(g, i, j), sq);
        st.cand_index[(size_t)row * st.cap + pos] = g.row_global0 + i;
      }
      pos++;
    }
  }
}

/*
 * Grid: (ceil(n_cols / 1024), ceil(n_rows / 8)); block: 256 threads, each 4 adjacent columns of 8
 * rows (8 independent 16-byte loads in flight per thread, 512 contiguous bytes per warp and row).
 * After a row's first tiles almost no pair passes, so this must run at memory bandwidth. The
 * common path is one max (or min) per product for the row test and one for the column test, a
 * warp vote, and nothing else: rows and columns with a possible pass go to the exact passes out of
 * line (filter_rows_exact, filter_cols_exact), which keeps the kernel small (ncu, one H200, an
 * 8192^2 tile: the earlier kernel with 16 rows and the exact passes unrolled inline ran 150-160 us
 * at 1.7-1.8 TB/s with 126-128 registers, 2 blocks per multiprocessor and warps stalled mostly on
 * instruction fetch). kGroups: pairs of one group are masked (exact MST searches). At most 64
 * registers: 4 blocks (32 warps) per multiprocessor.
 */
template <typename T, int kKind, bool kGroups>
__global__ void __launch_bounds__(kFilterThreads, 4)
    filter_kernel(const __grid_constant__ SelectState st, const __grid_constant__ TileGeom g)
{
  constexpr int kRows = kFilterRows<T>;
  const int j0 = blockIdx.x * kFilterCols + threadIdx.x * 4;
  const int i0 = blockIdx.y * kRows;
  const float inf = __int_as_float(0x7f800000);
  const float nan = __int_as_float(0x7fc00000);

  using Load = ProductLoad<T>;
  typename Load::Raw raw[kRows];
#pragma unroll
  for (int r = 0; r < kRows; r++) {
    const int i = i0 + r;
    raw[r] = (i < g.n_rows && j0 < g.n_cols) ? Load::load(g, i, j0) : Load::outside();
  }
  float col_sq[4], col_thr[4];
#pragma unroll
  for (int u = 0; u < 4; u++) {
    const int j = j0 + u;
    const bool in = j < g.n_cols;
    col_sq[u] = (kKind == KNNWB_SCORE_L2 && in) ? g.sqnorms[g.col_global0 + j] : 0.0f;
    col_thr[u] = (in && g.do_cols) ? st.thr[g.col_state0 + j] : -inf;
  }
  float row_thr[kRows];
#pragma unroll
  for (int r = 0; r < kRows; r++)
    row_thr[r] = i0 + r < g.n_rows ? st.thr[g.row_state0 + i0 + r] : -inf;
  /* one pass over the rows: each row's lowest score, and each column's over the rows */
  unsigned row_hits = 0;
  LowestScore<kKind> col_low[4] = {{nan}, {nan}, {nan}, {nan}};
#pragma unroll
  for (int r = 0; r < kRows; r++) {
    float4 v = Load::products(raw[r], g.tile_scale);
    if (j0 + 4 > g.n_cols) {
      /* the last columns of the tile: the products past n_cols are not pairs */
      v.y = j0 + 1 < g.n_cols ? v.y : nan;
      v.z = j0 + 2 < g.n_cols ? v.z : nan;
      v.w = j0 + 3 < g.n_cols ? v.w : nan;
    }
    LowestScore<kKind> low = {nan};
    low.add(v.x, col_sq[0]);
    low.add(v.y, col_sq[1]);
    low.add(v.z, col_sq[2]);
    low.add(v.w, col_sq[3]);
    row_hits |= (unsigned)(low.score() < row_thr[r]) << r;
    if (g.do_cols) {
      const float sq =
          (kKind == KNNWB_SCORE_L2 && i0 + r < g.n_rows) ? g.sqnorms[g.row_global0 + i0 + r] : 0.0f;
      col_low[0].add(v.x, sq);
      col_low[1].add(v.y, sq);
      col_low[2].add(v.z, sq);
      col_low[3].add(v.w, sq);
    }
  }
  unsigned col_hits = 0;
#pragma unroll
  for (int u = 0; u < 4; u++)
    col_hits |= (unsigned)(col_low[u].score() < col_thr[u]) << u;
  const unsigned warp_rows = __reduce_or_sync(kFullMask, row_hits);
  if (warp_rows)
    filter_rows_exact<4, kKind, kGroups>(st, g, warp_rows, i0, j0);
  if (col_hits)
    filter_cols_exact<kRows, kKind, kGroups>(st, g, col_hits, i0, j0);
}

/*
 * The half-tile filter for DOT and ABS_DOT (the FP16 screens of every metric but euclidean): as
 * filter_kernel, but each thread reads 8 adjacent halves per 16-byte load (8 rows x 8 columns, the
 * 128 bytes in flight per thread of the float kernel) and the tests reduce in half precision: the
 * largest product (magnitude) of a row or column, converted and scaled once. Conversion and
 * scaling by a power of two are monotone, so that equals the largest of the scaled float products
 * filter_kernel takes, bit for bit: the same rows and columns go to the exact passes, and the
 * same candidates pass. Grid: (ceil(n_cols / 2048), ceil(n_rows / 8)); needs ld, the tile's column
 * offset and every stage start a multiple of 8.
 * Measured (one H200, ncu and the trace): 72-77 us per 8192^2 tile, as the 4-column kernel, at
 * 37-40% of DRAM bandwidth; selection per ordinary tile in the loop 0.146-0.155 ms against
 * 0.154-0.163 ms. The time is not the loads but the exact passes: about one pass per row and
 * column of a tile on average, each a chain of dependent loads and an atomic. Moved into a kernel
 * of their own (the filter queuing its warps with a pass), the streaming part took 53 us and the
 * exact passes 53-107 us: worse (0.180 ms per tile), so they stay inline.
 */
constexpr int kHalfFilterRows = 8;
constexpr int kHalfFilterCols = kFilterThreads * 8;

template <int kKind> __device__ __forceinline__ __half2 half_magnitude(__half2 v)
{
  return kKind == KNNWB_SCORE_ABS_DOT ? __habs2(v) : v;
}

/* The largest of 8 products (magnitudes for ABS_DOT); NaNs (outside the tile) are ignored. */
template <int kKind> __device__ __forceinline__ __half2 half_max8(const uint4 &raw)
{
  __half2 a, b, c, d;
  memcpy(&a, &raw.x, sizeof a);
  memcpy(&b, &raw.y, sizeof b);
  memcpy(&c, &raw.z, sizeof c);
  memcpy(&d, &raw.w, sizeof d);
  return __hmax2(__hmax2(half_magnitude<kKind>(a), half_magnitude<kKind>(b)),
                 __hmax2(half_magnitude<kKind>(c), half_magnitude<kKind>(d)));
}

/* raw with the halves at columns j0 + p >= n_cols replaced by NaN (not pairs). */
__device__ __forceinline__ uint4 half_mask_columns(uint4 raw, int j0, int n_cols)
{
  uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int p = 0; p < 8; p++)
    if (j0 + p >= n_cols)
      w[p / 2] = (w[p / 2] & (p % 2 ? 0x0000ffffu : 0xffff0000u)) | (p % 2 ? 0x7e000000u : 0x7e00u);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/*
 * The fast tests of filter_half_kernel for the thread's 8 rows i0.. and 8 columns j0..: bit r of
 * *row_hits when a product of row i0 + r beats its threshold, bit u of *col_hits (do_cols) when
 * one of column j0 + u beats the column's. Reads the 8 x 8 halves with 8 16-byte loads.
 */
template <int kKind>
__device__ __forceinline__ void half_hits(const SelectState &st, const TileGeom &g, int i0, int j0,
                                          unsigned *row_hits, unsigned *col_hits)
{
  constexpr int kRows = kHalfFilterRows;
  const float inf = __int_as_float(0x7f800000);
  const uint4 outside = make_uint4(0x7e007e00u, 0x7e007e00u, 0x7e007e00u, 0x7e007e00u);
  const __half *tile = static_cast<const __half *>(g.tile);
  uint4 raw[kRows];
#pragma unroll
  for (int r = 0; r < kRows; r++) {
    const int i = i0 + r;
    raw[r] = (i < g.n_rows && j0 < g.n_cols)
                 ? __ldg(reinterpret_cast<const uint4 *>(tile + (size_t)i * g.ld + j0))
                 : outside;
  }
  float row_thr[kRows];
#pragma unroll
  for (int r = 0; r < kRows; r++)
    row_thr[r] = i0 + r < g.n_rows ? st.thr[g.row_state0 + i0 + r] : -inf;
  unsigned rows = 0;
  const __half2 nan2 = __halves2half2(__ushort_as_half(0x7e00), __ushort_as_half(0x7e00));
  __half2 col_max[4] = {nan2, nan2, nan2, nan2};
#pragma unroll
  for (int r = 0; r < kRows; r++) {
    uint4 v = raw[r];
    if (j0 + 8 > g.n_cols)
      v = half_mask_columns(v, j0, g.n_cols);
    const __half2 m2 = half_max8<kKind>(v);
    const float largest = fmaxf(__low2float(m2), __high2float(m2)) * g.tile_scale;
    rows |= (unsigned)(1.0f - largest < row_thr[r]) << r;
    if (g.do_cols) {
      __half2 h[4];
      memcpy(h, &v, sizeof h);
#pragma unroll
      for (int w = 0; w < 4; w++)
        col_max[w] = __hmax2(col_max[w], half_magnitude<kKind>(h[w]));
    }
  }
  unsigned cols = 0;
  if (g.do_cols) {
#pragma unroll
    for (int u = 0; u < 8; u++) {
      const int j = j0 + u;
      const float thr = j < g.n_cols ? st.thr[g.col_state0 + j] : -inf;
      const float largest =
          (u % 2 ? __high2float(col_max[u / 2]) : __low2float(col_max[u / 2])) * g.tile_scale;
      cols |= (unsigned)(1.0f - largest < thr) << u;
    }
  }
  *row_hits = rows;
  *col_hits = cols;
}

template <int kKind, bool kGroups>
__global__ void __launch_bounds__(kFilterThreads, 4)
    filter_half_kernel(const __grid_constant__ SelectState st, const __grid_constant__ TileGeom g)
{
  const int j0 = blockIdx.x * kHalfFilterCols + threadIdx.x * 8;
  const int i0 = blockIdx.y * kHalfFilterRows;
  unsigned row_hits, col_hits;
  half_hits<kKind>(st, g, i0, j0, &row_hits, &col_hits);
  const unsigned warp_rows = __reduce_or_sync(kFullMask, row_hits);
  if (warp_rows)
    filter_rows_exact<8, kKind, kGroups>(st, g, warp_rows, i0, j0);
  if (col_hits)
    filter_cols_exact<kHalfFilterRows, kKind, kGroups>(st, g, col_hits, i0, j0);
}

/* Warp-aggregated histogram increment: equal digits of a warp add once (skewed keys are common). */
__device__ __forceinline__ void histogram_add(unsigned *hist, bool active, unsigned digit)
{
  unsigned act = __ballot_sync(kFullMask, active);
  if (active) {
    unsigned peers = __match_any_sync(act, digit);
    if ((int)(threadIdx.x & 31) == __ffs(peers) - 1)
      atomicAdd(&hist[digit], __popc(peers));
  }
}

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
};

struct MergeShared {
  unsigned hist[kMergeThreads];
  unsigned warp_total[kMergeThreads / 32];
  unsigned digit;
  unsigned kprime;
  int n_scratch;
  int n_out;
  int n_eq;
  uint32_t small_key[kMergeThreads]; /* merge_row_small */
  int small_index[kMergeThreads];
};

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
  uint32_t key = kEmptyKey;
  int idx = -1;
  if (t < st.kc) {
    idx = st.list_index[(size_t)row * st.kc + t];
    key = idx < 0 ? kEmptyKey : float_key(st.list_score[(size_t)row * st.kc + t]);
  } else if (t < m) {
    const size_t at = (size_t)row * st.cap + (t - st.kc);
    idx = st.cand_index[at];
    key = float_key(st.cand_score[at]);
  }
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

/* Merges one state row; every thread of the block calls it with the same arguments. */
__device__ void merge_row(const SelectState &st, const TileGeom &g, int row, bool has_line,
                          const Line &line, MergeShared &sh, uint32_t *out_key, int *out_index)
{
  const float inf = __int_as_float(0x7f800000);
  const int count = st.count[row];
  const float thr_row = st.thr[row]; /* written below by thread 0 only after the block's barriers */
  const bool overflow = has_line && count > st.cap;
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
    sh.kprime = (unsigned)st.kc;
    sh.n_out = 0;
    sh.n_eq = 0;
  }
  __syncthreads();
  if (overflow) {
    /* The buffer lost pairs of this tile: take the whole line again (filtered by the same thr). */
    const float thr_old = thr_row;
    for (int base = 0; base < line.length; base += kMergeThreads) {
      int t = base + threadIdx.x;
      bool ok = false;
      float s = 0.0f;
      int cand = line.cand0 + t;
      if (t < line.length && cand != line.self_index && !(g.invalid && g.invalid[cand]) &&
          !(line.cand_group && line.cand_group[cand] == line.group)) {
        float sq = g.kind == KNNWB_SCORE_L2 ? g.sqnorms[cand] : 0.0f;
        s = score_of(
            g.kind, tile_value(line.base, line.half_tile, line.tile_scale, (size_t)t * line.stride),
            sq);
        ok = s < thr_old;
      }
      unsigned ballot = __ballot_sync(kFullMask, ok);
      int lane = threadIdx.x & 31;
      int warp_base = 0;
      if (lane == 0 && ballot)
        warp_base = atomicAdd(&sh.n_scratch, __popc(ballot));
      warp_base = __shfl_sync(kFullMask, warp_base, 0);
      if (ok) {
        int pos = warp_base + __popc(ballot & ((1u << lane) - 1u));
        scratch_key[pos] = float_key(s);
        scratch_index[pos] = cand;
      }
    }
    __syncthreads();
  }
  const int n_scratch = overflow ? sh.n_scratch : 0;
  if (overflow)
    __threadfence_block(); /* scratch written above is read by other threads below */

  uint32_t prefix = 0;
  for (int pass = 0; pass < 4; pass++) {
    const int shift = 24 - 8 * pass;
    const uint32_t high_mask = pass == 0 ? 0u : (0xffffffffu << (32 - 8 * pass));
    sh.hist[threadIdx.x] = 0;
    __syncthreads();
    for_each_element(st, row, n_buffer, overflow, line, scratch_key, scratch_index, n_scratch,
                     [&](bool act, uint32_t key, int) {
                       bool match = act && (key & high_mask) == prefix;
                       histogram_add(sh.hist, match, (key >> shift) & 0xffu);
                     });
    __syncthreads();
    /* Block scan of the 256 bins; the bin holding the kprime-th element is the next digit. */
    unsigned h = sh.hist[threadIdx.x];
    unsigned incl = h;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      unsigned t = __shfl_up_sync(kFullMask, incl, off);
      if (lane >= off)
        incl += t;
    }
    if (lane == 31)
      sh.warp_total[warp] = incl;
    __syncthreads();
    for (int w = 0; w < warp; w++)
      incl += sh.warp_total[w];
    unsigned excl = incl - h;
    unsigned kprime = sh.kprime;
    __syncthreads();
    if (excl < kprime && kprime <= incl) {
      sh.digit = threadIdx.x;
      sh.kprime = kprime - excl;
    }
    __syncthreads();
    prefix |= sh.digit << shift;
  }
  const uint32_t pivot = prefix;
  const int take_equal = (int)sh.kprime;

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
    Line line = {nullptr, false, 1.0f, 0, 0, 0, -1, -1, nullptr};
    line.half_tile = g.half_tile != 0;
    line.tile_scale = g.tile_scale;
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
        line.base = static_cast<const char *>(g.tile) + j * elem;
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
        line.base = static_cast<const char *>(g.tile) + (size_t)i * g.ld * elem;
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
      uint32_t key = kEmptyKey;
      int idx = -1;
      if (t < st.kc) {
        idx = st.list_index[(size_t)row * st.kc + t];
        key = idx < 0 ? kEmptyKey : float_key(st.list_score[(size_t)row * st.kc + t]);
      } else if (t < m) {
        const size_t at = (size_t)row * st.cap + (t - st.kc);
        idx = st.cand_index[at];
        key = float_key(st.cand_score[at]);
      }
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

/* The filter kernel of the tile's element type, score kind and group masking. */
template <typename T, bool kGroups>
void launch_filter_kind(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  const dim3 grid((geom.n_cols + kFilterCols - 1) / kFilterCols,
                  (geom.n_rows + kFilterRows<T> - 1) / kFilterRows<T>);
  switch (geom.kind) {
  case KNNWB_SCORE_DOT:
    filter_kernel<T, KNNWB_SCORE_DOT, kGroups><<<grid, kFilterThreads, 0, stream>>>(state, geom);
    break;
  case KNNWB_SCORE_ABS_DOT:
    filter_kernel<T, KNNWB_SCORE_ABS_DOT, kGroups>
        <<<grid, kFilterThreads, 0, stream>>>(state, geom);
    break;
  case KNNWB_SCORE_L2:
    filter_kernel<T, KNNWB_SCORE_L2, kGroups><<<grid, kFilterThreads, 0, stream>>>(state, geom);
    break;
  default:
    filter_kernel<T, KNNWB_SCORE_L1, kGroups><<<grid, kFilterThreads, 0, stream>>>(state, geom);
    break;
  }
}

/* KNNWB_CUDA_HALF_FILTER=4: the 4-column half filter (filter_kernel) for every kind, to compare. */
bool half_filter_narrow(void)
{
  static int narrow = -1;
  if (narrow < 0) {
    const char *v = getenv("KNNWB_CUDA_HALF_FILTER");
    narrow = v != nullptr && strcmp(v, "4") == 0;
  }
  return narrow != 0;
}

/* The half-tile filter of DOT and ABS_DOT (filter_half_kernel). */
template <int kKind, bool kGroups>
void launch_filter_half_kind(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  const dim3 grid((geom.n_cols + kHalfFilterCols - 1) / kHalfFilterCols,
                  (geom.n_rows + kHalfFilterRows - 1) / kHalfFilterRows);
  filter_half_kernel<kKind, kGroups><<<grid, kFilterThreads, 0, stream>>>(state, geom);
}

template <bool kGroups>
void launch_filter_half(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (geom.kind == KNNWB_SCORE_DOT)
    launch_filter_half_kind<KNNWB_SCORE_DOT, kGroups>(state, geom, stream);
  else
    launch_filter_half_kind<KNNWB_SCORE_ABS_DOT, kGroups>(state, geom, stream);
}

void launch_filter(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (geom.half_tile && (geom.kind == KNNWB_SCORE_DOT || geom.kind == KNNWB_SCORE_ABS_DOT) &&
      !half_filter_narrow()) {
    if (geom.row_group)
      launch_filter_half<true>(state, geom, stream);
    else
      launch_filter_half<false>(state, geom, stream);
  } else if (geom.half_tile) {
    /* half tiles come only from FP16 screens, never manhattan */
    if (geom.row_group)
      launch_filter_kind<__half, true>(state, geom, stream);
    else
      launch_filter_kind<__half, false>(state, geom, stream);
  } else if (geom.row_group) {
    launch_filter_kind<float, true>(state, geom, stream);
  } else {
    launch_filter_kind<float, false>(state, geom, stream);
  }
}

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
  cudaError_t err = cudaMemsetAsync(state.merge_count, 0, 2 * sizeof(int), stream);
  if (err != cudaSuccess)
    return err;
  launch_filter(state, geom, stream);
  err = cudaGetLastError();
  if (err != cudaSuccess)
    return err;
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
  err = cudaGetLastError();
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
