/* Scatter plots of a row's values against the phenotype across samples, and the overview of the
 * hits' correlations: the seed's Figure 3b-d, drawn with cairo. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <knnwb/atomic_file.h>
#include <knnwb/error.h>
#include <knnwb/drawing.h>

#ifdef KNNWB_HAVE_CAIRO
#include <cairo.h>
#include <fontconfig/fontconfig.h>

static cairo_status_t knnwb_scatter_write(void *closure, const unsigned char *data,
                                          unsigned int length)
{
  return fwrite(data, 1, length, closure) == length ? CAIRO_STATUS_SUCCESS
                                                    : CAIRO_STATUS_WRITE_ERROR;
}

/* Encodes surface as PNG into path, atomically; destroys surface. */
static gboolean knnwb_scatter_save(cairo_surface_t *surface, const char *path, GError **error)
{
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL) {
    cairo_surface_destroy(surface);
    return FALSE;
  }
  FILE *stream = knnwb_atomic_file_stream(file);
  cairo_status_t status = cairo_surface_write_to_png_stream(surface, knnwb_scatter_write, stream);
  cairo_surface_destroy(surface);
  /* cairo's and fontconfig's process-wide caches go back after each picture, as the renderer's
   * do: leak checkers then see only real leaks (the next picture loads them again). */
  cairo_debug_reset_static_data();
  FcFini();
  /* A failed write keeps the system's reason in the stream: the commit reports it. */
  if (status != CAIRO_STATUS_SUCCESS && !(status == CAIRO_STATUS_WRITE_ERROR && ferror(stream))) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cairo: %s", path,
                cairo_status_to_string(status));
    return FALSE;
  }
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

/* The axis range of the finite values: min - 5 %, max + 5 % of the span. */
static void knnwb_scatter_range(const double *v, const double *w, size_t n, double *lo, double *hi)
{
  double a = INFINITY, b = -INFINITY;
  for (size_t i = 0; i < n; i++)
    if (isfinite(v[i]) && isfinite(w[i])) {
      a = MIN(a, v[i]);
      b = MAX(b, v[i]);
    }
  if (!(a <= b))
    a = b = 0.0;
  if (b - a <= 0.0) {
    *lo = a - 0.5;
    *hi = b + 0.5;
    return;
  }
  *lo = a - 0.05 * (b - a);
  *hi = b + 0.05 * (b - a);
}

static void knnwb_scatter_colour(cairo_t *cr, const char hex[8])
{
  unsigned r = 0, g = 0, b = 0;
  if (sscanf(hex, "#%02x%02x%02x", &r, &g, &b) != 3)
    r = 0x1F, g = 0x4E, b = 0x9A;
  cairo_set_source_rgb(cr, r / 255.0, g / 255.0, b / 255.0);
}

/* Text centred at (x, y), rotated by angle (radians). */
static void knnwb_scatter_text(cairo_t *cr, const char *text, double x, double y, double angle)
{
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text, &extents);
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, angle);
  cairo_move_to(cr, -extents.width / 2 - extents.x_bearing, extents.height / 2);
  cairo_show_text(cr, text);
  cairo_restore(cr);
}

/* The frame, the ticks at both ends of each axis, the labels and the title. */
static void knnwb_scatter_axes(cairo_t *cr, const KnnwbScatter *scatter, int width, int height,
                               double x0, double x1, double y0, double y1)
{
  const double left = KNNWB_SCATTER_LEFT, right = width - KNNWB_SCATTER_RIGHT;
  const double top = KNNWB_SCATTER_TOP, bottom = height - KNNWB_SCATTER_BOTTOM;
  cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
  cairo_set_line_width(cr, 1.0);
  cairo_rectangle(cr, left - 0.5, top - 0.5, right - left + 1, bottom - top + 1);
  cairo_stroke(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 10);
  char tick[32];
  g_snprintf(tick, sizeof tick, "%.3g", x0);
  knnwb_scatter_text(cr, tick, left, bottom + 12, 0);
  g_snprintf(tick, sizeof tick, "%.3g", x1);
  knnwb_scatter_text(cr, tick, right, bottom + 12, 0);
  g_snprintf(tick, sizeof tick, "%.3g", y0);
  knnwb_scatter_text(cr, tick, left - 24, bottom, 0);
  g_snprintf(tick, sizeof tick, "%.3g", y1);
  knnwb_scatter_text(cr, tick, left - 24, top, 0);
  cairo_set_font_size(cr, 12);
  if (scatter->x_label != NULL)
    knnwb_scatter_text(cr, scatter->x_label, (left + right) / 2, height - 14, 0);
  if (scatter->y_label != NULL)
    knnwb_scatter_text(cr, scatter->y_label, 16, (top + bottom) / 2, -G_PI / 2);
  cairo_set_font_size(cr, 13);
  if (scatter->title != NULL)
    knnwb_scatter_text(cr, scatter->title, width / 2.0, 18, 0);
}

