/* A whole graph too large to draw node by node (a million nodes draw as one grey blob, slowly):
 * its layout as a density image. Nodes are binned per pixel, each pixel coloured by the mean
 * colour of its nodes and darker the more it holds (log scale); edges are binned the same way and
 * drawn as a faint veil under them; each category (cluster) is outlined by the convex hull of its
 * central nine tenths and named at its centre. Everything is plain arrays: O(n + m + pixels). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "drawing_internal.h"

#ifdef KNNWB_HAVE_CAIRO

/* Image of w x h pixels over the plan's area. */
typedef struct {
  int w, h;
  double x0, y0; /* the area's corner in picture pixels */
  float *count, *rgb, *veil;
  double spread; /* a node's count at its centre after the blur, (2r + 1)^2 of them to one */
} KnnwbDensity;

static inline gboolean knnwb_density_bin(const KnnwbDensity *d, const KnnwbDrawingPlan *plan,
                                         double x, double y, int *px, int *py)
{
  *px = (int)floor(plan->offset_x + plan->scale * x - d->x0);
  *py = (int)floor(plan->offset_y + plan->scale * y - d->y0);
  return *px >= 0 && *py >= 0 && *px < d->w && *py < d->h;
}

/* Edges as a veil: each a line of unit steps into veil; at most about two million of them (every
 * k-th edge beyond), which already covers every pixel a denser picture would. */
static gboolean knnwb_density_edges(KnnwbDensity *d, const KnnwbDrawing *drawing,
                                    const KnnwbDrawingPlan *plan, guint m,
                                    const volatile gint *cancel)
{
  const KnnwbDrawingNode *nodes = (const KnnwbDrawingNode *)(void *)drawing->nodes->data;
  const KnnwbDrawingEdge *edges = (const KnnwbDrawingEdge *)(void *)drawing->edges->data;
  guint stride = MAX(1u, m / 2000000u);
  for (guint e = 0; e < m; e += stride) {
    if ((e & 65535) < stride && cancel != NULL && *cancel)
      return FALSE;
    const KnnwbDrawingNode *a = &nodes[edges[e].source], *b = &nodes[edges[e].target];
    double ax = plan->offset_x + plan->scale * a->x - d->x0;
    double ay = plan->offset_y + plan->scale * a->y - d->y0;
    double bx = plan->offset_x + plan->scale * b->x - d->x0;
    double by = plan->offset_y + plan->scale * b->y - d->y0;
    int steps = (int)MIN(ceil(MAX(fabs(bx - ax), fabs(by - ay))), 4096.0);
    for (int s = 0; s <= steps; s++) {
      double t = steps ? (double)s / steps : 0;
      int x = (int)(ax + t * (bx - ax)), y = (int)(ay + t * (by - ay));
      if (x >= 0 && y >= 0 && x < d->w && y < d->h)
        d->veil[(size_t)y * d->w + x] += (float)stride;
    }
  }
  return TRUE;
}

/* A box blur of radius r over a w x h image of channels floats per pixel, rows then columns (sums
 * kept, not means: a node spreads over its neighbourhood without changing the total). */
static void knnwb_density_blur(float *image, int w, int h, int channels, int r)
{
  if (r <= 0)
    return;
  g_autofree float *line = g_new(float, (size_t)MAX(w, h) * channels);
  for (int pass = 0; pass < 2; pass++) {
    int length = pass ? h : w, lines = pass ? w : h;
    size_t step = pass ? (size_t)w * channels : (size_t)channels;
    for (int l = 0; l < lines; l++) {
      float *start = image + (pass ? (size_t)l * channels : (size_t)l * w * channels);
      for (int i = 0; i < length; i++)
        memcpy(line + (size_t)i * channels, start + i * step, channels * sizeof(float));
      for (int c = 0; c < channels; c++) {
        double sum = 0; /* a running sum: in double, and what is left of a cancelled sum is 0 */
        for (int i = 0; i < MIN(r, length); i++)
          sum += line[(size_t)i * channels + c];
        for (int i = 0; i < length; i++) {
          if (i + r < length)
            sum += line[(size_t)(i + r) * channels + c];
          if (i - r - 1 >= 0)
            sum -= line[(size_t)(i - r - 1) * channels + c];
          start[i * step + c] = sum > 1e-6 ? (float)(sum / (2 * r + 1)) : 0.0f;
        }
      }
    }
  }
}

/* The pixels: white, the veil of edges in grey, the nodes' mean colour over it with an opacity
 * from the log of their count. */
