/* Options and helpers shared by the workflow commands. */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <knnwb/device_list.h>
#include <knnwb/error.h>
#include <knnwb/phenotype.h>
#include "options.h"
#include "runtime/runtime.h"
#include "steps/steps.h"

const char *knnwb_host_help_choices(const KnnwbEnumTable *table, const char *prefix,
                                    const char *note, const char *skip, const char *suffix)
{
  g_autoptr(GString) text = g_string_new(prefix);
  size_t n_shown = 0, n_listed = 0;
  for (size_t i = 0; i < table->n_listed; i++)
    n_listed += g_strcmp0(table->names[i].name, skip) != 0;
  for (size_t i = 0; i < table->n_listed; i++) {
    if (g_strcmp0(table->names[i].name, skip) == 0)
      continue;
    if (n_shown > 0)
      g_string_append(text, n_shown + 1 == n_listed ? " or " : ", ");
    g_string_append(text, table->names[i].name);
    if (n_shown++ == 0)
      g_string_append(text, note);
  }
  g_string_append(text, suffix);
  return g_intern_string(text->str);
}

gboolean knnwb_host_option_choice(const KnnwbEnumTable *table, const char *option,
                                  const char *value, int *parsed, GError **error)
{
  if (knnwb_enum_from_string(table, value, parsed, NULL))
    return TRUE;
  g_autofree char *known = knnwb_enum_list(table, ", ", " or ");
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "%s must be %s (got '%s')", option,
              known, value);
  return FALSE;
}

