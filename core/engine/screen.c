/*
 * Screening precisions: their names, which one a run uses, and the rigorous bound on the error of
 * a screened score that core's certificate (refine.c) and candidate count (knn_rounds.c) take from
 * it.
 *
 * The bound, per unit of |q||r| (rows q, r as the backend scores them; u = 2^-24):
 *  - FP32 (float32 FMA, any summation order): a dot product of length d errs by at most d u |q||r|,
 *    plus a few u for rounding the normalised inputs and the final subtraction, under (d + 16) u;
 *    core uses twice that, 2 (d + 16) u (as it always did).
 *  - FP16: rows scaled by 2^s (exact) so that every component is at most 2^14 and rounded to half:
 *    q~_i = q_i (1 + a_i) + t_i with |a_i| <= 2^-11 (normal halves) and |t_i| <= 2^-25 2^-s <=
 *    2^-38 R (subnormal halves; R bounds every row's norm, 2^-s <= 2 R 2^-14). Products of halves
 *    are exact in float32. So |q~.r~ - q.r| <= (2 2^-11 + 2^-22) sum |q_i r_i| + 2 sqrt(d) 2^-38
 *    R^2 (1 + 2^-11) + d 2^-76 R^2 <= (2^-10 + 2^-22) |q||r| + d 2^-36 R^2. The float32
 *    accumulation on the tensor cores, allowing truncation instead of rounding at every addition
 *    and any order: at most 2 d u sum |q~_i r~_i| <= 2 d u (1 + 2^-11)^2 |q||r|. Scaling the
 *    product back by 2^-2s is exact. Inputs and the final subtraction: 32 u as for FP32. Total:
 *    2^-10 + 2^-21 + 2 (d + 16) u + d 2^-36 (R <= 1 for the correlation kinds; euclidean's bound is
 *    multiplied by (|q| + R)^2 >= R^2 in refine.c, and score = |r|^2 - 2 q.r doubles the dot's
 *    error, which 2 |q||r| <= (|q| + |r|)^2 / 2 absorbs).
 *    With half scores (knnwb_screen_half_scores, the default: the GPU's tiles then hold half the
 *    bytes) the float32 product P, |P| <= (1 + 2^-9) |q||r|, is stored as half(P 2^-2c) with
 *    2^c >= R (a power of two, exactly undone), rounded to nearest by cuBLAS: relative error
 *    2^-11 in half's normal range, absolute 2^-25 2^2c <= 2^-23 R^2 below it, and no overflow
 *    (|P| 2^-2c <= 1 + 2^-9). Adding 2^-11 (1 + 2^-9) + 2^-23 <= 2^-11 + 2^-19 per unit.
 *  - TF32: float32 rows whose significands the tensor cores cut to 10 bits, possibly by truncation
 *    (relative error below 2^-10 each, no subnormal loss: TF32 keeps float32's exponent range):
 *    2 2^-10 + 2^-20 + 2 (d + 16) u.
 *  - BF16 (CPU, gemm_cpu.c): rows scaled by 2^s (exact, up to float subnormals) so that every
 *    row's norm is at most 1 (R 2^s in (1/2, 1]), rounded to bfloat16 to nearest even: q~_i = q_i
 *    (1 + a_i) + t_i with |a_i| <= 2^-8 (8-bit significands) and |t_i| <= 2^-126 (the instructions
 *    treat BF16 subnormals as zero, DAZ; float subnormals lost in the scaling are smaller still).
 *    BF16 keeps float32's exponent range, so nothing overflows. Products of two BF16 values are
 *    exact in float32 (16-bit significands). So, per unit of (R 2^s)^2 >= 1/4 and of |q||r|:
 *    |q~.r~ - q.r| <= (2 2^-8 + 2^-16) sum |q_i r_i| + 2 sqrt(d) 2^-126 (1 + 2^-8) + d 2^-252
 *    <= (2^-7 + 2^-16) |q||r| + d 2^-122. The float32 accumulation (vdpbf16ps or AMX: any order,
 *    rounding or truncating at each addition, results below 2^-126 flushed to zero, FTZ, each
 *    flush off by at most 2^-126): 2 d u sum |q~_i r~_i| + d 2^-126 <= 2 d u (1 + 2^-7 + 2^-16)
 *    |q||r| + d 2^-124. Scaling back by 2^-2s is exact (a flushed result is off by at most 2^-126
 *    before it). Inputs and the final subtraction: 32 u as for FP32. Total, with room: 2^-7 +
 *    2^-16 + 2 (d + 16) u (1 + 2^-6) + d 2^-120, about 2^-7 + 2^-15 for d in the hundreds. The
 *    correlation kinds have R = 1 (unit rows); euclidean's bound is multiplied by (|q| + R)^2 >=
 *    R^2 in refine.c as for FP16, which covers the absolute tail terms.
 * ABS_DOT: | |a| - |b| | <= |a - b|, so the same bound. L1 (manhattan) is always screened in FP32.
 */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/enum_names.h>
