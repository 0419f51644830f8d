/* `knnwb classify INPUT --classes TABLE:COLUMN -k K -o predictions.tsv`: kNN classification with
 * stratified cross-validation (or of new samples, --query), metrics on stdout. The options become
 * the steps load-matrix and knn-classify, run by the pipeline runner. */
#include <knnwb/classify.h>
#include <string.h>
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

/* One run: the parsed options and the steps they stand for. */
typedef struct {
  KnnwbClassifyCommand command;
  KnnwbReadOptions read_options;
  KnnwbKnnOptions options;
  size_t folds;                /* 0: leave-one-out */
  char *table_path, *column;   /* --classes TABLE:COLUMN */
  KnnwbHostRegistry *registry; /* outlives pipeline, whose steps point into it */
  KnnwbPipeline *pipeline;
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
  knnwb_pipeline_free(run->pipeline);
  knnwb_host_registry_free(run->registry);
}

/* The options of knnwb classify, into command. */
static GOptionContext *knnwb_classify_options_new(KnnwbClassifyCommand *command)
{
  GOptionContext *context = g_option_context_new("-k K -o OUT.tsv");
  GOptionEntry entries[] = {
      {"classes", 'c', 0, G_OPTION_ARG_STRING, &command->classes_spec,
       "Class labels: a column of a table (TSV/CSV with a header) whose first column names the "
       "rows, or a bare COLUMN of INPUT's own sample annotation (a GEO characteristic, read "
       "--transpose); NA, empty or NaN: unknown, predicted; default: the sample classes "
       "of a CIBM file (the seed papers' microarray text format), read --transpose",
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

/* The files of the run, for the checks every command shares on the names at parse time (the
 * runner checks the rest, as every pipeline's, before the first step). */
static KnnwbHostFiles *knnwb_classify_files(const KnnwbClassifyCommand *command)
{
  KnnwbHostFiles *files = knnwb_host_files_new();
  knnwb_host_input_files(files, command->rest[0], &command->input);
  knnwb_host_files_input(files, command->query_path, "--query");
  g_autofree char *table = knnwb_host_spec_table(command->classes_spec);
  knnwb_host_files_side_input(files, table, "--classes");
  knnwb_host_files_output(files, command->output, "-o");
  knnwb_host_files_output(files, command->metrics_path, "--metrics");
  return files;
}

/* The command line into run (usage errors). */
static gboolean knnwb_classify_parse(GOptionContext *context, int argc, char **argv,
                                     KnnwbClassifyRun *run, GError **error)
{
  KnnwbClassifyCommand *command = &run->command;
  if (!knnwb_host_options_parse(context, "classify", &argc, &argv, error) ||
      !knnwb_host_one_input(command->rest, error) ||
      !knnwb_host_required(command->output != NULL, "-o OUT.tsv", error))
    return FALSE;
  g_autoptr(KnnwbHostFiles) files = knnwb_classify_files(command);
  if (!knnwb_host_files_check_names(files, error))
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
         (command->classes_spec == NULL || strchr(command->classes_spec, ':') == NULL ||
          knnwb_annotation_parse_spec(command->classes_spec, &run->table_path, &run->column,
                                      error));
}

/* The options as steps: read INPUT (and --query), then knn-classify, which writes the files and
 * prints the summary. */
static void knnwb_classify_build(KnnwbClassifyRun *run)
{
  const KnnwbClassifyCommand *command = &run->command;
  KnnwbPipeline *pipeline = run->pipeline = knnwb_pipeline_new(NULL);
  /* spearman ranks the values as read (double), before they are stored as float32. */
  const gboolean ranks = run->options.metric == KNNWB_METRIC_SPEARMAN;
  knnwb_host_input_add_step(pipeline, "read", command->rest[0], NULL, &command->input);
  if (ranks)
    knnwb_pipeline_add_param(pipeline, "spearman-ranks", "true", "--metric");
  if (command->query_path != NULL) {
    knnwb_host_input_add_step(pipeline, "query", command->query_path, "--query", &command->input);
    if (ranks)
      knnwb_pipeline_add_param(pipeline, "spearman-ranks", "true", "--metric");
  }
  knnwb_pipeline_add_step(pipeline, "classify", "knn-classify");
  knnwb_pipeline_add_input(pipeline, "data", "read");
  if (command->query_path != NULL)
    knnwb_pipeline_add_input(pipeline, "query", "query");
  knnwb_host_knn_add_params(pipeline, &command->knn);
  if (run->table_path != NULL) {
    knnwb_pipeline_add_param(pipeline, "classes", run->table_path, "--classes");
    knnwb_pipeline_add_param(pipeline, "column", run->column, "--classes");
  } else if (command->classes_spec != NULL)
    knnwb_pipeline_add_param(pipeline, "annotation", command->classes_spec, "--classes");
  if (command->classes_id != NULL)
    knnwb_pipeline_add_param(pipeline, "id-column", command->classes_id, "--classes-id");
  if (command->folds_text != NULL)
    knnwb_pipeline_add_param(pipeline, "folds", command->folds_text, "--folds");
  g_autofree char *seed = g_strdup_printf("%" G_GINT64_FORMAT, command->seed);
  knnwb_pipeline_add_param(pipeline, "seed", seed, "--seed");
  knnwb_pipeline_add_param(pipeline, "predictions", command->output, "-o");
  if (command->metrics_path != NULL)
    knnwb_pipeline_add_param(pipeline, "metrics", command->metrics_path, "--metrics");
  if (!command->quiet) {
    knnwb_pipeline_add_param(pipeline, "print", "true", NULL);
    knnwb_pipeline_add_param(pipeline, "data-name", command->rest[0], NULL);
    if (command->query_path != NULL)
      knnwb_pipeline_add_param(pipeline, "query-name", command->query_path, NULL);
  }
}

/* The steps checked, then run by the runner (outputs, progress, Ctrl-C, ranks). */
static gboolean knnwb_classify_execute(KnnwbClassifyRun *run, GError **error)
{
  knnwb_host_log_set_quiet(run->command.quiet);
  knnwb_classify_build(run);
  run->registry = knnwb_host_registry_load(NULL, TRUE);
  KnnwbPipelineOptions options = {.quiet = run->command.quiet, .quiet_steps = TRUE};
  /* Under mpirun every rank checks the files on its own file system before the runner meets. */
  return knnwb_pipeline_ranks_ready(
             knnwb_pipeline_prepare(run->pipeline, run->registry, &options, error), error) &&
         knnwb_pipeline_run(run->pipeline, &options, knnwb_host_signals_install(), error);
}

int knnwb_host_command_classify(int argc, char **argv)
{
  KnnwbClassifyRun run = {.command = {.seed = 1}, .folds = 5};
  g_autoptr(GOptionContext) context = knnwb_classify_options_new(&run.command);
  g_autoptr(GError) error = NULL;
  const gboolean parsed = knnwb_classify_parse(context, argc, argv, &run, &error);
  const gboolean done = parsed && knnwb_classify_execute(&run, &error);
  /* The runner removed every output of a failed run. */
  g_autoptr(GPtrArray) outputs = g_ptr_array_new();
  const int status = knnwb_host_command_finish("classify", parsed, done, outputs, error);
  knnwb_classify_run_clear(&run);
  return status;
}
