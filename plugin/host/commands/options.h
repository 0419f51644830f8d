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
#include <knnwb/annotation.h>
#include <knnwb/formats.h>
#include <knnwb/knn.h>
#include <knnwb/metafeatures.h>
#include <knnwb/neighbourhood.h>
#include "pipeline/pipeline.h"
#include "runtime/runtime.h"

G_BEGIN_DECLS

/**
 * A help text naming a table's listed names: prefix, then "a NOTE, b or c" (note after the first
 * name, the default; a name equal to skip left out), then suffix. The text lives as long as the
 * process (GOption keeps the pointer). O(names).
 */
const char *knnwb_host_help_choices(const KnnwbEnumTable *table, const char *prefix,
                                    const char *note, const char *skip, const char *suffix);

/**
 * Whether a command's arguments (argv[first..argc)) ask for its help: -h, -?, --help or
 * --help-all, before any "--". A cluster of short options (-qh) is not help: it is a usage error.
 * O(argc).
 */
gboolean knnwb_host_options_ask_help(int argc, char **argv, int first);

/**
 * Parses argv as g_option_context_parse does, except that -h, -?, --help and --help-all
 * (knnwb_host_options_ask_help) print the command's help as knnwb_host_help_format lays it out
 * (on stdout) and exit 0, as GLib would; GLib's own help options are off, so that no other form
 * exits the process where it parses. Errors: g_option_context_parse's.
 */
gboolean knnwb_host_options_parse(GOptionContext *context, const char *command, int *argc,
                                  char ***argv, GError **error);

/**
 * GLib's help text of command (g_option_context_get_help) laid out for people: options in the
 * same sections and order in every command, everything wrapped at width columns, "[OPTION...]"
 * in any locale. Returns a new string. O(length of the text).
 */
char *knnwb_host_help_format(const char *glib_help, const char *command, int width);

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
  char *use_rep;      /* .h5ad: obsm[NAME] instead of X */
  char *layer;        /* .h5ad: layers[NAME] instead of X */
  char *skip_columns; /* CSV/TSV annotation columns */
} KnnwbHostInputArgs;

/** Adds --format, --transpose, --header, --label-column, --labels, --drop-missing,
 * --skip-columns, --use-rep, --layer. */
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
  char *ops;               /* --metafeatures / --ops */
  char *rows;              /* --pair-rows FILE */
  char *missing;           /* error, drop-rows */
  char *phenotype;         /* TABLE:COLUMN */
  char *phenotype_id;      /* the table's sample-name column */
  char *phenotype_label;   /* the new row's label */
  char *phenotype_missing; /* complete (default), error */
  char *sample_labels;     /* a sample annotation that names the columns */
  const char *input_name;  /* the input, for messages (not owned) */
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

/**
 * Whether spec names the input's own sample annotation rather than a table's column: it has no
 * ':', or data has an annotation of that exact name along axis. O(annotations).
 */
gboolean knnwb_host_annotation_is_bare(const char *spec, const KnnwbMatrix *data,
                                       KnnwbMatrixAxis axis);

/**
 * The table a sample option (option: "--phenotype", "--classes", "--annotation") names: spec is
 * TABLE:COLUMN (the file read) or a bare COLUMN, the input's own annotation along axis (the axis
 * that holds the command's samples) as a two-column table (knnwb_annotation_from_matrix, named
 * input_name). *table and *column are new. Errors: as knnwb_annotation_read and
 * knnwb_annotation_from_matrix (a bare name that names nothing lists the available names).
 */
gboolean knnwb_host_annotation_table(const char *spec, const char *option, const KnnwbMatrix *data,
                                     KnnwbMatrixAxis axis, const char *input_name,
                                     KnnwbAnnotationTable **table, char **column, GError **error);

/**
 * --sample-labels KEY: the samples along axis are labelled by their annotation key. Errors:
 * KNNWB_ERROR_INVALID_ARGUMENT (no such annotation: the available ones listed),
 * KNNWB_ERROR_INVALID_DATA (a sample without a value, two samples with one value). O(samples).
 */
gboolean knnwb_host_sample_labels(KnnwbMatrix *data, KnnwbMatrixAxis axis, const char *key,
                                  const char *input_name, GError **error);

/**
 * Known classes of data's rows (the points) from an option (option: "--annotation"; id_option:
 * the option that names the table's column of names, for messages): a table's column
 * (TABLE:COLUMN, names from id_column or the first column) or a bare COLUMN of the input's own
 * row annotation (knnwb_host_annotation_table). classes (initialised) gets one class per row (-1:
 * none), *class_names the names (g_strfreev). A table that names none of the rows is refused; rows
 * without a value (not listed, NA, empty, NaN) get -1 and one warning says how many.
 * Errors: as knnwb_host_annotation_table and knnwb_formats_annotation_classes,
 * KNNWB_ERROR_INVALID_DATA (no row named). Complexity: O(table + rows).
 */
