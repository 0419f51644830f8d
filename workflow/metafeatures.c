/* Metafeatures: every unordered pair of rows combined by difference, sum, product or ratio,
 * generated in parallel straight into the result matrix. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/metafeatures.h>
#include <knnwb/parallel.h>

static const KnnwbEnumName knnwb_metafeatures_names[] = {KNNWB_METAFEATURE_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_metafeature_table =
    KNNWB_ENUM_TABLE(knnwb_metafeatures_names, 0, " or ", "metafeature operator ",
                     " is unknown (expected ", ", separated by commas)", "(null)");
static const char knnwb_metafeatures_symbols[KNNWB_METAFEATURE_COUNT] = {'-', '+', '*', '/'};

const char *knnwb_metafeatures_op_to_string(KnnwbMetafeatureOp op)
{
  const char *name = (unsigned)op < KNNWB_METAFEATURE_COUNT
                         ? knnwb_enum_to_string(&knnwb_metafeature_table, (int)op)
                         : NULL;
  return name != NULL ? name : "?";
}

gboolean knnwb_metafeatures_parse_ops(const char *text, KnnwbMetafeatureOp *ops, size_t *n_ops,
                                      GError **error)
{
  g_auto(GStrv) words = g_strsplit(text ? text : "", ",", -1);
  gboolean seen[KNNWB_METAFEATURE_COUNT] = {FALSE};
  *n_ops = 0;
  for (char **w = words; *w; w++) {
    const char *word = g_strstrip(*w);
    int found;
    if (!knnwb_enum_from_string(&knnwb_metafeature_table, word, &found, error))
      return FALSE;
    if (found == KNNWB_METAFEATURE_COUNT) { /* all */
      for (int op = 0; op < KNNWB_METAFEATURE_COUNT; op++)
        if (!seen[op]) {
          seen[op] = TRUE;
          ops[(*n_ops)++] = (KnnwbMetafeatureOp)op;
        }
      continue;
    }
    if (seen[found]) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "metafeature operator '%s' is listed twice", word);
      return FALSE;
    }
    seen[found] = TRUE;
    ops[(*n_ops)++] = (KnnwbMetafeatureOp)found;
  }
  if (*n_ops == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "no metafeature operator given (expected e.g. difference or difference,ratio)");
    return FALSE;
  }
  return TRUE;
}

void knnwb_metafeatures_options_init(KnnwbMetafeatureOptions *options)
{
  memset(options, 0, sizeof *options);
  options->missing = KNNWB_MISSING_ERROR;
}

gboolean knnwb_metafeatures_count(size_t n_rows, size_t n_paired, size_t n_ops, size_t *n_result,
                                  GError **error)
{
  /* m (m - 1) / 2 without overflowing on the way: halve the even factor first. */
  size_t pairs = 0;
  if (n_paired >= 2) {
    size_t a = n_paired, b = n_paired - 1;
    if (a % 2 == 0)
      a /= 2;
    else
      b /= 2;
    if (!knnwb_size_multiply(a, b, &pairs))
      goto overflow;
  }
  size_t generated;
  if (!knnwb_size_multiply(pairs, n_ops, &generated) || generated > SIZE_MAX - n_rows)
    goto overflow;
  *n_result = n_rows + generated;
  return TRUE;
overflow:
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
              "metafeatures of %zu rows with %zu operators: the row count overflows this "
              "machine's address space",
              n_paired, n_ops);
  return FALSE;
}

typedef struct {
  const KnnwbMatrix *data;
  const size_t *rows; /* m paired rows */
  size_t m;
  const KnnwbMetafeatureOp *ops;
  size_t n_ops;
  float *out;          /* the first generated row */
  size_t pairs_per_op; /* m (m - 1) / 2 */
  size_t unit_first;   /* the units (operator, a) generated here: all, or a share's run */
  size_t index_first;  /* the pair index (over all units) of unit_first's first pair */
  size_t n_generated;  /* the pairs generated here (progress) */
  guint8 *bad;         /* one flag per generated row: 1 failed, 2 a row of it absent */
  gint stop;           /* set on the first bad pair (error policy) or on cancellation */
  gint n_bad;
  gint n_absent; /* pairs left out because a row of them is absent (missing values) */
  const volatile gint *cancel;
  gsize done; /* pairs done (atomic) */
  KnnwbProgressFunc progress;
  void *progress_data;
  KnnwbProgressThrottle report;
} KnnwbMetafeatureJob;

