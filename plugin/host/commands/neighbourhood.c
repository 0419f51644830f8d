/* `knnwb neighbourhood INPUT --focus L -k K -o OUT.gml [--table OUT.tsv]`: load, (metafeatures),
 * (phenotype), the focus rows' kNN neighbourhood up to order r, as yEd GML and a ranked table. */
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/neighbourhood.h>
#include "options.h"
#include "runtime/runtime.h"
#include "runtime/split_input.h"

typedef struct {
  KnnwbHostInputArgs input;
  KnnwbHostKnnArgs knn;
  KnnwbHostExpandArgs expand;
  KnnwbHostPlots plots;
  char *focus_text, *direction_text, *output, *table, *annotation, *annotation_id;
  char **rest;
  gint64 order, seed;
  gboolean quiet;
} KnnwbNeighbourhoodCommand;

/* One run: the parsed options, where this rank stands, what it read and found. */
typedef struct {
  KnnwbNeighbourhoodCommand command;
  KnnwbReadOptions read_options;
  KnnwbKnnOptions options;
  KnnwbDirection direction;
  /* Under mpirun each rank holds its block of rows (split_rows) and the kNN runs share the
   * work, unless the run computes on GPUs (as `knnwb knn --mpi-input auto`): each rank reads its
   * block, or, when metafeatures pair every row with every other, reads the (small) input whole
   * and generates its share of the pair rows; the phenotype row joins the last rank's block.
   * Rank 0 (the writer) writes. */
  const KnnwbKnnGroup *group;
  gboolean split_rows, writer;
  GPtrArray *outputs; /* KnnwbPipelineOutput */
  const char *gml_temporary, *table_temporary;
  KnnwbMatrix *data;         /* all rows (not split) */
  KnnwbHostSplitInput split; /* this rank's block (split) */
  size_t *first_row;         /* split: where each rank's block starts */
  const char *const *labels; /* every row's */
  size_t n_rows, n_cols;
  KnnwbNeighbourhood *found;
  int64_t *focus; /* the focus rows, every rank's */
  size_t n_focus;
  gint64 start, read_done, expand_done, found_done;
} KnnwbNeighbourhoodRun;

static void knnwb_neighbourhood_run_clear(KnnwbNeighbourhoodRun *run)
{
  KnnwbNeighbourhoodCommand *command = &run->command;
  knnwb_host_input_clear(&command->input);
  knnwb_host_knn_clear(&command->knn);
  knnwb_host_expand_clear(&command->expand);
  g_free(command->focus_text);
  g_free(command->direction_text);
  g_free(command->output);
  g_free(command->table);
  g_free(command->annotation);
  g_free(command->annotation_id);
  g_free(command->plots.dir);
  g_free(command->plots.color_by);
  g_strfreev(command->rest);
  g_ptr_array_unref(run->outputs);
  knnwb_matrix_free(run->data);
  knnwb_host_split_input_clear(&run->split);
  g_free(run->first_row);
  knnwb_neighbourhood_free(run->found);
  g_free(run->focus);
}

