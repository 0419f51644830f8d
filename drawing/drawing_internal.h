/* drawing/: what its files share (layout.c, layout_child.c, spacing.c, appearance.c); not
 * installed. */
#ifndef KNNWB_DRAWING_INTERNAL_H
#define KNNWB_DRAWING_INTERNAL_H

#include <knnwb/drawing.h>
#include <knnwb/error.h>

G_BEGIN_DECLS

/** The spacing of drawn neighbours: a low quantile of each vertex's shortest drawn edge (the mean
 * spacing over the bounding box without a usable edge; 0 without coordinates or memory).
 * O(n log n + m). */
double knnwb_drawing_layout_spacing(const igraph_t *graph, const igraph_matrix_t *coordinates);

/**
 * The coordinates a graph writer draws at: options->coordinates when given, else the layout the
 * options ask for computed into layout (initialised and destroyed by the caller), else NULL
 * (layout none, or an empty graph). Errors: those of knnwb_drawing_layout_run.
 */
gboolean knnwb_drawing_layout_for_options(const igraph_t *graph, const igraph_vector_t *weights,
                                          const KnnwbDrawingOptions *options,
                                          const KnnwbWriteControl *control, igraph_matrix_t *layout,
                                          const igraph_matrix_t **coordinates, GError **error);

/** Called by knnwb_drawing_layout_isolated every 10 ms with the layout's interruption polls so
 * far; TRUE stops the layout. */
typedef gboolean (*KnnwbDrlPoll)(uint64_t iterations, void *data);

/**
 * igraph_layout_drl (layout DRL, drl_options) or igraph_layout_umap (layout UMAP, umap_epochs,
 * min_dist 0.1, sampling 0.3), use_seed false, in a forked child that is killed within 10 ms of
 * poll returning TRUE (layout_child.c says why a process). *isolated is FALSE when no child could
 * be started (no memory to share, no process to spare): nothing ran, and the caller runs DrL in
 * its own process. Returns IGRAPH_SUCCESS with coordinates n x 2, IGRAPH_INTERRUPTED when poll
 * stopped it, DrL's own error code, or IGRAPH_FAILURE when the child died without a result.
 * Costs one fork (page tables of the caller) and 16 bytes per vertex of shared memory besides
 * DrL's own O(iterations * (n + m)) time.
 */
igraph_error_t knnwb_drawing_layout_isolated(const igraph_t *graph, const igraph_vector_t *weights,
                                             KnnwbLayout layout,
                                             const igraph_layout_drl_options_t *drl_options,
                                             igraph_integer_t umap_epochs, KnnwbDrlPoll poll,
                                             void *poll_data, igraph_matrix_t *coordinates,
                                             gboolean *isolated);

/** A node's disc radius in pixels in plan's picture (at least 1.5; the focus at least 7). */
double knnwb_drawing_plan_radius(const KnnwbDrawingPlan *plan, const KnnwbDrawingNode *node);
/** The text on an edge of the focus: "r 0.83" from its r, else "d 0.17" from its distance; FALSE
 * when it has neither. */
gboolean knnwb_drawing_edge_label(const KnnwbDrawingEdge *edge, char *text, size_t size);
/** The font size of edge labels in pixels. */
#define KNNWB_EDGE_LABEL_SIZE 9.0
/** A node's label font size in pixels in plan's picture. */
double knnwb_drawing_plan_label_size(const KnnwbDrawingPlan *plan, const KnnwbDrawingNode *node);

#ifdef KNNWB_HAVE_CAIRO
#include <cairo.h>
/**
 * Draws drawing as a density image into cr per plan (render_density.c): nodes binned per pixel
 * over the plan's area, coloured by the plan's colours and darker where denser; the first m edges
 * faded under them; categories outlined (hull of their central nodes) and named at their centre.
 * FALSE when cancel was raised (checked every 65,536 nodes or edges). O(n + m + pixels).
 */
gboolean knnwb_drawing_render_density(cairo_t *cr, const KnnwbDrawing *drawing,
                                      const KnnwbDrawingPlan *plan, guint m,
                                      const volatile gint *cancel);
#endif

G_END_DECLS

#endif