/* Offset of the pairs (a, b > a) of paired row a within one operator's block. */
static size_t knnwb_metafeatures_pair_offset(size_t a, size_t m)
{
  return a * (m - 1) - a * (a - 1) / 2; /* a = 0: 0 * (SIZE_MAX) is 0 */
}

/* The float bit patterns of an infinite/NaN result, or of a zero/subnormal denominator. */
static inline gboolean knnwb_metafeatures_row_bad(const float *row, size_t d)
{
  uint32_t any = 0;
  for (size_t j = 0; j < d; j++) {
    uint32_t bits;
    memcpy(&bits, &row[j], sizeof bits);
    any |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
  }
  return any != 0;
}

static inline gboolean knnwb_metafeatures_denominator_bad(const float *row, size_t d)
{
  uint32_t any = 0;
  for (size_t j = 0; j < d; j++) {
    uint32_t bits;
    memcpy(&bits, &row[j], sizeof bits);
    any |= (uint32_t)((bits & 0x7f800000u) == 0);
  }
  return any != 0;
}

/* One pair's row: double arithmetic rounded once to float. */
static void knnwb_metafeatures_combine(KnnwbMetafeatureOp op, const float *x, const float *y,
                                       float *out, size_t d)
{
  switch (op) {
  case KNNWB_METAFEATURE_DIFFERENCE:
    for (size_t j = 0; j < d; j++)
      out[j] = (float)((double)x[j] - (double)y[j]);
    break;
  case KNNWB_METAFEATURE_SUM:
    for (size_t j = 0; j < d; j++)
      out[j] = (float)((double)x[j] + (double)y[j]);
    break;
  case KNNWB_METAFEATURE_PRODUCT:
    for (size_t j = 0; j < d; j++)
      out[j] = (float)((double)x[j] * (double)y[j]);
    break;
  default:
    for (size_t j = 0; j < d; j++)
      out[j] = (float)((double)x[j] / (double)y[j]);
    break;
  }
}

/* Offers the pairs done so far to job->progress (knnwb_progress_throttle_offer); `last` once the
 * threads are done. O(1). */
static void knnwb_metafeatures_report(KnnwbMetafeatureJob *job, gboolean last)
{
  knnwb_progress_throttle_offer(&job->report, &job->done, (uint64_t)job->n_generated, last,
                                job->progress, job->progress_data);
}

/* Units are (operator, first row a): all pairs (a, b > a) of one operator. */
static void knnwb_metafeatures_body(size_t first, size_t last, void *user)
{
  KnnwbMetafeatureJob *job = user;
  const size_t d = job->data->n_cols, m = job->m;
  for (size_t unit = job->unit_first + first; unit < job->unit_first + last; unit++) {
    if (g_atomic_int_get(&job->stop) || (job->cancel && *job->cancel)) {
      g_atomic_int_set(&job->stop, 1);
      return;
    }
    size_t o = unit / m, a = unit % m;
    KnnwbMetafeatureOp op = job->ops[o];
    size_t base = o * job->pairs_per_op + knnwb_metafeatures_pair_offset(a, m) - job->index_first;
    const float *x = job->data->values + job->rows[a] * d;
    const gboolean a_absent = knnwb_matrix_row_is_absent(job->data, job->rows[a]);
    for (size_t b = a + 1; b < m; b++) {
      size_t index = base + (b - a - 1);
      /* A row kept absent for its missing values holds zeros, not data: its pairs would be
       * made-up rows (A-C = A) that the kNN graph and the written matrix took as real. */
      if (a_absent || knnwb_matrix_row_is_absent(job->data, job->rows[b])) {
        job->bad[index] = 2;
        g_atomic_int_inc(&job->n_absent);
        continue;
      }
      const float *y = job->data->values + job->rows[b] * d;
      float *out = job->out + index * d;
      knnwb_metafeatures_combine(op, x, y, out, d);
      if ((op == KNNWB_METAFEATURE_RATIO && knnwb_metafeatures_denominator_bad(y, d)) ||
          knnwb_metafeatures_row_bad(out, d)) {
        job->bad[index] = 1;
        g_atomic_int_inc(&job->n_bad);
      }
    }
    g_atomic_pointer_add(&job->done, (gssize)(m - 1 - a));
    knnwb_metafeatures_report(job, FALSE);
  }
}

