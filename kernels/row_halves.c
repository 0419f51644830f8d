/*
 * Rows of floats to halves on the host (row_halves.h). Why: the rows' upload sent the floats and
 * converted them on the device (launch_rows_to_half); converted while they are copied into the
 * pinned staging, half the bytes cross the bus and the staging's writes halve, where the host's
 * copy threads and the bus were what the search waited for (its set-up waited 0.03-0.08 s for the
 * rows uploaded ahead, 1.8 GB of floats at 1,533,876 x 295). The values are the device's: the
 * product with 2^exponent in float (one IEEE multiplication, as the device's), then rounded to the
 * nearest half, ties to even.
 */
#include "row_halves.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KNNWB_ROW_HALVES_X86 1
#endif

uint16_t knnwb_half_from_float(float x)
{
  uint32_t f;
  memcpy(&f, &x, sizeof f);
  const uint32_t sign = (f >> 16) & 0x8000u, exp = (f >> 23) & 0xffu;
  uint32_t mant = f & 0x7fffffu;
  if (exp == 0xffu) /* infinity, or NaN made quiet with its payload's top bits */
    return (uint16_t)(sign | 0x7c00u | (mant != 0 ? 0x200u | (mant >> 13) : 0u));
  const int e = (int)exp - 127 + 15; /* the half's biased exponent */
  if (e >= 31)
    return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) { /* a half subnormal, or zero: units of 2^-24 */
    if (e < -10)
      return (uint16_t)sign; /* below 2^-25: nearer zero */
    mant |= 0x800000u;
    const int shift = 14 - e; /* 14 .. 24 */
    uint32_t h = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    h += rest > halfway || (rest == halfway && (h & 1u));
    return (uint16_t)(sign | h); /* 0x400 when it rounds up to the smallest normal half */
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  h += rest > 0x1000u || (rest == 0x1000u && (h & 1u)); /* a carry may reach infinity: right */
  return (uint16_t)(sign | h);
}

/* One row the portable way. */
static void knnwb_row_halves_one(uint16_t *dst, const float *src, size_t from, size_t dim,
                                 float scale)
{
  for (size_t j = from; j < dim; j++)
    dst[j] = knnwb_half_from_float(src[j] * scale);
}

#ifdef KNNWB_ROW_HALVES_X86
/* One row, 8 values an instruction (the same multiplication, then VCVTPS2PH's round to nearest
 * even, which the tests hold to knnwb_half_from_float bit for bit). */
__attribute__((target("avx,f16c"))) static void
knnwb_row_halves_f16c(uint16_t *dst, const float *src, size_t dim, float scale)
{
  const __m256 s = _mm256_set1_ps(scale);
  size_t j = 0;
  for (; j + 8 <= dim; j += 8) {
    const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(src + j), s);
    _mm_storeu_si128((__m128i *)(void *)(dst + j), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
  knnwb_row_halves_one(dst, src, j, dim, scale);
}
#endif

int knnwb_row_halves_fast(void)
{
#ifdef KNNWB_ROW_HALVES_X86
  return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
#else
  return 0;
#endif
}

void knnwb_row_halves(uint16_t *dst, size_t dpad, const float *src, size_t rows, size_t dim,
                      int exponent)
{
  const float scale = ldexpf(1.0f, exponent); /* as the device's std::ldexp(1.0f, exponent) */
#ifdef KNNWB_ROW_HALVES_X86
  const int fast = knnwb_row_halves_fast();
#endif
  for (size_t i = 0; i < rows; i++) {
    uint16_t *row = dst + i * dpad;
#ifdef KNNWB_ROW_HALVES_X86
    if (fast)
      knnwb_row_halves_f16c(row, src + i * dim, dim, scale);
    else
#endif
      knnwb_row_halves_one(row, src + i * dim, 0, dim, scale);
    memset(row + dim, 0, (dpad - dim) * sizeof *row);
  }
}
