/* How a graph looks: 2-D layouts, the appearance the GML and GraphML writers give it (node sizes,
 * cluster colours, edge widths, similarity weights), the drawing model that `knnwb render` reads
 * back from a laid-out GML, and its rendering with cairo (PNG, SVG, PDF). */
#ifndef KNNWB_DRAWING_H
#define KNNWB_DRAWING_H

#include <glib.h>
#include <knnwb/enum_names.h>
#include <igraph.h>
#include <stdint.h>
#include <knnwb/write_control.h>

G_BEGIN_DECLS

/* ---------------------------------------------------------------------------------------------- */
/* Layouts                                                                                        */
/* ---------------------------------------------------------------------------------------------- */

/** How nodes get coordinates. */
typedef enum {
  KNNWB_LAYOUT_AUTO, /**< FR up to fr_max_vertices, none above (never minutes by default) */
  KNNWB_LAYOUT_FR,   /**< igraph Fruchterman-Reingold, grid variant above 1000 vertices */
  KNNWB_LAYOUT_DRL,  /**< igraph_layout_drl */
  KNNWB_LAYOUT_NONE, /**< no coordinates (yEd piles the nodes up; use its own layouts) */
  KNNWB_LAYOUT_UMAP  /**< igraph_layout_umap from the kNN distances (as scanpy) */
} KnnwbLayout;

/* The names of KnnwbLayout (<knnwb/enum_names.h>). */
/* clang-format off */
#define KNNWB_LAYOUT_NAMES(X)                                                                      \
  X(KNNWB_LAYOUT_AUTO, "auto")                                                                     \
  X(KNNWB_LAYOUT_FR, "fr")                                                                         \
  X(KNNWB_LAYOUT_DRL, "drl")                                                                       \
  X(KNNWB_LAYOUT_UMAP, "umap")                                                                     \
  X(KNNWB_LAYOUT_NONE, "none")
/* clang-format on */
extern const KnnwbEnumTable knnwb_layout_table;

/** Parses "auto", "fr", "drl", "umap", "none" (any case). Errors: KNNWB_ERROR_INVALID_ARGUMENT.
 * O(1). */
gboolean knnwb_drawing_layout_from_string(const char *name, KnnwbLayout *layout, GError **error);
/** The name knnwb_drawing_layout_from_string() accepts ("unknown" out of range). O(1). */
const char *knnwb_drawing_layout_to_string(KnnwbLayout layout);

/** The layout AUTO stands for at n_vertices (other layouts are returned as they are). O(1). */
KnnwbLayout knnwb_drawing_layout_choose(KnnwbLayout layout, igraph_integer_t n_vertices,
                                        igraph_integer_t fr_max_vertices);

/**
 * Computes a 2-D layout of graph into coordinates (an initialised matrix, resized to n x 2),
 * centred on the origin and scaled so that drawn neighbours inside dense clusters are two node
 * sizes apart. Weights (distances, may be NULL) make near neighbours pull harder (UMAP uses them
 * as distances). Deterministic for a given seed: igraph's default RNG is replaced by a seeded one
 * for the call only. control (may be NULL) gets progress per layout iteration and stops the layout
 * within one iteration of its cancel flag, through igraph's (process-wide) interruption handler;
 * its thread count is not used. *used (may be NULL) receives the layout actually run.
 * Errors: KNNWB_ERROR_IGRAPH, KNNWB_ERROR_CANCELLED, KNNWB_ERROR_INVALID_ARGUMENT (layout NONE, or
 * AUTO resolving to NONE; weights of the wrong length; UMAP on a graph with self-loops, repeated
 * edges or isolated vertices). Complexity: FR O(iterations * n^2) below 1000 vertices, grid FR
 * about O(iterations * (n + m)), UMAP O(epochs * m), DrL O(iterations * n); memory O(n + m).
 */
gboolean knnwb_drawing_layout_run(const igraph_t *graph, const igraph_vector_t *weights,
                                  KnnwbLayout layout, igraph_integer_t fr_max_vertices,
                                  unsigned long seed, double node_size,
                                  const KnnwbWriteControl *control, igraph_matrix_t *coordinates,
                                  KnnwbLayout *used, GError **error);

