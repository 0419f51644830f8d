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
#include <knnwb/write_matrix.h>
#include <knnwb/graph.h>
#include <knnwb/knn.h>
#include "commands.h"
#include "runtime/runtime.h"
#include "options.h"
#include "runtime/split_input.h"

/* --mpi-input: how the ranks of an mpirun job hold the input. */
typedef enum { KNNWB_MPI_INPUT_SPLIT, KNNWB_MPI_INPUT_WHOLE, KNNWB_MPI_INPUT_AUTO } KnnwbMpiInput;
/* clang-format off */
#define KNNWB_MPI_INPUT_NAMES(X)                                                                   \
  X(KNNWB_MPI_INPUT_SPLIT, "split")                                                                \
  X(KNNWB_MPI_INPUT_WHOLE, "whole")                                                                \
  X(KNNWB_MPI_INPUT_AUTO, "auto")
/* clang-format on */
static const KnnwbEnumName knnwb_mpi_input_names[] = {KNNWB_MPI_INPUT_NAMES(KNNWB_ENUM_ENTRY)};
static const KnnwbEnumTable knnwb_mpi_input_table =
    KNNWB_ENUM_TABLE(knnwb_mpi_input_names, 0, " or ", "--mpi-input ", ": use ", "", "(null)");

typedef struct {
  KnnwbHostInputArgs input;
  KnnwbHostKnnArgs knn;
  char *graph;
  char *output_format;
  char *layout;
  char *mpi_input;
  char *output;
  char *weights;     /* .h5ad: obsp['connectivities'] */
  char *into;        /* .h5ad: the AnnData whose copy gets the graph */
  char *lists_dtype; /* .npy/.npz: 64 or 32 */
  char *annotation;
  char *annotation_id;
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
  g_free(command->weights);
  g_free(command->into);
  g_free(command->lists_dtype);
  g_free(command->annotation);
  g_free(command->annotation_id);
  g_strfreev(command->rest);
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

/* One run of the command: the parsed options, where this rank stands, what it read and computed. */
typedef struct {
  KnnwbKnnCommand command;
  KnnwbKnnOptions options;
  KnnwbReadOptions read_options;
  KnnwbGraphMode mode;
  KnnwbOutputFormat output_format;
  KnnwbH5adOutput h5ad;        /* an .h5ad output's weights and --into */
  KnnwbListsDtype lists_dtype; /* .npy/.npz: the arrays' element types */
  KnnwbDrawingOptions gml;
  int mpi_input; /* KnnwbMpiInput */
  /* Under mpirun (group != NULL), each rank computes its share; rank 0 (the writer) holds the
   * output's temporary and commits it. */
  const KnnwbKnnGroup *group;
  gboolean writer;
  gboolean rows_in_place;  /* each rank writes its rows' lists at their place */
  gboolean edges_in_place; /* each rank writes the undirected edges of its range of rows */
  GPtrArray *outputs;      /* KnnwbPipelineOutput */
  const char *temporary;   /* rank 0's temporary of the output */
  /* The rows this process computes on: all (data), or its block of a split input. */
  KnnwbMatrix *data;
  KnnwbHostSplitInput split;
  const KnnwbMatrix *rows;
  size_t n_rows;
  const char *const *labels; /* every row's, for the writers */
  KnnwbReadInfo info;
  KnnwbNeighbors *neighbors;
  char *backend_used;
  KnnwbHostAttributes attributes; /* --annotation, the writer's, read before the search */
  /* For the summary line. */
  igraph_integer_t n_edges;
  double layout_seconds; /* < 0: no layout */
  KnnwbLayout layout_used;
  gint64 start, read_done, knn_done;
} KnnwbKnnRun;

/* Every file of the run (the input, --labels, the output and its side file), declared for the
 * checks every command shares: names at parse time, the rest before anything is read (a long run
 * must not end with "cannot write", nor write over its data). */
static KnnwbHostFiles *knnwb_knn_files(const KnnwbKnnRun *run)
{
  KnnwbHostFiles *files = knnwb_host_files_new();
  knnwb_host_input_files(files, run->command.rest[0], &run->command.input);
  g_autofree char *annotation_table = knnwb_host_spec_table(run->command.annotation);
  knnwb_host_files_side_input(files, annotation_table, "--annotation");
  knnwb_host_files_side_input(files, run->command.into, "--into");
  knnwb_host_files_output_with_side(files, run->command.output, "-o", run->output_format);
  return files;
}

static void knnwb_knn_run_clear(KnnwbKnnRun *run)
{
  knnwb_knn_command_clear(&run->command);
  g_ptr_array_unref(run->outputs);
  knnwb_matrix_free(run->data);
  knnwb_host_split_input_clear(&run->split);
  knnwb_neighbors_free(run->neighbors);
  g_free(run->backend_used);
  knnwb_host_attributes_clear(&run->attributes);
}

/* The options of knnwb knn, into command. */
static GOptionContext *knnwb_knn_options_new(KnnwbKnnCommand *command)
{
  GOptionContext *context = g_option_context_new("-k K -o OUT");
  GOptionEntry entries[] = {
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &command->output,
       "Output file (written atomically; format from its extension)", "OUT"},
      {"graph", 'g', 0, G_OPTION_ARG_STRING, &command->graph,
       knnwb_host_help_choices(&knnwb_graph_mode_table, "", " (default: k edges per row)", NULL,
                               ""),
       "MODE"},
      {"output-format", 'F', 0, G_OPTION_ARG_STRING, &command->output_format,
       knnwb_host_help_choices(&knnwb_output_table, "", " (default: by extension)", "labels", ""),
       "F"},
      {"layout", 'l', 0, G_OPTION_ARG_STRING, &command->layout,
       knnwb_host_help_choices(&knnwb_layout_table, "GML/GraphML coordinates: ",
                               " (default: fr up to 20,000 vertices, none above)", NULL, ""),
       "L"},
      {"mpi-input", 0, 0, G_OPTION_ARG_STRING, &command->mpi_input,
       knnwb_host_help_choices(&knnwb_mpi_input_table, "Under mpirun: ",
                               " (each rank reads and holds only its block of rows)", NULL,
                               "; whole: every rank reads all rows and shares the tiles; auto, the "
                               "default: whole on GPUs, split on the CPU (clustered rows searched "
                               "cluster by cluster on the blocks either way)"),
       "M"},
      {"weights", 0, 0, G_OPTION_ARG_STRING, &command->weights,
       knnwb_host_help_choices(&knnwb_h5ad_weights_table, ".h5ad: obsp['connectivities'] as ",
                               " (default, scanpy's)", NULL, ""),
       "W"},
      {"into", 0, 0, G_OPTION_ARG_FILENAME, &command->into,
       ".h5ad: write the graph into a copy of this AnnData file (the input's cells), which stays "
       "as it is",
       "FILE"},
      {"lists-dtype", 0, 0, G_OPTION_ARG_STRING, &command->lists_dtype,
       ".npy/.npz: the lists' element types, 64 (default: int64 indices, float64 distances) or "
       "32 (int32 and float32, distances rounded: half the bytes)",
       "64|32"},
      {"annotation", 'a', 0, G_OPTION_ARG_STRING, &command->annotation,
       "Node attributes of .gml/.graphml: columns of a table whose first column names the rows, "
       "or names of INPUT's own sample annotations (COLUMN[,COLUMN])",
       "TABLE:COLUMN[,COLUMN]"},
      {"annotation-id", 0, 0, G_OPTION_ARG_STRING, &command->annotation_id,
       "The --annotation table's column of row names (default: its first column)", "COLUMN"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &command->quiet, "No progress or summary", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &command->rest, NULL, "INPUT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_option_context_set_summary(
      context, "Builds the exact k-nearest-neighbour graph of the rows of INPUT (CSV, TSV, GCT, "
               "NPY, a GEO series matrix or the seed papers' CIBM text format, gzip-compressed or "
               "not;\nthe cells of an AnnData "
               ".h5ad or of a 10x Genomics matrix directory or .mtx) and writes it to OUT:\n"
               ".knn (text: `n m`, then `source target distance`, 0-based), .gml (for yEd),\n"
               ".graphml, .tsv (neighbour table), .npy/.npz (n x k index and distance arrays for\n"
               "NumPy, with the row labels), .mtx (Matrix Market distance matrix) or .h5ad\n"
               "(AnnData with scanpy's neighbors keys). Byte sizes take K, M, G, T suffixes.");
  g_option_context_set_description(
      context, "Example:\n"
               "  knnwb knn expr.tsv -k 20 --metric pearson -o graph.gml\n\n"
               "Exit status: 0 on success, 1 when the input or the run fails (the message starts "
               "with file:line:\nwhere it can), 2 on a usage error, 130/143 when interrupted. No "
               "output file is left behind\nby a failed or interrupted run.");
  knnwb_host_input_add_entries(context, &command->input);
  knnwb_host_knn_add_entries(context, &command->knn);
  g_option_context_add_main_entries(context, entries, NULL);
  return context;
}

/* --lists-dtype, for .npy and .npz outputs only. */
static gboolean knnwb_knn_parse_lists_dtype(KnnwbKnnRun *run, GError **error)
{
  const char *dtype = run->command.lists_dtype;
  run->lists_dtype = KNNWB_LISTS_DTYPE_64;
  if (dtype == NULL)
    return TRUE;
  if (strcmp(dtype, "64") != 0 && strcmp(dtype, "32") != 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--lists-dtype %s: 64 (int64 and float64) or 32 (int32 and float32)", dtype);
    return FALSE;
  }
  if (run->output_format != KNNWB_OUTPUT_NPY && run->output_format != KNNWB_OUTPUT_NPZ) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--lists-dtype applies to .npy and .npz outputs only");
    return FALSE;
  }
  run->lists_dtype = strcmp(dtype, "32") == 0 ? KNNWB_LISTS_DTYPE_32 : KNNWB_LISTS_DTYPE_64;
  return TRUE;
}

