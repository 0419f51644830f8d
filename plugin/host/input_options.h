/* Command-line options shared by `knnwb knn` and `knnwb cluster`: how to read the matrix file and
 * how to compute the kNN lists. One parser, so both commands accept and check them the same way. */
#ifndef KNNWB_HOST_INPUT_OPTIONS_H
#define KNNWB_HOST_INPUT_OPTIONS_H

#include <glib.h>
#include <knnwb/formats.h>
#include <knnwb/knn.h>

G_BEGIN_DECLS

/** The raw option texts (filled by GOption). Zero-initialise; k = -1 means "not given". */
typedef struct {
  /* reading */
  char *format;
  gboolean transpose;
  char *header;       /* auto, yes, no */
  char *label_column; /* 1-based column number, a header name, or none */
  gboolean drop_missing;
  /* computing */
  gint64 k;
  char *metric;
  char *backend;
  int threads;
  char *memory;
  char *devices;
  char *gpu_memory;
  gboolean drop_degenerate;
  /* the parsed device list (options->devices points into it) */
  GArray *device_list;
} KnnwbHostInputOptions;

/** Adds --format, --transpose, --header, --label-column, --drop-missing, -k, --metric, --backend,
 * --threads, --memory, --devices, --gpu-memory, --drop-degenerate to context's main group. */
void knnwb_host_input_options_add(GOptionContext *context, KnnwbHostInputOptions *options);

/**
 * Checks the texts and fills read (initialised by the caller) and knn (initialised; k is set only
 * when -k was given). Errors: KNNWB_ERROR_INVALID_ARGUMENT naming the option.
 */
gboolean knnwb_host_input_options_apply(KnnwbHostInputOptions *options, KnnwbReadOptions *read,
                                        KnnwbKnnOptions *knn, GError **error);

void knnwb_host_input_options_clear(KnnwbHostInputOptions *options);

/** A long run must not end with "cannot write": checks the output's directory before computing.
 * Errors: KNNWB_ERROR_IO (no such directory, not writable, path is a directory). */
gboolean knnwb_host_check_output(const char *path, GError **error);

/** 128 + signal for a run stopped by SIGINT/SIGTERM, else 1. */
int knnwb_host_exit_status(const GError *error);

G_END_DECLS

#endif
