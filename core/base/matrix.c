/* The dense float32 matrix with labels. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/matrix.h>
#include <knnwb/parallel.h>
#include "base/base_internal.h"

static gboolean knnwb_matrix_bytes(size_t n_rows, size_t n_cols, size_t *bytes, GError **error)
{
  size_t cells;
  if (!knnwb_size_multiply(n_rows, n_cols, &cells) ||
      !knnwb_size_multiply(cells, sizeof(float), bytes)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "a %zu x %zu matrix is too large for this machine's address space", n_rows, n_cols);
    return FALSE;
  }
  return TRUE;
}

KnnwbMatrix *knnwb_matrix_new(size_t n_rows, size_t n_cols, GError **error)
{
  size_t bytes;
  if (!knnwb_matrix_bytes(n_rows, n_cols, &bytes, error))
    return NULL;
  /* g_try_malloc0 so a huge request is an error, not an abort. */
  float *values = bytes ? knnwb_memory_try_alloc(bytes, TRUE) : NULL;
  if (bytes && values == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate %zu bytes for a %zu x %zu matrix", bytes, n_rows, n_cols);
    return NULL;
  }
  KnnwbMatrix *matrix = g_new0(KnnwbMatrix, 1);
  matrix->n_rows = n_rows;
  matrix->n_cols = n_cols;
  matrix->values = values;
  return matrix;
}

KnnwbMatrix *knnwb_matrix_new_wrapped(size_t n_rows, size_t n_cols, float *values,
                                      void (*values_destroy)(void *, size_t, void *), void *data)
{
  KnnwbMatrix *matrix = g_new0(KnnwbMatrix, 1);
  matrix->n_rows = n_rows;
  matrix->n_cols = n_cols;
  matrix->values = values;
  matrix->values_destroy = values_destroy;
  matrix->values_destroy_data = data;
  matrix->values_borrowed = values_destroy == NULL;
  return matrix;
}

/* A block's values are its whole matrix's: freeing them frees the whole. */
static void knnwb_matrix_free_whole(void *values, size_t n_bytes, void *data)
{
  (void)values;
  (void)n_bytes;
  knnwb_matrix_free(data);
}

KnnwbMatrix *knnwb_matrix_new_block_of(KnnwbMatrix *whole, size_t first, size_t count)
{
  g_return_val_if_fail(whole != NULL && first + count <= whole->n_rows, NULL);
  KnnwbMatrix *block = knnwb_matrix_new_wrapped(
      count, whole->n_cols, whole->values + first * whole->n_cols, knnwb_matrix_free_whole, whole);
  block->whole_first = first;
  return block;
}

const KnnwbMatrix *knnwb_matrix_whole_of(const KnnwbMatrix *block, size_t *first)
{
  if (block == NULL || block->values_destroy != knnwb_matrix_free_whole)
    return NULL;
  *first = block->whole_first;
  return block->values_destroy_data;
}

void knnwb_matrix_free(KnnwbMatrix *matrix)
{
  if (matrix == NULL)
    return;
  if (matrix->values_destroy != NULL)
    matrix->values_destroy(matrix->values, matrix->n_rows * matrix->n_cols * sizeof(float),
                           matrix->values_destroy_data);
  else if (!matrix->values_borrowed)
    g_free(matrix->values);
  g_free(matrix->row_labels);
  g_free(matrix->col_labels);
  g_free(matrix->row_classes);
  g_free(matrix->col_classes);
  knnwb_matrix_annotations_clear(matrix);
  g_free(matrix->absent_rows);
  g_free(matrix->row_ranks);
  if (matrix->strings != NULL)
    g_string_chunk_free(matrix->strings);
  g_free(matrix);
}

void knnwb_matrix_release_values(KnnwbMatrix *matrix)
{
  if (matrix == NULL)
    return;
  g_clear_pointer(&matrix->row_ranks, g_free);
  if (matrix->values_destroy == knnwb_matrix_free_whole) {
    /* The block's rows are the whole's: the whole's values go, and the whole itself (its labels,
     * which callers borrow) stays until the block is freed. */
    knnwb_matrix_release_values(matrix->values_destroy_data);
  } else if (matrix->values_destroy != NULL) {
    if (matrix->values != NULL)
      matrix->values_destroy(matrix->values, matrix->n_rows * matrix->n_cols * sizeof(float),
                             matrix->values_destroy_data);
    matrix->values_destroy = NULL;
    matrix->values_destroy_data = NULL;
  } else if (!matrix->values_borrowed) {
    g_free(matrix->values);
  }
  matrix->values = NULL;
}

static void knnwb_matrix_set_string(KnnwbMatrix *matrix, char ***array, size_t length, size_t i,
                                    const char *label)
{
  g_return_if_fail(i < length);
  if (matrix->strings == NULL)
    matrix->strings = g_string_chunk_new(4096);
  if (*array == NULL)
    *array = g_new0(char *, length);
  (*array)[i] = label ? g_string_chunk_insert(matrix->strings, label) : NULL;
}

