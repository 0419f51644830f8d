/* Matrix writers: NPY (with a labels side file) and TSV. */
#include <math.h>
#include <stdlib.h>
#include <knnwb/write_matrix.h>
#include "write_internal.h"

char *knnwb_formats_npy_labels_path(const char *path)
{
  if (g_str_has_suffix(path, ".npy") || g_str_has_suffix(path, ".NPY"))
    return g_strdup_printf("%.*s.labels.txt", (int)(strlen(path) - 4), path);
  return g_strdup_printf("%s.labels.txt", path);
}

static gboolean knnwb_write_matrix_labels(const char *path, const KnnwbMatrix *matrix,
                                          GError **error)
{
  for (size_t i = 0; i < matrix->n_rows; i++)
    if (matrix->row_labels[i] && strpbrk(matrix->row_labels[i], "\r\n") != NULL) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "%s: row %zu's label holds a line break; a labels file has one label per line",
                  path, i + 1);
      return FALSE;
    }
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL || !knnwb_formats_labels_put(file, path, (const char *const *)matrix->row_labels,
                                                matrix->n_rows, error))
    return FALSE;
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

/* Writes count floats in pieces of 1 Mi values, so that a raised cancel flag stops a write of
 * gigabytes within a piece and progress (in rows) moves. */
static gboolean knnwb_write_matrix_values(FILE *stream, const char *path, const float *values,
                                          size_t count, size_t n_cols,
                                          const KnnwbWriteControl *control, GError **error)
{
  const size_t piece = (size_t)1 << 20;
  for (size_t done = 0; done < count;) {
    if (knnwb_formats_cancelled(control, path, error))
      return FALSE;
    size_t now = MIN(piece, count - done);
    if (fwrite(values + done, sizeof(float), now, stream) != now)
      return TRUE; /* the commit reports the stream's error with the path */
    done += now;
    if (control != NULL && control->progress != NULL && n_cols > 0)
      control->progress(done / n_cols, count / n_cols, control->progress_data);
  }
  return TRUE;
}

static gboolean knnwb_write_matrix_npy_run(const char *path, const KnnwbMatrix *matrix,
                                           const KnnwbWriteControl *control, GError **error)
{
  if (matrix->row_labels != NULL) {
    g_autofree char *labels = knnwb_formats_npy_labels_path(path);
    if (!knnwb_write_matrix_labels(labels, matrix, error))
      return FALSE;
  }
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  /* The values in the host's byte order, which the header names (npy_header.c). */
  knnwb_npy_header_write(stream, "f4", matrix->n_rows, matrix->n_cols);
  size_t count = matrix->n_rows * matrix->n_cols;
  if (matrix->n_absent_rows == 0) {
    if (!knnwb_write_matrix_values(stream, path, matrix->values, count, matrix->n_cols, control,
                                   error))
      return FALSE;
  } else {
    /* Rows kept absent for their missing values hold zeros, not data: NaN, as NumPy marks a
     * missing value. */
    const float nan = NAN;
    for (size_t i = 0; i < matrix->n_rows; i++) {
      if (i % 4096 == 0 && knnwb_formats_cancelled(control, path, error))
        return FALSE;
      const float *row = matrix->values + i * matrix->n_cols;
      gboolean absent = knnwb_matrix_row_is_absent(matrix, i);
      for (size_t j = 0; j < matrix->n_cols; j++)
        fwrite(absent ? &nan : row + j, sizeof(float), 1, stream);
    }
  }
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

gboolean knnwb_formats_write_matrix_npy(const char *path, const KnnwbMatrix *matrix, GError **error)
{
  return knnwb_write_matrix_npy_run(path, matrix, NULL, error);
}

/* One chunk of rows: the label (or number), then the values in the shortest form that strtof
 * reads back as the same float (knnwb_formats_format_float), NA for a row kept absent. */
static void knnwb_write_matrix_rows(void *context, size_t first, size_t last, KnnwbTextChunk *out)
{
  const KnnwbMatrix *matrix = context;
  for (size_t i = first; i < last; i++) {
    if (matrix->row_labels && matrix->row_labels[i])
      knnwb_text_chunk_put_tsv_field(out, matrix->row_labels[i]);
    else
      knnwb_text_chunk_put_int(out, (int64_t)i + 1);
    const float *row = matrix->values + i * matrix->n_cols;
    /* A row kept absent for its missing values holds zeros, not data: NA, as it was read. */
    const gboolean absent = knnwb_matrix_row_is_absent(matrix, i);
    for (size_t j = 0; j < matrix->n_cols; j++) {
      if (absent) {
        knnwb_text_chunk_append(out, "\tNA", 3);
        continue;
      }
      char *p = knnwb_text_chunk_room(out, 40);
      *p = '\t';
      out->length += 1 + (size_t)knnwb_formats_format_float(p + 1, 39, row[j]);
    }
    knnwb_text_chunk_putc(out, '\n');
  }
}

static gboolean knnwb_write_matrix_tsv_run(const char *path, const KnnwbMatrix *matrix,
                                           const KnnwbWriteControl *control, GError **error)
{
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  fputs("label", stream);
  for (size_t j = 0; j < matrix->n_cols; j++) {
    putc('\t', stream);
    if (matrix->col_labels && matrix->col_labels[j])
      knnwb_formats_write_tsv_field(stream, matrix->col_labels[j]);
    else
      fprintf(stream, "S%zu", j + 1);
  }
  putc('\n', stream);
  /* About 64 Ki values a chunk, formatted by the writer threads and written in order. */
  size_t grain = MAX((size_t)1, ((size_t)1 << 16) / MAX(matrix->n_cols, (size_t)1));
  if (!knnwb_formats_write_chunks(stream, path, matrix->n_rows, grain, knnwb_write_matrix_rows,
                                  (void *)matrix, control, 0, matrix->n_rows, error))
    return FALSE;
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

gboolean knnwb_formats_write_matrix_tsv(const char *path, const KnnwbMatrix *matrix, GError **error)
{
  return knnwb_write_matrix_tsv_run(path, matrix, NULL, error);
}

gboolean knnwb_formats_write_matrix_run(const char *path, const KnnwbMatrix *matrix,
                                        const KnnwbWriteControl *control, GError **error)
{
  g_autofree char *lower = g_ascii_strdown(path, -1);
  if (g_str_has_suffix(lower, ".npy"))
    return knnwb_write_matrix_npy_run(path, matrix, control, error);
  if (g_str_has_suffix(lower, ".tsv") || g_str_has_suffix(lower, ".txt") ||
      g_str_has_suffix(lower, ".tab"))
    return knnwb_write_matrix_tsv_run(path, matrix, control, error);
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "%s: unknown matrix extension (expected .npy, or .tsv/.txt/.tab)", path);
  return FALSE;
}

gboolean knnwb_formats_write_matrix(const char *path, const KnnwbMatrix *matrix, GError **error)
{
  return knnwb_formats_write_matrix_run(path, matrix, NULL, error);
}
