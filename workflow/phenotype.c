/* The phenotype probe: annotation values matched to the matrix columns and appended as a row. */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/phenotype.h>
#include <knnwb/text_fields.h>

/* Problems beyond this many are counted, not listed: a wrong table would print thousands. */
enum { KNNWB_PHENOTYPE_MAX_LISTED = 40 };

typedef struct {
  GString *text;
  size_t n;
} KnnwbPhenotypeProblems;

static void knnwb_phenotype_problem(KnnwbPhenotypeProblems *problems, const char *format, ...)
    G_GNUC_PRINTF(2, 3);
static void knnwb_phenotype_problem(KnnwbPhenotypeProblems *problems, const char *format, ...)
{
  if (problems->n++ >= KNNWB_PHENOTYPE_MAX_LISTED)
    return;
  if (problems->text->len > 0)
    g_string_append_c(problems->text, '\n');
  va_list args;
  va_start(args, format);
  g_string_append_vprintf(problems->text, format, args);
  va_end(args);
}

/* A table value as a float, or FALSE (why: missing, not a number, out of range). */
static gboolean knnwb_phenotype_number(const char *text, float *value, const char **why)
{
  size_t length = strlen(text);
  if (knnwb_formats_is_missing_token(text, length)) {
    *why = length == 0 ? "is empty" : "is missing";
    return FALSE;
  }
  KnnwbFloatStatus status = knnwb_formats_parse_float_field(text, length, value);
  if (status == KNNWB_FLOAT_RANGE) {
    *why = "is beyond the float range (+-3.4e38)";
    return FALSE;
  }
  if (status != KNNWB_FLOAT_OK && status != KNNWB_FLOAT_TINY) {
    *why = "is not a number";
    return FALSE;
  }
  return TRUE;
}

/* "Inf", "-infinity": a value that is there but unusable, not a missing one. */
static gboolean knnwb_phenotype_infinite(const char *text)
{
  if (*text == '+' || *text == '-')
    text++;
  return g_ascii_strcasecmp(text, "inf") == 0 || g_ascii_strcasecmp(text, "infinity") == 0;
}

/* What matching the table to the matrix found: the values, and what was wrong or left out. */
typedef struct {
  const KnnwbAnnotationTable *table;
  size_t id, column;
  KnnwbPhenotypeMissing missing;
  size_t *record_of; /* per matrix column: record + 1, 0 = none */
  float *result;
  KnnwbPhenotypeProblems problems;
  GString *extra;
  size_t n_extra, n_numbers, n_not_numbers, n_missing;
  const char *example, *example2;
} KnnwbPhenotypeMatch;

/* One record of the table against the matrix's samples (a hash of names to column + 1). */
static void knnwb_phenotype_match_record(KnnwbPhenotypeMatch *match, GHashTable *samples, size_t i)
{
  const KnnwbAnnotationTable *table = match->table;
  const char *name = knnwb_annotation_field(table, i, match->id);
  const char *field = knnwb_annotation_field(table, i, match->column);
  gpointer hit = g_hash_table_lookup(samples, name);
  if (hit == NULL) {
    if (match->n_extra++ < 10)
      g_string_append_printf(match->extra, "%s%s:%zu: '%s'", match->extra->len ? ", " : "",
                             table->path, table->line[i], name);
    return;
  }
  size_t j = GPOINTER_TO_SIZE(hit) - 1;
  if (match->record_of[j] != 0) {
    knnwb_phenotype_problem(&match->problems,
                            "%s:%zu: sample '%s' is listed twice (first on line %zu)", table->path,
                            table->line[i], name, table->line[match->record_of[j] - 1]);
    return;
  }
  match->record_of[j] = i + 1;
  const char *why = NULL;
  if (knnwb_phenotype_number(field, &match->result[j], &why)) {
    match->n_numbers++;
    return;
  }
  const size_t length = strlen(field);
  const gboolean missing = knnwb_formats_is_missing_token(field, length);
  if (missing && match->missing == KNNWB_PHENOTYPE_MISSING_COMPLETE &&
      !knnwb_phenotype_infinite(field)) {
    /* NA, empty, NaN: no value, left out with the whole sample (an infinity stays an error). */
    match->result[j] = NAN;
    match->n_missing++;
    return;
  }
  if (!missing) {
    match->n_not_numbers++;
    if (match->example == NULL)
      match->example = field;
    else if (match->example2 == NULL && strcmp(match->example, field) != 0)
      match->example2 = field;
  }
  g_autofree char *shown = knnwb_formats_quote_field(field, length);
  knnwb_phenotype_problem(&match->problems, "%s:%zu: sample '%s': %s %s in column '%s'",
                          table->path, table->line[i], name, shown, why,
                          table->header[match->column]);
}

