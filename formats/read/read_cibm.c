/* The CIBM microarray format of GPU-FS-kNN (File S1, "Program Execution"). */
#include "read_internal.h"

#include <string.h>

/*
 * <MicroarrayData>
 * n m
 * label v1 ... vm      (n rows, whitespace-separated)
 * <SamplesNames>       (optional)
 *   name1 ... namem
 * <SamplesClasses>     (optional)
 *   class1 ... classm
 * <EndOfFile>
 */

static gboolean knnwb_cibm_is_space(char c)
{
  return c == ' ' || c == '\t';
}

/* Reads the next line that is not blank; 0 at end of file. */
static int knnwb_cibm_next_line(KnnwbTextInput *input, const char **line, size_t *length,
                                GError **error)
{
  for (;;) {
    int got = knnwb_text_input_next_line(input, line, length, error);
    if (got <= 0)
      return got;
    size_t i = 0;
    while (i < *length && knnwb_cibm_is_space((*line)[i]))
      i++;
    if (i < *length)
      return 1;
  }
}

/* The line with surrounding blanks removed, as a tag candidate. */
static gboolean knnwb_cibm_is_tag(const char *line, size_t length, const char *tag)
{
  while (length > 0 && knnwb_cibm_is_space(*line)) {
    line++;
    length--;
  }
  while (length > 0 && knnwb_cibm_is_space(line[length - 1]))
    length--;
  return length == strlen(tag) && memcmp(line, tag, length) == 0;
}

static gboolean knnwb_cibm_starts_tag(const char *line, size_t length)
{
  size_t i = 0;
  while (i < length && knnwb_cibm_is_space(line[i]))
    i++;
  return i < length && line[i] == '<';
}

/* Splits a line at runs of blanks; returns the tokens as [start, end) offset pairs. */
static void knnwb_cibm_tokens(const char *line, size_t length, GArray *offsets)
{
  g_array_set_size(offsets, 0);
  size_t i = 0;
  for (;;) {
    while (i < length && knnwb_cibm_is_space(line[i]))
      i++;
    if (i >= length)
      return;
    size_t start = i;
    while (i < length && !knnwb_cibm_is_space(line[i]))
      i++;
    g_array_append_val(offsets, start);
    g_array_append_val(offsets, i);
  }
}

static gboolean knnwb_cibm_check_text(const char *path, size_t line_number, const char *line,
                                      size_t start, size_t end, GError **error)
{
  const char *invalid;
  if (!g_utf8_validate_len(line + start, end - start, &invalid)) {
    knnwb_formats_parse_error(error, path, line_number, (size_t)(invalid - line) + 1,
                              *invalid == '\0' ? "NUL byte in a name (binary file?)"
                                               : "a name is not valid UTF-8");
    return FALSE;
  }
  return TRUE;
}

static gboolean knnwb_cibm_parse_size(const char *text, size_t length, size_t *value)
{
  if (length == 0)
    return FALSE;
  size_t v = 0;
  for (size_t i = 0; i < length; i++) {
    if (text[i] < '0' || text[i] > '9' || v > (SIZE_MAX - 9) / 10)
      return FALSE;
    v = v * 10 + (size_t)(text[i] - '0');
  }
  *value = v;
  return TRUE;
}

/* The values of a row knnwb_cibm_row accepted (m numbers after the label), as doubles into exact
 * (nothing when exact is NULL: no ranks kept). */
static void knnwb_cibm_exact_row(const char *line, size_t length, size_t i, size_t m, double *exact)
{
  const char *end = line + length, *stop;
  for (size_t j = 0; exact != NULL && j < m; j++) {
    while (i < length && knnwb_cibm_is_space(line[i]))
      i++;
    if (knnwb_formats_parse_double(line + i, end, &exact[j], &stop) == KNNWB_FLOAT_OK)
      i = (size_t)(stop - line);
    else
      for (exact[j] = 0.0; i < length && !knnwb_cibm_is_space(line[i]);)
        i++;
  }
}