gboolean knnwb_host_annotation_classes(const char *spec, const char *id_column, const char *option,
                                       const char *id_option, const KnnwbMatrix *data,
                                       const char *input_name, igraph_vector_int_t *classes,
                                       char ***class_names, GError **error);

/** Node attributes for the graph writers: n columns of per-row values (--annotation). */
typedef struct {
  size_t n;
  char **names;
  const char ***values; /* per column: one per row, NULL = no value; strings in strings */
  GStringChunk *strings;
} KnnwbHostAttributes;

/**
 * --annotation TABLE:COL[,COL...] or COL[,COL...] (the input's own row annotations, data's): the
 * columns as per-row values for n rows labelled labels (matched against the table's column
 * id_column, or its first). A table that names none of the rows is refused (id_option named).
 * Errors: as knnwb_annotation_read and knnwb_annotation_column, KNNWB_ERROR_INVALID_DATA,
 * KNNWB_ERROR_INVALID_ARGUMENT (an unknown bare name: the available ones listed; a bare name where
 * data is NULL). Complexity: O(table + n x columns).
 */
gboolean knnwb_host_attributes_read(const char *spec, const char *id_column, const char *id_option,
                                    const KnnwbMatrix *data, const char *const *labels, size_t n,
                                    const char *input_name, KnnwbHostAttributes *attributes,
                                    GError **error);
void knnwb_host_attributes_clear(KnnwbHostAttributes *attributes);

/**
 * The writers' node attributes for vertices that are rows rows[0..n_vertices-1] (rows NULL: vertex
 * v is row v). *owned receives the per-vertex arrays (g_free) when rows is given. NULL when there
 * are no columns; free the result with g_free. O(columns x vertices).
 */
KnnwbNodeAttribute *knnwb_host_attributes_nodes(const KnnwbHostAttributes *attributes,
                                                const int64_t *rows, size_t n_vertices,
                                                const char ***owned);

/** The first column of an --annotation spec of several (TABLE:A,B -> TABLE:A; A,B -> A), new. */
char *knnwb_host_annotation_first(const char *spec, const KnnwbMatrix *data);

/** knnwb neighbourhood --plots DIR: scatter plots of the focus's top hits. */
typedef struct {
  char *dir;      /* --plots */
  gint64 top;     /* --plots-top */
  char *color_by; /* --plots-color-by: a sample annotation or TABLE:COLUMN */
} KnnwbHostPlots;

/** Checks --plots-top and makes DIR (with its parents) when --plots is given. Errors:
 * KNNWB_ERROR_INVALID_ARGUMENT, KNNWB_ERROR_IO. */
gboolean knnwb_host_plots_check(const KnnwbHostPlots *plots, GError **error);

/**
 * Writes, for each focus row of found (rows of data, the whole matrix), one scatter PNG per member
 * of rank <= top (its values against the focus's across the samples; r and p in the title) named
 * DIR/RR-LABEL.png, and DIR/overview.png with the members' signed r (a FOCUS- prefix when there
 * are several focus rows), each through a temporary of outputs. Errors: as
 * knnwb_drawing_scatter_png and knnwb_host_annotation_table, KNNWB_ERROR_INVALID_ARGUMENT (no
 * values at hand). O(top x samples) per focus, plus the pictures.
 */
gboolean knnwb_host_plots_write(const KnnwbHostPlots *plots, const KnnwbNeighbourhood *found,
                                const KnnwbMatrix *data, const char *input_name, GPtrArray *outputs,
                                GError **error);

/** The usage errors of a command's one INPUT (the remaining arguments): "no INPUT file given",
 * "one INPUT file expected, got 'B' too". */
gboolean knnwb_host_one_input(char **rest, GError **error);

/** --threads N: 0 (every core this process may run on) or more. Errors:
 * KNNWB_ERROR_INVALID_ARGUMENT. */
gboolean knnwb_host_threads_check(int threads, GError **error);

/** "WHAT is required" unless given (e.g. what = "-o OUT"). */
gboolean knnwb_host_required(gboolean given, const char *what, GError **error);

/** Declares the main input (role "the input file") and the --labels side file of args. O(1). */
void knnwb_host_input_files(KnnwbHostFiles *files, const char *input,
                            const KnnwbHostInputArgs *args);
/** Declares the side inputs of args: --pair-rows and --phenotype's table. O(1). */
void knnwb_host_expand_files(KnnwbHostFiles *files, const KnnwbHostExpandArgs *args);
/** The table of a TABLE:COLUMN option value (a new string), NULL without a colon. */
char *knnwb_host_spec_table(const char *spec);

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
