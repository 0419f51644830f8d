/* Metafeatures: one new row per unordered pair of rows (a-b, a+b, a*b, a/b), as GPU-FS-kNN did. */
#ifndef KNNWB_METAFEATURES_H
#define KNNWB_METAFEATURES_H

#include <glib.h>
#include <stddef.h>
#include <knnwb/formats.h>
#include <knnwb/knn.h>
#include <knnwb/matrix.h>

G_BEGIN_DECLS

/** The pair operators, in the order the seed (expanded_B) lists them. */
typedef enum {
  KNNWB_METAFEATURE_DIFFERENCE, /**< a-b */
  KNNWB_METAFEATURE_SUM,        /**< a+b */
  KNNWB_METAFEATURE_PRODUCT,    /**< a*b */
  KNNWB_METAFEATURE_RATIO,      /**< a/b */
  KNNWB_METAFEATURE_COUNT
} KnnwbMetafeatureOp;

/* The names of KnnwbMetafeatureOp (<knnwb/enum_names.h>); "all" (KNNWB_METAFEATURE_COUNT) stands
 * for every operator not listed before it. */
/* clang-format off */
#define KNNWB_METAFEATURE_NAMES(X)                                                                 \
  X(KNNWB_METAFEATURE_DIFFERENCE, "difference")                                                    \
  X(KNNWB_METAFEATURE_SUM, "sum")                                                                  \
  X(KNNWB_METAFEATURE_PRODUCT, "product")                                                          \
  X(KNNWB_METAFEATURE_RATIO, "ratio")                                                              \
  X(KNNWB_METAFEATURE_COUNT, "all")
/* clang-format on */
extern const KnnwbEnumTable knnwb_metafeature_table;

/**
 * Parses a comma-separated list of "difference", "sum", "product", "ratio" (also "all") into ops
 * (room for KNNWB_METAFEATURE_COUNT) in the order given; each operator at most once.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT naming the unknown or repeated word.
 */
gboolean knnwb_metafeatures_parse_ops(const char *text, KnnwbMetafeatureOp *ops, size_t *n_ops,
                                      GError **error);

/** "difference", "sum", "product", "ratio". */
const char *knnwb_metafeatures_op_to_string(KnnwbMetafeatureOp op);

/** Options of knnwb_metafeatures_expand(). Initialise with knnwb_metafeatures_options_init(). */
typedef struct {
  const KnnwbMetafeatureOp *ops; /**< NULL: difference only */
  size_t n_ops;
  const size_t *rows; /**< the rows whose pairs are formed, in this order; NULL = all rows */
  size_t n_rows;      /**< length of rows */
  KnnwbMissingPolicy missing; /**< a zero/subnormal denominator or an infinite result: an error
                                   naming the pair (default), or the pair's row dropped */
  int n_threads;              /**< 0 = all cores */
  size_t available_bytes;     /**< memory the result may take; 0 = what the machine has now */
  KnnwbProgressFunc progress; /**< optional; counts generated rows, never going back; a
                                   completed expansion's last report is all of them */
  void *progress_data;
  const volatile gint *cancel; /**< optional; stops with KNNWB_ERROR_CANCELLED within ~0.1 s */
  /** share_count > 1: only share share_index of the result, for one rank of a split-memory job:
   * share 0 gets the original rows, and the generated rows are cut, in order, into share_count
   * runs of about equal size (at whole (operator, first row) units), so the shares of 0, 1, ...
   * in order are the whole result, with the same rows, labels and drops. Checks, errors (the first
   * failing pair of the share; counts of the share) and memory are the share's. */
  int share_index;
  int share_count;
} KnnwbMetafeatureOptions;

void knnwb_metafeatures_options_init(KnnwbMetafeatureOptions *options);

/**
 * The number of rows of the result: n_rows + n_ops * m (m - 1) / 2 with m the rows paired.
 * Errors: KNNWB_ERROR_NO_MEMORY when the count overflows size_t. O(1).
 * 876 rows give 384,126 (difference) and 1,533,876 (all four).
 */
gboolean knnwb_metafeatures_count(size_t n_rows, size_t n_paired, size_t n_ops, size_t *n_result,
                                  GError **error);

/**
 * Returns a new matrix: the rows of data (with their labels), then for each operator in order one
 * row per unordered pair (a, b) of the paired rows, a before b in their order, labelled "A-B",
 * "A+B", "A*B", "A/B" from the row labels (row numbers from 0 when data has none). Values are
 * computed in double and rounded to float. Column labels and classes are copied.
 *
 * Sizes are checked for overflow and the result against options->available_bytes before anything
 * is allocated; rows are generated in parallel straight into the result (no per-pair copies).
 * With the drop-rows policy the rows of failing pairs are left out (one warning with the count and
 * the first pair) and the matrix is compacted in place.
 * Errors: KNNWB_ERROR_NO_MEMORY (overflow, "needs N bytes, N available", allocation),
 * KNNWB_ERROR_INVALID_DATA (a zero/subnormal denominator, an infinite or NaN result, naming the
 * pair and the column), KNNWB_ERROR_INVALID_ARGUMENT (a row index out of range, a row repeated),
 * KNNWB_ERROR_CANCELLED.
 * Complexity: O(n_ops m^2 d) time over all threads; memory: the result plus O(m) labels.
 */
gboolean knnwb_metafeatures_expand(const KnnwbMatrix *data, const KnnwbMetafeatureOptions *options,
                                   KnnwbMatrix **result, GError **error);

/**
 * Reads a file of row labels (one per line; blank lines and surrounding blanks ignored) and
 * returns their row indices in data, in file order (*rows, g_free). Every unknown label is an
 * error, all of them named with their lines; a label given twice is an error too.
 * Errors: KNNWB_ERROR_IO, KNNWB_ERROR_PARSE ("path:line: ..."), KNNWB_ERROR_INVALID_ARGUMENT
 * (data has no row labels). Complexity: O(n + file size).
 */
gboolean knnwb_metafeatures_rows_from_file(const KnnwbMatrix *data, const char *path, size_t **rows,
                                           size_t *n_rows, GError **error);

G_END_DECLS

#endif
