/* Makes a matrix ready for a metric: the float rows a backend scores and the double statistics of
 * the exact recomputation. Centring and normalising happen in double and are rounded once, so a
 * nearly constant row does not lose its signal to float cancellation. */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "engine/engine_internal.h"

typedef struct {
  KnnwbPrepared *prepared;
  const KnnwbMatrix *data;
  unsigned char *degenerate;
  const volatile gint *cancel;
  gint cancelled;               /* set by a worker that saw the flag and left its rows */
  const KnnwbPrepareAlso *also; /* or NULL */
  const float *hashed;          /* the rows also->hash is made of (knnwb_duplicates_values) */
  GMutex lock;                  /* first_bad */
  size_t first_bad;             /* the first row holding NaN or an infinite value, or SIZE_MAX */
} KnnwbPrepareLoop;

/* Row i holds NaN or an infinite value: recorded (the lowest such row wins) and left unprepared. */
static void knnwb_prepare_bad_row(KnnwbPrepareLoop *loop, size_t i)
{
  g_mutex_lock(&loop->lock);
  loop->first_bad = MIN(loop->first_bad, i);
  g_mutex_unlock(&loop->lock);
}

/* What the prepare pass does beside preparing row i before its metric's arithmetic
 * (knnwb_prepared_init_also): the duplicate search's hash, and the finite check where no double
 * sum of the row's values tells it (manhattan; spearman, whose ranks must not see NaN). FALSE: a
 * bad row, recorded. */
static gboolean knnwb_prepare_row_also(KnnwbPrepareLoop *loop, size_t i, const float *row)
{
  const KnnwbPrepareAlso *also = loop->also;
  const KnnwbMetric metric = loop->prepared->metric;
  if ((metric == KNNWB_METRIC_MANHATTAN || metric == KNNWB_METRIC_SPEARMAN) &&
      !knnwb_floats_finite(row, loop->prepared->d)) {
    knnwb_prepare_bad_row(loop, i);
    return FALSE;
  }
  if (also->hash != NULL)
    also->hash[i] = knnwb_duplicates_row_hash(loop->data, loop->hashed, i);
  return TRUE;
}

/* The finite check where the metric's double sums over the row tell it: a sum of finite floats
 * in double cannot overflow, so a sum that is not finite means the row holds NaN or an infinity,
 * or (euclidean) that a column's mean is not finite because another row does: the row's bits
 * decide then. FALSE: a bad row, recorded. */
static gboolean knnwb_prepare_sums_finite(KnnwbPrepareLoop *loop, size_t i, const float *row,
                                          double a, double b)
{
  if (loop->also == NULL || (isfinite(a) && isfinite(b)) ||
      knnwb_floats_finite(row, loop->prepared->d))
    return TRUE;
  knnwb_prepare_bad_row(loop, i);
  return FALSE;
}

static gboolean knnwb_row_is_constant(const float *row, size_t d)
{
  for (size_t j = 1; j < d; j++)
    if (row[j] != row[0])
      return FALSE;
  return TRUE;
}

/* x 2^-e rounded to float, as (float)ldexp(x, -e): a product by an exact power of two rounds
 * the same (both are the exact value, rounded once), and is a multiplication instead of a call
 * per value (ldexp was most of prepare's time: 600,000 x 50 euclidean, 0.16 s on 2 threads). */
static inline float knnwb_prepare_scaled(double x, double power, int e)
{
  return power != 0.0 ? (float)(x * power) : (float)ldexp(x, -e);
}