/* The points, each group in its colour, then a legend in the plot's top left corner. */
static void knnwb_scatter_points(cairo_t *cr, const KnnwbScatter *scatter, int width, int height,
                                 double x0, double x1, double y0, double y1)
{
  const double left = KNNWB_SCATTER_LEFT, right = width - KNNWB_SCATTER_RIGHT;
  const double top = KNNWB_SCATTER_TOP, bottom = height - KNNWB_SCATTER_BOTTOM;
  g_autoptr(GHashTable) group_of = g_hash_table_new(g_str_hash, g_str_equal);
  g_autoptr(GPtrArray) names = g_ptr_array_new();
  for (size_t i = 0; i < scatter->n; i++) {
    if (!isfinite(scatter->x[i]) || !isfinite(scatter->y[i]))
      continue;
    const char *group = scatter->groups ? scatter->groups[i] : NULL;
    char hex[8] = "#1F4E9A";
    if (group != NULL && *group != '\0') {
      gpointer id;
      if (!g_hash_table_lookup_extended(group_of, group, NULL, &id)) {
        id = GUINT_TO_POINTER(names->len);
        g_hash_table_insert(group_of, (gpointer)group, id);
        g_ptr_array_add(names, (gpointer)group);
      }
      knnwb_drawing_cluster_colour(GPOINTER_TO_UINT(id), hex);
    }
    const double px = left + (scatter->x[i] - x0) / (x1 - x0) * (right - left);
    const double py = bottom - (scatter->y[i] - y0) / (y1 - y0) * (bottom - top);
    knnwb_scatter_colour(cr, hex);
    cairo_new_sub_path(cr);
    cairo_arc(cr, px, py, KNNWB_SCATTER_RADIUS, 0, 2 * G_PI);
    cairo_fill(cr);
  }
  /* The legend: one row in the top margin, under the title, never over a point. */
  cairo_set_font_size(cr, 10);
  double at = left;
  for (guint g = 0; g < names->len && at < right - 20; g++) {
    char hex[8];
    knnwb_drawing_cluster_colour(g, hex);
    knnwb_scatter_colour(cr, hex);
    const double y = top - 12;
    cairo_rectangle(cr, at, y - 4, 8, 8);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cairo_move_to(cr, at + 12, y + 4);
    cairo_show_text(cr, g_ptr_array_index(names, g));
    cairo_text_extents_t extents;
    cairo_text_extents(cr, g_ptr_array_index(names, g), &extents);
    at += 12 + extents.x_advance + 14;
  }
}

gboolean knnwb_drawing_scatter_png(const char *path, const KnnwbScatter *scatter, GError **error)
{
  const int width = scatter->width > 0 ? scatter->width : 480;
  const int height = scatter->height > 0 ? scatter->height : 360;
  if (width < 160 || height < 120) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: a scatter plot needs at least 160 x 120 pixels", path);
    return FALSE;
  }
  double x0, x1, y0, y1;
  knnwb_scatter_range(scatter->x, scatter->y, scatter->n, &x0, &x1);
  knnwb_scatter_range(scatter->y, scatter->x, scatter->n, &y0, &y1);
  cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  cairo_t *cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  knnwb_scatter_axes(cr, scatter, width, height, x0, x1, y0, y1);
  knnwb_scatter_points(cr, scatter, width, height, x0, x1, y0, y1);
  cairo_destroy(cr);
  return knnwb_scatter_save(surface, path, error);
}

gboolean knnwb_drawing_r_panel_png(const char *path, const char *title, const char *const *labels,
                                   const double *r, size_t n, int width, GError **error)
{
  width = width > 0 ? width : 480;
  if (width < 160) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: the overview needs at least 160 pixels", path);
    return FALSE;
  }
  const int row = 22, height = 40 + row * (int)MAX(n, (size_t)1) + 30;
  const double left = 0.35 * width, right = width - 20.0, zero = (left + right) / 2;
  cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  cairo_t *cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  for (size_t i = 0; i < n; i++) {
    const double y = 40 + row * (double)i;
    const double value = isfinite(r[i]) ? CLAMP(r[i], -1.0, 1.0) : 0.0;
    const double end = zero + value * (right - zero);
    if (value >= 0)
      cairo_set_source_rgb(cr, 0.80, 0.20, 0.15);
    else
      cairo_set_source_rgb(cr, 0.15, 0.35, 0.75);
    cairo_rectangle(cr, MIN(zero, end), y + 3, fabs(end - zero), row - 6);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cairo_set_font_size(cr, 11);
    cairo_text_extents_t extents;
    cairo_text_extents(cr, labels[i], &extents);
    cairo_move_to(cr, left - 8 - extents.x_advance, y + row / 2.0 + 4);
    cairo_show_text(cr, labels[i]);
  }
  cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
  cairo_set_line_width(cr, 1.0);
  cairo_move_to(cr, zero + 0.5, 34);
  cairo_line_to(cr, zero + 0.5, height - 26);
  cairo_stroke(cr);
  cairo_set_font_size(cr, 10);
  knnwb_scatter_text(cr, "-1", left, height - 14, 0);
  knnwb_scatter_text(cr, "0", zero, height - 14, 0);
  knnwb_scatter_text(cr, "1", right, height - 14, 0);
  cairo_set_font_size(cr, 13);
  if (title != NULL)
    knnwb_scatter_text(cr, title, width / 2.0, 18, 0);
  cairo_destroy(cr);
  return knnwb_scatter_save(surface, path, error);
}

#else

gboolean knnwb_drawing_scatter_png(const char *path, const KnnwbScatter *scatter, GError **error)
{
  (void)scatter;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "%s: knnwb was built without cairo; scatter plots need it", path);
  return FALSE;
}

gboolean knnwb_drawing_r_panel_png(const char *path, const char *title, const char *const *labels,
                                   const double *r, size_t n, int width, GError **error)
{
  (void)title, (void)labels, (void)r, (void)n, (void)width;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "%s: knnwb was built without cairo; the overview needs it", path);
  return FALSE;
}

#endif