/* --weights and --into, for .h5ad outputs only; --into is read, never written, so it must not be
 * the output. */
static gboolean knnwb_knn_parse_h5ad(KnnwbKnnRun *run, GError **error)
{
  const KnnwbKnnCommand *command = &run->command;
  if (run->output_format != KNNWB_OUTPUT_H5AD && (command->weights || command->into)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s applies to .h5ad outputs only", command->weights ? "--weights" : "--into");
    return FALSE;
  }
  int weights = KNNWB_H5AD_WEIGHTS_UMAP;
  if (command->weights != NULL && !knnwb_host_option_choice(&knnwb_h5ad_weights_table, "--weights",
                                                            command->weights, &weights, error))
    return FALSE;
  run->h5ad.weights = (KnnwbH5adWeights)weights;
  run->h5ad.into = command->into;
  return TRUE;
}

/* The --into file exists and is not the output. Each rank looks at its own file system (a
 * directory another host does not see, a relative path under another working directory): the
 * caller agrees on the result, so this is no part of the parse that each rank does alone. */
static gboolean knnwb_knn_check_into(const KnnwbKnnCommand *command, GError **error)
{
  if (command->into == NULL)
    return TRUE;
  g_autofree char *into = knnwb_host_path_identity(command->into);
  g_autofree char *output = knnwb_host_path_identity(command->output);
  if (!g_file_test(command->into, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "--into %s: no such file", command->into);
    return FALSE;
  }
  if (g_strcmp0(into, output) == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "-o %s is the --into file, which knnwb only reads: write the copy elsewhere",
                command->output);
    return FALSE;
  }
  return TRUE;
}

