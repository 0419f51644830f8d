/* A row appended to a matrix (the phenotype probe's row) with everything kept per row: labels,
 * classes, annotations, absent marks and the ranks a reader kept. Each per-row array must grow
 * with the values: one left at n_rows entries would be read past its end by whoever walks the
 * new row (the spearman preparation, a writer of annotations). */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/matrix.h>
#include "base/base_internal.h"

/* The per-row arrays of matrix grown by one entry for row n_rows, before n_rows grows. */
static void knnwb_matrix_grow_row_arrays(KnnwbMatrix *matrix, const float *values)
{
  const size_t n = matrix->n_rows, d = matrix->n_cols;
  if (matrix->row_labels != NULL) {
    matrix->row_labels = g_renew(char *, matrix->row_labels, n + 1);
    matrix->row_labels[n] = NULL;
  }
  if (matrix->row_classes != NULL) {
    matrix->row_classes = g_renew(char *, matrix->row_classes, n + 1);
    matrix->row_classes[n] = NULL;
  }
  if (matrix->absent_rows != NULL) {
    matrix->absent_rows = g_renew(unsigned char, matrix->absent_rows, n + 1);
    matrix->absent_rows[n] = 0;
  }
  if (matrix->row_ranks != NULL && d > 0) {
    matrix->row_ranks = g_renew(float, matrix->row_ranks, (n + 1) * d);
    knnwb_row_ranks(values, d, matrix->row_ranks + n * d);
  }
  knnwb_matrix_annotations_grow_rows(matrix);
}

/* Values the matrix does not own (a reader's mapping, a block of a whole matrix) as a copy it
 * owns, one row longer; the old matrix's values are released with it. */
static KnnwbMatrix *knnwb_matrix_copy_longer(const KnnwbMatrix *old, GError **error)
{
  const size_t n = old->n_rows, d = old->n_cols;
  KnnwbMatrix *copy = knnwb_matrix_new(n + 1, d, error);
  if (copy == NULL)
    return NULL;
  if (n * d > 0)
    memcpy(copy->values, old->values, n * d * sizeof(float));
  for (size_t i = 0; i < n; i++) {
    if (old->row_labels)
      knnwb_matrix_set_row_label(copy, i, old->row_labels[i]);
    if (old->row_classes)
      knnwb_matrix_set_row_class(copy, i, old->row_classes[i]);
    if (knnwb_matrix_row_is_absent(old, i))
      knnwb_matrix_set_row_absent(copy, i);
  }
  for (size_t j = 0; j < d; j++) {
    if (old->col_labels)
      knnwb_matrix_set_col_label(copy, j, old->col_labels[j]);
    if (old->col_classes)
      knnwb_matrix_set_col_class(copy, j, old->col_classes[j]);
  }
  knnwb_matrix_annotations_copy(copy, KNNWB_MATRIX_ROWS, old, KNNWB_MATRIX_ROWS, NULL);
  knnwb_matrix_annotations_copy(copy, KNNWB_MATRIX_COLUMNS, old, KNNWB_MATRIX_COLUMNS, NULL);
  if (old->row_ranks != NULL && d > 0) {
    float *ranks = g_new(float, (n + 1) * d);
    memcpy(ranks, old->row_ranks, n * d * sizeof(float));
    knnwb_matrix_take_row_ranks(copy, ranks);
  }
  /* the copy has n + 1 rows: its per-row arrays are already that long (and the new row's ranks
   * are filled by the caller) */
  return copy;
}

gboolean knnwb_matrix_append_row(KnnwbMatrix **matrix, const float *values, GError **error)
{
  g_return_val_if_fail(matrix != NULL && *matrix != NULL && values != NULL, FALSE);
  KnnwbMatrix *old = *matrix;
  const size_t n = old->n_rows, d = old->n_cols;
  size_t bytes;
  if (n == SIZE_MAX || !knnwb_size_multiply(n + 1, d, &bytes) ||
      !knnwb_size_multiply(bytes, sizeof(float), &bytes)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "a %zu x %zu matrix is too large", n + 1,
                d);
    return FALSE;
  }
  if (old->values_destroy == NULL && !old->values_borrowed) {
    /* Owned (malloc'd) values grow in place: glibc remaps large blocks instead of copying. */
    float *grown = g_try_realloc(old->values, MAX(bytes, (size_t)1));
    if (grown == NULL) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "cannot grow the matrix to %zu bytes for a row more", bytes);
      return FALSE;
    }
    old->values = grown;
    knnwb_matrix_grow_row_arrays(old, values);
    old->n_rows = n + 1;
  } else {
    KnnwbMatrix *copy = knnwb_matrix_copy_longer(old, error);
    if (copy == NULL)
      return FALSE;
    if (copy->row_ranks != NULL && d > 0)
      knnwb_row_ranks(values, d, copy->row_ranks + n * d);
    knnwb_matrix_free(old);
    *matrix = copy;
  }
  if (d > 0)
    memcpy((*matrix)->values + n * d, values, d * sizeof(float));
  return TRUE;
}
