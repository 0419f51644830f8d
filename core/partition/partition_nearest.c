/*
 * Every row's nearest centroid for the assignment, screened in single precision: the products of
 * a block's rows with every centroid in float (twice the lanes of double: they were the
 * assignment's time, 2 of 2.5 s at 30,000,000 rows and 225 centroids on 32 cores), then, in
 * double, only the centroids the float scores cannot rule out. The double scores are
 * knnwb_partition_dots's bits (products summed in one order everywhere), so the choice is the
 * one every centroid in double gives, ties to the lower centroid: the same cells, radii and
 * reaches.
 *
 * Why the screen keeps the nearest: for a row v and centroid c in float, each product and the sum
 * of d of them err by at most (d + 2) units of single-precision roundoff of sum |v_t c_t| <= |v|
 * |c| (no value leaves [2^-50, 2^50] or 0, so nothing overflows or underflows), so the score |c|^2
 * - 2 v.c errs by at most E = (d + 8) 2^-24 (|v|^2 + |c|^2) against the double one (whose own
 * rounding, (4d + 16) 2^-53 of the same, is added). A centroid whose float score less E is above
 * the least float score plus its E cannot have the least double score, nor tie with it.
 */
#include <math.h>
#include <string.h>
#include "partition/partition_internal.h"

/* Magnitudes of the values the screen takes (else the row or the whole assignment goes in
 * double), and the widest rows (the float sums stay below 2^127). */
#define KNNWB_PARTITION_SCREEN_LOW 0x1p-50
#define KNNWB_PARTITION_SCREEN_HIGH 0x1p50
#define KNNWB_PARTITION_SCREEN_MAX_D ((size_t)1 << 20)
/* Unit roundoff of double. */
#define KNNWB_PARTITION_SCREEN_DOUBLE_UNIT 0x1p-53

static gboolean knnwb_partition_screen_value(double x)
{
  const double a = fabs(x);
  return a == 0.0 || (a >= KNNWB_PARTITION_SCREEN_LOW && a <= KNNWB_PARTITION_SCREEN_HIGH);
}

gboolean knnwb_partition_screen_init(KnnwbPartitionScreen *screen, const double *centroid,
                                     const double *centroid_sq, size_t m, size_t d)
{
  memset(screen, 0, sizeof *screen);
  const char *v = g_getenv("KNNWB_PARTITION_SCREEN");
  if (m == 0 || d > KNNWB_PARTITION_SCREEN_MAX_D || g_strcmp0(v, "0") == 0)
    return FALSE;
  for (size_t i = 0; i < m * d; i++)
    if (!knnwb_partition_screen_value(centroid[i]))
      return FALSE;
  screen->m = m;
  screen->d = d;
  screen->centroid = centroid;
  screen->centroid_sq = centroid_sq;
  screen->centroid_float = g_new(float, MAX(m * d, (size_t)1));
  for (size_t i = 0; i < m * d; i++)
    screen->centroid_float[i] = (float)centroid[i];
  const double unit =
      (double)(d + 8) * 0x1p-24 + (4.0 * (double)d + 16.0) * KNNWB_PARTITION_SCREEN_DOUBLE_UNIT;
  screen->error = unit * 1.01; /* (and the rounding of E itself) */
  return TRUE;
}

void knnwb_partition_screen_clear(KnnwbPartitionScreen *screen)
{
  g_clear_pointer(&screen->centroid_float, g_free);
}

/* Block row r's nearest centroid from its float products (dot_float, m of them), its double
 * product with it in *dot. */
static size_t knnwb_partition_screen_row(const KnnwbPartitionScreen *screen,
                                         const KnnwbPartitionBlock *block, size_t r,
                                         const float *dot_float, double *dot)
{
  const size_t m = screen->m, d = screen->d;
  const double *v = block->v + r * d, v_sq = block->v_sq[r];
  double limit = HUGE_VAL;
  for (size_t j = 0; j < m; j++) {
    const double score = screen->centroid_sq[j] - 2.0 * (double)dot_float[j];
    limit = MIN(limit, score + screen->error * (v_sq + screen->centroid_sq[j]));
  }
  size_t best = 0;
  double best_score = HUGE_VAL;
  *dot = 0.0;
  for (size_t j = 0; j < m; j++) {
    const double bound = screen->error * (v_sq + screen->centroid_sq[j]);
    if (screen->centroid_sq[j] - 2.0 * (double)dot_float[j] - bound > limit)
      continue;
    const double exact = knnwb_partition_row_dot(v, screen->centroid + j * d, d);
    const double score = screen->centroid_sq[j] - 2.0 * exact;
    if (score < best_score) {
      best_score = score;
      best = j;
      *dot = exact;
    }
  }
  if (!(best_score < HUGE_VAL)) /* (no score below it: centroid 0, as knnwb_partition_nearest) */
    *dot = knnwb_partition_row_dot(v, screen->centroid, d);
  return best;
}

/* Block row r's nearest centroid with every product in double (a value outside the screen's
 * range). */
static size_t knnwb_partition_screen_all(const KnnwbPartitionScreen *screen,
                                         const KnnwbPartitionBlock *block, size_t r, double *dot)
{
  const size_t d = screen->d;
  const double *v = block->v + r * d;
  size_t best = 0;
  double best_score = HUGE_VAL;
  *dot = 0.0;
  for (size_t j = 0; j < screen->m; j++) {
    const double exact = knnwb_partition_row_dot(v, screen->centroid + j * d, d);
    const double score = screen->centroid_sq[j] - 2.0 * exact;
    if (score < best_score) {
      best_score = score;
      best = j;
      *dot = exact;
    }
  }
  if (!(best_score < HUGE_VAL))
    *dot = knnwb_partition_row_dot(v, screen->centroid, d);
  return best;
}

void knnwb_partition_screen_nearest(const KnnwbPartitionScreen *screen,
                                    const KnnwbPartitionBlock *block, float *scratch,
                                    size_t *nearest, double *dot)
{
  const size_t rows = block->rows, d = screen->d, m = screen->m;
  float *v = scratch, *dot_float = scratch + rows * d;
  gboolean *usable = g_new(gboolean, MAX(rows, (size_t)1));
  for (size_t r = 0; r < rows; r++) {
    usable[r] = TRUE;
    for (size_t t = 0; t < d; t++) {
      const double x = block->v[r * d + t];
      usable[r] = usable[r] && knnwb_partition_screen_value(x);
      v[r * d + t] = (float)x;
    }
  }
  knnwb_partition_dots_float(v, rows, d, screen->centroid_float, m, dot_float, m);
  for (size_t r = 0; r < rows; r++)
    nearest[r] = usable[r]
                     ? knnwb_partition_screen_row(screen, block, r, dot_float + r * m, dot + r)
                     : knnwb_partition_screen_all(screen, block, r, dot + r);
  g_free(usable);
}
