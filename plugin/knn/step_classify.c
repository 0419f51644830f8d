/* Step knn-classify: kNN classification of a matrix's rows (cross-validated) or of a query
 * matrix's rows against them; writes the predictions and the metrics. */
#include <stdio.h>
#include <string.h>
#include <knnwb/classify.h>
#include <knnwb/error.h>
#include "knn_plugin_internal.h"

enum {
  CLASSES = KNNWB_KNN_N_COMMON_PARAMS,
  COLUMN,
  ID_COLUMN,
  ANNOTATION,
  FOLDS,
  SEED,
  PREDICTIONS,
  METRICS,
  PRINT,
  DATA_NAME,
  QUERY_NAME,
  N_PARAMS
};

static const KnnwbParamSpec knnwb_classify_params[N_PARAMS] = {
    KNNWB_KNN_COMMON_PARAMS,
    [CLASSES] = {"classes", KNNWB_PARAM_INPUT_FILE, "", 1, 0, NULL,
                 "table of class labels by row name (default: the matrix's row classes, e.g. "
                 "CIBM <SamplesClasses> read transposed)"},
    [COLUMN] = {"column", KNNWB_PARAM_STRING, "", 1, 0, NULL, "the table's class column"},
    [ID_COLUMN] = {"id-column", KNNWB_PARAM_STRING, "", 1, 0, NULL,
                   "the table's column of row names (default: the first)"},
    [ANNOTATION] = {"annotation", KNNWB_PARAM_STRING, "", 1, 0, NULL,
                    "classes from the data's own row annotation of this name (a GEO "
                    "characteristic of a transposed series matrix, an AnnData obs column) instead "
                    "of a table"},
    [FOLDS] = {"folds", KNNWB_PARAM_STRING, "5", 1, 0, NULL,
               "stratified folds (2 or more) or loo; ignored with a query input"},
    [SEED] = {"seed", KNNWB_PARAM_INT, "1", 0, 4294967295.0, NULL, "seed of the fold assignment"},
    [PREDICTIONS] = {"predictions", KNNWB_PARAM_OUTPUT_FILE, NULL, 1, 0, NULL,
                     "predictions table (label, true_class, predicted, votes, fold, correct)"},
    [METRICS] = {"metrics", KNNWB_PARAM_OUTPUT_FILE, "", 1, 0, NULL,
                 "accuracy, per-class precision/recall and the confusion matrix"},
    [PRINT] = {"print", KNNWB_PARAM_BOOLEAN, "false", 1, 0, NULL,
               "also print what was classified and the metrics on stdout (as knnwb classify)"},
    [DATA_NAME] = {"data-name", KNNWB_PARAM_STRING, "", 1, 0, NULL,
                   "the data's name in the printed summary (default: its row count)"},
    [QUERY_NAME] = {"query-name", KNNWB_PARAM_STRING, "", 1, 0, NULL,
                    "the query's name in the printed summary (default: its row count)"},
};

static const KnnwbPortSpec knnwb_classify_inputs[] = {
    {"data", KNNWB_KIND_MATRIX, FALSE, "the labelled points (rows)"},
    {"query", KNNWB_KIND_MATRIX, TRUE, "new points to classify (default: cross-validate data)"},
};

/* The first line of the printed summary: what was classified, and how. The inputs are named by
 * data_name and query_name when given (knnwb classify gives its file names), else counted. */
static void knnwb_classify_step_print(gboolean query, size_t n_rows, size_t n_labelled,
                                      size_t folds, guint32 seed, const KnnwbKnnOptions *options,
                                      const char *data_name, const char *query_name)
{
  const char *metric = knnwb_metric_to_string(options->metric);
  g_autofree char *data = *data_name ? g_strdup(data_name) : g_strdup_printf("%zu rows", n_rows);
  if (query && *query_name && *data_name)
    printf("%zu row%s of %s classified against %s (k=%zu %s)\n", n_rows, n_rows == 1 ? "" : "s",
           query_name, data_name, options->k, metric);
  else if (query)
    printf("%zu row%s classified against %zu labelled row%s (k=%zu %s)\n", n_rows,
           n_rows == 1 ? "" : "s", n_labelled, n_labelled == 1 ? "" : "s", options->k, metric);
  else if (folds == 0)
    printf("leave-one-out over %s (k=%zu %s)\n", data, options->k, metric);
  else
    printf("%zu-fold stratified cross-validation over %s (seed %u, k=%zu %s)\n", folds, data, seed,
           options->k, metric);
}

/* Query rows that the class table lists get their true class from it (a held-out set whose
 * classes are known): the metrics are then reported as for cross-validation. */
static gboolean knnwb_classify_query_truth(const KnnwbParamValue *p, const KnnwbMatrix *query,
                                           const KnnwbClasses *classes, int32_t *truth,
                                           GError **error)
{
  if (p[CLASSES].v_string == NULL)
    return TRUE;
  g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(p[CLASSES].v_string, error);
  g_autofree int32_t *listed = g_new(int32_t, MAX(query->n_rows, (size_t)1));
  size_t unseen = 0;
  if (table == NULL ||
      !knnwb_classes_match_table(query, table, p[ID_COLUMN].v_string, p[COLUMN].v_string, classes,
                                 listed, &unseen, error))
    return FALSE;
  for (size_t i = 0; i < query->n_rows; i++)
    if (truth[i] < 0)
      truth[i] = listed[i];
  if (unseen > 0)
    g_warning("%zu query row%s of a class that no labelled row has (not scored: it cannot be "
              "predicted)",
              unseen, unseen == 1 ? "" : "s");
  return TRUE;
}

