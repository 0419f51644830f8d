/* CSV and TSV: RFC 4180 quoting, CRLF, optional header, a label column, missing-value policy. */
#include "read_internal.h"

#include <stdarg.h>
#include <math.h>
#include <string.h>

/* The longest field (a label, a column name, a number) accepted: longer ones are refused with a
 * message before they are copied. Lines themselves are capped by the text input. */
#define KNNWB_DELIMITED_MAX_FIELD ((size_t)16 << 20)
/* Columns of a header or first record: each becomes a string, so their number is capped too. */
#define KNNWB_DELIMITED_MAX_FIELDS ((guint)1 << 24)

/* Everything the row parser needs, to keep argument lists short. */
typedef struct {
  KnnwbTextInput *input;
  const KnnwbDelimitedLayout *layout;
  KnnwbMatrixBuilder *builder;
  KnnwbReadInfo *info;
  GString *scratch;
  GString *label;     /* the current row's label, reused from row to row */
  size_t record_line; /* line where the current record starts */
} KnnwbDelimitedContext;

static gboolean knnwb_delimited_is_blank(char c, char delimiter)
{
  return c == ' ' || (c == '\t' && delimiter != '\t');
}

/* Line and column (1-based) of byte offset within a record that may span lines. */
static void knnwb_delimited_locate(const char *record, size_t record_line, size_t offset,
                                   size_t *line, size_t *column)
{
  size_t line_start = 0;
  *line = record_line;
  for (size_t i = 0; i < offset; i++)
    if (record[i] == '\n') {
      (*line)++;
      line_start = i + 1;
    }
  *column = offset - line_start + 1;
}

static void knnwb_delimited_error(KnnwbDelimitedContext *context, const char *record, size_t offset,
                                  GError **error, const char *format, ...) G_GNUC_PRINTF(5, 6);

static void knnwb_delimited_error(KnnwbDelimitedContext *context, const char *record, size_t offset,
                                  GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  size_t line, column;
  knnwb_delimited_locate(record, context->record_line, offset, &line, &column);
  knnwb_formats_parse_error(error, context->input->path, line, column, "%s", message);
}

/* Appends n bytes of a field to scratch unless that makes the field too long (error at the field's
 * start). */
static gboolean knnwb_delimited_append(KnnwbDelimitedContext *context, const char *record,
                                       size_t field_start, const char *bytes, size_t n,
                                       GError **error)
{
  if (context->scratch->len + n > KNNWB_DELIMITED_MAX_FIELD) {
    knnwb_delimited_error(context, record, field_start, error,
                          "a field longer than %zu MiB (a quote never closed?)",
                          KNNWB_DELIMITED_MAX_FIELD >> 20);
    return FALSE;
  }
  g_string_append_len(context->scratch, bytes, (gssize)n);
  return TRUE;
}

/*
 * Reads the field starting at *position of the record into scratch (unquoted, blanks trimmed when
 * unquoted) and leaves *position at the delimiter after it or at the end of the record. A quoted
 * field may continue on following lines: the record then grows (*line and *length change).
 */
static gboolean knnwb_delimited_field(KnnwbDelimitedContext *context, const char **line,
                                      size_t *length, size_t *position, gboolean *quoted,
                                      GError **error)
{
  char delimiter = context->layout->delimiter;
  GString *scratch = context->scratch;
  g_string_truncate(scratch, 0);
  size_t i = *position;
  while (i < *length && knnwb_delimited_is_blank((*line)[i], delimiter))
    i++;
  *quoted = i < *length && (*line)[i] == '"';
  if (!*quoted) {
    const char *start = *line + i;
    const char *stop = memchr(start, delimiter, *length - i);
    size_t end = stop != NULL ? (size_t)(stop - *line) : *length;
    size_t trimmed = end;
    while (trimmed > i && knnwb_delimited_is_blank((*line)[trimmed - 1], delimiter))
      trimmed--;
    if (!knnwb_delimited_append(context, *line, i, start, trimmed - i, error))
      return FALSE;
    *position = end;
    return TRUE;
  }
  size_t open_quote = i;
  i++;
  for (;;) {
    const char *quote = memchr(*line + i, '"', *length - i);
    if (quote == NULL) {
      if (!knnwb_delimited_append(context, *line, open_quote, *line + i, *length - i, error))
        return FALSE;
      size_t old_length = *length;
      int more = knnwb_text_input_extend_line(context->input, line, length, error);
      if (more < 0)
        return FALSE;
      if (more == 0) {
        knnwb_delimited_error(context, *line, open_quote, error,
                              "quoted field is never closed (the file ends inside it)");
        return FALSE;
      }
      /* The record now holds the line break; keep it as a single "\n". */
      size_t resume = old_length;
      if (resume < *length && (*line)[resume] == '\r')
        resume++;
      if (resume < *length && (*line)[resume] == '\n')
        resume++;
      g_string_append_c(scratch, '\n');
      i = resume;
      continue;
    }
    size_t q = (size_t)(quote - *line);
    if (!knnwb_delimited_append(context, *line, open_quote, *line + i, q - i, error))
      return FALSE;
    if (q + 1 < *length && (*line)[q + 1] == '"') {
      g_string_append_c(scratch, '"');
      i = q + 2;
      continue;
    }
    i = q + 1;
    while (i < *length && knnwb_delimited_is_blank((*line)[i], delimiter))
      i++;
    if (i < *length && (*line)[i] != delimiter) {
      /* R's write.table() without sep: "a" "b" "c", quoted fields separated by spaces. */
      gboolean spaced = (*line)[i] == '"' && (*line)[i - 1] == ' ';
      knnwb_delimited_error(context, *line, i, error,
                            "unexpected %s after a closing quote (write a quote inside a quoted "
                            "field as \"\")%s",
                            (*line)[i] == '\0' ? "NUL byte" : "text",
                            spaced ? "; columns separated by spaces (R's write.table without sep) "
                                     "are not read: knnwb reads CSV (',') and TSV (tabs)"
                                   : "");
      return FALSE;
    }
    *position = i;
    return TRUE;
  }
}

