/* Private to pipeline/ (and its tests): the loaded form of a pipeline, shared by the loader,
 * the checks and the runner, and the functions the files of pipeline/ call in each other.
 *
 * The files form a tree: program.c reads load.c (the checks) and report.c; load.c reads xml.c,
 * variables.c, report.c, confine.c, ranks.c and registry.c (parameter values); run.c reads
 * ranks.c, focus.c and value.c; xml.c and variables.c report through report.c; focus.c reads
 * value.c and report.c (a place).
 */
#ifndef KNNWB_PIPELINE_INTERNAL_H
#define KNNWB_PIPELINE_INTERNAL_H

#include <knnwb/knn_group.h>
#include "pipeline/pipeline.h"

typedef struct {
  char *name;
  char *value;
  int line;
  gboolean overridden;
} KnnwbPipelineVariable;

typedef struct {
  char *name; /* the input (port) name */
  char *from; /* the id of the step whose result it takes */
  int line;
} KnnwbPipelineInput;

typedef struct {
  char *name;
  char *raw;   /* as written, before ${...} substitution */
  char *value; /* after substitution */
  int line;
} KnnwbPipelineParam;

typedef struct {
  char *id;
  char *type_name;
  int line;
  GPtrArray *inputs; /* KnnwbPipelineInput * */
  GPtrArray *params; /* KnnwbPipelineParam * */
  /* Filled by the checks. */
  const KnnwbHostStep *step;
  KnnwbParamValue *values; /* type->n_params */
  char **texts;            /* type->n_params owned strings behind values[i].v_string */
  int *sources;            /* type->n_inputs step indices, -1 when not connected */
} KnnwbPipelineStep;

struct KnnwbPipeline {
  char *path; /* as given; NULL for a pipeline built in code (program.c) */
  /* A pipeline built in code has no file: its messages start "source: " (nothing when NULL)
   * where a file's start "file:line: ", and its steps, parameters and inputs carry, as their
   * line, 1 + an index into places: the command option each came from ("--resolution"), or ""
   * where none did. places is NULL for a file. */
  char *source;
  GPtrArray *places; /* char * */
  char *dir; /* absolute directory of the file: base of relative input paths; NULL: as given */
  char *name;
  char *output_dir;     /* absolute: base of relative output paths; NULL: as given */
  GPtrArray *variables; /* KnnwbPipelineVariable * */
  GPtrArray *steps;     /* KnnwbPipelineStep * */
  guint *order;         /* steps->len indices in run order */
  char *confine;        /* --confine directory, or NULL: every file path must resolve inside */
};

/* Problems of one load, each "file:line: message"; for a pipeline built in code, "source: place:
 * message" (path is then the source, possibly NULL, and places the pipeline's). */
typedef struct {
  const char *path;
  GString *messages;
  guint n_errors;
  const GPtrArray *places;
} KnnwbPipelineDiagnostics;

/* Messages kept in the error of one load; the others are counted. */
#define KNNWB_PIPELINE_MAX_MESSAGES 200

/* Adds "path:line: message" (line 0: "path: message"; with places, "path: place: message") to
 * diagnostics (report.c); past
 * KNNWB_PIPELINE_MAX_MESSAGES it only counts. diagnostics->messages must exist. */
G_GNUC_PRINTF(3, 4)
void knnwb_pipeline_report(KnnwbPipelineDiagnostics *diagnostics, int line, const char *format,
                           ...);

/* Ends diagnostics: its messages, then "... and N more problems" when some were left out. Returns
 * the text (g_free) and frees diagnostics->messages (report.c). */
char *knnwb_pipeline_messages(KnnwbPipelineDiagnostics *diagnostics);

/* The place of line in a pipeline built in code: the command option a parameter came from, or
 * NULL (a file's pipeline, or no option). report.c. */
const char *knnwb_pipeline_place(const GPtrArray *places, int line);

/* The pieces load.c reads a file into, for program.c to build the same in code (load.c): an
 * empty pipeline whose relative inputs are read from dir and relative outputs written under
 * options->output_dir (default: the current directory; dir NULL: both kept as given, for a
 * pipeline built in code), a step, its inputs and parameters (raw as given; value, the text
 * checked, is set by the caller or the variables). */
KnnwbPipeline *knnwb_pipeline_new_empty(const char *dir, const KnnwbPipelineOptions *options);
KnnwbPipelineStep *knnwb_pipeline_step_new(const char *id, const char *type_name, int line);
void knnwb_pipeline_step_add_input(KnnwbPipelineStep *step, const char *name, const char *from,
                                   int line);
KnnwbPipelineParam *knnwb_pipeline_step_add_param(KnnwbPipelineStep *step, const char *name,
                                                  const char *raw, int line);

/* The semantic checks of a read pipeline (types, parameters, inputs, outputs, confinement, the
 * order), every problem into diagnostics. load.c. */
void knnwb_pipeline_check(KnnwbPipeline *pipeline, const KnnwbHostRegistry *registry,
                          KnnwbPipelineDiagnostics *diagnostics);

/* The side file the writer puts beside output parameter index of step (the `.rows.txt` of a
 * `.mtx`), named after path (NULL: the parameter's value; or its temporary): its format from the
 * step's "format" parameter when set, else from the value's extension; NULL when none (load.c).
 * A new string. */
