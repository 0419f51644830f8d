/* Draws a KnnwbDrawing with cairo: edges, then nodes, then the focus nodes and labels on top. */
#include <math.h>
#include <stdio.h>
#include <knnwb/atomic_file.h>
#include <knnwb/error.h>
#include <knnwb/drawing.h>

#ifdef KNNWB_HAVE_CAIRO
#include <cairo.h>
#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <fontconfig/fontconfig.h>

static cairo_status_t knnwb_drawing_render_write(void *closure, const unsigned char *data,
                                                 unsigned int length)
{
  return fwrite(data, 1, length, closure) == length ? CAIRO_STATUS_SUCCESS
                                                    : CAIRO_STATUS_WRITE_ERROR;
}

static void knnwb_drawing_render_shape(cairo_t *cr, double x, double y, double radius,
                                       gboolean hexagon)
{
  if (!hexagon) {
    cairo_new_sub_path(cr);
    cairo_arc(cr, x, y, radius, 0, 2 * G_PI);
    return;
  }
  for (int i = 0; i < 6; i++) {
    double angle = G_PI / 3 * i;
    if (i == 0)
      cairo_move_to(cr, x + radius * cos(angle), y + radius * sin(angle));
    else
      cairo_line_to(cr, x + radius * cos(angle), y + radius * sin(angle));
  }
  cairo_close_path(cr);
}

/* One rendering under way: the cairo context, the drawing's placement and the bookkeeping of
 * cancellation and progress shared by the passes. */
typedef struct {
  cairo_t *cr;
  const KnnwbDrawingNode *nodes;
  guint n;
  double scale;      /* drawing units to pixels */
  double node_scale; /* node sizes to pixels */
  const volatile gint *cancel;
  KnnwbProgressFunc progress;
  void *progress_data;
  uint64_t drawn, total;
  gboolean cancelled;
} KnnwbRenderPass;

/* The picture's height and the drawing's scale and offset: the height follows the drawing's
 * shape, between a quarter and the whole width. */
static void knnwb_drawing_render_frame(const KnnwbDrawingNode *nodes, guint n, int width,
                                       int *height, double *scale, double *offset_x,
                                       double *offset_y)
{
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (guint v = 0; v < n; v++) {
    x0 = MIN(x0, nodes[v].x);
    x1 = MAX(x1, nodes[v].x);
    y0 = MIN(y0, nodes[v].y);
    y1 = MAX(y1, nodes[v].y);
  }
  if (n == 0)
    x0 = y0 = 0, x1 = y1 = 1;
  double span_x = MAX(x1 - x0, 1e-9), span_y = MAX(y1 - y0, 1e-9);
  double margin = 0.03 * width + 8;
  double aspect = CLAMP(span_y / span_x, 0.25, 1.0);
  *height = (int)lround((width - 2 * margin) * aspect + 2 * margin);
  *scale = MIN((width - 2 * margin) / span_x, (*height - 2 * margin) / span_y);
  *offset_x = (width - *scale * span_x) / 2 - *scale * x0;
  *offset_y = (*height - *scale * span_y) / 2 - *scale * y0;
}

/* Edges grouped by colour and stroked 64 at a time: 100,000 separate strokes take seconds, one
 * path of all of them longer still (cairo tessellates its crossings). Many edges get fainter.
 * The cancel flag is read every 64 edges: 200,000 edges of one colour took 14 s, and a signal
 * waited for all of them when it was read once per colour. */
