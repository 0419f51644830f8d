/* `knnwb knn INPUT -k K --metric M -o OUT`: the kNN graph of a matrix file, written atomically. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>
#include <unistd.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/graph.h>
#include <knnwb/knn.h>
#include "host.h"

typedef struct {
  gint64 k;
  char *metric;
  char *backend;
  int threads;
  char *memory;
  char *devices;
  char *gpu_memory;
  char *graph;
  char *format;
  char *output_format;
  char *layout;
  char *output;
  gboolean transpose;
  char *header;       /* auto, yes, no */
  char *label_column; /* 1-based column number, or none */
  gboolean drop_degenerate;
  gboolean drop_missing;
  gboolean quiet;
  char **rest;
} KnnwbKnnCommand;

static void knnwb_knn_command_clear(KnnwbKnnCommand *command)
{
  g_free(command->metric);
  g_free(command->backend);
  g_free(command->memory);
  g_free(command->devices);
  g_free(command->gpu_memory);
  g_free(command->graph);
  g_free(command->format);
  g_free(command->output_format);
  g_free(command->layout);
  g_free(command->output);
  g_free(command->header);
  g_free(command->label_column);
  g_strfreev(command->rest);
}

/* "0,1,3" into GPU ordinals. */
static gboolean knnwb_knn_parse_devices(const char *text, GArray *devices, GError **error)
{
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  for (char **p = parts; *p; p++) {
    char *end = NULL;
    gint64 device = g_ascii_strtoll(g_strstrip(*p), &end, 10);
    if (**p == '\0' || *end != '\0' || device < 0 || device > 1024) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "--devices: '%s' is not a GPU number (expected e.g. 0,1)", *p);
      return FALSE;
    }
    int value = (int)device;
    g_array_append_val(devices, value);
  }
  return TRUE;
}

/* A long run must not end with "cannot write": check the output's directory before computing. */
static gboolean knnwb_knn_check_output(const char *path, GError **error)
{
  g_autofree char *dir = g_path_get_dirname(path);
  if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: directory '%s' does not exist", path, dir);
    return FALSE;
  }
  if (access(dir, W_OK | X_OK) != 0) {
    int code = errno;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: directory '%s' cannot be written: %s",
                path, dir, g_strerror(code));
    return FALSE;
  }
  if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: is a directory", path);
    return FALSE;
  }
  return TRUE;
}

static int knnwb_knn_exit_status(const GError *error)
{
  if (error->domain == KNNWB_ERROR && error->code == KNNWB_ERROR_CANCELLED &&
      knnwb_host_signals_received() != 0)
    return knnwb_host_signals_exit_status();
  return 1;
}