/* The row's label, or its number (from 0, as everywhere in the C API) when the matrix has none. */
static const char *knnwb_metafeatures_label(const KnnwbMatrix *data, size_t row, char scratch[32])
{
  const char *label = knnwb_matrix_row_label(data, row);
  if (label != NULL)
    return label;
  g_snprintf(scratch, 32, "%zu", row);
  return scratch;
}

/* Names the first failing pair (lowest generated row) and why, for the error and the warning. */
/* The operator and the paired rows (positions in job->rows) of pair index. */
static void knnwb_metafeatures_pair_of(const KnnwbMetafeatureJob *job, size_t index, size_t *o,
                                       size_t *a, size_t *b)
{
  const size_t m = job->m, rest = index % job->pairs_per_op;
  *o = index / job->pairs_per_op;
  *a = 0;
  while (*a + 1 < m && knnwb_metafeatures_pair_offset(*a + 1, m) <= rest)
    (*a)++;
  *b = *a + 1 + (rest - knnwb_metafeatures_pair_offset(*a, m));
}

/* "A-C (C has missing values)": a pair left out for an absent row. */
static char *knnwb_metafeatures_describe_absent(const KnnwbMetafeatureJob *job, size_t index)
{
  size_t o, a, b;
  knnwb_metafeatures_pair_of(job, index, &o, &a, &b);
  char sa[32], sb[32];
  const char *la = knnwb_metafeatures_label(job->data, job->rows[a], sa);
  const char *lb = knnwb_metafeatures_label(job->data, job->rows[b], sb);
  return g_strdup_printf("%s%c%s (%s has missing values)", la,
                         knnwb_metafeatures_symbols[job->ops[o]], lb,
                         knnwb_matrix_row_is_absent(job->data, job->rows[a]) ? la : lb);
}

static char *knnwb_metafeatures_describe(const KnnwbMetafeatureJob *job, size_t index)
{
  const size_t d = job->data->n_cols;
  size_t o, a, b;
  knnwb_metafeatures_pair_of(job, index, &o, &a, &b);
  KnnwbMetafeatureOp op = job->ops[o];
  const float *x = job->data->values + job->rows[a] * d;
  const float *y = job->data->values + job->rows[b] * d;
  char sa[32], sb[32];
  const char *la = knnwb_metafeatures_label(job->data, job->rows[a], sa);
  const char *lb = knnwb_metafeatures_label(job->data, job->rows[b], sb);
  for (size_t j = 0; j < d; j++) {
    float value;
    knnwb_metafeatures_combine(op, x + j, y + j, &value, 1);
    const char *column = job->data->col_labels ? job->data->col_labels[j] : NULL;
    g_autofree char *where = column ? g_strdup_printf("column %zu (%s)", j + 1, column)
                                    : g_strdup_printf("column %zu", j + 1);
    if (op == KNNWB_METAFEATURE_RATIO && (y[j] == 0.0f || !isnormal(y[j])))
      return g_strdup_printf("%s/%s: the denominator %s is %s in %s", la, lb, lb,
                             y[j] == 0.0f ? "zero" : "subnormal", where);
    if (!isfinite(value))
      return g_strdup_printf("%s%c%s = %g %c %g overflows to %s in %s", la,
                             knnwb_metafeatures_symbols[op], lb, (double)x[j],
                             knnwb_metafeatures_symbols[op], (double)y[j],
                             isnan(value) ? "NaN" : "infinity", where);
  }
  return g_strdup_printf("%s%c%s", la, knnwb_metafeatures_symbols[op], lb);
}