void knnwb_matrix_set_row_label(KnnwbMatrix *matrix, size_t i, const char *label)
{
  knnwb_matrix_set_string(matrix, &matrix->row_labels, matrix->n_rows, i, label);
}

void knnwb_matrix_set_col_label(KnnwbMatrix *matrix, size_t j, const char *label)
{
  knnwb_matrix_set_string(matrix, &matrix->col_labels, matrix->n_cols, j, label);
}

void knnwb_matrix_set_row_class(KnnwbMatrix *matrix, size_t i, const char *label)
{
  knnwb_matrix_set_string(matrix, &matrix->row_classes, matrix->n_rows, i, label);
}

void knnwb_matrix_set_col_class(KnnwbMatrix *matrix, size_t j, const char *label)
{
  knnwb_matrix_set_string(matrix, &matrix->col_classes, matrix->n_cols, j, label);
}

void knnwb_matrix_set_row_absent(KnnwbMatrix *matrix, size_t i)
{
  g_return_if_fail(i < matrix->n_rows);
  if (matrix->absent_rows == NULL)
    matrix->absent_rows = g_new0(unsigned char, matrix->n_rows);
  if (!matrix->absent_rows[i]) {
    matrix->absent_rows[i] = 1;
    matrix->n_absent_rows++;
  }
}

gboolean knnwb_matrix_row_is_absent(const KnnwbMatrix *matrix, size_t i)
{
  return matrix->absent_rows != NULL && i < matrix->n_rows && matrix->absent_rows[i];
}

const char *knnwb_matrix_row_label(const KnnwbMatrix *matrix, size_t i)
{
  if (matrix->row_labels == NULL || i >= matrix->n_rows)
    return NULL;
  return matrix->row_labels[i];
}

static void knnwb_matrix_copy_strings(KnnwbMatrix *to, char ***to_array, size_t length,
                                      char *const *from_array)
{
  if (from_array == NULL)
    return;
  for (size_t i = 0; i < length; i++)
    knnwb_matrix_set_string(to, to_array, length, i, from_array[i]);
}

KnnwbMatrix *knnwb_matrix_transpose(const KnnwbMatrix *matrix, GError **error)
{
  KnnwbMatrix *result = knnwb_matrix_new(matrix->n_cols, matrix->n_rows, error);
  if (result == NULL)
    return NULL;
  const size_t n = matrix->n_rows, d = matrix->n_cols;
  /* 32 x 32 blocks keep both the reads and the writes within cache lines. */
  enum { BLOCK = 32 };
  for (size_t i0 = 0; i0 < n; i0 += BLOCK)
    for (size_t j0 = 0; j0 < d; j0 += BLOCK) {
      size_t i1 = MIN(n, i0 + BLOCK), j1 = MIN(d, j0 + BLOCK);
      for (size_t i = i0; i < i1; i++)
        for (size_t j = j0; j < j1; j++)
          result->values[j * n + i] = matrix->values[i * d + j];
    }
  knnwb_matrix_copy_strings(result, &result->row_labels, d, matrix->col_labels);
  knnwb_matrix_copy_strings(result, &result->col_labels, n, matrix->row_labels);
  knnwb_matrix_copy_strings(result, &result->row_classes, d, matrix->col_classes);
  knnwb_matrix_copy_strings(result, &result->col_classes, n, matrix->row_classes);
  knnwb_matrix_annotations_copy(result, KNNWB_MATRIX_ROWS, matrix, KNNWB_MATRIX_COLUMNS, NULL);
  knnwb_matrix_annotations_copy(result, KNNWB_MATRIX_COLUMNS, matrix, KNNWB_MATRIX_ROWS, NULL);
  return result;
}

const float *knnwb_matrix_row_ranks(const KnnwbMatrix *matrix)
{
  return matrix->row_ranks;
}

void knnwb_matrix_take_row_ranks(KnnwbMatrix *matrix, float *ranks)
{
  g_free(matrix->row_ranks);
  matrix->row_ranks = ranks;
}

float *knnwb_matrix_steal_row_ranks(KnnwbMatrix *matrix)
{
  return g_steal_pointer(&matrix->row_ranks);
}