static gboolean knnwb_classify_step_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbParamValue *p = context->params;
  const KnnwbMatrix *data = context->inputs[0]->matrix;
  const KnnwbMatrix *query = context->inputs[1] ? context->inputs[1]->matrix : NULL;
  g_autoptr(GArray) devices = g_array_new(FALSE, FALSE, sizeof(int));
  KnnwbKnnOptions options;
  size_t folds = 5;
  if (!knnwb_knn_plugin_options(context, &options, devices, error) ||
      !knnwb_classify_folds_from_string(p[FOLDS].v_string, &folds, error))
    return FALSE;
  g_autoptr(KnnwbClasses) classes = NULL;
  if (p[CLASSES].v_string != NULL) {
    if (*p[COLUMN].v_string == '\0') {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "classes: name the table's class column (parameter 'column')");
      return FALSE;
    }
    g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(p[CLASSES].v_string, error);
    if (table == NULL || !knnwb_classes_from_table(data, table, p[ID_COLUMN].v_string,
                                                   p[COLUMN].v_string, &classes, error))
      return FALSE;
  } else if (*p[ANNOTATION].v_string != '\0') {
    const char *name = *p[DATA_NAME].v_string ? p[DATA_NAME].v_string : "data";
    g_autoptr(KnnwbAnnotationTable) table =
        knnwb_annotation_from_matrix(data, KNNWB_MATRIX_ROWS, p[ANNOTATION].v_string, name, error);
    if (table == NULL ||
        !knnwb_classes_from_table(data, table, NULL, p[ANNOTATION].v_string, &classes, error))
      return FALSE;
  } else if (!knnwb_classes_from_rows(data, &classes, error)) {
    return FALSE;
  }
  if (classes->n_classes == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA, "no row has a known class");
    return FALSE;
  }
  const KnnwbMatrix *rows = query ? query : data;
  const size_t n = rows->n_rows;
  g_autofree int32_t *predicted = g_new(int32_t, MAX(n, (size_t)1));
  g_autofree int32_t *votes = g_new(int32_t, MAX(n, (size_t)1));
  g_autofree int32_t *truth = g_new(int32_t, MAX(n, (size_t)1));
  g_autofree int32_t *fold = NULL;
  knnwb_classes_warn_single(classes);
  if (query != NULL) {
    knnwb_classes_match_by_label(query, data, classes, truth);
    if (!knnwb_classify_query_truth(p, query, classes, truth, error))
      return FALSE;
    if (!knnwb_classify_query(data, classes->of, classes->n_classes, query, &options, predicted,
                              votes, error))
      return FALSE;
  } else {
    fold = g_new(int32_t, MAX(n, (size_t)1));
    memcpy(truth, classes->of, n * sizeof(int32_t));
    if (!knnwb_classify_cross_validate(data, classes, folds, (guint32)p[SEED].v_int, &options, fold,
                                       predicted, votes, error))
      return FALSE;
  }
  if (!knnwb_classify_write_predictions(p[PREDICTIONS].v_string, rows, classes->names, truth,
                                        predicted, votes, fold, options.k, error))
    return FALSE;
  g_autoptr(KnnwbClassifyMetrics) metrics =
      knnwb_classify_metrics_new(truth, predicted, n, classes->n_classes);
  if (p[PRINT].v_int) {
    knnwb_classify_step_print(query != NULL, n, data->n_rows, folds, (guint32)p[SEED].v_int,
                              &options, p[DATA_NAME].v_string, p[QUERY_NAME].v_string);
    if (metrics->n_scored > 0)
      knnwb_classify_metrics_print(stdout, metrics, classes->names);
  } else if (metrics->n_scored > 0) {
    g_message("%s: accuracy %.4f (%zu of %zu)", context->step_id,
              (double)metrics->n_correct / (double)metrics->n_scored, metrics->n_correct,
              metrics->n_scored);
  }
  return p[METRICS].v_string == NULL ||
         knnwb_classify_write_metrics(p[METRICS].v_string, metrics, classes->names, error);
}

/* The fold count and the common parameters, as the run parses them (validation finds a typo
 * before any step runs). */
static gboolean knnwb_classify_step_check(const KnnwbParamValue *params, GError **error)
{
  size_t folds = 0;
  return knnwb_knn_plugin_check(params, error) &&
         knnwb_classify_folds_from_string(params[FOLDS].v_string, &folds, error);
}

const KnnwbStepType knnwb_knn_step_classify = {
    "knn-classify",
    "kNN classification: majority vote, stratified cross-validation or a query set, metrics",
    knnwb_classify_inputs,
    G_N_ELEMENTS(knnwb_classify_inputs),
    knnwb_classify_params,
    N_PARAMS,
    KNNWB_KIND_NONE,
    knnwb_classify_step_run,
    0,
    knnwb_classify_step_check,
};