void knnwb_host_input_add_entries(GOptionContext *context, KnnwbHostInputArgs *args)
{
  GOptionEntry entries[] = {
      {"format", 'f', 0, G_OPTION_ARG_STRING, &args->format,
       knnwb_host_help_choices(&knnwb_input_table, "Input format: ", " (default)", NULL,
                               " (gzip-compressed or not)"),
       "F"},
      {"transpose", 'T', 0, G_OPTION_ARG_NONE, &args->transpose,
       "The file's columns are the points (samples as rows)", NULL},
      {"header", 0, 0, G_OPTION_ARG_STRING, &args->header,
       knnwb_host_help_choices(&knnwb_header_table, "CSV/TSV: is the first line a header? ",
                               " (default)", NULL, ""),
       KNNWB_ENUM_CHOICES(KNNWB_HEADER_NAMES)},
      {"label-column", 0, 0, G_OPTION_ARG_STRING, &args->label_column,
       "CSV/TSV: the row labels' column, counted from 1 (default 1), a header name, or none",
       "N|NAME|none"},
      {"labels", 0, 0, G_OPTION_ARG_FILENAME, &args->labels,
       "A side file with one label per row of the file (any format; replaces the file's own "
       "row labels)",
       "FILE"},
      {"drop-missing", 0, 0, G_OPTION_ARG_NONE, &args->drop_missing,
       "Rows with missing values (NA, empty, NaN, Inf) get no edges and keep their numbers, "
       "instead of failing",
       NULL},
      {"skip-columns", 0, 0, G_OPTION_ARG_STRING, &args->skip_columns,
       "CSV/TSV: annotation columns to leave out (header names or numbers from 1, "
       "comma-separated); without it a text second column is left out with a warning",
       "NAME,..."},
      {"use-rep", 0, 0, G_OPTION_ARG_STRING, &args->use_rep,
       ".h5ad: the points' coordinates from obsm[NAME] (X_pca, say) instead of X", "NAME"},
      {"layer", 0, 0, G_OPTION_ARG_STRING, &args->layer,
       ".h5ad: the matrix layers[NAME] instead of X", "NAME"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_option_context_add_main_entries(context, entries, NULL);
}

void *knnwb_host_input_watch(KnnwbReadOptions *options, const volatile gint *cancel, gboolean quiet)
{
  KnnwbHostProgress *progress = knnwb_host_progress_new("read", quiet);
  knnwb_host_progress_set_unit(progress, "bytes");
  options->cancel = cancel;
  options->progress = progress ? knnwb_host_progress_update : NULL;
  options->progress_data = progress;
  return progress;
}

gboolean knnwb_host_input_options(const KnnwbHostInputArgs *args, KnnwbReadOptions *options,
                                  GError **error)
{
  knnwb_formats_read_options_init(options);
  options->group = knnwb_host_group(); /* under mpirun the ranks check a whole NPY read's rows */
  if (args->format && !knnwb_formats_input_from_string(args->format, &options->format, error))
    return FALSE;
  options->transpose = args->transpose;
  int header = KNNWB_HEADER_AUTO;
  if (args->header != NULL &&
      !knnwb_host_option_choice(&knnwb_header_table, "--header", args->header, &header, error))
    return FALSE;
  options->header = (KnnwbHeaderMode)header;
  if (args->label_column != NULL &&
      !knnwb_formats_label_column_from_string(args->label_column, options, error))
    return FALSE;
  options->labels_path = args->labels;
  if (args->drop_missing)
    options->missing = KNNWB_MISSING_DROP_ROWS;
  options->use_rep = args->use_rep;
  options->layer = args->layer;
  options->skip_columns = args->skip_columns;
  return TRUE;
}

void knnwb_host_input_clear(KnnwbHostInputArgs *args)
{
  g_free(args->format);
  g_free(args->header);
  g_free(args->label_column);
  g_free(args->labels);
  g_free(args->use_rep);
  g_free(args->layer);
  g_free(args->skip_columns);
}

void knnwb_host_knn_add_entries(GOptionContext *context, KnnwbHostKnnArgs *args)
{
  args->k = -1;
  GOptionEntry entries[] = {
      {"k", 'k', 0, G_OPTION_ARG_INT64, &args->k, "Neighbours per row (1 <= K < rows)", "K"},
      {"metric", 'm', 0, G_OPTION_ARG_STRING, &args->metric,
       knnwb_host_help_choices(&knnwb_metric_table, "", " (default)", NULL, ""), "M"},
      {"backend", 'b', 0, G_OPTION_ARG_STRING, &args->backend,
       knnwb_host_help_choices(&knnwb_backend_table, "", " (default)", NULL, ""), "B"},
      {"screen", 0, 0, G_OPTION_ARG_STRING, &args->screen,
       knnwb_host_help_choices(&knnwb_screen_table, "screening precision: ",
                               " (default: k <= 256 screens in fp16 on a GPU, fp32 on a CPU)", NULL,
                               "; tf32 and fp16 need a GPU, bf16 a CPU with BF16 instructions "
                               "(slower where many rows lie close); the lists are exact with each"),
       "P"},
      {"threads", 't', 0, G_OPTION_ARG_INT, &args->threads,
       "CPU threads (default: every core this process may run on)", "N"},
      {"memory", 0, 0, G_OPTION_ARG_STRING, &args->memory,
       "CPU working-memory budget for tiles, e.g. 512M, 4G (default 256M)", "BYTES"},
      {"devices", 0, 0, G_OPTION_ARG_STRING, &args->devices, "GPUs to use, e.g. 0,1 (default: all)",
       "LIST"},
      {"gpu-memory", 0, 0, G_OPTION_ARG_STRING, &args->gpu_memory,
       "Per-GPU memory budget (default: 90% of free)", "BYTES"},
      {"drop-degenerate", 0, 0, G_OPTION_ARG_NONE, &args->drop_degenerate,
       "Constant (pearson/spearman) or zero (cosine) rows get no neighbours, with a warning, "
       "instead of an error",
       NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_option_context_add_main_entries(context, entries, NULL);
}

gboolean knnwb_host_knn_options(KnnwbHostKnnArgs *args, gboolean k_required,
                                KnnwbKnnOptions *options, GError **error)
{
  knnwb_knn_options_init(options);
  options->group = knnwb_host_group(); /* under mpirun the ranks share every kNN run */
  if (args->k == -1 && k_required) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "-k K is required");
    return FALSE;
  }
  if (args->k != -1 && args->k < 1) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "-k %" G_GINT64_FORMAT ": k must be at least 1", args->k);
    return FALSE;
  }
  if (args->k != -1)
    options->k = (size_t)args->k;
  if (!knnwb_host_threads_check(args->threads, error))
    return FALSE;
  options->n_threads = args->threads;
  options->drop_degenerate = args->drop_degenerate;
  if ((args->metric && !knnwb_metric_from_string(args->metric, &options->metric, error)) ||
      (args->backend && !knnwb_backend_from_string(args->backend, &options->backend, error)) ||
      (args->screen && !knnwb_screen_from_string(args->screen, &options->screen, error)))
    return FALSE;
  guint64 bytes;
  if (args->memory) {
    if (!knnwb_host_parse_bytes(args->memory, &bytes, error))
      return FALSE;
    options->memory_bytes = (size_t)MIN(bytes, (guint64)SIZE_MAX);
  }
  if (args->gpu_memory) {
    if (!knnwb_host_parse_bytes(args->gpu_memory, &bytes, error))
      return FALSE;
    options->gpu_memory_bytes = (size_t)MIN(bytes, (guint64)SIZE_MAX);
  }
  if (args->devices) {
    if (args->device_list == NULL)
      args->device_list = g_array_new(FALSE, FALSE, sizeof(int));
    if (!knnwb_device_list_parse(args->devices, "--devices", args->device_list, error))
      return FALSE;
    knnwb_device_list_warn_repeated(args->device_list, "--devices");
    options->devices = (const int *)(void *)args->device_list->data;
    options->n_devices = (int)args->device_list->len;
    /* The GPUs named become all the driver shows (it starts every GPU it sees; the list is then
     * 0 to n - 1): a command parses its options once, before any GPU call. */
    if (options->backend != KNNWB_BACKEND_CPU)
      knnwb_knn_devices_narrow((int *)(void *)args->device_list->data, options->n_devices);
  }
  return TRUE;
}

