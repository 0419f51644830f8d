/* Doubles (and floats) as the shortest decimal that reads back identically, without printf in the
 * common case.
 *
 * The text is exactly what the shortest of printf's %.15g, %.16g and %.17g that strtod turns back
 * into the same double would give: %.15g already is the shortest round-trip form whenever one of
 * at most 15 significant digits exists (a double's half-gap is below half a unit of the 15th
 * digit, so the nearest 15-digit decimal is that form with zeros appended, which %g strips), and
 * the nearest P-digit decimal round-trips whenever any P-digit decimal does.
 *
 * The fast path computes the correctly rounded P-digit decimal exactly with 128-bit integers:
 * v = m * 2^e (m < 2^53, e < 0) times 10^s is m * 10^s / 2^-e, exact while m * 10^s < 2^128
 * (s <= 22) and -e < 128. That covers |v| in about [1e-5, 2^53), where distances and coordinates
 * live; anything else (zero aside) goes through snprintf + strtod, the reference this file is
 * tested against bit for bit.
 *
 * Floats (the matrix writers) the same way: the shortest of %.6g to %.9g that strtof reads back as
 * the same float, v = m * 2^e with m < 2^24, checked against the float's own rounding interval
 * (strtof rounds the decimal directly to float). printf took 0.4 us a value with its strtof
 * check: a 1,533,876 x 295 metafeature TSV wrote at 15 MB/s. */
#include "io.h"

#include <math.h>
#include <stdlib.h>

static const uint64_t knnwb_format_pow10[20] = {1ULL,
                                                10ULL,
                                                100ULL,
                                                1000ULL,
                                                10000ULL,
                                                100000ULL,
                                                1000000ULL,
                                                10000000ULL,
                                                100000000ULL,
                                                1000000000ULL,
                                                10000000000ULL,
                                                100000000000ULL,
                                                1000000000000ULL,
                                                10000000000000ULL,
                                                100000000000000ULL,
                                                1000000000000000ULL,
                                                10000000000000000ULL,
                                                100000000000000000ULL,
                                                1000000000000000000ULL,
                                                10000000000000000000ULL};

typedef unsigned __int128 knnwb_u128;

static knnwb_u128 knnwb_format_pow10_wide(int s)
{
  knnwb_u128 p = 1;
  for (; s >= 19; s -= 19)
    p *= knnwb_format_pow10[19];
  return p * knnwb_format_pow10[s];
}

/* The reference: printf, checked by strtod. */
static int knnwb_format_double_slow(char *buffer, size_t size, double value)
{
  int n = 0;
  for (int precision = 15; precision <= 17; precision++) {
    n = snprintf(buffer, size, "%.*g", precision, value);
    if (precision == 17 || !isfinite(value) ||
        strtod_l(buffer, NULL, knnwb_formats_c_locale()) == value)
      break;
  }
  return n;
}

/* Writes digits (exactly precision of them, the value digits * 10^(exponent - precision + 1)) the
 * way %.{precision}g does: fixed notation when -4 <= exponent < precision, else d.ddde+XX; trailing
 * zeros of the fraction dropped, and the point with them. Returns the length; needs 32 bytes. */
static int knnwb_format_g(char *out, gboolean negative, uint64_t digits, int precision,
                          int exponent)
{
  char text[20];
  for (int i = precision - 1; i >= 0; i--) {
    text[i] = (char)('0' + digits % 10);
    digits /= 10;
  }
  int significant = precision;
  while (significant > 1 && text[significant - 1] == '0')
    significant--;
  char *p = out;
  if (negative)
    *p++ = '-';
  if (exponent >= -4 && exponent < precision) {
    if (exponent >= 0) {
      int integer_digits = exponent + 1;
      for (int i = 0; i < integer_digits; i++)
        *p++ = text[i]; /* significant <= precision, and text holds zeros past it */
      if (significant > integer_digits) {
        *p++ = '.';
        for (int i = integer_digits; i < significant; i++)
          *p++ = text[i];
      }
    } else {
      *p++ = '0';
      *p++ = '.';
      for (int i = 0; i < -exponent - 1; i++)
        *p++ = '0';
      for (int i = 0; i < significant; i++)
        *p++ = text[i];
    }
  } else {
    *p++ = text[0];
    if (significant > 1) {
      *p++ = '.';
      for (int i = 1; i < significant; i++)
        *p++ = text[i];
    }
    *p++ = 'e';
    int x = exponent;
    *p++ = x < 0 ? '-' : '+';
    x = abs(x);
    if (x >= 100)
      *p++ = (char)('0' + x / 100);
    *p++ = (char)('0' + x / 10 % 10);
    *p++ = (char)('0' + x % 10);
  }
  *p = '\0';
  return (int)(p - out);
}