static gboolean knnwb_metafeatures_check_rows(const KnnwbMatrix *data, const size_t *rows, size_t m,
                                              GError **error)
{
  g_autofree guint8 *seen = g_try_malloc0(MAX(data->n_rows, (size_t)1));
  if (seen == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate %zu bytes",
                data->n_rows);
    return FALSE;
  }
  for (size_t i = 0; i < m; i++) {
    if (rows[i] >= data->n_rows) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "metafeatures: row %zu does not exist (the matrix has %zu rows)", rows[i],
                  data->n_rows);
      return FALSE;
    }
    if (seen[rows[i]]++) {
      char scratch[32];
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "metafeatures: row '%s' is listed twice",
                  knnwb_metafeatures_label(data, rows[i], scratch));
      return FALSE;
    }
  }
  return TRUE;
}

/* The labels of the generated rows, written in parallel into one buffer: unit (o, a) holds the
 * labels "A?B\0" of pairs (a, b > a) at a precomputed offset. */
typedef struct {
  const KnnwbMetafeatureJob *job;
  const char *const *names; /* m paired rows' labels */
  const size_t *lengths;    /* their lengths */
  const size_t *unit_start; /* n_ops * m + 1 byte offsets */
  char *buffer;
  size_t *label_offset; /* one per generated row */
} KnnwbMetafeatureLabels;

static void knnwb_metafeatures_labels_body(size_t first, size_t last, void *user)
{
  KnnwbMetafeatureLabels *labels = user;
  const KnnwbMetafeatureJob *job = labels->job;
  const size_t m = job->m;
  for (size_t unit = job->unit_first + first; unit < job->unit_first + last; unit++) {
    size_t o = unit / m, a = unit % m;
    char symbol = knnwb_metafeatures_symbols[job->ops[o]];
    size_t index = o * job->pairs_per_op + knnwb_metafeatures_pair_offset(a, m) - job->index_first;
    char *p = labels->buffer + labels->unit_start[unit - job->unit_first];
    for (size_t b = a + 1; b < m; b++, index++) {
      labels->label_offset[index] = (size_t)(p - labels->buffer);
      memcpy(p, labels->names[a], labels->lengths[a]);
      p += labels->lengths[a];
      *p++ = symbol;
      memcpy(p, labels->names[b], labels->lengths[b]);
      p += labels->lengths[b];
      *p++ = '\0';
    }
  }
}

/* Labels "A-B" of the kept generated rows; the original rows keep theirs. The string chunk takes
 * the whole buffer in one insertion (the matrix owns its label strings). */
static gboolean knnwb_metafeatures_labels(const KnnwbMetafeatureJob *job, int n_threads,
                                          size_t n_originals, size_t n_units, size_t n_generated,
                                          KnnwbMatrix *result, GError **error)
{
  const KnnwbMatrix *data = job->data;
  const size_t m = job->m;
  for (size_t i = 0; i < n_originals; i++) {
    char scratch[32];
    knnwb_matrix_set_row_label(result, i, knnwb_metafeatures_label(data, i, scratch));
  }
  if (n_generated == 0)
    return TRUE;
  g_autofree char *numbers = g_new0(char, m * 32);
  g_autofree const char **names = g_new(const char *, m);
  g_autofree size_t *lengths = g_new(size_t, m);
  g_autofree size_t *suffix = g_new0(size_t, m + 1); /* sum of lengths of paired rows b >= a */
  for (size_t a = 0; a < m; a++) {
    names[a] = knnwb_metafeatures_label(data, job->rows[a], numbers + a * 32);
    lengths[a] = strlen(names[a]);
  }
  for (size_t a = m; a-- > 0;)
    suffix[a] = suffix[a + 1] + lengths[a];
  g_autofree size_t *unit_start = g_new(size_t, n_units + 1);
  unit_start[0] = 0;
  for (size_t unit = 0; unit < n_units; unit++) {
    size_t a = (job->unit_first + unit) % m;
    unit_start[unit + 1] = unit_start[unit] + (m - 1 - a) * (lengths[a] + 2) + suffix[a + 1];
  }
  KnnwbMetafeatureLabels labels = {job, names, lengths, unit_start, NULL, NULL};
  labels.buffer = g_try_malloc(MAX(unit_start[n_units], (size_t)1));
  labels.label_offset = g_try_new(size_t, n_generated);
  if (labels.buffer == NULL || labels.label_offset == NULL) {
    g_free(labels.buffer);
    g_free(labels.label_offset);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "metafeatures: cannot allocate %zu bytes of labels", unit_start[n_units]);
    return FALSE;
  }
  knnwb_parallel_for(n_threads, n_units, 1, knnwb_metafeatures_labels_body, &labels);
  if (result->n_rows == n_originals) { /* every generated row dropped */
    g_free(labels.buffer);
    g_free(labels.label_offset);
    return TRUE;
  }
  if (result->row_labels == NULL)
    knnwb_matrix_set_row_label(result, 0, ""); /* a share without the originals: the label store */
  const char *base =
      g_string_chunk_insert_len(result->strings, labels.buffer, (gssize)unit_start[n_units]);
  g_free(labels.buffer);
  size_t out = n_originals;
  for (size_t index = 0; index < n_generated; index++)
    if (!job->bad[index])
      result->row_labels[out++] = (char *)base + labels.label_offset[index];
  g_free(labels.label_offset);
  return TRUE;
}