static void knnwb_prepare_rows(size_t first, size_t last, void *user)
{
  KnnwbPrepareLoop *loop = user;
  KnnwbPrepared *p = loop->prepared;
  const size_t d = p->d;
  /* 2^-e where a double holds it (it always does for float data; else the call per value) */
  const int e = p->scale_exponent;
  const double power = e > -1000 && e < 1000 ? ldexp(1.0, -e) : 0.0;
  for (size_t i = first; i < last; i++) {
    /* Polled inside the loop: one thread gets all n rows in one call. */
    if ((i - first) % 1024 == 0 &&
        (g_atomic_int_get(&loop->cancelled) ||
         (loop->cancel != NULL && g_atomic_int_get(loop->cancel) != 0))) {
      g_atomic_int_set(&loop->cancelled, 1);
      return;
    }
    const float *row = loop->data->values + i * d;
    if (loop->also != NULL && !knnwb_prepare_row_also(loop, i, row))
      continue;
    switch (p->metric) {
    case KNNWB_METRIC_EUCLIDEAN: {
      float *out = p->scored_owned + i * d;
      double ss = 0.0, ss_scaled = 0.0;
      for (size_t j = 0; j < d; j++) {
        double centred = (double)row[j] - p->column_mean[j];
        ss += centred * centred;
        out[j] = knnwb_prepare_scaled(centred, power, e);
        ss_scaled += (double)out[j] * out[j];
      }
      if (!knnwb_prepare_sums_finite(loop, i, row, ss, 0.0))
        break;
      p->sqnorms[i] = (float)ss_scaled;
      p->norm[i] = sqrt(ss);
      break;
    }
    case KNNWB_METRIC_MANHATTAN:
      if (p->scored_owned != NULL) {
        float *out = p->scored_owned + i * d;
        for (size_t j = 0; j < d; j++)
          out[j] = knnwb_prepare_scaled((double)row[j], power, e);
      }
      break;
    default: {
      const float *source = row;
      if (p->metric == KNNWB_METRIC_SPEARMAN) {
        /* Ranks a reader took from the values as read (double) when it kept them: values that
         * differ only beyond float32 precision do not tie there. */
        const float *given = knnwb_matrix_row_ranks(loop->data);
        if (given != NULL)
          memcpy(p->ranks_owned + i * d, given + i * d, d * sizeof(float));
        else
          knnwb_row_ranks(row, d, p->ranks_owned + i * d);
        source = p->ranks_owned + i * d;
      }
      knnwb_row_statistics(p->metric, source, d, &p->mean[i], &p->sum_squares[i]);
      if (!knnwb_prepare_sums_finite(loop, i, row, p->mean[i], p->sum_squares[i]))
        break;
      gboolean degenerate = p->metric == KNNWB_METRIC_COSINE ? p->sum_squares[i] == 0.0
                                                             : knnwb_row_is_constant(source, d);
      float *out = p->scored_owned + i * d;
      if (degenerate) {
        loop->degenerate[i] = 1;
        memset(out, 0, d * sizeof(float));
        break;
      }
      const double inverse_norm = 1.0 / sqrt(p->sum_squares[i]);
      for (size_t j = 0; j < d; j++)
        out[j] = (float)(((double)source[j] - p->mean[i]) * inverse_norm);
    }
    }
  }
}

/* One derived row (the pearson family, spearman, cosine): (x - mean) / |row|, in double, rounded
 * once, as knnwb_prepare_rows computes it; in lanes of 8 so that the clones vectorise it (a CPU
 * backend derives every reference block of every tile). */
KNNWB_VECTOR_CLONES
static void knnwb_prepare_derive_row(const float *row, size_t d, double mean, double inverse_norm,
                                     float *out)
{
  size_t j = 0;
  for (; j + 8 <= d; j += 8)
    for (size_t t = 0; t < 8; t++)
      out[j + t] = (float)(((double)row[j + t] - mean) * inverse_norm);
  for (; j < d; j++)
    out[j] = (float)(((double)row[j] - mean) * inverse_norm);
}

/* One derived euclidean row with power != 0: (x - column mean) 2^-e, as knnwb_prepare_scaled. */
KNNWB_VECTOR_CLONES
static void knnwb_prepare_derive_scaled(const float *row, size_t d, const double *column_mean,
                                        double power, float *out)
{
  size_t j = 0;
  for (; j + 8 <= d; j += 8)
    for (size_t t = 0; t < 8; t++)
      out[j + t] = (float)(((double)row[j + t] - column_mean[j + t]) * power);
  for (; j < d; j++)
    out[j] = (float)(((double)row[j] - column_mean[j]) * power);
}

