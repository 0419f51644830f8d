/* Pipelines of the `knnwb` program: the registry of step types, the plugins that fill it, and
 * loading, checking and running a pipeline. The interface commands/ (and the tests) use; the
 * loaded form of a pipeline stays private to pipeline/ (pipeline_internal.h).
 */
#ifndef KNNWB_HOST_PIPELINE_H
#define KNNWB_HOST_PIPELINE_H

#include <stdio.h>
#include <glib.h>
#include <gmodule.h>
#include <knnwb/plugin.h>

G_BEGIN_DECLS

/* ---------------------------------------------------------------------------------------------- */
/* Step registry (registry.c) */

/** A plugin the registry holds: a loaded module's, or the steps built into the host. */
typedef struct {
  char *name;
  char *version;
  char *description;
  char *path; /* NULL for the steps built into the host */
  GModule *module;
  GPtrArray *steps; /* const KnnwbStepType * */
} KnnwbHostPlugin;

/** A registered step type and the plugin that registered it. */
typedef struct {
  const KnnwbStepType *type;
  const KnnwbHostPlugin *plugin;
} KnnwbHostStep;

typedef struct {
  GPtrArray *plugins; /* KnnwbHostPlugin *, in load order */
  GHashTable *steps;  /* name -> KnnwbHostStep * */
  GPtrArray *refused; /* char *: "path: reason" */
} KnnwbHostRegistry;

/** An empty registry. */
KnnwbHostRegistry *knnwb_host_registry_new(void);
/** Frees the registry. NULL is fine. The modules stay loaded (resident): step tables registered
 * from them may be referenced until the process exits. */
void knnwb_host_registry_free(KnnwbHostRegistry *registry);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbHostRegistry, knnwb_host_registry_free)

/**
 * Registers a plugin descriptor (from a module, or built in: path and module NULL). The plugin's
 * steps are added only when its init and every registration succeed (each step type is checked:
 * names, parameter specs and defaults); the plugin records module, which the caller closes when
 * this fails. Errors: KNNWB_ERROR_FAILED with the reason (ABI version, failing init, a plugin or
 * step name already taken, a malformed step type). O(plugins + the plugin's steps).
 */
gboolean knnwb_host_registry_add_plugin(KnnwbHostRegistry *registry,
                                        const KnnwbPluginDescriptor *descriptor, const char *path,
                                        GModule *module, GError **error);

/** Looks a step type up; NULL when unknown. O(1). */
const KnnwbHostStep *knnwb_host_registry_lookup(const KnnwbHostRegistry *registry,
                                                const char *name);

/** Step names sorted, for listings and "did you mean". Free the array only (g_free).
 * O(steps log steps). */
const char **knnwb_host_registry_step_names(const KnnwbHostRegistry *registry, guint *n);

/* ---------------------------------------------------------------------------------------------- */
/* Plugin modules (plugin_loader.c) */

/**
 * The plugin search path: the --plugin-path entries, then KNNWB_PLUGIN_PATH, then the installed
 * plugin directory (or, when the program runs from its build tree, the build's plugin directory).
 * Returns a NULL-terminated array (g_strfreev).
 */
char **knnwb_host_plugin_search_path(const char *option_path);

/**
 * Loads every module in the directories (in order; a plugin name already loaded shadows later
 * ones). Modules refused (wrong ABI, missing descriptor, failing init, name clash) are recorded in
 * registry->refused and, unless quiet, reported on stderr; loading goes on.
 */
void knnwb_host_load_plugins(KnnwbHostRegistry *registry, char *const *directories, gboolean quiet);

