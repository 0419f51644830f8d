/* `knnwb classify INPUT --classes TABLE:COLUMN -k K -o predictions.tsv`: kNN classification with
 * stratified cross-validation (or of new samples, --query), metrics on stdout. */
#include <knnwb/classify.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include "options.h"
#include "runtime/runtime.h"

int knnwb_host_command_classify(int argc, char **argv)
{
  KnnwbHostInputArgs input = {0};
  KnnwbHostKnnArgs knn = {0};
  char *classes_spec = NULL, *classes_id = NULL, *folds_text = NULL, *query_path = NULL;
  char *output = NULL, *metrics_path = NULL;
  char **rest = NULL;
  gint64 seed = 1;
  gboolean quiet = FALSE;
  GOptionEntry entries[] = {
      {"classes", 'c', 0, G_OPTION_ARG_STRING, &classes_spec,
       "Class labels: a column of a table (TSV/CSV with a header) whose first column names the "
       "rows; default: the CIBM <SamplesClasses> of a transposed file",
       "TABLE:COLUMN"},
      {"classes-id", 0, 0, G_OPTION_ARG_STRING, &classes_id,
       "The table's column of row names (default: its first column)", "COLUMN"},
      {"folds", 0, 0, G_OPTION_ARG_STRING, &folds_text,
       "Cross-validation: N stratified folds (default 5) or loo (leave-one-out)", "N|loo"},
      {"seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Seed of the fold assignment (default 1)", "S"},
      {"query", 0, 0, G_OPTION_ARG_FILENAME, &query_path,
       "Classify the rows of FILE against all labelled rows instead of cross-validating (read "
       "with the same options as INPUT)",
       "FILE"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
       "Predictions: label, true_class, predicted, votes, fold, correct", "OUT.tsv"},
      {"metrics", 0, 0, G_OPTION_ARG_FILENAME, &metrics_path,
       "Also write the metrics (accuracy, precision/recall, confusion) to FILE", "FILE"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "No metrics on stdout, no progress", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &rest, NULL, "INPUT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("-k K -o OUT.tsv");
  g_option_context_set_summary(
      context,
      "k-nearest-neighbour classification of INPUT's rows (samples as rows: --transpose): each\n"
      "row gets the majority class of its k nearest labelled rows, a tie going to the class of\n"
      "the nearest neighbour among the tied classes. Stratified cross-validation (--folds N,\n"
      "fixed --seed) or leave-one-out (--folds loo); rows of unknown class (empty or NA) are\n"
      "classified against all labelled rows. Accuracy, per-class precision/recall and the\n"
      "confusion matrix go to stdout.");
  g_option_context_set_description(
      context,
      "Examples:\n"
      "  knnwb classify expr.tsv --transpose --classes clinical.tsv:Group -k 5 -o pred.tsv\n"
      "  knnwb classify demo-expression.txt --transpose --folds loo -k 3 -o pred.tsv\n"
      "  knnwb classify expr.tsv -T --classes clinical.tsv:Group -k 5 --query new.tsv -o "
      "new.tsv\n\n"
      "Exit status: 0 on success, 1 on a failure (file:line: messages), 2 on a usage error, "
      "130/143 when\ninterrupted; no output is left behind by a failed run.");
  g_option_context_add_main_entries(context, entries, NULL);
  knnwb_host_knn_add_entries(context, &knn);
  knnwb_host_input_add_entries(context, &input);

  int status = 1;
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbMatrix) data = NULL;
  g_autoptr(KnnwbMatrix) query = NULL;
  g_autoptr(KnnwbClasses) classes = NULL;
  g_autoptr(KnnwbClassifyMetrics) metrics = NULL;
  g_autofree int32_t *fold = NULL, *predicted = NULL, *votes = NULL, *truth = NULL;
  g_autoptr(GPtrArray) outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free);
  KnnwbReadOptions read_options;
  KnnwbKnnOptions options;
  size_t folds = 5;
  gboolean usage = TRUE;
  KnnwbHostProgress *progress = NULL;
  /* Before the first goto: clang refuses a jump over a cleanup variable's initialisation. */
  g_autofree char *table_path = NULL, *column = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error))
    goto fail;
  if (rest == NULL || rest[0] == NULL || rest[1] != NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                rest == NULL || rest[0] == NULL ? "no INPUT file given"
                                                : "one INPUT file expected");
    goto fail;
  }
  if (output == NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "-o OUT.tsv is required");
    goto fail;
  }
  if (seed < 0 || seed > G_MAXUINT32) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "--seed must be 0 .. 2^32-1");
    goto fail;
  }
  if (query_path != NULL && folds_text != NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--query classifies new rows with the whole labelled set; --folds is for "
                "cross-validation: give one of them");
    goto fail;
  }
  if ((folds_text && !knnwb_classify_folds_from_string(folds_text, &folds, &error)) ||
      !knnwb_host_knn_options(&knn, TRUE, &options, &error) ||
      !knnwb_host_input_options(&input, &read_options, &error) ||
      (classes_spec && !knnwb_annotation_parse_spec(classes_spec, &table_path, &column, &error)))
    goto fail;
  usage = FALSE;
  if (!knnwb_host_check_output(output, &error) ||
      (metrics_path && !knnwb_host_check_output(metrics_path, &error)))
    goto fail;
  options.cancel = knnwb_host_signals_install();
  options.data_name = rest[0];
  /* Temporaries renamed into place together at the end; created now to prove the directories. */
  const char *predictions_temporary = knnwb_host_outputs_add(outputs, output, &error);
  const char *metrics_temporary = NULL;
  if (predictions_temporary == NULL ||
      (metrics_path != NULL &&
       (metrics_temporary = knnwb_host_outputs_add(outputs, metrics_path, &error)) == NULL))
    goto fail;
  knnwb_host_log_set_quiet(quiet);
  void *read_progress = knnwb_host_input_watch(&read_options, options.cancel, quiet);
  gboolean read = knnwb_formats_read_matrix(rest[0], &read_options, &data, NULL, &error);
  knnwb_host_progress_finish(read_progress);
  read_options.progress = NULL; /* the query file, if any, is read under the classify line */
  if (!read)
    goto fail;
  if (table_path != NULL) {
    g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(table_path, &error);
    if (table == NULL ||
        !knnwb_classes_from_table(data, table, classes_id, column, &classes, &error))
      goto fail;
  } else if (!knnwb_classes_from_rows(data, &classes, &error)) {
    g_prefix_error(&error, "%s: ", rest[0]);
    goto fail;
  }
  if (classes->n_classes == 0) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA, "%s: no row has a known class",
                rest[0]);
    goto fail;
  }
  progress = knnwb_host_progress_new("classify", quiet);
  options.progress = progress ? knnwb_host_progress_update : NULL;
  options.progress_data = progress;
  const KnnwbMatrix *rows = data;
  gboolean classified;
  if (query_path != NULL) {
    if (!knnwb_formats_read_matrix(query_path, &read_options, &query, NULL, &error)) {
      knnwb_host_progress_finish(progress);
      goto fail;
    }
    rows = query;
    predicted = g_new(int32_t, MAX(query->n_rows, (size_t)1));
    votes = g_new(int32_t, MAX(query->n_rows, (size_t)1));
    truth = g_new(int32_t, MAX(query->n_rows, (size_t)1));
    /* A query row that is also a labelled row (by name) shows its known class. */
    knnwb_classes_match_by_label(query, data, classes, truth);
    classified = knnwb_classify_query(data, classes->of, classes->n_classes, query, &options,
                                      predicted, votes, &error);
    if (!classified && error->code == KNNWB_ERROR_INVALID_ARGUMENT)
      g_prefix_error(&error, "%s: ", query_path); /* which file's columns */
  } else {
    fold = g_new(int32_t, MAX(data->n_rows, (size_t)1));
    predicted = g_new(int32_t, MAX(data->n_rows, (size_t)1));
    votes = g_new(int32_t, MAX(data->n_rows, (size_t)1));
    truth = g_memdup2(classes->of, MAX(data->n_rows, (size_t)1) * sizeof(int32_t));
    classified = knnwb_classify_cross_validate(data, classes, folds, (guint32)seed, &options, fold,
                                               predicted, votes, &error);
  }
  knnwb_host_progress_finish(progress);
  if (!classified)
    goto fail;
  metrics = knnwb_classify_metrics_new(truth, predicted, rows->n_rows, classes->n_classes);
  if (!knnwb_classify_write_predictions(predictions_temporary, rows, classes->names, truth,
                                        predicted, votes, fold, options.k, &error))
    goto fail;
  if (metrics_temporary != NULL &&
      !knnwb_classify_write_metrics(metrics_temporary, metrics, classes->names, &error))
    goto fail;
  if (!knnwb_host_outputs_commit(outputs, options.cancel, &error))
    goto fail;
  if (!quiet) {
    if (query_path != NULL)
      printf("%zu row%s of %s classified against %s (k=%zu %s)\n", rows->n_rows,
             KNNWB_PLURAL(rows->n_rows), query_path, rest[0], options.k,
             knnwb_metric_to_string(options.metric));
    else if (folds == 0)
      printf("leave-one-out over %s (k=%zu %s)\n", rest[0], options.k,
             knnwb_metric_to_string(options.metric));
    else
      printf("%zu-fold stratified cross-validation over %s (seed %" G_GINT64_FORMAT ", k=%zu %s)\n",
             folds, rest[0], seed, options.k, knnwb_metric_to_string(options.metric));
    if (metrics->n_scored > 0)
      knnwb_classify_metrics_print(stdout, metrics, classes->names);
  }
  status = 0;
  goto done;
fail:
  knnwb_host_outputs_discard(outputs);
  knnwb_host_outputs_name_targets(outputs, error);
  status = knnwb_host_command_fail("classify", error, usage);
done:
  knnwb_host_input_clear(&input);
  knnwb_host_knn_clear(&knn);
  g_free(classes_spec);
  g_free(classes_id);
  g_free(folds_text);
  g_free(query_path);
  g_free(output);
  g_free(metrics_path);
  g_strfreev(rest);
  return status;
}