/* Parses one data row into row[0..m); label offsets returned. */
static gboolean knnwb_cibm_row(KnnwbTextInput *input, const char *line, size_t length, size_t m,
                               KnnwbMissingPolicy missing_policy, float *row, size_t *label_start,
                               size_t *label_end, gboolean *missing, GError **error)
{
  const char *path = input->path;
  size_t i = 0;
  while (i < length && knnwb_cibm_is_space(line[i]))
    i++;
  *label_start = i;
  while (i < length && !knnwb_cibm_is_space(line[i]))
    i++;
  *label_end = i;
  if (!knnwb_cibm_check_text(path, input->line_number, line, *label_start, *label_end, error))
    return FALSE;
  const char *end = line + length;
  for (size_t j = 0; j < m; j++) {
    while (i < length && knnwb_cibm_is_space(line[i]))
      i++;
    if (i >= length) {
      knnwb_formats_parse_error(error, path, input->line_number, length + 1,
                                "the row has %zu value%s, the dimensions line declares %zu", j,
                                KNNWB_PLURAL(j), m);
      return FALSE;
    }
    const char *stop;
    KnnwbFloatStatus status = knnwb_formats_parse_float(line + i, end, &row[j], &stop);
    if ((status == KNNWB_FLOAT_OK || status == KNNWB_FLOAT_TINY) &&
        (stop == end || knnwb_cibm_is_space(*stop))) {
      i = (size_t)(stop - line);
      continue;
    }
    size_t start = i;
    while (i < length && !knnwb_cibm_is_space(line[i]))
      i++;
    if (knnwb_formats_is_missing_token(line + start, i - start)) {
      if (missing_policy == KNNWB_MISSING_ERROR) {
        g_autofree char *shown = knnwb_formats_quote_field(line + start, i - start);
        knnwb_formats_parse_error(error, path, input->line_number, start + 1,
                                  "%s %s in column %zu; fill it in, or choose the policy "
                                  "that drops rows with missing or infinite values",
                                  knnwb_formats_missing_token_kind(line + start, i - start), shown,
                                  j + 1);
        return FALSE;
      }
      *missing = TRUE;
      row[j] = 0.0f;
      continue;
    }
    g_autofree char *shown = knnwb_formats_quote_field(line + start, i - start);
    if (memchr(line + start, '\0', i - start) != NULL)
      knnwb_formats_parse_error(error, path, input->line_number, start + 1,
                                "NUL byte in a value (binary file?)");
    else if (status == KNNWB_FLOAT_RANGE)
      knnwb_formats_parse_error(error, path, input->line_number, start + 1,
                                "value %s in column %zu is beyond the float range (+-3.4e38)",
                                shown, j + 1);
    else
      knnwb_formats_parse_error(error, path, input->line_number, start + 1,
                                "%s in column %zu is not a number", shown, j + 1);
    return FALSE;
  }
  while (i < length && knnwb_cibm_is_space(line[i]))
    i++;
  if (i < length) {
    knnwb_formats_parse_error(error, path, input->line_number, i + 1,
                              "the row has more than the %zu value%s the dimensions line declares",
                              m, KNNWB_PLURAL(m));
    return FALSE;
  }
  return TRUE;
}

/* Reads the line after a <SamplesNames>/<SamplesClasses> tag: exactly m names. */
static gboolean knnwb_cibm_names(KnnwbTextInput *input, const char *tag, size_t m,
                                 GPtrArray **names, GError **error)
{
  const char *line;
  size_t length;
  size_t tag_line = input->line_number;
  int got = knnwb_cibm_next_line(input, &line, &length, error);
  if (got < 0)
    return FALSE;
  if (got == 0 || knnwb_cibm_starts_tag(line, length)) {
    knnwb_formats_parse_error(error, input->path, got == 0 ? tag_line : input->line_number, 0,
                              "%s needs a line of %zu name%s after it", tag, m, KNNWB_PLURAL(m));
    return FALSE;
  }
  g_autoptr(GArray) offsets = g_array_new(FALSE, FALSE, sizeof(size_t));
  knnwb_cibm_tokens(line, length, offsets);
  size_t count = offsets->len / 2;
  if (count != m) {
    knnwb_formats_parse_error(error, input->path, input->line_number, 0,
                              "%s lists %zu name%s, the dimensions line declares %zu column%s", tag,
                              count, KNNWB_PLURAL(count), m, KNNWB_PLURAL(m));
    return FALSE;
  }
  *names = g_ptr_array_new_with_free_func(g_free);
  for (size_t t = 0; t < count; t++) {
    size_t start = g_array_index(offsets, size_t, 2 * t);
    size_t end = g_array_index(offsets, size_t, 2 * t + 1);
    if (!knnwb_cibm_check_text(input->path, input->line_number, line, start, end, error))
      return FALSE;
    g_ptr_array_add(*names, g_strndup(line + start, end - start));
  }
  return TRUE;
}