/* The fast path for v = m / 2^shift (m holding `bits` significant bits with the leading one, v
 * normal in its own type): the shortest of precisions first..last whose correctly rounded decimal
 * lies inside v's rounding interval in that type (so that the type's strtod/strtof gives v back).
 * The last precision is taken without the check. Returns the length, or -1 where the exact
 * integer arithmetic does not reach (the caller falls back to printf). */
static int knnwb_format_shortest(char *buffer, gboolean negative, uint64_t m, int shift, int bits,
                                 double magnitude, int first, int last)
{
  if (shift <= 0 || shift >= 120)
    return -1;
  /* floor(log10(v)), corrected below when the estimate is off by one. */
  int exponent = (int)floor(log10(magnitude));
  const gboolean power_of_two = m == UINT64_C(1) << (bits - 1);
  for (int precision = first; precision <= last; precision++) {
    int x = exponent;
    uint64_t q = 0;
    knnwb_u128 remainder = 0, half = (knnwb_u128)1 << (shift - 1), scale = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
      int s = precision - 1 - x;
      if (s < 0 || s > 22)
        return -1;
      scale = knnwb_format_pow10_wide(s);
      knnwb_u128 product = (knnwb_u128)m * scale;
      knnwb_u128 quotient = product >> shift;
      remainder = product & (((knnwb_u128)1 << shift) - 1);
      if (quotient >= knnwb_format_pow10[precision]) {
        x++;
        continue;
      }
      if (quotient < knnwb_format_pow10[precision - 1]) {
        x--;
        continue;
      }
      q = (uint64_t)quotient;
      break;
    }
    if (q == 0)
      return -1;
    /* Round half to even on the exact value, as glibc's printf does. */
    gboolean up = remainder > half || (remainder == half && (q & 1) != 0);
    /* d - v in units of 1 / (10^s 2^shift): the decimal's distance from v, exactly. */
    knnwb_u128 distance = up ? ((knnwb_u128)1 << shift) - remainder : remainder;
    gboolean below = !up && remainder != 0; /* d < v */
    if (up) {
      q++;
      if (q == knnwb_format_pow10[precision]) {
        q = knnwb_format_pow10[precision - 1];
        x++;
      }
    }
    /* strtod gives v back when d lies within v's rounding interval: half a gap on each side,
     * the lower gap halved at a power of two; on the boundary, ties go to the even mantissa. */
    knnwb_u128 times = below && power_of_two ? 4 : 2; /* the lower gap halves at 2^n */
    gboolean round_trips = precision == last || distance * times < scale ||
                           (distance * times == scale && (m & 1) == 0);
    if (round_trips)
      return knnwb_format_g(buffer, negative, q, precision, x);
  }
  return -1; /* not reached */
}

int knnwb_formats_format_double(char *buffer, size_t size, double value)
{
  uint64_t bits;
  memcpy(&bits, &value, sizeof bits);
  gboolean negative = (bits >> 63) != 0;
  int biased = (int)((bits >> 52) & 0x7FF);
  uint64_t fraction = bits & ((UINT64_C(1) << 52) - 1);
  if (size < 32)
    return knnwb_format_double_slow(buffer, size, value);
  if (biased == 0 && fraction == 0) {
    /* %g prints the sign of -0 too. */
    return knnwb_format_g(buffer, negative, 0, 1, 0);
  }
  if (biased == 0 || biased == 0x7FF)
    return knnwb_format_double_slow(buffer, size, value);
  uint64_t m = fraction | (UINT64_C(1) << 52);
  int n = knnwb_format_shortest(buffer, negative, m, 1075 - biased, 53, fabs(value), 15, 17);
  return n >= 0 ? n : knnwb_format_double_slow(buffer, size, value);
}

/* The float reference: printf, checked by strtof. */
static int knnwb_format_float_slow(char *buffer, size_t size, float value)
{
  int n = 0;
  for (int precision = 6; precision <= 9; precision++) {
    n = snprintf(buffer, size, "%.*g", precision, (double)value);
    if (precision == 9 || !isfinite(value) ||
        strtof_l(buffer, NULL, knnwb_formats_c_locale()) == value)
      break;
  }
  return n;
}

int knnwb_formats_format_float(char *buffer, size_t size, float value)
{
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  gboolean negative = (bits >> 31) != 0;
  int biased = (int)((bits >> 23) & 0xFF);
  uint32_t fraction = bits & ((UINT32_C(1) << 23) - 1);
  if (size < 32)
    return knnwb_format_float_slow(buffer, size, value);
  if (biased == 0 && fraction == 0)
    return knnwb_format_g(buffer, negative, 0, 1, 0);
  if (biased == 0 || biased == 0xFF)
    return knnwb_format_float_slow(buffer, size, value);
  uint64_t m = fraction | (UINT32_C(1) << 23);
  int n = knnwb_format_shortest(buffer, negative, m, 150 - biased, 24, fabs((double)value), 6, 9);
  return n >= 0 ? n : knnwb_format_float_slow(buffer, size, value);
}