/* The rows this call generates: all of them, or one share of a split run. A share: the original
 * rows go to share 0, the units (operator, a) are cut into runs of about equal pair counts, in
 * order, so the shares in order are the whole result. */
typedef struct {
  size_t n_originals; /* original rows copied first */
  size_t unit_first, unit_last;
  size_t index_first; /* the pair index (over all units) of unit_first's first pair */
  size_t n_result;    /* rows before bad pairs are dropped */
} KnnwbMetafeatureShare;

static void knnwb_metafeatures_share(const KnnwbMatrix *data,
                                     const KnnwbMetafeatureOptions *options, size_t m, size_t n_ops,
                                     KnnwbMetafeatureShare *share)
{
  const size_t pairs_per_op = m >= 2 ? m * (m - 1) / 2 : 0, n_all_units = n_ops * m;
  share->n_originals = data->n_rows;
  share->unit_first = 0;
  share->unit_last = n_all_units;
  share->index_first = 0;
  if (options->share_count <= 1)
    return;
  const size_t total = n_ops * pairs_per_op, count = (size_t)options->share_count;
  const size_t index = (size_t)options->share_index;
  share->n_originals = index == 0 ? data->n_rows : 0;
  /* A unit starts a share's run when its first pair index reaches the share's even cut. */
  size_t start = 0;
  share->unit_first = share->unit_last = n_all_units;
  for (size_t unit = 0, at = 0; unit <= n_all_units; unit++) {
    size_t cut_first = (size_t)((double)total * (double)index / (double)count);
    size_t cut_last = (size_t)((double)total * (double)(index + 1) / (double)count);
    if (share->unit_first == n_all_units && (at >= cut_first || unit == n_all_units)) {
      share->unit_first = unit;
      start = at;
    }
    if (at >= cut_last || unit == n_all_units) {
      share->unit_last = unit;
      break;
    }
    at += m - 1 - unit % m;
  }
  if (index + 1 == count)
    share->unit_last = n_all_units;
  share->index_first = start;
  size_t generated = 0;
  for (size_t unit = share->unit_first; unit < share->unit_last; unit++)
    generated += m - 1 - unit % m;
  share->n_result = share->n_originals + generated;
}

/* The bytes of an n_result x d result's values (*bytes) and labels, checked against the address
 * space and the memory available. */
static gboolean knnwb_metafeatures_check_size(const KnnwbMatrix *data,
                                              const KnnwbMetafeatureOptions *options,
                                              size_t n_result, size_t m, size_t n_ops,
                                              size_t *bytes, GError **error)
{
  const size_t d = data->n_cols;
  size_t label_bytes;
  /* Values, plus the labels: a pointer and "A-B\0" in the string chunk per row. */
  size_t longest = 1;
  for (size_t i = 0; data->row_labels != NULL && i < data->n_rows; i++)
    longest = MAX(longest, strlen(data->row_labels[i] ? data->row_labels[i] : ""));
  if (!knnwb_size_multiply(n_result, d, bytes) ||
      !knnwb_size_multiply(*bytes, sizeof(float), bytes) ||
      !knnwb_size_multiply(n_result, sizeof(char *) + 2 * MAX(longest, (size_t)20) + 2,
                           &label_bytes) ||
      *bytes > SIZE_MAX - label_bytes) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "metafeatures: a %zu x %zu result overflows this machine's address space", n_result,
                d);
    return FALSE;
  }
  size_t needed = *bytes + label_bytes;
  size_t available = options->available_bytes ? options->available_bytes : knnwb_memory_available();
  if (needed > available) {
    g_autofree char *need_text = knnwb_memory_format(needed);
    g_autofree char *have_text = knnwb_memory_format(available);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "metafeatures: the %zu x %zu result (%zu paired rows, %zu operator%s) needs %s "
                "(%zu bytes), only %s (%zu bytes) available; pair fewer rows (a rows file) or "
                "fewer operators",
                n_result, d, m, n_ops, n_ops == 1 ? "" : "s", need_text, needed, have_text,
                available);
    return FALSE;
  }
  return TRUE;
}