gboolean knnwb_prepared_derivable(KnnwbMetric metric)
{
  return metric != KNNWB_METRIC_MANHATTAN;
}

void knnwb_prepared_scored_rows(const KnnwbPrepared *p, size_t first, size_t count, float *out)
{
  const size_t d = p->d;
  if (p->scored != NULL) {
    memcpy(out, p->scored + first * d, count * d * sizeof(float));
    return;
  }
  g_assert(knnwb_prepared_derivable(p->metric));
  const int e = p->scale_exponent;
  const double power = e > -1000 && e < 1000 ? ldexp(1.0, -e) : 0.0;
  for (size_t t = 0; t < count; t++) {
    const size_t i = first + t;
    const float *row = p->exact + i * d;
    float *to = out + t * d;
    /* left-out rows (degenerate, absent) are zeros, as knnwb_prepare_flag_rows leaves them */
    if ((p->invalid != NULL && p->invalid[i]) ||
        (p->metric != KNNWB_METRIC_EUCLIDEAN && !(p->sum_squares[i] > 0.0))) {
      memset(to, 0, d * sizeof(float));
      continue;
    }
    if (p->metric == KNNWB_METRIC_EUCLIDEAN && power != 0.0) {
      knnwb_prepare_derive_scaled(row, d, p->column_mean, power, to);
    } else if (p->metric == KNNWB_METRIC_EUCLIDEAN) {
      for (size_t j = 0; j < d; j++)
        to[j] = knnwb_prepare_scaled((double)row[j] - p->column_mean[j], power, e);
    } else {
      /* as knnwb_prepare_rows: the same double operations, rounded once */
      knnwb_prepare_derive_row(row, d, p->mean[i], 1.0 / sqrt(p->sum_squares[i]), to);
    }
  }
}

void knnwb_prepared_scored_fill(const void *source, size_t first, size_t count, float *out)
{
  knnwb_prepared_scored_rows(source, first, count, out);
}

const float *knnwb_prepared_scored_at(const KnnwbPrepared *p, size_t first, size_t count,
                                      float *scratch)
{
  if (p->scored != NULL)
    return p->scored + first * p->d;
  knnwb_prepared_scored_rows(p, first, count, scratch);
  return scratch;
}

/* Column means and the power of two that brings the largest centred value into [1, 2): after it,
 * float scores neither overflow (values near 1e20) nor lose everything to an offset (raw
 * intensities around 1e4 with differences near 1). Threads take columns, each summed over the
 * rows in order, so the means are the same bits for any number of threads. */
typedef struct {
  KnnwbPrepared *p;
  const KnnwbMatrix *data;
  double *largest; /* per column */
} KnnwbPrepareFrame;

/* One pass over the rows for each column's sum, least and greatest value; the largest centred
 * magnitude then follows from the two extremes: x - mean rounds monotonically in x, so the largest
 * |x - mean| over a column is that of its least or its greatest value, the same bits as a second
 * pass over every value (which read the whole matrix once more per thread). */
static void knnwb_prepare_frame_columns(size_t first, size_t last, void *user)
{
  KnnwbPrepareFrame *frame = user;
  KnnwbPrepared *p = frame->p;
  const size_t n = p->n, d = p->d;
  const float *values = frame->data->values;
  float *low = g_new(float, last - first), *high = g_new(float, last - first);
  for (size_t j = first; j < last; j++) {
    p->column_mean[j] = 0.0;
    low[j - first] = high[j - first] = n > 0 ? values[j] : 0.0f;
  }
  for (size_t i = 0; i < n; i++)
    for (size_t j = first; j < last; j++) {
      const float x = values[i * d + j];
      p->column_mean[j] += x;
      low[j - first] = MIN(low[j - first], x);
      high[j - first] = MAX(high[j - first], x);
    }
  for (size_t j = first; j < last; j++) {
    if (n > 0)
      p->column_mean[j] /= (double)n;
    const double mean = p->column_mean[j];
    frame->largest[j] =
        n > 0 ? MAX(fabs((double)low[j - first] - mean), fabs((double)high[j - first] - mean))
              : 0.0;
  }
  g_free(low);
  g_free(high);
}

