/* Draws a KnnwbDrawing with cairo as its plan says: edges, nodes, the focus nodes and labels on
 * top, the title and the legend (or, for large graphs, the density image of render_density.c). */
#include <math.h>
#include <stdio.h>
#include <knnwb/atomic_file.h>
#include <knnwb/error.h>
#include "drawing_internal.h"

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

/* One rendering under way: the cairo context, the plan and the bookkeeping of cancellation and
 * progress shared by the passes. */
typedef struct {
  cairo_t *cr;
  const KnnwbDrawingPlan *plan;
  const KnnwbDrawingNode *nodes;
  guint n;
  const volatile gint *cancel;
  KnnwbProgressFunc progress;
  void *progress_data;
  uint64_t drawn, total;
  gboolean cancelled;
} KnnwbRenderPass;

static inline double knnwb_pass_x(const KnnwbRenderPass *pass, double x)
{
  return pass->plan->offset_x + pass->plan->scale * x;
}

static inline double knnwb_pass_y(const KnnwbRenderPass *pass, double y)
{
  return pass->plan->offset_y + pass->plan->scale * y;
}

/* An edge's strength in [0, 1]: its weight (a similarity) within the drawing's range, else its GML
 * width within theirs; 0.5 when all are equal. */
static void knnwb_render_edge_range(const KnnwbDrawingEdge *edges, guint m, gboolean *by_weight,
                                    double *lo, double *hi)
{
  *by_weight = FALSE;
  *lo = INFINITY, *hi = -INFINITY;
  for (guint e = 0; e < m; e++)
    if (isfinite(edges[e].weight)) {
      *by_weight = TRUE;
      *lo = MIN(*lo, edges[e].weight), *hi = MAX(*hi, edges[e].weight);
    }
  if (*by_weight)
    return;
  for (guint e = 0; e < m; e++)
    *lo = MIN(*lo, edges[e].width), *hi = MAX(*hi, edges[e].width);
}

/* A filled arrowhead at the target's rim, pointing at it. */
static void knnwb_render_arrow(KnnwbRenderPass *pass, const KnnwbDrawingNode *a,
                               const KnnwbDrawingNode *b, double size)
{
  double ax = knnwb_pass_x(pass, a->x), ay = knnwb_pass_y(pass, a->y);
  double bx = knnwb_pass_x(pass, b->x), by = knnwb_pass_y(pass, b->y);
  double dx = bx - ax, dy = by - ay, length = hypot(dx, dy);
  double r = knnwb_drawing_plan_radius(pass->plan, b);
  if (length <= r + size)
    return;
  dx /= length, dy /= length;
  double tx = bx - dx * r, ty = by - dy * r;
  cairo_move_to(pass->cr, tx, ty);
  cairo_line_to(pass->cr, tx - dx * size - dy * size * 0.45, ty - dy * size + dx * size * 0.45);
  cairo_line_to(pass->cr, tx - dx * size + dy * size * 0.45, ty - dy * size - dx * size * 0.45);
  cairo_close_path(pass->cr);
}

static gint knnwb_render_key_compare(gconstpointer a, gconstpointer b)
{
  guint x = GPOINTER_TO_UINT(a), y = GPOINTER_TO_UINT(b);
  guint fx = (x - 1) >> 24, fy = (y - 1) >> 24, sx = (x - 1) & 7, sy = (y - 1) & 7;
  if (fx != fy)
    return fx < fy ? -1 : 1;
  if (sx != sy)
    return sx < sy ? -1 : 1;
  return (x > y) - (x < y);
}

/* Edges grouped by colour and strength (8 steps) and stroked 64 at a time: 100,000 separate
 * strokes take seconds, one path of all of them longer still (cairo tessellates its crossings).
 * The GML's colour is darkened (its #A0A0A0 is nearly invisible on white), stronger edges are
 * wider and more opaque, many edges fainter. The cancel flag is read every 64 edges. */
