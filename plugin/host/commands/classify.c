/* `knnwb classify INPUT --classes TABLE:COLUMN -k K -o predictions.tsv`: kNN classification with
 * stratified cross-validation (or of new samples, --query), metrics on stdout. */
#include <knnwb/classify.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include "options.h"
#include "runtime/runtime.h"

typedef struct {
  KnnwbHostInputArgs input;
  KnnwbHostKnnArgs knn;
  char *classes_spec, *classes_id, *folds_text, *query_path;
  char *output, *metrics_path;
  char **rest;
  gint64 seed;
  gboolean quiet;
} KnnwbClassifyCommand;

/* One run: the parsed options, the rows and their classes, the predictions. */
typedef struct {
  KnnwbClassifyCommand command;
  KnnwbReadOptions read_options;
  KnnwbKnnOptions options;
  size_t folds;              /* 0: leave-one-out */
  char *table_path, *column; /* --classes TABLE:COLUMN */
  GPtrArray *outputs;        /* KnnwbPipelineOutput */
  const char *predictions_temporary, *metrics_temporary;
  KnnwbMatrix *data, *query;
  const KnnwbMatrix *rows; /* what was classified: data or query */
  KnnwbClasses *classes;
  int32_t *fold, *predicted, *votes, *truth; /* per row of rows */
  KnnwbClassifyMetrics *metrics;
} KnnwbClassifyRun;

static void knnwb_classify_run_clear(KnnwbClassifyRun *run)
{
  KnnwbClassifyCommand *command = &run->command;
  knnwb_host_input_clear(&command->input);
  knnwb_host_knn_clear(&command->knn);
  g_free(command->classes_spec);
  g_free(command->classes_id);
  g_free(command->folds_text);
  g_free(command->query_path);
  g_free(command->output);
  g_free(command->metrics_path);
  g_strfreev(command->rest);
  g_free(run->table_path);
  g_free(run->column);
  g_ptr_array_unref(run->outputs);
  knnwb_matrix_free(run->data);
  knnwb_matrix_free(run->query);
  g_clear_pointer(&run->classes, knnwb_classes_free);
  g_free(run->fold);
  g_free(run->predicted);
  g_free(run->votes);
  g_free(run->truth);
  g_clear_pointer(&run->metrics, knnwb_classify_metrics_free);
}

/* The options of knnwb classify, into command. */
static GOptionContext *knnwb_classify_options_new(KnnwbClassifyCommand *command)
{
  GOptionContext *context = g_option_context_new("-k K -o OUT.tsv");
  GOptionEntry entries[] = {
      {"classes", 'c', 0, G_OPTION_ARG_STRING, &command->classes_spec,
       "Class labels: a column of a table (TSV/CSV with a header) whose first column names the "
       "rows; default: the CIBM <SamplesClasses> of a transposed file",
       "TABLE:COLUMN"},
      {"classes-id", 0, 0, G_OPTION_ARG_STRING, &command->classes_id,
       "The table's column of row names (default: its first column)", "COLUMN"},
      {"folds", 0, 0, G_OPTION_ARG_STRING, &command->folds_text,
       "Cross-validation: N stratified folds (default 5) or loo (leave-one-out)", "N|loo"},
      {"seed", 0, 0, G_OPTION_ARG_INT64, &command->seed, "Seed of the fold assignment (default 1)",
       "S"},
      {"query", 0, 0, G_OPTION_ARG_FILENAME, &command->query_path,
       "Classify the rows of FILE against all labelled rows instead of cross-validating (read "
       "with the same options as INPUT)",
       "FILE"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &command->output,
       "Predictions: label, true_class, predicted, votes, fold, correct", "OUT.tsv"},
      {"metrics", 0, 0, G_OPTION_ARG_FILENAME, &command->metrics_path,
       "Also write the metrics (accuracy, precision/recall, confusion) to FILE", "FILE"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &command->quiet, "No metrics on stdout, no progress",
       NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &command->rest, NULL, "INPUT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
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
  knnwb_host_knn_add_entries(context, &command->knn);
  knnwb_host_input_add_entries(context, &command->input);
  return context;
}

/* The command line into run (usage errors). */
static gboolean knnwb_classify_parse(GOptionContext *context, int argc, char **argv,
                                     KnnwbClassifyRun *run, GError **error)
{
  KnnwbClassifyCommand *command = &run->command;
  if (!g_option_context_parse(context, &argc, &argv, error) ||
      !knnwb_host_one_input(command->rest, error) ||
      !knnwb_host_required(command->output != NULL, "-o OUT.tsv", error))
    return FALSE;
  if (command->seed < 0 || command->seed > G_MAXUINT32) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "--seed must be 0 .. 2^32-1");
    return FALSE;
  }
  if (command->query_path != NULL && command->folds_text != NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--query classifies new rows with the whole labelled set; --folds is for "
                "cross-validation: give one of them");
    return FALSE;
  }
  return (command->folds_text == NULL ||
          knnwb_classify_folds_from_string(command->folds_text, &run->folds, error)) &&
         knnwb_host_knn_options(&command->knn, TRUE, &run->options, error) &&
         knnwb_host_input_options(&command->input, &run->read_options, error) &&
         (command->classes_spec == NULL ||
          knnwb_annotation_parse_spec(command->classes_spec, &run->table_path, &run->column,
                                      error));
}

