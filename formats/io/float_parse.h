/* formats/io/float_parse: exact decimal-to-float parsing over a buffer (no NUL terminator, no
 * locale), and the C locale the writers print numbers in. Part of the io unit's interface (io.h
 * includes it); the fast path is inline because the readers' row loops call it per value. */
#ifndef KNNWB_FORMATS_FLOAT_PARSE_H
#define KNNWB_FORMATS_FLOAT_PARSE_H

#include <glib.h>
#include <locale.h>
#include <stdint.h>
#include <string.h>
#include <knnwb/text_fields.h>

G_BEGIN_DECLS

/**
 * Parses a decimal number ([+-]digits[.digits][(e|E)[+-]digits]) starting exactly at p (no blanks
 * skipped, no NUL needed) and ending at or before end. *stop is set past the number. The result is
 * the float nearest to the decimal value, identical to strtof in the C locale: numbers of at most
 * 19 digits are one exact double operation followed by a rounding that is checked for the
 * double-rounding hazard (knnwb_formats_parse_float below, inlined into the row loops); other
 * cases go through this general version, which falls back to strtof_l.
 */
KnnwbFloatStatus knnwb_formats_parse_float_general(const char *p, const char *end, float *value,
                                                   const char **stop);

/** Exact powers of ten 10^0 .. 10^22 as doubles. */
extern const double knnwb_formats_powers_of_ten[23];

/** The inlined common case of knnwb_formats_parse_float_general (same contract). */
static inline KnnwbFloatStatus knnwb_formats_parse_float(const char *p, const char *end,
                                                         float *value, const char **stop)
{
  const char *s = p;
  int negative = 0;
  if (s < end && (*s == '-' || *s == '+')) {
    negative = *s == '-';
    s++;
  }
  uint64_t mantissa = 0;
  const char *digits = s;
  while (s < end && (unsigned)(*s - '0') < 10) {
    mantissa = mantissa * 10 + (unsigned)(*s - '0');
    s++;
  }
  size_t n_digits = (size_t)(s - digits);
  size_t n_fraction = 0;
  if (s < end && *s == '.') {
    s++;
    const char *fraction = s;
    while (s < end && (unsigned)(*s - '0') < 10) {
      mantissa = mantissa * 10 + (unsigned)(*s - '0');
      s++;
    }
    n_fraction = (size_t)(s - fraction);
    n_digits += n_fraction;
  }
  /* Anything unusual (no digits, > 19 digits so the mantissa may have wrapped, an exponent, a
   * mantissa beyond 2^53) takes the general path. */
  if (n_digits - 1 >= 19 || (s < end && (*s | 0x20) == 'e') || mantissa > (UINT64_C(1) << 53))
    return knnwb_formats_parse_float_general(p, end, value, stop);
  double exact = (double)mantissa;
  if (n_fraction > 0)
    exact /= knnwb_formats_powers_of_ten[n_fraction]; /* one correctly rounded operation */
  uint64_t bits;
  memcpy(&bits, &exact, sizeof bits);
  /* Rounding the double to float is exact unless the double sits on a float midpoint (low 29
   * fraction bits 1000...0) or the float is subnormal: then the general path decides. */
  if ((bits & UINT64_C(0x1FFFFFFF)) == UINT64_C(0x10000000) ||
      (exact < 1.1754943508222875e-38 && mantissa != 0))
    return knnwb_formats_parse_float_general(p, end, value, stop);
  float rounded = (float)exact;
  *value = negative ? -rounded : rounded;
  *stop = s;
  return KNNWB_FLOAT_OK;
}

/** The same for a double (strtod semantics), used by the .knn reader. */
KnnwbFloatStatus knnwb_formats_parse_double(const char *p, const char *end, double *value,
                                            const char **stop);

/** What a token that knnwb_formats_is_missing_token() accepts is, for messages: "infinite value"
 * for Inf/Infinity (signed), else "missing value". */
const char *knnwb_formats_missing_token_kind(const char *p, size_t length);

/**
 * The C locale, for strtof_l and for writers, which switch to it with uselocale() so that numbers
 * are written with '.' whatever LC_NUMERIC the host program set.
 */
locale_t knnwb_formats_c_locale(void);

G_END_DECLS

#endif