gboolean knnwb_formats_split_record(KnnwbTextInput *input, char delimiter, const char **line,
                                    size_t *length, GPtrArray *fields, GError **error)
{
  KnnwbDelimitedLayout layout = {.delimiter = delimiter};
  g_autoptr(GString) scratch = g_string_new(NULL);
  KnnwbDelimitedContext context = {
      .input = input, .layout = &layout, .scratch = scratch, .record_line = input->line_number};
  size_t position = 0;
  for (;;) {
    gboolean quoted;
    if (!knnwb_delimited_field(&context, line, length, &position, &quoted, error))
      return FALSE;
    if (fields->len >= KNNWB_DELIMITED_MAX_FIELDS) {
      knnwb_delimited_error(&context, *line, position, error,
                            "more than %u fields in one record; at most that many columns are "
                            "supported",
                            KNNWB_DELIMITED_MAX_FIELDS);
      return FALSE;
    }
    g_ptr_array_add(fields, g_strndup(scratch->str, scratch->len));
    if (position >= *length)
      return TRUE;
    position++; /* the delimiter */
  }
}

static const char *knnwb_delimited_column_name(KnnwbDelimitedContext *context, size_t value_index,
                                               char scratch[32])
{
  GPtrArray *names = context->builder->col_labels;
  /* An unnamed column (an Excel export's trailing delimiter) is shown by its number. */
  if (names != NULL && value_index < names->len &&
      *(const char *)g_ptr_array_index(names, value_index))
    return g_ptr_array_index(names, value_index);
  g_snprintf(scratch, 32, "#%zu", value_index + 1);
  return scratch;
}

/* Classifies a field's text (already unquoted and trimmed) as a value, missing, or an error. */
static gboolean knnwb_delimited_value(KnnwbDelimitedContext *context, const char *record,
                                      size_t offset, size_t value_index, float *value,
                                      double *exact, gboolean *missing, GError **error)
{
  const char *text = context->scratch->str;
  size_t length = context->scratch->len;
  char name[32];
  if (memchr(text, '\0', length) != NULL) {
    knnwb_delimited_error(context, record, offset, error, "NUL byte in a value (binary file?)");
    return FALSE;
  }
  if (knnwb_formats_is_missing_token(text, length)) {
    if (context->layout->missing == KNNWB_MISSING_ERROR) {
      g_autofree char *shown = knnwb_formats_quote_field(text, length);
      knnwb_delimited_error(
          context, record, offset, error,
          "%s %s in column %s; fill it in, or drop rows with missing or infinite values "
          "(knnwb knn --drop-missing, pipeline missing=\"drop-rows\")",
          knnwb_formats_missing_token_kind(text, length), length == 0 ? "(empty field)" : shown,
          knnwb_delimited_column_name(context, value_index, name));
      return FALSE;
    }
    *missing = TRUE;
    *value = 0.0f;
    if (exact != NULL)
      *exact = 0.0;
    return TRUE;
  }
  /* "1,5" is 1.5 there (one comma at most; "1,234,5" stays an error showing the field). */
  const char *comma = context->layout->decimal_comma ? memchr(text, ',', length) : NULL;
  if (comma != NULL && memchr(comma + 1, ',', length - (size_t)(comma + 1 - text)) == NULL)
    context->scratch->str[comma - text] = '.';
  const char *stop;
  KnnwbFloatStatus status = knnwb_formats_parse_float(text, text + length, value, &stop);
  if (status == KNNWB_FLOAT_RANGE) {
    g_autofree char *shown = knnwb_formats_quote_field(text, length);
    knnwb_delimited_error(context, record, offset, error,
                          "value %s in column %s is beyond the float range (+-3.4e38)", shown,
                          knnwb_delimited_column_name(context, value_index, name));
    return FALSE;
  }
  if ((status != KNNWB_FLOAT_OK && status != KNNWB_FLOAT_TINY) || stop != text + length) {
    g_autofree char *shown = knnwb_formats_quote_field(text, length);
    knnwb_delimited_error(context, record, offset, error, "%s in column %s is not a number", shown,
                          knnwb_delimited_column_name(context, value_index, name));
    return FALSE;
  }
  if (status == KNNWB_FLOAT_TINY && context->info->n_tiny_values++ == 0) {
    size_t column;
    knnwb_delimited_locate(record, context->record_line, offset, &context->info->first_tiny_line,
                           &column);
  }
  if (exact != NULL &&
      knnwb_formats_parse_double(text, text + length, exact, &stop) != KNNWB_FLOAT_OK)
    *exact = (double)*value; /* a tiny value: its float is what is ranked */
  return TRUE;
}

static size_t knnwb_delimited_count_fields(const char *line, size_t length, char delimiter)
{
  size_t count = 1;
  for (size_t i = 0; i < length; i++)
    count += line[i] == delimiter;
  return count;
}

/* TRUE when text (starting at a delimiter) holds only delimiters and blanks: empty trailing
 * fields. */
static gboolean knnwb_delimited_rest_is_empty(const char *text, size_t length, char delimiter)
{
  for (size_t i = 0; i < length; i++)
    if (text[i] != delimiter && !knnwb_delimited_is_blank(text[i], delimiter))
      return FALSE;
  return TRUE;
}

/* The number of empty fields at the end of a split record (at most all but the first). */
static size_t knnwb_delimited_trailing_empty_fields(GPtrArray *fields)
{
  size_t count = 0;
  while (count + 1 < fields->len &&
         *(const char *)g_ptr_array_index(fields, fields->len - 1 - count) == '\0')
    count++;
  return count;
}

/* The same for a record not split yet (no quotes in it). */
static size_t knnwb_delimited_trailing_empty_raw(const char *line, size_t length, char delimiter)
{
  size_t count = 0;
  for (;;) {
    while (length > 0 && knnwb_delimited_is_blank(line[length - 1], delimiter))
      length--;
    if (length == 0 || line[length - 1] != delimiter)
      return count;
    length--;
    count++;
  }
}