/* Temporaries renamed into place together at the end; created now to prove the directories. */
static gboolean knnwb_classify_prepare(KnnwbClassifyRun *run, GError **error)
{
  const KnnwbClassifyCommand *command = &run->command;
  if (!knnwb_host_check_output(command->output, error) ||
      (command->metrics_path && !knnwb_host_check_output(command->metrics_path, error)))
    return FALSE;
  run->options.cancel = knnwb_host_signals_install();
  run->options.data_name = command->rest[0];
  run->predictions_temporary = knnwb_host_outputs_add(run->outputs, command->output, error);
  return run->predictions_temporary != NULL &&
         (command->metrics_path == NULL ||
          (run->metrics_temporary =
               knnwb_host_outputs_add(run->outputs, command->metrics_path, error)) != NULL);
}

/* The labelled rows and their classes (from the table, or the CIBM file's own). */
static gboolean knnwb_classify_read(KnnwbClassifyRun *run, GError **error)
{
  const KnnwbClassifyCommand *command = &run->command;
  void *progress = knnwb_host_input_watch(&run->read_options, run->options.cancel, command->quiet);
  gboolean read =
      knnwb_formats_read_matrix(command->rest[0], &run->read_options, &run->data, NULL, error);
  knnwb_host_progress_finish(progress);
  run->read_options.progress = NULL; /* the query file, if any, is read under the classify line */
  if (!read)
    return FALSE;
  if (run->table_path != NULL) {
    g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(run->table_path, error);
    if (table == NULL || !knnwb_classes_from_table(run->data, table, command->classes_id,
                                                   run->column, &run->classes, error))
      return FALSE;
  } else if (!knnwb_classes_from_rows(run->data, &run->classes, error)) {
    g_prefix_error(error, "%s: ", command->rest[0]);
    return FALSE;
  }
  if (run->classes->n_classes == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA, "%s: no row has a known class",
                command->rest[0]);
    return FALSE;
  }
  return TRUE;
}

