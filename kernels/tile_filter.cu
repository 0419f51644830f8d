/*
 * The threshold filter of a finished tile (see select_internal.h for the state).
 *
 * filter_kernel reads a tile once and, for both the row pass and (self jobs, off-diagonal tiles)
 * the column pass, appends pairs whose score beats the row's threshold to that row's candidate
 * buffer and queues rows that crossed lazy_limit for the merge (tile_select.cu). After the first
 * tile of a row almost nothing passes, so the kernel is a streaming read; filter_half_kernel is
 * its variant for half-precision tiles (DOT, ABS_DOT and L2 scores), whose tests run in half
 * precision and take the same pairs.
 */
#include "tile_common.cuh"
#include "tile_filter_l2.cuh"

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
constexpr int kFilterWarps = kFilterThreads / 32;
/*
 * The narrow layout of both filters, for tiles narrower than kNarrowBelow columns (a fresh tile's
 * column stages, the last tile of a row): each warp takes its own rows and a warp's width of
 * columns (128 products of a float tile, 256 of a half tile), so that a block is 8 warps of work
 * however few columns there are. The wide layout spreads a block's 8 warps over the columns of the
 * same rows (1,024 or 2,048): a stage of 96 columns kept one warp of a block busy, and the first
 * six stages of a diagonal tile of 16,384 took 110-120 us each whatever their width (ncu, one
 * H200, d = 128). Each warp reads and tests exactly as in the wide layout (the same rows i0.. and
 * columns j0.. a lane), so the same pairs pass.
 */