/* After the pass: warns of pairs left out for missing values; bad pairs (zero denominator,
 * overflow) are an error under the error policy, else dropped with a warning and the kept rows
 * compacted in order. */
static gboolean knnwb_metafeatures_settle_bad(KnnwbMetafeatureJob *job,
                                              const KnnwbMetafeatureOptions *options,
                                              KnnwbMatrix *out, size_t n_originals, GError **error)
{
  const size_t d = job->data->n_cols;
  if (job->n_absent > 0) {
    size_t first = 0;
    while (job->bad[first] != 2)
      first++;
    g_autofree char *what = knnwb_metafeatures_describe_absent(job, job->index_first + first);
    g_warning("metafeatures: %d pair%s with a row of missing values left out, the first: %s",
              job->n_absent, job->n_absent == 1 ? "" : "s", what);
  }
  if (job->n_bad == 0 && job->n_absent == 0)
    return TRUE;
  size_t first = 0;
  while (job->n_bad > 0 && job->bad[first] != 1)
    first++;
  g_autofree char *what =
      job->n_bad > 0 ? knnwb_metafeatures_describe(job, job->index_first + first) : NULL;
  if (job->n_bad > 0 && options->missing == KNNWB_MISSING_ERROR) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "metafeatures: %s (%d pair%s fail%s; use the drop-rows missing-value policy to "
                "leave them out)",
                what, job->n_bad, job->n_bad == 1 ? "" : "s", job->n_bad == 1 ? "s" : "");
    return FALSE;
  }
  if (job->n_bad > 0)
    g_warning("metafeatures: %d pair%s dropped (zero/subnormal denominator or overflow), the "
              "first: %s",
              job->n_bad, job->n_bad == 1 ? "" : "s", what);
  /* Compact in place, in order; the kept rows only move towards the front. */
  size_t kept = 0;
  for (size_t i = 0; i < job->n_generated; i++)
    if (!job->bad[i]) {
      if (kept != i)
        memmove(job->out + kept * d, job->out + i * d, d * sizeof(float));
      kept++;
    }
  out->n_rows = n_originals + kept;
  float *smaller = g_try_realloc(out->values, MAX(out->n_rows * d, (size_t)1) * sizeof(float));
  if (smaller != NULL)
    out->values = smaller;
  return TRUE;
}

/* The rows to pair: options->rows checked, or every row (*all_rows then owns the list). */
static const size_t *knnwb_metafeatures_paired_rows(const KnnwbMatrix *data,
                                                    const KnnwbMetafeatureOptions *options,
                                                    size_t m, size_t **all_rows, GError **error)
{
  if (options->rows != NULL)
    return knnwb_metafeatures_check_rows(data, options->rows, m, error) ? options->rows : NULL;
  *all_rows = g_try_new(size_t, MAX(m, (size_t)1));
  if (*all_rows == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate the row list");
    return NULL;
  }
  for (size_t i = 0; i < m; i++)
    (*all_rows)[i] = i;
  return *all_rows;
}

/* The result matrix: n_result x d values (not zeroed: every value is written by the pass), the
 * original rows of this share copied, absent rows marked. NULL and an error when out of memory. */
