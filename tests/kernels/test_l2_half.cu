/*
 * The euclidean half filter's test (kernels/tile_filter_l2.cuh), host only: on random and
 * adversarial products, squared norms, thresholds and scales, every pair the exact passes take
 * (the float score below the threshold, with or without a fused multiply-add) is flagged, so the
 * GPU's half tiles give the same candidates as the float filter; and a pair whose score is clearly
 * above the threshold is not, so the test still filters. The GPU tests (test_cuda_knn,
 * test_cuda_select) see the same on whole searches, but only where a run happens to meet a tie.
 */
#include <glib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "tile_filter_l2.cuh"

using knnwb_cuda::l2_half_bound;
using knnwb_cuda::l2_half_flag;
using knnwb_cuda::l2_half_floor;
using knnwb_cuda::l2_half_row_flag;
using knnwb_cuda::l2_half_scale_ok;

/* Whether the exact passes take the pair: the float score against the threshold, as the kernel's
 * kind_score computes it, once with the multiply-add fused and once rounded twice. */
static bool exact_pass(float p, float sq, float thr)
{
  volatile float twice = 2.0f * p; /* volatile: no contraction into a multiply-add */
  const float plain = sq - twice;
  return fmaf(-2.0f, p, sq) < thr || plain < thr;
}

static __half half_of_bits(uint16_t bits)
{
  __half_raw raw;
  raw.x = bits;
  return __half(raw);
}

/* A finite half: any bit pattern but inf and NaN (subnormals and zeros included), or an ordinary
 * product in [-1, 1]. */
static __half random_half(std::mt19937_64 &rng)
{
  if (rng() % 2)
    return __float2half(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng));
  uint16_t bits;
  do
    bits = (uint16_t)rng();
  while ((bits & 0x7c00u) == 0x7c00u);
  return half_of_bits(bits);
}

/* A squared norm for scale s: zero, a half's grid point times 2s (b exactly a half) or one float
 * step beside it, or a magnitude spread over 2^-30 .. 2^30 of 2s. */
static float random_sq(std::mt19937_64 &rng, float s)
{
  switch (rng() % 4) {
  case 0:
    return rng() % 8 ? 2.0f * s * __half2float(__habs(random_half(rng))) : 0.0f;
  case 1:
    return nextafterf(2.0f * s * __half2float(__habs(random_half(rng))),
                      rng() % 2 ? INFINITY : 0.0f);
  default:
    return ldexpf(2.0f * s * std::uniform_real_distribution<float>(0.5f, 1.0f)(rng),
                  (int)(rng() % 61) - 30);
  }
}

/* A threshold near the pair's own float score (equal, a few float steps either side, or a
 * relative step of 2^-12 .. 2^-4), or anywhere, or infinite. */
static float random_threshold(std::mt19937_64 &rng, float score)
{
  float thr = score;
  switch (rng() % 6) {
  case 0:
    break;
  case 1:
    for (int t = (int)(rng() % 4); t >= 0; t--)
      thr = nextafterf(thr, rng() % 2 ? INFINITY : -INFINITY);
    break;
  case 2:
  case 3:
    thr = score + (rng() % 2 ? 1.0f : -1.0f) * ldexpf(fabsf(score) + 1e-30f, -(int)(rng() % 9) - 4);
    break;
  case 4:
    thr = ldexpf(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng), (int)(rng() % 80) - 40);
    break;
  default:
    thr = rng() % 2 ? INFINITY : -INFINITY;
  }
  return thr;
}

/* Every pair the exact passes take is flagged; a pair clearly above its threshold (beyond the
 * roundings' reach, where b and the bound are inside half's range) is not. */