void knnwb_host_knn_clear(KnnwbHostKnnArgs *args)
{
  g_free(args->metric);
  g_free(args->backend);
  g_free(args->screen);
  g_free(args->memory);
  g_free(args->devices);
  g_free(args->gpu_memory);
  if (args->device_list)
    g_array_free(args->device_list, TRUE);
}

void knnwb_host_expand_add_entries(GOptionContext *context, KnnwbHostExpandArgs *args,
                                   const char *ops_name)
{
  GOptionEntry entries[] = {
      {ops_name, 0, 0, G_OPTION_ARG_STRING, &args->ops,
       knnwb_host_help_choices(&knnwb_metafeature_table, "Metafeature operators, in this order: ",
                               " (default)", NULL, ", comma-separated"),
       "OPS"},
      {"pair-rows", 0, 0, G_OPTION_ARG_FILENAME, &args->rows,
       "Pair only the rows named in FILE (one label per line; default: all rows)", "FILE"},
      {"missing", 0, 0, G_OPTION_ARG_STRING, &args->missing,
       knnwb_host_help_choices(&knnwb_missing_table,
                               "A zero/subnormal denominator or an overflow: ", " (default)", NULL,
                               ""),
       "POLICY"},
      {"phenotype", 0, 0, G_OPTION_ARG_STRING, &args->phenotype,
       "Append a row from a per-sample table (TSV/CSV with a header): TABLE:COLUMN, or a bare "
       "COLUMN of the input's own sample annotation (a GEO characteristic such as age)",
       "TABLE:COLUMN"},
      {"phenotype-missing", 0, 0, G_OPTION_ARG_STRING, &args->phenotype_missing,
       "Samples whose phenotype is NA, empty or NaN: complete (default: left out of every row, "
       "with a warning) or error",
       "complete|error"},
      {"sample-labels", 0, 0, G_OPTION_ARG_STRING, &args->sample_labels,
       "Name the samples (columns) by this sample annotation of the input (e.g. Sample_title)",
       "COLUMN"},
      {"phenotype-id", 0, 0, G_OPTION_ARG_STRING, &args->phenotype_id,
       "The table's column of sample names (default: its first column)", "COLUMN"},
      {"phenotype-label", 0, 0, G_OPTION_ARG_STRING, &args->phenotype_label,
       "The label of the phenotype row (default: the column name)", "LABEL"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_option_context_add_main_entries(context, entries, NULL);
}

void knnwb_host_expand_clear(KnnwbHostExpandArgs *args)
{
  g_free(args->ops);
  g_free(args->rows);
  g_free(args->missing);
  g_free(args->phenotype);
  g_free(args->phenotype_id);
  g_free(args->phenotype_label);
  g_free(args->phenotype_missing);
  g_free(args->sample_labels);
}

/* The phenotype's values (table or the input's own annotation), with the samples that have none
 * taken out of *data (complete cases) unless the policy refuses them. */
static gboolean knnwb_host_phenotype_values(const KnnwbHostExpandArgs *args, KnnwbMatrix **data,
                                            float **values, char **label, GError **error)
{
  KnnwbPhenotypeMissing missing = KNNWB_PHENOTYPE_MISSING_COMPLETE;
  if (args->phenotype_missing != NULL) {
    if (strcmp(args->phenotype_missing, "error") == 0) {
      missing = KNNWB_PHENOTYPE_MISSING_ERROR;
    } else if (strcmp(args->phenotype_missing, "complete") != 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "--phenotype-missing must be complete or error (got '%s')",
                  args->phenotype_missing);
      return FALSE;
    }
  }
  g_autoptr(KnnwbAnnotationTable) table = NULL;
  g_autofree char *column = NULL;
  if (!knnwb_host_annotation_table(args->phenotype, "--phenotype", *data, KNNWB_MATRIX_COLUMNS,
                                   args->input_name, &table, &column, error))
    return FALSE;
  const gboolean bare = knnwb_host_annotation_is_bare(args->phenotype, *data, KNNWB_MATRIX_COLUMNS);
  if (!knnwb_phenotype_values_missing(*data, table, bare ? NULL : args->phenotype_id, column,
                                      missing, values, NULL, error))
    return FALSE;
  if (!knnwb_phenotype_complete_cases(data, *values, error)) {
    g_clear_pointer(values, g_free);
    return FALSE;
  }
  *label =
      g_strdup(args->phenotype_label && *args->phenotype_label ? args->phenotype_label : column);
  return TRUE;
}

/* The metafeature rows replace *data. */
static gboolean knnwb_host_metafeatures(const KnnwbHostExpandArgs *args, int n_threads,
                                        gboolean quiet, const volatile gint *cancel,
                                        const KnnwbKnnGroup *group,
                                        KnnwbMetafeatureOptions *options, KnnwbMatrix **data,
                                        GError **error)
{
  KnnwbMetafeatureOp ops[KNNWB_METAFEATURE_COUNT];
  size_t n_ops = 1;
  ops[0] = KNNWB_METAFEATURE_DIFFERENCE;
  if (args->ops != NULL && !knnwb_metafeatures_parse_ops(args->ops, ops, &n_ops, error))
    return FALSE;
  options->ops = ops;
  options->n_ops = n_ops;
  g_autofree size_t *rows = NULL;
  if (args->rows != NULL) {
    if (!knnwb_metafeatures_rows_from_file(*data, args->rows, &rows, &options->n_rows, error))
      return FALSE;
    options->rows = rows;
  }
  options->n_threads = n_threads;
  options->cancel = cancel;
  if (group != NULL) {
    options->share_index = group->rank;
    options->share_count = group->size;
  }
  KnnwbHostProgress *progress = knnwb_host_progress_new("metafeatures (rows)", quiet);
  options->progress = progress ? knnwb_host_progress_update : NULL;
  options->progress_data = progress;
  KnnwbMatrix *expanded = NULL;
  gboolean ok = knnwb_metafeatures_expand(*data, options, &expanded, error);
  knnwb_host_progress_finish(progress);
  if (!ok)
    return FALSE;
  knnwb_matrix_free(*data);
  *data = expanded;
  return TRUE;
}

gboolean knnwb_host_expand(const KnnwbHostExpandArgs *args, gboolean force_metafeatures,
                           int n_threads, gboolean quiet, const volatile gint *cancel,
                           const KnnwbKnnGroup *group, KnnwbMatrix **data, GError **error)
{
  const gboolean last_share = group == NULL || group->rank == group->size - 1;
  KnnwbMetafeatureOptions options;
  knnwb_metafeatures_options_init(&options);
  int missing = KNNWB_MISSING_ERROR;
  if (args->missing != NULL &&
      !knnwb_host_option_choice(&knnwb_missing_table, "--missing", args->missing, &missing, error))
    return FALSE;
  options.missing = (KnnwbMissingPolicy)missing;
  if (args->sample_labels != NULL &&
      !knnwb_host_sample_labels(*data, KNNWB_MATRIX_COLUMNS, args->sample_labels,
                                args->input_name ? args->input_name : "INPUT", error))
    return FALSE;
  /* The phenotype first: the samples it leaves out (complete cases) leave every row, the
   * metafeatures' included, and a table that does not fit fails before the long part. */
  g_autofree float *values = NULL;
  g_autofree char *label = NULL;
  if (args->phenotype != NULL && !knnwb_host_phenotype_values(args, data, &values, &label, error))
    return FALSE;
  if ((args->ops != NULL || force_metafeatures) &&
      !knnwb_host_metafeatures(args, n_threads, quiet, cancel, group, &options, data, error))
    return FALSE;
  if (values != NULL && last_share) {
    if (cancel && *cancel) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted");
      return FALSE;
    }
    if (!knnwb_phenotype_append_row(data, values, label, error))
      return FALSE;
  }
  return TRUE;
}

