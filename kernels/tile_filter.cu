/*
 * The threshold filter of a finished tile (see select_internal.h for the state).
 *
 * filter_kernel reads a tile once and, for both the row pass and (self jobs, off-diagonal tiles)
 * the column pass, appends pairs whose score beats the row's threshold to that row's candidate
 * buffer and queues rows that crossed lazy_limit for the merge (tile_select.cu). After the first
 * tile of a row almost nothing passes, so the kernel is a streaming read. Half-precision tiles of
 * DOT and ABS_DOT scores have kernels of their own (tile_filter_half.cu).
 */
#include "tile_filter_exact.cuh"

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

} // namespace

void launch_filter(const SelectState &state, const TileGeom &geom, cudaStream_t stream)
{
  if (geom.half_tile && (geom.kind == KNNWB_SCORE_DOT || geom.kind == KNNWB_SCORE_ABS_DOT) &&
      !half_filter_narrow()) {
    launch_filter_half(state, geom, stream);
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