/* The output's format (from --output-format or the extension) and --layout, checked against
 * each other and --graph (usage errors). */
static gboolean knnwb_knn_parse_output(KnnwbKnnRun *run, GError **error)
{
  const KnnwbKnnCommand *command = &run->command;
  if ((command->output_format != NULL &&
       !knnwb_formats_output_from_string(command->output_format, &run->output_format, error)) ||
      (run->output_format == KNNWB_OUTPUT_AUTO &&
       !knnwb_formats_output_from_path(command->output, &run->output_format, error)))
    return FALSE;
  if (run->output_format == KNNWB_OUTPUT_LABELS_TSV) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: a labels table needs a clustering; use `knnwb cluster` for that",
                command->output);
    return FALSE;
  }
  knnwb_drawing_options_init(&run->gml);
  if (command->layout != NULL) {
    if (!knnwb_drawing_layout_from_string(command->layout, &run->gml.layout, error))
      return FALSE;
    if (run->output_format != KNNWB_OUTPUT_GML && run->output_format != KNNWB_OUTPUT_GRAPHML) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "--layout applies to .gml and .graphml outputs only");
      return FALSE;
    }
  }
  if ((command->annotation != NULL || command->annotation_id != NULL) &&
      run->output_format != KNNWB_OUTPUT_GML && run->output_format != KNNWB_OUTPUT_GRAPHML) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--annotation adds node attributes to .gml and .graphml outputs only");
    return FALSE;
  }
  if (command->mpi_input != NULL &&
      !knnwb_enum_from_string(&knnwb_mpi_input_table, command->mpi_input, &run->mpi_input, error))
    return FALSE;
  if (!knnwb_knn_parse_h5ad(run, error) || !knnwb_knn_parse_lists_dtype(run, error))
    return FALSE;
  if ((run->output_format == KNNWB_OUTPUT_NPY || run->output_format == KNNWB_OUTPUT_NPZ ||
       run->output_format == KNNWB_OUTPUT_H5AD) &&
      run->mode != KNNWB_GRAPH_DIRECTED) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--graph %s: %s hold the n x k neighbour lists; write .knn or .mtx for a %s graph",
                command->graph,
                run->output_format == KNNWB_OUTPUT_H5AD
                    ? ".h5ad files (scanpy's distances, and connectivities symmetric already)"
                    : ".npy/.npz",
                command->graph);
    return FALSE;
  }
  return TRUE;
}