#include "cpu/cpu.h"
#include "engine/engine.h"

/* Candidates past k under BF16 (at least; see knnwb_screen_candidates). */
#define KNNWB_BF16_MARGIN 16

static const KnnwbEnumName knnwb_screen_names[] = {KNNWB_SCREEN_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_screen_table = KNNWB_ENUM_TABLE(
    knnwb_screen_names, 0, " or ", "unknown screening precision ", ": use ", "", "(null)");

gboolean knnwb_screen_from_string(const char *name, KnnwbScreen *screen, GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_screen_table, name, &value, error))
    return FALSE;
  *screen = (KnnwbScreen)value;
  return TRUE;
}

const char *knnwb_screen_to_string(KnnwbScreen screen)
{
  const char *name = knnwb_enum_to_string(&knnwb_screen_table, (int)screen);
  return name != NULL ? name : "?";
}

gboolean knnwb_screen_half_scores(KnnwbScreen screen)
{
  /* KNNWB_SCREEN_FLOAT_SCORES=1 keeps float32 tiles (to compare the two on a GPU). */
  static int float_scores = -1;
  if (float_scores < 0) {
    const char *v = g_getenv("KNNWB_SCREEN_FLOAT_SCORES");
    float_scores = v != NULL && g_strcmp0(v, "1") == 0;
  }
  return screen == KNNWB_SCREEN_FP16 && !float_scores;
}

double knnwb_screen_slack(KnnwbScreen screen, size_t d)
{
  const double u = 1.0 / 16777216.0, accumulation = 2.0 * ((double)d + 16.0) * u;
  const double scores = knnwb_screen_half_scores(screen) ? ldexp(1.0, -11) + ldexp(1.0, -19) : 0.0;
  switch (screen) {
  case KNNWB_SCREEN_FP16:
    return ldexp(1.0, -10) + ldexp(1.0, -21) + accumulation + (double)d * ldexp(1.0, -36) + scores;
  case KNNWB_SCREEN_TF32:
    return ldexp(1.0, -9) + ldexp(1.0, -20) + accumulation;
  case KNNWB_SCREEN_BF16:
    return ldexp(1.0, -7) + ldexp(1.0, -16) + accumulation * (1.0 + ldexp(1.0, -6)) +
           (double)d * ldexp(1.0, -120);
  default:
    return accumulation;
  }
}

size_t knnwb_screen_candidates(KnnwbScreen screen, size_t k)
{
  /* FP32: the window of twice the bound holds a handful of rows. FP16/TF32: measured on the
   * benchmark and real metafeatures (k = 20), at most 36 rows lie within 2 2^-10 of the k-th.
   * Half-precision score tiles widen the FP16 window 1.5x: at 1,533,876 x 295 Pearson (k = 20) a
   * margin of 16 left 53 rows to re-select (0.17 s), 20 and 24 none, for about the same
   * selection time (one H200). */
  if (screen == KNNWB_SCREEN_FP16 || screen == KNNWB_SCREEN_TF32)
    return k + MAX((size_t)20, k / 4);
  /* BF16: a window of 2 2^-7. On the benchmark's 12,625 x 128 Pearson rows at k = 20, a margin of
   * 8 left 2,766 rows to re-select, 16 left 94, 24 none; 16 costs the least in all. */
  if (screen == KNNWB_SCREEN_BF16)
    return k + MAX((size_t)KNNWB_BF16_MARGIN, k / 2);
  return k + MAX((size_t)8, k / 8);
}

