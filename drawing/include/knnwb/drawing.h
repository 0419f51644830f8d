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

/**
 * The radial layout of a neighbourhood into coordinates (an initialised matrix, resized to n x 2):
 * the focus vertices in the centre (on a small circle when several; vertex 0 when focus is NULL or
 * empty), the vertices one hop away (edges in either direction) on a ring in the order of their
 * distance to the focus (nearest at the top, then clockwise), each vertex further out on the next
 * ring in the wedge of its parent (its neighbour one hop closer with the shortest edge), several
 * rings where a wedge is crowded; unreached vertices on an outer ring. Neighbours on a ring are
 * 2.5 node_size apart, rings 4 to 6 node_size. distances: per edge (NULL: all 1). hops (may be
 * NULL: found breadth first over edges in either direction) gives each vertex's ring, 0 for the
 * focus (a neighbourhood's own order, found along its search's direction).
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (a focus out of range, distances of the wrong length),
 * KNNWB_ERROR_IGRAPH. O(n log n + m) time, O(n) memory. Deterministic.
 */
gboolean knnwb_drawing_layout_radial(const igraph_t *graph, const igraph_vector_t *distances,
                                     const igraph_vector_int_t *focus, const int *hops,
                                     double node_size, igraph_matrix_t *coordinates,
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
  double weight;  /**< the GML's `weight` (a similarity), NaN without */
  float distance; /**< the GML's `distance`, NaN without */
  float r;        /**< the GML's `r` (a correlation), NaN without */
} KnnwbDrawingEdge;

/** A scalar node key of the GML other than id, label and focus (`cluster`, an annotation column),
 * one value per node: a string in texts, or a number in numbers (NaN and a NULL text when the node
 * has no value). */
typedef struct {
  char *name;
  GPtrArray *texts; /**< char *, owned; NULL where the value is a number or missing */
  GArray *numbers;  /**< double; NaN where the value is a string or missing */
} KnnwbDrawingAttribute;

/** A new attribute column with no values. Never fails. O(1). */
KnnwbDrawingAttribute *knnwb_drawing_attribute_new(const char *name);
/** Frees column and its values; NULL is fine. O(values). */
void knnwb_drawing_attribute_free(KnnwbDrawingAttribute *column);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbDrawingAttribute, knnwb_drawing_attribute_free)

/** What the render command draws: nodes and edges as a laid-out GML describes them (read by
 * knnwb_formats_read_gml), with the nodes' other scalar keys as attributes. */
typedef struct {
  GArray *nodes;         /**< KnnwbDrawingNode */
  GArray *edges;         /**< KnnwbDrawingEdge */
  GPtrArray *attributes; /**< KnnwbDrawingAttribute *, each as long as nodes */
  gboolean directed;
} KnnwbDrawing;

/** The attribute called name, or NULL. O(attributes). */
const KnnwbDrawingAttribute *knnwb_drawing_attribute(const KnnwbDrawing *drawing, const char *name);

/** An empty drawing (no nodes, no edges, undirected). Never fails. O(1). */
KnnwbDrawing *knnwb_drawing_new(void);
/** Frees drawing and its labels; NULL is fine. O(nodes). */
void knnwb_drawing_free(KnnwbDrawing *drawing);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbDrawing, knnwb_drawing_free)

/** Picture formats. */
typedef enum { KNNWB_PICTURE_PNG, KNNWB_PICTURE_SVG, KNNWB_PICTURE_PDF } KnnwbPictureFormat;

/* ---------------------------------------------------------------------------------------------- */
/* Colours from attributes                                                                        */
/* ---------------------------------------------------------------------------------------------- */

/** One legend row: a category, its colour and how many nodes have it. */
typedef struct {
  char *text;
  double rgb[3];
  guint count;
} KnnwbLegendEntry;

/** The fill of every node and what the colours mean. */
typedef struct {
  char *name;       /**< the attribute coloured by; NULL: the GML's own fills, no legend */
  double *rgb;      /**< 3 per node */
  guint *category;  /**< per node its legend row (categorical; NULL otherwise) */
  GArray *legend;   /**< KnnwbLegendEntry, in legend order (last "(none)" for missing values) */
  guint categories; /**< distinct values (categorical) */
  gboolean numeric; /**< a colour scale from lo to hi instead of categories */
  double lo, hi;
} KnnwbNodeColours;

/**
 * Colours drawing's nodes by attribute name (NULL: keep the GML's fills). Strings that are all
 * numbers ("44.5") count as numbers. Categories (any other string value, the attribute
 * `cluster`, or at most 20 distinct whole numbers) get a palette of
 * distinguishable colours in legend order (numeric codes by value, words by count); other numbers
 * a viridis scale from their minimum to their maximum; missing values grey. Errors:
 * KNNWB_ERROR_INVALID_ARGUMENT (no such attribute; the message lists those there are). Clear out
 * with knnwb_drawing_node_colours_clear (also after an error). O(n log n).
 */
gboolean knnwb_drawing_colour_nodes(const KnnwbDrawing *drawing, const char *name,
                                    KnnwbNodeColours *out, GError **error);
