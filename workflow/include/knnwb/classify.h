/* kNN classification (GPU-SME-kNN's use of the engine): majority vote of the k nearest labelled
 * rows, stratified cross-validation, metrics. */
#ifndef KNNWB_CLASSIFY_H
#define KNNWB_CLASSIFY_H

#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <knnwb/annotation.h>
#include <knnwb/knn.h>
#include <knnwb/matrix.h>

G_BEGIN_DECLS

/** Class labels of the rows of a matrix: names sorted (strcmp), of[i] in [0, n_classes) or -1. */
typedef struct {
  size_t n_rows;
  size_t n_classes;
  char **names; /**< n_classes + 1, NULL-terminated (g_strfreev) */
  int32_t *of;  /**< n_rows class ids, -1 = unknown (empty, NA: the row is to be predicted) */
} KnnwbClasses;

void knnwb_classes_free(KnnwbClasses *classes);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbClasses, knnwb_classes_free)

/**
 * Classes of data's rows from a column of an annotation table, matched by row label against the
 * id column (NULL/empty: the first). Empty, NA, N/A and NaN values mean "unknown" (the row is
 * predicted, not scored; one warning says how many). Every row missing from
 * the table and every name listed twice is reported (with table lines) in one error; table names
 * that are not rows are ignored with one warning. Errors: KNNWB_ERROR_INVALID_ARGUMENT (no row
 * labels, unknown column), KNNWB_ERROR_INVALID_DATA (the problems). O(rows + records).
 */
gboolean knnwb_classes_from_table(const KnnwbMatrix *data, const KnnwbAnnotationTable *table,
                                  const char *id_column, const char *class_column,
                                  KnnwbClasses **classes, GError **error);

/**
 * Classes from data->row_classes (the CIBM <SamplesClasses> block after --transpose).
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT when data has none.
 */
gboolean knnwb_classes_from_rows(const KnnwbMatrix *data, KnnwbClasses **classes, GError **error);

/**
 * Classes for rows (labels) by name from another set's table match: rows of query whose label is
 * a row of reference_data with a known class get it, others -1. For --query truth. O(n).
 */
/**
 * The classes of query's rows from an annotation table (by row label against id_column, or the
 * first column; class_column's names mapped to classes' ids), -1 where the table does not list the
 * row, the value is unknown (NA, empty, NaN) or the class is not one of classes (it cannot be
 * predicted; counted in *n_unseen, may be NULL). O(records + rows).
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (unknown column).
 */
gboolean knnwb_classes_match_table(const KnnwbMatrix *query, const KnnwbAnnotationTable *table,
                                   const char *id_column, const char *class_column,
                                   const KnnwbClasses *classes, int32_t *out, size_t *n_unseen,
                                   GError **error);

/**
 * A warning naming the classes with one labelled row (in cross-validation that row is never
 * predicted right: its class is gone from its training folds). O(rows).
 */
void knnwb_classes_warn_single(const KnnwbClasses *classes);

void knnwb_classes_match_by_label(const KnnwbMatrix *query, const KnnwbMatrix *labelled,
                                  const KnnwbClasses *classes, int32_t *out);

/**
 * The vote: for each list of neighbours (indices into reference rows whose classes are
 * reference_class), the class with most votes; a tie between classes goes to the class of the
 * nearest neighbour among the tied classes. predicted[i] = -1 and votes[i] = 0 for a list
 * without labelled neighbours. votes: the winning class's count. O(n k).
 */
void knnwb_classify_vote(const KnnwbNeighbors *lists, const int32_t *reference_class,
                         size_t n_classes, int32_t *predicted, int32_t *votes);

/**
 * Classifies every row of query against the reference rows with known class (reference_class[i]
 * >= 0): knnwb_knn_query, then the vote. options->k must not exceed the labelled references.
 * Errors: as knnwb_knn_query, KNNWB_ERROR_INVALID_ARGUMENT.
 */
gboolean knnwb_classify_query(const KnnwbMatrix *reference, const int32_t *reference_class,
                              size_t n_classes, const KnnwbMatrix *query,
                              const KnnwbKnnOptions *options, int32_t *predicted, int32_t *votes,
                              GError **error);