gboolean knnwb_screen_resolve(KnnwbScreen requested, const char *backend, KnnwbMetric metric,
                              size_t k, KnnwbScreen *screen, GError **error)
{
  const gboolean gpu = backend != NULL && g_str_has_prefix(backend, "cuda");
  if (!gpu && (requested == KNNWB_SCREEN_FP16 || requested == KNNWB_SCREEN_TF32)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "screening in %s needs the cuda backend (this run uses %s): use --screen auto, "
                "fp32 or bf16",
                knnwb_screen_to_string(requested), backend ? backend : "none");
    return FALSE;
  }
  if (gpu && requested == KNNWB_SCREEN_BF16) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "screening in bf16 needs the cpu backend (this run uses %s): use --screen auto, "
                "fp32, tf32 or fp16",
                backend);
    return FALSE;
  }
  const gboolean cpu_bf16 = !gpu && knnwb_cpu_gemm_has_bf16();
  if (requested == KNNWB_SCREEN_BF16 && !cpu_bf16) {
#ifdef KNNWB_HAVE_ONEDNN
    const char *why = "this CPU has no AVX512_BF16 or AMX-BF16 instructions";
#else
    const char *why = "knnwb was built without oneDNN (libdnnl-dev)";
#endif
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "screening in bf16 is not available: %s; use --screen auto or fp32", why);
    return FALSE;
  }
  /* A half-precision window holds ever more rows past the k-th as k grows, and large k is bound by
   * the selection and the exact re-scoring, not by the GEMM: FP32 there. */
  if (metric == KNNWB_METRIC_MANHATTAN)
    *screen = KNNWB_SCREEN_FP32; /* manhattan keeps its exact float32 kernel */
  else if (requested != KNNWB_SCREEN_AUTO)
    *screen = requested;
  else if (gpu)
    *screen = k <= 256 ? KNNWB_SCREEN_FP16 : KNNWB_SCREEN_FP32;
  else
    /* The CPU screens in FP32 unless told otherwise. BF16's window (2 2^-7 of |q||r|) holds a fixed
     * share of the rows, so the rows inside it past the k-th grow with n: at 12,625 x 128 (the
     * benchmark's modules, k = 20) 3% of the rows needed an FP32 re-selection and BF16 ran even
     * with FP32 (0.16 s against 0.15 s), at 50,000 x 128 of the same modules 48% (2.40-2.81 s
     * against 1.30-1.37 s), at 50,000 x 295 79% (6.2-6.7 s against 2.7-3.0 s), on 50,000 x 64
     * rows of 50 Gaussian clusters all of them (3.4-4.0 s against 0.95-1.2 s). A re-selected row
     * costs its whole FP32 pass again, so BF16 can gain at most its GEMM share (about 10% here)
     * and loses up to 3.5x. Euclidean's bound grows with (|q| + max |r|)^2 and cosine on rows
     * with an offset has every distance inside the window: worse still. */
    *screen = KNNWB_SCREEN_FP32;
  return TRUE;
}

int knnwb_screen_kernel_precision(KnnwbScreen screen)
{
  switch (screen) {
  case KNNWB_SCREEN_FP16:
    return KNNWB_KERNELS_SCREEN_FP16;
  case KNNWB_SCREEN_TF32:
    return KNNWB_KERNELS_SCREEN_TF32;
  case KNNWB_SCREEN_BF16:
    return KNNWB_KERNELS_SCREEN_BF16;
  default:
    return KNNWB_KERNELS_SCREEN_FP32;
  }
}

void knnwb_prepared_set_screen(KnnwbPrepared *query, KnnwbPrepared *reference, KnnwbScreen screen)
{
  /* R: a bound on the norm of every scored row. Correlation kinds: unit rows (rounded to float). */
  double norm = 1.0;
  if (knnwb_metric_score_kind(reference->metric) == KNNWB_SCORE_L2) {
    double largest = MAX(query->max_norm, reference->max_norm);
    norm = largest > 0.0 ? ldexp(largest, -reference->scale_exponent) : 1.0;
  }
  norm *= 1.0 + ldexp(1.0, -20);
  for (KnnwbPrepared *p = query; p != NULL; p = p == reference ? NULL : reference) {
    p->screen = screen;
    p->screen_slack = knnwb_screen_slack(screen, p->d);
    p->screen_row_norm = norm;
  }
}
