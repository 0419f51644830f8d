/* `knnwb metafeatures INPUT -o OUT.npy|OUT.tsv`: the pair expansion (and the phenotype row) of a
 * matrix file, written atomically. */
#include <glib/gstdio.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/write_matrix.h>
#include "options.h"
#include "runtime/runtime.h"

typedef struct {
  KnnwbHostInputArgs input;
  KnnwbHostExpandArgs expand;
  char *output;
  char **rest;
  int threads;
  gboolean quiet;
} KnnwbMetafeaturesCommand;

static void knnwb_metafeatures_command_clear(KnnwbMetafeaturesCommand *command)
{
  knnwb_host_input_clear(&command->input);
  knnwb_host_expand_clear(&command->expand);
  g_free(command->output);
  g_strfreev(command->rest);
}

/* The options of knnwb metafeatures, into command. */
static GOptionContext *knnwb_metafeatures_options_new(KnnwbMetafeaturesCommand *command)
{
  GOptionEntry entries[] = {
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &command->output,
       "Output matrix: .npy (with OUT.labels.txt beside it) or .tsv", "OUT"},
      {"threads", 't', 0, G_OPTION_ARG_INT, &command->threads,
       "Threads (default: every core this process may run on)", "N"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &command->quiet, "No progress or summary", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &command->rest, NULL, "INPUT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  GOptionContext *context = g_option_context_new("-o OUT");
  g_option_context_set_summary(
      context,
      "Adds one row per unordered pair (a, b) of rows, a before b: a-b (difference, the default),\n"
      "and on request a+b, a*b, a/b, labelled A-B, A+B, A*B, A/B (the metafeatures of the "
      "GPU-FS-kNN\n"
      "paper that knnwb follows: 876 rows give 384,126 with difference and 1,533,876 with all "
      "four). The original rows\n"
      "come first, then all pairs of the first operator, then of the next. --phenotype appends\n"
      "a row from a per-sample table after the expansion: a clinical variable treated as one more\n"
      "gene, so that the rows nearest to it are the genes and pairs that behave like it.");
  g_option_context_set_description(
      context, "Examples:\n"
               "  knnwb metafeatures expr.tsv -o pairs.npy\n"
               "  knnwb metafeatures expr.tsv --ops all \\\n"
               "      --phenotype clinical.tsv:YearsToRelapse -o pairs.npy\n\n"
               "A zero or subnormal denominator, or a result that overflows to infinity, is an "
               "error naming the\npair unless --missing drop-rows. The result must fit in memory: "
               "it is refused up front with\nthe bytes needed and available. Exit status: 0 on "
               "success, 1 on a failure (file:line: messages),\n2 on a usage error, 130/143 when "
               "interrupted; no output is left behind by a failed run.");
  g_option_context_add_main_entries(context, entries, NULL);
  knnwb_host_expand_add_entries(context, &command->expand, "ops");
  knnwb_host_input_add_entries(context, &command->input);
  return context;
}

static gboolean knnwb_metafeatures_is_npy(const char *output)
{
  g_autofree char *lower = g_ascii_strdown(output, -1);
  return g_str_has_suffix(lower, ".npy");
}

/* Every file of the run, for the checks every command shares (names at parse time, the rest
 * before anything is read). */
static KnnwbHostFiles *knnwb_metafeatures_files(const KnnwbMetafeaturesCommand *command)
{
  KnnwbHostFiles *files = knnwb_host_files_new();
  knnwb_host_input_files(files, command->rest[0], &command->input);
  knnwb_host_expand_files(files, &command->expand);
  knnwb_host_files_output(files, command->output, "-o");
  g_autofree char *labels = command->output != NULL && knnwb_metafeatures_is_npy(command->output)
                                ? knnwb_formats_npy_labels_path(command->output)
                                : NULL;
  knnwb_host_files_output(files, labels, "the row labels of -o");
  return files;
}

/* The command line into command and read (usage errors). */
static gboolean knnwb_metafeatures_parse(GOptionContext *context, int argc, char **argv,
                                         KnnwbMetafeaturesCommand *command, KnnwbReadOptions *read,
                                         GError **error)
{
  if (!knnwb_host_options_parse(context, "metafeatures", &argc, &argv, error) ||
      !knnwb_host_one_input(command->rest, error) ||
      !knnwb_host_required(command->output != NULL, "-o OUT", error))
    return FALSE;
  g_autoptr(KnnwbHostFiles) files = knnwb_metafeatures_files(command);
  if (!knnwb_host_files_check_names(files, error))
    return FALSE;
  g_autofree char *lower = g_ascii_strdown(command->output, -1);
  if (!g_str_has_suffix(lower, ".npy") && !g_str_has_suffix(lower, ".tsv") &&
      !g_str_has_suffix(lower, ".txt") && !g_str_has_suffix(lower, ".tab")) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: the output must end in .npy or .tsv", command->output);
    return FALSE;
  }
  return knnwb_host_threads_check(command->threads, error) &&
         knnwb_host_input_options(&command->input, read, error);
}