static void knnwb_drawing_render_edges(KnnwbRenderPass *pass, const KnnwbDrawingEdge *edges,
                                       guint m)
{
  cairo_t *cr = pass->cr;
  const KnnwbDrawingNode *nodes = pass->nodes;
  double alpha = CLAMP(20000.0 / MAX(m, 1u), 0.08, 0.45);
  g_autoptr(GHashTable) groups =
      g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
  for (guint e = 0; e < m; e++) {
    const double *c = edges[e].colour;
    guint key = ((guint)lround(c[0] * 255) << 16) | ((guint)lround(c[1] * 255) << 8) |
                (guint)lround(c[2] * 255);
    GArray *group = g_hash_table_lookup(groups, GUINT_TO_POINTER(key + 1));
    if (group == NULL) {
      group = g_array_new(FALSE, FALSE, sizeof(guint));
      g_hash_table_insert(groups, GUINT_TO_POINTER(key + 1), group);
    }
    g_array_append_val(group, e);
  }
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
  cairo_set_antialias(cr, m > 20000 ? CAIRO_ANTIALIAS_FAST : CAIRO_ANTIALIAS_DEFAULT);
  GHashTableIter iter;
  gpointer key, value;
  g_hash_table_iter_init(&iter, groups);
  while (!pass->cancelled && g_hash_table_iter_next(&iter, &key, &value)) {
    GArray *group = value;
    double width = 0.0;
    for (guint i = 0; i < group->len; i++)
      width += edges[g_array_index(group, guint, i)].width;
    const double *c = edges[g_array_index(group, guint, 0)].colour;
    cairo_set_source_rgba(cr, c[0], c[1], c[2], alpha);
    cairo_set_line_width(cr, MAX(0.4, width / group->len * pass->node_scale * 0.08));
    for (guint i = 0; i < group->len; i++) {
      const KnnwbDrawingEdge *edge = &edges[g_array_index(group, guint, i)];
      const KnnwbDrawingNode *a = &nodes[edge->source], *b = &nodes[edge->target];
      cairo_move_to(cr, a->x * pass->scale, a->y * pass->scale);
      cairo_line_to(cr, b->x * pass->scale, b->y * pass->scale);
      if (i % 64 == 63 || i + 1 == group->len) {
        cairo_stroke(cr);
        if (pass->cancel != NULL && *pass->cancel) {
          pass->cancelled = TRUE;
          break;
        }
      }
      if ((++pass->drawn & 4095) == 0 && pass->progress != NULL)
        pass->progress(pass->drawn, pass->total, pass->progress_data);
    }
  }
  cairo_set_antialias(cr, CAIRO_ANTIALIAS_DEFAULT);
}

/* Nodes as the GML sizes them, but never below a pixel-and-a-half radius (a picture of 12,000
 * probes must still show where they are); the focus nodes last, on top. */
static void knnwb_drawing_render_nodes(KnnwbRenderPass *pass)
{
  cairo_t *cr = pass->cr;
  for (int round = 0; round < 2 && !pass->cancelled; round++)
    for (guint v = 0; v < pass->n; v++) {
      const KnnwbDrawingNode *node = &pass->nodes[v];
      if (node->focus != (round == 1))
        continue;
      double radius = MAX(1.5, 0.5 * node->w * pass->node_scale);
      if (node->focus)
        radius = MAX(radius, 7.0);
      knnwb_drawing_render_shape(cr, node->x * pass->scale, node->y * pass->scale, radius,
                                 node->hexagon);
      cairo_set_source_rgb(cr, node->fill[0], node->fill[1], node->fill[2]);
      if (radius >= 3.0 || node->focus) {
        cairo_fill_preserve(cr);
        cairo_set_source_rgb(cr, node->outline[0], node->outline[1], node->outline[2]);
        cairo_set_line_width(cr, node->focus ? 1.5 : 0.5);
        cairo_stroke(cr);
      } else {
        cairo_fill(cr);
      }
      if ((v & 4095) == 0 && pass->cancel != NULL && *pass->cancel)
        pass->cancelled = TRUE;
      if ((++pass->drawn & 4095) == 0 && pass->progress != NULL)
        pass->progress(pass->drawn, pass->total, pass->progress_data);
    }
  if (!pass->cancelled && pass->progress != NULL)
    pass->progress(pass->total, pass->total, pass->progress_data);
}

/* Labels: the focus always, everything on small drawings, each with a white halo that keeps it
 * readable over edges. */
static void knnwb_drawing_render_labels(KnnwbRenderPass *pass, guint label_limit)
{
  cairo_t *cr = pass->cr;
  const double scale = pass->scale;
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  for (guint v = 0; v < pass->n && !pass->cancelled; v++) {
    const KnnwbDrawingNode *node = &pass->nodes[v];
    if (node->label == NULL || (!node->focus && pass->n > label_limit))
      continue;
    double size = node->focus ? MAX(12.0, node->font_size * scale)
                              : CLAMP(node->font_size * scale, 7.0, 14.0);
    cairo_set_font_size(cr, size);
    double radius = MAX(1.5, 0.5 * node->w * pass->node_scale);
    double tx = node->x * scale + radius + 2, ty = node->y * scale + size / 3;
    cairo_move_to(cr, tx, ty);
    cairo_text_path(cr, node->label);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_line_width(cr, 3.0);
    cairo_stroke(cr);
    cairo_move_to(cr, tx, ty);
    cairo_set_source_rgb(cr, node->focus ? 0.7 : 0.1, 0.0, 0.0);
    cairo_show_text(cr, node->label);
  }
}