gboolean knnwb_host_one_input(char **rest, GError **error)
{
  if (rest == NULL || rest[0] == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "no INPUT file given");
    return FALSE;
  }
  if (rest[1] != NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "one INPUT file expected, got '%s' too", rest[1]);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_host_threads_check(int threads, GError **error)
{
  if (threads < 0)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--threads must be 0 (every core this process may run on) or more");
  return threads >= 0;
}

gboolean knnwb_host_required(gboolean given, const char *what, GError **error)
{
  if (!given)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "%s is required", what);
  return given;
}

void knnwb_host_input_files(KnnwbHostFiles *files, const char *input,
                            const KnnwbHostInputArgs *args)
{
  knnwb_host_files_input(files, input, "INPUT");
  knnwb_host_files_side_input(files, args->labels, "--labels");
}

char *knnwb_host_spec_table(const char *spec)
{
  const char *colon = spec != NULL ? strrchr(spec, ':') : NULL;
  return colon != NULL ? g_strndup(spec, (gsize)(colon - spec)) : NULL;
}

void knnwb_host_expand_files(KnnwbHostFiles *files, const KnnwbHostExpandArgs *args)
{
  knnwb_host_files_side_input(files, args->rows, "--pair-rows");
  g_autofree char *table = knnwb_host_spec_table(args->phenotype);
  knnwb_host_files_side_input(files, table, "--phenotype");
}