static void test_flags_every_exact_pair(void)
{
  std::mt19937_64 rng(20261129);
  long exact = 0, flagged = 0, far = 0;
  for (long t = 0; t < 2000000; t++) {
    const float s = ldexpf(1.0f, (int)(rng() % 121) - 60);
    g_assert_true(l2_half_scale_ok(s));
    const float inv = 0.5f / s;
    const __half v = random_half(rng);
    const float p = __half2float(v) * s; /* exact: s is a power of two */
    const float sq = random_sq(rng, s);
    const float thr = random_threshold(rng, fmaf(-2.0f, p, sq));
    const bool flag = l2_half_flag(v, sq, thr, inv);
    if (exact_pass(p, sq, thr)) {
      exact++;
      if (!flag)
        g_error("pair not flagged: v = %a (p = %a), sq = %a, thr = %a, s = %a", __half2float(v), p,
                sq, thr, s);
    }
    flagged += flag;
    /* flag => score <= thr + 2^-9 (|thr| + sq + 2 |p|) + 2s 2^-22 (the roundings of hb, R' and
     * the subtraction), with b and -thr / 2s inside half's range */
    const double b = (double)sq * inv, bound = -(double)thr * inv;
    if (std::isfinite(thr) && b < 60000.0 && fabs(bound) < 60000.0) {
      const double score = (double)sq - 2.0 * (double)p;
      const double reach =
          ldexp(fabs((double)thr) + (double)sq + 2.0 * fabs((double)p), -9) + ldexp(2.0 * s, -22);
      if (score > (double)thr + 1.01 * reach) {
        far++;
        if (flag)
          g_error("pair flagged far above its threshold: v = %a, sq = %a, thr = %a, s = %a",
                  __half2float(v), sq, thr, s);
      }
    }
  }
  /* the draws reach both sides of the threshold often */
  g_assert_cmpint(exact, >, 200000);
  g_assert_cmpint(far, >, 200000);
  g_assert_cmpint(flagged, >=, exact);
}

/* Infinite thresholds, NaN products, squared norms beyond half's range, and the scales the kernel
 * refuses. */
static void test_special_values(void)
{
  const float inv = 0.5f;
  const __half nan = half_of_bits(0x7e00u), one = __float2half(1.0f);
  g_assert_true(l2_half_flag(one, 1.0f, INFINITY, inv));   /* a fresh row: every product */
  g_assert_true(l2_half_flag(one, 1e38f, INFINITY, inv));  /* even beside a huge norm */
  g_assert_false(l2_half_flag(one, 0.0f, -INFINITY, inv)); /* no such row: none */
  g_assert_false(l2_half_flag(nan, 1.0f, INFINITY, inv));  /* outside the tile: none */
  g_assert_true(l2_half_flag(one, 1e30f, 1e31f, inv));     /* b past half's range: 65504 */
  g_assert_cmpfloat(__half2float(l2_half_floor(INFINITY)), ==, 65504.0f);
  g_assert_cmpfloat(__half2float(l2_half_floor(1.0f + 1e-6f)), ==, 1.0f);
  g_assert_cmpfloat(__half2float(l2_half_bound(-1.0f - 1e-6f, 1.0f)), ==, 1.0f);
  g_assert_true(std::isinf(__half2float(l2_half_bound(INFINITY, inv))));
  g_assert_true(l2_half_scale_ok(1.0f) && l2_half_scale_ok(ldexpf(1.0f, -60)) &&
                l2_half_scale_ok(ldexpf(1.0f, 60)));
  g_assert_false(l2_half_scale_ok(3.0f) || l2_half_scale_ok(ldexpf(1.0f, -61)) ||
                 l2_half_scale_ok(ldexpf(1.0f, 61)) || l2_half_scale_ok(0.0f) ||
                 l2_half_scale_ok(INFINITY) || l2_half_scale_ok(NAN));
}

/* A row of 8 products at once (NaNs among them) flags exactly when one of them does. */
static void test_row_flag(void)
{
  std::mt19937_64 rng(7);
  const __half nan = half_of_bits(0x7e00u);
  for (int t = 0; t < 200000; t++) {
    const float s = ldexpf(1.0f, (int)(rng() % 21) - 10), inv = 0.5f / s;
    __half v[8], floor_of[8];
    float sq[8];
    for (int u = 0; u < 8; u++) {
      v[u] = rng() % 5 ? random_half(rng) : nan;
      sq[u] = random_sq(rng, s);
      floor_of[u] = l2_half_floor(sq[u] * inv);
    }
    const float thr = random_threshold(rng, fmaf(-2.0f, __half2float(v[0]) * s, sq[0]));
    bool any = false;
    for (int u = 0; u < 8; u++)
      any = any || l2_half_flag(v[u], sq[u], thr, inv);
    __half2 h[4], hb[4];
    for (int w = 0; w < 4; w++) {
      h[w] = __halves2half2(v[2 * w], v[2 * w + 1]);
      hb[w] = __halves2half2(floor_of[2 * w], floor_of[2 * w + 1]);
    }
    g_assert_cmpint(l2_half_row_flag(h, hb, l2_half_bound(thr, inv)), ==, any);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/l2-half/flags-every-exact-pair", test_flags_every_exact_pair);
  g_test_add_func("/kernels/l2-half/special-values", test_special_values);
  g_test_add_func("/kernels/l2-half/row-flag", test_row_flag);
  return g_test_run();
}