/* The command line into run (usage errors). */
static gboolean knnwb_knn_parse(GOptionContext *context, int argc, char **argv, KnnwbKnnRun *run,
                                GError **error)
{
  KnnwbKnnCommand *command = &run->command;
  if (!knnwb_host_options_parse(context, "knn", &argc, &argv, error) ||
      !knnwb_host_one_input(command->rest, error) ||
      !knnwb_host_required(command->knn.k != -1, "-k K", error) ||
      !knnwb_host_required(command->output != NULL, "-o OUT", error) ||
      !knnwb_host_knn_options(&command->knn, TRUE, &run->options, error) ||
      !knnwb_host_input_options(&command->input, &run->read_options, error) ||
      (command->graph && !knnwb_graph_mode_from_string(command->graph, &run->mode, error)))
    return FALSE;
  run->options.data_name = command->rest[0];
  g_autoptr(KnnwbHostFiles) files = knnwb_knn_files(run);
  return knnwb_host_files_check_names(files, error) && knnwb_knn_parse_output(run, error);
}

/* Where this rank stands under mpirun, and the output's temporary (rank 0), made before anything
 * is read. The ranks agree after each local phase, so one rank's failure stops all with its
 * message. */
static gboolean knnwb_knn_prepare(KnnwbKnnRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->group = knnwb_host_group();
  run->writer = group == NULL || group->rank == 0;
  run->options.group = group;
  /* Lists that are written row by row need no rank to hold them all. */
  run->rows_in_place = group != NULL && run->mode == KNNWB_GRAPH_DIRECTED &&
                       knnwb_distributed_writes_in_place(run->output_format);
  /* Nor do the undirected graph's edge lists: each rank writes the edges whose smaller end lies in
   * its range of rows (ranges cut by edge count), sent there by the ranks that hold them. */
  run->edges_in_place =
      group != NULL && run->mode != KNNWB_GRAPH_DIRECTED &&
      (run->output_format == KNNWB_OUTPUT_KNN || run->output_format == KNNWB_OUTPUT_MTX);
  /* Each rank gets its rows' lists; for the other outputs rank 0 gathers them (knnwb_knn_compute).
   */
  run->options.group_own_rows = group != NULL;
  /* A rank's share of its host's GPUs becomes all the driver shows when its start comes before
   * the input's mode asks whether there are any: only a driver not yet started by a count allows
   * it (kernels/device_start.cu). knnwb_host_command_knn waits for the start. */
  if (group != NULL)
    knnwb_knn_devices_start(&run->options);
  /* Split memory (each rank reads and holds its block of rows) unless the input is wanted whole:
   * asked for, or by default on GPUs, whose backend scores a visiting block's pairs as two panels
   * (twice the arithmetic) while the shared tiles of a whole input are scored once. */
  run->options.group_split = group != NULL && (run->mpi_input == KNNWB_MPI_INPUT_SPLIT ||
                                               (run->mpi_input == KNNWB_MPI_INPUT_AUTO &&
                                                !knnwb_host_group_all_gpus(group, &run->options)));
  /* Clustered rows go to the partitioned search on the blocks (core/partition/partition_gather.c);
   * with KNNWB_PARTITION_SPLIT=0 (comparisons) they are put together where every rank has room,
   * unless --mpi-input split keeps each rank to its block. */
  run->options.group_split_gather =
      run->options.group_split && run->mpi_input == KNNWB_MPI_INPUT_AUTO;
  const char *output = run->command.output;
  g_autoptr(KnnwbHostFiles) files = knnwb_knn_files(run);
  gboolean ready =
      knnwb_knn_check_into(&run->command, error) && knnwb_host_files_check(files, error);
  run->options.cancel = knnwb_host_signals_install();
  /* Creating the temporary proves the directory takes files (root passes access() on /proc). */
  if (ready && run->writer) {
    ready = (run->temporary = knnwb_host_outputs_add(run->outputs, output, error)) != NULL;
    /* .mtx row labels and .npy distances go to a side file named after the output. */
    g_autofree char *side_final =
        ready ? knnwb_formats_side_path(output, run->output_format) : NULL;
    g_autofree char *side_temporary =
        side_final ? knnwb_formats_side_path(run->temporary, run->output_format) : NULL;
    if (side_final != NULL)
      knnwb_host_outputs_add_side_file(run->outputs, side_temporary, side_final);
    /* .npy lists: the rows' labels too (OUT.labels.txt), when the input has labels. */
    if (ready && run->output_format == KNNWB_OUTPUT_NPY) {
      g_autofree char *labels_final = knnwb_formats_npy_labels_path(output);
      g_autofree char *labels_temporary = knnwb_formats_npy_labels_path(run->temporary);
      knnwb_host_outputs_add_side_file(run->outputs, labels_temporary, labels_final);
    }
  }
  if (group != NULL && !group->agree(group, ready, error))
    ready = FALSE;
  return ready;
}

/* An NPY's shape, known from its header: the GPUs start, where the run uses them, and choose their
 * tile GEMM for it while the values are read (knnwb_knn_devices_prepare). */
