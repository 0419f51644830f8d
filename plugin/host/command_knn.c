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
  char *screen;
  int threads;
  char *memory;
  char *devices;
  char *gpu_memory;
  char *graph;
  char *format;
  char *output_format;
  char *output;
  gboolean transpose;
  char *header;       /* auto, yes, no */
  char *label_column; /* 1-based column number, a header name, or none */
  gboolean drop_degenerate;
  gboolean drop_missing;
  gboolean quiet;
  char **rest;
} KnnwbKnnCommand;

static void knnwb_knn_command_clear(KnnwbKnnCommand *command)
{
  g_free(command->metric);
  g_free(command->backend);
  g_free(command->screen);
  g_free(command->memory);
  g_free(command->devices);
  g_free(command->gpu_memory);
  g_free(command->graph);
  g_free(command->format);
  g_free(command->output_format);
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
      {"screen", 0, 0, G_OPTION_ARG_STRING, &command.screen,
       "GPU screening precision: auto (default: fp16 for k <= 256), fp32, tf32 or fp16; the lists "
       "are exact with each",
       "P"},
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
       "auto (default: by extension), knn, gml, graphml, neighbors", "F"},
      {"header", 0, 0, G_OPTION_ARG_STRING, &command.header,
       "CSV/TSV: is the first line a header? auto (default: when a value field is not a number), "
       "yes or no",
       "auto|yes|no"},
      {"label-column", 0, 0, G_OPTION_ARG_STRING, &command.label_column,
       "CSV/TSV: the row labels' column, counted from 1 (default 1), a header name, or none",
       "N|NAME|none"},
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
               "`source target weight`,\n0-based), .gml (for yEd), .graphml, or .tsv (neighbour "
               "table). Byte sizes take K, M, G, T suffixes.");
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
  options.data_name = command.rest[0];
  if ((command.metric && !knnwb_metric_from_string(command.metric, &options.metric, &error)) ||
      (command.backend && !knnwb_backend_from_string(command.backend, &options.backend, &error)) ||
      (command.screen && !knnwb_screen_from_string(command.screen, &options.screen, &error)) ||
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
  if (command.label_column != NULL &&
      !knnwb_formats_label_column_from_string(command.label_column, &read_options, &error))
    goto usage;
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
  if (!computed) {
    if (error->domain == KNNWB_ERROR && error->code != KNNWB_ERROR_CANCELLED)
      g_prefix_error(&error, "%s: ", command.rest[0]);
    goto failed;
  }
  gint64 knn_done = g_get_monotonic_time();

  igraph_integer_t n_edges = 0;
  if (output_format == KNNWB_OUTPUT_NEIGHBORS_TSV && mode == KNNWB_GRAPH_DIRECTED) {
    /* The table comes straight from the lists: no graph needed. */
    const char *const *labels = (const char *const *)data->row_labels;
    if (!knnwb_formats_write_neighbor_lists_tsv(command.output, neighbors, labels, labels, &error))
      goto failed;
    for (size_t i = 0; i < neighbors->n_queries; i++)
      n_edges += neighbors->n_found[i];
  } else {
    igraph_t graph;
    igraph_vector_t weights;
    if (!knnwb_error_from_igraph(igraph_vector_init(&weights, 0), "igraph_vector_init", &error))
      goto failed;
    if (!knnwb_graph_from_neighbors(neighbors, mode, &graph, &weights, &error)) {
      igraph_vector_destroy(&weights);
      goto failed;
    }
    /* The lists are no longer needed: give their memory back before the writer's layout. */
    backend_used = g_strdup(neighbors->backend_used);
    g_clear_pointer(&neighbors, knnwb_neighbors_free);
    KnnwbGraphOutput output = {
        .graph = &graph, .weights = &weights, .labels = (const char *const *)data->row_labels};
    gboolean written = knnwb_formats_write_graph(command.output, output_format, &output, &error);
    n_edges = igraph_ecount(&graph);
    igraph_destroy(&graph);
    igraph_vector_destroy(&weights);
    if (!written)
      goto failed;
  }
  /* A signal during the layout or the write (which do not poll the flag): the output was
   * committed, so take it back before reporting the interruption. */
  if (*options.cancel) {
    g_unlink(command.output);
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted while writing");
    goto failed;
  }
  if (!command.quiet) {
    double total = (double)(g_get_monotonic_time() - start) / 1e6;
    g_printerr("knnwb: %zu x %zu %s, k=%zu %s on %s: %" IGRAPH_PRId
               " edges -> %s (read %.2f s, knn %.2f s, total %.2f s)\n",
               data->n_rows, data->n_cols, knnwb_formats_input_to_string(info.format), options.k,
               knnwb_metric_to_string(options.metric),
               backend_used ? backend_used : (neighbors ? neighbors->backend_used : "?"), n_edges,
               command.output,
               (double)(read_done - start) / 1e6, (double)(knn_done - read_done) / 1e6, total);
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
  knnwb_knn_command_clear(&command);
  return status;
}