/* The one-sentence failures: a categorical column, no sample in common, no value at all. */
static gboolean knnwb_phenotype_match_whole(const KnnwbPhenotypeMatch *match,
                                            const KnnwbMatrix *data, GError **error)
{
  const KnnwbAnnotationTable *table = match->table;
  const size_t d = data->n_cols;
  if (match->n_numbers == 0 && match->n_not_numbers > 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "%s:%zu: column '%s' is categorical (values such as '%s'%s%s%s), not numeric: "
                "the phenotype row needs numbers (code the categories as numbers; for classes use "
                "knnwb classify --classes)",
                table->path, table->header_line, table->header[match->column], match->example,
                match->example2 ? ", '" : "", match->example2 ? match->example2 : "",
                match->example2 ? "'" : "");
    return FALSE;
  }
  size_t matched = 0;
  for (size_t j = 0; j < d; j++)
    matched += match->record_of[j] != 0;
  if (matched == 0 && d > 0 && table->n_records > 0) {
    const char *first = data->col_labels[0] ? data->col_labels[0] : "";
    const char *second = d > 1 && data->col_labels[1] ? data->col_labels[1] : "";
    const size_t id = match->id;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "%s: none of the matrix's %zu samples (columns) is named in the table's column "
                "'%s': the samples are named like '%s'%s%s%s, the column holds '%s'%s%s%s "
                "(another column of names: --phenotype-id)",
                table->path, d, table->header[id], first, d > 1 ? ", '" : "", second,
                d > 1 ? "'" : "", knnwb_annotation_field(table, 0, id),
                table->n_records > 1 ? ", '" : "",
                table->n_records > 1 ? knnwb_annotation_field(table, 1, id) : "",
                table->n_records > 1 ? "'" : "");
    return FALSE;
  }
  if (match->problems.n == 0 && match->n_numbers == 0 && match->n_missing > 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "%s:%zu: column '%s' has no value for any of the %zu samples (all NA or empty)",
                table->path, table->header_line, table->header[match->column], match->n_missing);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_phenotype_values_missing(const KnnwbMatrix *data, const KnnwbAnnotationTable *table,
                                        const char *id_column, const char *value_column,
                                        KnnwbPhenotypeMissing missing, float **values,
                                        size_t *n_missing, GError **error)
{
  if (data->col_labels == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: the matrix has no sample (column) names to match the table to; read it with "
                "a header",
                table->path);
    return FALSE;
  }
  size_t id, column;
  if (!knnwb_annotation_column(table, id_column, &id, error) ||
      !knnwb_annotation_column(table, value_column, &column, error))
    return FALSE;
  if (id == column) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s:%zu: column '%s' holds the sample names; name a column of values", table->path,
                table->header_line, table->header[column]);
    return FALSE;
  }
  const size_t d = data->n_cols;
  g_autoptr(GHashTable) samples = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t j = d; j-- > 0;)
    if (data->col_labels[j] != NULL)
      g_hash_table_insert(samples, data->col_labels[j], GSIZE_TO_POINTER(j + 1));
  g_autofree size_t *record_of = g_new0(size_t, MAX(d, (size_t)1));
  g_autofree float *result = g_new0(float, MAX(d, (size_t)1));
  g_autoptr(GString) text = g_string_new(NULL);
  g_autoptr(GString) extra = g_string_new(NULL);
  KnnwbPhenotypeMatch match = {.table = table,
                               .id = id,
                               .column = column,
                               .missing = missing,
                               .record_of = record_of,
                               .result = result,
                               .problems = {text, 0},
                               .extra = extra};
  for (size_t i = 0; i < table->n_records; i++)
    knnwb_phenotype_match_record(&match, samples, i);
  if (!knnwb_phenotype_match_whole(&match, data, error))
    return FALSE;
  for (size_t j = 0; j < d; j++)
    if (record_of[j] == 0)
      knnwb_phenotype_problem(&match.problems, "%s: sample '%s' is not in the table's column '%s'",
                              table->path, data->col_labels[j] ? data->col_labels[j] : "",
                              table->header[id]);
  if (match.problems.n > 0) {
    if (match.problems.n > KNNWB_PHENOTYPE_MAX_LISTED)
      g_string_append_printf(text, "\n%s: ... and %zu more problems", table->path,
                             match.problems.n - KNNWB_PHENOTYPE_MAX_LISTED);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "the phenotype table does not match the matrix (%zu problem%s):\n%s",
                match.problems.n, match.problems.n == 1 ? "" : "s", text->str);
    return FALSE;
  }
  if (match.n_extra > 0)
    g_warning("%zu sample%s of the phenotype table %s not in the matrix and ignored: %s%s",
              match.n_extra, match.n_extra == 1 ? "" : "s", match.n_extra == 1 ? "is" : "are",
              extra->str, match.n_extra > 10 ? ", ..." : "");
  if (match.n_missing > 0)
    g_warning("%s: %zu of the %zu samples have no value in column '%s' (NA, empty or NaN): they "
              "are left out of the phenotype row and of every other row (complete cases; "
              "--phenotype-missing error refuses instead)",
              table->path, match.n_missing, d, table->header[column]);
  if (n_missing != NULL)
    *n_missing = match.n_missing;
  *values = g_steal_pointer(&result);
  return TRUE;
}

