/* The phenotype probe: a per-sample annotation (years to relapse) appended as one more row. */
#ifndef KNNWB_PHENOTYPE_H
#define KNNWB_PHENOTYPE_H

#include <glib.h>
#include <knnwb/annotation.h>
#include <knnwb/matrix.h>

G_BEGIN_DECLS

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