/** Loads one module file. Errors: KNNWB_ERROR_FAILED with a clear reason. */
gboolean knnwb_host_load_plugin_file(KnnwbHostRegistry *registry, const char *path, GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* Pipelines (load.c, run.c) */

typedef struct KnnwbPipeline KnnwbPipeline;

/** Options of loading and running a pipeline. */
typedef struct {
  GHashTable *overrides;  /* variable name -> value (from --set) */
  const char *output_dir; /* base of relative output paths; NULL = current directory */
  int n_threads;
  size_t memory_bytes;
  gboolean quiet;
  gboolean quiet_steps; /* no "[i/n] id (type)" line per step; progress lines named by step id */
  gboolean report;
  const char *confine; /* --confine: every input and output path must resolve inside; NULL = any */
} KnnwbPipelineOptions;

/**
 * Parses and validates path: XML well-formedness and the schema, then every semantic check
 * (unknown step types and parameters, types and ranges, references, cycles, kinds, file paths).
 * All problems are reported, each as "file:line: message", in one error joined by newlines (at
 * most 200, then a count). Errors: KNNWB_ERROR_PARSE (XML/schema), KNNWB_ERROR_INVALID_ARGUMENT
 * (semantic), KNNWB_ERROR_IO. Time and memory: linear in the file's size, plus O(steps^2) for the
 * order and the checks between steps.
 */
KnnwbPipeline *knnwb_pipeline_load(const char *path, const KnnwbHostRegistry *registry,
                                   const KnnwbPipelineOptions *options, GError **error);
/**
 * Under mpirun (knnwb_host_group()), whether every rank loaded (or prepared) its pipeline: ok is
 * this rank's outcome, error its reason. Each rank loads the file and checks the paths on its own
 * file system, and the runner's first meeting is collective, so a rank that failed alone must not
 * return before it (the others would wait there for ever). Collective under mpirun; returns ok
 * otherwise. Errors: where every rank failed, each keeps its own; else every rank gets the lowest
 * failing rank's, prefixed "rank R: ". O(1) messages.
 */
gboolean knnwb_pipeline_ranks_ready(gboolean ok, GError **error);

/** Frees a loaded pipeline. NULL is fine. */
void knnwb_pipeline_free(KnnwbPipeline *pipeline);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbPipeline, knnwb_pipeline_free)

/** Writes the plan (steps in run order, inputs, parameters, outputs) to out. */
void knnwb_pipeline_print_plan(const KnnwbPipeline *pipeline, FILE *out);

/**
 * Runs the steps in dependency order. Outputs are written to temporaries and renamed into place
 * only when every step succeeded; on failure or cancellation (cancel set; may be NULL) they are
 * removed. Under mpirun (knnwb_host_group()) every rank calls it: the steps flagged
 * KNNWB_STEP_SPLIT_ROWS run on every rank, the others on rank 0, and every rank returns the same
 * result. Errors: the failing step's error prefixed with "file:line: step 'id' (type):";
 * KNNWB_ERROR_CANCELLED; the commit's KNNWB_ERROR_IO.
 */
gboolean knnwb_pipeline_run(KnnwbPipeline *pipeline, const KnnwbPipelineOptions *options,
                            const volatile gint *cancel, GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* Pipelines built in code (program.c): a command's options become the steps a pipeline file would
 * hold, checked as a file's are and run by the same runner (knnwb_pipeline_run). */

/**
 * An empty pipeline with no file. Its problems read "source: message" (source NULL: "message"),
 * "source: OPTION: message" where a parameter came from a command option, never "file:line:";
 * the runner's errors read "source: " and the failing step's message. O(1).
 */
KnnwbPipeline *knnwb_pipeline_new(const char *source);

/** Adds a step of the registered type type_name (checked by knnwb_pipeline_prepare), with its id;
 * the parameters and inputs added next are its. Steps run in dependency order, in the order added
 * among independent ones. O(1). */
void knnwb_pipeline_add_step(KnnwbPipeline *pipeline, const char *id, const char *type_name);

/** Gives the last added step's parameter name the text value, as a pipeline file's value="..."
 * after its variables were expanded (nothing is expanded here). option: the command option the
 * value came from ("--resolution"), which problems with it name; NULL when none did. O(1). */
void knnwb_pipeline_add_param(KnnwbPipeline *pipeline, const char *name, const char *value,
                              const char *option);

/** Connects the last added step's input name to the output of the step with id from. O(1). */
void knnwb_pipeline_add_input(KnnwbPipeline *pipeline, const char *name, const char *from);

/**
 * Runs the checks knnwb_pipeline_load runs on a file (step types, parameters with their types and
 * ranges, inputs and their kinds, cycles, input files readable, output directories writable, two
 * steps writing one file, an output replacing an input, --confine) on a pipeline built in code.
 * Relative input paths are read from the current directory; relative outputs go under
 * options->output_dir. All problems are reported in one error, joined by newlines. Errors:
 * KNNWB_ERROR_INVALID_ARGUMENT. O(steps^2) plus the parameters.
 */
gboolean knnwb_pipeline_prepare(KnnwbPipeline *pipeline, const KnnwbHostRegistry *registry,
                                const KnnwbPipelineOptions *options, GError **error);

G_END_DECLS

#endif