static void knnwb_prepare_euclidean_frame(KnnwbPrepared *p, const KnnwbMatrix *data, int n_threads)
{
  KnnwbPrepareFrame frame = {p, data, g_new(double, MAX(p->d, (size_t)1))};
  /* one contiguous range of columns a thread: each reads its few columns of every row once */
  const size_t threads = (size_t)knnwb_thread_count(n_threads);
  knnwb_parallel_for(n_threads, p->d, (p->d + threads - 1) / threads, knnwb_prepare_frame_columns,
                     &frame);
  double largest = 0.0;
  for (size_t j = 0; j < p->d; j++)
    largest = MAX(largest, frame.largest[j]);
  g_free(frame.largest);
  /* (not finite: the data holds NaN or an infinite value, which the caller's check reports) */
  p->scale_exponent = largest > 0.0 && isfinite(largest) ? ilogb(largest) : 0;
}

/* The power of two that keeps float L1 sums finite: a sum of d terms |x - y| is at most
 * 2 d max|x|, so max|x| 2^-e must stay below 2^127 / (4 d). 0 for all ordinary data, which is then
 * scored as it is; near the float limit the rows are scaled, exactly except where a scaled value
 * becomes subnormal (the refinement's bound allows for that). */
int knnwb_prepare_manhattan_exponent(const KnnwbMatrix *data)
{
  const size_t cells = data->n_rows * data->n_cols;
  float largest = 0.0f;
  for (size_t c = 0; c < cells; c++)
    largest = MAX(largest, fabsf(data->values[c]));
  if (largest == 0.0f || !isfinite(largest)) /* (not finite: the caller's check reports it) */
    return 0;
  int d_bits = 0;
  while (d_bits < 64 && ((size_t)1 << d_bits) < data->n_cols)
    d_bits++;
  return MAX(0, ilogbf(largest) + 1 + d_bits + 2 - 127);
}

void knnwb_prepared_clear(KnnwbPrepared *p)
{
  g_free(p->scored_owned);
  g_free(p->ranks_owned);
  g_free(p->sqnorms);
  g_free(p->mean);
  g_free(p->sum_squares);
  g_free(p->norm);
  g_free(p->invalid);
  g_free(p->column_mean);
  memset(p, 0, sizeof *p);
}

void knnwb_prepared_release_rows(KnnwbPrepared *p)
{
  /* The copies are n x d floats each (1.8 GB at 1,533,876 x 295): their unmapping took 0.09 s. */
  const size_t cells = p->n * p->d;
  void *blocks[] = {p->scored_owned, p->ranks_owned, p->sqnorms, p->mean,
                    p->sum_squares,  p->norm,        p->invalid};
  const size_t bytes[] = {cells * sizeof(float),
                          cells * sizeof(float),
                          p->n * sizeof(float),
                          p->n * sizeof(double),
                          p->n * sizeof(double),
                          p->n * sizeof(double),
                          p->n};
  knnwb_release_later(blocks, bytes, G_N_ELEMENTS(blocks));
  p->scored_owned = p->ranks_owned = p->sqnorms = NULL;
  p->mean = p->sum_squares = p->norm = NULL;
  p->invalid = NULL;
  p->scored = p->exact = NULL;
}

void knnwb_prepared_release(KnnwbPrepared *p)
{
  knnwb_prepared_release_rows(p);
  void *frame[] = {p->column_mean};
  const size_t bytes[] = {p->d * sizeof(double)};
  knnwb_release_later(frame, bytes, 1);
  memset(p, 0, sizeof *p);
}

