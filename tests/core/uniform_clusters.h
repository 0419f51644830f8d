/* Test rows around random centres with uniform noise, shared by the partition's host tests. */
#ifndef KNNWB_TEST_UNIFORM_CLUSTERS_H
#define KNNWB_TEST_UNIFORM_CLUSTERS_H

#include <glib.h>
#include <knnwb/knnwb.h>

/* n rows of d values: each around one of `clusters` centres drawn in [-box, box]^d, plus spread
 * times uniform noise in [-1, 1] per value (so that some clusters are near). */
static KnnwbMatrix *uniform_clusters(size_t n, size_t d, size_t clusters, double box, double spread,
                                     guint32 seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  double *centre = g_new(double, clusters *d);
  for (size_t i = 0; i < clusters * d; i++)
    centre[i] = g_rand_double_range(rand, -box, box);
  for (size_t i = 0; i < n; i++) {
    const size_t c = (size_t)g_rand_int_range(rand, 0, (gint32)clusters);
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] =
          (float)(centre[c * d + j] + spread * g_rand_double_range(rand, -1.0, 1.0));
  }
  g_free(centre);
  return m;
}

#endif