/* The options of knnwb neighbourhood, into command. */
static GOptionContext *knnwb_neighbourhood_options_new(KnnwbNeighbourhoodCommand *command)
{
  GOptionContext *context = g_option_context_new("--focus LABEL -k K -o OUT");
  GOptionEntry entries[] = {
      {"focus", 0, 0, G_OPTION_ARG_STRING, &command->focus_text,
       "The focus rows' labels, comma-separated (e.g. the phenotype row)", "LABEL[,LABEL]"},
      {"order", 'r', 0, G_OPTION_ARG_INT64, &command->order, "Hops from the focus (default 1)",
       "R"},
      {"direction", 0, 0, G_OPTION_ARG_STRING, &command->direction_text,
       knnwb_host_help_choices(&knnwb_direction_table, "",
                               " (default: the focus's k nearest, then theirs; no whole graph)",
                               NULL,
                               "; in: rows that have the focus among their k nearest; in and "
                               "both build the whole graph"),
       KNNWB_ENUM_CHOICES(KNNWB_DIRECTION_NAMES)},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &command->output,
       "The neighbourhood graph, format from the extension: .gml (yEd: laid out, labelled, "
       "focus highlighted), .graphml, .knn (input row numbers), .mtx, .tsv (edge table)",
       "OUT"},
      {"table", 0, 0, G_OPTION_ARG_FILENAME, &command->table,
       "Ranked table: focus, rank, label, order, distance; for correlations r, p (two-sided, t "
       "with n-2 df, n the samples used) and q (Benjamini-Hochberg over every row searched, "
       "metafeatures included, not only those listed). --metric pearson finds the positively "
       "correlated rows; --metric abs-pearson finds both signs (r keeps its sign)",
       "OUT.tsv"},
      {"annotation", 'a', 0, G_OPTION_ARG_STRING, &command->annotation,
       "Node attributes of the GML: columns of a table whose first column names the rows (gene "
       "symbols beside probe IDs), or names of INPUT's own row annotations",
       "TABLE:COLUMN[,COLUMN]"},
      {"annotation-id", 0, 0, G_OPTION_ARG_STRING, &command->annotation_id,
       "The --annotation table's column of row names (default: its first column)", "COLUMN"},
      {"plots", 0, 0, G_OPTION_ARG_FILENAME, &command->plots.dir,
       "Scatter plots (PNG) into DIR: per top hit its values against the focus row (the "
       "phenotype) across samples, r and p in the title; overview.png: the hits' signed r",
       "DIR"},
      {"plots-top", 0, 0, G_OPTION_ARG_INT64, &command->plots.top,
       "How many of the nearest hits get a plot (default 9)", "N"},
      {"plots-color-by", 0, 0, G_OPTION_ARG_STRING, &command->plots.color_by,
       "Colour the plots' samples by a sample annotation of INPUT (e.g. tissue) or TABLE:COLUMN",
       "COLUMN"},
      {"seed", 0, 0, G_OPTION_ARG_INT64, &command->seed, "Layout random seed (default 42)", "S"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &command->quiet, "No progress or summary", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &command->rest, NULL, "INPUT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_option_context_set_summary(
      context,
      "The neighbourhood of focus rows in the exact kNN graph of INPUT's rows, up to order R:\n"
      "the focus's k nearest rows, their k nearest, ... and the kNN edges among them, as GML\n"
      "that yEd opens laid out (nodes coloured by order, the focus a red-outlined hexagon), and a\n"
      "ranked table (rank, distance, r, p and q of every row found). Optionally the rows are first "
      "expanded\n"
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
  knnwb_host_knn_add_entries(context, &command->knn);
  knnwb_host_expand_add_entries(context, &command->expand, "metafeatures");
  knnwb_host_input_add_entries(context, &command->input);
  return context;
}

/* Every file of the run, for the checks every command shares (names at parse time, the rest
 * before anything is read). */
static KnnwbHostFiles *knnwb_neighbourhood_files(const KnnwbNeighbourhoodCommand *command)
{
  KnnwbHostFiles *files = knnwb_host_files_new();
  knnwb_host_input_files(files, command->rest[0], &command->input);
  knnwb_host_expand_files(files, &command->expand);
  g_autofree char *annotation_table = knnwb_host_spec_table(command->annotation);
  knnwb_host_files_side_input(files, annotation_table, "--annotation");
  knnwb_host_files_output(files, command->output, "-o");
  knnwb_host_files_output(files, command->table, "--table");
  return files;
}

/* The command line into run (usage errors). */
static gboolean knnwb_neighbourhood_parse(GOptionContext *context, int argc, char **argv,
                                          KnnwbNeighbourhoodRun *run, GError **error)
{
  KnnwbNeighbourhoodCommand *command = &run->command;
  if (!knnwb_host_options_parse(context, "neighbourhood", &argc, &argv, error) ||
      !knnwb_host_one_input(command->rest, error) ||
      !knnwb_host_required(command->focus_text != NULL, "--focus LABEL", error) ||
      !knnwb_host_required(command->output != NULL, "-o OUT", error) ||
      !knnwb_neighbourhood_check_format(command->output, KNNWB_OUTPUT_AUTO, error))
    return FALSE;
  g_autoptr(KnnwbHostFiles) files = knnwb_neighbourhood_files(command);
  if (!knnwb_host_files_check_names(files, error))
    return FALSE;
  if (command->order < 1 || command->order > 10) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--order %" G_GINT64_FORMAT ": the order must be between 1 and 10", command->order);
    return FALSE;
  }
  if (command->seed < 0 || command->seed > G_MAXUINT32) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "--seed must be 0 .. 2^32-1");
    return FALSE;
  }
  if (command->plots.dir == NULL && (command->plots.color_by != NULL || command->plots.top != 9)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--plots-top and --plots-color-by go with --plots DIR");
    return FALSE;
  }
  return knnwb_host_knn_options(&command->knn, TRUE, &run->options, error) &&
         knnwb_host_input_options(&command->input, &run->read_options, error) &&
         (command->direction_text == NULL ||
          knnwb_direction_from_string(command->direction_text, &run->direction, error));
}