static void knnwb_drawing_render_edges(KnnwbRenderPass *pass, const KnnwbDrawingEdge *edges,
                                       guint m, gboolean directed)
{
  cairo_t *cr = pass->cr;
  const KnnwbDrawingNode *nodes = pass->nodes;
  gboolean by_weight;
  double lo, hi;
  knnwb_render_edge_range(edges, m, &by_weight, &lo, &hi);
  double base_alpha = CLAMP(sqrt(300.0 / MAX(m, 1u)), 0.1, 0.75);
  double base_width = m > 20000 ? 0.5 : m > 2000 ? 0.8 : 1.2;
  g_autoptr(GHashTable) groups =
      g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
  for (guint e = 0; e < m; e++) {
    const double *c = edges[e].colour;
    double value = by_weight ? edges[e].weight : edges[e].width;
    double t = hi > lo && isfinite(value) ? (value - lo) / (hi - lo) : 0.5;
    guint step = (guint)lround(CLAMP(t, 0.0, 1.0) * 7);
    gboolean to_focus = nodes[edges[e].source].focus || nodes[edges[e].target].focus;
    guint key = ((guint)lround(c[0] * 63) << 15) | ((guint)lround(c[1] * 63) << 9) |
                ((guint)lround(c[2] * 63) << 3) | step | (guint)to_focus << 24;
    GArray *group = g_hash_table_lookup(groups, GUINT_TO_POINTER(key + 1));
    if (group == NULL) {
      group = g_array_new(FALSE, FALSE, sizeof(guint));
      g_hash_table_insert(groups, GUINT_TO_POINTER(key + 1), group);
    }
    g_array_append_val(group, e);
  }
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
  cairo_set_antialias(cr, m > 20000 ? CAIRO_ANTIALIAS_FAST : CAIRO_ANTIALIAS_DEFAULT);
  /* In key order: the same picture every run, weaker before stronger, the focus's edges last. */
  g_autoptr(GList) keys = g_list_sort(g_hash_table_get_keys(groups), knnwb_render_key_compare);
  for (GList *link = keys; link != NULL && !pass->cancelled; link = link->next) {
    gpointer key = link->data;
    GArray *group = g_hash_table_lookup(groups, key);
    double t = ((GPOINTER_TO_UINT(key) - 1) & 7) / 7.0;
    const double *c = edges[g_array_index(group, guint, 0)].colour;
    double width = base_width * (0.6 + 1.6 * t);
    if ((GPOINTER_TO_UINT(key) - 1) >> 24) { /* the focus's own edges: dark red, opaque */
      cairo_set_source_rgba(cr, 0.6, 0.05, 0.05, 0.85);
      width = MAX(width, 1.2);
    } else {
      cairo_set_source_rgba(cr, 0.45 * c[0], 0.45 * c[1], 0.45 * c[2],
                            base_alpha * (0.45 + 0.55 * t));
    }
    cairo_set_line_width(cr, width);
    for (guint i = 0; i < group->len; i++) {
      const KnnwbDrawingEdge *edge = &edges[g_array_index(group, guint, i)];
      const KnnwbDrawingNode *a = &nodes[edge->source], *b = &nodes[edge->target];
      cairo_move_to(cr, knnwb_pass_x(pass, a->x), knnwb_pass_y(pass, a->y));
      cairo_line_to(cr, knnwb_pass_x(pass, b->x), knnwb_pass_y(pass, b->y));
      if (i % 64 == 63 || i + 1 == group->len) {
        cairo_stroke(cr);
        if (directed) {
          for (guint j = i - i % 64; j <= i; j++) {
            const KnnwbDrawingEdge *arrow = &edges[g_array_index(group, guint, j)];
            knnwb_render_arrow(pass, &nodes[arrow->source], &nodes[arrow->target],
                               3.0 + 2.5 * width);
          }
          cairo_fill(cr);
        }
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

/* Nodes as the GML sizes them in the plan's colours, but never below a pixel-and-a-half radius (a
 * picture of 12,000 probes must still show where they are); the focus nodes last, on top, in
 * their own fill. The cancel flag is read every 1,024 nodes. */
static void knnwb_drawing_render_nodes(KnnwbRenderPass *pass)
{
  cairo_t *cr = pass->cr;
  const double *rgb = pass->plan->colours.rgb;
  for (int round = 0; round < 2 && !pass->cancelled; round++)
    for (guint v = 0; v < pass->n; v++) {
      const KnnwbDrawingNode *node = &pass->nodes[v];
      if (node->focus != (round == 1))
        continue;
      double radius = knnwb_drawing_plan_radius(pass->plan, node);
      knnwb_drawing_render_shape(cr, knnwb_pass_x(pass, node->x), knnwb_pass_y(pass, node->y),
                                 radius, node->hexagon);
      const double *fill = node->focus ? node->fill : rgb + 3 * (size_t)v;
      cairo_set_source_rgb(cr, fill[0], fill[1], fill[2]);
      if (radius >= 3.0 || node->focus) {
        cairo_fill_preserve(cr);
        cairo_set_source_rgb(cr, node->outline[0], node->outline[1], node->outline[2]);
        cairo_set_line_width(cr, node->focus ? 1.5 : 0.5);
        cairo_stroke(cr);
      } else {
        cairo_fill(cr);
      }
      if ((v & 1023) == 0 && pass->cancel != NULL && *pass->cancel) {
        pass->cancelled = TRUE;
        break;
      }
      if ((++pass->drawn & 4095) == 0 && pass->progress != NULL)
        pass->progress(pass->drawn, pass->total, pass->progress_data);
    }
  if (!pass->cancelled && pass->progress != NULL)
    pass->progress(pass->total, pass->total, pass->progress_data);
}

/* The labels the plan placed, each in its box with a white halo that keeps it readable over
 * edges. */
static void knnwb_drawing_render_labels(KnnwbRenderPass *pass)
{
  cairo_t *cr = pass->cr;
  const GArray *labels = pass->plan->labels;
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  for (guint i = 0; i < labels->len && !pass->cancelled; i++) {
    const KnnwbLabelBox *box = &g_array_index(labels, KnnwbLabelBox, i);
    const KnnwbDrawingNode *node = &pass->nodes[box->node];
    cairo_set_font_size(cr, knnwb_drawing_plan_label_size(pass->plan, node));
    cairo_font_extents_t font;
    cairo_font_extents(cr, &font);
    double tx = box->x0 + 1.5, ty = box->y0 + 1.5 + font.ascent;
    if (box->leader) { /* a thin line from the node to the nearest point of its label's box */
      double cx = knnwb_pass_x(pass, node->x), cy = knnwb_pass_y(pass, node->y);
      cairo_move_to(cr, cx, cy);
      cairo_line_to(cr, CLAMP(cx, box->x0, box->x1), CLAMP(cy, box->y0, box->y1));
      cairo_set_source_rgba(cr, 0.3, 0.3, 0.3, 0.8);
      cairo_set_line_width(cr, 0.6);
      cairo_stroke(cr);
    }
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

/* text shortened with an ellipsis until it is at most width wide at cr's font (a long category
 * name must not run past the legend's box and the picture's edge). */
static char *knnwb_render_fit(cairo_t *cr, const char *text, double width)
{
  char *fitted = g_strdup(text);
  cairo_text_extents_t extents;
  cairo_text_extents(cr, fitted, &extents);
  glong length = g_utf8_strlen(text, -1);
  while (extents.x_advance > width && length > 1) {
    length--;
    g_free(fitted);
    g_autofree char *head = g_utf8_substring(text, 0, length);
    fitted = g_strconcat(head, "\u2026", NULL);
    cairo_text_extents(cr, fitted, &extents);
  }
  return fitted;
}

/* The focus's edges' labels where the plan put them: small, dark red, on a white halo. */
static void knnwb_drawing_render_edge_labels(KnnwbRenderPass *pass, const KnnwbDrawing *drawing)
{
  cairo_t *cr = pass->cr;
  const GArray *labels = pass->plan->edge_labels;
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, KNNWB_EDGE_LABEL_SIZE);
  cairo_font_extents_t font;
  cairo_font_extents(cr, &font);
  for (guint i = 0; i < labels->len && !pass->cancelled; i++) {
    const KnnwbLabelBox *box = &g_array_index(labels, KnnwbLabelBox, i);
    char text[32];
    knnwb_drawing_edge_label(&g_array_index(drawing->edges, KnnwbDrawingEdge, box->node), text,
                             sizeof text);
    cairo_move_to(cr, box->x0 + 1, box->y0 + 1 + font.ascent);
    cairo_text_path(cr, text);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_line_width(cr, 2.5);
    cairo_stroke(cr);
    cairo_move_to(cr, box->x0 + 1, box->y0 + 1 + font.ascent);
    cairo_set_source_rgb(cr, 0.55, 0.0, 0.0);
    cairo_show_text(cr, text);
  }
}

/* The title at the top left, in the band the plan kept for it. */
static void knnwb_drawing_render_title(KnnwbRenderPass *pass)
{
  const KnnwbDrawingPlan *plan = pass->plan;
  if (plan->title == NULL)
    return;
  cairo_t *cr = pass->cr;
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_font_size(cr, plan->title_size);
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  cairo_move_to(cr, plan->area[0], plan->area[1] - plan->title_size * 0.7);
  g_autofree char *title = knnwb_render_fit(cr, plan->title, plan->width - 2 * plan->area[0]);
  cairo_show_text(cr, title);
}

/* The legend in its box: the attribute's name, then a swatch, the value and its count per row
 * (the rows that do not fit summed in one), or the colour scale with its two ends. */
static void knnwb_drawing_render_legend(KnnwbRenderPass *pass)
{
  const KnnwbDrawingPlan *plan = pass->plan;
  const KnnwbNodeColours *colours = &plan->colours;
  if (plan->legend_box[2] <= 0)
    return;
  cairo_t *cr = pass->cr;
  const double *box = plan->legend_box;
  double font = CLAMP(plan->width / 90.0, 9.0, 13.0), line = font * 1.45;
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_font_size(cr, font * 1.1);
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  cairo_move_to(cr, box[0] + font * 0.5, box[1] + line);
  g_autofree char *name = knnwb_render_fit(cr, colours->name, box[2] - box[0] - font * 0.5);
  cairo_show_text(cr, name);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, font);
  double x = box[0] + font * 0.5, y = box[1] + line * 1.3;
  if (colours->numeric) {
    double height = font * 8;
    for (int i = 0; i < 64; i++) {
      double rgb[3];
      knnwb_drawing_scale_colour(1.0 - i / 63.0, rgb);
      cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
      cairo_rectangle(cr, x, y + height * i / 64.0, font, height / 64.0 + 0.5);
      cairo_fill(cr);
    }
    char text[64];
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    g_snprintf(text, sizeof text, "%g", colours->hi);
    cairo_move_to(cr, x + font * 1.6, y + font * 0.8);
    cairo_show_text(cr, text);
    g_snprintf(text, sizeof text, "%g", colours->lo);
    cairo_move_to(cr, x + font * 1.6, y + height);
    cairo_show_text(cr, text);
    return;
  }
  guint rest = 0;
  for (guint i = plan->legend_rows; i < colours->legend->len; i++)
    rest += g_array_index(colours->legend, KnnwbLegendEntry, i).count;
  for (guint i = 0; i <= plan->legend_rows && i < colours->legend->len; i++) {
    const KnnwbLegendEntry *entry = &g_array_index(colours->legend, KnnwbLegendEntry, i);
    g_autofree char *text =
        i < plan->legend_rows
            ? g_strdup_printf("%s (%u)", entry->text, entry->count)
            : g_strdup_printf("%u more (%u)", colours->legend->len - plan->legend_rows, rest);
    if (i < plan->legend_rows) {
      cairo_rectangle(cr, x, y + (line - font) / 2, font, font);
      cairo_set_source_rgb(cr, entry->rgb[0], entry->rgb[1], entry->rgb[2]);
      cairo_fill_preserve(cr);
      cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
      cairo_set_line_width(cr, 0.5);
      cairo_stroke(cr);
    }
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cairo_move_to(cr, x + font * 1.6, y + (line + font) / 2 - font * 0.12);
    g_autofree char *fitted = knnwb_render_fit(cr, text, box[2] - x - font * 1.6);
    cairo_show_text(cr, fitted);
    y += line;
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

gboolean knnwb_drawing_render_picture(const KnnwbDrawing *drawing, const char *path,
                                      KnnwbPictureFormat format, const KnnwbRenderOptions *options,
                                      const volatile gint *cancel, KnnwbProgressFunc progress,
                                      void *progress_data, GError **error)
{
  g_autoptr(KnnwbDrawingPlan) plan = knnwb_drawing_plan_new(drawing, options, error);
  if (plan == NULL)
    return FALSE;
  KnnwbAtomicFile *file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  int width = plan->width, height = plan->height;
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
  const KnnwbDrawingEdge *edges = (const KnnwbDrawingEdge *)(void *)drawing->edges->data;
  guint m = options->draw_edges ? drawing->edges->len : 0;
  guint n = drawing->nodes->len;
  KnnwbRenderPass pass = {.cr = cr,
                          .plan = plan,
                          .nodes = (const KnnwbDrawingNode *)(void *)drawing->nodes->data,
                          .n = n,
                          .cancel = cancel,
                          .progress = progress,
                          .progress_data = progress_data,
                          .total = (uint64_t)m + n};
  if (plan->density) {
    pass.cancelled = !knnwb_drawing_render_density(cr, drawing, plan, m, cancel);
    if (!pass.cancelled && progress != NULL)
      progress(pass.total, pass.total, progress_data);
  } else {
    /* Edges, then nodes, then labels. */
    knnwb_drawing_render_edges(&pass, edges, m, drawing->directed);
    knnwb_drawing_render_nodes(&pass);
    knnwb_drawing_render_labels(&pass);
    knnwb_drawing_render_edge_labels(&pass, drawing);
  }
  knnwb_drawing_render_title(&pass);
  knnwb_drawing_render_legend(&pass);
  cairo_destroy(cr);
  return knnwb_drawing_render_finish(surface, format, pass.cancelled, path, file, error);
}

#else

gboolean knnwb_drawing_render_picture(const KnnwbDrawing *drawing, const char *path,
                                      KnnwbPictureFormat format, const KnnwbRenderOptions *options,
                                      const volatile gint *cancel, KnnwbProgressFunc progress,
                                      void *progress_data, GError **error)
{
  (void)drawing, (void)format, (void)options, (void)cancel, (void)progress, (void)progress_data;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "%s: this knnwb was built without cairo (libcairo2-dev; cmake -DKNNWB_CAIRO=ON)",
              path);
  return FALSE;
}

#endif

gboolean knnwb_drawing_render(const KnnwbDrawing *drawing, const char *path,
                              KnnwbPictureFormat format, int width, guint label_limit,
                              gboolean draw_edges, const volatile gint *cancel,
                              KnnwbProgressFunc progress, void *progress_data, GError **error)
{
  KnnwbRenderOptions options;
  knnwb_drawing_render_options_init(&options);
  options.width = width;
  options.label_limit = label_limit;
  options.draw_edges = draw_edges;
  return knnwb_drawing_render_picture(drawing, path, format, &options, cancel, progress,
                                      progress_data, error);
}