/* A field of a column taken for annotation text (knnwb_delimited_skip_text_column): a number
 * there means it was not, and reading it as text would drop a column of data. */
static gboolean knnwb_delimited_annotation_text(KnnwbDelimitedContext *context, const char *record,
                                                size_t offset, GError **error)
{
  float value;
  KnnwbFloatStatus status =
      knnwb_formats_parse_float_field(context->scratch->str, context->scratch->len, &value);
  if (status != KNNWB_FLOAT_OK && status != KNNWB_FLOAT_TINY)
    return TRUE;
  g_autofree char *shown = knnwb_formats_quote_field(context->scratch->str, context->scratch->len);
  knnwb_delimited_error(context, record, offset, error,
                        "column 2 was read as an annotation column (text in the first data row) "
                        "but holds the number %s here: name the annotation columns with "
                        "--skip-columns, or correct the first data row",
                        shown);
  return FALSE;
}

/* Parses one record into the builder. The fast path handles plain numbers in place. */
static gboolean knnwb_delimited_row(KnnwbDelimitedContext *context, const char **line,
                                    size_t *length, GError **error)
{
  const KnnwbDelimitedLayout *layout = context->layout;
  const char delimiter = layout->delimiter;
  KnnwbMatrixBuilder *builder = context->builder;
  float *row = knnwb_matrix_builder_next_row(builder, error);
  if (row == NULL)
    return FALSE;
  double *exact = knnwb_matrix_builder_exact_row(builder); /* NULL unless ranks are kept */
  if (layout->expected_rows != SIZE_MAX && builder->n_rows >= layout->expected_rows) {
    knnwb_delimited_error(context, *line, 0, error,
                          "more data rows than the %zu the header declares", layout->expected_rows);
    return FALSE;
  }
  gboolean has_label = FALSE;
  size_t position = 0;
  size_t value_index = 0;
  gboolean missing = FALSE;
  for (size_t field = 0; field < layout->n_fields; field++) {
    if (field > 0) {
      if (position >= *length) {
        knnwb_delimited_error(context, *line, position, error,
                              "the row has %zu field%s, expected %zu", field, KNNWB_PLURAL(field),
                              layout->n_fields);
        return FALSE;
      }
      position++; /* the delimiter */
    }
    if (layout->kinds[field] == KNNWB_COLUMN_VALUE) {
      const char *end = *line + *length;
      const char *stop;
      if (knnwb_formats_parse_float(*line + position, end, &row[value_index], &stop) ==
              KNNWB_FLOAT_OK &&
          (stop == end || *stop == delimiter)) {
        const char *exact_stop;
        if (exact != NULL)
          knnwb_formats_parse_double(*line + position, stop, &exact[value_index], &exact_stop);
        position = (size_t)(stop - *line);
        value_index++;
        continue;
      }
    }
    size_t start = position;
    gboolean quoted;
    if (!knnwb_delimited_field(context, line, length, &position, &quoted, error))
      return FALSE;
    if (layout->kinds[field] == KNNWB_COLUMN_VALUE) {
      if (!knnwb_delimited_value(context, *line, start, value_index, &row[value_index],
                                 exact ? &exact[value_index] : NULL, &missing, error))
        return FALSE;
      value_index++;
    } else if (layout->kinds[field] == KNNWB_COLUMN_LABEL) {
      const char *invalid;
      if (!g_utf8_validate_len(context->scratch->str, context->scratch->len, &invalid)) {
        knnwb_delimited_error(context, *line, start, error, "the label is not valid UTF-8%s",
                              *invalid == '\0'
                                  ? " (it holds a NUL byte)"
                                  : " (a Latin-1 or Windows-1252 file, as older Excel saves? "
                                    "convert it: iconv -f latin1 -t utf-8 IN > OUT)");
        return FALSE;
      }
      g_string_truncate(context->label, 0);
      g_string_append_len(context->label, context->scratch->str, (gssize)context->scratch->len);
      has_label = TRUE;
    } else if (layout->kinds[field] == KNNWB_COLUMN_ANNOTATION &&
               !knnwb_delimited_annotation_text(context, *line, start, error)) {
      return FALSE;
    }
  }
  if (position < *length &&
      !(layout->trailing_empty &&
        knnwb_delimited_rest_is_empty(*line + position, *length - position, delimiter))) {
    size_t total = layout->n_fields + knnwb_delimited_count_fields(
                                          *line + position + 1, *length - position - 1, delimiter);
    knnwb_delimited_error(
        context, *line, position + 1, error, "the row has %zu field%s, expected %zu%s", total,
        KNNWB_PLURAL(total), layout->n_fields,
        layout->trailing_empty ? " (fields past the last named column may only be empty: the "
                                 "header or the first data row ends with a separator, read as a "
                                 "trailing one; in R's write.table layout, whose header lacks the "
                                 "row names' column, write a missing value as NA)"
                               : "");
    return FALSE;
  }
  if (missing) {
    if (context->info->n_dropped_rows++ == 0)
      context->info->first_dropped_line = context->record_line;
    knnwb_matrix_builder_commit_absent_row(builder, has_label ? context->label->str : NULL,
                                           has_label ? context->label->len : 0);
    return TRUE;
  }
  knnwb_matrix_builder_commit_row(builder, has_label ? context->label->str : NULL,
                                  has_label ? context->label->len : 0);
  return TRUE;
}

static gboolean knnwb_delimited_line_is_blank(const char *line, size_t length)
{
  for (size_t i = 0; i < length; i++)
    if (line[i] != ' ')
      return FALSE;
  return TRUE;
}