static KnnwbMatrix *knnwb_metafeatures_new_result(const KnnwbMatrix *data, size_t n_result,
                                                  size_t bytes, size_t n_originals, GError **error)
{
  const size_t d = data->n_cols;
  float *values = bytes ? g_try_malloc(bytes) : NULL;
  if (bytes && values == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "metafeatures: cannot allocate %zu bytes for a %zu x %zu matrix", bytes, n_result,
                d);
    return NULL;
  }
  KnnwbMatrix *out = knnwb_matrix_new_wrapped(n_result, d, values, NULL, NULL);
  out->values_borrowed = FALSE; /* owned: knnwb_matrix_free g_frees it */
  if (n_originals * d > 0)
    memcpy(values, data->values, n_originals * d * sizeof(float));
  for (size_t i = 0; i < n_originals; i++)
    if (knnwb_matrix_row_is_absent(data, i))
      knnwb_matrix_set_row_absent(out, i);
  return out;
}

gboolean knnwb_metafeatures_expand(const KnnwbMatrix *data, const KnnwbMetafeatureOptions *options,
                                   KnnwbMatrix **result, GError **error)
{
  static const KnnwbMetafeatureOp difference_only[] = {KNNWB_METAFEATURE_DIFFERENCE};
  const KnnwbMetafeatureOp *ops = options->ops ? options->ops : difference_only;
  size_t n_ops = options->ops ? options->n_ops : 1;
  const size_t d = data->n_cols;
  g_autofree size_t *all_rows = NULL;
  size_t m = options->rows ? options->n_rows : data->n_rows;
  const size_t *rows = knnwb_metafeatures_paired_rows(data, options, m, &all_rows, error);
  if (rows == NULL)
    return FALSE;
  for (size_t o = 0; o < n_ops; o++)
    if ((unsigned)ops[o] >= KNNWB_METAFEATURE_COUNT) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "metafeatures: operator %d is unknown", (int)ops[o]);
      return FALSE;
    }
  KnnwbMetafeatureShare share;
  size_t bytes;
  if (!knnwb_metafeatures_count(data->n_rows, m, n_ops, &share.n_result, error))
    return FALSE;
  knnwb_metafeatures_share(data, options, m, n_ops, &share);
  if (!knnwb_metafeatures_check_size(data, options, share.n_result, m, n_ops, &bytes, error))
    return FALSE;
  g_autoptr(KnnwbMatrix) out =
      knnwb_metafeatures_new_result(data, share.n_result, bytes, share.n_originals, error);
  if (out == NULL)
    return FALSE;
  size_t n_generated = share.n_result - share.n_originals;
  KnnwbMetafeatureJob job = {.data = data,
                             .rows = rows,
                             .m = m,
                             .ops = ops,
                             .n_ops = n_ops,
                             .out = out->values + share.n_originals * d,
                             .pairs_per_op = m >= 2 ? m * (m - 1) / 2 : 0,
                             .unit_first = share.unit_first,
                             .index_first = share.index_first,
                             .n_generated = n_generated,
                             .cancel = options->cancel,
                             .progress = options->progress,
                             .progress_data = options->progress_data};
  job.bad = g_try_malloc0(MAX(n_generated, (size_t)1));
  if (job.bad == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate %zu bytes",
                n_generated);
    return FALSE;
  }
  const size_t n_units = share.unit_last - share.unit_first;
  knnwb_progress_throttle_init(&job.report);
  if (d > 0 && m >= 2) {
    knnwb_parallel_for(options->n_threads, n_units, 1, knnwb_metafeatures_body, &job);
    /* the last pairs are reported even where another thread held the lock as they were done */
    if (!g_atomic_int_get(&job.stop))
      knnwb_metafeatures_report(&job, TRUE);
  }
  knnwb_progress_throttle_clear(&job.report);
  gboolean ok = FALSE;
  if (options->cancel && *options->cancel)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "metafeatures: interrupted");
  else
    ok = knnwb_metafeatures_settle_bad(&job, options, out, share.n_originals, error) &&
         knnwb_metafeatures_labels(&job, options->n_threads, share.n_originals, n_units,
                                   n_generated, out, error);
  g_free(job.bad);
  if (!ok)
    return FALSE;
  for (size_t j = 0; j < d; j++) {
    if (data->col_labels)
      knnwb_matrix_set_col_label(out, j, data->col_labels[j]);
    if (data->col_classes)
      knnwb_matrix_set_col_class(out, j, data->col_classes[j]);
  }
  *result = g_steal_pointer(&out);
  return TRUE;
}

