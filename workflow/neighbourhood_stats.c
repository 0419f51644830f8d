/* Statistics of the ranked table: the p-value of a correlation and Benjamini-Hochberg q-values
 * over every row that was a candidate neighbour of the focus. */
#include <math.h>
#include <stdlib.h>
#include <knnwb/error.h>
#include <knnwb/knn_group.h>
#include "neighbourhood_internal.h"

/* The continued fraction of the regularised incomplete beta function (modified Lentz), for
 * x < (a + 1) / (a + b + 2), where it converges fast. */
static double knnwb_beta_fraction(double a, double b, double x)
{
  const double tiny = 1e-300;
  double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
  d = 1.0 / (fabs(d) < tiny ? tiny : d);
  double h = d;
  for (int m = 1; m <= 10000; m++) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
    d = 1.0 + aa * d;
    c = 1.0 + aa / c;
    d = 1.0 / (fabs(d) < tiny ? tiny : d);
    c = fabs(c) < tiny ? tiny : c;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
    d = 1.0 + aa * d;
    c = 1.0 + aa / c;
    d = 1.0 / (fabs(d) < tiny ? tiny : d);
    c = fabs(c) < tiny ? tiny : c;
    const double delta = d * c;
    h *= delta;
    if (fabs(delta - 1.0) < 1e-16)
      break;
  }
  return h;
}

/* I_x(a, b) with log x and log(1 - x) given, so that x near 0 or 1 keeps its digits. */
static double knnwb_beta_regularised(double a, double b, double x, double log_x, double log_1mx)
{
  if (x <= 0.0)
    return 0.0;
  if (x >= 1.0)
    return 1.0;
  const double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log_x + b * log_1mx);
  if (x < (a + 1.0) / (a + b + 2.0))
    return front * knnwb_beta_fraction(a, b, x) / a;
  return 1.0 - front * knnwb_beta_fraction(b, a, 1.0 - x) / b;
}

double knnwb_correlation_p_value(double r, size_t n)
{
  if (!isfinite(r) || n < 3 || fabs(r) > 1.0)
    return NAN;
  const double s = fabs(r);
  if (s == 1.0)
    return 0.0;
  /* p = P(|T| >= |t|) with t = r sqrt((n - 2) / (1 - r^2)), T ~ t(n - 2): that is I_x(df/2, 1/2)
   * with x = df / (df + t^2) = 1 - r^2, taken as (1 - s)(1 + s) so that |r| near 1 keeps its
   * digits. */
  const double df = (double)(n - 2);
  const double x = (1.0 - s) * (1.0 + s);
  return knnwb_beta_regularised(df / 2.0, 0.5, x, log1p(-s) + log1p(s), 2.0 * log(s));
}

typedef struct {
  double p;
  size_t index;
} KnnwbRankedP;

/* By p, then index: the order, and so q, never depends on qsort's ties. */
static int knnwb_ranked_p_compare(const void *a, const void *b)
{
  const KnnwbRankedP *x = a, *y = b;
  if (x->p != y->p)
    return (x->p > y->p) - (x->p < y->p);
  return (x->index > y->index) - (x->index < y->index);
}

void knnwb_benjamini_hochberg(const double *p, size_t m, double *q)
{
  KnnwbRankedP *ranked = g_new(KnnwbRankedP, MAX(m, (size_t)1));
  for (size_t i = 0; i < m; i++)
    ranked[i] = (KnnwbRankedP){p[i], i};
  qsort(ranked, m, sizeof *ranked, knnwb_ranked_p_compare);
  /* q_(j) = min over j' >= j of m p_(j') / j', from the largest p down. */
  double running = 1.0;
  for (size_t j = m; j-- > 0;) {
    running = MIN(running, ranked[j].p * (double)m / (double)(j + 1));
    q[ranked[j].index] = running;
  }
  g_free(ranked);
}

/* The p of rows [0, n) of rows (row first + i of the whole) against the focus values x: NaN for
 * the focus itself, absent rows and rows whose r is undefined. */
static void knnwb_neighbourhood_row_p(const KnnwbMatrix *rows, size_t first, int64_t focus,
                                      const float *x, KnnwbMetric metric, double *p)
{
  const size_t d = rows->n_cols;
  const KnnwbMetric signed_metric =
      metric == KNNWB_METRIC_ABS_PEARSON ? KNNWB_METRIC_PEARSON : metric;
  for (size_t i = 0; i < rows->n_rows; i++) {
    p[i] = NAN;
    if ((int64_t)(first + i) == focus || knnwb_matrix_row_is_absent(rows, i))
      continue;
    const double r = 1.0 - knnwb_distance_exact(signed_metric, x, rows->values + i * d, d);
    p[i] = knnwb_correlation_p_value(r, d);
  }
}

