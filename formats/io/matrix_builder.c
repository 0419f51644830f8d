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

void knnwb_matrix_builder_keep_ranks(KnnwbMatrixBuilder *builder, gboolean columns)
{
  builder->rank_axis = columns ? 2 : 1;
  if (!columns)
    builder->exact_row = g_new0(double, MAX(builder->n_cols, 1));
}

double *knnwb_matrix_builder_exact_row(KnnwbMatrixBuilder *builder)
{
  if (builder->rank_axis == 1)
    return builder->exact_row;
  if (builder->rank_axis == 2)
    return builder->exact + builder->n_rows * builder->n_cols;
  return NULL;
}

typedef struct {
  double value;
  size_t position;
} KnnwbExactItem;

static int knnwb_exact_item_compare(const void *a, const void *b)
{
  const KnnwbExactItem *x = a, *y = b;
  if (x->value != y->value)
    return x->value < y->value ? -1 : 1;
  return x->position < y->position ? -1 : (x->position > y->position);
}

/* Average ranks (1-based) of count values at values[t * stride], into ranks[t * out_stride]:
 * the engine's rule (core/engine/metric.c) on doubles. items: count scratch entries. */
static void knnwb_matrix_builder_rank(const double *values, size_t stride, size_t count,
                                      float *ranks, size_t out_stride, KnnwbExactItem *items)
{
  for (size_t t = 0; t < count; t++)
    items[t] = (KnnwbExactItem){values[t * stride], t};
  qsort(items, count, sizeof *items, knnwb_exact_item_compare);
  for (size_t start = 0; start < count;) {
    size_t end = start + 1;
    while (end < count && items[end].value == items[start].value)
      end++;
    float average = (float)((double)(start + 1 + end) / 2.0);
    for (size_t t = start; t < end; t++)
      ranks[items[t].position * out_stride] = average;
    start = end;
  }
}

/* Grows a rank-side array (ranks or exact) to rows rows of element bytes each. */
static gboolean knnwb_matrix_builder_grow_side(void **array, size_t rows, size_t n_cols,
                                               size_t element, GError **error)
{
  size_t bytes;
  if (!knnwb_size_multiply(rows, MAX(n_cols, 1) * element, &bytes)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%zu x %zu ranks overflow the address space", rows, n_cols);
    return FALSE;
  }
  void *grown = realloc(*array, bytes);
  if (grown == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate %zu bytes for the ranks of %zu x %zu values", bytes, rows, n_cols);
    return FALSE;
  }
  *array = grown;
  return TRUE;
}

gboolean knnwb_matrix_builder_reserve(KnnwbMatrixBuilder *builder, size_t rows, GError **error)
{
  if (rows > builder->capacity_rows && builder->rank_axis == 1 &&
      !knnwb_matrix_builder_grow_side((void **)&builder->ranks, rows, builder->n_cols,
                                      sizeof(float), error))
    return FALSE;
  if (rows > builder->capacity_rows && builder->rank_axis == 2 &&
      !knnwb_matrix_builder_grow_side((void **)&builder->exact, rows, builder->n_cols,
                                      sizeof(double), error))
    return FALSE;
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
  if (builder->rank_axis == 1 && builder->n_cols > 0) {
    KnnwbExactItem *items = g_new(KnnwbExactItem, builder->n_cols);
    knnwb_matrix_builder_rank(builder->exact_row, 1, builder->n_cols,
                              builder->ranks + builder->n_rows * builder->n_cols, 1, items);
    g_free(items);
  }
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
  double *exact = knnwb_matrix_builder_exact_row(builder);
  if (exact != NULL)
    memset(exact, 0, builder->n_cols * sizeof(double));
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

/* A transposed read's ranks: each column's present rows ranked, laid out as the rows of the
 * transposed matrix that the absent rows will have left (read_matrix.c drops them, then
 * transposes, keeping these ranks). */
static gboolean knnwb_matrix_builder_rank_columns(KnnwbMatrixBuilder *builder, KnnwbMatrix *matrix,
                                                  GError **error)
{
  const size_t n = builder->n_rows, d = builder->n_cols;
  size_t present = n - (builder->absent_rows ? builder->absent_rows->len : 0);
  float *ranks =
      knnwb_try_new_array(MAX(present * d, 1), sizeof(float), "the column ranks", present, error);
  double *column = ranks ? knnwb_try_new_array(MAX(present, 1), sizeof(double), "the column ranks",
                                               present, error)
                         : NULL;
  KnnwbExactItem *items = column ? knnwb_try_new_array(MAX(present, 1), sizeof(KnnwbExactItem),
                                                       "the column ranks", present, error)
                                 : NULL;
  gboolean ok = ranks != NULL && column != NULL && items != NULL;
  for (size_t j = 0; ok && j < d; j++) {
    size_t t = 0;
    for (size_t i = 0; i < n; i++)
      if (!knnwb_matrix_row_is_absent(matrix, i))
        column[t++] = builder->exact[i * d + j];
    knnwb_matrix_builder_rank(column, 1, present, ranks + j * present, 1, items);
  }
  g_free(column);
  g_free(items);
  if (!ok) {
    g_free(ranks);
    return FALSE;
  }
  knnwb_matrix_take_row_ranks(matrix, ranks);
  return TRUE;
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
  if (builder->rank_axis == 1) {
    knnwb_matrix_take_row_ranks(matrix, builder->ranks);
    builder->ranks = NULL;
  } else if (builder->rank_axis == 2 &&
             !knnwb_matrix_builder_rank_columns(builder, matrix, error)) {
    knnwb_matrix_free(matrix);
    knnwb_matrix_builder_clear(builder);
    return NULL;
  }
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
  free(builder->ranks);
  builder->ranks = NULL;
  free(builder->exact);
  builder->exact = NULL;
  g_free(builder->exact_row);
  builder->exact_row = NULL;
  builder->rank_axis = 0;
  builder->n_rows = 0;
  builder->capacity_rows = 0;
}

gboolean knnwb_matrix_builder_finish_rows(KnnwbMatrixBuilder *builder, const char *path,
                                          size_t line, const KnnwbReadInfo *info, KnnwbMatrix **out,
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
