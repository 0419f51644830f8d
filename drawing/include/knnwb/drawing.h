/* How a graph looks: the drawing read from a laid-out GML, and its rendering with cairo (PNG, SVG, PDF). */
#ifndef KNNWB_DRAWING_H
#define KNNWB_DRAWING_H

#include <stdint.h>
#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  double x, y, w, h;
  double fill[3], outline[3];
  double font_size;
  gboolean hexagon, focus;
  int has_position; /* bit 0: x, bit 1: y */
  char *label;
} KnnwbDrawingNode;

typedef struct {
  guint source, target; /* node indices */
  double colour[3];
  double width;
} KnnwbDrawingEdge;

/** What the render command draws: nodes and edges as the GML describes them. */
typedef struct {
  GArray *nodes; /* KnnwbDrawingNode */
  GArray *edges; /* KnnwbDrawingEdge */
  gboolean directed;
} KnnwbDrawing;

/**
 * Reads a GML file (knnwb's or any with `graphics [ x y ]` on every node).
 * Errors: KNNWB_ERROR_IO, KNNWB_ERROR_PARSE "path:line: message", KNNWB_ERROR_INVALID_DATA (a node
 * without coordinates). Complexity: O(file size); the file is read whole.
 */
KnnwbDrawing *knnwb_render_read_gml(const char *path, GError **error);
void knnwb_render_drawing_free(KnnwbDrawing *drawing);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbDrawing, knnwb_render_drawing_free)

/** Progress of a drawing: done of total (edges, then nodes). */
typedef void (*KnnwbRenderProgress)(uint64_t done, uint64_t total, void *data);

/** Picture formats. */
typedef enum { KNNWB_PICTURE_PNG, KNNWB_PICTURE_SVG, KNNWB_PICTURE_PDF } KnnwbPictureFormat;

/**
 * Draws drawing into path (written atomically) width pixels (points for SVG/PDF) wide, the height
 * from the drawing's aspect ratio: edges under the nodes in their GML colour (translucent), nodes
 * in their fill, focus nodes last as large red hexagons with their labels; all labels when there
 * are at most label_limit nodes; edges only when draw_edges. Checks cancel every 64 edges and 4,096
 * nodes; progress (may be NULL) gets edges and nodes drawn of their total every 4,096.
 * Errors: KNNWB_ERROR_IO, KNNWB_ERROR_CANCELLED, KNNWB_ERROR_INVALID_ARGUMENT (no cairo support).
 */
gboolean knnwb_render_draw(const KnnwbDrawing *drawing, const char *path, KnnwbPictureFormat format,
                           int width, guint label_limit, gboolean draw_edges,
                           const volatile gint *cancel, KnnwbRenderProgress progress,
                           void *progress_data, GError **error);

G_END_DECLS

#endif
