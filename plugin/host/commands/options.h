/* Options and helpers shared by the commands: one parser per option, one table per enum's
 * choices, and the scaffolding every command shares (one INPUT, required options, the agreed
 * commit, the exit status).
 *
 * A command whose options are steps builds them in code and hands them to the pipeline runner
 * (knnwb_pipeline_new, knnwb_host_input_add_step, knnwb_host_knn_add_params; knnwb classify).
 * The others call the library as the steps do: no step writes yet what they write (a matrix
 * file; knn's lists and edge lists written without an igraph_t, in place by every rank under
 * mpirun; cluster's summary and hierarchy files). */
#ifndef KNNWB_HOST_OPTIONS_H
#define KNNWB_HOST_OPTIONS_H

#include <glib.h>
#include <knnwb/formats.h>
#include <knnwb/knn.h>
#include <knnwb/metafeatures.h>
#include "pipeline/pipeline.h"

G_BEGIN_DECLS

/**
 * A help text naming a table's listed names: prefix, then "a NOTE, b or c" (note after the first
 * name, the default; a name equal to skip left out), then suffix. The text lives as long as the
 * process (GOption keeps the pointer). O(names).
 */
const char *knnwb_host_help_choices(const KnnwbEnumTable *table, const char *prefix,
                                    const char *note, const char *skip, const char *suffix);

/**
 * Parses the value of option (e.g. "--header") with table; an unknown value is reported as
 * "OPTION must be a, b or c (got 'VALUE')". Errors: KNNWB_ERROR_INVALID_ARGUMENT.
 */
gboolean knnwb_host_option_choice(const KnnwbEnumTable *table, const char *option,
                                  const char *value, int *parsed, GError **error);

/** How the input matrix is read. */
typedef struct {
  char *format;
  gboolean transpose;
  char *header;       /* auto, yes, no */
  char *label_column; /* 1-based column number, or none */
  char *labels;       /* labels side file */
  gboolean drop_missing;
  char *skip_columns; /* CSV/TSV annotation columns */
} KnnwbHostInputArgs;

/** Adds --format, --transpose, --header, --label-column, --labels, --drop-missing,
 * --skip-columns. */
void knnwb_host_input_add_entries(GOptionContext *context, KnnwbHostInputArgs *args);
/** Turns the parsed arguments into read options. Errors: KNNWB_ERROR_INVALID_ARGUMENT. */
gboolean knnwb_host_input_options(const KnnwbHostInputArgs *args, KnnwbReadOptions *options,
                                  GError **error);
void knnwb_host_input_clear(KnnwbHostInputArgs *args);
/** The input read follows the signals: options' cancel flag (a 10 GB text or gzip file stops
 * within a few MiB of Ctrl-C) and a "read" progress line in bytes of the file. Returns that line,
 * to finish (knnwb_host_progress_finish) once the read returns; NULL when quiet or not a terminal.
 * opaque: a KnnwbHostProgress. */
void *knnwb_host_input_watch(KnnwbReadOptions *options, const volatile gint *cancel,
                             gboolean quiet);

/** The kNN engine's settings. */
typedef struct {
  gint64 k;
  char *metric;
  char *backend;
  char *screen;
  int threads;
  char *memory;
  char *devices;
  char *gpu_memory;
  gboolean drop_degenerate;
  GArray *device_list; /* int, filled by knnwb_host_knn_options */
} KnnwbHostKnnArgs;

/** Adds -k, --metric, --backend, --screen, --threads, --memory, --devices, --gpu-memory,
 * --drop-degenerate.
 */
void knnwb_host_knn_add_entries(GOptionContext *context, KnnwbHostKnnArgs *args);
/** Fills options (k required when k_required). Errors: KNNWB_ERROR_INVALID_ARGUMENT. */
gboolean knnwb_host_knn_options(KnnwbHostKnnArgs *args, gboolean k_required,
                                KnnwbKnnOptions *options, GError **error);
void knnwb_host_knn_clear(KnnwbHostKnnArgs *args);

/** Metafeature and phenotype arguments (knnwb metafeatures, knnwb neighbourhood). */
typedef struct {
  char *ops;             /* --metafeatures / --ops */
  char *rows;            /* --pair-rows FILE */
  char *missing;         /* error, drop-rows */
  char *phenotype;       /* TABLE:COLUMN */
  char *phenotype_id;    /* the table's sample-name column */
  char *phenotype_label; /* the new row's label */
} KnnwbHostExpandArgs;

