/* Internal interfaces of the `knnwb` program: step registry, plugin loader, pipelines, utilities.
 */
#ifndef KNNWB_HOST_H
#define KNNWB_HOST_H

#include <glib.h>
#include <gmodule.h>
#include <knnwb/knn_group.h>
#include <knnwb/plugin.h>

G_BEGIN_DECLS

/* ---------------------------------------------------------------------------------------------- */
/* Utilities */

/**
 * Parses a byte size: a non-negative integer or decimal with an optional suffix K, M, G, T (powers
 * of 1024, case-insensitive, optionally followed by "B" or "iB"): "4G", "512M", "1.5GiB", "1000".
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (syntax or overflow of 64 bits).
 */
gboolean knnwb_host_parse_bytes(const char *text, guint64 *bytes, GError **error);

/** Formats a byte count for humans ("1.5 GiB"). Returns a new string. */
char *knnwb_host_format_bytes(guint64 bytes);

/**
 * Installs SIGINT/SIGTERM handlers that set the returned flag (the core's cancel option) and
 * remember the signal; a second signal kills the process the default way. Idempotent.
 */
const volatile gint *knnwb_host_signals_install(void);
/** The signal that set the flag (0 when none). */
int knnwb_host_signals_received(void);
/** The exit status for a run stopped by a signal: 128 + signal number. */
int knnwb_host_signals_exit_status(void);
/**
 * Brackets the commit of the outputs: while committing, a second signal no longer kills the
 * process (the renames must not stop half-way); the first still sets the flag.
 */
void knnwb_host_signals_committing(gboolean committing);

/** The igraph error handler the host installs at start: records the message, never aborts. */
void knnwb_host_igraph_init(void);

/** A terminal progress line on stderr: "label: done/total tiles, rate/s, ETA". */
typedef struct KnnwbHostProgress KnnwbHostProgress;
/* An output file: the step writes temporary; the host renames it to final after every step
 * succeeded, so a failed or interrupted run leaves none of its outputs behind. */
typedef struct {
  char *temporary;
  char *final;
} KnnwbPipelineOutput;

/** Temporaries are named `.knnwb-tmp-PID-N-NAME` beside their target NAME: a crashed run's
 * litter is recognisable (`find DIR -name '.knnwb-tmp-*'`), and the extension stays last. */
#define KNNWB_HOST_TEMPORARY_PREFIX ".knnwb-tmp-"

/**
 * Checks, without side effects, that path can become an output: it is absent or a regular file
 * (a FIFO, device or directory is refused: the rename would replace it), and its directory exists
 * and looks writable (access() and the mount's read-only flag; root passes access() anywhere, so
 * knnwb_host_outputs_add() proves it for real when the run starts).
 * Errors: KNNWB_ERROR_IO with a message naming path.
 */
gboolean knnwb_host_output_check(const char *path, GError **error);

/**
 * What identifies a file for "same file" checks: device and inode when it exists, otherwise the
 * real path of its directory plus its name. `out.knn`, `./out.knn`, `sub/../out.knn`, a symbolic
 * link's directory and a hard link all give the same identity. Returns a new string.
 */
char *knnwb_host_path_identity(const char *path);

/**
 * Adds final to outputs (a GPtrArray of KnnwbPipelineOutput with knnwb_host_output_free) and
 * returns its temporary path (owned by outputs). The temporary is created (O_EXCL) and removed
 * again, which proves the directory takes new files before any work; the writer creates it again.
 * Errors: KNNWB_ERROR_IO naming final and the directory.
 */
const char *knnwb_host_outputs_add(GPtrArray *outputs, const char *final, GError **error);
void knnwb_host_output_free(gpointer output);
/**
 * Adds a file a writer derives from another output's name (an NPY's labels side file: the
 * writer given the temporary writes temporary's side file): committed and discarded with the rest.
 */
void knnwb_host_outputs_add_side_file(GPtrArray *outputs, const char *temporary, const char *final);

