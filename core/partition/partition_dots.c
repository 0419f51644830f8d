/*
 * The partitioned search's dot products of rows with centroids, in double (the k-means, the
 * assignment of every row and the bounds pass all spend their time here).
 *
 * Every product is summed over the components in order, one multiply and one add each (no fused
 * multiply-add: knnwb builds with -ffp-contract=off), so the vector width, the blocking and the
 * number of threads never change a bit: the same choice, cells and groups on every x86 CPU.
 *
 * Own kernels rather than a DGEMM: Debian's OpenBLAS runs its generic SSE3 ("Prescott") kernels on
 * a CPU whose model it does not know, as on virtual machines that show "Intel(R) Xeon(R)
 * Processor"; there the products of 30,000,000 rows with 225 centroids took 11 s of a 58 s
 * command on 16 cores. Vectors run across W centroids (a panel of W centroids transposed, one
 * load a component) for 4 rows at once, two panels at a time: 8 independent sums.
 */
#include <string.h>
#include <glib.h>
#include "base/base.h"
#include "partition/partition_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define KNNWB_PARTITION_DOTS_X86
#endif

typedef double KnnwbDotsVec2 __attribute__((vector_size(16)));
#ifdef KNNWB_PARTITION_DOTS_X86
typedef double KnnwbDotsVec4 __attribute__((vector_size(32)));
typedef double KnnwbDotsVec8 __attribute__((vector_size(64)));
#endif

/* Centroids per panel chunk: the chunk's panel (chunk x d doubles) stays in the core's L2. */
#define KNNWB_PARTITION_DOTS_PANEL_BYTES ((size_t)256 * 1024)

/* Lanes [0, valid) of sum into out. */
static inline void knnwb_partition_dots_put(double *out, const double *lanes, size_t w,
                                            size_t valid)
{
  memcpy(out, lanes, MIN(w, valid) * sizeof(double));
}

/*
 * Rows v[0, rows) (stride d) against `groups` panels of W centroids (panel[(g d + t) W + u] is
 * component t of centroid g W + u), into dot[r * ld + g * W + u] for g W + u < m.
 */
#define KNNWB_PARTITION_DOTS(NAME, VEC, W, TARGET)                                                 \
  TARGET static void NAME(const double *v, size_t rows, size_t d, const double *panel,             \
                          size_t groups, size_t m, double *dot, size_t ld)                         \
  {                                                                                                \
    size_t r = 0;                                                                                  \
    for (; r + 4 <= rows; r += 4) {                                                                \
      const double *a0 = v + r * d, *a1 = a0 + d, *a2 = a1 + d, *a3 = a2 + d;                      \
      double *o = dot + r * ld;                                                                    \
      size_t g = 0;                                                                                \
      for (; g + 2 <= groups; g += 2) {                                                            \
        const double *p = panel + g * d * W, *q = p + d * W;                                       \
        VEC s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, t0 = {0}, t1 = {0}, t2 = {0}, t3 = {0};        \
        for (size_t t = 0; t < d; t++) {                                                           \
          VEC c, e;                                                                                \
          memcpy(&c, p + t * W, sizeof c);                                                         \
          memcpy(&e, q + t * W, sizeof e);                                                         \
          s0 += a0[t] * c;                                                                         \
          s1 += a1[t] * c;                                                                         \
          s2 += a2[t] * c;                                                                         \
          s3 += a3[t] * c;                                                                         \
          t0 += a0[t] * e;                                                                         \
          t1 += a1[t] * e;                                                                         \
          t2 += a2[t] * e;                                                                         \
          t3 += a3[t] * e;                                                                         \
        }                                                                                          \
        const VEC *sums[8] = {&s0, &s1, &s2, &s3, &t0, &t1, &t2, &t3};                             \
        for (size_t i = 0; i < 8; i++) {                                                           \
          const size_t j = (g + i / 4) * W;                                                        \
          knnwb_partition_dots_put(o + (i % 4) * ld + j, (const double *)sums[i], W, m - j);       \
        }                                                                                          \
      }                                                                                            \
      for (; g < groups; g++) {                                                                    \
        const double *p = panel + g * d * W;                                                       \
        VEC s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};                                                \
        for (size_t t = 0; t < d; t++) {                                                           \
          VEC c;                                                                                   \
          memcpy(&c, p + t * W, sizeof c);                                                         \
          s0 += a0[t] * c;                                                                         \
          s1 += a1[t] * c;                                                                         \
          s2 += a2[t] * c;                                                                         \
          s3 += a3[t] * c;                                                                         \
        }                                                                                          \
        const VEC *sums[4] = {&s0, &s1, &s2, &s3};                                                 \
        for (size_t i = 0; i < 4; i++)                                                             \
          knnwb_partition_dots_put(o + i * ld + g * W, (const double *)sums[i], W, m - g * W);     \
      }                                                                                            \
    }                                                                                              \
    for (; r < rows; r++) {                                                                        \
      const double *a = v + r * d;                                                                 \
      for (size_t g = 0; g < groups; g++) {                                                        \
        const double *p = panel + g * d * W;                                                       \
        VEC s = {0};                                                                               \
        for (size_t t = 0; t < d; t++) {                                                           \
          VEC c;                                                                                   \
          memcpy(&c, p + t * W, sizeof c);                                                         \
          s += a[t] * c;                                                                           \
        }                                                                                          \
        knnwb_partition_dots_put(dot + r * ld + g * W, (const double *)&s, W, m - g * W);          \
      }                                                                                            \
    }                                                                                              \
  }