static void knnwb_density_paint(const KnnwbDensity *d, unsigned char *data, int stride)
{
  float most = 1, most_veil = 1;
  for (size_t i = 0; i < (size_t)d->w * d->h; i++)
    most = MAX(most, d->count[i]), most_veil = MAX(most_veil, d->veil[i]);
  double log_most = log1p(most * d->spread), log_veil = log1p(most_veil);
  for (int y = 0; y < d->h; y++)
    for (int x = 0; x < d->w; x++) {
      size_t i = (size_t)y * d->w + x;
      double r = 1, g = 1, b = 1;
      if (d->veil[i] > 0) {
        double shade = 1 - 0.35 * log1p(d->veil[i]) / log_veil;
        r = g = b = shade;
      }
      double nodes = d->count[i] * d->spread; /* nodes per pixel, as if not blurred */
      if (nodes > 1e-3) {
        double alpha = MIN(1.0, nodes) * (0.45 + 0.55 * log1p(nodes) / log_most);
        double darken = 1 - 0.35 * log1p(nodes) / log_most;
        const float *c = d->rgb + 3 * i;
        r = (1 - alpha) * r + alpha * darken * c[0] / d->count[i];
        g = (1 - alpha) * g + alpha * darken * c[1] / d->count[i];
        b = (1 - alpha) * b + alpha * darken * c[2] / d->count[i];
      }
      guint32 *out = (guint32 *)(void *)(data + (size_t)y * stride + 4 * (size_t)x);
      *out = 0xFF000000u | (guint32)lround(CLAMP(r, 0.0, 1.0) * 255) << 16 |
             (guint32)lround(CLAMP(g, 0.0, 1.0) * 255) << 8 |
             (guint32)lround(CLAMP(b, 0.0, 1.0) * 255);
    }
}

static int knnwb_density_point_compare(const void *a, const void *b)
{
  const double *p = a, *q = b;
  if (p[0] != q[0])
    return p[0] < q[0] ? -1 : 1;
  return (p[1] > q[1]) - (p[1] < q[1]);
}

static double knnwb_density_cross(const double *o, const double *a, const double *b)
{
  return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
}

/* The convex hull of k points (x, y pairs, sorted in place) into hull (2k + 2 doubles); returns
 * its vertex count (Andrew's monotone chain). */
static size_t knnwb_density_hull(double *points, size_t k, double *hull)
{
  qsort(points, k, 2 * sizeof(double), knnwb_density_point_compare);
  size_t h = 0;
  for (size_t i = 0; i < k; i++) {
    while (h >= 2 &&
           knnwb_density_cross(hull + 2 * (h - 2), hull + 2 * (h - 1), points + 2 * i) <= 0)
      h--;
    memcpy(hull + 2 * h++, points + 2 * i, 2 * sizeof(double));
  }
  for (size_t i = k - 1, lower = h + 1; i-- > 0;) {
    while (h >= lower &&
           knnwb_density_cross(hull + 2 * (h - 2), hull + 2 * (h - 1), points + 2 * i) <= 0)
      h--;
    memcpy(hull + 2 * h++, points + 2 * i, 2 * sizeof(double));
  }
  return h > 1 ? h - 1 : h;
}