/**
 * The commit, the last thing a run does: when *cancel is set (a signal arrived), removes the
 * temporaries and fails with KNNWB_ERROR_CANCELLED without touching any target. Otherwise renames
 * every existing temporary over its target (keeping an existing target's mode), all or nothing:
 * on a failure the targets already replaced get their previous contents back (hard-linked
 * backups) or are removed when there was none, and the other temporaries are deleted.
 * cancel may be NULL. Errors: KNNWB_ERROR_CANCELLED; KNNWB_ERROR_IO naming the rename that failed.
 */
gboolean knnwb_host_outputs_commit(GPtrArray *outputs, const volatile gint *cancel, GError **error);
/** knnwb_host_outputs_commit() without a cancel flag (for callers that check it themselves). */
gboolean knnwb_pipeline_outputs_commit(GPtrArray *outputs, GError **error);
/** Removes every temporary (those not written yet are fine). */
void knnwb_host_outputs_discard(GPtrArray *outputs);
/** Rewrites every temporary path in error's message as its target's path (NULL is fine). */
void knnwb_host_outputs_name_targets(const GPtrArray *outputs, GError *error);

/**
 * The job this process is one rank of (NULL when alone). Ranks other than 0 stay silent: no
 * notices, warnings, progress or error messages (every failure is agreed, and rank 0 reports it).
 */
void knnwb_host_set_group(const KnnwbKnnGroup *group);
const KnnwbKnnGroup *knnwb_host_group(void);
/** FALSE on ranks other than 0 of a job. */
gboolean knnwb_host_speaks(void);

/** Installs the host's log writer (once, at start). */
void knnwb_host_log_init(void);
/** With quiet, notices (g_message/g_info) are not shown; warnings always are. */
void knnwb_host_log_set_quiet(gboolean quiet);

/** The width of stderr's terminal (TIOCGWINSZ; under mpirun the launcher's), else $COLUMNS,
 * else 80. */
int knnwb_host_terminal_width(void);
/** Returns NULL (no progress) when quiet or stderr is not a terminal. The line fits the terminal's
 * width (shorter forms, then cut). */
KnnwbHostProgress *knnwb_host_progress_new(const char *label, gboolean quiet);
/** A KnnwbProgressFunc; data is the KnnwbHostProgress (NULL is fine). */
void knnwb_host_progress_update(uint64_t done, uint64_t total, void *data);
/** Ends the line and frees. NULL is fine. */
void knnwb_host_progress_finish(KnnwbHostProgress *progress);
/** A phase line without counts ("label: 12 s", every half second from a thread) for library
 * calls that report no progress; NULL (nothing shown) as knnwb_host_progress_new. */
typedef struct KnnwbHostTicker KnnwbHostTicker;
KnnwbHostTicker *knnwb_host_ticker_new(const char *label, gboolean quiet);
/** Stops the line (ends it with a newline when it was shown) and frees. NULL is fine. */
void knnwb_host_ticker_free(KnnwbHostTicker *ticker);
/** What the counts are ("tiles" by default; unit must outlive the progress line; NULL: counts that
 * mean nothing to a user, shown as a share alone). */
void knnwb_host_progress_set_unit(KnnwbHostProgress *progress, const char *unit);

/** The process's peak resident size in bytes (VmHWM, else ru_maxrss); never reset. */
guint64 knnwb_host_memory_peak(void);

/** Measures one step's peak resident size without resetting the process's high-water mark. */
typedef struct KnnwbHostMemorySampler KnnwbHostMemorySampler;
/**
 * Starts measuring (a thread samples VmRSS every 2 ms). NULL where /proc/self/status is missing;
 * knnwb_host_memory_sampler_stop(NULL) then returns the process's peak so far.
 */
KnnwbHostMemorySampler *knnwb_host_memory_sampler_start(void);
/**
 * Stops and frees the sampler; returns the step's peak: the process's new high-water mark when the
 * step raised it (exact), else the largest resident size sampled (a spike shorter than 2 ms may be
 * missed).
 */
guint64 knnwb_host_memory_sampler_stop(KnnwbHostMemorySampler *sampler);

/* ---------------------------------------------------------------------------------------------- */
/* Step registry and plugins */

typedef struct {
  char *name;
  char *version;
  char *description;
  char *path; /* NULL for the steps built into the host */
  GModule *module;
  GPtrArray *steps; /* const KnnwbStepType * */
} KnnwbHostPlugin;