static void knnwb_knn_shape_known(size_t rows, size_t cols, void *data)
{
  const KnnwbKnnRun *run = data;
  knnwb_knn_devices_prepare(&run->options, rows, cols);
}

/* A split rank's block, once the search reads it no more (its rows packed in the ranks' shared
 * window): only its shape (the summary line) and the labels are used after the search, so its
 * values go now instead of at the exit, and the rank holds its rows once while it searches. */
static void knnwb_knn_input_done(void *data)
{
  KnnwbKnnRun *run = data;
  KnnwbMatrix *block = run->split.block;
  g_debug("knnwb: rank %d: the input block's values freed (%zu x %zu)", run->group->rank,
          block->n_rows, block->n_cols);
  knnwb_matrix_release_values(block);
}

/* The rows this process computes on: all, or (split memory) its block, which the helper reads
 * alone or cuts from the whole file; the writers of all rows want every rank's labels. */
static gboolean knnwb_knn_read(KnnwbKnnRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  const char *path = run->command.rest[0];
  run->read_options.rank_rows = run->options.metric == KNNWB_METRIC_SPEARMAN;
  run->read_options.n_threads = run->options.n_threads; /* an NPY's data is read on them */
  void *progress =
      knnwb_host_input_watch(&run->read_options, run->options.cancel, run->command.quiet);
  if (run->options.group_split) {
    gboolean read = knnwb_host_split_read(group, path, &run->read_options, run->options.cancel,
                                          &run->split, error);
    knnwb_host_progress_finish(progress);
    if (!read)
      return FALSE;
    run->info = run->split.info;
    run->rows = run->split.block;
    run->n_rows = run->split.n_rows;
    run->labels = run->split.labels;
    run->options.input_done = knnwb_knn_input_done;
    run->options.input_done_data = run;
    return TRUE;
  }
  run->read_options.shape_known = knnwb_knn_shape_known;
  run->read_options.shape_known_data = run;
  gboolean read =
      knnwb_formats_read_matrix(path, &run->read_options, &run->data, &run->info, error);
  run->read_options.shape_known = NULL;
  knnwb_host_progress_finish(progress);
  if (read && *run->options.cancel) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted");
    read = FALSE;
  }
  if (group != NULL && !group->agree(group, read, error))
    read = FALSE;
  if (!read)
    return FALSE;
  run->rows = run->data;
  run->n_rows = run->data->n_rows;
  run->labels = (const char *const *)run->data->row_labels;
  return TRUE;
}

/* The lists, with their progress line; rank 0 gathers every rank's unless each writes its own. */
static gboolean knnwb_knn_compute(KnnwbKnnRun *run, GError **error)
{
  KnnwbHostProgress *progress = knnwb_host_progress_new("knn", run->command.quiet);
  /* tiles of the distance matrix; split runs count a share of the ranks' schedule */
  knnwb_host_progress_set_unit(progress, run->options.group_split ? NULL : "tiles");
  run->options.progress = progress ? knnwb_host_progress_update : NULL;
  run->options.progress_data = progress;
  gboolean computed = knnwb_knn_self(run->rows, &run->options, &run->neighbors, error);
  knnwb_host_progress_finish(progress);
  run->options.progress = NULL;
  run->options.progress_data = NULL;
  if (!computed) {
    if ((*error)->domain == KNNWB_ERROR && (*error)->code != KNNWB_ERROR_CANCELLED)
      g_prefix_error(error, "%s: ", run->command.rest[0]);
    return FALSE;
  }
  run->knn_done = g_get_monotonic_time();
  run->backend_used = g_strdup(run->neighbors->backend_used);
  /* One process makes one search: its GPUs are given back while the lists are written (main
   * waits for that before the exit). Ranks keep theirs until MPI's finalize. */
  if (run->group == NULL)
    knnwb_knn_devices_release();
  if (run->group != NULL && !run->rows_in_place && !run->edges_in_place) {
    /* Rank 0 builds the graph or writes every row: it alone holds every list. */
    g_autoptr(KnnwbNeighbors) own = g_steal_pointer(&run->neighbors);
    return knnwb_neighbors_gather_root(run->group, own, &run->neighbors, error);
  }
  return TRUE;
}

/* Each rank writes its rows' lists at their place in rank 0's temporary (and its side file). */
static gboolean knnwb_knn_write_rows_in_place(KnnwbKnnRun *run, KnnwbWriteControl *control,
                                              GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  int64_t edges = 0;
  for (size_t i = 0; i < run->neighbors->n_queries; i++)
    edges += run->neighbors->n_found[i];
  gboolean written =
      knnwb_distributed_write_lists(group, run->temporary, run->output_format, run->neighbors,
                                    run->n_rows, run->labels, control, error) &&
      group->reduce(group, &edges, 1, KNNWB_GROUP_SUM, error);
  run->n_edges = (igraph_integer_t)edges;
  return written;
}