/* The query rows against every labelled row, or the cross-validation of the labelled rows. */
static gboolean knnwb_classify_predict(KnnwbClassifyRun *run, GError **error)
{
  const KnnwbClassifyCommand *command = &run->command;
  const KnnwbMatrix *data = run->data;
  if (command->query_path == NULL) {
    const size_t n = MAX(data->n_rows, (size_t)1);
    run->rows = data;
    run->fold = g_new(int32_t, n);
    run->predicted = g_new(int32_t, n);
    run->votes = g_new(int32_t, n);
    run->truth = g_memdup2(run->classes->of, n * sizeof(int32_t));
    return knnwb_classify_cross_validate(data, run->classes, run->folds, (guint32)command->seed,
                                         &run->options, run->fold, run->predicted, run->votes,
                                         error);
  }
  if (!knnwb_formats_read_matrix(command->query_path, &run->read_options, &run->query, NULL, error))
    return FALSE;
  const size_t n = MAX(run->query->n_rows, (size_t)1);
  run->rows = run->query;
  run->predicted = g_new(int32_t, n);
  run->votes = g_new(int32_t, n);
  run->truth = g_new(int32_t, n);
  /* A query row that is also a labelled row (by name) shows its known class. */
  knnwb_classes_match_by_label(run->query, data, run->classes, run->truth);
  gboolean classified =
      knnwb_classify_query(data, run->classes->of, run->classes->n_classes, run->query,
                           &run->options, run->predicted, run->votes, error);
  if (!classified && (*error)->code == KNNWB_ERROR_INVALID_ARGUMENT)
    g_prefix_error(error, "%s: ", command->query_path); /* which file's columns */
  return classified;
}

static void knnwb_classify_print_summary(const KnnwbClassifyRun *run)
{
  const KnnwbClassifyCommand *command = &run->command;
  const char *metric = knnwb_metric_to_string(run->options.metric);
  if (command->query_path != NULL)
    printf("%zu row%s of %s classified against %s (k=%zu %s)\n", run->rows->n_rows,
           KNNWB_PLURAL(run->rows->n_rows), command->query_path, command->rest[0], run->options.k,
           metric);
  else if (run->folds == 0)
    printf("leave-one-out over %s (k=%zu %s)\n", command->rest[0], run->options.k, metric);
  else
    printf("%zu-fold stratified cross-validation over %s (seed %" G_GINT64_FORMAT ", k=%zu %s)\n",
           run->folds, command->rest[0], command->seed, run->options.k, metric);
  if (run->metrics->n_scored > 0)
    knnwb_classify_metrics_print(stdout, run->metrics, run->classes->names);
}

/* Reads, classifies with its progress line, writes and commits. */
static gboolean knnwb_classify_execute(KnnwbClassifyRun *run, GError **error)
{
  knnwb_host_log_set_quiet(run->command.quiet);
  if (!knnwb_classify_read(run, error))
    return FALSE;
  KnnwbHostProgress *progress = knnwb_host_progress_new("classify", run->command.quiet);
  run->options.progress = progress ? knnwb_host_progress_update : NULL;
  run->options.progress_data = progress;
  gboolean classified = knnwb_classify_predict(run, error);
  knnwb_host_progress_finish(progress);
  run->options.progress = NULL;
  run->options.progress_data = NULL;
  if (!classified)
    return FALSE;
  const KnnwbClasses *classes = run->classes;
  run->metrics =
      knnwb_classify_metrics_new(run->truth, run->predicted, run->rows->n_rows, classes->n_classes);
  if (!knnwb_classify_write_predictions(run->predictions_temporary, run->rows, classes->names,
                                        run->truth, run->predicted, run->votes, run->fold,
                                        run->options.k, error) ||
      (run->metrics_temporary != NULL &&
       !knnwb_classify_write_metrics(run->metrics_temporary, run->metrics, classes->names,
                                     error)) ||
      !knnwb_host_outputs_commit(run->outputs, run->options.cancel, error))
    return FALSE;
  if (!run->command.quiet)
    knnwb_classify_print_summary(run);
  return TRUE;
}

int knnwb_host_command_classify(int argc, char **argv)
{
  KnnwbClassifyRun run = {.command = {.seed = 1},
                          .folds = 5,
                          .outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free)};
  g_autoptr(GOptionContext) context = knnwb_classify_options_new(&run.command);
  g_autoptr(GError) error = NULL;
  const gboolean parsed = knnwb_classify_parse(context, argc, argv, &run, &error);
  const gboolean done =
      parsed && knnwb_classify_prepare(&run, &error) && knnwb_classify_execute(&run, &error);
  const int status = knnwb_host_command_finish("classify", parsed, done, run.outputs, error);
  knnwb_classify_run_clear(&run);
  return status;
}
