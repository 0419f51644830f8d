/* `knnwb neighbourhood INPUT --focus L -k K -o OUT.gml [--table OUT.tsv]`: load, (metafeatures),
 * (phenotype), the focus rows' kNN neighbourhood up to order r, as yEd GML and a ranked table. */
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/neighbourhood.h>
#include "options.h"
#include "runtime/runtime.h"
#include "runtime/split_input.h"

int knnwb_host_command_neighbourhood(int argc, char **argv)
{
  KnnwbHostInputArgs input = {0};
  KnnwbHostKnnArgs knn = {0};
  KnnwbHostExpandArgs expand = {0};
  char *focus_text = NULL, *direction_text = NULL, *output = NULL, *table = NULL;
  char **rest = NULL;
  gint64 order = 1, seed = 42;
  gboolean quiet = FALSE;
  GOptionEntry entries[] = {
      {"focus", 0, 0, G_OPTION_ARG_STRING, &focus_text,
       "The focus rows' labels, comma-separated (e.g. the phenotype row)", "LABEL[,LABEL]"},
      {"order", 'r', 0, G_OPTION_ARG_INT64, &order, "Hops from the focus (default 1)", "R"},
      {"direction", 0, 0, G_OPTION_ARG_STRING, &direction_text,
       "out (default: the focus's k nearest, then theirs; no whole graph), in (rows that have "
       "the focus among their k nearest) or both; in and both build the whole graph",
       "out|in|both"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
       "yEd GML of the neighbourhood (laid out, labelled, focus highlighted)", "OUT.gml"},
      {"table", 0, 0, G_OPTION_ARG_FILENAME, &table,
       "Ranked table: focus, rank, label, order, distance (and r for correlations)", "OUT.tsv"},
      {"seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Layout random seed (default 42)", "S"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "No progress or summary", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &rest, NULL, "INPUT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("--focus LABEL -k K -o OUT.gml");
  g_option_context_set_summary(
      context,
      "The neighbourhood of focus rows in the exact kNN graph of INPUT's rows, up to order R:\n"
      "the focus's k nearest rows, their k nearest, ... and the kNN edges among them, as GML\n"
      "that yEd opens laid out (nodes coloured by order, the focus a red-outlined hexagon), and a\n"
      "ranked table (GPU-FS-kNN's Figure 3a as data). Optionally the rows are first expanded\n"
      "into metafeatures (--metafeatures) and a phenotype row is appended (--phenotype).\n"
      "Out-neighbourhoods query only the rows found (about k^R of them) against all rows.");
  g_option_context_set_description(
      context, "Example (the seed's workflow):\n"
               "  knnwb neighbourhood expr.tsv --metafeatures difference \\\n"
               "      --phenotype clinical.tsv:YearsToRelapse --focus YearsToRelapse \\\n"
               "      -k 20 --metric pearson --order 2 -o relapse.gml --table relapse.tsv\n\n"
               "Exit status: 0 on success, 1 on a failure (file:line: messages), 2 on a usage "
               "error, 130/143 when\ninterrupted; no output is left behind by a failed run.");
  g_option_context_add_main_entries(context, entries, NULL);
  knnwb_host_knn_add_entries(context, &knn);
  knnwb_host_expand_add_entries(context, &expand, "metafeatures");
  knnwb_host_input_add_entries(context, &input);

  int status = 1;
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbMatrix) data = NULL;
  g_autoptr(KnnwbNeighbourhood) nb = NULL;
  g_autofree int64_t *focus = NULL;
  g_autoptr(GPtrArray) outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free);
  KnnwbReadOptions read_options;
  KnnwbKnnOptions options;
  KnnwbDirection direction = KNNWB_DIRECTION_OUT;
  gboolean usage = TRUE;
  KnnwbHostProgress *progress = NULL;
  KnnwbHostSplitInput split = {0};
  g_autofree size_t *first_row = NULL;
  g_autoptr(KnnwbMatrix) label_rows = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error))
    goto fail;
  if (rest == NULL || rest[0] == NULL || rest[1] != NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                rest == NULL || rest[0] == NULL ? "no INPUT file given"
                                                : "one INPUT file expected");
    goto fail;
  }
  if (focus_text == NULL || output == NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "%s is required",
                focus_text == NULL ? "--focus LABEL" : "-o OUT.gml");
    goto fail;
  }
  if (order < 1 || order > 10) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--order %" G_GINT64_FORMAT ": the order must be between 1 and 10", order);
    goto fail;
  }
  if (seed < 0 || seed > G_MAXUINT32) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "--seed must be 0 .. 2^32-1");
    goto fail;
  }
  if (!knnwb_host_knn_options(&knn, TRUE, &options, &error) ||
      !knnwb_host_input_options(&input, &read_options, &error) ||
      (direction_text && !knnwb_direction_from_string(direction_text, &direction, &error)))
    goto fail;
  usage = FALSE;
  if (!knnwb_host_check_output(output, &error) ||
      (table != NULL && !knnwb_host_check_output(table, &error)))
    goto fail;
  options.cancel = knnwb_host_signals_install();
  options.data_name = rest[0];
  /* Under mpirun each rank holds its block of rows (split memory) and the kNN runs share the
   * work, unless the run computes on GPUs (as `knnwb knn --mpi-input auto`): each rank reads its
   * block, or, when metafeatures pair every row with every other, reads the (small) input whole
   * and generates its share of the pair rows; the phenotype row joins the last rank's block.
   * Rank 0 writes. */
  const KnnwbKnnGroup *group = knnwb_host_group();
  const gboolean split_rows = group != NULL && group->size > 1 && !knnwb_knn_uses_gpu(&options);
  const gboolean expanding = expand.ops != NULL || expand.phenotype != NULL;
  const gboolean writer = !split_rows || group->rank == 0;
  /* The outputs go to temporaries renamed into place together at the end (all or nothing);
   * creating them now proves the directories take files before any work. */
  const char *gml_temporary = NULL, *table_temporary = NULL;
  gboolean ready =
      !writer || ((gml_temporary = knnwb_host_outputs_add(outputs, output, &error)) &&
                  (table == NULL ||
                   (table_temporary = knnwb_host_outputs_add(outputs, table, &error)) != NULL));
  if (split_rows && !group->agree(group, ready, &error))
    ready = FALSE;
  if (!ready)
    goto fail;
  knnwb_host_log_set_quiet(quiet);
  gint64 start = g_get_monotonic_time();
  const char *const *labels = NULL;
  size_t n_rows = 0;
  /* Here the read is often most of the run: the queries are a few rows. */
  void *read_progress = knnwb_host_input_watch(&read_options, options.cancel, quiet);
  gboolean read;
  if (split_rows && expand.ops != NULL) {
    read = knnwb_formats_read_matrix(rest[0], &read_options, &split.block, &split.info, &error);
    read = group->agree(group, read, &error);
  } else if (split_rows) {
    read = knnwb_host_split_read(group, rest[0], &read_options, !expanding, options.cancel, &split,
                                 &error);
  } else {
    read = knnwb_formats_read_matrix(rest[0], &read_options, &data, NULL, &error);
  }
  knnwb_host_progress_finish(read_progress);
  if (!read)
    goto fail;
  gint64 read_done = g_get_monotonic_time();
  if (split_rows) {
    if (expanding) {
      gboolean expanded = knnwb_host_expand(&expand, FALSE, options.n_threads, quiet,
                                            options.cancel, group, &split.block, &error);
      if (!group->agree(group, expanded, &error) ||
          !knnwb_host_split_relabel(group, &split, &error))
        goto fail;
    }
    if (!knnwb_host_split_offsets(group, split.block->n_rows, &first_row, &error))
      goto fail;
    labels = split.labels;
    n_rows = split.n_rows;
  } else {
    if (!knnwb_host_expand(&expand, FALSE, options.n_threads, quiet, options.cancel, NULL, &data,
                           &error))
      goto fail;
    labels = (const char *const *)data->row_labels;
    n_rows = data->n_rows;
  }
  const size_t n_cols = split_rows ? split.block->n_cols : data->n_cols;
  gint64 expand_done = g_get_monotonic_time();
  size_t n_focus = 0;
  /* Every rank has every label: the ranks find the same rows or fail alike. */
  if (!knnwb_neighbourhood_focus_labels(labels, n_rows, focus_text, &focus, &n_focus, &error)) {
    g_prefix_error(&error, "%s: ", rest[0]);
    goto fail;
  }
  progress = knnwb_host_progress_new("neighbourhood", quiet);
  if (split_rows) /* a share of the ranks' schedule, not tiles */
    knnwb_host_progress_set_unit(progress, NULL);
  options.progress = progress ? knnwb_host_progress_update : NULL;
  options.progress_data = progress;
  gboolean found = split_rows ? knnwb_neighbourhood_find_split(group, split.block, first_row, focus,
                                                               n_focus, (int)order, direction,
                                                               &options, &nb, NULL, &error)
                              : knnwb_neighbourhood_find(data, focus, n_focus, (int)order,
                                                         direction, &options, &nb, &error);
  knnwb_host_progress_finish(progress);
  if (!found)
    goto fail;
  gint64 found_done = g_get_monotonic_time();
  /* The writers name rows by label: split, rank 0 gets a matrix of the members' labels only. */
  const KnnwbMatrix *named = data;
  if (split_rows && writer) {
    named = label_rows = knnwb_matrix_new(n_rows, 0, &error);
    if (label_rows == NULL)
      goto fail;
    for (size_t v = 0; labels != NULL && v < nb->n_vertices; v++)
      knnwb_matrix_set_row_label(label_rows, (size_t)nb->rows[v], labels[nb->rows[v]]);
  }
  gboolean written = TRUE;
  if (!writer) {
    /* split: rank 0 writes alone */
  } else if (!knnwb_host_speaks()) {
    /* Whole input under mpirun: every rank found the same neighbourhood (the kNN queries shared
     * their work): rank 0 writes it, the others drop their temporaries. */
    knnwb_host_outputs_discard(outputs);
    g_ptr_array_set_size(outputs, 0);
  } else {
    written =
        knnwb_neighbourhood_write_gml(gml_temporary, nb, named, (unsigned long)seed, &error) &&
        (table_temporary == NULL ||
         knnwb_neighbourhood_write_table(table_temporary, nb, named, options.metric, &error));
  }
  if (split_rows && !group->agree(group, written, &error))
    written = FALSE;
  if (!written)
    goto fail;
  if (split_rows) {
    gboolean calm = *options.cancel == 0;
    if (!calm)
      g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted while writing");
    if (!group->agree(group, calm, &error))
      goto fail;
  }
  /* The last thing, refused when a signal arrived during the layout or the writes. */
  gboolean committed = knnwb_host_outputs_commit(outputs, options.cancel, &error);
  if (split_rows && !group->agree(group, committed, &error))
    committed = FALSE;
  if (!committed)
    goto fail;
  if (!quiet && nb != NULL) /* split: rank 0 holds the neighbourhood and speaks */
    g_printerr("knnwb: %zu x %zu, k=%zu %s, order %" G_GINT64_FORMAT " %s: %zu rows, %" IGRAPH_PRId
               " edges, %zu rows queried%s -> %s%s%s (read %.2f "
               "s, expand %.2f s, neighbourhood %.2f s, write %.2f s)\n",
               n_rows, n_cols, options.k, knnwb_metric_to_string(options.metric), order,
               knnwb_direction_to_string(direction), nb->n_vertices, igraph_ecount(&nb->graph),
               nb->n_queries, nb->whole_graph ? " (whole graph)" : "", output, table ? ", " : "",
               table ? table : "", (double)(read_done - start) / 1e6,
               (double)(expand_done - read_done) / 1e6, (double)(found_done - expand_done) / 1e6,
               (double)(g_get_monotonic_time() - found_done) / 1e6);
  status = 0;
  goto done;
fail:
  knnwb_host_outputs_discard(outputs);
  knnwb_host_outputs_name_targets(outputs, error);
  status = knnwb_host_command_fail("neighbourhood", error, usage);
done:
  knnwb_host_split_input_clear(&split);
  knnwb_host_input_clear(&input);
  knnwb_host_knn_clear(&knn);
  knnwb_host_expand_clear(&expand);
  g_free(focus_text);
  g_free(direction_text);
  g_free(output);
  g_free(table);
  g_strfreev(rest);
  return status;
}