constexpr int kNarrowFilterCols = 32 * 4;
constexpr int kNarrowBelow = 8192;

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
 * Products (i, j0 .. j0 + 7) of a half tile as tile_product gives them (NaN outside the tile), with
 * one 16-byte load where the 8 are in the tile (j0 a multiple of 8, as filter_half_kernel's).
 */
__device__ __forceinline__ void half_products8(const TileGeom &g, int i, int j0, float v[8])
{
  if (i >= g.n_rows || j0 + 8 > g.n_cols) {
#pragma unroll
    for (int u = 0; u < 8; u++)
      v[u] = tile_product(g, i, j0 + u);
    return;
  }
  const uint4 raw = __ldg(
      reinterpret_cast<const uint4 *>(static_cast<const __half *>(g.tile) + (size_t)i * g.ld + j0));
  __half2 h[4];
  memcpy(h, &raw, sizeof h);
#pragma unroll
  for (int w = 0; w < 4; w++) {
    const float2 f = __half22float2(h[w]);
    v[2 * w] = f.x * g.tile_scale;
    v[2 * w + 1] = f.y * g.tile_scale;
  }
}

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
    float v[kCols];
    if constexpr (kCols == 8) {
      half_products8(g, i, j0, v); /* filter_half_kernel's: one 16-byte load */
    } else {
#pragma unroll
      for (int u = 0; u < kCols; u++)
        v[u] = tile_product(g, i, j0 + u);
    }
    unsigned m = 0;
#pragma unroll
    for (int u = 0; u < kCols; u++) {
      s[u] = kind_score<kKind>(v[u], col_sq[u]);
      const bool pass = col_ok[u] && s[u] < thr && (!kGroups || row_grp != col_grp[u]) &&
                        !(g.self && g.col_global0 + j0 + u == g.row_global0 + i);
      m |= (unsigned)pass << u;
    }
    if (!__any_sync(kFullMask, m))
      continue;
    const int n = __popc(m);
    const int incl = warp_inclusive_sum(n);
    const int total = __shfl_sync(kFullMask, incl, 31);
    const int row = g.row_state0 + i;
    int base = 0;
    if (lane == 31)
      base = reserve_candidates(st, row, total, i);
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
    int pos = reserve_candidates(st, row, __popc(ok), (int)(kColumnFlag | (uint32_t)j));
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
 * Grid: (ceil(n_cols / 1024), ceil(n_rows / kRows)) in the wide layout, (ceil(n_cols / 128),
 * ceil(n_rows / (8 kRows))) in the narrow one (kNarrowBelow); block: 256 threads, each 4 adjacent
 * columns of kRows rows (8 independent 16-byte loads in flight per thread, 512 contiguous bytes per
 * warp and row). After a row's first tiles almost no pair passes, so this must run at memory
 * bandwidth. The common path is one max (or min) per product for the row test and one for the
 * column test, a warp vote, and nothing else: rows and columns with a possible pass go to the exact
 * passes out of line (filter_rows_exact, filter_cols_exact), which keeps the kernel small (ncu, one
 * H200, an 8192^2 tile: the earlier kernel with 16 rows and the exact passes unrolled inline ran
 * 150-160 us at 1.7-1.8 TB/s with 126-128 registers, 2 blocks per multiprocessor and warps stalled
 * mostly on instruction fetch). kGroups: pairs of one group are masked (exact MST searches). At
 * most 64 registers: 4 blocks (32 warps) per multiprocessor.
 */
template <typename T, int kKind, bool kGroups, bool kNarrow>
__global__ void __launch_bounds__(kFilterThreads, 4)
    filter_kernel(const __grid_constant__ SelectState st, const __grid_constant__ TileGeom g)
{
  constexpr int kRows = kFilterRows<T>;
  const int j0 = kNarrow ? blockIdx.x * kNarrowFilterCols + (threadIdx.x & 31) * 4
                         : blockIdx.x * kFilterCols + threadIdx.x * 4;
  const int i0 =
      kNarrow ? (blockIdx.y * kFilterWarps + (threadIdx.x >> 5)) * kRows : blockIdx.y * kRows;
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
 * The half-tile filter for DOT and ABS_DOT (the FP16 screens of every metric but euclidean; L2,
 * euclidean's, through l2_half_hits below): as filter_kernel, but each thread reads 8 adjacent
 * halves per 16-byte load (8 rows x 8 columns, the 128 bytes in flight per thread of the float
 * kernel) and the tests reduce in half precision: the largest product (magnitude) of a row or
 * column, converted and scaled once. Conversion and scaling by a power of two are monotone, so that
 * equals the largest of the scaled float products filter_kernel takes, bit for bit: the same rows
 * and columns go to the exact passes, and the same candidates pass. Grid: (ceil(n_cols / 2048),
 * ceil(n_rows / 8)), narrow (ceil(n_cols / 256), ceil(n_rows / 64)); needs ld, the tile's column
 * offset and every stage start a multiple of 8. Measured (one H200, ncu and the trace): 72-77 us
 * per 8192^2 tile, as the 4-column kernel, at 37-40% of DRAM bandwidth; selection per ordinary tile
 * in the loop 0.146-0.155 ms against 0.154-0.163 ms. The time is not the loads but the exact
 * passes: about one pass per row and column of a tile on average, each a chain of dependent loads
 * and an atomic. Moved into a kernel of their own (the filter queuing its warps with a pass), the
 * streaming part took 53 us and the exact passes 53-107 us: worse (0.180 ms per tile), so they stay
 * inline.
 */
constexpr int kHalfFilterRows = 8;
constexpr int kHalfFilterCols = kFilterThreads * 8;
constexpr int kNarrowHalfFilterCols = 32 * 8;

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

/* The thread's 8 x 8 halves of the tile (rows i0.., columns j0..), one 16-byte load a row; NaNs
 * for rows past the tile or columns starting past it. */
__device__ __forceinline__ void half_load_rows(const TileGeom &g, int i0, int j0,
                                               uint4 raw[kHalfFilterRows])
{
  const uint4 outside = make_uint4(0x7e007e00u, 0x7e007e00u, 0x7e007e00u, 0x7e007e00u);
  const __half *tile = static_cast<const __half *>(g.tile);
#pragma unroll
  for (int r = 0; r < kHalfFilterRows; r++) {
    const int i = i0 + r;
    raw[r] = (i < g.n_rows && j0 < g.n_cols)
                 ? __ldg(reinterpret_cast<const uint4 *>(tile + (size_t)i * g.ld + j0))
                 : outside;
  }
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
  /* Every threshold is read with the products, not after them, so that a thread waits on memory
   * once (the column thresholds read after the tests were a second round trip): ncu, 16,384^2
   * tiles of 400,000 x 295 early in the loop, 237-251 us a tile against 244-256 us. */
  float row_thr[kRows], col_thr[8];
#pragma unroll
  for (int r = 0; r < kRows; r++)
    row_thr[r] = i0 + r < g.n_rows ? st.thr[g.row_state0 + i0 + r] : -inf;
#pragma unroll
  for (int u = 0; u < 8; u++)
    col_thr[u] = g.do_cols && j0 + u < g.n_cols ? st.thr[g.col_state0 + j0 + u] : -inf;
  uint4 raw[kRows];
  half_load_rows(g, i0, j0, raw);
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
      const float largest =
          (u % 2 ? __high2float(col_max[u / 2]) : __low2float(col_max[u / 2])) * g.tile_scale;
      cols |= (unsigned)(1.0f - largest < col_thr[u]) << u;
    }
  }
  *row_hits = rows;
  *col_hits = cols;
}

/*
 * The fast tests of filter_half_kernel for L2 scores (the euclidean FP16 screen), in half
 * precision: two operations per product (a subtraction and a maximum, on pairs of halves) for the
 * row test and two for the column test, where filter_kernel converts, scales and takes a float
 * score for each. Each product is tested as l2_half_flag (tile_filter_l2.cuh, with the proof that
 * it flags every pair the exact passes take), a row or column at once: the largest of its
 * rnd(v - hb) against its bound (the largest of halves is exact, NaNs are ignored), so the same
 * pairs pass as with filter_kernel. Needs l2_half_scale_ok(tile_scale).
 * Measured (one H200, ncu, ordinary 16,384^2 tiles of 500,001 x 50 euclidean k = 30): 293 us a
 * tile against 398 us with filter_kernel (162 M warp instructions against 279 M; the rest is the
 * exact passes), the same candidates and merges (trace level 2) and the same lists.
 */
__device__ __forceinline__ void l2_half_hits(const SelectState &st, const TileGeom &g, int i0,
                                             int j0, unsigned *row_hits, unsigned *col_hits)
{
  constexpr int kRows = kHalfFilterRows;
  const float inf = __int_as_float(0x7f800000);
  const float inv = 0.5f / g.tile_scale; /* exact: a power of two */
  uint4 raw[kRows];
  half_load_rows(g, i0, j0, raw);
  /* per row: (R'_i, ha_i); per column pair: hb */
  __half2 row_bound[kRows];
#pragma unroll
  for (int r = 0; r < kRows; r++) {
    const bool in = i0 + r < g.n_rows;
    const float thr = in ? st.thr[g.row_state0 + i0 + r] : -inf;
    const float sq = in && g.do_cols ? g.sqnorms[g.row_global0 + i0 + r] : 0.0f;
    row_bound[r] = __halves2half2(l2_half_bound(thr, inv), l2_half_floor(sq * inv));
  }
  __half2 hb[4];
#pragma unroll
  for (int w = 0; w < 4; w++) {
    const int j = j0 + 2 * w;
    const float sq0 = j < g.n_cols ? g.sqnorms[g.col_global0 + j] : 0.0f;
    const float sq1 = j + 1 < g.n_cols ? g.sqnorms[g.col_global0 + j + 1] : 0.0f;
    hb[w] = __halves2half2(l2_half_floor(sq0 * inv), l2_half_floor(sq1 * inv));
  }
  unsigned rows = 0;
  const __half2 nan2 = __halves2half2(__ushort_as_half(0x7e00), __ushort_as_half(0x7e00));
  __half2 col_max[4] = {nan2, nan2, nan2, nan2};
#pragma unroll
  for (int r = 0; r < kRows; r++) {
    uint4 v = raw[r];
    if (j0 + 8 > g.n_cols)
      v = half_mask_columns(v, j0, g.n_cols);
    __half2 h[4];
    memcpy(h, &v, sizeof h);
    rows |= (unsigned)l2_half_row_flag(h, hb, __low2half(row_bound[r])) << r;
    if (g.do_cols) {
      const __half2 a = __half2half2(__high2half(row_bound[r]));
#pragma unroll
      for (int w = 0; w < 4; w++)
        col_max[w] = __hmax2(col_max[w], __hsub2(h[w], a));
    }
  }
  unsigned cols = 0;
  if (g.do_cols) {
#pragma unroll
    for (int u = 0; u < 8; u++) {
      const int j = j0 + u;
      const float thr = j < g.n_cols ? st.thr[g.col_state0 + j] : -inf;
      const __half largest = u % 2 ? __high2half(col_max[u / 2]) : __low2half(col_max[u / 2]);
      cols |= (unsigned)__hge(largest, l2_half_bound(thr, inv)) << u;
    }
  }
  *row_hits = rows;
  *col_hits = cols;
}

template <int kKind, bool kGroups, bool kNarrow>
__global__ void __launch_bounds__(kFilterThreads, 4)
    filter_half_kernel(const __grid_constant__ SelectState st, const __grid_constant__ TileGeom g)
{
  const int j0 = kNarrow ? blockIdx.x * kNarrowHalfFilterCols + (threadIdx.x & 31) * 8
                         : blockIdx.x * kHalfFilterCols + threadIdx.x * 8;
  const int i0 = kNarrow ? (blockIdx.y * kFilterWarps + (threadIdx.x >> 5)) * kHalfFilterRows
                         : blockIdx.y * kHalfFilterRows;
  unsigned row_hits, col_hits;
  if (kKind == KNNWB_SCORE_L2)
    l2_half_hits(st, g, i0, j0, &row_hits, &col_hits);
  else
    half_hits<kKind>(st, g, i0, j0, &row_hits, &col_hits);
  const unsigned warp_rows = __reduce_or_sync(kFullMask, row_hits);
  if (warp_rows)
    filter_rows_exact<8, kKind, kGroups>(st, g, warp_rows, i0, j0);
  if (col_hits)
    filter_cols_exact<kHalfFilterRows, kKind, kGroups>(st, g, col_hits, i0, j0);
}

/* The narrow layout below kNarrowBelow columns; KNNWB_CUDA_NARROW_FILTER=0 (read once): the wide
 * layout for every tile, to compare. */
bool narrow_layout(const TileGeom &geom)
{
  static const bool off = [] {
    const char *v = getenv("KNNWB_CUDA_NARROW_FILTER");
    return v != nullptr && strcmp(v, "0") == 0;
  }();
  return geom.n_cols < kNarrowBelow && !off;
}

/* The filter kernel of the tile's element type, score kind, group masking and layout. */
template <typename T, bool kGroups, bool kNarrow>
void launch_filter_layout(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  constexpr int kCols = kNarrow ? kNarrowFilterCols : kFilterCols;
  constexpr int kRowsBlock = kNarrow ? kFilterRows<T> * kFilterWarps : kFilterRows<T>;
  const dim3 grid((geom.n_cols + kCols - 1) / kCols, (geom.n_rows + kRowsBlock - 1) / kRowsBlock);
  switch (geom.kind) {
  case KNNWB_SCORE_DOT:
    filter_kernel<T, KNNWB_SCORE_DOT, kGroups, kNarrow>
        <<<grid, kFilterThreads, 0, stream>>>(state, geom);
    break;
  case KNNWB_SCORE_ABS_DOT:
    filter_kernel<T, KNNWB_SCORE_ABS_DOT, kGroups, kNarrow>
        <<<grid, kFilterThreads, 0, stream>>>(state, geom);
    break;
  case KNNWB_SCORE_L2:
    filter_kernel<T, KNNWB_SCORE_L2, kGroups, kNarrow>
        <<<grid, kFilterThreads, 0, stream>>>(state, geom);
    break;
  default:
    filter_kernel<T, KNNWB_SCORE_L1, kGroups, kNarrow>
        <<<grid, kFilterThreads, 0, stream>>>(state, geom);
    break;
  }
}

template <typename T, bool kGroups>
void launch_filter_kind(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (narrow_layout(geom))
    launch_filter_layout<T, kGroups, true>(state, geom, stream);
  else
    launch_filter_layout<T, kGroups, false>(state, geom, stream);
}

/* KNNWB_CUDA_HALF_FILTER=4: the 4-column filter of float tests (filter_kernel) for half tiles of
 * every kind, to compare. */
bool half_filter_narrow(void)
{
  static int narrow = -1;
  if (narrow < 0) {
    const char *v = getenv("KNNWB_CUDA_HALF_FILTER");
    narrow = v != nullptr && strcmp(v, "4") == 0;
  }
  return narrow != 0;
}

/* The half-tile filter of DOT, ABS_DOT and L2 (filter_half_kernel). */
template <int kKind, bool kGroups, bool kNarrow>
void launch_filter_half_layout(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  constexpr int kCols = kNarrow ? kNarrowHalfFilterCols : kHalfFilterCols;
  constexpr int kRowsBlock = kNarrow ? kHalfFilterRows * kFilterWarps : kHalfFilterRows;
  const dim3 grid((geom.n_cols + kCols - 1) / kCols, (geom.n_rows + kRowsBlock - 1) / kRowsBlock);
  filter_half_kernel<kKind, kGroups, kNarrow><<<grid, kFilterThreads, 0, stream>>>(state, geom);
}

template <int kKind, bool kGroups>
void launch_filter_half_kind(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (narrow_layout(geom))
    launch_filter_half_layout<kKind, kGroups, true>(state, geom, stream);
  else
    launch_filter_half_layout<kKind, kGroups, false>(state, geom, stream);
}

template <bool kGroups>
void launch_filter_half(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (geom.kind == KNNWB_SCORE_DOT)
    launch_filter_half_kind<KNNWB_SCORE_DOT, kGroups>(state, geom, stream);
  else if (geom.kind == KNNWB_SCORE_L2)
    launch_filter_half_kind<KNNWB_SCORE_L2, kGroups>(state, geom, stream);
  else
    launch_filter_half_kind<KNNWB_SCORE_ABS_DOT, kGroups>(state, geom, stream);
}

/* Whether l2_half_hits may test the tile (its scale a power of two far from float's limits: the
 * scale of any real data). */
bool l2_half_test_exact(const TileGeom &geom)
{
  return geom.kind == KNNWB_SCORE_L2 && l2_half_scale_ok(geom.tile_scale);
}

} // namespace

void launch_filter(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (geom.half_tile &&
      (geom.kind == KNNWB_SCORE_DOT || geom.kind == KNNWB_SCORE_ABS_DOT ||
       l2_half_test_exact(geom)) &&
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

} // namespace knnwb_cuda