/* Shared by knnwb_formats_read_delimited_rows and the first record of a CSV/TSV. */
static gboolean knnwb_delimited_rows_from(KnnwbDelimitedContext *context, const char *line,
                                          size_t length, size_t line_number, GError **error)
{
  KnnwbTextInput *input = context->input;
  gboolean have_line = line != NULL;
  for (;;) {
    if (have_line) {
      context->record_line = line_number; /* a record read (and maybe extended) by the caller */
      have_line = FALSE;
    } else {
      int got = knnwb_text_input_next_line(input, &line, &length, error);
      if (got < 0)
        return FALSE;
      if (got == 0)
        break;
      if (knnwb_delimited_line_is_blank(line, length))
        continue;
      const char *marker = context->layout->end_marker;
      if (marker != NULL && length >= strlen(marker) && memcmp(line, marker, strlen(marker)) == 0) {
        *context->layout->end_marker_seen = TRUE;
        break;
      }
      context->record_line = input->line_number;
    }
    if (!knnwb_delimited_row(context, &line, &length, error))
      return FALSE;
  }
  size_t expected = context->layout->expected_rows;
  size_t found = context->builder->n_rows; /* rows with missing values are kept, absent */
  if (expected != SIZE_MAX && found != expected) {
    knnwb_formats_parse_error(error, input->path, input->line_number, 0,
                              "the file ends after %zu data rows, the header declares %zu "
                              "(truncated file?)",
                              found, expected);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_formats_read_delimited_rows(KnnwbTextInput *input,
                                           const KnnwbDelimitedLayout *layout,
                                           KnnwbMatrixBuilder *builder, KnnwbReadInfo *info,
                                           GError **error)
{
  g_autoptr(GString) scratch = g_string_new(NULL);
  g_autoptr(GString) label = g_string_new(NULL);
  KnnwbDelimitedContext context = {.input = input,
                                   .layout = layout,
                                   .builder = builder,
                                   .info = info,
                                   .scratch = scratch,
                                   .label = label};
  return knnwb_delimited_rows_from(&context, NULL, 0, 0, error);
}

static gboolean knnwb_delimited_is_number(const char *text)
{
  size_t length = strlen(text);
  float value;
  const char *stop;
  return length > 0 &&
         knnwb_formats_parse_float(text, text + length, &value, &stop) != KNNWB_FLOAT_SYNTAX &&
         stop == text + length;
}

/* Whole numbers k, k + 1, ..., as in every field but the label: pandas names the columns of an
 * unnamed array 0, 1, 2, ...; sample numbers run alike. */
static gboolean knnwb_delimited_consecutive_integers(GPtrArray *fields, int label_column)
{
  gint64 previous = 0;
  guint count = 0;
  for (guint f = 0; f < fields->len; f++) {
    if ((int)f == label_column)
      continue;
    gint64 value;
    if (!g_ascii_string_to_signed(g_ptr_array_index(fields, f), 10, G_MININT64 / 2, G_MAXINT64 / 2,
                                  &value, NULL) ||
        (count > 0 && value != previous + 1))
      return FALSE;
    previous = value;
    count++;
  }
  return count >= 2;
}

/* Every field but the label a whole number (written without a point or exponent). */
static gboolean knnwb_delimited_whole_numbers(GPtrArray *fields, int label_column)
{
  for (guint f = 0; f < fields->len; f++) {
    gint64 value;
    if ((int)f != label_column && !g_ascii_string_to_signed(g_ptr_array_index(fields, f), 10,
                                                            G_MININT64, G_MAXINT64, &value, NULL))
      return FALSE;
  }
  return TRUE;
}

/* Names of a label column's header that no probe or gene has: above time points or sample numbers
 * (0, 1, 2, 4, 8) the header is numbers too. */
static gboolean knnwb_delimited_is_header_word(const char *text)
{
  static const char *const words[] = {
      "gene",        "genes",     "geneid",     "gene_id",       "gene_name", "gene_symbol",
      "symbol",      "id",        "id_ref",     "probe",         "probe_id",  "probeset",
      "probeset_id", "feature",   "feature_id", "name",          "ensembl",   "ensembl_id",
      "entrez",      "entrez_id", "transcript", "transcript_id", "rownames"};
  for (size_t i = 0; i < G_N_ELEMENTS(words); i++)
    if (g_ascii_strcasecmp(text, words[i]) == 0)
      return TRUE;
  return FALSE;
}

/* A header when some field other than the label is neither a number nor a missing value; or, with
 * a label column, when every other field is a number but the label field is empty (the top-left
 * cell of R's write.csv and of pandas' to_csv), a label column's name (gene, ID_REF, probe, ...),
 * or a word above the consecutive whole numbers
 * of pandas' default column names or of numbered samples (such a header of numbers was read as a
 * data row of count data, without a word: an extra point). */
static gboolean knnwb_delimited_looks_like_header(GPtrArray *fields, int label_column,
                                                  gboolean decimal_comma)
{
  for (guint f = 0; f < fields->len; f++) {
    if ((int)f == label_column)
      continue;
    char *text = g_ptr_array_index(fields, f);
    size_t length = strlen(text);
    char *comma = decimal_comma ? strchr(text, ',') : NULL;
    if (comma != NULL && strchr(comma + 1, ',') == NULL)
      *comma = '.'; /* the first record is read again as a row: this copy may change */
    float value;
    const char *stop;
    if (knnwb_formats_is_missing_token(text, length))
      continue;
    if (knnwb_formats_parse_float(text, text + length, &value, &stop) == KNNWB_FLOAT_SYNTAX ||
        stop != text + length)
      return TRUE;
  }
  if (label_column < 0 || (guint)label_column >= fields->len || fields->len < 2)
    return FALSE;
  const char *corner = g_ptr_array_index(fields, label_column);
  /* An empty label over floats is more likely a data row without a name than a header. */
  return (*corner == '\0' && knnwb_delimited_whole_numbers(fields, label_column)) ||
         knnwb_delimited_is_header_word(corner) ||
         (!knnwb_delimited_is_number(corner) &&
          knnwb_delimited_consecutive_integers(fields, label_column));
}

void knnwb_formats_warn_numeric_labels(const char *path, const char *const *labels, size_t n_rows,
                                       int label_column)
{
  if (label_column < 0 || labels == NULL || n_rows < 2)
    return;
  for (size_t i = 0; i < n_rows; i++)
    if (labels[i] == NULL || !knnwb_delimited_is_number(labels[i]))
      return;
  g_warning("%s: column %d was read as row labels but holds a number in every row; if it is "
            "data, read the file with no label column (knnwb knn --label-column none)",
            path, label_column + 1);
}

/* A file without a detected header whose first row's values are all whole numbers (and the
 * second's not) probably had one: time points or numeric sample ids. matrix: the file's first
 * rows. */
static void knnwb_delimited_warn_header_guess(const char *path, const KnnwbMatrix *matrix,
                                              int label_column, gboolean has_header,
                                              gboolean header_auto)
{
  if (header_auto && !has_header && label_column >= 0 && matrix->n_rows >= 2 &&
      matrix->n_cols > 0) {
    gboolean whole = TRUE, next_whole = TRUE;
    for (size_t j = 0; j < matrix->n_cols; j++) {
      whole = whole && matrix->values[j] == floorf(matrix->values[j]);
      next_whole = next_whole &&
                   matrix->values[matrix->n_cols + j] == floorf(matrix->values[matrix->n_cols + j]);
    }
    if (whole && !next_whole)
      g_warning("%s: no header line was detected, so the first line (label '%s') was read as data; "
                "if it names the columns, pass --header yes",
                path, matrix->row_labels && matrix->row_labels[0] ? matrix->row_labels[0] : "");
  }
}

/* The columns featureCounts writes before the samples' counts. */
static const char *const knnwb_delimited_feature_counts[] = {"Geneid", "Chr",    "Start",
                                                             "End",    "Strand", "Length"};

static gboolean knnwb_delimited_is_feature_counts(GPtrArray *header)
{
  if (header->len <= G_N_ELEMENTS(knnwb_delimited_feature_counts))
    return FALSE;
  for (size_t f = 0; f < G_N_ELEMENTS(knnwb_delimited_feature_counts); f++)
    if (strcmp(g_ptr_array_index(header, f), knnwb_delimited_feature_counts[f]) != 0)
      return FALSE;
  return TRUE;
}

/* A line with ';' and no ',' but between two digits. */
static gboolean knnwb_delimited_semicolon_line(const char *line, size_t length)
{
  if (memchr(line, ';', length) == NULL)
    return FALSE;
  for (size_t i = 0; i < length; i++)
    if (line[i] == ',' && (i == 0 || i + 1 >= length || !g_ascii_isdigit(line[i - 1]) ||
                           !g_ascii_isdigit(line[i + 1])))
      return FALSE;
  return TRUE;
}

/* Reads lines until a non-blank one. 0 = end of file. */
static int knnwb_delimited_next_nonblank(KnnwbTextInput *input, const char **line, size_t *length,
                                         GError **error)
{
  for (;;) {
    int got = knnwb_text_input_next_line(input, line, length, error);
    if (got <= 0)
      return got;
    if (!knnwb_delimited_line_is_blank(*line, *length))
      return 1;
  }
}

/* The start of a delimited file as knnwb_formats_read_delimited works it out: the first record,
 * the header (if any), the label column, the field count and the first data record. */
typedef struct {
  KnnwbTextInput *input;
  const char *path;
  char delimiter;
  gboolean decimal_comma;
  GPtrArray *first;  /* the fields of the first data record, split (empty when not yet split) */
  GPtrArray *header; /* the header's fields, or NULL */
  const char *line;  /* the first data record, still the current one of input */
  size_t length;
  size_t first_line, data_line;
  size_t n_fields;
  int label_column;
  gboolean has_header, header_quoted, data_quoted, trailing_empty;
  gboolean rank_rows, transpose; /* the read options': keep ranks from the values as read */
  const char *skip_columns;      /* the read options' annotation columns, or NULL */
} KnnwbDelimitedStart;

/* The first record: comment lines above the table skipped, the decimal comma detected, split. */
static gboolean knnwb_delimited_first_record(KnnwbDelimitedStart *start, GError **error)
{
  KnnwbTextInput *input = start->input;
  const char **line = &start->line;
  size_t *length = &start->length;
  int got = knnwb_delimited_next_nonblank(input, line, length, error);
  /* A comment line above the table, as featureCounts writes ("# Program:featureCounts ...
   * Command: ..."): '#' and no separator in it (a header "#gene<TAB>S1" stays the header). */
  while (got > 0 && *length > 0 && (*line)[0] == '#' &&
         memchr(*line, start->delimiter, *length) == NULL)
    got = knnwb_delimited_next_nonblank(input, line, length, error);
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, start->path, MAX(input->line_number, 1), 0,
                                "the file is empty: no header and no data rows");
    return FALSE;
  }
  start->first_line = start->data_line = input->line_number;
  /* Excel where the comma is the decimal mark (German, French, ... locales) saves "CSV" with ';'
   * between the fields and 1,5 for 1.5: a first line with ';' whose commas (if any) all sit
   * between digits. */
  start->decimal_comma = start->delimiter == ',' && knnwb_delimited_semicolon_line(*line, *length);
  if (start->decimal_comma)
    start->delimiter = ';';
  start->header_quoted = memchr(*line, '"', *length) != NULL;
  if (!knnwb_formats_split_record(input, start->delimiter, line, length, start->first, error))
    return FALSE;
  start->n_fields = start->first->len;
  return TRUE;
}

