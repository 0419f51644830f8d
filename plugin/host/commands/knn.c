/* `knnwb knn INPUT -k K --metric M -o OUT`: the kNN graph of a matrix file, written atomically. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>
#include <unistd.h>
#include <knnwb/distributed.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/graph.h>
#include <knnwb/knn.h>
#include "commands.h"
#include "runtime/runtime.h"
#include "options.h"
#include "runtime/split_input.h"

typedef struct {
  KnnwbHostInputArgs input;
  KnnwbHostKnnArgs knn;
  char *graph;
  char *output_format;
  char *layout;
  char *mpi_input;
  char *output;
  gboolean quiet;
  char **rest;
} KnnwbKnnCommand;

static void knnwb_knn_command_clear(KnnwbKnnCommand *command)
{
  knnwb_host_input_clear(&command->input);
  knnwb_host_knn_clear(&command->knn);
  g_free(command->graph);
  g_free(command->output_format);
  g_free(command->layout);
  g_free(command->mpi_input);
  g_free(command->output);
  g_strfreev(command->rest);
}

/* A long run must not end with "cannot write": the target's kind, its directory and whether it
 * is the input are checked before anything is read. */
static gboolean knnwb_knn_check_output(const char *input, const char *output, GError **error)
{
  if (!knnwb_host_check_output(output, error))
    return FALSE;
  g_autofree char *input_identity = knnwb_host_path_identity(input);
  g_autofree char *output_identity = knnwb_host_path_identity(output);
  if (strcmp(input_identity, output_identity) == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "'%s' is the input file '%s'; writing the graph there would destroy the data",
                output, input);
    return FALSE;
  }
  return TRUE;
}

/* The undirected edges of an interleaved vector (a b a b ...) and their weights, as writers take
 * them. */
static KnnwbEdgeList knnwb_knn_edge_list(size_t n_rows, igraph_vector_int_t *edges,
                                         igraph_vector_t *weights)
{
  return (KnnwbEdgeList){.n_vertices = (igraph_integer_t)n_rows,
                         .n_edges = igraph_vector_size(weights),
                         .directed = FALSE,
                         .from = VECTOR(*edges),
                         .to = VECTOR(*edges) + 1,
                         .stride = 2,
                         .weights = VECTOR(*weights)};
}