/* An empty edge vector (a b a b ...) and its weights; on failure neither is left allocated. */
static igraph_error_t knnwb_knn_edges_init(igraph_vector_int_t *edges, igraph_vector_t *weights)
{
  IGRAPH_CHECK(igraph_vector_int_init(edges, 0));
  IGRAPH_FINALLY(igraph_vector_int_destroy, edges);
  IGRAPH_CHECK(igraph_vector_init(weights, 0));
  IGRAPH_FINALLY_CLEAN(1);
  return IGRAPH_SUCCESS;
}

/* The undirected graph as an edge list, without an igraph_t (igraph would index it: 4 more
 * integers per edge and a sort): under mpirun each rank's edges (smaller end in its range) at
 * their place in rank 0's temporary, else the whole list by this process. */
static gboolean knnwb_knn_write_edge_list(KnnwbKnnRun *run, KnnwbWriteControl *control,
                                          GError **error)
{
  const KnnwbKnnGroup *group = run->edges_in_place ? run->group : NULL;
  igraph_vector_int_t edges;
  igraph_vector_t weights;
  gboolean ready =
      knnwb_error_from_igraph(knnwb_knn_edges_init(&edges, &weights), "edge list", error);
  if (group != NULL && !group->agree(group, ready, error)) {
    if (ready) {
      igraph_vector_int_destroy(&edges);
      igraph_vector_destroy(&weights);
    }
    return FALSE;
  }
  if (!ready)
    return FALSE;
  gboolean written =
      group != NULL
          ? knnwb_graph_edges_from_own_neighbors(group, run->neighbors, run->mode, &edges, &weights,
                                                 error)
          : knnwb_graph_edges_from_neighbors(run->neighbors, run->mode, &edges, &weights, error);
  g_clear_pointer(&run->neighbors, knnwb_neighbors_free);
  if (written) {
    KnnwbEdgeList list = knnwb_knn_edge_list(run->n_rows, &edges, &weights);
    knnwb_host_progress_set_unit(control->progress_data, "edges");
    int64_t total = list.n_edges;
    written = group != NULL
                  ? knnwb_distributed_write_edges(group, run->temporary, run->output_format, &list,
                                                  run->n_rows, run->labels, control, error) &&
                        group->reduce(group, &total, 1, KNNWB_GROUP_SUM, error)
                  : knnwb_formats_write_edges(run->temporary, run->output_format, &list,
                                              run->labels, control, error);
    run->n_edges = (igraph_integer_t)total;
  }
  igraph_vector_int_destroy(&edges);
  igraph_vector_destroy(&weights);
  return written;
}

/* The layout of a GML or GraphML output into coordinates, with its own progress line. */
static gboolean knnwb_knn_layout(KnnwbKnnRun *run, const igraph_t *graph,
                                 const igraph_vector_t *weights, const KnnwbWriteControl *control,
                                 igraph_matrix_t *coordinates, GError **error)
{
  KnnwbDrawingOptions *gml = &run->gml;
  run->layout_used =
      knnwb_drawing_layout_choose(gml->layout, igraph_vcount(graph), gml->fr_max_vertices);
  gml->layout = KNNWB_LAYOUT_NONE;
  if (run->layout_used == KNNWB_LAYOUT_NONE || igraph_vcount(graph) == 0)
    return TRUE;
  gint64 start = g_get_monotonic_time();
  KnnwbHostProgress *progress = knnwb_host_progress_new("layout", run->command.quiet);
  knnwb_host_progress_set_unit(progress, "iterations");
  KnnwbWriteControl layout_control = *control;
  layout_control.progress = progress ? knnwb_host_progress_update : NULL;
  layout_control.progress_data = progress;
  gboolean laid_out =
      knnwb_drawing_layout_run(graph, weights, run->layout_used, gml->fr_max_vertices, gml->seed,
                               gml->node_size, &layout_control, coordinates, NULL, error);
  knnwb_host_progress_finish(progress);
  run->layout_seconds = (double)(g_get_monotonic_time() - start) / 1e6;
  gml->coordinates = coordinates;
  return laid_out;
}