KNNWB_PARTITION_DOTS(knnwb_partition_dots2, KnnwbDotsVec2, 2, )
#ifdef KNNWB_PARTITION_DOTS_X86
KNNWB_PARTITION_DOTS(knnwb_partition_dots4, KnnwbDotsVec4, 4, __attribute__((target("avx2"))))
KNNWB_PARTITION_DOTS(knnwb_partition_dots8, KnnwbDotsVec8, 8, __attribute__((target("avx512f"))))
#endif

/* The vector width for this CPU, at most KNNWB_PARTITION_VECTOR (2 or 4) when set: tests compare
 * the kernels. */
static size_t knnwb_partition_dots_width(void)
{
  return knnwb_vector_lanes(sizeof(double), "KNNWB_PARTITION_VECTOR");
}

/* Centroids [0, m) of centroid (stride d) as panels of w, zero past m. */
static void knnwb_partition_dots_panel(const double *centroid, size_t m, size_t d, size_t w,
                                       double *panel)
{
  const size_t groups = (m + w - 1) / w;
  for (size_t g = 0; g < groups; g++)
    for (size_t t = 0; t < d; t++)
      for (size_t u = 0; u < w; u++) {
        const size_t j = g * w + u;
        panel[(g * d + t) * w + u] = j < m ? centroid[j * d + t] : 0.0;
      }
}

void knnwb_partition_dots(const double *v, size_t rows, size_t d, const double *centroid, size_t m,
                          double *dot, size_t ld)
{
  if (rows == 0 || m == 0)
    return;
  if (d == 0) {
    for (size_t r = 0; r < rows; r++)
      memset(dot + r * ld, 0, m * sizeof(double));
    return;
  }
  const size_t w = knnwb_partition_dots_width();
  /* a whole number of panels a chunk, at least one */
  size_t chunk = KNNWB_PARTITION_DOTS_PANEL_BYTES / (d * sizeof(double)) / w * w;
  chunk = MIN(MAX(chunk, w), (m + w - 1) / w * w);
  g_autofree double *panel = g_new(double, chunk *d);
  for (size_t j0 = 0; j0 < m; j0 += chunk) {
    const size_t mc = MIN(chunk, m - j0), groups = (mc + w - 1) / w;
    knnwb_partition_dots_panel(centroid + j0 * d, mc, d, w, panel);
#ifdef KNNWB_PARTITION_DOTS_X86
    if (w == 8) {
      knnwb_partition_dots8(v, rows, d, panel, groups, mc, dot + j0, ld);
      continue;
    }
    if (w == 4) {
      knnwb_partition_dots4(v, rows, d, panel, groups, mc, dot + j0, ld);
      continue;
    }
#endif
    knnwb_partition_dots2(v, rows, d, panel, groups, mc, dot + j0, ld);
  }
}
