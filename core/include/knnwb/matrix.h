/* The dense float32 data matrix: rows are points, columns are features (samples). */
#ifndef KNNWB_MATRIX_H
#define KNNWB_MATRIX_H

#include <glib.h>
#include <stddef.h>

G_BEGIN_DECLS

/**
 * A dense row-major float32 matrix with optional labels.
 *
 * values holds n_rows * n_cols floats, row i at values + i * n_cols. It is owned by the matrix
 * (malloc'd, or a file mapping released by values_destroy). Labels are NUL-terminated UTF-8 strings
 * owned by the matrix (stored in a string chunk); each label array is NULL or has exactly n_rows
 * (row_*) or n_cols (col_*) entries. row_classes/col_classes are optional class labels (the CIBM
 * format's <SamplesClasses>, for example).
 */
typedef struct {
  size_t n_rows;
  size_t n_cols;
  float *values;
  char **row_labels;
  char **col_labels;
  char **row_classes;
  char **col_classes;
  /*< private >*/
  GStringChunk *strings;
  void (*values_destroy)(void *values, size_t n_bytes, void *data);
  void *values_destroy_data;
  gboolean values_borrowed;
  GPtrArray *annotations[2];  /* per KnnwbMatrixAxis: KnnwbMatrixAnnotation*, in insertion order */
  unsigned char *absent_rows; /* n_rows flags, or NULL when no row is absent */
  size_t n_absent_rows;
  float *row_ranks;   /* n_rows * n_cols average ranks from the values as read, or NULL */
  size_t whole_first; /* a block of a whole matrix (knnwb_matrix_new_block_of): its first row */
} KnnwbMatrix;

/**
 * Each row's average ranks (1-based, ties sharing their mean rank; exact in float for rows of fewer
 * than 2^23 values), n_rows * n_cols row-major, as a reader computed them from the values as read
 * (double precision, before rounding to float32; KnnwbReadOptions.rank_rows), or NULL when none
 * were kept. The spearman metric ranks these instead of the float32 values, so values that differ
 * only beyond float32 precision do not tie. Owned by the matrix. O(1).
 */
const float *knnwb_matrix_row_ranks(const KnnwbMatrix *matrix);
/**
 * Gives the matrix its row ranks (see knnwb_matrix_row_ranks; taken over, freed with g_free;
 * NULL drops them). Transposing drops them; knnwb_matrix_select_rows keeps the kept rows'. O(1).
 */
void knnwb_matrix_take_row_ranks(KnnwbMatrix *matrix, float *ranks);
/** Takes the row ranks away from the matrix (the caller frees them with g_free). O(1). */
float *knnwb_matrix_steal_row_ranks(KnnwbMatrix *matrix);

/**
 * Marks row i absent: a row kept only so that rows keep their input numbers (the readers' policy
 * for rows with missing values). Its values should be zeros; the kNN engine gives it no edges and
 * never takes it as a neighbour, as it does with constant rows under drop_degenerate. Transposing
 * forgets the marks (absent rows would be absent columns); knnwb_matrix_select_rows keeps them.
 * O(1) (O(n_rows) the first time).
 */
void knnwb_matrix_set_row_absent(KnnwbMatrix *matrix, size_t i);
/** Whether row i is absent (see knnwb_matrix_set_row_absent). */
gboolean knnwb_matrix_row_is_absent(const KnnwbMatrix *matrix, size_t i);

/**
 * Appends a row of n_cols values (copied) as row n_rows, without a label, class or annotation,
 * not absent; every row before keeps its values, label, class, annotations, absent mark and the
 * ranks its reader kept (the new row's ranks are its values' average ranks). The matrix may be
 * replaced (*matrix then points to the new one: values a matrix does not own are copied, and the
 * old matrix is freed); owned values grow in place. Errors: KNNWB_ERROR_NO_MEMORY (the matrix is
 * then unchanged). O(n_rows) for the per-row arrays, plus a copy of the values where they are not
 * the matrix's own.
 */
gboolean knnwb_matrix_append_row(KnnwbMatrix **matrix, const float *values, GError **error);

/** Which labels of a matrix: its rows or its columns. */
typedef enum { KNNWB_MATRIX_ROWS = 0, KNNWB_MATRIX_COLUMNS = 1 } KnnwbMatrixAxis;

/**
 * Sets entry index of the annotation named key along axis (copied; NULL clears it). Annotations are
 * named string vectors, one entry per row or per column: the GEO series matrix reader keeps each
 * sample's title, accession and characteristics ("tissue", "age", ...) as column annotations, for
 * phenotype and class tables. A new key starts with every entry NULL. Transposing swaps the axes;
 * knnwb_matrix_select_rows keeps the entries of the kept rows. O(length of value), plus O(n) when
 * key is new.
 */
void knnwb_matrix_set_annotation(KnnwbMatrix *matrix, KnnwbMatrixAxis axis, const char *key,
                                 size_t index, const char *value);

/**
 * The annotation named key along axis: an array of n_rows (ROWS) or n_cols (COLUMNS) strings,
 * entries NULL where unknown; NULL when the matrix has no such annotation. Owned by the matrix.
 */
const char *const *knnwb_matrix_annotation(const KnnwbMatrix *matrix, KnnwbMatrixAxis axis,
                                           const char *key);

/**
 * The annotation names along axis in the order they were first set, NULL-terminated (free the
 * array with g_free, not its strings, which the matrix owns). Never NULL.
 */