/* Outputs that need an igraph_t: GML and GraphML (laid out) and the undirected neighbour table. */
static gboolean knnwb_knn_write_graph(KnnwbKnnRun *run, KnnwbWriteControl *control, GError **error)
{
  igraph_t graph;
  igraph_vector_t weights;
  igraph_matrix_t coordinates;
  if (!knnwb_error_from_igraph(igraph_vector_init(&weights, 0), "igraph_vector_init", error))
    return FALSE;
  if (!knnwb_graph_from_neighbors(run->neighbors, run->mode, &graph, &weights, error)) {
    igraph_vector_destroy(&weights);
    return FALSE;
  }
  /* The lists are no longer needed: give their memory back before the layout. */
  g_clear_pointer(&run->neighbors, knnwb_neighbors_free);
  gboolean written =
      knnwb_error_from_igraph(igraph_matrix_init(&coordinates, 0, 0), "igraph_matrix_init", error);
  const gboolean have_coordinates = written;
  if (written &&
      (run->output_format == KNNWB_OUTPUT_GML || run->output_format == KNNWB_OUTPUT_GRAPHML))
    written = knnwb_knn_layout(run, &graph, &weights, control, &coordinates, error);
  const KnnwbHostAttributes *attributes = &run->attributes;
  if (written) {
    knnwb_host_progress_set_unit(control->progress_data, "items");
    g_autofree KnnwbNodeAttribute *nodes =
        knnwb_host_attributes_nodes(attributes, NULL, run->n_rows, NULL);
    KnnwbGraphOutput output = {.graph = &graph,
                               .weights = &weights,
                               .labels = run->labels,
                               .gml = &run->gml,
                               .control = control,
                               .attributes = nodes,
                               .n_attributes = attributes->n};
    written = knnwb_formats_write_graph(run->temporary, run->output_format, &output, error);
  }
  run->n_edges = igraph_ecount(&graph);
  if (have_coordinates)
    igraph_matrix_destroy(&coordinates);
  igraph_destroy(&graph);
  igraph_vector_destroy(&weights);
  return written;
}

/* Lists written straight from the neighbour lists, no graph needed: NumPy arrays, and the
 * directed graph's .knn, .mtx and neighbour table. */
static gboolean knnwb_knn_writes_lists(const KnnwbKnnRun *run)
{
  return run->output_format == KNNWB_OUTPUT_NPY || run->output_format == KNNWB_OUTPUT_NPZ ||
         run->output_format == KNNWB_OUTPUT_H5AD ||
         (run->mode == KNNWB_GRAPH_DIRECTED &&
          (run->output_format == KNNWB_OUTPUT_KNN || run->output_format == KNNWB_OUTPUT_MTX ||
           run->output_format == KNNWB_OUTPUT_NEIGHBORS_TSV));
}

/* The output into rank 0's temporary by the writer that fits it: lists as they are, an undirected
 * edge list, or a graph; under mpirun each rank writes its part in place where the format allows
 * (the ranks then agreed already), or rank 0 writes alone and tells the others how that went.
 * Every writer polls the cancel flag and shows a "write" progress line. */
static gboolean knnwb_knn_write(KnnwbKnnRun *run, GError **error)
{
  KnnwbHostProgress *progress = knnwb_host_progress_new("write", run->command.quiet);
  knnwb_host_progress_set_unit(progress, "rows");
  if (run->output_format == KNNWB_OUTPUT_NPY || run->output_format == KNNWB_OUTPUT_NPZ)
    knnwb_host_progress_set_unit(progress, "bytes");
  KnnwbWriteControl control = {.n_threads = run->options.n_threads,
                               .lists_dtype = run->lists_dtype,
                               .cancel = run->options.cancel,
                               .progress = progress ? knnwb_host_progress_update : NULL,
                               .progress_data = progress};
  gboolean written = TRUE; /* a rank other than 0 with nothing to write in place */
  if (run->rows_in_place)
    written = knnwb_knn_write_rows_in_place(run, &control, error);
  else if (run->edges_in_place)
    written = knnwb_knn_write_edge_list(run, &control, error);
  else if (run->writer && knnwb_knn_writes_lists(run)) {
    for (size_t i = 0; i < run->neighbors->n_queries; i++)
      run->n_edges += run->neighbors->n_found[i];
    run->h5ad.metric = knnwb_metric_to_string(run->options.metric);
    run->h5ad.cancel = run->options.cancel;
    run->h5ad.use_rep = run->read_options.use_rep;
    written = run->output_format == KNNWB_OUTPUT_H5AD
                  ? knnwb_formats_write_h5ad(run->temporary, run->neighbors, run->labels,
                                             &run->h5ad, error)
                  : knnwb_formats_write_lists(run->temporary, run->output_format, run->neighbors,
                                              run->labels, &control, error);
  } else if (run->writer &&
             (run->output_format == KNNWB_OUTPUT_KNN || run->output_format == KNNWB_OUTPUT_MTX))
    written = knnwb_knn_write_edge_list(run, &control, error);
  else if (run->writer)
    written = knnwb_knn_write_graph(run, &control, error);
  knnwb_host_progress_finish(progress);
  const KnnwbKnnGroup *group = run->group;
  if (group != NULL && !run->rows_in_place && !run->edges_in_place &&
      !group->agree(group, written, error))
    written = FALSE;
  return written;
}