KnnwbMatrix *knnwb_matrix_select_rows(const KnnwbMatrix *matrix, const gboolean *keep,
                                      GError **error)
{
  size_t kept = 0;
  for (size_t i = 0; i < matrix->n_rows; i++)
    kept += keep[i] ? 1 : 0;
  KnnwbMatrix *result = knnwb_matrix_new(kept, matrix->n_cols, error);
  if (result == NULL)
    return NULL;
  const size_t d = matrix->n_cols;
  size_t r = 0;
  for (size_t i = 0; i < matrix->n_rows; i++) {
    if (!keep[i])
      continue;
    if (d > 0)
      memcpy(result->values + r * d, matrix->values + i * d, d * sizeof(float));
    if (matrix->row_labels != NULL)
      knnwb_matrix_set_row_label(result, r, matrix->row_labels[i]);
    if (matrix->row_classes != NULL)
      knnwb_matrix_set_row_class(result, r, matrix->row_classes[i]);
    if (knnwb_matrix_row_is_absent(matrix, i))
      knnwb_matrix_set_row_absent(result, r);
    if (matrix->row_ranks != NULL && d > 0) {
      if (result->row_ranks == NULL)
        result->row_ranks = g_new0(float, kept *d);
      memcpy(result->row_ranks + r * d, matrix->row_ranks + i * d, d * sizeof(float));
    }
    r++;
  }
  knnwb_matrix_copy_strings(result, &result->col_labels, d, matrix->col_labels);
  knnwb_matrix_copy_strings(result, &result->col_classes, d, matrix->col_classes);
  knnwb_matrix_annotations_copy(result, KNNWB_MATRIX_ROWS, matrix, KNNWB_MATRIX_ROWS, keep);
  knnwb_matrix_annotations_copy(result, KNNWB_MATRIX_COLUMNS, matrix, KNNWB_MATRIX_COLUMNS, NULL);
  return result;
}

typedef struct {
  const KnnwbMatrix *matrix;
  GMutex lock;
  size_t first_bad; /* lowest row found holding a NaN or an infinity, SIZE_MAX when none */
} KnnwbFiniteScan;

/* A value is not finite iff its exponent bits are all ones. An integer max over the exponent
 * fields vectorises (a float probe sum would be a serial dependency chain). */
gboolean knnwb_floats_finite(const float *values, size_t d)
{
  uint32_t largest = 0;
  for (size_t j = 0; j < d; j++) {
    uint32_t bits;
    memcpy(&bits, values + j, sizeof bits); /* well-defined type pun; compiles to a load */
    uint32_t exponent = bits & 0x7f800000u;
    largest = exponent > largest ? exponent : largest;
  }
  return largest != 0x7f800000u;
}

/* Rows [first, last) (knnwb_floats_finite each). */
static void knnwb_matrix_scan_finite(size_t first, size_t last, void *data)
{
  KnnwbFiniteScan *scan = data;
  const size_t d = scan->matrix->n_cols;
  for (size_t i = first; i < last; i++) {
    if (!knnwb_floats_finite(scan->matrix->values + i * d, d)) {
      g_mutex_lock(&scan->lock);
      scan->first_bad = MIN(scan->first_bad, i);
      g_mutex_unlock(&scan->lock);
      return; /* later rows of this chunk cannot be first */
    }
  }
}

/* Offsets the rows of a scan: parallel_for counts from 0. */
typedef struct {
  KnnwbFiniteScan *scan;
  size_t first;
} KnnwbFiniteRange;

static void knnwb_matrix_scan_finite_range(size_t first, size_t last, void *data)
{
  KnnwbFiniteRange *range = data;
  knnwb_matrix_scan_finite(range->first + first, range->first + last, range->scan);
}

gboolean knnwb_matrix_check_finite(const KnnwbMatrix *matrix, GError **error)
{
  return knnwb_matrix_check_finite_rows(matrix, 0, matrix->n_rows, 0, error);
}

gboolean knnwb_matrix_check_finite_rows(const KnnwbMatrix *matrix, size_t first, size_t last,
                                        size_t numbered_from, GError **error)
{
  const size_t d = matrix->n_cols;
  KnnwbFiniteScan scan = {.matrix = matrix, .first_bad = SIZE_MAX};
  KnnwbFiniteRange range = {&scan, first};
  g_mutex_init(&scan.lock);
  knnwb_parallel_for(0, last > first ? last - first : 0,
                     MAX((size_t)1, ((size_t)1 << 20) / MAX(d, (size_t)1)),
                     knnwb_matrix_scan_finite_range, &range);
  g_mutex_clear(&scan.lock);
  if (scan.first_bad == SIZE_MAX)
    return TRUE;
  const size_t i = scan.first_bad;
  const float *row = matrix->values + i * d;
  for (size_t j = 0; j < d; j++)
    if (!isfinite(row[j])) {
      const char *label = knnwb_matrix_row_label(matrix, i);
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                  "row %zu%s%s%s, column %zu (both counted from 0) holds %s: remove or impute "
                  "missing values first",
                  numbered_from + i, label ? " (" : "", label ? label : "", label ? ")" : "", j,
                  isnan(row[j]) ? "NaN" : "an infinite value");
      return FALSE;
    }
  return TRUE;
}