gboolean knnwb_metafeatures_rows_from_file(const KnnwbMatrix *data, const char *path, size_t **rows,
                                           size_t *n_rows, GError **error)
{
  if (data->row_labels == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: the matrix has no row labels to match", path);
    return FALSE;
  }
  g_autofree char *text = NULL;
  gsize length = 0;
  GError *read_error = NULL;
  if (!g_file_get_contents(path, &text, &length, &read_error)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s", read_error->message);
    g_error_free(read_error);
    return FALSE;
  }
  if (memchr(text, '\0', length) != NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: NUL byte in a label file", path);
    return FALSE;
  }
  g_autoptr(GHashTable) index = g_hash_table_new(g_str_hash, g_str_equal);
  g_autoptr(GHashTable) copies = g_hash_table_new(g_str_hash, g_str_equal); /* label -> rows */
  for (size_t i = data->n_rows; i-- > 0;) /* the first of repeated labels wins */
    if (data->row_labels[i] != NULL) {
      g_hash_table_insert(index, data->row_labels[i], GSIZE_TO_POINTER(i + 1));
      g_hash_table_insert(
          copies, data->row_labels[i],
          GSIZE_TO_POINTER(GPOINTER_TO_SIZE(g_hash_table_lookup(copies, data->row_labels[i])) + 1));
    }
  size_t n_ambiguous = 0;
  const char *first_ambiguous = NULL;
  size_t first_copies = 0;
  g_autoptr(GHashTable) listed = g_hash_table_new(g_direct_hash, g_direct_equal);
  g_autoptr(GArray) found = g_array_new(FALSE, FALSE, sizeof(size_t));
  g_autoptr(GString) problems = g_string_new(NULL);
  size_t n_problems = 0;
  /* Lists saved by Windows editors and Excel start with a byte-order mark (CRLF is stripped with
   * the blanks below). */
  const char *start = length >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? text + 3 : text;
  g_auto(GStrv) lines = g_strsplit(start, "\n", -1);
  for (size_t line = 0; lines[line] != NULL; line++) {
    char *label = g_strstrip(lines[line]);
    if (*label == '\0')
      continue;
    gpointer hit = g_hash_table_lookup(index, label);
    const char *problem = NULL;
    gpointer first_line = NULL;
    if (hit == NULL)
      problem = "is not a row label of the matrix";
    else if ((first_line = g_hash_table_lookup(listed, hit)) != NULL)
      problem = "is listed twice";
    if (problem != NULL) {
      if (n_problems++ < 20)
        g_string_append_printf(problems, "%s%s:%zu: '%s' %s", problems->len ? "\n" : "", path,
                               line + 1, label, problem);
      continue;
    }
    g_hash_table_insert(listed, hit, GSIZE_TO_POINTER(line + 1));
    size_t row = GPOINTER_TO_SIZE(hit) - 1;
    g_array_append_val(found, row);
    size_t n_copies = GPOINTER_TO_SIZE(g_hash_table_lookup(copies, label));
    if (n_copies > 1 && n_ambiguous++ == 0) {
      first_ambiguous = data->row_labels[row];
      first_copies = n_copies;
    }
  }
  /* Probes sharing a gene symbol: only the first is paired; say so rather than pick silently. */
  if (n_ambiguous > 0 && n_problems == 0)
    g_warning("%s: %zu listed label%s name%s several rows (first: '%s' names %zu rows); the "
              "first row of each is paired",
              path, n_ambiguous, n_ambiguous == 1 ? "" : "s", n_ambiguous == 1 ? "s" : "",
              first_ambiguous, first_copies);
  if (n_problems > 0) {
    if (n_problems > 20)
      g_string_append_printf(problems, "\n%s: ... and %zu more", path, n_problems - 20);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s", problems->str);
    return FALSE;
  }
  *n_rows = found->len;
  *rows = (size_t *)(void *)g_array_free(g_steal_pointer(&found), FALSE);
  return TRUE;
}