/** knnwb_drawing_layout_run without control and without *used. */
gboolean knnwb_drawing_layout(const igraph_t *graph, const igraph_vector_t *weights,
                              KnnwbLayout layout, igraph_integer_t fr_max_vertices,
                              unsigned long seed, double node_size, igraph_matrix_t *coordinates,
                              GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* Appearance                                                                                     */
/* ---------------------------------------------------------------------------------------------- */

/** How a written graph looks (the yEd GML and GraphML writers). Initialise with
 * knnwb_drawing_options_init(). */
typedef struct {
  KnnwbLayout layout;                 /**< default AUTO */
  igraph_integer_t fr_max_vertices;   /**< AUTO: FR up to this, none above; default 20000 */
  unsigned long seed;                 /**< layout RNG seed; default 42 */
  const igraph_matrix_t *coordinates; /**< n x 2 precomputed coordinates; overrides layout */
  const igraph_vector_int_t *focus; /**< vertex ids to highlight (the "dummy probe"); may be NULL */
  double node_size;                 /**< node width/height; default 30 */
  double font_size;                 /**< label font size; default 12 */
  double edge_width;                /**< default 1 */
} KnnwbDrawingOptions;

/** Fills options with the defaults listed in KnnwbDrawingOptions. Never fails. O(1). */
void knnwb_drawing_options_init(KnnwbDrawingOptions *options);

/** Sizes and scales of one drawn graph. */
typedef struct {
  double node_size, font_size, edge_width;
  double distance_lo, distance_hi; /**< finite range of the distances (inf, -inf without) */
  double distance_shift;           /**< added before the similarity transform (>= 0) */
} KnnwbAppearance;

/**
 * Derives the appearance of graph drawn at coordinates (may be NULL: not drawn) with options:
 * nodes at most half the spacing of drawn neighbours wide (options->node_size when our own layout
 * made the coordinates), the font scaled with them, the distance range of weights (may be NULL).
 * Never fails: without memory for the spacing the nodes keep options->node_size.
 * O(n log n + m) time, O(n) memory.
 */
void knnwb_drawing_appearance_init(KnnwbAppearance *appearance, const igraph_t *graph,
                                   const igraph_vector_t *weights,
                                   const KnnwbDrawingOptions *options,
                                   const igraph_matrix_t *coordinates);
/** An edge's similarity weight: 1 / (1 + distance) (shifted when some distance is negative).
 * O(1). */
double knnwb_drawing_similarity(const KnnwbAppearance *appearance, double distance);
/** An edge's width: 3x the base for the nearest pair down to 0.5x for the farthest. O(1). */
double knnwb_drawing_edge_width(const KnnwbAppearance *appearance, double distance);
/** "#RRGGBB" of cluster id (cluster >= 0; golden-angle hues, three tiers, so near ids differ and
 * ids never repeat a colour exactly). O(1). */
void knnwb_drawing_cluster_colour(igraph_integer_t cluster, char hex[8]);

/**
 * What a graph writer needs before its first byte: the options (the caller's or the defaults), the
 * coordinates (given, computed by the layout the options ask for, or none), the appearance derived
 * from them and the focus flags (NULL when the options name no focus). Holds the defaults it may
 * point to: do not copy it after init.
 */
typedef struct {
  KnnwbDrawingOptions defaults;
  const KnnwbDrawingOptions *options;
  igraph_matrix_t layout;             /**< owned; coordinates points here when computed */
  const igraph_matrix_t *coordinates; /**< NULL when nothing is drawn */
  KnnwbAppearance appearance;
  gboolean *focus; /**< n flags or NULL */
} KnnwbDrawingSetup;

/**
 * Fills setup for graph (weights: distances, may be NULL; options NULL = defaults; the focus ids
 * and coordinates of options must fit the graph, which the writers check first). Runs the layout:
 * the long phase, cancellable and reported through control (may be NULL). path only names the
 * output in messages. Errors: KNNWB_ERROR_NO_MEMORY (naming path), those of
 * knnwb_drawing_layout_run. On failure nothing is left to clear. O(layout) time, O(n) memory.
 */
gboolean knnwb_drawing_setup_init(KnnwbDrawingSetup *setup, const char *path, const igraph_t *graph,
                                  const igraph_vector_t *weights,
                                  const KnnwbDrawingOptions *options,
                                  const KnnwbWriteControl *control, GError **error);
/** Frees what setup holds; safe to call twice. */
void knnwb_drawing_setup_clear(KnnwbDrawingSetup *setup);

/* ---------------------------------------------------------------------------------------------- */
/* The drawing model and its renderer */
/* ---------------------------------------------------------------------------------------------- */

typedef struct {
  double x, y, w, h;
  double fill[3], outline[3];
  double font_size;
  gboolean hexagon, focus;
  int has_position; /**< bit 0: x, bit 1: y */
  char *label;
} KnnwbDrawingNode;

typedef struct {
  guint source, target; /**< node indices */
  double colour[3];
  double width;
} KnnwbDrawingEdge;

/** What the render command draws: nodes and edges as a laid-out GML describes them (read by
 * knnwb_formats_read_gml). */
typedef struct {
  GArray *nodes; /**< KnnwbDrawingNode */
  GArray *edges; /**< KnnwbDrawingEdge */
  gboolean directed;
} KnnwbDrawing;

/** An empty drawing (no nodes, no edges, undirected). Never fails. O(1). */
KnnwbDrawing *knnwb_drawing_new(void);
/** Frees drawing and its labels; NULL is fine. O(nodes). */
void knnwb_drawing_free(KnnwbDrawing *drawing);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbDrawing, knnwb_drawing_free)