/* From every row's p (NaN: not a candidate) to the members' p and q of focus f: q is
 * Benjamini-Hochberg over the candidates. */
static void knnwb_neighbourhood_focus_q(const KnnwbNeighbourhood *neighbourhood, size_t f,
                                        const double *row_p, size_t n, double *p, double *q,
                                        size_t *n_candidates)
{
  g_autofree double *listed = g_new(double, MAX(n, (size_t)1));
  g_autofree double *adjusted = g_new(double, MAX(n, (size_t)1));
  g_autofree size_t *slot = g_new(size_t, MAX(n, (size_t)1));
  size_t m = 0;
  for (size_t row = 0; row < n; row++) {
    slot[row] = SIZE_MAX;
    if (isnan(row_p[row]))
      continue;
    slot[row] = m;
    listed[m++] = row_p[row];
  }
  knnwb_benjamini_hochberg(listed, m, adjusted);
  if (f == 0 && n_candidates != NULL)
    *n_candidates = m;
  for (size_t i = 0; i < neighbourhood->n_members; i++) {
    const KnnwbNeighbourhoodMember *member = &neighbourhood->members[i];
    if (member->focus != f || slot[member->row] == SIZE_MAX)
      continue;
    p[i] = listed[slot[member->row]];
    q[i] = adjusted[slot[member->row]];
  }
}

gboolean knnwb_neighbourhood_statistics(const KnnwbNeighbourhood *neighbourhood,
                                        const KnnwbMatrix *data, KnnwbMetric metric, double *p,
                                        double *q, size_t *n_candidates, GError **error)
{
  const size_t n = data->n_rows, d = data->n_cols;
  g_autofree double *row_p = g_try_new(double, MAX(n, (size_t)1));
  if (row_p == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the p-values of %zu rows", n);
    return FALSE;
  }
  for (size_t i = 0; i < neighbourhood->n_members; i++)
    p[i] = q[i] = NAN;
  for (size_t f = 0; f < neighbourhood->n_focus; f++) {
    const int64_t focus = neighbourhood->focus[f];
    knnwb_neighbourhood_row_p(data, 0, focus, data->values + (size_t)focus * d, metric, row_p);
    knnwb_neighbourhood_focus_q(neighbourhood, f, row_p, n, p, q, n_candidates);
  }
  return TRUE;
}

gboolean knnwb_neighbourhood_statistics_split(const KnnwbKnnGroup *group, const KnnwbMatrix *block,
                                              const size_t *first_row, const int64_t *focus,
                                              size_t n_focus,
                                              const KnnwbNeighbourhood *neighbourhood,
                                              KnnwbMetric metric, double *p, double *q,
                                              GError **error)
{
  const size_t ranks = (size_t)group->size, me = (size_t)group->rank;
  const size_t n = first_row[ranks];
  KnnwbNeighbourhoodRows rows = {.data = block, .group = group, .first = first_row, .n_rows = n};
  g_autoptr(KnnwbMatrix) focus_values = NULL;
  if (!knnwb_neighbourhood_rows_gather(&rows, focus, n_focus, FALSE, &focus_values, error))
    return FALSE;
  g_autofree size_t *bytes = g_new(size_t, ranks);
  for (size_t r = 0; r < ranks; r++)
    bytes[r] = (first_row[r + 1] - first_row[r]) * sizeof(double);
  g_autofree double *mine = g_new(double, MAX(block->n_rows, (size_t)1));
  g_autofree double *row_p = g_new(double, MAX(n, (size_t)1));
  for (size_t i = 0; neighbourhood != NULL && i < neighbourhood->n_members; i++)
    p[i] = q[i] = NAN;
  for (size_t f = 0; f < n_focus; f++) {
    knnwb_neighbourhood_row_p(block, first_row[me], focus[f],
                              focus_values->values + f * block->n_cols, metric, mine);
    if (!knnwb_knn_group_gather_bytes(group, mine, bytes, row_p, error))
      return FALSE;
    if (neighbourhood != NULL)
      knnwb_neighbourhood_focus_q(neighbourhood, f, row_p, n, p, q, NULL);
  }
  return TRUE;
}