gboolean knnwb_phenotype_values(const KnnwbMatrix *data, const KnnwbAnnotationTable *table,
                                const char *id_column, const char *value_column, float **values,
                                GError **error)
{
  return knnwb_phenotype_values_missing(data, table, id_column, value_column,
                                        KNNWB_PHENOTYPE_MISSING_ERROR, values, NULL, error);
}

gboolean knnwb_phenotype_complete_cases(KnnwbMatrix **data, float *values, GError **error)
{
  KnnwbMatrix *old = *data;
  const size_t n = old->n_rows, d = old->n_cols;
  size_t kept = 0;
  for (size_t j = 0; j < d; j++)
    kept += !isnan(values[j]);
  if (kept == d)
    return TRUE;
  g_autoptr(KnnwbMatrix) target = knnwb_matrix_new(n, kept, error);
  if (target == NULL)
    return FALSE;
  g_autofree size_t *from = g_new(size_t, MAX(kept, (size_t)1));
  for (size_t j = 0, c = 0; j < d; j++)
    if (!isnan(values[j])) {
      from[c] = j;
      values[c++] = values[j];
    }
  for (size_t i = 0; i < n; i++) {
    const float *row = old->values + i * d;
    float *out = target->values + i * kept;
    for (size_t c = 0; c < kept; c++)
      out[c] = row[from[c]];
    if (old->row_labels)
      knnwb_matrix_set_row_label(target, i, old->row_labels[i]);
    if (old->row_classes)
      knnwb_matrix_set_row_class(target, i, old->row_classes[i]);
    if (knnwb_matrix_row_is_absent(old, i))
      knnwb_matrix_set_row_absent(target, i);
  }
  for (size_t c = 0; c < kept; c++) {
    if (old->col_labels)
      knnwb_matrix_set_col_label(target, c, old->col_labels[from[c]]);
    if (old->col_classes)
      knnwb_matrix_set_col_class(target, c, old->col_classes[from[c]]);
  }
  for (int axis = KNNWB_MATRIX_ROWS; axis <= KNNWB_MATRIX_COLUMNS; axis++) {
    g_autofree const char **keys = knnwb_matrix_annotation_keys(old, (KnnwbMatrixAxis)axis);
    for (size_t k = 0; keys[k] != NULL; k++) {
      const char *const *entries = knnwb_matrix_annotation(old, (KnnwbMatrixAxis)axis, keys[k]);
      const size_t count = axis == KNNWB_MATRIX_ROWS ? n : kept;
      for (size_t e = 0; e < count; e++)
        knnwb_matrix_set_annotation(target, (KnnwbMatrixAxis)axis, keys[k], e,
                                    entries[axis == KNNWB_MATRIX_ROWS ? e : from[e]]);
    }
  }
  knnwb_matrix_free(old);
  *data = g_steal_pointer(&target);
  return TRUE;
}

gboolean knnwb_phenotype_append_row(KnnwbMatrix **data, const float *values, const char *label,
                                    GError **error)
{
  const KnnwbMatrix *old = *data;
  const size_t n = old->n_rows;
  for (size_t i = 0; old->row_labels != NULL && i < n; i++)
    if (old->row_labels[i] != NULL && strcmp(old->row_labels[i], label) == 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "a row labelled '%s' exists already (row %zu); choose another label", label, i);
      return FALSE;
    }
  if (!knnwb_matrix_append_row(data, values, error))
    return FALSE;
  KnnwbMatrix *target = *data;
  if (target->row_labels == NULL)
    for (size_t i = 0; i < n; i++) {
      /* Unlabelled rows get their numbers, so the new row's label is not the only one. */
      char scratch[32];
      g_snprintf(scratch, sizeof scratch, "%zu", i);
      knnwb_matrix_set_row_label(target, i, scratch);
    }
  knnwb_matrix_set_row_label(target, n, label);
  return TRUE;
}

gboolean knnwb_phenotype_append(KnnwbMatrix **data, const char *table_path, const char *id_column,
                                const char *value_column, const char *label, GError **error)
{
  g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(table_path, error);
  if (table == NULL)
    return FALSE;
  g_autofree float *values = NULL;
  if (!knnwb_phenotype_values(*data, table, id_column, value_column, &values, error))
    return FALSE;
  size_t column;
  if (!knnwb_annotation_column(table, value_column, &column, error))
    return FALSE;
  return knnwb_phenotype_append_row(data, values, label && *label ? label : table->header[column],
                                    error);
}
