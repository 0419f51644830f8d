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
typedef float KnnwbDotsFloat4 __attribute__((vector_size(16)));
#ifdef KNNWB_PARTITION_DOTS_X86
typedef double KnnwbDotsVec4 __attribute__((vector_size(32)));
typedef double KnnwbDotsVec8 __attribute__((vector_size(64)));
typedef float KnnwbDotsFloat8 __attribute__((vector_size(32)));
typedef float KnnwbDotsFloat16 __attribute__((vector_size(64)));
#endif

/* Centroids per panel chunk: the chunk's panel (chunk x d doubles) stays in the core's L2. */
#define KNNWB_PARTITION_DOTS_PANEL_BYTES ((size_t)256 * 1024)

/* Lanes [0, valid) of the vector sum into out (a row of T). */
#define KNNWB_PARTITION_DOTS_PUT(out, sum, w, valid)                                               \
  memcpy((out), (sum), MIN((size_t)(w), (size_t)(valid)) * sizeof(*(out)))

/*
 * Rows v[0, rows) (stride d) against `groups` panels of W centroids (panel[(g d + t) W + u] is
 * component t of centroid g W + u), into dot[r * ld + g * W + u] for g W + u < m.
 */
#define KNNWB_PARTITION_DOTS(NAME, T, VEC, W, TARGET)                                              \
  TARGET static void NAME(const T *v, size_t rows, size_t d, const T *panel, size_t groups,        \
                          size_t m, T *dot, size_t ld)                                             \
  {                                                                                                \
    size_t r = 0;                                                                                  \
    for (; r + 4 <= rows; r += 4) {                                                                \
      const T *a0 = v + r * d, *a1 = a0 + d, *a2 = a1 + d, *a3 = a2 + d;                           \
      T *o = dot + r * ld;                                                                         \
      size_t g = 0;                                                                                \
      for (; g + 2 <= groups; g += 2) {                                                            \
        const T *p = panel + g * d * W, *q = p + d * W;                                            \
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
          KNNWB_PARTITION_DOTS_PUT(o + (i % 4) * ld + j, sums[i], W, m - j);                       \
        }                                                                                          \
      }                                                                                            \
      for (; g < groups; g++) {                                                                    \
        const T *p = panel + g * d * W;                                                            \
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
          KNNWB_PARTITION_DOTS_PUT(o + i * ld + g * W, sums[i], W, m - g * W);                     \
      }                                                                                            \
    }                                                                                              \
    for (; r < rows; r++) {                                                                        \
      const T *a = v + r * d;                                                                      \
      for (size_t g = 0; g < groups; g++) {                                                        \
        const T *p = panel + g * d * W;                                                            \
        VEC s = {0};                                                                               \
        for (size_t t = 0; t < d; t++) {                                                           \
          VEC c;                                                                                   \
          memcpy(&c, p + t * W, sizeof c);                                                         \
          s += a[t] * c;                                                                           \
        }                                                                                          \
        KNNWB_PARTITION_DOTS_PUT(dot + r * ld + g * W, &s, W, m - g * W);                          \
      }                                                                                            \
    }                                                                                              \
  }

KNNWB_PARTITION_DOTS(knnwb_partition_dots2, double, KnnwbDotsVec2, 2, )
KNNWB_PARTITION_DOTS(knnwb_partition_dots4f, float, KnnwbDotsFloat4, 4, )
#ifdef KNNWB_PARTITION_DOTS_X86
KNNWB_PARTITION_DOTS(knnwb_partition_dots4, double, KnnwbDotsVec4, 4,
                     __attribute__((target("avx2"))))
KNNWB_PARTITION_DOTS(knnwb_partition_dots8, double, KnnwbDotsVec8, 8,
                     __attribute__((target("avx512f"))))
KNNWB_PARTITION_DOTS(knnwb_partition_dots8f, float, KnnwbDotsFloat8, 8,
                     __attribute__((target("avx2"))))
KNNWB_PARTITION_DOTS(knnwb_partition_dots16f, float, KnnwbDotsFloat16, 16,
                     __attribute__((target("avx512f"))))
#endif

/* The vector lanes of T for this CPU, at most KNNWB_PARTITION_VECTOR's (2 or 4 doubles) when set:
 * tests compare the kernels. */
static size_t knnwb_partition_dots_width(size_t lane_bytes)
{
  return knnwb_vector_lanes(lane_bytes, "KNNWB_PARTITION_VECTOR");
}

/*
 * The driver of the kernels of T (lanes L2 / L4 / L8 wide: the kernels K2, K4, K8, the wider two
 * on x86 only): centroids [0, m) (stride d) as panels of the CPU's width, zero past m, in chunks
 * that stay in the core's L2, each against every row.
 */
#ifdef KNNWB_PARTITION_DOTS_X86
#define KNNWB_PARTITION_DOTS_WIDE(K4, K8, L4, L8)                                                  \
  if (w == L8) {                                                                                   \
    K8(v, rows, d, panel, groups, mc, dot + j0, ld);                                               \
    continue;                                                                                      \
  }                                                                                                \
  if (w == L4) {                                                                                   \
    K4(v, rows, d, panel, groups, mc, dot + j0, ld);                                               \
    continue;                                                                                      \
  }
#else
#define KNNWB_PARTITION_DOTS_WIDE(K4, K8, L4, L8)
#endif
#define KNNWB_PARTITION_DOTS_DRIVER(NAME, T, K2, K4, K8, L4, L8)                                   \
  void NAME(const T *v, size_t rows, size_t d, const T *centroid, size_t m, T *dot, size_t ld)     \
  {                                                                                                \
    if (rows == 0 || m == 0)                                                                       \
      return;                                                                                      \
    if (d == 0) {                                                                                  \
      for (size_t r = 0; r < rows; r++)                                                            \
        memset(dot + r * ld, 0, m * sizeof(T));                                                    \
      return;                                                                                      \
    }                                                                                              \
    const size_t w = knnwb_partition_dots_width(sizeof(T));                                        \
    /* a whole number of panels a chunk, at least one */                                           \
    size_t chunk = KNNWB_PARTITION_DOTS_PANEL_BYTES / (d * sizeof(T)) / w * w;                     \
    chunk = MIN(MAX(chunk, w), (m + w - 1) / w * w);                                               \
    g_autofree T *panel = g_new(T, chunk * d);                                                     \
    for (size_t j0 = 0; j0 < m; j0 += chunk) {                                                     \
      const size_t mc = MIN(chunk, m - j0), groups = (mc + w - 1) / w;                             \
      for (size_t g = 0; g < groups; g++)                                                          \
        for (size_t t = 0; t < d; t++)                                                             \
          for (size_t u = 0; u < w; u++) {                                                         \
            const size_t j = g * w + u;                                                            \
            panel[(g * d + t) * w + u] = j < mc ? centroid[(j0 + j) * d + t] : (T)0;               \
          }                                                                                        \
      KNNWB_PARTITION_DOTS_WIDE(K4, K8, L4, L8)                                                    \
      K2(v, rows, d, panel, groups, mc, dot + j0, ld);                                             \
    }                                                                                              \
  }

KNNWB_PARTITION_DOTS_DRIVER(knnwb_partition_dots, double, knnwb_partition_dots2,
                            knnwb_partition_dots4, knnwb_partition_dots8, 4, 8)
KNNWB_PARTITION_DOTS_DRIVER(knnwb_partition_dots_float, float, knnwb_partition_dots4f,
                            knnwb_partition_dots8f, knnwb_partition_dots16f, 8, 16)
