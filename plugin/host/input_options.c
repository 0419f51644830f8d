/* The input and kNN options shared by `knnwb knn` and `knnwb cluster`. */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <knnwb/error.h>
#include "host.h"
#include "input_options.h"

void knnwb_host_input_options_add(GOptionContext *context, KnnwbHostInputOptions *options)
{
  /* g_option_context_add_main_entries copies the array; only the targets must live on. */
  GOptionEntry entries[] = {
      {"k", 'k', 0, G_OPTION_ARG_INT64, &options->k, "Neighbours per row (1 <= K < rows)", "K"},
      {"metric", 'm', 0, G_OPTION_ARG_STRING, &options->metric,
       "pearson (default), abs-pearson, spearman, euclidean, manhattan or cosine", "M"},
      {"backend", 'b', 0, G_OPTION_ARG_STRING, &options->backend, "auto (default), cpu or cuda",
       "B"},
      {"threads", 't', 0, G_OPTION_ARG_INT, &options->threads, "CPU threads (default: all cores)",
       "N"},
      {"memory", 0, 0, G_OPTION_ARG_STRING, &options->memory,
       "CPU working-memory budget for tiles, e.g. 512M, 4G (default 256M)", "BYTES"},
      {"devices", 0, 0, G_OPTION_ARG_STRING, &options->devices,
       "GPUs to use, e.g. 0,1 (default: all)", "LIST"},
      {"gpu-memory", 0, 0, G_OPTION_ARG_STRING, &options->gpu_memory,
       "Per-GPU memory budget (default: 90% of free)", "BYTES"},
      {"format", 'f', 0, G_OPTION_ARG_STRING, &options->format,
       "Input format: auto (default), cibm, csv, tsv, gct, npy", "F"},
      {"header", 0, 0, G_OPTION_ARG_STRING, &options->header,
       "CSV/TSV: is the first line a header? auto (default: when a value field is not a number), "
       "yes or no",
       "auto|yes|no"},
      {"label-column", 0, 0, G_OPTION_ARG_STRING, &options->label_column,
       "CSV/TSV: the row labels' column, counted from 1 (default 1), a header name, or none",
       "N|NAME|none"},
      {"transpose", 'T', 0, G_OPTION_ARG_NONE, &options->transpose,
       "The file's columns are the points", NULL},
      {"drop-degenerate", 0, 0, G_OPTION_ARG_NONE, &options->drop_degenerate,
       "Constant (pearson/spearman) or zero (cosine) rows get no edges, with a warning, instead "
       "of an error",
       NULL},
      {"drop-missing", 0, 0, G_OPTION_ARG_NONE, &options->drop_missing,
       "Drop rows with missing values (NA, empty, NaN) instead of failing", NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_option_context_add_main_entries(context, entries, NULL);
}

/* "0,1,3" into GPU ordinals. */
static gboolean knnwb_host_parse_devices(const char *text, GArray *devices, GError **error)
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

gboolean knnwb_host_input_options_apply(KnnwbHostInputOptions *options, KnnwbReadOptions *read,
                                        KnnwbKnnOptions *knn, GError **error)
{
  if (options->k != -1 && options->k < 1) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "-k %" G_GINT64_FORMAT ": k must be at least 1", options->k);
    return FALSE;
  }
  if (options->threads < 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--threads must be 0 (all cores) or more");
    return FALSE;
  }
  if (options->k != -1)
    knn->k = (size_t)options->k;
  knn->n_threads = options->threads;
  knn->drop_degenerate = options->drop_degenerate;
  if ((options->metric && !knnwb_metric_from_string(options->metric, &knn->metric, error)) ||
      (options->backend && !knnwb_backend_from_string(options->backend, &knn->backend, error)) ||
      (options->format && !knnwb_formats_input_from_string(options->format, &read->format, error)))
    return FALSE;
  guint64 bytes;
  if (options->memory) {
    if (!knnwb_host_parse_bytes(options->memory, &bytes, error) || bytes > SIZE_MAX)
      return FALSE;
    knn->memory_bytes = (size_t)bytes;
  }
  if (options->gpu_memory) {
    if (!knnwb_host_parse_bytes(options->gpu_memory, &bytes, error) || bytes > SIZE_MAX)
      return FALSE;
    knn->gpu_memory_bytes = (size_t)bytes;
  }
  if (options->devices) {
    if (!options->device_list)
      options->device_list = g_array_new(FALSE, FALSE, sizeof(int));
    if (!knnwb_host_parse_devices(options->devices, options->device_list, error))
      return FALSE;
    knn->devices = (const int *)(void *)options->device_list->data;
    knn->n_devices = (int)options->device_list->len;
  }
  read->transpose = options->transpose;
  if (options->header != NULL) {
    if (g_ascii_strcasecmp(options->header, "yes") == 0)
      read->header = KNNWB_HEADER_YES;
    else if (g_ascii_strcasecmp(options->header, "no") == 0)
      read->header = KNNWB_HEADER_NO;
    else if (g_ascii_strcasecmp(options->header, "auto") != 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "--header must be auto, yes or no (got '%s')", options->header);
      return FALSE;
    }
  }
  if (options->label_column != NULL &&
      !knnwb_formats_label_column_from_string(options->label_column, read, error))
    return FALSE;
  if (options->drop_missing)
    read->missing = KNNWB_MISSING_DROP_ROWS;
  return TRUE;
}

void knnwb_host_input_options_clear(KnnwbHostInputOptions *options)
{
  g_free(options->format);
  g_free(options->header);
  g_free(options->label_column);
  g_free(options->metric);
  g_free(options->backend);
  g_free(options->memory);
  g_free(options->devices);
  g_free(options->gpu_memory);
  if (options->device_list)
    g_array_unref(options->device_list);
}

gboolean knnwb_host_check_output(const char *path, GError **error)
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

int knnwb_host_exit_status(const GError *error)
{
  if (error->domain == KNNWB_ERROR && error->code == KNNWB_ERROR_CANCELLED &&
      knnwb_host_signals_received() != 0)
    return knnwb_host_signals_exit_status();
  return 1;
}