/* The outputs go to temporaries renamed into place together at the end (all or nothing);
 * creating them now proves the directories take files before any work. Under mpirun every rank
 * reaches the backend's choice (collective) and the agreement whatever its own checks found: each
 * looks at its own file system (the plots' directory, the outputs'), and a rank that returned
 * alone would leave the others waiting in the collectives that follow. */
static gboolean knnwb_neighbourhood_prepare(KnnwbNeighbourhoodRun *run, GError **error)
{
  const KnnwbNeighbourhoodCommand *command = &run->command;
  g_autoptr(KnnwbHostFiles) files = knnwb_neighbourhood_files(command);
  gboolean ready =
      knnwb_host_plots_check(&command->plots, error) && knnwb_host_files_check(files, error);
  run->options.cancel = knnwb_host_signals_install();
  run->options.data_name = command->rest[0];
  run->group = knnwb_host_group();
  /* Under mpirun the GPUs start before the ranks ask whether there are any, so that a rank's
   * share of its host's GPUs becomes all the driver shows (kernels/device_start.cu);
   * knnwb_host_command_neighbourhood waits for the start. */
  if (run->group != NULL && run->group->size > 1)
    knnwb_knn_devices_start(&run->options);
  run->split_rows = run->group != NULL && run->group->size > 1 &&
                    !knnwb_host_group_all_gpus(run->group, &run->options);
  run->writer = !run->split_rows || run->group->rank == 0;
  if (ready && run->split_rows && command->plots.dir != NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--plots needs the whole input in one process: run it without mpirun, or with "
                "the whole input on every rank");
    ready = FALSE;
  }
  ready = ready &&
          (!run->writer ||
           ((run->gml_temporary = knnwb_host_outputs_add(run->outputs, command->output, error)) &&
            (command->table == NULL || (run->table_temporary = knnwb_host_outputs_add(
                                            run->outputs, command->table, error)) != NULL)));
  /* .mtx row labels go to a side file named after the output. */
  KnnwbOutputFormat format = KNNWB_OUTPUT_GML;
  g_autofree char *side_final =
      ready && run->writer && knnwb_formats_output_from_path(command->output, &format, NULL)
          ? knnwb_formats_side_path(command->output, format)
          : NULL;
  if (side_final != NULL) {
    g_autofree char *side_temporary = knnwb_formats_side_path(run->gml_temporary, format);
    knnwb_host_outputs_add_side_file(run->outputs, side_temporary, side_final);
  }
  if (run->group != NULL && !run->group->agree(run->group, ready, error))
    ready = FALSE;
  return ready;
}

/* The rows (all, or this rank's block), then the metafeatures and phenotype row. Here the read
 * is often most of the run: the queries are a few rows. */
static gboolean knnwb_neighbourhood_read(KnnwbNeighbourhoodRun *run, GError **error)
{
  KnnwbNeighbourhoodCommand *command = &run->command;
  const KnnwbKnnGroup *group = run->group;
  const gboolean expanding = command->expand.ops != NULL || command->expand.phenotype != NULL ||
                             command->expand.sample_labels != NULL;
  const char *path = command->rest[0];
  command->expand.input_name = path;
  run->read_options.rank_rows = run->options.metric == KNNWB_METRIC_SPEARMAN;
  void *progress = knnwb_host_input_watch(&run->read_options, run->options.cancel, command->quiet);
  gboolean read;
  if (run->split_rows && command->expand.ops != NULL)
    read = group->agree(group,
                        knnwb_formats_read_matrix(path, &run->read_options, &run->split.block,
                                                  &run->split.info, error),
                        error);
  else if (run->split_rows)
    read = knnwb_host_split_read(group, path, &run->read_options, run->options.cancel, &run->split,
                                 error);
  else
    read = knnwb_formats_read_matrix(path, &run->read_options, &run->data, NULL, error);
  knnwb_host_progress_finish(progress);
  if (!read)
    return FALSE;
  run->read_done = g_get_monotonic_time();
  if (!run->split_rows) {
    if (!knnwb_host_expand(&command->expand, FALSE, run->options.n_threads, command->quiet,
                           run->options.cancel, NULL, &run->data, error))
      return FALSE;
    run->labels = (const char *const *)run->data->row_labels;
    run->n_rows = run->data->n_rows;
    run->n_cols = run->data->n_cols;
    return TRUE;
  }
  if (expanding) {
    gboolean expanded =
        knnwb_host_expand(&command->expand, FALSE, run->options.n_threads, command->quiet,
                          run->options.cancel, group, &run->split.block, error);
    if (!group->agree(group, expanded, error) ||
        !knnwb_host_split_relabel(group, &run->split, error))
      return FALSE;
  }
  if (!knnwb_host_split_offsets(group, run->split.block->n_rows, &run->first_row, error))
    return FALSE;
  run->labels = run->split.labels;
  run->n_rows = run->split.n_rows;
  run->n_cols = run->split.block->n_cols;
  return TRUE;
}

