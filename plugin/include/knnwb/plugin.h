/* The knnwb plugin interface: how a GModule adds pipeline steps to the `knnwb` host.
 *
 * A plugin is a shared module exporting one symbol, `knnwb_plugin_descriptor` (see
 * KNNWB_PLUGIN_DEFINE). The host reads its abi_version before anything else and refuses the module
 * when it differs from KNNWB_PLUGIN_ABI_VERSION; then it calls init, which registers step types
 * through the registrar it is given. Plugins never call into the host executable: everything they
 * need comes through the structures below, so a plugin links only libknnwb (and whatever it wraps).
 *
 * Data flows between steps as KnnwbValue: a matrix, a graph or a clustering. The host owns every
 * value; a step reads its inputs and fills the output value the host prepared for it.
 */
#ifndef KNNWB_PLUGIN_H
#define KNNWB_PLUGIN_H

#include <glib.h>
#include <gmodule.h>
#include <igraph.h>
#include <knnwb/knn.h>
#include <knnwb/matrix.h>

G_BEGIN_DECLS

/**
 * Bumped whenever any structure in this header changes layout or meaning. A plugin built against
 * another number is refused by the host.
 */
#define KNNWB_PLUGIN_ABI_VERSION 3

/** The name of the descriptor symbol every plugin exports. */
#define KNNWB_PLUGIN_DESCRIPTOR_SYMBOL "knnwb_plugin_descriptor"

/** What flows along a pipeline edge. */
typedef enum {
  KNNWB_KIND_NONE = 0,   /**< a step that only writes files */
  KNNWB_KIND_MATRIX,     /**< points: a KnnwbMatrix */
  KNNWB_KIND_GRAPH,      /**< an igraph_t over the rows of a matrix, with edge weights */
  KNNWB_KIND_CLUSTERING, /**< a membership vector over the vertices of a graph */
  KNNWB_KIND_COUNT
} KnnwbKind;

/** "matrix", "graph", "clustering", "none". */
static inline const char *knnwb_kind_to_string(KnnwbKind kind)
{
  static const char *const names[] = {"none", "matrix", "graph", "clustering"};
  return (unsigned)kind < KNNWB_KIND_COUNT ? names[kind] : "?";
}

typedef struct KnnwbValue KnnwbValue;

/**
 * One step's result. The host allocates it zeroed with kind set, weights and membership
 * initialised empty (igraph_vector_init(.., 0)), and frees it after the run; the step fills the
 * fields of its kind.
 */
struct KnnwbValue {
  KnnwbKind kind;
  /** MATRIX: the points (owned by the value; the step sets it). */
  KnnwbMatrix *matrix;
  /** GRAPH: the graph; the step initialises it and sets has_graph. */
  igraph_t graph;
  gboolean has_graph;
  /** GRAPH: one weight (a distance) per edge, in igraph edge order. */
  igraph_vector_t weights;
  /** CLUSTERING: cluster id (0-based) per vertex; n_clusters = max + 1. */
  igraph_vector_int_t membership;
  igraph_integer_t n_clusters;
  /**
   * GRAPH and CLUSTERING: the matrix value whose rows are the vertices (for labels and for
   * algorithms that need the points), or NULL. Borrowed: the host keeps every value until the run
   * ends.
   */
  const KnnwbValue *points;
  /** CLUSTERING: the graph that was clustered, or NULL. Borrowed like points. */
  const KnnwbValue *source_graph;
  /**
   * MATRIX in a `knnwb run` under mpirun whose rows are split between the ranks (block_total >
   * 0): matrix holds only this rank's rows, block_first .. block_first + matrix->n_rows - 1 of
   * block_total, the ranks' blocks in rank order. Only steps flagged KNNWB_STEP_SPLIT_ROWS get
   * such a value; the host gives them the ranks in KnnwbStepContext.group. block_labels: on rank
   * 0, every row's label (NULL when the rows have none); NULL on the other ranks.
   */
  size_t block_first;
  size_t block_total;
  const char *const *block_labels;
  /*< private >*/
  void *host_private;
};

/** Parameter types; values are checked by the host before any step runs. */
typedef enum {
  KNNWB_PARAM_INT,         /**< integer in [minimum, maximum] */
  KNNWB_PARAM_DOUBLE,      /**< real in [minimum, maximum] */
  KNNWB_PARAM_BOOLEAN,     /**< true/false/yes/no/1/0 */
  KNNWB_PARAM_STRING,      /**< any text */
  KNNWB_PARAM_CHOICE,      /**< one of the '|'-separated words in choices */
  KNNWB_PARAM_BYTES,       /**< a size with optional suffix K, M, G, T (powers of 1024) */
  KNNWB_PARAM_INPUT_FILE,  /**< a file that must exist; relative to the pipeline's directory */
  KNNWB_PARAM_OUTPUT_FILE, /**< a file to create; relative to the output directory */
} KnnwbParamType;

/** Describes one parameter of a step type. */
typedef struct {
  const char *name;
  KnnwbParamType type;
  /** The value when the pipeline gives none, as text; NULL makes the parameter required. */
  const char *default_value;
  /** INT/DOUBLE/BYTES: inclusive range; ignored when minimum > maximum. */
  double minimum;
  double maximum;
  /** CHOICE: the accepted words separated by '|', e.g. "directed|union|mutual". */
  const char *choices;
  const char *description;
} KnnwbParamSpec;

