/* The labels side file (`--labels FILE`, pipeline `labels`): one label per row of the file as
 * stored, for any input format. */
#include "read_internal.h"

gboolean knnwb_formats_read_labels_file(const char *labels_path, size_t count, KnnwbMatrix *matrix,
                                        gboolean as_columns, GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, labels_path, error))
    return FALSE;
  const char *line;
  size_t length;
  size_t n_lines = 0, last_nonblank = 0;
  int got;
  gboolean ok = FALSE;
  /* installed only when the whole file is right: on failure the matrix keeps the labels it had */
  g_autofree char **labels = g_new0(char *, MAX(count, 1));
  if (matrix->strings == NULL)
    matrix->strings = g_string_chunk_new(1 << 16);
  /* Each label goes straight into the matrix's string chunk (one copy: a side file of a million
   * rows and more is the metafeatures' normal output); lines past count are only counted, so
   * that the message says how many labels there were. */
  while ((got = knnwb_text_input_next_line(&input, &line, &length, error)) > 0) {
    const char *invalid;
    if (!g_utf8_validate_len(line, length, &invalid)) {
      knnwb_formats_parse_error(error, labels_path, input.line_number, (size_t)(invalid - line) + 1,
                                *invalid == '\0' ? "NUL byte in a label"
                                                 : "a label is not valid UTF-8");
      goto out;
    }
    if (n_lines < count)
      labels[n_lines] = g_string_chunk_insert_len(matrix->strings, line, (gssize)length);
    n_lines++;
    if (length > 0)
      last_nonblank = n_lines;
  }
  if (got < 0)
    goto out;
  if (last_nonblank != count) { /* trailing blank lines are not labels */
    knnwb_formats_parse_error(error, labels_path, input.line_number, 0,
                              "%zu label%s for %zu row%s (one label per line)", last_nonblank,
                              KNNWB_PLURAL(last_nonblank), count, KNNWB_PLURAL(count));
    goto out;
  }
  char ***slot = as_columns ? &matrix->col_labels : &matrix->row_labels;
  g_free(*slot);
  *slot = g_steal_pointer(&labels);
  ok = TRUE;
out:
  knnwb_text_input_close(&input);
  return ok;
}