/** Picture formats. */
typedef enum { KNNWB_PICTURE_PNG, KNNWB_PICTURE_SVG, KNNWB_PICTURE_PDF } KnnwbPictureFormat;

/**
 * Draws drawing into path (written atomically) width pixels (points for SVG/PDF) wide, the height
 * from the drawing's aspect ratio: edges under the nodes in their GML colour (translucent), nodes
 * in their fill, focus nodes last as large red hexagons with their labels; all labels when there
 * are at most label_limit nodes; edges only when draw_edges. Checks cancel every 64 edges and 4,096
 * nodes; progress (may be NULL) gets edges and nodes drawn of their total (edges first) every
 * 4,096.
 * Errors: KNNWB_ERROR_IO, KNNWB_ERROR_CANCELLED, KNNWB_ERROR_INVALID_ARGUMENT (no cairo support).
 * Complexity: O(nodes + edges) time besides cairo's own; memory: the picture's pixels (PNG).
 */
gboolean knnwb_drawing_render(const KnnwbDrawing *drawing, const char *path,
                              KnnwbPictureFormat format, int width, guint label_limit,
                              gboolean draw_edges, const volatile gint *cancel,
                              KnnwbProgressFunc progress, void *progress_data, GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* Scatter plots of a row against the phenotype across samples (the seed's Figure 3b-d). */

/**
 * One scatter plot: point i at (x[i], y[i]) (non-finite points are left out), coloured by
 * groups[i] (a category; NULL or an empty or NULL entry: one dark blue) with a legend of the
 * categories, title on top, x_label under the x axis, y_label beside the y axis.
 *
 * Geometry, in pixels of a width x height picture: the plot area spans x from
 * KNNWB_SCATTER_LEFT to width - KNNWB_SCATTER_RIGHT and y from KNNWB_SCATTER_TOP to
 * height - KNNWB_SCATTER_BOTTOM; each axis runs from its smallest to its largest value widened by
 * 5 % of the span on both sides (a span of 0: the value +- 0.5), y growing upwards. Points are
 * discs of radius KNNWB_SCATTER_RADIUS centred where their values fall.
 */
typedef struct {
  const char *title;
  const char *x_label;
  const char *y_label;
  const double *x;
  const double *y;
  size_t n;
  const char *const *groups;
  int width;  /**< 0: 480 */
  int height; /**< 0: 360 */
} KnnwbScatter;

enum {
  KNNWB_SCATTER_LEFT = 70,
  KNNWB_SCATTER_RIGHT = 20,
  KNNWB_SCATTER_TOP = 48,
  KNNWB_SCATTER_BOTTOM = 50,
  KNNWB_SCATTER_RADIUS = 4
};

/** The colour of a scatter's point of no group (RGB 0..255): dark blue. */
#define KNNWB_SCATTER_POINT_RGB 0x1F, 0x4E, 0x9A

/**
 * Writes scatter as a PNG at path (atomically). Group colours are the cluster palette's
 * (knnwb_drawing_cluster_colour) in order of first appearance.
 * Errors: KNNWB_ERROR_IO, KNNWB_ERROR_INVALID_ARGUMENT (no cairo support; a size under 160 x 120).
 * Complexity: O(n) besides cairo's own; memory: the picture's pixels.
 */
gboolean knnwb_drawing_scatter_png(const char *path, const KnnwbScatter *scatter, GError **error);

/**
 * Writes the overview of n hits as a PNG at path (atomically): one horizontal bar per hit from 0 to
 * its signed r on a -1 .. 1 axis (positive red, negative blue), labelled, in the order given, under
 * title. width 0: 480; the height follows n. Errors: as knnwb_drawing_scatter_png. O(n).
 */
gboolean knnwb_drawing_r_panel_png(const char *path, const char *title, const char *const *labels,
                                   const double *r, size_t n, int width, GError **error);

G_END_DECLS

#endif
