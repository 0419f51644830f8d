/* Writing a matrix (the metafeature expansion, a matrix with a phenotype row) as NPY or TSV. */
#ifndef KNNWB_WRITE_MATRIX_H
#define KNNWB_WRITE_MATRIX_H

#include <glib.h>
#include <knnwb/formats.h>
#include <knnwb/matrix.h>

G_BEGIN_DECLS

/**
 * The labels side file of an NPY path: "x.npy" -> "x.labels.txt" (path + ".labels.txt" when it
 * does not end in .npy). knnwb reads it back with the NPY reader's labels option (knnwb ...
 * --labels FILE, pipeline load-matrix labels="..."). Returns a new string.
 */
char *knnwb_formats_npy_labels_path(const char *path);

/**
 * Writes a float32 C-order NPY (format 1.0) of the matrix and, when it has row labels, the labels
 * side file (one label per line; a label holding a newline is refused). Both atomic; the labels
 * are committed first, so a complete .npy always has its labels beside it.
 * Errors: KNNWB_ERROR_IO, KNNWB_ERROR_INVALID_ARGUMENT (a label with a newline).
 * Complexity: O(n d) bytes written in one stream.
 */
gboolean knnwb_formats_write_matrix_npy(const char *path, const KnnwbMatrix *matrix,
                                        GError **error);

/**
 * Writes the matrix as TSV: a header (a first field "label" then the column labels, or S1, S2, ...)
 * and one line per row (its label or number, then the values in the shortest form that reads back
 * as the same float, NA for a row kept absent). Atomic; formatted on every core (see
 * knnwb_formats_write_matrix_run). Errors: KNNWB_ERROR_IO. Complexity: O(n d).
 */
gboolean knnwb_formats_write_matrix_tsv(const char *path, const KnnwbMatrix *matrix,
                                        GError **error);

/**
 * By extension: .npy -> NPY, .tsv/.txt/.tab -> TSV. Errors: KNNWB_ERROR_INVALID_ARGUMENT for other
 * extensions, and as the writers. The same as knnwb_formats_write_matrix_run with no control.
 */
gboolean knnwb_formats_write_matrix(const char *path, const KnnwbMatrix *matrix, GError **error);

/**
 * knnwb_formats_write_matrix with control (may be NULL): the TSV formatted by control's threads
 * in chunks of rows written in order (the bytes do not depend on the thread count), both formats
 * stopping with KNNWB_ERROR_CANCELLED (and no file) within a chunk of a raised cancel flag, and
 * progress reported in rows. Errors: as knnwb_formats_write_matrix, KNNWB_ERROR_CANCELLED.
 * Complexity: O(n d); memory O(threads x chunk) beyond the matrix.
 */
gboolean knnwb_formats_write_matrix_run(const char *path, const KnnwbMatrix *matrix,
                                        const KnnwbWriteControl *control, GError **error);

G_END_DECLS

#endif