/* <MicroarrayData> and the dimensions line `n m`, checked against the file's size. */
static gboolean knnwb_cibm_read_dimensions(KnnwbTextInput *input, const char *path, size_t *n,
                                           size_t *m, GError **error)
{
  g_autoptr(GArray) offsets = g_array_new(FALSE, FALSE, sizeof(size_t));
  const char *line;
  size_t length;
  int got = knnwb_cibm_next_line(input, &line, &length, error);
  if (got < 0)
    return FALSE;
  if (got == 0 || !knnwb_cibm_is_tag(line, length, "<MicroarrayData>")) {
    knnwb_formats_parse_error(error, path, MAX(input->line_number, 1), got == 0 ? 0 : 1,
                              got == 0
                                  ? "the file is empty (a CIBM file starts with "
                                    "<MicroarrayData>)"
                                  : "expected <MicroarrayData> (the CIBM format's first line)");
    return FALSE;
  }
  got = knnwb_cibm_next_line(input, &line, &length, error);
  if (got < 0)
    return FALSE;
  if (got > 0)
    knnwb_cibm_tokens(line, length, offsets);
  if (got == 0 || offsets->len != 4 ||
      !knnwb_cibm_parse_size(line + g_array_index(offsets, size_t, 0),
                             g_array_index(offsets, size_t, 1) - g_array_index(offsets, size_t, 0),
                             n) ||
      !knnwb_cibm_parse_size(line + g_array_index(offsets, size_t, 2),
                             g_array_index(offsets, size_t, 3) - g_array_index(offsets, size_t, 2),
                             m)) {
    knnwb_formats_parse_error(error, path, input->line_number + (got == 0), got == 0 ? 0 : 1,
                              "expected the dimensions line: rows and columns (`n m`)");
    return FALSE;
  }
  size_t dims_line = input->line_number;
  size_t total, minimum_bytes;
  if (*n == 0 || *m == 0) {
    knnwb_formats_parse_error(error, path, dims_line, 1, "the dimensions %zu x %zu hold no values",
                              *n, *m);
    return FALSE;
  }
  if (!knnwb_size_multiply(*n, *m, &total) || !knnwb_size_multiply(total, 2, &minimum_bytes) ||
      (input->size_bound > 0 && minimum_bytes > input->size_bound)) {
    knnwb_formats_parse_error(error, path, dims_line, 1,
                              "the dimensions %zu x %zu cannot fit in this file (%llu bytes%s)", *n,
                              *m, (unsigned long long)input->size_bound,
                              input->gzip ? " at most, decompressed" : "");
    return FALSE;
  }
  return TRUE;
}

/* The n data rows into builder (m values each). */
static gboolean knnwb_cibm_read_rows(KnnwbTextInput *input, const char *path,
                                     const KnnwbReadOptions *options, size_t n, size_t m,
                                     size_t dims_line, KnnwbMatrixBuilder *builder,
                                     KnnwbReadInfo *info, GError **error)
{
  const char *line;
  size_t length;
  for (size_t read_rows = 0; read_rows < n; read_rows++) {
    int got = knnwb_cibm_next_line(input, &line, &length, error);
    if (got < 0)
      return FALSE;
    if (got == 0 || knnwb_cibm_starts_tag(line, length)) {
      knnwb_formats_parse_error(error, path, input->line_number, 0,
                                "%s after %zu data rows; the dimensions line (line %zu) declares "
                                "%zu",
                                got == 0 ? "the file ends" : "a tag", read_rows, dims_line, n);
      return FALSE;
    }
    float *row = knnwb_matrix_builder_next_row(builder, error);
    if (row == NULL)
      return FALSE;
    size_t label_start, label_end;
    gboolean missing = FALSE;
    if (!knnwb_cibm_row(input, line, length, m, options->missing, row, &label_start, &label_end,
                        &missing, error))
      return FALSE;
    if (missing) {
      if (info->n_dropped_rows++ == 0)
        info->first_dropped_line = input->line_number;
      knnwb_matrix_builder_commit_absent_row(builder, line + label_start, label_end - label_start);
      continue;
    }
    knnwb_cibm_exact_row(line, length, label_end, m, knnwb_matrix_builder_exact_row(builder));
    knnwb_matrix_builder_commit_row(builder, line + label_start, label_end - label_start);
  }
  return TRUE;
}

