/* Deterministic test matrices shared by the kNN tests (CPU and CUDA compare on the same data). */
#ifndef KNNWB_TEST_MATRIX_H
#define KNNWB_TEST_MATRIX_H

#include <math.h>
#include <glib.h>
#include <knnwb/matrix.h>

/* n x d values: noise, planted sine modules (every third row) and exact ties (every fifth). */
static inline KnnwbMatrix *knnwb_test_random_matrix(size_t n, size_t d, guint32 seed)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  g_assert_nonnull(m);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < d; j++) {
      double v = g_rand_double_range(rng, -2, 2);
      if (i % 3 == 0)
        v = sin((double)(j + 1) * (double)(i % 7 + 1)) + 0.05 * v;
      if (i % 5 == 4)
        v = floor(v * 2); /* exact ties */
      m->values[i * d + j] = (float)v;
    }
  /* Guarantee no constant row (unless d == 1, where every row is constant for correlations). */
  for (size_t i = 0; i < n && d > 1; i++) {
    m->values[i * d] += 3.0f + (float)(i % 2);
    if (m->values[i * d + 1] == m->values[i * d])
      m->values[i * d + 1] += 1.0f;
  }
  return m;
}

#endif
