/* The host's conversion of rows to the FP16 screen's halves (kernels/row_halves.c), host only: the
 * nearest half with ties to even on every kind of value (known halves, the boundaries of the
 * subnormals and of overflow, random bit patterns), the same bits from the CPU's conversion
 * instructions as from the portable code, and the rows' layout (scale, padding). That the device's
 * conversion gives these bytes too is tests/kernels/test_cuda_knn.c's (host-halves). */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "row_halves.h"

static float from_bits(guint32 bits)
{
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

/* The encoding of v, a value a half holds exactly (0, subnormal or normal, below 65536). */
static guint16 encode_half(double v)
{
  if (v < 0x1p-14)
    return (guint16)(v / 0x1p-24);
  int e;
  frexp(v, &e); /* v in [2^(e-1), 2^e) */
  return (guint16)(((guint32)(e - 1 + 15) << 10) | (guint32)(v / ldexp(1.0, e - 11) - 1024.0));
}

/* The half nearest x by exact arithmetic in double (every float and every half's step is a double):
 * the multiple of the step below and above, ties to the even multiple; 65520 and up (halfway to
 * 2^16) is infinity. */
static guint16 reference_half(float x)
{
  const guint16 sign = signbit(x) ? 0x8000 : 0;
  const double a = fabs((double)x);
  if (a >= 65520.0)
    return sign | 0x7c00;
  int e;
  frexp(a, &e);
  const double step = a < 0x1p-14 ? 0x1p-24 : ldexp(1.0, e - 11);
  const double q = a / step, below = floor(q), part = q - below;
  const double n = part > 0.5 || (part == 0.5 && fmod(below, 2.0) == 1.0) ? below + 1 : below;
  return sign | encode_half(n * step);
}

static void test_known_values(void)
{
  const struct {
    float x;
    guint16 h;
  } known[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {65504.0f, 0x7bff},
      {65519.99f, 0x7bff},
      {65520.0f, 0x7c00},
      {1e9f, 0x7c00},
      {-1e9f, 0xfc00},
      {0x1p-24f, 0x0001},
      {0x1p-25f, 0x0000},
      {0x1.8p-25f, 0x0001},
      {0x1.8p-24f, 0x0002},
      {0x1p-14f, 0x0400},
      {0x1.ff8p-15f, 0x03ff},
      {0x1.ffcp-15f, 0x0400},
      {0x1.ffap-15f, 0x03ff},
      {1.0f + 0x1p-11f, 0x3c00},
      {1.0f + 0x1.8p-11f, 0x3c01},
      {1.0f + 0x1p-10f + 0x1p-11f, 0x3c02},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(known); i++) {
    g_assert_cmphex(knnwb_half_from_float(known[i].x), ==, known[i].h);
    g_assert_cmphex(reference_half(known[i].x), ==, known[i].h);
  }
}

/* Random floats of every exponent a half can reach, and around its every boundary. */
static void test_random_against_reference(void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(7);
  for (int t = 0; t < 4000; t++) {
    /* exponents 127 - 30 .. 127 + 17: subnormal halves to overflow */
    const guint32 exp = (guint32)g_rand_int_range(rand, 127 - 30, 127 + 18);
    guint32 mant = g_rand_int(rand) & 0x7fffffu;
    if (t % 4 == 1)
      mant = (mant & ~0x1fffu) | 0x1000u; /* a tie of the normal halves */
    const guint32 bits = (t % 2 ? 0x80000000u : 0u) | (exp << 23) | mant;
    const float x = from_bits(bits);
    g_assert_cmphex(knnwb_half_from_float(x), ==, reference_half(x));
  }
}

/* Rows through knnwb_row_halves (the CPU's instructions where it has them) against the portable
 * conversion of each product: every bit the same, the padding zero, the scale applied. */
static void test_rows(void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(11);
  const size_t dims[] = {1, 7, 8, 9, 31, 64, 295};
  for (size_t di = 0; di < G_N_ELEMENTS(dims); di++) {
    const size_t rows = 13, dim = dims[di], dpad = (dim + 63) / 64 * 64;
    float *src = g_new(float, rows *dim);
    for (size_t i = 0; i < rows * dim; i++) {
      const guint32 exp = (guint32)g_rand_int_range(rand, 127 - 40, 127 + 20);
      src[i] = from_bits((g_rand_boolean(rand) ? 0x80000000u : 0u) | (exp << 23) |
                         (g_rand_int(rand) & 0x7fffffu));
    }
    guint16 *dst = g_new(guint16, rows * dpad);
    memset(dst, 0xff, rows * dpad * sizeof *dst);
    for (int exponent = -3; exponent <= 3; exponent += 3) {
      knnwb_row_halves(dst, dpad, src, rows, dim, exponent);
      for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < dim; j++)
          g_assert_cmphex(dst[i * dpad + j], ==,
                          knnwb_half_from_float(src[i * dim + j] * ldexpf(1.0f, exponent)));
        for (size_t j = dim; j < dpad; j++)
          g_assert_cmphex(dst[i * dpad + j], ==, 0);
      }
    }
    g_free(src);
    g_free(dst);
  }
  g_test_message("conversion instructions: %s", knnwb_row_halves_fast() ? "yes" : "no");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/row-halves/known-values", test_known_values);
  g_test_add_func("/kernels/row-halves/random-against-reference", test_random_against_reference);
  g_test_add_func("/kernels/row-halves/rows", test_rows);
  return g_test_run();
}
