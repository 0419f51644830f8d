/* The phenotype probe: a per-sample annotation (years to relapse) appended as one more row. */
#ifndef KNNWB_PHENOTYPE_H
#define KNNWB_PHENOTYPE_H

#include <glib.h>
#include <knnwb/annotation.h>
#include <knnwb/matrix.h>

G_BEGIN_DECLS

/** What a phenotype's missing values (NA, empty, NaN) do. */
typedef enum {
  /** The samples without a value are left out of every row (R's use = "complete.obs"). */
  KNNWB_PHENOTYPE_MISSING_COMPLETE = 0,
  /** A missing value is an error, listed with the others. */
  KNNWB_PHENOTYPE_MISSING_ERROR = 1,
} KnnwbPhenotypeMissing;

/**
 * Matches the records of table to the columns of data by sample name (data->col_labels against
 * the table's id column: id_column, or the first column when NULL/empty) and returns the numbers
 * of value_column, one per matrix column (*values, n_cols floats, g_free).
 *
 * Every problem is collected before failing, each with the table's line number: matrix samples
 * missing from the table, table samples not in the matrix ("extra"), samples listed twice, and
 * values that are not numbers (empty, NA, text, beyond float range). A column that holds no number
 * at all (e.g. "relapse"/"no relapse") is reported as categorical.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (no column labels, unknown column) and
 * KNNWB_ERROR_INVALID_DATA with all the problems, one per line, "path:line: ...".
 * Complexity: O(records + columns) expected (a hash of names).
 */
gboolean knnwb_phenotype_values(const KnnwbMatrix *data, const KnnwbAnnotationTable *table,
                                const char *id_column, const char *value_column, float **values,
                                GError **error);

/**
 * knnwb_phenotype_values with a policy for missing values. With KNNWB_PHENOTYPE_MISSING_COMPLETE a
 * value that is NA, N/A, NaN, null or empty is no problem: its entry of *values is NaN, the count
 * goes to *n_missing (may be NULL) and one warning names the table, the column and how many (an
 * infinity is still an error). A column with no value at all is refused. With
 * KNNWB_PHENOTYPE_MISSING_ERROR this is knnwb_phenotype_values. Samples of the matrix that the
 * table does not list are an error under both policies (a mismatched table, not a missing value).
 * Errors and complexity: as knnwb_phenotype_values.
 */
gboolean knnwb_phenotype_values_missing(const KnnwbMatrix *data, const KnnwbAnnotationTable *table,
                                        const char *id_column, const char *value_column,
                                        KnnwbPhenotypeMissing missing, float **values,
                                        size_t *n_missing, GError **error);

/**
 * Complete cases: the columns (samples) whose values[j] is NaN are removed from *data, which is
 * replaced by a new matrix (the old one freed) holding the other columns in order with their
 * labels, classes and annotations, rows' labels, classes, annotations and absent marks kept.
 * values (n_cols floats) is compacted in place to the kept columns. Nothing happens when no value
 * is NaN. Errors: KNNWB_ERROR_NO_MEMORY (*data unchanged).
 * Complexity: O(n_rows n_cols) time, the new matrix in memory.
 */
gboolean knnwb_phenotype_complete_cases(KnnwbMatrix **data, float *values, GError **error);

/**
 * Appends one row (values, n_cols floats) labelled label at the end of *data. The values grow in
 * place (realloc, no copy for large blocks) when the matrix owns them; a mapped or borrowed
 * matrix is copied into a new one that replaces *data (the old one is freed).
 * Errors: KNNWB_ERROR_NO_MEMORY, KNNWB_ERROR_INVALID_ARGUMENT (a row of that label exists).
 * Complexity: O(n_rows) for the labels, O(n_rows d) when a copy is needed.
 */
gboolean knnwb_phenotype_append_row(KnnwbMatrix **data, const float *values, const char *label,
                                    GError **error);

/**
 * knnwb_annotation_read + knnwb_phenotype_values + knnwb_phenotype_append_row: the row is
 * labelled label, or value_column when label is NULL/empty. Errors: as those functions.
 */
gboolean knnwb_phenotype_append(KnnwbMatrix **data, const char *table_path, const char *id_column,
                                const char *value_column, const char *label, GError **error);

G_END_DECLS

#endif