static void *knnwb_try_alloc(size_t count, size_t size, gboolean *ok)
{
  size_t bytes;
  if (!*ok || !knnwb_size_multiply(count, size, &bytes)) {
    *ok = FALSE;
    return NULL;
  }
  void *memory = knnwb_memory_try_alloc(MAX(bytes, (size_t)1), TRUE);
  if (memory == NULL)
    *ok = FALSE;
  return memory;
}

gboolean knnwb_prepared_init(KnnwbPrepared *p, const KnnwbMatrix *data, KnnwbMetric metric,
                             gboolean drop_degenerate, const char *role, int n_threads,
                             const KnnwbPrepared *like, const volatile gint *cancel, GError **error)
{
  return knnwb_prepared_init_rows(p, data, 0, metric, drop_degenerate, role, n_threads, like,
                                  cancel, error);
}

/* The arrays metric needs for data's n x d (cells) rows; ok cleared when one cannot be had. */
static void knnwb_prepare_allocate(KnnwbPrepared *p, const KnnwbMatrix *data, size_t cells,
                                   const KnnwbPrepared *like, gboolean *ok)
{
  const size_t n = p->n, d = p->d;
  switch (p->metric) {
  case KNNWB_METRIC_EUCLIDEAN:
    p->scored_owned = knnwb_try_alloc(cells, sizeof(float), ok);
    p->scored = p->scored_owned;
    p->exact = data->values;
    p->sqnorms = knnwb_try_alloc(n, sizeof(float), ok);
    p->norm = knnwb_try_alloc(n, sizeof(double), ok);
    p->column_mean = knnwb_try_alloc(MAX(d, (size_t)1), sizeof(double), ok);
    break;
  case KNNWB_METRIC_MANHATTAN:
    /* The query shares the reference's scale; a query far beyond the reference's magnitudes may
     * then score infinite, which the refinement treats as "unknown" and recomputes exactly. */
    p->scale_exponent =
        like != NULL ? like->scale_exponent : knnwb_prepare_manhattan_exponent(data);
    if (p->scale_exponent > 0) {
      p->scored_owned = knnwb_try_alloc(cells, sizeof(float), ok);
      p->scored = p->scored_owned;
    } else {
      p->scored = data->values;
    }
    p->exact = data->values;
    break;
  default:
    p->scored_owned = knnwb_try_alloc(cells, sizeof(float), ok);
    p->scored = p->scored_owned;
    if (p->metric == KNNWB_METRIC_SPEARMAN) {
      p->ranks_owned = knnwb_try_alloc(cells, sizeof(float), ok);
      p->exact = p->ranks_owned;
    } else {
      p->exact = data->values;
    }
    p->mean = knnwb_try_alloc(n, sizeof(double), ok);
    p->sum_squares = knnwb_try_alloc(n, sizeof(double), ok);
    break;
  }
}

/* The scale of the scores in data units: euclidean's frame (like's, or data's own) and manhattan's
 * power of two. */
static void knnwb_prepare_scale(KnnwbPrepared *p, const KnnwbMatrix *data,
                                const KnnwbPrepared *like, int n_threads)
{
  p->score_scale = 1.0;
  if (p->metric == KNNWB_METRIC_EUCLIDEAN) {
    if (like != NULL) {
      memcpy(p->column_mean, like->column_mean, p->d * sizeof(double));
      p->scale_exponent = like->scale_exponent;
    } else {
      knnwb_prepare_euclidean_frame(p, data, n_threads);
    }
    p->score_scale = ldexp(1.0, 2 * p->scale_exponent);
  }
  if (p->metric == KNNWB_METRIC_MANHATTAN)
    p->score_scale = ldexp(1.0, p->scale_exponent);
}