/* The label column: options' number, or the column of the first record named by options. */
static gboolean knnwb_delimited_label_column(KnnwbDelimitedStart *start,
                                             const KnnwbReadOptions *options, GError **error)
{
  GPtrArray *first = start->first;
  start->label_column = options->label_column;
  if (options->label_column_name != NULL) {
    /* A named label column: the first record is the header, whatever --header says. */
    if (options->header == KNNWB_HEADER_NO) {
      knnwb_formats_parse_error(error, start->path, start->first_line, 0,
                                "the label column is named ('%s') but the file is read without a "
                                "header",
                                options->label_column_name);
      return FALSE;
    }
    start->label_column = -1;
    for (guint f = 0; f < first->len && start->label_column < 0; f++)
      if (g_str_equal(g_ptr_array_index(first, f), options->label_column_name))
        start->label_column = (int)f;
    if (start->label_column < 0) {
      g_autofree char *names = NULL;
      g_ptr_array_add(first, NULL);
      names = g_strjoinv("', '", (char **)first->pdata);
      g_ptr_array_remove_index(first, first->len - 1);
      knnwb_formats_parse_error(error, start->path, start->first_line, 0,
                                "no column is named '%s' (the header has '%s')",
                                options->label_column_name, names);
      return FALSE;
    }
  }
  if (start->label_column >= 0 && (guint)start->label_column >= first->len) {
    knnwb_formats_parse_error(error, start->path, start->first_line, 0,
                              "the label column %d does not exist: the line has %u field%s",
                              start->label_column + 1, first->len, KNNWB_PLURAL(first->len));
    return FALSE;
  }
  start->has_header =
      options->header == KNNWB_HEADER_YES || options->label_column_name != NULL ||
      (options->header == KNNWB_HEADER_AUTO &&
       knnwb_delimited_looks_like_header(first, start->label_column, start->decimal_comma));
  return TRUE;
}