/* The focus rows' neighbourhood, with its progress line. Every rank has every label: the ranks
 * find the same focus rows or fail alike. */
static gboolean knnwb_neighbourhood_search(KnnwbNeighbourhoodRun *run, GError **error)
{
  const KnnwbNeighbourhoodCommand *command = &run->command;
  if (!knnwb_neighbourhood_focus_labels(run->labels, run->n_rows, command->focus_text, &run->focus,
                                        &run->n_focus, error)) {
    g_prefix_error(error, "%s: ", command->rest[0]);
    return FALSE;
  }
  KnnwbHostProgress *progress = knnwb_host_progress_new("neighbourhood", command->quiet);
  /* tiles of the distance matrix; split runs count a share of the ranks' schedule */
  knnwb_host_progress_set_unit(progress, run->split_rows ? NULL : "tiles");
  run->options.progress = progress ? knnwb_host_progress_update : NULL;
  run->options.progress_data = progress;
  const int order = (int)command->order;
  gboolean found =
      run->split_rows
          ? knnwb_neighbourhood_find_split(run->group, run->split.block, run->first_row, run->focus,
                                           run->n_focus, order, run->direction, &run->options,
                                           &run->found, NULL, error)
          : knnwb_neighbourhood_find(run->data, run->focus, run->n_focus, order, run->direction,
                                     &run->options, &run->found, error);
  knnwb_host_progress_finish(progress);
  run->options.progress = NULL;
  run->options.progress_data = NULL;
  return found;
}

/* The GML and the table into their temporaries. The writers name rows by label: split, rank 0
 * gets a matrix of the members' labels only. */
static gboolean knnwb_neighbourhood_write(KnnwbNeighbourhoodRun *run, GError **error)
{
  const KnnwbNeighbourhoodCommand *command = &run->command;
  const KnnwbNeighbourhood *found = run->found;
  g_autoptr(KnnwbMatrix) label_rows = NULL;
  const KnnwbMatrix *named = run->data;
  if (run->split_rows && run->writer) {
    named = label_rows = knnwb_matrix_new(run->n_rows, 0, error);
    if (label_rows == NULL)
      return FALSE;
    for (size_t v = 0; run->labels != NULL && v < found->n_vertices; v++)
      knnwb_matrix_set_row_label(label_rows, (size_t)found->rows[v], run->labels[found->rows[v]]);
  }
  /* Split: the table's p and q take every rank's rows (collective). */
  const gboolean with_r = run->options.metric == KNNWB_METRIC_PEARSON ||
                          run->options.metric == KNNWB_METRIC_ABS_PEARSON ||
                          run->options.metric == KNNWB_METRIC_SPEARMAN;
  g_autofree double *p = NULL, *q = NULL;
  if (run->split_rows && command->table != NULL && with_r) {
    const size_t n = run->writer ? found->n_members : 0;
    p = g_new(double, MAX(n, (size_t)1));
    q = g_new(double, MAX(n, (size_t)1));
    if (!knnwb_neighbourhood_statistics_split(run->group, run->split.block, run->first_row,
                                              run->focus, run->n_focus, run->writer ? found : NULL,
                                              run->options.metric, p, q, error))
      return FALSE;
  }
  if (!run->writer)
    return TRUE; /* split: rank 0 writes alone */
  if (!knnwb_host_speaks()) {
    /* Whole input under mpirun: every rank found the same neighbourhood (the kNN queries shared
     * their work): rank 0 writes it, the others drop their temporaries. */
    knnwb_host_outputs_discard(run->outputs);
    g_ptr_array_set_size(run->outputs, 0);
    return TRUE;
  }
  KnnwbHostAttributes attributes = {0};
  if (command->annotation != NULL &&
      !knnwb_host_attributes_read(command->annotation, command->annotation_id, "--annotation-id",
                                  run->data, run->labels, run->n_rows, command->rest[0],
                                  &attributes, error)) {
    knnwb_host_attributes_clear(&attributes);
    return FALSE;
  }
  g_autofree const char **per_vertex = NULL;
  g_autofree KnnwbNodeAttribute *nodes =
      knnwb_host_attributes_nodes(&attributes, found->rows, found->n_vertices, &per_vertex);
  /* The format is the final name's: the temporary's name has another ending. */
  KnnwbOutputFormat format;
  gboolean gml = knnwb_formats_output_from_path(command->output, &format, error) &&
                 knnwb_neighbourhood_write_graph_annotated(run->gml_temporary, format, found, named,
                                                           (unsigned long)command->seed, nodes,
                                                           attributes.n, error);
  knnwb_host_attributes_clear(&attributes);
  if (gml && command->plots.dir != NULL)
    gml = knnwb_host_plots_write(&command->plots, found, run->data, command->rest[0], run->outputs,
                                 error);
  return gml &&
         (run->table_temporary == NULL ||
          (p != NULL ? knnwb_neighbourhood_write_table_statistics(
                           run->table_temporary, found, named, run->options.metric, p, q, error)
                     : knnwb_neighbourhood_write_table(run->table_temporary, found, named,
                                                       run->options.metric, error)));
}