/** A checked parameter value, handed to the step in the order of its KnnwbParamSpec array. */
typedef struct {
  gint64 v_int;         /**< INT, BYTES; BOOLEAN as 0/1 */
  double v_double;      /**< DOUBLE (also set for INT) */
  const char *v_string; /**< the text after variable substitution; for INPUT_FILE the resolved
                             path; for OUTPUT_FILE the path the step must write (a temporary the
                             host renames into place when the whole run succeeds) */
  gboolean is_default;  /**< TRUE when the pipeline did not give the parameter */
} KnnwbParamValue;

/** Describes one input of a step type. */
typedef struct {
  const char *name;
  KnnwbKind kind;
  gboolean optional;
  const char *description;
} KnnwbPortSpec;

typedef struct KnnwbStepContext KnnwbStepContext;

/** Runs one step. Returns FALSE with error set on failure (the host then stops the run). */
typedef gboolean (*KnnwbStepRunFunc)(KnnwbStepContext *context, GError **error);

/** Checks a step's parameter values without any data (KnnwbStepType.check). */
typedef gboolean (*KnnwbStepCheckFunc)(const KnnwbParamValue *params, GError **error);

/** KnnwbStepType.flags. */
typedef enum {
  /**
   * Under mpirun the step runs on every rank with its matrix inputs split between the ranks (see
   * KnnwbValue.block_total) and computes on them together (a split kNN run over
   * KnnwbStepContext.group); its output must be complete on rank 0 only. A step without the flag
   * runs on rank 0 alone, with whole matrices.
   */
  KNNWB_STEP_SPLIT_ROWS = 1 << 0
} KnnwbStepFlags;

/** A step type a plugin registers. All pointers must stay valid while the plugin is loaded. */
typedef struct {
  const char *name;        /**< unique, e.g. "knn-graph" */
  const char *description; /**< one line */
  const KnnwbPortSpec *inputs;
  guint n_inputs;
  const KnnwbParamSpec *params;
  guint n_params;
  KnnwbKind output; /**< KNNWB_KIND_NONE for steps that only write files */
  KnnwbStepRunFunc run;
  guint flags; /**< KnnwbStepFlags */
  /**
   * Optional (NULL: none). Checks what the parameters alone can tell (n_params entries in spec
   * order, after the host's own checks of each): names of operators, counts, options that exclude
   * each other, a device list, an output name no writer knows. The host calls it when a pipeline
   * is validated (`knnwb validate`, and `knnwb run` before its first step), so that no run fails
   * on something validation could see; the step's run should parse with the same functions.
   * Errors: KNNWB_ERROR_INVALID_ARGUMENT with a message naming the parameter. (ABI 3.)
   */
  KnnwbStepCheckFunc check;
} KnnwbStepType;

/** What a running step gets from the host. */
struct KnnwbStepContext {
  const char *step_id;
  const KnnwbStepType *type;
  /** n_inputs entries in port order; NULL for an optional input the pipeline did not connect. */
  const KnnwbValue *const *inputs;
  /** n_params entries in spec order. */
  const KnnwbParamValue *params;
  /** The value to fill (kind = type->output), or NULL when the step has no output. */
  KnnwbValue *output;
  /** Host-wide settings from the command line (0 = library default). */
  int n_threads;
  size_t memory_bytes;
  /** Set non-zero by the host when the run must stop (SIGINT/SIGTERM); pass to long computations.
   */
  const volatile gint *cancel;
  /** Tile progress for long computations (may be NULL). */
  KnnwbProgressFunc progress;
  void *progress_data;
  /**
   * The ranks running this step together (a KNNWB_STEP_SPLIT_ROWS step whose matrix inputs are
   * split), or NULL: the step runs in this process alone. A kNN run the step starts is shared
   * between the ranks only when its KnnwbKnnOptions.group names them (there is no default group).
   */
  const KnnwbKnnGroup *group;
  /*< private >*/
  void *host_private;
};

/** Handed to a plugin's init to register its step types. */
typedef struct KnnwbPluginRegistrar KnnwbPluginRegistrar;
struct KnnwbPluginRegistrar {
  /**
   * Registers a step type. Fails (and the plugin is refused) when the name is already taken or
   * the description is malformed (a CHOICE without choices, an invalid default...).
   */
  gboolean (*add_step)(KnnwbPluginRegistrar *registrar, const KnnwbStepType *type, GError **error);
  /*< private >*/
  void *host_private;
};

/** The descriptor every plugin exports. abi_version must stay the first member. */
typedef struct {
  guint32 abi_version; /**< KNNWB_PLUGIN_ABI_VERSION at build time */
  const char *name;    /**< unique plugin name, e.g. "knn" */
  const char *version;
  const char *description;
  /** Registers the step types; FALSE with error set refuses the plugin. */
  gboolean (*init)(KnnwbPluginRegistrar *registrar, GError **error);
} KnnwbPluginDescriptor;

/** Defines the exported descriptor. Use once per plugin, at file scope. */
#define KNNWB_PLUGIN_DEFINE(name, version, description, init)                                      \
  G_MODULE_EXPORT const KnnwbPluginDescriptor knnwb_plugin_descriptor = {                          \
      KNNWB_PLUGIN_ABI_VERSION, name, version, description, init}

G_END_DECLS

#endif