gboolean knnwb_prepare_report_degenerate(KnnwbMetric metric, const char *role, gboolean drop,
                                         size_t n_degenerate, size_t first_row, const char *label,
                                         GError **error)
{
  const char *what = metric == KNNWB_METRIC_COSINE ? "is all zeros and has no direction"
                                                   : "is constant and has no correlation";
  /* role is "data", "query", "reference" or the data's name (a file) for warnings. */
  const char *noun = g_str_equal(role, "query") || g_str_equal(role, "reference") ? role : "data";
  if (!drop) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "%s row %zu%s%s%s (counted from 0) %s for the %s metric (%zu such row%s): "
                "remove %s, or drop them (knnwb knn --drop-degenerate, pipeline "
                "drop-degenerate=\"true\")",
                noun, first_row, label ? " (" : "", label ? label : "", label ? ")" : "", what,
                knnwb_metric_to_string(metric), n_degenerate, n_degenerate == 1 ? "" : "s",
                n_degenerate == 1 ? "it" : "them");
    return FALSE;
  }
  g_warning("%s: %zu row%s left out of the %s kNN graph (first: row %zu%s%s%s, counted from 0, "
            "%s); they get no edges",
            role, n_degenerate, n_degenerate == 1 ? "" : "s", knnwb_metric_to_string(metric),
            first_row, label ? " (" : "", label ? label : "", label ? ")" : "", what);
  return TRUE;
}

/* The rows left out: absent rows, and degenerate ones (flags 1 in degenerate) as an error naming
 * the first or, with drop_degenerate, a warning (report), or counted only (!report). Takes
 * degenerate over (p->invalid, or freed). */
static gboolean knnwb_prepare_flag_rows(KnnwbPrepared *p, const KnnwbMatrix *data,
                                        unsigned char *degenerate, size_t first_row,
                                        gboolean drop_degenerate, const char *role, gboolean report,
                                        GError **error)
{
  const size_t n = p->n, d = p->d;
  /* Absent rows (kept only for their numbers; their reader has said why) are left out like
   * degenerate rows, without an error or another warning. Their values are zeros, so the scored
   * copies are finite; they are zeroed here to be sure no score depends on them. */
  size_t n_absent = 0;
  for (size_t i = 0; i < n && data->n_absent_rows > 0; i++)
    if (knnwb_matrix_row_is_absent(data, i)) {
      degenerate[i] = 2;
      n_absent++;
      if (p->scored_owned != NULL)
        memset(p->scored_owned + i * d, 0, d * sizeof(float));
    }
  size_t n_degenerate = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (degenerate[i] == 1 && n_degenerate++ == 0)
      first = i;
  p->n_degenerate = n_degenerate;
  p->first_degenerate = first;
  if (n_degenerate > 0 && report &&
      !knnwb_prepare_report_degenerate(p->metric, role, drop_degenerate, n_degenerate,
                                       first_row + first, knnwb_matrix_row_label(data, first),
                                       error)) {
    g_free(degenerate);
    return FALSE;
  }
  if (n_degenerate + n_absent > 0) {
    for (size_t i = 0; i < n; i++)
      degenerate[i] = degenerate[i] != 0; /* the backends read plain flags */
    p->invalid = degenerate;
    p->n_invalid = n_degenerate + n_absent;
  } else {
    g_free(degenerate);
  }
  return TRUE;
}