int knnwb_host_command_knn(int argc, char **argv)
{
  KnnwbKnnCommand command = {.knn = {.k = -1}};
  GOptionEntry entries[] = {
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &command.output,
       "Output file (written atomically; format from its extension)", "OUT"},
      {"graph", 'g', 0, G_OPTION_ARG_STRING, &command.graph,
       "directed (default: k edges per row), union or mutual", "MODE"},
      {"output-format", 'F', 0, G_OPTION_ARG_STRING, &command.output_format,
       "auto (default: by extension), knn, gml, graphml, neighbors, npy, npz, mtx", "F"},
      {"layout", 'l', 0, G_OPTION_ARG_STRING, &command.layout,
       "GML/GraphML coordinates: auto (default: fr up to 20,000 vertices, none above), fr, drl, "
       "umap or none",
       "L"},
      {"mpi-input", 0, 0, G_OPTION_ARG_STRING, &command.mpi_input,
       "Under mpirun: split (each rank reads and holds only its block of rows; the default on "
       "the CPU), whole (every rank reads all rows and shares the tiles; the default on GPUs) or "
       "auto",
       "M"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &command.quiet, "No progress or summary", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &command.rest, NULL, "INPUT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("-k K -o OUT");
  g_option_context_set_summary(
      context,
      "Builds the exact k-nearest-neighbour graph of the rows of INPUT (CIBM, CSV, TSV, "
      "GCT, NPY or a GEO series matrix, gzip-compressed or not)\nand writes it to OUT: "
      ".knn (the GPU-FS-kNN format: `n m`, then `source target weight`,\n0-based), .gml "
      "(for yEd), .graphml, .tsv (neighbour table), .npy/.npz (n x k index and\ndistance "
      "arrays for NumPy) or .mtx (Matrix Market distance matrix). Byte sizes take K, M,\nG, "
      "T suffixes.");
  g_option_context_set_description(
      context, "Exit status: 0 on success, 1 when the input or the run fails (the message starts "
               "with file:line:\nwhere it can), 2 on a usage error, 130/143 when interrupted. No "
               "output file is left behind\nby a failed or interrupted run.");
  knnwb_host_input_add_entries(context, &command.input);
  knnwb_host_knn_add_entries(context, &command.knn);
  g_option_context_add_main_entries(context, entries, NULL);

  int status = 1;
  g_autoptr(GError) error = NULL;
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  KnnwbGraphMode mode = KNNWB_GRAPH_DIRECTED;
  KnnwbOutputFormat output_format = KNNWB_OUTPUT_AUTO;
  KnnwbReadOptions read_options;
  knnwb_formats_read_options_init(&read_options);
  g_autoptr(KnnwbMatrix) data = NULL;
  KnnwbHostSplitInput split = {0}; /* this rank's rows (split memory) */
  g_autoptr(KnnwbNeighbors) neighbors = NULL;
  g_autofree char *backend_used = NULL;
  KnnwbHostProgress *progress = NULL;
  g_autoptr(GPtrArray) outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free);
  const char *temporary = NULL;
  g_autofree char *side_final = NULL, *side_temporary = NULL;

  if (!g_option_context_parse(context, &argc, &argv, &error))
    goto usage;
  if (command.rest == NULL || command.rest[0] == NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "no INPUT file given");
    goto usage;
  }
  if (command.rest[1] != NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "one INPUT file expected, got '%s' too", command.rest[1]);
    goto usage;
  }
  if (command.knn.k == -1) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "-k K is required");
    goto usage;
  }
  if (command.output == NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "-o OUT is required");
    goto usage;
  }
  if (!knnwb_host_knn_options(&command.knn, TRUE, &options, &error) ||
      !knnwb_host_input_options(&command.input, &read_options, &error) ||
      (command.graph && !knnwb_graph_mode_from_string(command.graph, &mode, &error)))
    goto usage;
  options.data_name = command.rest[0];
  if (command.output_format != NULL) {
    if (!knnwb_formats_output_from_string(command.output_format, &output_format, &error))
      goto usage;
  }
  if (output_format == KNNWB_OUTPUT_AUTO &&
      !knnwb_formats_output_from_path(command.output, &output_format, &error))
    goto usage;
  if (output_format == KNNWB_OUTPUT_LABELS_TSV) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: a labels table needs a clustering; use `knnwb cluster` for that",
                command.output);
    goto usage;
  }
  KnnwbGmlOptions gml;
  knnwb_formats_gml_options_init(&gml);
  if (command.layout != NULL) {
    if (!knnwb_formats_layout_from_string(command.layout, &gml.layout, &error))
      goto usage;
    if (output_format != KNNWB_OUTPUT_GML && output_format != KNNWB_OUTPUT_GRAPHML) {
      g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "--layout applies to .gml and .graphml outputs only");
      goto usage;
    }
  }
  const gboolean split_asked = command.mpi_input != NULL && g_str_equal(command.mpi_input, "split");
  if (command.mpi_input != NULL && !split_asked && !g_str_equal(command.mpi_input, "whole") &&
      !g_str_equal(command.mpi_input, "auto")) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--mpi-input %s: use split, whole or auto", command.mpi_input);
    goto usage;
  }
  if ((output_format == KNNWB_OUTPUT_NPY || output_format == KNNWB_OUTPUT_NPZ) &&
      mode != KNNWB_GRAPH_DIRECTED) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--graph %s: .npy/.npz hold the n x k neighbour lists; write .knn or .mtx for a "
                "%s graph",
                command.graph, command.graph);
    goto usage;
  }

  /* Under mpirun every rank reads its block of rows (split memory) or the whole input, and
   * computes its share; the ranks agree after each local phase, so one rank's failure stops all
   * with its message. Rank 0 holds the output's temporary and commits it. */
  const KnnwbKnnGroup *group = knnwb_host_group();
  const gboolean writer = group == NULL || group->rank == 0;
  options.group = group;
  /* Lists that are written row by row need no rank to hold them all. */
  const gboolean rows_in_place = group != NULL && mode == KNNWB_GRAPH_DIRECTED &&
                                 knnwb_distributed_writes_in_place(output_format);
  /* Nor do the undirected graph's edge lists: each rank writes the edges whose smaller end lies in
   * its range of rows (ranges cut by edge count), sent there by the ranks that hold them. */
  const gboolean edges_in_place =
      group != NULL && mode != KNNWB_GRAPH_DIRECTED &&
      (output_format == KNNWB_OUTPUT_KNN || output_format == KNNWB_OUTPUT_MTX);
  /* Each rank gets its rows' lists; for the other outputs rank 0 gathers them (below). */
  options.group_own_rows = group != NULL;
  /* Split memory (each rank reads and holds its block of rows) unless the input is wanted whole:
   * asked for, or by default on GPUs, whose backend scores a visiting block's pairs as two panels
   * (twice the arithmetic) while the shared tiles of a whole input are scored once. */
  const gboolean whole_asked = command.mpi_input != NULL && g_str_equal(command.mpi_input, "whole");
  options.group_split =
      group != NULL && (split_asked || (!whole_asked && !knnwb_knn_uses_gpu(&options)));
  gboolean ready = knnwb_knn_check_output(command.rest[0], command.output, &error);
  options.cancel = knnwb_host_signals_install();
  /* Creating the temporary proves the directory takes files (root passes access() on /proc). */
  if (ready && writer) {
    ready = (temporary = knnwb_host_outputs_add(outputs, command.output, &error)) != NULL;
    /* .mtx row labels and .npy distances go to a side file named after the output. */
    side_final = ready ? knnwb_formats_side_path(command.output, output_format) : NULL;
    side_temporary = ready ? knnwb_formats_side_path(temporary, output_format) : NULL;
    if (side_final != NULL)
      knnwb_host_outputs_add_side_file(outputs, side_temporary, side_final);
  }
  if (group != NULL && !group->agree(group, ready, &error))
    ready = FALSE;
  if (!ready)
    goto failed;

  gint64 start = g_get_monotonic_time();
  void *read_progress = knnwb_host_input_watch(&read_options, options.cancel, command.quiet);
  KnnwbReadInfo info = {0};
  /* The rows this process computes on: all, or (split memory) its block, which the helper reads
   * alone or cuts from the whole file; the writers of all rows want every rank's labels. */
  size_t n_rows = 0, n_cols = 0;
  const KnnwbMatrix *rows = NULL;
  const char *const *labels = NULL;
  if (options.group_split) {
    gboolean split_read = knnwb_host_split_read(group, command.rest[0], &read_options, TRUE,
                                                options.cancel, &split, &error);
    knnwb_host_progress_finish(read_progress);
    if (!split_read)
      goto failed;
    info = split.info;
    rows = split.block;
    n_rows = split.n_rows;
    labels = split.labels;
  } else {
    gboolean read = knnwb_formats_read_matrix(command.rest[0], &read_options, &data, &info, &error);
    knnwb_host_progress_finish(read_progress);
    if (read && *options.cancel) {
      g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted");
      read = FALSE;
    }
    if (group != NULL && !group->agree(group, read, &error))
      read = FALSE;
    if (!read)
      goto failed;
    rows = data;
    n_rows = data->n_rows;
    labels = (const char *const *)data->row_labels;
  }
  n_cols = rows->n_cols;
  gint64 read_done = g_get_monotonic_time();

  knnwb_host_log_set_quiet(command.quiet);
  progress = knnwb_host_progress_new("knn", command.quiet);
  if (options.group_split) /* a share of the ranks' schedule, not tiles */
    knnwb_host_progress_set_unit(progress, NULL);
  options.progress = progress ? knnwb_host_progress_update : NULL;
  options.progress_data = progress;
  gboolean computed = knnwb_knn_self(rows, &options, &neighbors, &error);
  knnwb_host_progress_finish(progress);
  progress = NULL;
  if (!computed) {
    if (error->domain == KNNWB_ERROR && error->code != KNNWB_ERROR_CANCELLED)
      g_prefix_error(&error, "%s: ", command.rest[0]);
    goto failed;
  }
  gint64 knn_done = g_get_monotonic_time();
  backend_used = g_strdup(neighbors->backend_used);
  if (group != NULL && !rows_in_place && !edges_in_place) {
    /* Rank 0 builds the graph or writes every row: it alone holds every list. */
    g_autoptr(KnnwbNeighbors) own = g_steal_pointer(&neighbors);
    if (!knnwb_neighbors_gather_root(group, own, &neighbors, &error))
      goto failed;
  }

  igraph_integer_t n_edges = 0;
  double layout_seconds = -1.0;
  KnnwbLayout layout_used = KNNWB_LAYOUT_NONE;
  KnnwbWriteControl control = {.n_threads = options.n_threads, .cancel = options.cancel};
  progress = knnwb_host_progress_new("write", command.quiet);
  knnwb_host_progress_set_unit(progress, "rows");
  control.progress = progress ? knnwb_host_progress_update : NULL;
  control.progress_data = progress;
  gboolean written = FALSE;
  if (rows_in_place) {
    /* Each rank writes its rows at their place in rank 0's temporary (and its side file). */
    if (output_format == KNNWB_OUTPUT_NPY || output_format == KNNWB_OUTPUT_NPZ)
      knnwb_host_progress_set_unit(progress, "bytes");
    int64_t edges = 0;
    for (size_t i = 0; i < neighbors->n_queries; i++)
      edges += neighbors->n_found[i];
    written = knnwb_distributed_write_lists(group, temporary, output_format, neighbors, n_rows,
                                            labels, &control, &error) &&
              group->reduce(group, &edges, 1, KNNWB_GROUP_SUM, &error);
    n_edges = (igraph_integer_t)edges;
  } else if (edges_in_place) {
    /* Each rank's edges (smaller end in its range) at their place in rank 0's temporary. */
    igraph_vector_int_t edges;
    igraph_vector_t weights;
    gboolean edges_ready = igraph_vector_int_init(&edges, 0) == IGRAPH_SUCCESS;
    gboolean weights_ready = igraph_vector_init(&weights, 0) == IGRAPH_SUCCESS;
    if (!edges_ready || !weights_ready)
      g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "out of memory");
    written =
        group->agree(group, edges_ready && weights_ready, &error) &&
        knnwb_graph_edges_from_own_neighbors(group, neighbors, mode, &edges, &weights, &error);
    g_clear_pointer(&neighbors, knnwb_neighbors_free);
    if (written) {
      KnnwbEdgeList list = knnwb_knn_edge_list(n_rows, &edges, &weights);
      knnwb_host_progress_set_unit(progress, "edges");
      int64_t total = list.n_edges;
      written = knnwb_distributed_write_edges(group, temporary, output_format, &list, n_rows,
                                              labels, &control, &error) &&
                group->reduce(group, &total, 1, KNNWB_GROUP_SUM, &error);
      n_edges = (igraph_integer_t)total;
    }
    if (edges_ready)
      igraph_vector_int_destroy(&edges);
    if (weights_ready)
      igraph_vector_destroy(&weights);
  } else if (!writer) {
    /* Rank 0 builds the graph and writes it; the others learn how that went below. */
    written = TRUE;
  } else if (output_format == KNNWB_OUTPUT_NPY || output_format == KNNWB_OUTPUT_NPZ ||
             (mode == KNNWB_GRAPH_DIRECTED &&
              (output_format == KNNWB_OUTPUT_KNN || output_format == KNNWB_OUTPUT_MTX ||
               output_format == KNNWB_OUTPUT_NEIGHBORS_TSV))) {
    /* Straight from the lists: no graph needed. */
    if (output_format == KNNWB_OUTPUT_NPY || output_format == KNNWB_OUTPUT_NPZ)
      knnwb_host_progress_set_unit(progress, "bytes");
    for (size_t i = 0; i < neighbors->n_queries; i++)
      n_edges += neighbors->n_found[i];
    written =
        knnwb_formats_write_lists(temporary, output_format, neighbors, labels, &control, &error);
  } else if (output_format == KNNWB_OUTPUT_KNN || output_format == KNNWB_OUTPUT_MTX) {
    /* An undirected edge list, still without an igraph_t (igraph would index it: 4 more integers
     * per edge and a sort). */
    igraph_vector_int_t edges;
    igraph_vector_t weights;
    if (!knnwb_error_from_igraph(igraph_vector_int_init(&edges, 0), "igraph_vector_int_init",
                                 &error))
      goto written_out;
    if (igraph_vector_init(&weights, 0) != IGRAPH_SUCCESS) {
      igraph_vector_int_destroy(&edges);
      g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "out of memory");
      goto written_out;
    }
    written = knnwb_graph_edges_from_neighbors(neighbors, mode, &edges, &weights, &error);
    g_clear_pointer(&neighbors, knnwb_neighbors_free);
    if (written) {
      KnnwbEdgeList list = knnwb_knn_edge_list(n_rows, &edges, &weights);
      knnwb_host_progress_set_unit(progress, "edges");
      n_edges = list.n_edges;
      written =
          knnwb_formats_write_edges(temporary, output_format, &list, labels, &control, &error);
    }
    igraph_vector_int_destroy(&edges);
    igraph_vector_destroy(&weights);
  } else {
    igraph_t graph;
    igraph_vector_t weights;
    igraph_matrix_t coordinates;
    if (!knnwb_error_from_igraph(igraph_vector_init(&weights, 0), "igraph_vector_init", &error))
      goto written_out;
    if (!knnwb_graph_from_neighbors(neighbors, mode, &graph, &weights, &error)) {
      igraph_vector_destroy(&weights);
      goto written_out;
    }
    /* The lists are no longer needed: give their memory back before the layout. */
    g_clear_pointer(&neighbors, knnwb_neighbors_free);
    written = knnwb_error_from_igraph(igraph_matrix_init(&coordinates, 0, 0), "igraph_matrix_init",
                                      &error);
    if (written && (output_format == KNNWB_OUTPUT_GML || output_format == KNNWB_OUTPUT_GRAPHML)) {
      layout_used =
          knnwb_formats_layout_choose(gml.layout, igraph_vcount(&graph), gml.fr_max_vertices);
      if (layout_used != KNNWB_LAYOUT_NONE && igraph_vcount(&graph) > 0) {
        gint64 layout_start = g_get_monotonic_time();
        KnnwbHostProgress *layout_progress = knnwb_host_progress_new("layout", command.quiet);
        knnwb_host_progress_set_unit(layout_progress, "iterations");
        KnnwbWriteControl layout_control = control;
        layout_control.progress = layout_progress ? knnwb_host_progress_update : NULL;
        layout_control.progress_data = layout_progress;
        written =
            knnwb_formats_layout_run(&graph, &weights, layout_used, gml.fr_max_vertices, gml.seed,
                                     gml.node_size, &layout_control, &coordinates, NULL, &error);
        knnwb_host_progress_finish(layout_progress);
        layout_seconds = (double)(g_get_monotonic_time() - layout_start) / 1e6;
        gml.coordinates = &coordinates;
      }
      gml.layout = KNNWB_LAYOUT_NONE;
    }
    if (written) {
      knnwb_host_progress_set_unit(progress, "items");
      KnnwbGraphOutput output = {
          .graph = &graph, .weights = &weights, .labels = labels, .gml = &gml, .control = &control};
      written = knnwb_formats_write_graph(temporary, output_format, &output, &error);
    }
    n_edges = igraph_ecount(&graph);
    igraph_matrix_destroy(&coordinates);
    igraph_destroy(&graph);
    igraph_vector_destroy(&weights);
  }