/** Frees what colours holds; safe twice. */
void knnwb_drawing_node_colours_clear(KnnwbNodeColours *colours);
/** The index-th categorical colour (20 distinct ones, then golden-angle hues). O(1). */
void knnwb_drawing_palette_colour(guint index, double rgb[3]);
/** The colour scale at t in [0, 1] (viridis). O(1). */
void knnwb_drawing_scale_colour(double t, double rgb[3]);

/* ---------------------------------------------------------------------------------------------- */
/* Pictures                                                                                       */
/* ---------------------------------------------------------------------------------------------- */

/** What a picture shows and how. Initialise with knnwb_drawing_render_options_init(). */
typedef struct {
  int width;            /**< pixels (PNG) or points; default 1200 */
  guint label_limit;    /**< label every node up to this many; else this many hubs; 150 */
  gboolean draw_edges;  /**< default TRUE */
  const char *color_by; /**< a node attribute; NULL: `cluster` when present, else GML fills */
  const char *title;    /**< NULL: the name and what the colours mean; "": no title */
  const char *name;     /**< the input's name for the default title; may be NULL */
  gboolean density;     /**< a density image of the layout whatever the size */
  guint density_above;  /**< a density image above this many nodes; default 20000 */
} KnnwbRenderOptions;

/** Fills options with the defaults listed in KnnwbRenderOptions. O(1). */
void knnwb_drawing_render_options_init(KnnwbRenderOptions *options);

/** A placed label: its node and its box in pixels (x0 < x1, y0 < y1); leader: away from its node,
 * joined to it by a thin line. */
typedef struct {
  guint node;
  double x0, y0, x1, y1;
  gboolean leader;
} KnnwbLabelBox;

/** Where everything of a picture goes, computed before drawing (and read by tests). */
typedef struct {
  int width, height;
  double scale, offset_x, offset_y; /**< pixel = offset + scale * GML coordinate */
  double node_scale;                /**< node sizes (w) to pixels */
  double area[4];                   /**< where nodes are drawn: x0 y0 x1 y1 in pixels */
  double legend_box[4];             /**< the legend: x0 y0 x1 y1 (all 0 without one) */
  double title_size;                /**< title font size in pixels (0 without a title) */
  char *title;                      /**< NULL without one */
  KnnwbNodeColours colours;
  GArray *labels;      /**< KnnwbLabelBox, placed in priority order, never overlapping */
  GArray *edge_labels; /**< KnnwbLabelBox of the focus's edges (node: the edge's index), never
                            overlapping a node label or each other */
  guint legend_rows;   /**< legend entries shown (the rest summed in one row) */
  gboolean density;    /**< drawn as a density image */
} KnnwbDrawingPlan;

/**
 * Plans the picture of drawing: the frame (nodes, their discs and labels inside a margin, a title
 * band above, a legend panel at the right), the node colours (options->color_by), and the labels:
 * tried in priority order (focus, their direct neighbours, then by degree; all nodes when there
 * are at most label_limit, else focus, neighbours and label_limit hubs) right, left, above or
 * below the node, each kept only where it overlaps no label placed before, the title or the legend
 * and stays inside the picture; the focus's and its neighbours' labels may move two rings farther
 * out (with a leader line) before they are left out. Then each edge of a focus (at most 100) gets
 * its `r` (else `d` for its distance) along its middle where that overlaps no label. Errors: those
 * of knnwb_drawing_colour_nodes; KNNWB_ERROR_INVALID_ARGUMENT without cairo. O(n log n + labels^2)
 * time besides text measurement, O(n) memory.
 */
KnnwbDrawingPlan *knnwb_drawing_plan_new(const KnnwbDrawing *drawing,
                                         const KnnwbRenderOptions *options, GError **error);
/** Frees plan; NULL is fine. */
void knnwb_drawing_plan_free(KnnwbDrawingPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbDrawingPlan, knnwb_drawing_plan_free)

/**
 * Draws drawing into path (written atomically) as planned by knnwb_drawing_plan_new with options:
 * edges under the nodes, darker and wider for higher weights (the GML's `weight`, else its edge
 * width), with arrows when directed; nodes in their colours; focus nodes as large red hexagons;
 * labels with a white halo; the title; the legend (a swatch, the value and its count per category,
 * or the colour scale with its ends). Above options->density_above nodes (or with
 * options->density) the layout is drawn as a density image instead: nodes binned per pixel,
 * edges faded, clusters outlined and named at their centre. Checks cancel every 64 edges and
 * 4,096 nodes; progress (may be NULL) gets the shapes drawn of their total every 4,096.
 * Errors: KNNWB_ERROR_IO, KNNWB_ERROR_CANCELLED, KNNWB_ERROR_INVALID_ARGUMENT (no cairo; an
 * unknown --color-by attribute). Complexity: O(nodes + edges) besides the label placement and
 * cairo's own; memory: the picture's pixels.
 */
gboolean knnwb_drawing_render_picture(const KnnwbDrawing *drawing, const char *path,
                                      KnnwbPictureFormat format, const KnnwbRenderOptions *options,
                                      const volatile gint *cancel, KnnwbProgressFunc progress,
                                      void *progress_data, GError **error);

/**
 * knnwb_drawing_render_picture with the default options but width, label_limit and draw_edges.
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
