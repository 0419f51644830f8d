/* formats/read: what the readers share among themselves (the delimited-text engine of CSV/TSV,
 * GCT and GEO) and the per-format readers behind knnwb_formats_read_matrix. Read by formats/read
 * only; not installed. */
#ifndef KNNWB_FORMATS_READ_INTERNAL_H
#define KNNWB_FORMATS_READ_INTERNAL_H

#include "../io/io.h"

G_BEGIN_DECLS

/* ---- the delimited-text engine shared by CSV/TSV and GCT ---- */

/** What a column of a delimited file holds. */
enum {
  KNNWB_COLUMN_VALUE = 0,
  KNNWB_COLUMN_LABEL = 1,
  KNNWB_COLUMN_SKIP = 2,
  KNNWB_COLUMN_ANNOTATION = 3 /* skipped, found as text: a number in it later is an error */
};

/** Parameters of knnwb_formats_read_delimited_rows(). */
typedef struct {
  char delimiter;
  const guint8 *kinds; /* one KNNWB_COLUMN_* per field */
  size_t n_fields;
  KnnwbMissingPolicy missing;
  size_t expected_rows;   /* SIZE_MAX when the file does not declare it */
  const char *end_marker; /* optional: a line starting with it ends the rows (GEO's
                             !series_matrix_table_end); *end_marker_seen is then set */
  gboolean *end_marker_seen;
  gboolean trailing_empty; /* rows may end with empty fields past n_fields (a separator ending
                              every line, Excel's unnamed empty columns): they are ignored */
  gboolean decimal_comma;  /* ';' between fields and ',' as the decimal mark (Excel in locales
                              that write 1,5) */
} KnnwbDelimitedLayout;

/**
 * Splits one record (already read, starting at line input->line_number) into fields, handling
 * quotes (which may pull further lines in through knnwb_text_input_extend_line). fields receives
 * g_strdup'd unquoted field texts.
 */
gboolean knnwb_formats_split_record(KnnwbTextInput *input, char delimiter, const char **line,
                                    size_t *length, GPtrArray *fields, GError **error);

/**
 * Reads the remaining records of input as data rows into builder (n_cols = number of VALUE
 * columns). Blank lines are skipped. Errors: KNNWB_ERROR_PARSE with file:line:column.
 */
gboolean knnwb_formats_read_delimited_rows(KnnwbTextInput *input,
                                           const KnnwbDelimitedLayout *layout,
                                           KnnwbMatrixBuilder *builder, KnnwbReadInfo *info,
                                           GError **error);

/** Adds one record given as split fields (the first record after header detection). */
gboolean knnwb_formats_add_split_row(KnnwbTextInput *input, const KnnwbDelimitedLayout *layout,
                                     GPtrArray *fields, KnnwbMatrixBuilder *builder,
                                     KnnwbReadInfo *info, GError **error);

/** Warns that the label column (0-based; none when < 0) holding a number in every one of its 2 or
 * more labels is probably data (a purely numeric file). O(n_rows). */
void knnwb_formats_warn_numeric_labels(const char *path, const char *const *labels, size_t n_rows,
                                       int label_column);

/* ---- readers, one per file ---- */

/* One warning when rows repeat an earlier row's label (probe tables repeat gene symbols: the rows
 * stay separate points): how many, and the first repeat in row order with the row it repeats
 * (read_repeated_labels.c). NULL labels or "" never count. O(n) expected time on n_threads threads
 * (0: every core). */
void knnwb_formats_warn_repeated_labels(const char *path, const char *const *labels, size_t n_rows,
                                        int n_threads);

/**
 * Reads a labels side file: one label per line (valid UTF-8; trailing blank lines ignored), exactly
 * count of them, set as matrix's row labels (column labels when as_columns: an NPY file read
 * transposed), replacing any. A plain file of 1 MiB or more is read and split on n_threads
 * threads (0: every core). Errors: KNNWB_ERROR_IO, KNNWB_ERROR_PARSE ("path:line: ..."; a count
 * that differs says both). O(file size).
 */
gboolean knnwb_formats_read_labels_file(const char *labels_path, size_t count, KnnwbMatrix *matrix,
                                        gboolean as_columns, int n_threads, GError **error);

/**
 * Reads a labels side file of count rows (as knnwb_formats_read_labels_file: the same checks and
 * errors) and sets the labels of rows [first, first + matrix->n_rows) as matrix's row labels: one
 * rank's block of an NPY file read by rows. Needs first + matrix->n_rows <= count. O(file size)
 * time; the block's labels kept (the others' freed before it returns).
 */
gboolean knnwb_formats_read_labels_block(const char *labels_path, size_t count, size_t first,
                                         KnnwbMatrix *matrix, int n_threads, GError **error);

gboolean knnwb_formats_read_delimited(const char *path, const KnnwbReadOptions *options,
                                      char delimiter, KnnwbMatrix **out, KnnwbReadInfo *info,
                                      GError **error);
gboolean knnwb_formats_read_gct(const char *path, const KnnwbReadOptions *options,
                                KnnwbMatrix **out, KnnwbReadInfo *info, GError **error);
gboolean knnwb_formats_read_cibm(const char *path, const KnnwbReadOptions *options,
                                 KnnwbMatrix **out, KnnwbReadInfo *info, GError **error);
/** NCBI GEO series matrix; column annotations from the !Sample_ lines (read_geo.c). */
gboolean knnwb_formats_read_geo(const char *path, const KnnwbReadOptions *options,
                                KnnwbMatrix **out, KnnwbReadInfo *info, GError **error);
/** NPY applies options->transpose itself (a Fortran array transposed is a free mapping). */
gboolean knnwb_formats_read_npy(const char *path, const KnnwbReadOptions *options,
                                KnnwbMatrix **out, KnnwbReadInfo *info, GError **error);

/** 10x Genomics Market Exchange: a directory or a Matrix Market file (read_10x.c). */
gboolean knnwb_formats_read_10x(const char *path, const KnnwbReadOptions *options,
                                KnnwbMatrix **out, KnnwbReadInfo *info, GError **error);
/** AnnData .h5ad (read_h5ad.c; without libhdf5 an error that says so). */
gboolean knnwb_formats_read_h5ad(const char *path, const KnnwbReadOptions *options,
                                 KnnwbMatrix **out, KnnwbReadInfo *info, GError **error);

#ifdef KNNWB_HAVE_HDF5
#include "../io/h5.h"
/** Refuses HDF5 files that are not AnnData (10x .h5, loom, no obs, obs of anndata before 0.7) with
 * what they are (read_h5ad_obs.c). */
gboolean knnwb_h5ad_check_kind(const char *path, hid_t file, GError **error);
/** Labels the matrix read from element (X, obsm/..., layers/...): obs_names as row labels, obs
 * columns as row annotations, var_names as column labels (not for obsm). Errors:
 * KNNWB_ERROR_PARSE "path: what is wrong" (read_h5ad_obs.c). */
gboolean knnwb_h5ad_read_obs(const char *path, hid_t file, const char *element, KnnwbMatrix *matrix,
                             GError **error);
#endif

G_END_DECLS

#endif
