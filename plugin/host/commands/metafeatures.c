/* `knnwb metafeatures INPUT -o OUT.npy|OUT.tsv`: the pair expansion (and the phenotype row) of a
 * matrix file, written atomically. */
#include <glib/gstdio.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/write_matrix.h>
#include "options.h"
#include "runtime/runtime.h"

int knnwb_host_command_metafeatures(int argc, char **argv)
{
  KnnwbHostInputArgs input = {0};
  KnnwbHostExpandArgs expand = {0};
  char *output = NULL;
  char **rest = NULL;
  int threads = 0;
  gboolean quiet = FALSE;
  GOptionEntry entries[] = {
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
       "Output matrix: .npy (with OUT.labels.txt beside it) or .tsv", "OUT"},
      {"threads", 't', 0, G_OPTION_ARG_INT, &threads,
       "Threads (default: every core this process may run on)", "N"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "No progress or summary", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &rest, NULL, "INPUT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("-o OUT");
  g_option_context_set_summary(
      context,
      "Adds one row per unordered pair (a, b) of rows, a before b: a-b (difference, the default),\n"
      "and on request a+b, a*b, a/b, labelled A-B, A+B, A*B, A/B (GPU-FS-kNN's metafeatures:\n"
      "876 rows give 384,126 with difference and 1,533,876 with all four). The original rows\n"
      "come first, then all pairs of the first operator, then of the next. --phenotype appends\n"
      "a row from a per-sample table after the expansion (the seed's \"dummy probe\").");
  g_option_context_set_description(
      context, "Examples:\n"
               "  knnwb metafeatures expr.tsv -o pairs.npy\n"
               "  knnwb metafeatures expr.tsv --ops all --phenotype clinical.tsv:YearsToRelapse "
               "-o pairs.npy\n\n"
               "A zero or subnormal denominator, or a result that overflows to infinity, is an "
               "error naming the\npair unless --missing drop-rows. The result must fit in memory: "
               "it is refused up front with\nthe bytes needed and available. Exit status: 0 on "
               "success, 1 on a failure (file:line: messages),\n2 on a usage error, 130/143 when "
               "interrupted; no output is left behind by a failed run.");
  g_option_context_add_main_entries(context, entries, NULL);
  knnwb_host_expand_add_entries(context, &expand, "ops");
  knnwb_host_input_add_entries(context, &input);

  int status = 1;
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbMatrix) data = NULL;
  g_autoptr(GPtrArray) outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free);
  KnnwbReadOptions read_options;
  gboolean usage = TRUE;
  g_autofree char *lower = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error))
    goto fail;
  if (rest == NULL || rest[0] == NULL || rest[1] != NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                rest == NULL || rest[0] == NULL ? "no INPUT file given"
                                                : "one INPUT file expected");
    goto fail;
  }
  if (output == NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "-o OUT is required");
    goto fail;
  }
  lower = g_ascii_strdown(output, -1);
  if (!g_str_has_suffix(lower, ".npy") && !g_str_has_suffix(lower, ".tsv") &&
      !g_str_has_suffix(lower, ".txt") && !g_str_has_suffix(lower, ".tab")) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: the output must end in .npy or .tsv", output);
    goto fail;
  }
  if (threads < 0) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "--threads must be 0 or more");
    goto fail;
  }
  if (!knnwb_host_input_options(&input, &read_options, &error))
    goto fail;
  usage = FALSE;
  if (!knnwb_host_check_output(output, &error))
    goto fail;
  const volatile gint *cancel = knnwb_host_signals_install();
  /* Creating the temporary proves the directory takes files (root passes access() on /proc). */
  const char *temporary = knnwb_host_outputs_add(outputs, output, &error);
  if (temporary == NULL)
    goto fail;
  if (g_str_has_suffix(lower, ".npy")) {
    g_autofree char *side_temporary = knnwb_formats_npy_labels_path(temporary);
    g_autofree char *side_final = knnwb_formats_npy_labels_path(output);
    knnwb_host_outputs_add_side_file(outputs, side_temporary, side_final);
  }
  knnwb_host_log_set_quiet(quiet);
  gint64 start = g_get_monotonic_time();
  void *read_progress = knnwb_host_input_watch(&read_options, cancel, quiet);
  gboolean read = knnwb_formats_read_matrix(rest[0], &read_options, &data, NULL, &error);
  knnwb_host_progress_finish(read_progress);
  if (!read)
    goto fail;
  size_t n_in = data->n_rows;
  gint64 read_done = g_get_monotonic_time();
  if (!knnwb_host_expand(&expand, TRUE, threads, quiet, cancel, NULL, &data, &error))
    goto fail;
  gint64 expand_done = g_get_monotonic_time();
  /* The writer polls the cancel flag and shows its progress: a 1,533,876 x 295 TSV is gigabytes
   * (a signal used to wait for the whole of it, formatted on one thread at 15 MB/s). */
  KnnwbWriteControl control = {.n_threads = threads, .cancel = cancel};
  KnnwbHostProgress *progress = knnwb_host_progress_new("write", quiet);
  knnwb_host_progress_set_unit(progress, "rows");
  control.progress = progress ? knnwb_host_progress_update : NULL;
  control.progress_data = progress;
  gboolean written = knnwb_formats_write_matrix_run(temporary, data, &control, &error);
  knnwb_host_progress_finish(progress);
  if (!written)
    goto fail;
  /* The last thing, refused when a signal arrived after the write: an interrupted run never
   * touches the previous output. */
  if (!knnwb_host_outputs_commit(outputs, cancel, &error))
    goto fail;
  if (!quiet)
    g_printerr("knnwb: %zu rows -> %zu x %zu -> %s (read %.2f s, metafeatures %.2f s, write "
               "%.2f s)\n",
               n_in, data->n_rows, data->n_cols, output, (double)(read_done - start) / 1e6,
               (double)(expand_done - read_done) / 1e6,
               (double)(g_get_monotonic_time() - expand_done) / 1e6);
  status = 0;
  goto done;
fail:
  knnwb_host_outputs_discard(outputs);
  knnwb_host_outputs_name_targets(outputs, error);
  status = knnwb_host_command_fail("metafeatures", error, usage);
done:
  knnwb_host_input_clear(&input);
  knnwb_host_expand_clear(&expand);
  g_free(output);
  g_strfreev(rest);
  return status;
}