/* With a header: the first data record after it, and the field count they agree on. */
static gboolean knnwb_delimited_after_header(KnnwbDelimitedStart *start, GError **error)
{
  KnnwbTextInput *input = start->input;
  GPtrArray *header = start->header = g_steal_pointer(&start->first);
  GPtrArray *first = start->first = g_ptr_array_new_with_free_func(g_free);
  const char *line;
  size_t length;
  int got = knnwb_delimited_next_nonblank(input, &line, &length, error);
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, start->path, start->first_line, 0,
                                "a header but no data rows follow it");
    return FALSE;
  }
  start->data_line = input->line_number;
  start->data_quoted = memchr(line, '"', length) != NULL;
  size_t n_fields = knnwb_delimited_count_fields(line, length, start->delimiter);
  if (memchr(line, '"', length) != NULL) {
    /* Quotes may hide delimiters: count properly (this may pull in continuation lines). */
    if (!knnwb_formats_split_record(input, start->delimiter, &line, &length, first, error))
      return FALSE;
    n_fields = first->len;
  }
  start->line = line;
  start->length = length;
  /* Separators ending the lines (Excel's unnamed empty columns, scripts that print a tab after
   * every value) make empty fields past the named columns. Read them as such when that makes
   * the header and the first data row agree: before, a tab ending only the data lines looked
   * like R's layout and shifted every column name by one. */
  size_t header_trailing = knnwb_delimited_trailing_empty_fields(header);
  size_t data_trailing = first->len > 0
                             ? knnwb_delimited_trailing_empty_fields(first)
                             : knnwb_delimited_trailing_empty_raw(line, length, start->delimiter);
  size_t named = header->len - header_trailing;
  int label_column = start->label_column;
  if ((header_trailing > 0 || data_trailing > 0) && n_fields >= named &&
      n_fields - named <= data_trailing && (label_column < 0 || (size_t)label_column < named)) {
    g_ptr_array_set_size(header, (guint)named);
    n_fields = named;
    start->trailing_empty = TRUE;
  } else if (n_fields == header->len + 1 && label_column == 0) {
    /* R's write.table: the header has no name for the row-label column. */
    g_ptr_array_insert(header, 0, g_strdup(""));
  } else if (n_fields != header->len) {
    knnwb_formats_parse_error(error, start->path, start->data_line, 0,
                              "the row has %zu field%s, the header on line %zu has %u", n_fields,
                              KNNWB_PLURAL(n_fields), start->first_line, header->len);
    return FALSE;
  }
  start->n_fields = n_fields;
  return TRUE;
}

/* The error when no column holds values: one field per line is most often the wrong separator
 * (Excel writes ';', with decimal commas, where the comma is the decimal mark): say which one the
 * line holds. */
static void knnwb_delimited_no_values_error(const KnnwbDelimitedStart *start, GError **error)
{
  const char delimiter = start->delimiter;
  const char *line_text =
      g_ptr_array_index(start->header != NULL ? start->header : start->first, 0);
  const char *other = start->n_fields != 1                           ? NULL
                      : delimiter != ';' && strchr(line_text, ';')   ? "';'"
                      : delimiter != ',' && strchr(line_text, ',')   ? "','"
                      : delimiter != '\t' && strchr(line_text, '\t') ? "a tab"
                                                                     : NULL;
  if (start->n_fields == 1 && other == NULL && strchr(line_text, ' ') != NULL)
    knnwb_formats_parse_error(
        error, start->path, start->first_line, 0,
        "no numeric columns: with %s as the separator the line is one field, yet it holds "
        "spaces (R's write.table separates columns by spaces unless given sep); knnwb reads CSV "
        "separated by ',' and TSV by tabs: write the file with write.table(x, file, sep = "
        "\"\\t\") or write.csv(x, file), or convert it",
        delimiter == ',' ? "','" : "a tab");
  else if (other != NULL)
    knnwb_formats_parse_error(
        error, start->path, start->first_line, 0,
        "no numeric columns: with %s as the separator the line is one field, yet it holds %s "
        "(as Excel writes with ';' where the comma is the decimal mark?); knnwb reads CSV "
        "separated by ',' (or by ';' with ',' as the decimal mark, as that Excel writes) and TSV "
        "by tabs: convert the file, or name it .csv or .tsv (or pass --format) to match its "
        "separator",
        delimiter == ',' ? "','" : "a tab", other);
  else
    knnwb_formats_parse_error(error, start->path, start->first_line, 0,
                              "no numeric columns (only the label column)");
}

/* What each field holds (n_fields kinds, g_free) and how many hold values; NULL with error set
 * when none does. */
