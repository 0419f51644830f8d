/* Per-sample (or per-row) annotation tables: TSV/CSV with a header, one record per item. */
#ifndef KNNWB_ANNOTATION_H
#define KNNWB_ANNOTATION_H

#include <glib.h>
#include <stddef.h>
#include <knnwb/matrix.h>

G_BEGIN_DECLS

/**
 * A text table read whole: a header of n_columns names, then n_records records of n_columns
 * fields each (strings, unquoted, surrounding blanks trimmed). line[i] is the 1-based line of the
 * file on which record i starts, for messages.
 */
typedef struct {
  char *path;
  size_t n_columns;
  size_t n_records;
  char **header; /**< n_columns names */
  char **fields; /**< n_records * n_columns, record i at fields + i * n_columns */
  size_t *line;  /**< n_records line numbers */
  size_t header_line;
  /*< private >*/
  GStringChunk *strings;
} KnnwbAnnotationTable;

/**
 * Reads a TSV or CSV annotation table (tab when the header line has a tab, else comma; RFC 4180
 * quotes, UTF-8 BOM, CRLF, blank lines skipped). Lines that start with '#' are comments (Biobase's
 * pData files), except, before the header, a '#' line holding a tab: that is the header (QIIME's
 * "#SampleID"). Every record must have as many fields as the header, and the header at least two
 * columns.
 * Errors: KNNWB_ERROR_IO (open/read), KNNWB_ERROR_PARSE "path:line: what is wrong" (empty file,
 * ragged record, a NUL byte, invalid UTF-8, a duplicated or empty column name),
 * KNNWB_ERROR_NO_MEMORY. Complexity: O(file size) time and memory.
 */
KnnwbAnnotationTable *knnwb_annotation_read(const char *path, GError **error);

/** Frees the table. NULL is fine. */
void knnwb_annotation_free(KnnwbAnnotationTable *table);

/**
 * The 0-based index of the column named name (exact match), or of the first column when name is
 * NULL or empty. Errors: KNNWB_ERROR_INVALID_ARGUMENT "path:line: no column 'name' (columns: ...)".
 */
gboolean knnwb_annotation_column(const KnnwbAnnotationTable *table, const char *name,
                                 size_t *column, GError **error);

/** The field of record i in column j. */
static inline const char *knnwb_annotation_field(const KnnwbAnnotationTable *table, size_t i,
                                                 size_t j)
{
  return table->fields[i * table->n_columns + j];
}

/**
 * Splits "TABLE:COLUMN" at its last ':' (so Windows-like or odd paths with ':' still work when a
 * column is given). Errors: KNNWB_ERROR_INVALID_ARGUMENT when there is no ':' or either part is
 * empty. Returns new strings.
 */
gboolean knnwb_annotation_parse_spec(const char *spec, char **path, char **column, GError **error);

/**
 * The input's own sample annotation as a table: matrix's annotation key along axis (the axis that
 * holds the samples: KNNWB_MATRIX_COLUMNS for a genes x samples matrix, whose GEO characteristics
 * such as "age" or "Sample_title" live there; KNNWB_MATRIX_ROWS for samples as rows, where an
 * AnnData obs column or a transposed GEO matrix has them). The table has two columns: the names
 * (the axis's labels, or the 0-based numbers when it has none; header "") and key (values with
 * their blanks trimmed, unknown entries empty). path is name (for messages); a record's "line" is
 * the sample's number counted from 1. Errors: KNNWB_ERROR_INVALID_ARGUMENT "NAME: no sample
 * annotation 'KEY' on the columns (available: 'a', 'b'); ..." when the matrix has no such key.
 * Complexity: O(samples).
 */
KnnwbAnnotationTable *knnwb_annotation_from_matrix(const KnnwbMatrix *matrix, KnnwbMatrixAxis axis,
                                                   const char *key, const char *name,
                                                   GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbAnnotationTable, knnwb_annotation_free)

G_END_DECLS

#endif