static void knnwb_neighbourhood_print_summary(const KnnwbNeighbourhoodRun *run)
{
  const KnnwbNeighbourhoodCommand *command = &run->command;
  const KnnwbNeighbourhood *found = run->found;
  const char *table = command->table;
  g_printerr("knnwb: %zu x %zu, k=%zu %s, order %" G_GINT64_FORMAT " %s: %zu rows, %" IGRAPH_PRId
             " edges, %zu rows queried%s -> %s%s%s (read %.2f "
             "s, expand %.2f s, neighbourhood %.2f s, write %.2f s)\n",
             run->n_rows, run->n_cols, run->options.k, knnwb_metric_to_string(run->options.metric),
             command->order, knnwb_direction_to_string(run->direction), found->n_vertices,
             igraph_ecount(&found->graph), found->n_queries,
             found->whole_graph ? " (whole graph)" : "", command->output, table ? ", " : "",
             table ? table : "", (double)(run->read_done - run->start) / 1e6,
             (double)(run->expand_done - run->read_done) / 1e6,
             (double)(run->found_done - run->expand_done) / 1e6,
             (double)(g_get_monotonic_time() - run->found_done) / 1e6);
}

/* Reads, expands, finds, writes and commits (the last thing, refused when a signal arrived
 * during the layout or the writes). */
static gboolean knnwb_neighbourhood_execute(KnnwbNeighbourhoodRun *run, GError **error)
{
  knnwb_host_log_set_quiet(run->command.quiet);
  run->start = g_get_monotonic_time();
  if (!knnwb_neighbourhood_read(run, error))
    return FALSE;
  run->expand_done = g_get_monotonic_time();
  if (!knnwb_neighbourhood_search(run, error))
    return FALSE;
  run->found_done = g_get_monotonic_time();
  const KnnwbKnnGroup *group = run->split_rows ? run->group : NULL;
  gboolean written = knnwb_neighbourhood_write(run, error);
  if (group != NULL && !group->agree(group, written, error))
    written = FALSE;
  if (!written || !knnwb_host_commit_agreed(group, TRUE, run->outputs, run->options.cancel, error))
    return FALSE;
  if (!run->command.quiet && run->found != NULL) /* split: rank 0 holds it and speaks */
    knnwb_neighbourhood_print_summary(run);
  return TRUE;
}

int knnwb_host_command_neighbourhood(int argc, char **argv)
{
  KnnwbNeighbourhoodRun run = {.command = {.order = 1, .seed = 42, .plots = {.top = 9}},
                               .direction = KNNWB_DIRECTION_OUT,
                               .outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free)};
  g_autoptr(GOptionContext) context = knnwb_neighbourhood_options_new(&run.command);
  g_autoptr(GError) error = NULL;
  const gboolean parsed = knnwb_neighbourhood_parse(context, argc, argv, &run, &error);
  const gboolean done = parsed && knnwb_neighbourhood_prepare(&run, &error) &&
                        knnwb_neighbourhood_execute(&run, &error);
  knnwb_knn_devices_wait(); /* a run that failed before its search */
  const int status = knnwb_host_command_finish("neighbourhood", parsed, done, run.outputs, error);
  knnwb_neighbourhood_run_clear(&run);
  return status;
}