static int knnwb_density_double_compare(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Each category with at least 0.5% of the nodes (at most the legend's rows): the hull of its
 * nodes nearest its centre (nine tenths of them) in its colour, its name at the centre. */
static void knnwb_density_outlines(cairo_t *cr, const KnnwbDrawing *drawing,
                                   const KnnwbDrawingPlan *plan)
{
  const KnnwbNodeColours *colours = &plan->colours;
  if (colours->category == NULL)
    return;
  const KnnwbDrawingNode *nodes = (const KnnwbDrawingNode *)(void *)drawing->nodes->data;
  guint n = drawing->nodes->len;
  guint rows = MIN(colours->legend->len, plan->legend_rows);
  /* Members of each category, in one array by category (counting sort). */
  g_autofree guint *start = g_new0(guint, rows + 1);
  for (guint v = 0; v < n; v++)
    if (colours->category[v] < rows)
      start[colours->category[v] + 1]++;
  for (guint c = 0; c < rows; c++)
    start[c + 1] += start[c];
  g_autofree guint *members = g_new(guint, MAX(start[rows], 1u));
  g_autofree guint *fill = g_memdup2(start, (rows + 1) * sizeof(guint));
  for (guint v = 0; v < n; v++)
    if (colours->category[v] < rows)
      members[fill[colours->category[v]]++] = v;
  double font = CLAMP(plan->width / 80.0, 10.0, 16.0);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_font_size(cr, font);
  for (guint c = 0; c < rows; c++) {
    size_t k = start[c + 1] - start[c];
    const KnnwbLegendEntry *entry = &g_array_index(colours->legend, KnnwbLegendEntry, c);
    if (k < 3 || k * 200 < n || strcmp(entry->text, "(none)") == 0)
      continue;
    double cx = 0, cy = 0;
    g_autofree double *points = g_new(double, 2 * k);
    for (size_t i = 0; i < k; i++) {
      const KnnwbDrawingNode *node = &nodes[members[start[c] + i]];
      points[2 * i] = plan->offset_x + plan->scale * node->x;
      points[2 * i + 1] = plan->offset_y + plan->scale * node->y;
      cx += points[2 * i], cy += points[2 * i + 1];
    }
    cx /= (double)k, cy /= (double)k;
    g_autofree double *distance = g_new(double, k);
    for (size_t i = 0; i < k; i++)
      distance[i] = hypot(points[2 * i] - cx, points[2 * i + 1] - cy);
    g_autofree double *sorted = g_memdup2(distance, k * sizeof(double));
    qsort(sorted, k, sizeof(double), knnwb_density_double_compare);
    double cut = sorted[(size_t)(0.9 * (double)(k - 1))];
    size_t kept = 0;
    for (size_t i = 0; i < k; i++)
      if (distance[i] <= cut)
        memmove(points + 2 * kept++, points + 2 * i, 2 * sizeof(double));
    g_autofree double *hull = g_new(double, 2 * kept + 2);
    size_t h = knnwb_density_hull(points, kept, hull);
    if (h >= 3) {
      cairo_move_to(cr, hull[0], hull[1]);
      for (size_t i = 1; i < h; i++)
        cairo_line_to(cr, hull[2 * i], hull[2 * i + 1]);
      cairo_close_path(cr);
      cairo_set_source_rgba(cr, 0.6 * entry->rgb[0], 0.6 * entry->rgb[1], 0.6 * entry->rgb[2], 0.9);
      cairo_set_line_width(cr, 1.5);
      cairo_stroke(cr);
    }
    cairo_text_extents_t extents;
    cairo_text_extents(cr, entry->text, &extents);
    double tx = CLAMP(cx - extents.x_advance / 2, plan->area[0], plan->area[2] - extents.x_advance);
    double ty = CLAMP(cy + font / 3, plan->area[1] + font, plan->area[3]);
    cairo_move_to(cr, tx, ty);
    cairo_text_path(cr, entry->text);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_line_width(cr, 3.0);
    cairo_stroke(cr);
    cairo_move_to(cr, tx, ty);
    cairo_set_source_rgb(cr, 0.6 * entry->rgb[0], 0.6 * entry->rgb[1], 0.6 * entry->rgb[2]);
    cairo_show_text(cr, entry->text);
  }
}

gboolean knnwb_drawing_render_density(cairo_t *cr, const KnnwbDrawing *drawing,
                                      const KnnwbDrawingPlan *plan, guint m,
                                      const volatile gint *cancel)
{
  KnnwbDensity d = {.x0 = floor(plan->area[0]), .y0 = floor(plan->area[1])};
  d.w = MAX(1, (int)ceil(plan->area[2]) - (int)d.x0);
  d.h = MAX(1, (int)ceil(plan->area[3]) - (int)d.y0);
  size_t pixels = (size_t)d.w * d.h;
  g_autofree float *count = g_new0(float, pixels);
  g_autofree float *rgb = g_new0(float, 3 * pixels);
  g_autofree float *veil = g_new0(float, pixels);
  d.count = count, d.rgb = rgb, d.veil = veil;
  const KnnwbDrawingNode *nodes = (const KnnwbDrawingNode *)(void *)drawing->nodes->data;
  for (guint v = 0; v < drawing->nodes->len; v++) {
    if ((v & 65535) == 0 && cancel != NULL && *cancel)
      return FALSE;
    int x, y;
    if (!knnwb_density_bin(&d, plan, nodes[v].x, nodes[v].y, &x, &y))
      continue;
    size_t i = (size_t)y * d.w + x;
    count[i] += 1;
    for (int k = 0; k < 3; k++)
      rgb[3 * i + k] += (float)plan->colours.rgb[3 * (size_t)v + k];
  }
  /* Sparse drawings (fewer nodes than pixels) spread each node over a few pixels, so that the
   * picture shows a density rather than scattered dots. */
  int radius = (int)CLAMP(lround(0.5 * sqrt((double)pixels / MAX(drawing->nodes->len, 1u))), 0, 3);
  d.spread = (2.0 * radius + 1) * (2.0 * radius + 1);
  knnwb_density_blur(count, d.w, d.h, 1, radius);
  knnwb_density_blur(rgb, d.w, d.h, 3, radius);
  if (!knnwb_density_edges(&d, drawing, plan, m, cancel))
    return FALSE;
  cairo_surface_t *image = cairo_image_surface_create(CAIRO_FORMAT_RGB24, d.w, d.h);
  cairo_surface_flush(image);
  knnwb_density_paint(&d, cairo_image_surface_get_data(image),
                      cairo_image_surface_get_stride(image));
  cairo_surface_mark_dirty(image);
  cairo_set_source_surface(cr, image, d.x0, d.y0);
  cairo_paint(cr);
  cairo_surface_destroy(image);
  /* The focus stays visible on top. */
  for (guint v = 0; v < drawing->nodes->len; v++)
    if (nodes[v].focus) {
      double r = knnwb_drawing_plan_radius(plan, &nodes[v]);
      cairo_new_sub_path(cr);
      cairo_arc(cr, plan->offset_x + plan->scale * nodes[v].x,
                plan->offset_y + plan->scale * nodes[v].y, r, 0, 2 * G_PI);
      cairo_set_source_rgb(cr, nodes[v].fill[0], nodes[v].fill[1], nodes[v].fill[2]);
      cairo_fill(cr);
    }
  knnwb_density_outlines(cr, drawing, plan);
  return TRUE;
}

#endif