/* --skip-columns: each name (or 1-based number) a column of the header, left out. */
static gboolean knnwb_delimited_skip_named(const KnnwbDelimitedStart *start, guint8 *kinds,
                                           size_t *n_values, GError **error)
{
  g_auto(GStrv) names = g_strsplit(start->skip_columns, ",", -1);
  for (size_t i = 0; names[i] != NULL; i++) {
    const char *name = g_strstrip(names[i]);
    if (*name == '\0')
      continue;
    guint64 number = 0;
    gboolean numbered = g_ascii_string_to_unsigned(name, 10, 1, start->n_fields, &number, NULL);
    size_t field = numbered ? (size_t)number - 1 : start->n_fields;
    for (size_t f = 0; !numbered && start->header != NULL && f < start->header->len; f++)
      if (g_str_equal(g_ptr_array_index(start->header, f), name))
        field = f;
    if (field >= start->n_fields) {
      knnwb_formats_parse_error(error, start->path, start->first_line, 0,
                                "--skip-columns: no column is named '%s'%s", name,
                                start->header ? "" : " (the file has no header: give numbers)");
      return FALSE;
    }
    if (kinds[field] == KNNWB_COLUMN_LABEL) {
      knnwb_formats_parse_error(error, start->path, start->first_line, 0,
                                "--skip-columns: '%s' is the label column", name);
      return FALSE;
    }
    if (kinds[field] == KNNWB_COLUMN_VALUE)
      (*n_values)--;
    kinds[field] = KNNWB_COLUMN_SKIP;
  }
  return TRUE;
}

/* The first data record's field f, as text (the record may not be split yet). */
static char *knnwb_delimited_first_field(const KnnwbDelimitedStart *start, size_t f)
{
  if (start->first->len > 0)
    return f < start->first->len ? g_strdup(g_ptr_array_index(start->first, f)) : NULL;
  const char *p = start->line, *end = start->line + start->length;
  for (size_t at = 0; at < f && p != NULL; at++) {
    p = memchr(p, start->delimiter, (size_t)(end - p));
    p = p ? p + 1 : NULL;
  }
  if (p == NULL)
    return NULL;
  const char *stop = memchr(p, start->delimiter, (size_t)(end - p));
  return g_strndup(p, (gsize)((stop ? stop : end) - p));
}

/* A malformed number rather than a word ("0x10", "2e", "1.2.3"): digits, hex letters, signs,
 * points and commas after a digit, sign or point. Such a field stays a value, and an error. */
static gboolean knnwb_delimited_number_like(const char *text)
{
  if (!(*text == '+' || *text == '-' || *text == '.' || g_ascii_isdigit(*text)))
    return FALSE;
  for (; *text != '\0'; text++)
    if (!g_ascii_isxdigit(*text) && strchr("xX.+-,", *text) == NULL)
      return FALSE;
  return TRUE;
}

/* A second column of text beside the labels (a GDS table's IDENTIFIER, gene symbols beside probe
 * IDs): with a header and the labels in the first column, a second column whose first data field
 * is a word (neither a number, nor missing, nor a malformed number) is an annotation column, left
 * out with a warning. A number in
 * it further down is an error (knnwb_delimited_row): the column was not text after all. */
static void knnwb_delimited_skip_text_column(const KnnwbDelimitedStart *start, guint8 *kinds,
                                             size_t *n_values)
{
  if (start->header == NULL || start->label_column != 0 || start->n_fields < 3 ||
      kinds[1] != KNNWB_COLUMN_VALUE || start->line == NULL)
    return;
  g_autofree char *text = knnwb_delimited_first_field(start, 1);
  if (text == NULL)
    return;
  g_strstrip(text);
  if (start->decimal_comma && strchr(text, ',') != NULL)
    *strchr(text, ',') = '.';
  float value;
  size_t length = strlen(text);
  KnnwbFloatStatus status = knnwb_formats_parse_float_field(text, length, &value);
  if (knnwb_formats_is_missing_token(text, length) || status == KNNWB_FLOAT_OK ||
      status == KNNWB_FLOAT_TINY || status == KNNWB_FLOAT_RANGE ||
      knnwb_delimited_number_like(text))
    return;
  kinds[1] = KNNWB_COLUMN_ANNOTATION;
  (*n_values)--;
  g_warning("%s: column 2 ('%s') holds text ('%s' on line %zu): read as an annotation column and "
            "left out (name annotation columns with --skip-columns)",
            start->path, (const char *)g_ptr_array_index(start->header, 1), text, start->data_line);
}

static guint8 *knnwb_delimited_column_kinds(const KnnwbDelimitedStart *start, size_t *n_values,
                                            GError **error)
{
  g_autofree guint8 *kinds = g_new0(guint8, start->n_fields);
  *n_values = start->n_fields;
  if (start->label_column >= 0) {
    kinds[start->label_column] = KNNWB_COLUMN_LABEL;
    (*n_values)--;
  }
  if (start->label_column == 0 && start->header != NULL &&
      knnwb_delimited_is_feature_counts(start->header)) {
    /* featureCounts' gene annotation ("1;1;1", "+;+;+", the length) is not expression. */
    for (size_t f = 1; f < G_N_ELEMENTS(knnwb_delimited_feature_counts); f++)
      kinds[f] = KNNWB_COLUMN_SKIP;
    *n_values -= G_N_ELEMENTS(knnwb_delimited_feature_counts) - 1;
  }
  if (start->skip_columns != NULL) {
    if (!knnwb_delimited_skip_named(start, kinds, n_values, error))
      return NULL;
  } else {
    knnwb_delimited_skip_text_column(start, kinds, n_values);
  }
  if (*n_values == 0) {
    knnwb_delimited_no_values_error(start, error);
    return NULL;
  }
  return g_steal_pointer(&kinds);
}

/* One rank's byte range of a split-memory job: only the records whose line starts in it (see
 * KnnwbReadOptions.block_count). A quote seen so far may mean fields that span lines. */