/* The output's temporary, and its labels side file for .npy. Creating the temporary proves the
 * directory takes files (root passes access() on /proc). */
static const char *knnwb_metafeatures_prepare(const KnnwbMetafeaturesCommand *command,
                                              GPtrArray *outputs, GError **error)
{
  const char *output = command->output;
  g_autoptr(KnnwbHostFiles) files = knnwb_metafeatures_files(command);
  if (!knnwb_host_files_check(files, error))
    return NULL;
  const char *temporary = knnwb_host_outputs_add(outputs, output, error);
  if (temporary != NULL && knnwb_metafeatures_is_npy(output)) {
    g_autofree char *side_temporary = knnwb_formats_npy_labels_path(temporary);
    g_autofree char *side_final = knnwb_formats_npy_labels_path(output);
    knnwb_host_outputs_add_side_file(outputs, side_temporary, side_final);
  }
  return temporary;
}

/* The matrix into temporary. The writer polls the cancel flag and shows its progress: a
 * 1,533,876 x 295 TSV is gigabytes (a signal used to wait for the whole of it, formatted on one
 * thread at 15 MB/s). */
static gboolean knnwb_metafeatures_write(const KnnwbMetafeaturesCommand *command,
                                         const char *temporary, const KnnwbMatrix *data,
                                         const volatile gint *cancel, GError **error)
{
  KnnwbHostProgress *progress = knnwb_host_progress_new("write", command->quiet);
  knnwb_host_progress_set_unit(progress, "rows");
  KnnwbWriteControl control = {.n_threads = command->threads,
                               .cancel = cancel,
                               .progress = progress ? knnwb_host_progress_update : NULL,
                               .progress_data = progress};
  gboolean written = knnwb_formats_write_matrix_run(temporary, data, &control, error);
  knnwb_host_progress_finish(progress);
  return written;
}

/* Reads, expands, writes and commits (the last thing, refused when a signal arrived after the
 * write: an interrupted run never touches the previous output). */
static gboolean knnwb_metafeatures_execute(const KnnwbMetafeaturesCommand *command,
                                           KnnwbReadOptions *read_options, GPtrArray *outputs,
                                           GError **error)
{
  const volatile gint *cancel = knnwb_host_signals_install();
  const char *temporary = knnwb_metafeatures_prepare(command, outputs, error);
  if (temporary == NULL)
    return FALSE;
  knnwb_host_log_set_quiet(command->quiet);
  gint64 start = g_get_monotonic_time();
  g_autoptr(KnnwbMatrix) data = NULL;
  void *read_progress = knnwb_host_input_watch(read_options, cancel, command->quiet);
  gboolean read = knnwb_formats_read_matrix(command->rest[0], read_options, &data, NULL, error);
  knnwb_host_progress_finish(read_progress);
  if (!read)
    return FALSE;
  size_t n_in = data->n_rows;
  gint64 read_done = g_get_monotonic_time();
  KnnwbHostExpandArgs expand = command->expand;
  expand.input_name = command->rest[0];
  if (!knnwb_host_expand(&expand, TRUE, command->threads, command->quiet, cancel, NULL, &data,
                         error))
    return FALSE;
  gint64 expand_done = g_get_monotonic_time();
  if (!knnwb_metafeatures_write(command, temporary, data, cancel, error) ||
      !knnwb_host_outputs_commit(outputs, cancel, error))
    return FALSE;
  if (!command->quiet)
    g_printerr("knnwb: %zu rows -> %zu x %zu -> %s (read %.2f s, metafeatures %.2f s, write "
               "%.2f s)\n",
               n_in, data->n_rows, data->n_cols, command->output, (double)(read_done - start) / 1e6,
               (double)(expand_done - read_done) / 1e6,
               (double)(g_get_monotonic_time() - expand_done) / 1e6);
  return TRUE;
}

int knnwb_host_command_metafeatures(int argc, char **argv)
{
  KnnwbMetafeaturesCommand command = {0};
  g_autoptr(GOptionContext) context = knnwb_metafeatures_options_new(&command);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free);
  KnnwbReadOptions read_options;
  const gboolean parsed =
      knnwb_metafeatures_parse(context, argc, argv, &command, &read_options, &error);
  const gboolean done =
      parsed && knnwb_metafeatures_execute(&command, &read_options, outputs, &error);
  const int status = knnwb_host_command_finish("metafeatures", parsed, done, outputs, error);
  knnwb_metafeatures_command_clear(&command);
  return status;
}