written_out:
  knnwb_host_progress_finish(g_steal_pointer(&progress));
  /* Rank 0 wrote alone (or every rank wrote and agreed already): tell the others. */
  if (group != NULL && !rows_in_place && !edges_in_place && !group->agree(group, written, &error))
    written = FALSE;
  if (!written)
    goto failed;
  /* The commit is the last thing, and refuses when a signal arrived during the graph, the layout
   * or the write: the previous output, if any, is never touched by an interrupted run. A job
   * first agrees that no rank was interrupted. */
  if (group != NULL) {
    gboolean calm = *options.cancel == 0;
    if (!calm)
      g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted while writing");
    if (!group->agree(group, calm, &error))
      goto failed;
  }
  gboolean committed = !writer || knnwb_host_outputs_commit(outputs, options.cancel, &error);
  if (group != NULL && !group->agree(group, committed, &error))
    committed = FALSE;
  if (!committed)
    goto failed;
  if (!command.quiet) {
    gint64 now = g_get_monotonic_time();
    double total = (double)(now - start) / 1e6;
    g_autofree char *layout_text =
        layout_seconds >= 0.0 ? g_strdup_printf(", layout %.2f s (%s)", layout_seconds,
                                                knnwb_formats_layout_to_string(layout_used))
                              : g_strdup("");
    double write_seconds = (double)(now - knn_done) / 1e6 - MAX(layout_seconds, 0.0);
    g_printerr("knnwb: %zu x %zu %s, k=%zu %s on %s: %" IGRAPH_PRId
               " edges -> %s (read %.2f s, knn %.2f s%s, write %.2f s, total %.2f s)\n",
               n_rows, n_cols, knnwb_formats_input_to_string(info.format), options.k,
               knnwb_metric_to_string(options.metric), backend_used ? backend_used : "?", n_edges,
               command.output, (double)(read_done - start) / 1e6,
               (double)(knn_done - read_done) / 1e6, layout_text, write_seconds, total);
  }
  status = 0;
  goto done;

usage:
  g_printerr("knnwb knn: %s\nTry `knnwb knn --help`.\n", error->message);
  status = 2;
  goto done;
failed:
  knnwb_host_outputs_discard(outputs);
  knnwb_host_outputs_name_targets(outputs, error);
  status = knnwb_host_exit_status(error);
  if (status != 1)
    g_printerr("knnwb: interrupted; no output written\n");
  else
    knnwb_host_print_error(error);
done:
  knnwb_host_progress_finish(progress);
  knnwb_host_split_input_clear(&split);
  knnwb_knn_command_clear(&command);
  return status;
}