static void knnwb_delimited_start_window(KnnwbDelimitedStart *start,
                                         const KnnwbReadOptions *options, KnnwbReadInfo *info)
{
  KnnwbTextInput *input = start->input;
  const unsigned __int128 size = input->file_size;
  const uint64_t first =
      (uint64_t)(size * (unsigned)options->block_index / (unsigned)options->block_count);
  const uint64_t end =
      (uint64_t)(size * ((unsigned)options->block_index + 1) / (unsigned)options->block_count);
  const uint64_t at = knnwb_text_input_line_offset(input);
  input->quoted = start->header_quoted || start->data_quoted;
  knnwb_text_input_set_window(input, first, end);
  if (at < first || at >= end)
    start->line = NULL; /* the first data record is another rank's */
  info->block_read = TRUE;
}

/* The builder for the values, with the header's column names, sized from the first row's length
 * and the bytes to read (a rank's window of the file, else the whole file): one realloc in the
 * common case (untouched pages of an overestimate cost no memory, but do cost address space, which
 * a rank under `ulimit -v` reading its share of a large file needs for its own rows). */
static gboolean knnwb_delimited_builder_init(const KnnwbDelimitedStart *start, const guint8 *kinds,
                                             size_t n_values, KnnwbMatrixBuilder *builder,
                                             GError **error)
{
  knnwb_matrix_builder_init(builder, n_values, start->label_column >= 0);
  if (start->rank_rows)
    knnwb_matrix_builder_keep_ranks(builder, start->transpose);
  if (start->header != NULL) {
    builder->col_labels = g_ptr_array_new_with_free_func(g_free);
    for (guint f = 0; f < start->header->len; f++)
      if (kinds[f] == KNNWB_COLUMN_VALUE)
        g_ptr_array_add(builder->col_labels, g_strdup(g_ptr_array_index(start->header, f)));
  }
  const KnnwbTextInput *input = start->input;
  const uint64_t bytes =
      input->windowed ? input->window_end - input->window_start : input->file_size;
  if (bytes > 0 && start->length > 0) {
    size_t estimate = (size_t)(bytes / (start->length + 1)) + 16;
    size_t bound = (size_t)(bytes / (2 * n_values)) + 16; /* "0\t" per value at least */
    if (!knnwb_matrix_builder_reserve(builder, MIN(estimate + estimate / 20, bound), error))
      return FALSE;
  }
  return TRUE;
}

gboolean knnwb_formats_read_delimited(const char *path, const KnnwbReadOptions *options,
                                      char delimiter, KnnwbMatrix **out, KnnwbReadInfo *info,
                                      GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, path, error))
    return FALSE;
  knnwb_text_input_watch(&input, options);
  gboolean ok = FALSE;
  KnnwbMatrixBuilder builder = {0};
  KnnwbDelimitedStart start = {.input = &input,
                               .path = path,
                               .delimiter = delimiter,
                               .first = g_ptr_array_new_with_free_func(g_free),
                               .rank_rows = options->rank_rows,
                               .transpose = options->transpose,
                               .skip_columns = options->skip_columns};
  g_autofree guint8 *kinds = NULL;
  g_autoptr(GString) scratch = g_string_new(NULL);
  g_autoptr(GString) label = g_string_new(NULL);
  size_t n_values = 0;
  if (!knnwb_delimited_first_record(&start, error) ||
      !knnwb_delimited_label_column(&start, options, error) ||
      (start.has_header && !knnwb_delimited_after_header(&start, error)) ||
      (kinds = knnwb_delimited_column_kinds(&start, &n_values, error)) == NULL)
    goto out;
  const gboolean window = options->block_count > 1 && !options->transpose && input.file_size > 0 &&
                          input.gzip == NULL &&
                          options->labels_path == NULL; /* side labels count from the first row */
  if (window)
    knnwb_delimited_start_window(&start, options, info);
  if (!knnwb_delimited_builder_init(&start, kinds, n_values, &builder, error))
    goto out;
  KnnwbDelimitedLayout layout = {.delimiter = start.delimiter,
                                 .kinds = kinds,
                                 .n_fields = start.n_fields,
                                 .missing = options->missing,
                                 .expected_rows = SIZE_MAX,
                                 .trailing_empty = start.trailing_empty,
                                 .decimal_comma = start.decimal_comma};
  KnnwbDelimitedContext context = {.input = &input,
                                   .layout = &layout,
                                   .builder = &builder,
                                   .info = info,
                                   .scratch = scratch,
                                   .label = label};
  /* The first data record was read (and split) already and is still the current record. */
  if (!knnwb_delimited_rows_from(&context, start.line, start.length, start.data_line, error))
    goto out;
  const gboolean header_guessed = options->header == KNNWB_HEADER_AUTO;
  if (window) {
    /* A rank's range may hold no row, or only rows with missing values: the job has others.
     * Labels that are all numbers are told by the caller, who sees every block's
     * (knnwb_formats_warn_read); the first block starts with the file's first rows. */
    info->quoted = input.quoted;
    *out = knnwb_matrix_builder_finish(&builder, error);
    ok = *out != NULL;
    if (ok && options->block_index == 0 && start.line != NULL) /* the first record is its own */
      knnwb_delimited_warn_header_guess(path, *out, start.label_column, start.has_header,
                                        header_guessed);
    goto out;
  }
  ok = knnwb_matrix_builder_finish_rows(&builder, path, input.line_number, info, out, error);
  if (ok) {
    knnwb_formats_warn_numeric_labels(path, (const char *const *)(*out)->row_labels, (*out)->n_rows,
                                      start.label_column);
    knnwb_delimited_warn_header_guess(path, *out, start.label_column, start.has_header,
                                      header_guessed);
  }
out:
  if (input.windowed)
    info->quoted = input.quoted; /* also after an error: a cut record may be its cause */
  g_clear_pointer(&start.header, g_ptr_array_unref);
  g_clear_pointer(&start.first, g_ptr_array_unref);
  knnwb_matrix_builder_clear(&builder);
  knnwb_text_input_close(&input);
  return ok;
}