char *knnwb_pipeline_side_file(const KnnwbPipelineStep *step, guint index, const char *path);

/* Checks one parameter value text against its spec (not file params' paths): fills value->v_*
 * (registry.c). Errors: KNNWB_ERROR_INVALID_ARGUMENT with a message naming the parameter. */
gboolean knnwb_host_param_parse(const KnnwbParamSpec *spec, const char *text,
                                KnnwbParamValue *value, GError **error);

/* A step's output as the runner hands it to the step (value.c): kind set, weights and membership
 * initialised empty. Errors: KNNWB_ERROR_NO_MEMORY (igraph's). */
KnnwbValue *knnwb_pipeline_value_new(KnnwbKind kind, GError **error);
/* Frees a value and everything it owns (a split matrix's labels too). NULL is fine. */
void knnwb_pipeline_value_free(KnnwbValue *value);
/* A step must fill what it promised; a plugin that does not is reported, not trusted. On success
 * *summary (g_free) describes the value for --report ("matrix 3 x 4"); a clustering's n_clusters
 * is filled in when the step left it 0. Errors: KNNWB_ERROR_FAILED naming type. O(points). */
gboolean knnwb_pipeline_value_check(KnnwbValue *value, const KnnwbStepType *type, char **summary,
                                    GError **error);

/* Reads, parses and schema-validates path (xml.c): at most 64 MiB, no DOCTYPE, no
 * entities, no network, nesting capped. Returns the document, or NULL with the problems reported.
 * Time and memory: linear in the file's size. */
struct _xmlDoc *knnwb_pipeline_read_xml(const char *path, KnnwbPipelineDiagnostics *diagnostics);

/* Expands ${name} in variables' values and then in every parameter value (param->value; NULL where
 * that failed, reported). overrides (--set) replace values first. variables.c. */
void knnwb_pipeline_resolve_variables(KnnwbPipeline *pipeline, GHashTable *overrides,
                                      KnnwbPipelineDiagnostics *diagnostics);

/* --confine: checks that path (absolute; for an output, a file that may not exist yet) resolves,
 * through every symbolic link, to a place inside the directory confine. FALSE with *reason (owned
 * by the caller) when it does not or cannot be resolved. confine.c. */
gboolean knnwb_pipeline_confined(const char *confine, const char *path, gboolean output,
                                 char **reason);

/* Under mpirun (ranks.c): which steps run on every rank with their matrices split
 * between the ranks (TRUE) and which on rank 0 alone (FALSE), steps->len entries (g_free). A
 * KNNWB_STEP_SPLIT_ROWS step is split when each of its inputs is a split matrix; a split step's
 * matrix output stays split only when every step that takes it is split too; other outputs of
 * split steps are complete on rank 0. Iterated to the fixed point: O(steps x inputs x steps). */
gboolean *knnwb_pipeline_split_plan(const KnnwbPipeline *pipeline);

/* The KNNWB_STEP_SPLIT_ROWS steps that take only matrices, produce no matrix and are not split by
 * the plan (a matrix of rank 0's own feeds them): rank 0 scatters their matrices into every
 * rank's block before they run, so their kNN work is still shared. steps->len entries (g_free). */
gboolean *knnwb_pipeline_scatter_plan(const KnnwbPipeline *pipeline, const gboolean *split);

/* Rank 0's whole matrix (whole: ignored on the other ranks) cut into the even blocks of
 * knnwb_knn_group_rows: every rank's *block (rank 0's a view into whole, which must outlive it),
 * rows *first .. of *total. Collective. Errors: KNNWB_ERROR_NO_MEMORY (agreed), transport. */
gboolean knnwb_pipeline_scatter_rows(const KnnwbKnnGroup *group, const KnnwbMatrix *whole,
                                     KnnwbMatrix **block, size_t *first, size_t *total,
                                     GError **error);

/* Every rank's ok after a point all ranks reach (collective). A failure of every rank (a step
 * whose collective runs agreed inside) keeps each rank's error, which is the same everywhere; a
 * failure of some ranks gives every rank the lowest failing rank's error, prefixed "rank R: ". */
gboolean knnwb_pipeline_ranks_sync(const KnnwbKnnGroup *group, gboolean ok, GError **error);

/* For every step, the matrix step whose rows are the vertices of the graph a write-graph step
 * with a focus will write (followed back through the built-in steps that keep the vertices), or
 * -1 (any other step, or a producer not followed). steps->len entries (g_free). O(steps^2).
 * focus.c. */
int *knnwb_pipeline_focus_plan(const KnnwbPipeline *pipeline);

/* After step done made value (rank 0; a split matrix's labels are rank 0's): every focus label of
 * the write-graph steps whose rows_of is done must be one of its row labels, so that a typo stops
 * the run before the long steps. Errors: KNNWB_ERROR_INVALID_ARGUMENT, "file:line: step 'id'
 * (write-graph): focus: ..." with the focus parameter's line. O(rows x focus labels). */
gboolean knnwb_pipeline_focus_check(const KnnwbPipeline *pipeline, guint done,
                                    const KnnwbValue *value, const int *rows_of, GError **error);

#endif