/**
 * Stratified folds: the rows of each class (class ids in classes, -1 rows get fold -1) are
 * shuffled with a GRand seeded by seed and dealt to folds 0..n_folds-1 in turn, the deal going on
 * from class to class, so every fold gets each class in proportion and every labelled row is in
 * exactly one fold. Deterministic for a seed. Errors: KNNWB_ERROR_INVALID_ARGUMENT when n_folds
 * < 2 or exceeds the labelled rows. O(n).
 */
gboolean knnwb_classify_folds(const int32_t *classes, size_t n, size_t n_folds, guint32 seed,
                              int32_t *fold, GError **error);

/**
 * Parses a fold count as users write it: a number (2 or more) or "loo" (leave-one-out, stored as
 * 0). Errors: KNNWB_ERROR_INVALID_ARGUMENT.
 */
gboolean knnwb_classify_folds_from_string(const char *text, size_t *n_folds, GError **error);

/**
 * Cross-validation over data's labelled rows: n_folds stratified folds (each fold's rows
 * classified against the other folds' rows), or leave-one-out when n_folds is 0 (every labelled
 * row against all other labelled rows: the self-kNN lists of the labelled rows, deterministic).
 * Rows of unknown class are classified against all labelled rows (fold -1).
 * fold, predicted, votes: n_rows entries. Errors: as knnwb_knn_query and knnwb_classify_folds.
 * Complexity: one kNN pass over the labelled rows in all (each fold queries its rows).
 */
gboolean knnwb_classify_cross_validate(const KnnwbMatrix *data, const KnnwbClasses *classes,
                                       size_t n_folds, guint32 seed, const KnnwbKnnOptions *options,
                                       int32_t *fold, int32_t *predicted, int32_t *votes,
                                       GError **error);

/** Accuracy, per-class precision/recall and the confusion matrix of the rows with both classes. */
typedef struct {
  size_t n_classes;
  size_t n_scored; /**< rows with a known and a predicted class */
  size_t n_correct;
  uint64_t *confusion; /**< n_classes x n_classes, [true * n_classes + predicted] */
} KnnwbClassifyMetrics;

KnnwbClassifyMetrics *knnwb_classify_metrics_new(const int32_t *truth, const int32_t *predicted,
                                                 size_t n, size_t n_classes);
void knnwb_classify_metrics_free(KnnwbClassifyMetrics *metrics);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbClassifyMetrics, knnwb_classify_metrics_free)
/** Precision of class c: correct / predicted as c (NAN when none predicted). */
double knnwb_classify_precision(const KnnwbClassifyMetrics *metrics, size_t c);
/** Recall of class c: correct / truly c (NAN when none). */
double knnwb_classify_recall(const KnnwbClassifyMetrics *metrics, size_t c);

/** Balanced accuracy: the mean recall over the classes that have scored rows (NAN when none);
 * what accuracy means when the classes are unequal. O(classes^2). */
double knnwb_classify_balanced_accuracy(const KnnwbClassifyMetrics *metrics);
/** The accuracy of calling every scored row the most frequent true class among them (*majority,
 * may be NULL; ties: the first class); the number a classifier has to beat. O(classes^2). */
double knnwb_classify_majority_baseline(const KnnwbClassifyMetrics *metrics, size_t *majority);

/** Prints accuracy, balanced accuracy, the majority-class baseline, a precision/recall/support
 * table and the confusion matrix (text). */
void knnwb_classify_metrics_print(FILE *stream, const KnnwbClassifyMetrics *metrics,
                                  char *const *names);

/**
 * Writes the predictions table: label, true_class (empty when unknown), predicted, votes ("v/k"),
 * fold (empty when not cross-validated or unlabelled), correct (yes/no/empty). Atomic.
 * Errors: KNNWB_ERROR_IO.
 */
gboolean knnwb_classify_write_predictions(const char *path, const KnnwbMatrix *rows,
                                          char *const *names, const int32_t *truth,
                                          const int32_t *predicted, const int32_t *votes,
                                          const int32_t *fold, size_t k, GError **error);

/** Writes knnwb_classify_metrics_print's text to path, atomically. Errors: KNNWB_ERROR_IO. */
gboolean knnwb_classify_write_metrics(const char *path, const KnnwbClassifyMetrics *metrics,
                                      char *const *names, GError **error);

G_END_DECLS

#endif
