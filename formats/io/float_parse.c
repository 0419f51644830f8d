/* Fast, exact decimal-to-float parsing over a buffer (no NUL terminator, no locale). */
#include "float_parse.h"

#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Powers of ten that are exact doubles (10^22 < 2^53 * 2^22 is the last one). */
const double knnwb_formats_powers_of_ten[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                                1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                                1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* strtof/strtod read the decimal point of LC_NUMERIC; data files always use '.'. */
locale_t knnwb_formats_c_locale(void)
{
  static gsize initialised = 0;
  static locale_t c_locale;
  if (g_once_init_enter(&initialised)) {
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    g_once_init_leave(&initialised, 1);
  }
  return c_locale;
}

/** The scanned shape of a decimal number. */
typedef struct {
  gboolean negative;
  uint64_t mantissa;  /* first (up to) 19 significant digits */
  int64_t exponent10; /* value = mantissa * 10^exponent10 (when exact) */
  gboolean exact;     /* no nonzero digit was dropped from mantissa */
} KnnwbDecimal;

/* Scans the syntax; returns the end of the number or NULL when none starts at p. */
static const char *knnwb_formats_scan_decimal(const char *p, const char *end, KnnwbDecimal *d)
{
  const char *s = p;
  d->negative = FALSE;
  d->mantissa = 0;
  d->exponent10 = 0;
  d->exact = TRUE;
  if (s < end && (*s == '-' || *s == '+')) {
    d->negative = *s == '-';
    s++;
  }
  int digits = 0;
  gboolean any = FALSE;
  while (s < end && (unsigned)(*s - '0') < 10) {
    unsigned digit = (unsigned)(*s - '0');
    any = TRUE;
    if (digits < 19) {
      if (d->mantissa != 0 || digit != 0) {
        d->mantissa = d->mantissa * 10 + digit;
        digits++;
      }
    } else {
      d->exponent10++;
      if (digit != 0)
        d->exact = FALSE;
    }
    s++;
  }
  if (s < end && *s == '.') {
    s++;
    while (s < end && (unsigned)(*s - '0') < 10) {
      unsigned digit = (unsigned)(*s - '0');
      any = TRUE;
      if (digits < 19) {
        if (d->mantissa != 0 || digit != 0) {
          d->mantissa = d->mantissa * 10 + digit;
          digits++;
        }
        d->exponent10--;
      } else if (digit != 0) {
        d->exact = FALSE;
      }
      s++;
    }
  }
  if (!any)
    return NULL;
  if (s < end && (*s == 'e' || *s == 'E')) {
    const char *e = s + 1;
    gboolean negative_exponent = FALSE;
    if (e < end && (*e == '-' || *e == '+')) {
      negative_exponent = *e == '-';
      e++;
    }
    if (e < end && (unsigned)(*e - '0') < 10) {
      int64_t exponent = 0;
      while (e < end && (unsigned)(*e - '0') < 10) {
        if (exponent < 100000) /* clamp: beyond this everything is 0 or infinite anyway */
          exponent = exponent * 10 + (*e - '0');
        e++;
      }
      d->exponent10 += negative_exponent ? -exponent : exponent;
      s = e;
    }
    /* "1e" or "1e+" is left for the caller to reject: the number ends before the 'e'. */
  }
  return s;
}

/* The exact double of the decimal when Clinger's fast path applies. */
static gboolean knnwb_formats_fast_double(const KnnwbDecimal *d, double *out)
{
  if (!d->exact || d->mantissa > (UINT64_C(1) << 53) || d->exponent10 < -22 || d->exponent10 > 22)
    return FALSE;
  double value = (double)d->mantissa;
  /* One IEEE operation on two exact operands: correctly rounded. */
  if (d->exponent10 < 0)
    value /= knnwb_formats_powers_of_ten[-d->exponent10];
  else
    value *= knnwb_formats_powers_of_ten[d->exponent10];
  *out = d->negative ? -value : value;
  return TRUE;
}

static KnnwbFloatStatus knnwb_formats_slow_float(const char *p, size_t length, float *value)
{
  char small[128];
  char *copy = length < sizeof small ? small : g_malloc(length + 1);
  memcpy(copy, p, length);
  copy[length] = '\0';
  float result = strtof_l(copy, NULL, knnwb_formats_c_locale());
  if (copy != small)
    g_free(copy);
  if (isinf(result))
    return KNNWB_FLOAT_RANGE;
  *value = result;
  /* Only reached for nonzero decimals: 1e-300 becomes 0, 1e-42 keeps 2 digits. */
  return fabsf(result) < FLT_MIN ? KNNWB_FLOAT_TINY : KNNWB_FLOAT_OK;
}

KnnwbFloatStatus knnwb_formats_parse_float_general(const char *p, const char *end, float *value,
                                                   const char **stop)
{
  KnnwbDecimal d;
  const char *s = knnwb_formats_scan_decimal(p, end, &d);
  if (s == NULL) {
    *stop = p;
    return KNNWB_FLOAT_SYNTAX;
  }
  *stop = s;
  if (d.mantissa == 0) {
    *value = d.negative ? -0.0f : 0.0f;
    return KNNWB_FLOAT_OK;
  }
  double exact;
  if (knnwb_formats_fast_double(&d, &exact)) {
    float rounded = (float)exact;
    if (isinf(rounded))
      return KNNWB_FLOAT_RANGE;
    /* Double rounding (decimal -> double -> float) can differ from direct rounding only when the
     * double lands exactly on the midpoint between two floats; midpoints are doubles, so any
     * other double lies on the same side of the midpoint as the decimal value. */
    if ((double)rounded == exact) {
      *value = rounded;
      return KNNWB_FLOAT_OK;
    }
    float other = nextafterf(rounded, (double)rounded < exact ? INFINITY : -INFINITY);
    if (((double)rounded + (double)other) * 0.5 != exact) {
      *value = rounded;
      return KNNWB_FLOAT_OK;
    }
  }
  return knnwb_formats_slow_float(p, (size_t)(s - p), value);
}

KnnwbFloatStatus knnwb_formats_parse_double(const char *p, const char *end, double *value,
                                            const char **stop)
{
  KnnwbDecimal d;
  const char *s = knnwb_formats_scan_decimal(p, end, &d);
  if (s == NULL) {
    *stop = p;
    return KNNWB_FLOAT_SYNTAX;
  }
  *stop = s;
  if (d.mantissa == 0) {
    *value = d.negative ? -0.0 : 0.0;
    return KNNWB_FLOAT_OK;
  }
  if (knnwb_formats_fast_double(&d, value))
    return KNNWB_FLOAT_OK;
  size_t length = (size_t)(s - p);
  char small[128];
  char *copy = length < sizeof small ? small : g_malloc(length + 1);
  memcpy(copy, p, length);
  copy[length] = '\0';
  double result = strtod_l(copy, NULL, knnwb_formats_c_locale());
  if (copy != small)
    g_free(copy);
  if (isinf(result))
    return KNNWB_FLOAT_RANGE;
  *value = result;
  return KNNWB_FLOAT_OK;
}

KnnwbFloatStatus knnwb_formats_parse_float_field(const char *text, size_t length, float *value)
{
  const char *stop = text;
  KnnwbFloatStatus status = knnwb_formats_parse_float(text, text + length, value, &stop);
  if ((status == KNNWB_FLOAT_OK || status == KNNWB_FLOAT_TINY) && stop != text + length)
    return KNNWB_FLOAT_SYNTAX;
  return status;
}

gboolean knnwb_formats_is_missing_token(const char *p, size_t length)
{
  if (length == 0)
    return TRUE;
  if (*p == '+' || *p == '-') {
    p++;
    length--;
  }
  static const char *const tokens[] = {"na", "n/a", "nan", "null", "inf", "infinity", "#n/a"};
  for (size_t i = 0; i < G_N_ELEMENTS(tokens); i++)
    if (length == strlen(tokens[i]) && g_ascii_strncasecmp(p, tokens[i], length) == 0)
      return TRUE;
  return FALSE;
}

const char *knnwb_formats_missing_token_kind(const char *p, size_t length)
{
  if (length > 0 && (*p == '+' || *p == '-')) {
    p++;
    length--;
  }
  if ((length == 3 && g_ascii_strncasecmp(p, "inf", 3) == 0) ||
      (length == 8 && g_ascii_strncasecmp(p, "infinity", 8) == 0))
    return "infinite value";
  return "missing value";
}