static gboolean knnwb_prepared_init_report(KnnwbPrepared *p, const KnnwbMatrix *data,
                                           size_t first_row, KnnwbMetric metric,
                                           gboolean drop_degenerate, const char *role,
                                           gboolean report, int n_threads,
                                           const KnnwbPrepared *like, const volatile gint *cancel,
                                           const KnnwbPrepareAlso *also, GError **error)
{
  memset(p, 0, sizeof *p);
  p->metric = metric;
  p->n = data->n_rows;
  p->d = data->n_cols;
  const size_t n = p->n, d = p->d;
  size_t cells;
  if (!knnwb_size_multiply(n, d, &cells)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "%s: %zu x %zu is too large", role, n,
                d);
    return FALSE;
  }
  gboolean ok = TRUE;
  unsigned char *degenerate = knnwb_try_alloc(n, 1, &ok);
  knnwb_prepare_allocate(p, data, cells, like, &ok);
  if (!ok) {
    g_free(degenerate);
    knnwb_prepared_clear(p);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%s: cannot allocate the prepared copy of a %zu x %zu matrix (%s metric)", role, n,
                d, knnwb_metric_to_string(metric));
    return FALSE;
  }
  knnwb_prepare_scale(p, data, like, n_threads);
  KnnwbPrepareLoop loop = {.prepared = p,
                           .data = data,
                           .degenerate = degenerate,
                           .cancel = cancel,
                           .also = also,
                           .hashed = knnwb_duplicates_values(data, metric),
                           .first_bad = SIZE_MAX};
  g_mutex_init(&loop.lock);
  knnwb_parallel_for(n_threads, n, 1024, knnwb_prepare_rows, &loop);
  g_mutex_clear(&loop.lock);
  if (g_atomic_int_get(&loop.cancelled)) {
    g_free(degenerate);
    knnwb_prepared_clear(p);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled while preparing the %s rows",
                role);
    return FALSE;
  }
  if (loop.first_bad != SIZE_MAX && !also->skip_bad) { /* knnwb_matrix_check_finite_rows's words */
    g_free(degenerate);
    knnwb_prepared_clear(p);
    if (knnwb_matrix_check_finite_rows(data, loop.first_bad, loop.first_bad + 1, first_row, error))
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                  "%s row %zu was flagged as holding NaN or an infinite value but holds none "
                  "(an internal error)",
                  role, first_row + loop.first_bad);
    return FALSE;
  }
  for (size_t i = 0; i < n; i++)
    if (p->norm != NULL && p->norm[i] > p->max_norm)
      p->max_norm = p->norm[i];
  if (!knnwb_prepare_flag_rows(p, data, degenerate, first_row, drop_degenerate, role, report,
                               error)) {
    knnwb_prepared_clear(p);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_prepared_init_rows(KnnwbPrepared *p, const KnnwbMatrix *data, size_t first_row,
                                  KnnwbMetric metric, gboolean drop_degenerate, const char *role,
                                  int n_threads, const KnnwbPrepared *like,
                                  const volatile gint *cancel, GError **error)
{
  return knnwb_prepared_init_report(p, data, first_row, metric, drop_degenerate, role, TRUE,
                                    n_threads, like, cancel, NULL, error);
}

gboolean knnwb_prepared_init_also(KnnwbPrepared *p, const KnnwbMatrix *data, KnnwbMetric metric,
                                  gboolean drop_degenerate, const char *role, int n_threads,
                                  const volatile gint *cancel, const KnnwbPrepareAlso *also,
                                  GError **error)
{
  return knnwb_prepared_init_report(p, data, 0, metric, drop_degenerate, role, TRUE, n_threads,
                                    NULL, cancel, also, error);
}

gboolean knnwb_prepared_init_block(KnnwbPrepared *p, const KnnwbMatrix *data, size_t first_row,
                                   KnnwbMetric metric, const char *role, int n_threads,
                                   const KnnwbPrepared *like, const volatile gint *cancel,
                                   GError **error)
{
  return knnwb_prepared_init_report(p, data, first_row, metric, TRUE, role, FALSE, n_threads, like,
                                    cancel, NULL, error);
}

double knnwb_prepared_distance(const KnnwbPrepared *a, size_t i, const KnnwbPrepared *b, size_t j)
{
  const size_t d = a->d;
  double mean_a = a->mean ? a->mean[i] : 0.0, squares_a = a->sum_squares ? a->sum_squares[i] : 0.0;
  double mean_b = b->mean ? b->mean[j] : 0.0, squares_b = b->sum_squares ? b->sum_squares[j] : 0.0;
  return knnwb_pair_distance(a->metric, a->exact + i * d, b->exact + j * d, d, mean_a, squares_a,
                             mean_b, squares_b);
}