/** Adds the options; ops_name is "ops" or "metafeatures" (the option that turns expansion on). */
void knnwb_host_expand_add_entries(GOptionContext *context, KnnwbHostExpandArgs *args,
                                   const char *ops_name);
void knnwb_host_expand_clear(KnnwbHostExpandArgs *args);

/**
 * Runs (metafeatures when args->ops, or always when force_metafeatures) then (phenotype when
 * args->phenotype) on *data, replacing it. Progress on a terminal unless quiet. group (NULL:
 * the whole result): one rank of a split-memory job; *data is then the whole input when
 * metafeatures run (this rank generates its share of the pair rows) or this rank's block, and the
 * phenotype row goes to the last rank's block, so the blocks in rank order are the single
 * process's result. Not collective: the caller agrees.
 * Errors: as knnwb_metafeatures_expand and knnwb_phenotype_append.
 */
gboolean knnwb_host_expand(const KnnwbHostExpandArgs *args, gboolean force_metafeatures,
                           int n_threads, gboolean quiet, const volatile gint *cancel,
                           const KnnwbKnnGroup *group, KnnwbMatrix **data, GError **error);

/** The usage errors of a command's one INPUT (the remaining arguments): "no INPUT file given",
 * "one INPUT file expected, got 'B' too". */
gboolean knnwb_host_one_input(char **rest, GError **error);

/** --threads N: 0 (every core this process may run on) or more. Errors:
 * KNNWB_ERROR_INVALID_ARGUMENT. */
gboolean knnwb_host_threads_check(int threads, GError **error);

/** "WHAT is required" unless given (e.g. what = "-o OUT"). */
gboolean knnwb_host_required(gboolean given, const char *what, GError **error);

/** Refuses, before a long computation, an output that is not a regular file or whose directory is
 * missing or not writable (knnwb_host_output_check). */
gboolean knnwb_host_check_output(const char *path, GError **error);

/**
 * Commits outputs (the last thing of a run, refused when a signal arrived). With group (an
 * mpirun job whose ranks computed together) the ranks first agree that none was interrupted,
 * only the writer commits, and they agree on how that went. Collective when group is not NULL.
 * Errors: KNNWB_ERROR_CANCELLED, as knnwb_host_outputs_commit, transport errors.
 */
gboolean knnwb_host_commit_agreed(const KnnwbKnnGroup *group, gboolean writer, GPtrArray *outputs,
                                  const volatile gint *cancel, GError **error);

/** 128 + signal after a signal (whatever the error), else 1. */
int knnwb_host_exit_status(const GError *error);

/**
 * Ends a workflow command: prints the usage error (status 2), the failure or the interruption,
 * and returns the exit status.
 */
int knnwb_host_command_fail(const char *command, const GError *error, gboolean usage);

/**
 * The exit status of a command that parsed its options (parsed) and ran (done): 0 when done;
 * otherwise, after a run, its outputs are discarded (and named in error), and the usage error,
 * failure or interruption is printed as knnwb_host_command_fail does.
 */
int knnwb_host_command_finish(const char *command, gboolean parsed, gboolean done,
                              GPtrArray *outputs, GError *error);

/* The workflow commands. */
int knnwb_host_command_metafeatures(int argc, char **argv);
int knnwb_host_command_neighbourhood(int argc, char **argv);
int knnwb_host_command_classify(int argc, char **argv);
int knnwb_host_command_render(int argc, char **argv);

/* ---------------------------------------------------------------------------------------------- */
/* Commands that run as steps (knnwb classify; knnwb run and validate for their files) */

/** The built-in steps and the plugins found on the search path (plugin_path first; NULL: the
 * default path); refused plugins reported on stderr unless quiet. O(plugins). */
KnnwbHostRegistry *knnwb_host_registry_load(const char *plugin_path, gboolean quiet);

/** Adds a load-matrix step id reading path (given by option, e.g. "INPUT") as args say: the
 * step the input options stand for. O(1). */
void knnwb_host_input_add_step(KnnwbPipeline *pipeline, const char *id, const char *path,
                               const char *option, const KnnwbHostInputArgs *args);

/** Gives the last added kNN step (knn-graph, knn-query, knn-classify, neighbourhood) the kNN
 * options given on the command line, each named by its option. O(1). */
void knnwb_host_knn_add_params(KnnwbPipeline *pipeline, const KnnwbHostKnnArgs *args);

G_END_DECLS

#endif