gboolean knnwb_host_check_output(const char *path, GError **error)
{
  return knnwb_host_output_check(path, error);
}

gboolean knnwb_host_commit_agreed(const KnnwbKnnGroup *group, gboolean writer, GPtrArray *outputs,
                                  const volatile gint *cancel, GError **error)
{
  if (group != NULL) {
    gboolean calm = *cancel == 0;
    if (!calm)
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted while writing");
    if (!group->agree(group, calm, error))
      return FALSE;
  }
  gboolean committed = !writer || knnwb_host_outputs_commit(outputs, cancel, error);
  if (group != NULL && !group->agree(group, committed, error))
    committed = FALSE;
  return committed;
}

int knnwb_host_exit_status(const GError *error)
{
  /* After a signal, whatever failed (a cancelled phase, a write cut short) failed because of it. */
  (void)error;
  if (knnwb_host_signals_received() != 0)
    return knnwb_host_signals_exit_status();
  return 1;
}

int knnwb_host_command_finish(const char *command, gboolean parsed, gboolean done,
                              GPtrArray *outputs, GError *error)
{
  if (done)
    return 0;
  if (parsed) {
    knnwb_host_outputs_discard(outputs);
    knnwb_host_outputs_name_targets(outputs, error);
  }
  return knnwb_host_command_fail(command, error, !parsed);
}