const char **knnwb_matrix_annotation_keys(const KnnwbMatrix *matrix, KnnwbMatrixAxis axis);

/**
 * Allocates an n_rows x n_cols matrix of zeros with no labels.
 * Errors: KNNWB_ERROR_NO_MEMORY when n_rows * n_cols * sizeof(float) overflows or cannot be
 * allocated. Complexity: O(n_rows * n_cols) time (zeroing) and memory.
 */
KnnwbMatrix *knnwb_matrix_new(size_t n_rows, size_t n_cols, GError **error);

/**
 * Wraps values the caller already has (a mapped file, for instance). values_destroy(values,
 * n_bytes, data) is called by knnwb_matrix_free; pass NULL to keep ownership (then values must
 * outlive the matrix).
 */
KnnwbMatrix *knnwb_matrix_new_wrapped(size_t n_rows, size_t n_cols, float *values,
                                      void (*values_destroy)(void *, size_t, void *), void *data);

/**
 * A block of whole: a matrix whose values are rows [first, first + count) of whole's (no copy; no
 * labels or marks: the caller sets what it needs), which takes whole over and frees it with
 * itself (so make one block of a whole; rows that are not whole's: a critical warning, NULL, and
 * whole stays the caller's). For a process that
 * holds a whole matrix of which it works on a block (an MPI rank that read an input whole):
 * knnwb_matrix_whole_of gives whole back, so that work that needs every row takes them from there
 * instead of copying them from the other ranks. O(1).
 */
KnnwbMatrix *knnwb_matrix_new_block_of(KnnwbMatrix *whole, size_t first, size_t count);
/** The whole matrix block is a block of (knnwb_matrix_new_block_of), and its first row there in
 * *first; NULL for any other matrix. O(1). */
const KnnwbMatrix *knnwb_matrix_whole_of(const KnnwbMatrix *block, size_t *first);

/** Frees the matrix, its values and labels. NULL is fine. */
void knnwb_matrix_free(KnnwbMatrix *matrix);

/**
 * Frees the matrix's values and its row ranks, once nothing reads them any more (a split rank's
 * block after its search packed it: KnnwbKnnOptions.input_done), and sets values to NULL; the
 * shape, the labels, the classes, the annotations and the absent-row marks stay, and
 * knnwb_matrix_free frees the rest later. Values are freed as knnwb_matrix_free would free them
 * (values_destroy, or g_free); borrowed values (knnwb_matrix_new_wrapped without a destroy
 * function) are only let go of. A block of a whole (knnwb_matrix_new_block_of) frees the whole's
 * values and row ranks, which hold its own, and keeps the whole's labels, which a caller may
 * still read. Calling it again does nothing. NULL is fine. O(1) besides the free.
 */
void knnwb_matrix_release_values(KnnwbMatrix *matrix);

/** Sets row label i (copied). Allocates the label array on first use. O(length). */
void knnwb_matrix_set_row_label(KnnwbMatrix *matrix, size_t i, const char *label);
/** Sets column label j (copied). */
void knnwb_matrix_set_col_label(KnnwbMatrix *matrix, size_t j, const char *label);
/** Sets the class label of row i (copied). */
void knnwb_matrix_set_row_class(KnnwbMatrix *matrix, size_t i, const char *label);
/** Sets the class label of column j (copied). */
void knnwb_matrix_set_col_class(KnnwbMatrix *matrix, size_t j, const char *label);

/** Row label i, or NULL when rows are unlabelled. */
const char *knnwb_matrix_row_label(const KnnwbMatrix *matrix, size_t i);

/**
 * Returns the transpose (labels and classes swap roles) as a new matrix.
 * Errors: KNNWB_ERROR_NO_MEMORY. Complexity: O(n_rows * n_cols), cache-blocked.
 */
KnnwbMatrix *knnwb_matrix_transpose(const KnnwbMatrix *matrix, GError **error);

/**
 * Matches a query's columns to a reference's by name, for a kNN query or a classification of new
 * rows: when both have column names and they differ in order, *matched receives a new matrix of
 * the query's rows with the reference's columns in the reference's order, taken by name (extra
 * query columns are left out, with a message); otherwise *matched is NULL and the query is used as
 * it is (no names, the same names in the same order, or no name in common: then by position with
 * a warning). Row labels, classes and absent marks are kept; column annotations are not.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT when some reference columns are not in the query (named) or
 * either repeats a name; KNNWB_ERROR_NO_MEMORY.
 * Complexity: O(query rows x reference columns + columns) time, the new matrix in memory.
 */
gboolean knnwb_matrix_match_columns(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                                    KnnwbMatrix **matched, GError **error);

/**
 * Returns a new matrix holding the rows whose keep[i] is TRUE, in order, with their labels.
 * Errors: KNNWB_ERROR_NO_MEMORY.
 */
KnnwbMatrix *knnwb_matrix_select_rows(const KnnwbMatrix *matrix, const gboolean *keep,
                                      GError **error);

/**
 * Checks every value is finite. On the first NaN/Inf sets KNNWB_ERROR_INVALID_DATA naming the row
 * (label and number, counted from 0 as everywhere in the C API) and column. O(n_rows * n_cols).
 */
gboolean knnwb_matrix_check_finite(const KnnwbMatrix *matrix, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbMatrix, knnwb_matrix_free)

G_END_DECLS

#endif
