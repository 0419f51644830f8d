/* Euclidean rows made ready (core/engine/prepare.c): the column means summed in row order, the
 * scale exponent of the largest centred magnitude, and every scored value (x - mean) 2^-e rounded
 * once to float, bit for bit against a plain two-pass reference, for any number of threads, on
 * columns with an offset, tiny or huge magnitudes, one sign only, or one value, with the largest
 * centred magnitude above a column's mean or below it. */
#include <math.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "engine/engine.h"

/* huge: column 2 near 1e30 sets the scale; else the outlier below column 6's values does. */
static KnnwbMatrix *mixed_columns(size_t n, guint32 seed, gboolean huge)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  const size_t d = 7;
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  for (size_t i = 0; i < n; i++) {
    float *row = m->values + i * d;
    row[0] = (float)(1e4 + g_rand_double_range(rand, -0.5, 0.5));                 /* an offset */
    row[1] = (float)(g_rand_double_range(rand, -1.0, 1.0) * 1e-30);               /* tiny */
    row[2] = (float)(g_rand_double_range(rand, 1.0, 3.0) * (huge ? 1e30 : 1e-3)); /* one sign */
    row[3] = 2.5f;                                                                /* one value */
    row[4] = (float)-g_rand_double_range(rand, 0.0, 8.0); /* negative only */
    row[5] = (float)g_rand_double_range(rand, -1.0, 1.0);
    row[6] = i == n / 2 ? -7.0f : (float)g_rand_double_range(rand, 0.0, 1.0); /* one outlier */
  }
  return m;
}

static void test_euclidean_frame(void)
{
  static const size_t sizes[] = {1, 2, 1001, 4099};
  static const int threads[] = {1, 2, 3, 8};
  for (size_t v = 0; v < 2 * G_N_ELEMENTS(sizes); v++) {
    const size_t s = v / 2;
    g_autoptr(KnnwbMatrix) data = mixed_columns(sizes[s], 7 + (guint32)s, v % 2);
    const size_t n = data->n_rows, d = data->n_cols;
    /* the reference: sums in row order, then a second pass over every centred value */
    double mean[7], largest = 0.0;
    for (size_t j = 0; j < d; j++) {
      double sum = 0.0;
      for (size_t i = 0; i < n; i++)
        sum += data->values[i * d + j];
      mean[j] = sum / (double)n;
      for (size_t i = 0; i < n; i++)
        largest = MAX(largest, fabs((double)data->values[i * d + j] - mean[j]));
    }
    const int e = largest > 0.0 ? ilogb(largest) : 0;
    for (size_t t = 0; t < G_N_ELEMENTS(threads); t++) {
      KnnwbPrepared p;
      g_autoptr(GError) error = NULL;
      g_assert_true(knnwb_prepared_init(&p, data, KNNWB_METRIC_EUCLIDEAN, FALSE, "data", threads[t],
                                        NULL, NULL, &error));
      g_assert_no_error(error);
      g_assert_cmpmem(p.column_mean, d * sizeof(double), mean, d * sizeof(double));
      g_assert_cmpint(p.scale_exponent, ==, e);
      for (size_t c = 0; c < n * d; c++) {
        const float want = (float)ldexp((double)data->values[c] - mean[c % d], -e);
        g_assert_true(memcmp(&p.scored[c], &want, sizeof want) == 0);
      }
      knnwb_prepared_clear(&p);
    }
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/prepare/euclidean-frame", test_euclidean_frame);
  return g_test_run();
}