/* Finishes the surface (PNG: encodes it into stream) and commits the file, or says why not. */
static gboolean knnwb_drawing_render_finish(cairo_surface_t *surface, KnnwbPictureFormat format,
                                            gboolean cancelled, const char *path,
                                            KnnwbAtomicFile *file, GError **error)
{
  g_autoptr(KnnwbAtomicFile) owned = file;
  FILE *stream = knnwb_atomic_file_stream(owned);
  cairo_status_t status = CAIRO_STATUS_SUCCESS;
  if (!cancelled && format == KNNWB_PICTURE_PNG)
    status = cairo_surface_write_to_png_stream(surface, knnwb_drawing_render_write, stream);
  cairo_surface_finish(surface);
  if (status == CAIRO_STATUS_SUCCESS)
    status = cairo_surface_status(surface);
  cairo_surface_destroy(surface);
  /* Give back cairo's and fontconfig's process-wide caches (font lists, glyph caches): the
   * command draws once, and leak checkers then see only real leaks. */
  cairo_debug_reset_static_data();
  FcFini();
  if (cancelled) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s: interrupted while drawing", path);
    return FALSE;
  }
  /* A failed write (a full disk, a file size limit): the stream kept the system's reason, which
   * the commit reports ("write failed: No space left on device"); cairo's own status says only
   * "error while writing to output stream". */
  if (status == CAIRO_STATUS_WRITE_ERROR && ferror(stream))
    return knnwb_atomic_file_commit(g_steal_pointer(&owned), error);
  if (status != CAIRO_STATUS_SUCCESS) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cairo: %s", path,
                cairo_status_to_string(status));
    return FALSE;
  }
  return knnwb_atomic_file_commit(g_steal_pointer(&owned), error);
}

gboolean knnwb_drawing_render(const KnnwbDrawing *drawing, const char *path,
                              KnnwbPictureFormat format, int width, guint label_limit,
                              gboolean draw_edges, const volatile gint *cancel,
                              KnnwbProgressFunc progress, void *progress_data, GError **error)
{
  guint n = drawing->nodes->len;
  const KnnwbDrawingNode *nodes = (const KnnwbDrawingNode *)(void *)drawing->nodes->data;
  int height;
  double scale, offset_x, offset_y;
  knnwb_drawing_render_frame(nodes, n, width, &height, &scale, &offset_x, &offset_y);
  KnnwbAtomicFile *file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  cairo_surface_t *surface;
  if (format == KNNWB_PICTURE_PNG)
    surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  else if (format == KNNWB_PICTURE_SVG)
    surface =
        cairo_svg_surface_create_for_stream(knnwb_drawing_render_write, stream, width, height);
  else
    surface =
        cairo_pdf_surface_create_for_stream(knnwb_drawing_render_write, stream, width, height);
  cairo_t *cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_translate(cr, offset_x, offset_y);
  const KnnwbDrawingEdge *edges = (const KnnwbDrawingEdge *)(void *)drawing->edges->data;
  guint m = draw_edges ? drawing->edges->len : 0;
  /* Edges, then nodes, then labels. */
  KnnwbRenderPass pass = {.cr = cr,
                          .nodes = nodes,
                          .n = n,
                          .scale = scale,
                          .node_scale = scale,
                          .cancel = cancel,
                          .progress = progress,
                          .progress_data = progress_data,
                          .total = (uint64_t)m + n};
  knnwb_drawing_render_edges(&pass, edges, m);
  knnwb_drawing_render_nodes(&pass);
  knnwb_drawing_render_labels(&pass, label_limit);
  cairo_destroy(cr);
  return knnwb_drawing_render_finish(surface, format, pass.cancelled, path, file, error);
}

#else

gboolean knnwb_drawing_render(const KnnwbDrawing *drawing, const char *path,
                              KnnwbPictureFormat format, int width, guint label_limit,
                              gboolean draw_edges, const volatile gint *cancel,
                              KnnwbProgressFunc progress, void *progress_data, GError **error)
{
  (void)drawing, (void)format, (void)width, (void)label_limit, (void)draw_edges, (void)cancel;
  (void)progress, (void)progress_data;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "%s: this knnwb was built without cairo (libcairo2-dev; cmake -DKNNWB_CAIRO=ON)",
              path);
  return FALSE;
}

#endif