int knnwb_host_command_fail(const char *command, const GError *error, gboolean usage)
{
  if (usage) {
    g_printerr("knnwb %s: %s\nTry `knnwb %s --help`.\n", command, error->message, command);
    return 2;
  }
  int status = knnwb_host_exit_status(error);
  if (status != 1)
    g_printerr("knnwb: interrupted; no output written\n");
  else
    knnwb_host_print_error(error);
  return status;
}

KnnwbHostRegistry *knnwb_host_registry_load(const char *plugin_path, gboolean quiet)
{
  KnnwbHostRegistry *registry = knnwb_host_registry_new();
  g_autoptr(GError) error = NULL;
  if (!knnwb_host_registry_add_plugin(registry, knnwb_host_builtin_descriptor(), NULL, NULL,
                                      &error))
    g_error("built-in steps do not register: %s", error->message);
  g_auto(GStrv) directories = knnwb_host_plugin_search_path(plugin_path);
  knnwb_host_load_plugins(registry, directories, quiet);
  return registry;
}

void knnwb_host_input_add_step(KnnwbPipeline *pipeline, const char *id, const char *path,
                               const char *option, const KnnwbHostInputArgs *args)
{
  knnwb_pipeline_add_step(pipeline, id, "load-matrix");
  knnwb_pipeline_add_param(pipeline, "path", path, option);
  if (args->format != NULL)
    knnwb_pipeline_add_param(pipeline, "format", args->format, "--format");
  if (args->transpose)
    knnwb_pipeline_add_param(pipeline, "transpose", "true", "--transpose");
  if (args->header != NULL)
    knnwb_pipeline_add_param(pipeline, "header", args->header, "--header");
  if (args->label_column != NULL)
    knnwb_pipeline_add_param(pipeline, "label-column", args->label_column, "--label-column");
  if (args->labels != NULL)
    knnwb_pipeline_add_param(pipeline, "labels", args->labels, "--labels");
  if (args->drop_missing)
    knnwb_pipeline_add_param(pipeline, "missing", "drop-rows", "--drop-missing");
  if (args->use_rep != NULL)
    knnwb_pipeline_add_param(pipeline, "use-rep", args->use_rep, "--use-rep");
  if (args->layer != NULL)
    knnwb_pipeline_add_param(pipeline, "layer", args->layer, "--layer");
  if (args->skip_columns != NULL)
    knnwb_pipeline_add_param(pipeline, "skip-columns", args->skip_columns, "--skip-columns");
}

void knnwb_host_knn_add_params(KnnwbPipeline *pipeline, const KnnwbHostKnnArgs *args)
{
  if (args->k != -1) {
    char k[32];
    g_snprintf(k, sizeof k, "%" G_GINT64_FORMAT, args->k);
    knnwb_pipeline_add_param(pipeline, "k", k, "-k");
  }
  const struct {
    const char *name, *value, *option;
  } texts[] = {{"metric", args->metric, "--metric"},
               {"backend", args->backend, "--backend"},
               {"screen", args->screen, "--screen"},
               {"memory", args->memory, "--memory"},
               {"gpu-memory", args->gpu_memory, "--gpu-memory"},
               {"devices", args->devices, "--devices"}};
  for (guint i = 0; i < G_N_ELEMENTS(texts); i++)
    if (texts[i].value != NULL)
      knnwb_pipeline_add_param(pipeline, texts[i].name, texts[i].value, texts[i].option);
  if (args->threads != 0) {
    char threads[32];
    g_snprintf(threads, sizeof threads, "%d", args->threads);
    knnwb_pipeline_add_param(pipeline, "threads", threads, "--threads");
  }
  if (args->drop_degenerate)
    knnwb_pipeline_add_param(pipeline, "drop-degenerate", "true", "--drop-degenerate");
}