typedef struct {
  const KnnwbStepType *type;
  const KnnwbHostPlugin *plugin;
} KnnwbHostStep;

typedef struct {
  GPtrArray *plugins; /* KnnwbHostPlugin *, in load order */
  GHashTable *steps;  /* name -> KnnwbHostStep * */
  GPtrArray *refused; /* char *: "path: reason" */
} KnnwbHostRegistry;

KnnwbHostRegistry *knnwb_host_registry_new(void);
void knnwb_host_registry_free(KnnwbHostRegistry *registry);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbHostRegistry, knnwb_host_registry_free)

/**
 * Registers a plugin descriptor (from a module or built in). The plugin's steps are added only
 * when its init and every registration succeed. Errors: KNNWB_ERROR_FAILED with the reason.
 */
gboolean knnwb_host_registry_add_plugin(KnnwbHostRegistry *registry,
                                        const KnnwbPluginDescriptor *descriptor, const char *path,
                                        GModule *module, GError **error);

/** Looks a step type up; NULL when unknown. */
const KnnwbHostStep *knnwb_host_registry_lookup(const KnnwbHostRegistry *registry,
                                                const char *name);

/** Step names sorted, for listings and "did you mean". Free the array only (g_free). */
const char **knnwb_host_registry_step_names(const KnnwbHostRegistry *registry, guint *n);

/** The descriptor of the steps built into the host (formats and clustering). */
const KnnwbPluginDescriptor *knnwb_host_builtin_descriptor(void);

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

/**
 * Checks one parameter value text against its spec (not file params' paths): fills value->v_*.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT with a message naming the parameter.
 */
gboolean knnwb_host_param_parse(const KnnwbParamSpec *spec, const char *text,
                                KnnwbParamValue *value, GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* Pipelines */

typedef struct KnnwbPipeline KnnwbPipeline;

/** Options of loading and running a pipeline. */
typedef struct {
  GHashTable *overrides;  /* variable name -> value (from --set) */
  const char *output_dir; /* base of relative output paths; NULL = current directory */
  int n_threads;
  size_t memory_bytes;
  gboolean quiet;
  gboolean report;
  const char *confine; /* --confine: every input and output path must resolve inside; NULL = any */
} KnnwbPipelineOptions;

/**
 * Parses and validates path: XML well-formedness and the schema, then every semantic check
 * (unknown step types and parameters, types and ranges, references, cycles, kinds, file paths).
 * All problems are reported, each as "file:line: message", in one error joined by newlines.
 * Errors: KNNWB_ERROR_PARSE (XML/schema), KNNWB_ERROR_INVALID_ARGUMENT (semantic), KNNWB_ERROR_IO.
 */
KnnwbPipeline *knnwb_pipeline_load(const char *path, const KnnwbHostRegistry *registry,
                                   const KnnwbPipelineOptions *options, GError **error);
void knnwb_pipeline_free(KnnwbPipeline *pipeline);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbPipeline, knnwb_pipeline_free)

/** Writes the plan (steps in run order, inputs, parameters, outputs) to out. */
void knnwb_pipeline_print_plan(const KnnwbPipeline *pipeline, FILE *out);

/**
 * Runs the steps in dependency order. Outputs are written to temporaries and renamed into place
 * only when every step succeeded; on failure or cancellation they are removed.
 * Errors: the failing step's error prefixed with "file:line: step 'id' (type):".
 */
gboolean knnwb_pipeline_run(KnnwbPipeline *pipeline, const KnnwbPipelineOptions *options,
                            const volatile gint *cancel, GError **error);

/** The vertex labels of a graph or clustering value (from its points), or NULL. */
const char *const *knnwb_host_value_labels(const KnnwbValue *value);

/* ---------------------------------------------------------------------------------------------- */
/* Commands */

int knnwb_host_command_knn(int argc, char **argv);
int knnwb_host_command_cluster(int argc, char **argv);
int knnwb_host_command_run(int argc, char **argv);
int knnwb_host_command_validate(int argc, char **argv);
int knnwb_host_command_plugins(int argc, char **argv);

/** Prints "knnwb: message" to stderr. */
void knnwb_host_print_error(const GError *error);

G_END_DECLS

#endif
