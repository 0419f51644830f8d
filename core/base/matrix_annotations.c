/* Named per-row and per-column annotations of a matrix (GEO sample characteristics and the like).
 * Few keys (tens), so a linear search by name is enough. */
#include <string.h>
#include <knnwb/matrix.h>
#include "base/base_internal.h"

typedef struct {
  char *key;     /* in the matrix's string chunk */
  char **values; /* n_rows or n_cols entries, strings in the chunk, NULL where unknown */
} KnnwbMatrixAnnotation;

static size_t knnwb_matrix_axis_length(const KnnwbMatrix *matrix, KnnwbMatrixAxis axis)
{
  return axis == KNNWB_MATRIX_ROWS ? matrix->n_rows : matrix->n_cols;
}

static void knnwb_matrix_annotation_free(gpointer data)
{
  KnnwbMatrixAnnotation *annotation = data;
  g_free(annotation->values);
  g_free(annotation);
}

static KnnwbMatrixAnnotation *knnwb_matrix_annotation_find(const KnnwbMatrix *matrix,
                                                           KnnwbMatrixAxis axis, const char *key)
{
  GPtrArray *list = matrix->annotations[axis];
  for (guint i = 0; list != NULL && i < list->len; i++) {
    KnnwbMatrixAnnotation *annotation = g_ptr_array_index(list, i);
    if (strcmp(annotation->key, key) == 0)
      return annotation;
  }
  return NULL;
}

void knnwb_matrix_set_annotation(KnnwbMatrix *matrix, KnnwbMatrixAxis axis, const char *key,
                                 size_t index, const char *value)
{
  g_return_if_fail(matrix != NULL && key != NULL &&
                   (axis == KNNWB_MATRIX_ROWS || axis == KNNWB_MATRIX_COLUMNS));
  size_t length = knnwb_matrix_axis_length(matrix, axis);
  g_return_if_fail(index < length);
  if (matrix->strings == NULL)
    matrix->strings = g_string_chunk_new(4096);
  KnnwbMatrixAnnotation *annotation = knnwb_matrix_annotation_find(matrix, axis, key);
  if (annotation == NULL) {
    if (matrix->annotations[axis] == NULL)
      matrix->annotations[axis] = g_ptr_array_new_with_free_func(knnwb_matrix_annotation_free);
    annotation = g_new0(KnnwbMatrixAnnotation, 1);
    annotation->key = g_string_chunk_insert_const(matrix->strings, key);
    annotation->values = g_new0(char *, length);
    g_ptr_array_add(matrix->annotations[axis], annotation);
  }
  annotation->values[index] = value ? g_string_chunk_insert(matrix->strings, value) : NULL;
}

const char *const *knnwb_matrix_annotation(const KnnwbMatrix *matrix, KnnwbMatrixAxis axis,
                                           const char *key)
{
  g_return_val_if_fail(matrix != NULL && key != NULL, NULL);
  if (axis != KNNWB_MATRIX_ROWS && axis != KNNWB_MATRIX_COLUMNS)
    return NULL;
  KnnwbMatrixAnnotation *annotation = knnwb_matrix_annotation_find(matrix, axis, key);
  return annotation ? (const char *const *)annotation->values : NULL;
}

const char **knnwb_matrix_annotation_keys(const KnnwbMatrix *matrix, KnnwbMatrixAxis axis)
{
  GPtrArray *list = (axis == KNNWB_MATRIX_ROWS || axis == KNNWB_MATRIX_COLUMNS)
                        ? matrix->annotations[axis]
                        : NULL;
  guint n = list ? list->len : 0;
  const char **keys = g_new0(const char *, n + 1);
  for (guint i = 0; i < n; i++)
    keys[i] = ((KnnwbMatrixAnnotation *)g_ptr_array_index(list, i))->key;
  return keys;
}

void knnwb_matrix_annotations_clear(KnnwbMatrix *matrix)
{
  for (int axis = 0; axis < 2; axis++)
    g_clear_pointer(&matrix->annotations[axis], g_ptr_array_unref);
}

void knnwb_matrix_annotations_copy(KnnwbMatrix *to, KnnwbMatrixAxis to_axis,
                                   const KnnwbMatrix *from, KnnwbMatrixAxis from_axis,
                                   const gboolean *keep)
{
  GPtrArray *list = from->annotations[from_axis];
  size_t from_length = knnwb_matrix_axis_length(from, from_axis);
  for (guint a = 0; list != NULL && a < list->len; a++) {
    const KnnwbMatrixAnnotation *annotation = g_ptr_array_index(list, a);
    size_t r = 0;
    for (size_t i = 0; i < from_length; i++) {
      if (keep != NULL && !keep[i])
        continue;
      knnwb_matrix_set_annotation(to, to_axis, annotation->key, r++, annotation->values[i]);
    }
  }
}

void knnwb_matrix_annotations_grow_rows(KnnwbMatrix *matrix)
{
  GPtrArray *list = matrix->annotations[KNNWB_MATRIX_ROWS];
  for (guint a = 0; list != NULL && a < list->len; a++) {
    KnnwbMatrixAnnotation *annotation = g_ptr_array_index(list, a);
    annotation->values = g_renew(char *, annotation->values, matrix->n_rows + 1);
    annotation->values[matrix->n_rows] = NULL;
  }
}
