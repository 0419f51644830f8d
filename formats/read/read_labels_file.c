/* The labels side file (`--labels FILE`, pipeline `labels`): one label per row of the file as
 * stored, for any input format. */
#include "read_internal.h"

gboolean knnwb_formats_read_labels_file(const char *labels_path, size_t count, KnnwbMatrix *matrix,
                                        gboolean as_columns, GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, labels_path, error))
    return FALSE;
  g_autoptr(GPtrArray) labels = g_ptr_array_new_with_free_func(g_free);
  const char *line;
  size_t length;
  size_t last_nonblank = 0;
  int got;
  gboolean ok = FALSE;
  while ((got = knnwb_text_input_next_line(&input, &line, &length, error)) > 0) {
    const char *invalid;
    if (!g_utf8_validate_len(line, length, &invalid)) {
      knnwb_formats_parse_error(error, labels_path, input.line_number, (size_t)(invalid - line) + 1,
                                *invalid == '\0' ? "NUL byte in a label"
                                                 : "a label is not valid UTF-8");
      goto out;
    }
    g_ptr_array_add(labels, g_strndup(line, length));
    if (length > 0)
      last_nonblank = labels->len;
  }
  if (got < 0)
    goto out;
  g_ptr_array_set_size(labels, (guint)last_nonblank); /* trailing blank lines */
  if (labels->len != count) {
    knnwb_formats_parse_error(error, labels_path, input.line_number, 0,
                              "%u label%s for %zu row%s (one label per line)", labels->len,
                              KNNWB_PLURAL(labels->len), count, KNNWB_PLURAL(count));
    goto out;
  }
  for (size_t i = 0; i < count; i++) {
    if (as_columns)
      knnwb_matrix_set_col_label(matrix, i, g_ptr_array_index(labels, i));
    else
      knnwb_matrix_set_row_label(matrix, i, g_ptr_array_index(labels, i));
  }
  ok = TRUE;
out:
  knnwb_text_input_close(&input);
  return ok;
}