static void knnwb_knn_print_summary(const KnnwbKnnRun *run)
{
  gint64 now = g_get_monotonic_time();
  double total = (double)(now - run->start) / 1e6;
  g_autofree char *layout_text =
      run->layout_seconds >= 0.0 ? g_strdup_printf(", layout %.2f s (%s)", run->layout_seconds,
                                                   knnwb_drawing_layout_to_string(run->layout_used))
                                 : g_strdup("");
  double write_seconds = (double)(now - run->knn_done) / 1e6 - MAX(run->layout_seconds, 0.0);
  g_printerr("knnwb: %zu x %zu %s, k=%zu %s on %s: %" IGRAPH_PRId
             " edges -> %s (read %.2f s, knn %.2f s%s, write %.2f s, total %.2f s)\n",
             run->n_rows, run->rows->n_cols, knnwb_formats_input_to_string(run->info.format),
             run->options.k, knnwb_metric_to_string(run->options.metric),
             run->backend_used ? run->backend_used : "?", run->n_edges, run->command.output,
             (double)(run->read_done - run->start) / 1e6,
             (double)(run->knn_done - run->read_done) / 1e6, layout_text, write_seconds, total);
}

/* Whether the input is read whole by one process from an NPY file, whose header gives its shape
 * before its values (knnwb_knn_shape_known starts the GPUs then, where the run uses them). */
static gboolean knnwb_knn_header_first(const KnnwbKnnRun *run)
{
  KnnwbInputFormat format = run->read_options.format;
  if (run->group != NULL || (format == KNNWB_INPUT_AUTO &&
                             !knnwb_formats_detect_input(run->command.rest[0], &format, NULL)))
    return FALSE;
  return format == KNNWB_INPUT_NPY;
}

/* Reads, computes, writes and commits; under mpirun every rank runs it (knnwb_knn_prepare). */
static gboolean knnwb_knn_execute(KnnwbKnnRun *run, GError **error)
{
  run->start = g_get_monotonic_time();
  /* The GPUs start while the input is read; an NPY's header says first whether the run will use
   * them (knnwb_knn_shape_known: rows of a few columns go to a tree on the CPU, and starting the
   * GPUs cost such a run more than its search). */
  if (!knnwb_knn_header_first(run))
    knnwb_knn_devices_start(&run->options);
  if (!knnwb_knn_read(run, error))
    return FALSE;
  run->read_done = g_get_monotonic_time();
  knnwb_host_log_set_quiet(run->command.quiet);
  if (run->lists_dtype == KNNWB_LISTS_DTYPE_32 && run->n_rows > (size_t)INT32_MAX + 1) {
    /* before the search: its row numbers would not fit the output */
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: %zu rows: --lists-dtype 32 numbers rows up to 2^31 - 1", run->command.rest[0],
                run->n_rows);
    return FALSE;
  }
  if (run->command.annotation != NULL) {
    /* The node attributes before the search: a table that does not fit fails now. */
    gboolean read = !run->writer || knnwb_host_attributes_read(
                                        run->command.annotation, run->command.annotation_id,
                                        "--annotation-id", run->data, run->labels, run->n_rows,
                                        run->command.rest[0], &run->attributes, error);
    if (run->group != NULL && !run->group->agree(run->group, read, error))
      read = FALSE;
    if (!read)
      return FALSE;
  }
  /* The commit is the last thing, and refuses when a signal arrived during the graph, the layout
   * or the write: the previous output, if any, is never touched by an interrupted run. */
  if (!knnwb_knn_compute(run, error) || !knnwb_knn_write(run, error) ||
      !knnwb_host_commit_agreed(run->group, run->writer, run->outputs, run->options.cancel, error))
    return FALSE;
  if (!run->command.quiet)
    knnwb_knn_print_summary(run);
  return TRUE;
}

int knnwb_host_command_knn(int argc, char **argv)
{
  KnnwbKnnRun run = {.command = {.knn = {.k = -1}},
                     .mode = KNNWB_GRAPH_DIRECTED,
                     .output_format = KNNWB_OUTPUT_AUTO,
                     .mpi_input = KNNWB_MPI_INPUT_AUTO,
                     .layout_seconds = -1.0,
                     .layout_used = KNNWB_LAYOUT_NONE,
                     .outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free)};
  knnwb_knn_options_init(&run.options);
  knnwb_formats_read_options_init(&run.read_options);
  g_autoptr(GOptionContext) context = knnwb_knn_options_new(&run.command);
  g_autoptr(GError) error = NULL;
  const gboolean parsed = knnwb_knn_parse(context, argc, argv, &run, &error);
  const gboolean done =
      parsed && knnwb_knn_prepare(&run, &error) && knnwb_knn_execute(&run, &error);
  knnwb_knn_devices_wait(); /* a run that failed before its search */
  const int status = knnwb_host_command_finish("knn", parsed, done, run.outputs, error);
  knnwb_knn_run_clear(&run);
  return status;
}
