/* Growing a matrix row by row while a file streams by. */
#include "io.h"

#include <stdlib.h>
#include <string.h>

void knnwb_matrix_builder_init(KnnwbMatrixBuilder *builder, size_t n_cols, gboolean row_labels)
{
  memset(builder, 0, sizeof *builder);
  builder->n_cols = n_cols;
  if (row_labels) {
    builder->labels_chunk = g_string_chunk_new(1 << 20);
    builder->row_labels = g_ptr_array_new();
  }
}

gboolean knnwb_matrix_builder_reserve(KnnwbMatrixBuilder *builder, size_t rows, GError **error)
{
  if (rows <= builder->capacity_rows)
    return TRUE;
  size_t row_bytes, bytes;
  if (!knnwb_size_multiply(builder->n_cols, sizeof(float), &row_bytes) ||
      !knnwb_size_multiply(rows, MAX(row_bytes, 1), &bytes)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%zu x %zu floats overflow the address space", rows, builder->n_cols);
    return FALSE;
  }
  /* realloc, not g_realloc: large blocks move with mremap (no copy, no double peak), and an
   * allocation failure must become an error, not an abort. */
  float *values = realloc(builder->values, bytes);
  if (values == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate %zu bytes for %zu x %zu values", bytes, rows, builder->n_cols);
    return FALSE;
  }
  builder->values = values;
  builder->capacity_rows = rows;
  return TRUE;
}

float *knnwb_matrix_builder_next_row(KnnwbMatrixBuilder *builder, GError **error)
{
  if (builder->n_rows == builder->capacity_rows) {
    size_t grown = builder->capacity_rows + builder->capacity_rows / 2 + 16;
    if (grown < builder->capacity_rows)
      grown = SIZE_MAX;
    if (!knnwb_matrix_builder_reserve(builder, grown, error))
      return NULL;
  }
  return builder->values + builder->n_rows * builder->n_cols;
}

void knnwb_matrix_builder_commit_row(KnnwbMatrixBuilder *builder, const char *label,
                                     size_t label_length)
{
  if (builder->row_labels != NULL)
    g_ptr_array_add(builder->row_labels,
                    g_string_chunk_insert_len(builder->labels_chunk, label ? label : "",
                                              label ? (gssize)label_length : 0));
  builder->n_rows++;
}

void knnwb_matrix_builder_commit_absent_row(KnnwbMatrixBuilder *builder, const char *label,
                                            size_t label_length)
{
  memset(builder->values + builder->n_rows * builder->n_cols, 0, builder->n_cols * sizeof(float));
  if (builder->absent_rows == NULL)
    builder->absent_rows = g_array_new(FALSE, FALSE, sizeof(size_t));
  g_array_append_val(builder->absent_rows, builder->n_rows);
  knnwb_matrix_builder_commit_row(builder, label, label_length);
}

static void knnwb_matrix_builder_free_values(void *values, size_t n_bytes, void *data)
{
  (void)n_bytes;
  (void)data;
  free(values);
}

KnnwbMatrix *knnwb_matrix_builder_finish(KnnwbMatrixBuilder *builder, GError **error)
{
  size_t n = builder->n_rows;
  size_t bytes = n * builder->n_cols * sizeof(float); /* <= the reserved size: no overflow */
  float *values = builder->values;
  if (bytes == 0) {
    free(values);
    values = malloc(sizeof(float)); /* a valid pointer even for an empty matrix */
  } else if (builder->capacity_rows > n) {
    float *shrunk = realloc(values, bytes);
    if (shrunk != NULL)
      values = shrunk;
  }
  builder->values = NULL;
  builder->capacity_rows = 0;
  if (values == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "out of memory");
    return NULL;
  }
  KnnwbMatrix *matrix =
      knnwb_matrix_new_wrapped(n, builder->n_cols, values, knnwb_matrix_builder_free_values, NULL);
  if (builder->row_labels != NULL)
    for (size_t i = 0; i < n; i++)
      knnwb_matrix_set_row_label(matrix, i, g_ptr_array_index(builder->row_labels, i));
  if (builder->col_labels != NULL && builder->col_labels->len == builder->n_cols)
    for (size_t j = 0; j < builder->n_cols; j++)
      knnwb_matrix_set_col_label(matrix, j, g_ptr_array_index(builder->col_labels, j));
  if (builder->col_classes != NULL && builder->col_classes->len == builder->n_cols)
    for (size_t j = 0; j < builder->n_cols; j++)
      knnwb_matrix_set_col_class(matrix, j, g_ptr_array_index(builder->col_classes, j));
  for (guint a = 0; builder->absent_rows != NULL && a < builder->absent_rows->len; a++)
    knnwb_matrix_set_row_absent(matrix, g_array_index(builder->absent_rows, size_t, a));
  knnwb_matrix_builder_clear(builder);
  return matrix;
}

void knnwb_matrix_builder_clear(KnnwbMatrixBuilder *builder)
{
  free(builder->values);
  builder->values = NULL;
  if (builder->labels_chunk != NULL)
    g_string_chunk_free(builder->labels_chunk);
  builder->labels_chunk = NULL;
  if (builder->row_labels != NULL)
    g_ptr_array_free(builder->row_labels, TRUE);
  builder->row_labels = NULL;
  if (builder->col_labels != NULL)
    g_ptr_array_free(builder->col_labels, TRUE);
  builder->col_labels = NULL;
  if (builder->col_classes != NULL)
    g_ptr_array_free(builder->col_classes, TRUE);
  builder->col_classes = NULL;
  if (builder->absent_rows != NULL)
    g_array_free(builder->absent_rows, TRUE);
  builder->absent_rows = NULL;
  builder->n_rows = 0;
  builder->capacity_rows = 0;
}

gboolean knnwb_matrix_builder_finish_rows(KnnwbMatrixBuilder *builder, const char *path, size_t line,
                                          const KnnwbReadInfo *info, KnnwbMatrix **out,
                                          GError **error)
{
  size_t n_absent = builder->absent_rows ? builder->absent_rows->len : 0;
  if (builder->n_rows == n_absent) {
    knnwb_formats_parse_error(error, path, line, 0,
                              "no data rows are left (%zu with missing values)",
                              info->n_dropped_rows);
    return FALSE;
  }
  *out = knnwb_matrix_builder_finish(builder, error);
  return *out != NULL;
}