/* After the rows: <SamplesNames> and <SamplesClasses> (optional, in that order), <EndOfFile>, and
 * nothing after it. */
static gboolean knnwb_cibm_read_trailer(KnnwbTextInput *input, const char *path, size_t n, size_t m,
                                        size_t dims_line, KnnwbMatrixBuilder *builder,
                                        GError **error)
{
  const char *line;
  size_t length;
  int got;
  gboolean names_seen = FALSE, classes_seen = FALSE;
  for (;;) {
    got = knnwb_cibm_next_line(input, &line, &length, error);
    if (got < 0)
      return FALSE;
    if (got == 0) {
      knnwb_formats_parse_error(error, path, input->line_number, 0,
                                "the file ends without <EndOfFile> (truncated?)");
      return FALSE;
    }
    if (knnwb_cibm_is_tag(line, length, "<EndOfFile>"))
      break;
    if (!names_seen && !classes_seen && knnwb_cibm_is_tag(line, length, "<SamplesNames>")) {
      names_seen = TRUE;
      if (!knnwb_cibm_names(input, "<SamplesNames>", m, &builder->col_labels, error))
        return FALSE;
      continue;
    }
    if (!classes_seen && knnwb_cibm_is_tag(line, length, "<SamplesClasses>")) {
      classes_seen = TRUE;
      if (!knnwb_cibm_names(input, "<SamplesClasses>", m, &builder->col_classes, error))
        return FALSE;
      continue;
    }
    if (knnwb_cibm_starts_tag(line, length))
      knnwb_formats_parse_error(error, path, input->line_number, 1,
                                "unexpected tag here (expected <SamplesNames>, <SamplesClasses> "
                                "or <EndOfFile>, in that order)");
    else
      knnwb_formats_parse_error(error, path, input->line_number, 1,
                                "more data rows than the %zu the dimensions line (line %zu) "
                                "declares",
                                n, dims_line);
    return FALSE;
  }
  got = knnwb_cibm_next_line(input, &line, &length, error);
  if (got > 0)
    knnwb_formats_parse_error(error, path, input->line_number, 1, "text after <EndOfFile>");
  return got == 0;
}

gboolean knnwb_formats_read_cibm(const char *path, const KnnwbReadOptions *options,
                                 KnnwbMatrix **out, KnnwbReadInfo *info, GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, path, error))
    return FALSE;
  knnwb_text_input_watch(&input, options);
  gboolean ok = FALSE;
  KnnwbMatrixBuilder builder = {0};
  size_t n = 0, m = 0;
  if (!knnwb_cibm_read_dimensions(&input, path, &n, &m, error))
    goto out;
  size_t dims_line = input.line_number;
  knnwb_matrix_builder_init(&builder, m, TRUE);
  if (options->rank_rows)
    knnwb_matrix_builder_keep_ranks(&builder, options->transpose);
  if (!knnwb_matrix_builder_reserve(&builder, n, error) ||
      !knnwb_cibm_read_rows(&input, path, options, n, m, dims_line, &builder, info, error) ||
      !knnwb_cibm_read_trailer(&input, path, n, m, dims_line, &builder, error))
    goto out;
  ok = knnwb_matrix_builder_finish_rows(&builder, path, input.line_number, info, out, error);
out:
  knnwb_matrix_builder_clear(&builder);
  knnwb_text_input_close(&input);
  return ok;
}