int knnwb_host_command_knn(int argc, char **argv)
{
  KnnwbKnnCommand command = {.k = -1};
  GOptionEntry entries[] = {
      {"k", 'k', 0, G_OPTION_ARG_INT64, &command.k, "Neighbours per row (1 <= K < rows)", "K"},
      {"metric", 'm', 0, G_OPTION_ARG_STRING, &command.metric,
       "pearson (default), abs-pearson, spearman, euclidean, manhattan or cosine", "M"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &command.output,
       "Output file (written atomically; format from its extension)", "OUT"},
      {"backend", 'b', 0, G_OPTION_ARG_STRING, &command.backend, "auto (default), cpu or cuda",
       "B"},
      {"threads", 't', 0, G_OPTION_ARG_INT, &command.threads, "CPU threads (default: all cores)",
       "N"},
      {"memory", 0, 0, G_OPTION_ARG_STRING, &command.memory,
       "CPU working-memory budget for tiles, e.g. 512M, 4G (default 256M)", "BYTES"},
      {"devices", 0, 0, G_OPTION_ARG_STRING, &command.devices,
       "GPUs to use, e.g. 0,1 (default: all)", "LIST"},
      {"gpu-memory", 0, 0, G_OPTION_ARG_STRING, &command.gpu_memory,
       "Per-GPU memory budget (default: 90% of free)", "BYTES"},
      {"graph", 'g', 0, G_OPTION_ARG_STRING, &command.graph,
       "directed (default: k edges per row), union or mutual", "MODE"},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &command.format,
       "Input format: auto (default), cibm, csv, tsv, gct, npy", "F"},
      {"output-format", 'F', 0, G_OPTION_ARG_STRING, &command.output_format,
       "auto (default: by extension), knn, gml, graphml, neighbors, npy, npz, mtx", "F"},
      {"layout", 'l', 0, G_OPTION_ARG_STRING, &command.layout,
       "GML/GraphML coordinates: auto (default: fr up to 20,000 vertices, none above), fr, drl, "
       "umap or none",
       "L"},
      {"header", 0, 0, G_OPTION_ARG_STRING, &command.header,
       "CSV/TSV: is the first line a header? auto (default: when a value field is not a number), "
       "yes or no",
       "auto|yes|no"},
      {"label-column", 0, 0, G_OPTION_ARG_STRING, &command.label_column,
       "CSV/TSV: 1-based column of the row labels (default 1), or none", "N|none"},
      {"transpose", 'T', 0, G_OPTION_ARG_NONE, &command.transpose,
       "The file's columns are the points", NULL},
      {"drop-degenerate", 0, 0, G_OPTION_ARG_NONE, &command.drop_degenerate,
       "Constant (pearson/spearman) or zero (cosine) rows get no edges, with a warning, instead "
       "of an error",
       NULL},
      {"drop-missing", 0, 0, G_OPTION_ARG_NONE, &command.drop_missing,
       "Drop rows with missing values (NA, empty, NaN) instead of failing", NULL},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &command.quiet, "No progress or summary", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &command.rest, NULL, "INPUT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("-k K -o OUT");
  g_option_context_set_summary(
      context, "Builds the exact k-nearest-neighbour graph of the rows of INPUT (CIBM, CSV, TSV, "
               "GCT or NPY)\nand writes it to OUT: .knn (the GPU-FS-kNN format: `n m`, then "
               "`source target weight`,\n0-based), .gml (for yEd), .graphml, .tsv (neighbour "
               "table), .npy/.npz (n x k index and\ndistance arrays for NumPy) or .mtx (Matrix "
               "Market distance matrix). Byte sizes take K, M, G, T\nsuffixes.");
  g_option_context_set_description(
      context, "Exit status: 0 on success, 1 when the input or the run fails (the message starts "
               "with file:line:\nwhere it can), 2 on a usage error, 130/143 when interrupted. No "
               "output file is left behind\nby a failed or interrupted run.");
  g_option_context_add_main_entries(context, entries, NULL);

  int status = 1;
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) devices = g_array_new(FALSE, FALSE, sizeof(int));
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  KnnwbGraphMode mode = KNNWB_GRAPH_DIRECTED;
  KnnwbOutputFormat output_format = KNNWB_OUTPUT_AUTO;
  KnnwbReadOptions read_options;
  knnwb_formats_read_options_init(&read_options);
  g_autoptr(KnnwbMatrix) data = NULL;
  g_autoptr(KnnwbNeighbors) neighbors = NULL;
  g_autofree char *backend_used = NULL;
  KnnwbHostProgress *progress = NULL;

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
  if (command.k == -1) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "-k K is required");
    goto usage;
  }
  if (command.k < 1) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "-k %" G_GINT64_FORMAT ": k must be at least 1", command.k);
    goto usage;
  }
  if (command.output == NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "-o OUT is required");
    goto usage;
  }
  if (command.threads < 0) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--threads must be 0 (all cores) or more");
    goto usage;
  }
  options.k = (size_t)command.k;
  options.n_threads = command.threads;
  options.drop_degenerate = command.drop_degenerate;
  if ((command.metric && !knnwb_metric_from_string(command.metric, &options.metric, &error)) ||
      (command.backend && !knnwb_backend_from_string(command.backend, &options.backend, &error)) ||
      (command.graph && !knnwb_graph_mode_from_string(command.graph, &mode, &error)) ||
      (command.format &&
       !knnwb_formats_input_from_string(command.format, &read_options.format, &error)))
    goto usage;
  if (command.output_format != NULL) {
    if (!knnwb_formats_output_from_string(command.output_format, &output_format, &error))
      goto usage;
  }
  if (output_format == KNNWB_OUTPUT_AUTO &&
      !knnwb_formats_output_from_path(command.output, &output_format, &error))
    goto usage;
  if (output_format == KNNWB_OUTPUT_LABELS_TSV) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: a labels table needs a clustering; use a pipeline (knnwb run) for that",
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
  if ((output_format == KNNWB_OUTPUT_NPY || output_format == KNNWB_OUTPUT_NPZ) &&
      mode != KNNWB_GRAPH_DIRECTED) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--graph %s: .npy/.npz hold the n x k neighbour lists; write .knn or .mtx for a "
                "%s graph",
                command.graph, command.graph);
    goto usage;
  }
  guint64 bytes;
  if (command.memory) {
    if (!knnwb_host_parse_bytes(command.memory, &bytes, &error) || bytes > SIZE_MAX)
      goto usage;
    options.memory_bytes = (size_t)bytes;
  }
  if (command.gpu_memory) {
    if (!knnwb_host_parse_bytes(command.gpu_memory, &bytes, &error) || bytes > SIZE_MAX)
      goto usage;
    options.gpu_memory_bytes = (size_t)bytes;
  }
  if (command.devices) {
    if (!knnwb_knn_parse_devices(command.devices, devices, &error))
      goto usage;
    options.devices = (const int *)(void *)devices->data;
    options.n_devices = (int)devices->len;
  }
  read_options.transpose = command.transpose;
  if (command.header != NULL) {
    if (g_ascii_strcasecmp(command.header, "yes") == 0)
      read_options.header = KNNWB_HEADER_YES;
    else if (g_ascii_strcasecmp(command.header, "no") == 0)
      read_options.header = KNNWB_HEADER_NO;
    else if (g_ascii_strcasecmp(command.header, "auto") != 0) {
      g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "--header must be auto, yes or no (got '%s')", command.header);
      goto usage;
    }
  }
  if (command.label_column != NULL) {
    guint64 column = 0;
    if (g_ascii_strcasecmp(command.label_column, "none") == 0)
      read_options.label_column = -1;
    else if (g_ascii_string_to_unsigned(command.label_column, 10, 1, G_MAXINT, &column, NULL))
      read_options.label_column = (int)column - 1;
    else {
      g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "--label-column must be a column number (1, 2, ...) or none (got '%s')",
                  command.label_column);
      goto usage;
    }
  }
  if (command.drop_missing)
    read_options.missing = KNNWB_MISSING_DROP_ROWS;

  if (!knnwb_knn_check_output(command.output, &error))
    goto failed;
  options.cancel = knnwb_host_signals_install();

  gint64 start = g_get_monotonic_time();
  KnnwbReadInfo info = {0};
  if (!knnwb_formats_read_matrix(command.rest[0], &read_options, &data, &info, &error))
    goto failed;
  if (*options.cancel) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted");
    goto failed;
  }
  gint64 read_done = g_get_monotonic_time();

  knnwb_host_log_set_quiet(command.quiet);
  progress = knnwb_host_progress_new("knn", command.quiet);
  options.progress = progress ? knnwb_host_progress_update : NULL;
  options.progress_data = progress;
  gboolean computed = knnwb_knn_self(data, &options, &neighbors, &error);
  knnwb_host_progress_finish(progress);
  progress = NULL;
  if (!computed) {
    if (error->domain == KNNWB_ERROR && error->code != KNNWB_ERROR_CANCELLED)
      g_prefix_error(&error, "%s: ", command.rest[0]);
    goto failed;
  }
  gint64 knn_done = g_get_monotonic_time();

  igraph_integer_t n_edges = 0;
  double layout_seconds = -1.0;
  KnnwbLayout layout_used = KNNWB_LAYOUT_NONE;
  backend_used = g_strdup(neighbors->backend_used);
  const char *const *labels = (const char *const *)data->row_labels;
  KnnwbWriteControl control = {.n_threads = command.threads, .cancel = options.cancel};
  progress = knnwb_host_progress_new("write", command.quiet);
  knnwb_host_progress_set_unit(progress, "rows");
  control.progress = progress ? knnwb_host_progress_update : NULL;
  control.progress_data = progress;
  gboolean written = FALSE;
  if (output_format == KNNWB_OUTPUT_NPY || output_format == KNNWB_OUTPUT_NPZ ||
      (mode == KNNWB_GRAPH_DIRECTED &&
       (output_format == KNNWB_OUTPUT_KNN || output_format == KNNWB_OUTPUT_MTX ||
        output_format == KNNWB_OUTPUT_NEIGHBORS_TSV))) {
    /* Straight from the lists: no graph needed. */
    if (output_format == KNNWB_OUTPUT_NPY || output_format == KNNWB_OUTPUT_NPZ)
      knnwb_host_progress_set_unit(progress, "bytes");
    for (size_t i = 0; i < neighbors->n_queries; i++)
      n_edges += neighbors->n_found[i];
    written = knnwb_formats_write_lists(command.output, output_format, neighbors, labels, &control,
                                        &error);
  } else if (output_format == KNNWB_OUTPUT_KNN || output_format == KNNWB_OUTPUT_MTX) {
    /* An undirected edge list, still without an igraph_t (igraph would index it: 4 more integers
     * per edge and a sort). */
    igraph_vector_int_t edges;
    igraph_vector_t weights;
    if (!knnwb_error_from_igraph(igraph_vector_int_init(&edges, 0), "igraph_vector_int_init",
                                 &error))
      goto failed;
    if (igraph_vector_init(&weights, 0) != IGRAPH_SUCCESS) {
      igraph_vector_int_destroy(&edges);
      g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "out of memory");
      goto failed;
    }
    written = knnwb_graph_edges_from_neighbors(neighbors, mode, &edges, &weights, &error);
    g_clear_pointer(&neighbors, knnwb_neighbors_free);
    if (written) {
      KnnwbEdgeList list = {.n_vertices = (igraph_integer_t)data->n_rows,
                            .n_edges = igraph_vector_size(&weights),
                            .directed = FALSE,
                            .from = VECTOR(edges),
                            .to = VECTOR(edges) + 1,
                            .stride = 2,
                            .weights = VECTOR(weights)};
      knnwb_host_progress_set_unit(progress, "edges");
      n_edges = list.n_edges;
      written =
          knnwb_formats_write_edges(command.output, output_format, &list, labels, &control, &error);
    }
    igraph_vector_int_destroy(&edges);
    igraph_vector_destroy(&weights);
  } else {
    igraph_t graph;
    igraph_vector_t weights;
    igraph_matrix_t coordinates;
    if (!knnwb_error_from_igraph(igraph_vector_init(&weights, 0), "igraph_vector_init", &error))
      goto failed;
    if (!knnwb_graph_from_neighbors(neighbors, mode, &graph, &weights, &error)) {
      igraph_vector_destroy(&weights);
      goto failed;
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
      written = knnwb_formats_write_graph(command.output, output_format, &output, &error);
    }
    n_edges = igraph_ecount(&graph);
    igraph_matrix_destroy(&coordinates);
    igraph_destroy(&graph);
    igraph_vector_destroy(&weights);
  }
  knnwb_host_progress_finish(g_steal_pointer(&progress));
  if (!written)
    goto failed;
  /* A signal after the last check of the writer: the output was committed, so take it back
   * before reporting the interruption. */
  if (*options.cancel) {
    g_unlink(command.output);
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted while writing");
    goto failed;
  }
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
               data->n_rows, data->n_cols, knnwb_formats_input_to_string(info.format), options.k,
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
  status = knnwb_knn_exit_status(error);
  if (status != 1)
    g_printerr("knnwb: interrupted; no output written\n");
  else
    knnwb_host_print_error(error);
done:
  knnwb_host_progress_finish(progress);
  knnwb_knn_command_clear(&command);
  return status;
}
