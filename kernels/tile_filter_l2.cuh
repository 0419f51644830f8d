/*
 * The euclidean half filter's test of one product (tile_filter.cu, l2_half_hits), host and device
 * code, so that a host test can check its contract on any values (tests/kernels/test_l2_half.cu).
 *
 * The exact passes take pair (i, j) of an L2 half tile when fl(sq_j - 2 p) < thr_i, with p = v s
 * the product (v the half value, s = tile_scale a power of two, so p is exact). Rounding is
 * monotone and thr_i is a float, so that implies sq_j - 2 p < thr_i in real numbers:
 * v - b_j > R_i, with b_j = sq_j / 2s and R_i = -thr_i / 2s (exact in float when s is a power of
 * two well inside float's range: l2_half_scale_ok). Take hb_j = l2_half_floor(b_j), the largest
 * half <= b_j, and R'_i = l2_half_bound(thr_i, 1 / 2s), the largest half <= R_i: then
 * v - hb_j >= v - b_j > R_i, and half subtraction rounds monotonically, so
 * rnd(v - hb_j) >= rnd(R_i) >= R'_i (whatever rnd's direction: rounding R down keeps the proof from
 * depending on it, host emulations included). The test rnd(v - hb_j) >= R'_i therefore flags every
 * pair the exact passes take, and some within a half's rounding of the threshold, which they drop
 * again: the same pairs pass as with the float test. Columns alike, with a_i = sq_i / 2s and thr_j.
 * NaN products (outside the tile) fail every comparison; +inf thresholds (fresh rows) give R' =
 * -inf, so every product is flagged; -inf (no such row or column) gives +inf, none.
 */
#ifndef KNNWB_TILE_FILTER_L2_CUH
#define KNNWB_TILE_FILTER_L2_CUH

#include <cuda_fp16.h>
#include <math.h>

namespace knnwb_cuda
{

/** Whether a tile of scale s (its half products times s are the dot products) may be tested in
 * half precision: s a power of two between 2^-60 and 2^60, so 0.5 / s and the bounds are exact. */
__host__ __device__ inline bool l2_half_scale_ok(float s)
{
  int exponent = 0;
  return frexpf(s, &exponent) == 0.5f && exponent >= -59 && exponent <= 61; /* s = 2^(exponent-1) */
}

/** The largest half <= x for x >= 0 (x above the largest half, +inf and NaN: the largest half). */
__host__ __device__ inline __half l2_half_floor(float x)
{
  return __float2half_rd(fminf(x, 65504.0f));
}

/** R' of a threshold thr (inv = 0.5 / s): the largest half <= -thr inv (-inf for thr = +inf). */
__host__ __device__ inline __half l2_half_bound(float thr, float inv)
{
  return __float2half_rd(-thr * inv);
}

/** The test of one product: half value v against its column's squared norm sq and its row's
 * threshold thr (inv = 0.5 / s). True for every pair the exact passes take (see above). */
__host__ __device__ inline bool l2_half_flag(__half v, float sq, float thr, float inv)
{
  return __hge(__hsub(v, l2_half_floor(sq * inv)), l2_half_bound(thr, inv));
}

/** Whether l2_half_flag holds for any of 8 products of one row (h: 4 pairs of halves; NaN: not a
 * pair) against their columns' floors hb and the row's bound: the largest rnd(v - hb) (a maximum
 * of halves is exact, NaNs are ignored) against the bound, 11 operations for 8 products. */
__host__ __device__ inline bool l2_half_row_flag(const __half2 h[4], const __half2 hb[4],
                                                 __half bound)
{
  const __half2 m2 = __hmax2(__hmax2(__hsub2(h[0], hb[0]), __hsub2(h[1], hb[1])),
                             __hmax2(__hsub2(h[2], hb[2]), __hsub2(h[3], hb[3])));
  return __hge(__hmax(__low2half(m2), __high2half(m2)), bound);
}

} // namespace knnwb_cuda

#endif
