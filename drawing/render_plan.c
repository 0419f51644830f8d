/* Where a picture's parts go before anything is drawn: the frame (a margin, a title band, a legend
 * panel, the nodes' discs inside), the node colours and the labels, placed greedily by priority
 * without overlap. Text is measured with cairo, as it will be drawn. */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include "drawing_internal.h"

void knnwb_drawing_render_options_init(KnnwbRenderOptions *options)
{
  *options = (KnnwbRenderOptions){
      .width = 1200, .label_limit = 150, .draw_edges = TRUE, .density_above = 20000};
}

void knnwb_drawing_plan_free(KnnwbDrawingPlan *plan)
{
  if (plan == NULL)
    return;
  knnwb_drawing_node_colours_clear(&plan->colours);
  if (plan->labels != NULL)
    g_array_free(plan->labels, TRUE);
  if (plan->edge_labels != NULL)
    g_array_free(plan->edge_labels, TRUE);
  g_free(plan->title);
  g_free(plan);
}

double knnwb_drawing_plan_radius(const KnnwbDrawingPlan *plan, const KnnwbDrawingNode *node)
{
  double radius = MAX(1.5, 0.5 * node->w * plan->node_scale);
  return node->focus ? MAX(radius, 7.0) : radius;
}

gboolean knnwb_drawing_edge_label(const KnnwbDrawingEdge *edge, char *text, size_t size)
{
  if (!isnan(edge->r))
    g_snprintf(text, size, "r %.2f", (double)edge->r);
  else if (!isnan(edge->distance))
    g_snprintf(text, size, "d %.3g", (double)edge->distance);
  else
    return FALSE;
  return TRUE;
}

double knnwb_drawing_plan_label_size(const KnnwbDrawingPlan *plan, const KnnwbDrawingNode *node)
{
  return node->focus ? CLAMP(node->font_size * plan->scale, 12.0, 18.0)
                     : CLAMP(node->font_size * plan->scale, 8.0, 14.0);
}

#ifdef KNNWB_HAVE_CAIRO

/* The title by default: the input's name and what the colours mean. */
static char *knnwb_plan_default_title(const KnnwbRenderOptions *options,
                                      const KnnwbNodeColours *colours)
{
  const char *name = options->name != NULL ? options->name : NULL;
  g_autofree char *base = name != NULL ? g_path_get_basename(name) : NULL;
  if (colours->name == NULL)
    return base != NULL ? g_strdup(base) : NULL;
  g_autofree char *meaning =
      colours->numeric
          ? g_strdup_printf("colour: %s (%g to %g)", colours->name, colours->lo, colours->hi)
          : g_strdup_printf("colour: %s (%u value%s)", colours->name, colours->categories,
                            KNNWB_PLURAL(colours->categories));
  return base != NULL ? g_strdup_printf("%s \u2014 %s", base, meaning) : g_steal_pointer(&meaning);
}

/* The legend's text width and height at font size, and how many rows it shows. */
static void knnwb_plan_legend_size(cairo_t *cr, const KnnwbNodeColours *colours, double font,
                                   double *width, double *height, guint *rows)
{
  *width = *height = 0;
  *rows = 0;
  if (colours->name == NULL)
    return;
  cairo_text_extents_t extents;
  cairo_set_font_size(cr, font * 1.1);
  cairo_text_extents(cr, colours->name, &extents);
  double widest = extents.x_advance;
  cairo_set_font_size(cr, font);
  double line = font * 1.45;
  if (colours->numeric) {
    char text[64];
    for (int end = 0; end < 2; end++) {
      g_snprintf(text, sizeof text, "%g", end ? colours->hi : colours->lo);
      cairo_text_extents(cr, text, &extents);
      widest = MAX(widest, font * 1.6 + extents.x_advance);
    }
    *rows = 0;
    *width = widest + font;
    *height = line * 1.3 + font * 8;
    return;
  }
  guint shown = MIN(colours->legend->len, 24u);
  if (shown < colours->legend->len)
    shown--; /* one row sums up the rest */
  guint rest = 0;
  for (guint i = shown; i < colours->legend->len; i++)
    rest += g_array_index(colours->legend, KnnwbLegendEntry, i).count;
  for (guint i = 0; i < colours->legend->len; i++) {
    const KnnwbLegendEntry *entry = &g_array_index(colours->legend, KnnwbLegendEntry, i);
    g_autofree char *text =
        i < shown ? g_strdup_printf("%s (%u)", entry->text, entry->count)
                  : g_strdup_printf("%u more (%u)", colours->legend->len - shown, rest);
    cairo_text_extents(cr, text, &extents);
    widest = MAX(widest, font * 1.6 + extents.x_advance);
    if (i >= shown)
      break;
  }
  *rows = shown;
  *width = widest + font;
  *height = line * (1.3 + shown + (shown < colours->legend->len));
}

/* The frame: the legend at the right, the title above, the nodes' discs (their GML sizes at the
 * drawing's scale) inside the rest with a margin; the height follows the drawing's shape. */
static void knnwb_plan_frame(KnnwbDrawingPlan *plan, const KnnwbDrawing *drawing, cairo_t *cr,
                             int width)
{
  const KnnwbDrawingNode *nodes = (const KnnwbDrawingNode *)(void *)drawing->nodes->data;
  guint n = drawing->nodes->len;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (guint v = 0; v < n; v++) {
    x0 = MIN(x0, nodes[v].x - nodes[v].w / 2);
    x1 = MAX(x1, nodes[v].x + nodes[v].w / 2);
    y0 = MIN(y0, nodes[v].y - nodes[v].h / 2);
    y1 = MAX(y1, nodes[v].y + nodes[v].h / 2);
  }
  if (n == 0)
    x0 = y0 = 0, x1 = y1 = 1;
  double span_x = MAX(x1 - x0, 1e-9), span_y = MAX(y1 - y0, 1e-9);
  double margin = 0.02 * width + 6;
  double font = CLAMP(width / 90.0, 9.0, 13.0);
  double legend_w, legend_h;
  knnwb_plan_legend_size(cr, &plan->colours, font, &legend_w, &legend_h, &plan->legend_rows);
  legend_w = MIN(legend_w, 0.4 * width);
  plan->title_size = plan->title != NULL ? CLAMP(width / 55.0, 10.0, 20.0) : 0;
  double top = margin + (plan->title != NULL ? plan->title_size * 1.8 : 0);
  double right = width - margin - (legend_w > 0 ? legend_w + margin : 0);
  double pad = 8; /* the smallest and the focus discs' radii and outlines */
  double area_w = MAX(right - margin, 8.0);
  double aspect = CLAMP(span_y / span_x, 0.25, 1.0);
  double area_h = MAX(area_w * aspect, MIN(legend_h, area_w));
  plan->width = width;
  plan->height = (int)ceil(MAX(top + area_h + margin, top + legend_h + margin));
  plan->scale = MIN((area_w - 2 * pad) / span_x, (area_h - 2 * pad) / span_y);
  plan->scale = MAX(plan->scale, 1e-12);
  plan->node_scale = plan->scale;
  plan->offset_x = margin + (area_w - plan->scale * span_x) / 2 - plan->scale * x0;
  plan->offset_y = top + (area_h - plan->scale * span_y) / 2 - plan->scale * y0;
  double area[4] = {margin, top, margin + area_w, top + area_h};
  memcpy(plan->area, area, sizeof area);
  if (legend_w > 0) {
    double box[4] = {width - margin - legend_w, top, width - margin, top + legend_h};
    memcpy(plan->legend_box, box, sizeof box);
  }
}

static gboolean knnwb_plan_overlaps(const KnnwbLabelBox *a, const double b[4])
{
  return a->x0 < b[2] && b[0] < a->x1 && a->y0 < b[3] && b[1] < a->y1;
}

/* The order labels are tried in: focus, their neighbours, then by degree (ties by index). */
static guint *knnwb_plan_label_order(const KnnwbDrawing *drawing, guint *n_first)
{
  guint n = drawing->nodes->len;
  const KnnwbDrawingNode *nodes = (const KnnwbDrawingNode *)(void *)drawing->nodes->data;
  g_autofree guint *degree = g_new0(guint, MAX(n, 1u));
  g_autofree guint8 *rank = g_new0(guint8, MAX(n, 1u)); /* 0 focus, 1 neighbour, 2 other */
  for (guint v = 0; v < n; v++)
    rank[v] = nodes[v].focus ? 0 : 2;
  for (guint e = 0; e < drawing->edges->len; e++) {
    const KnnwbDrawingEdge *edge = &g_array_index(drawing->edges, KnnwbDrawingEdge, e);
    degree[edge->source]++, degree[edge->target]++;
    if (nodes[edge->source].focus && rank[edge->target] == 2)
      rank[edge->target] = 1;
    if (nodes[edge->target].focus && rank[edge->source] == 2)
      rank[edge->source] = 1;
  }
  /* Counting sort by rank, then by degree within rank 2 (a stable sort of (degree, index)). */
  guint *order = g_new(guint, MAX(n, 1u));
  guint at = 0;
  for (guint8 r = 0; r < 2; r++)
    for (guint v = 0; v < n; v++)
      if (rank[v] == r)
        order[at++] = v;
  *n_first = at;
  guint start = at;
  for (guint v = 0; v < n; v++)
    if (rank[v] == 2)
      order[at++] = v;
  /* Insertion into degree order is too slow at 10^6 nodes: a bucket pass by degree. */
  guint max_degree = 0;
  for (guint i = start; i < n; i++)
    max_degree = MAX(max_degree, degree[order[i]]);
  g_autofree guint *count = g_new0(guint, (gsize)max_degree + 2);
  for (guint i = start; i < n; i++)
    count[max_degree - degree[order[i]] + 1]++;
  for (guint d = 1; d <= max_degree + 1; d++)
    count[d] += count[d - 1];
  g_autofree guint *sorted = g_new(guint, MAX(n - start, 1u));
  for (guint i = start; i < n; i++)
    sorted[count[max_degree - degree[order[i]]]++] = order[i];
  memcpy(order + start, sorted, (n - start) * sizeof(guint));
  return order;
}

/* The placed labels by 64-pixel cell, so that a label is checked against its neighbours only
 * (all-pairs checks took minutes for 100,000 labels). */
typedef struct {
  int cols, rows;
  GArray **cells; /* guint indices into plan->labels, created on first use */
} KnnwbLabelGrid;

enum { KNNWB_LABEL_CELL = 64 };

static void knnwb_grid_init(KnnwbLabelGrid *grid, int width, int height)
{
  grid->cols = width / KNNWB_LABEL_CELL + 1;
  grid->rows = height / KNNWB_LABEL_CELL + 1;
  grid->cells = g_new0(GArray *, (size_t)grid->cols * grid->rows);
}

static void knnwb_grid_clear(KnnwbLabelGrid *grid)
{
  for (size_t i = 0; i < (size_t)grid->cols * grid->rows; i++)
    if (grid->cells[i] != NULL)
      g_array_free(grid->cells[i], TRUE);
  g_free(grid->cells);
}

/* The cells box covers (clamped to the grid). */
static void knnwb_grid_span(const KnnwbLabelGrid *grid, const KnnwbLabelBox *box, int span[4])
{
  span[0] = CLAMP((int)floor(box->x0 / KNNWB_LABEL_CELL), 0, grid->cols - 1);
  span[1] = CLAMP((int)floor(box->y0 / KNNWB_LABEL_CELL), 0, grid->rows - 1);
  span[2] = CLAMP((int)floor(box->x1 / KNNWB_LABEL_CELL), 0, grid->cols - 1);
  span[3] = CLAMP((int)floor(box->y1 / KNNWB_LABEL_CELL), 0, grid->rows - 1);
}

static gboolean knnwb_grid_free(const KnnwbLabelGrid *grid, const GArray *labels,
                                const KnnwbLabelBox *box)
{
  int span[4];
  knnwb_grid_span(grid, box, span);
  for (int y = span[1]; y <= span[3]; y++)
    for (int x = span[0]; x <= span[2]; x++) {
      const GArray *cell = grid->cells[(size_t)y * grid->cols + x];
      for (guint i = 0; cell != NULL && i < cell->len; i++) {
        const KnnwbLabelBox *other =
            &g_array_index(labels, KnnwbLabelBox, g_array_index(cell, guint, i));
        double b[4] = {other->x0, other->y0, other->x1, other->y1};
        if (knnwb_plan_overlaps(box, b))
          return FALSE;
      }
    }
  return TRUE;
}

static void knnwb_grid_add(KnnwbLabelGrid *grid, guint index, const KnnwbLabelBox *box)
{
  int span[4];
  knnwb_grid_span(grid, box, span);
  for (int y = span[1]; y <= span[3]; y++)
    for (int x = span[0]; x <= span[2]; x++) {
      GArray **cell = &grid->cells[(size_t)y * grid->cols + x];
      if (*cell == NULL)
        *cell = g_array_new(FALSE, FALSE, sizeof(guint));
      g_array_append_val(*cell, index);
    }
}

/* One node's label: tried at the side away from the drawing's centre first, then the others;
 * kept at the first place inside the picture that overlaps no placed label or obstacle (farther
 * out, with a leader line, when it must be shown). */
static gboolean knnwb_plan_place(KnnwbDrawingPlan *plan, KnnwbLabelGrid *grid,
                                 const KnnwbDrawingNode *node, guint v, gboolean must, cairo_t *cr,
                                 const double (*obstacles)[4], guint n_obstacles)
{
  double size = knnwb_drawing_plan_label_size(plan, node);
  cairo_set_font_size(cr, size);
  cairo_text_extents_t extents;
  cairo_font_extents_t font;
  cairo_text_extents(cr, node->label, &extents);
  cairo_font_extents(cr, &font);
  double halo = 1.5, w = extents.x_advance + 2 * halo, h = font.ascent + font.descent + 2 * halo;
  double cx = plan->offset_x + plan->scale * node->x, cy = plan->offset_y + plan->scale * node->y;
  gboolean east = cx >= (plan->area[0] + plan->area[2]) / 2;
  gboolean south = cy >= (plan->area[1] + plan->area[3]) / 2;
  /* East of the centre: right first, west: left first; below before above under the centre. */
  static const int tries_by_quarter[4][8] = {{1, 5, 7, 2, 3, 0, 4, 6},
                                             {0, 4, 6, 2, 3, 1, 5, 7},
                                             {1, 7, 5, 3, 2, 0, 6, 4},
                                             {0, 6, 4, 3, 2, 1, 7, 5}};
  const int *tries = tries_by_quarter[2 * south + east];
  double limit = 3.5; /* stay off the picture's edge */
  /* Beside the node first; a label that must be shown (the focus, its neighbours) may move out
   * to two farther rings, joined to its node by a leader line. */
  for (int ring = 0; ring < (must ? 3 : 1); ring++) {
    double r = knnwb_drawing_plan_radius(plan, node) + 1.5 + ring * (h + 0.5 * w);
    double sides[8][2] = {{cx + r, cy - h / 2},
                          {cx - r - w, cy - h / 2},
                          {cx - w / 2, cy - r - h},
                          {cx - w / 2, cy + r},
                          {cx + 0.7 * r, cy - 0.7 * r - h},
                          {cx - 0.7 * r - w, cy - 0.7 * r - h},
                          {cx + 0.7 * r, cy + 0.7 * r},
                          {cx - 0.7 * r - w, cy + 0.7 * r}};
    for (int t = 0; t < 8; t++) {
      KnnwbLabelBox box = {v, sides[tries[t]][0], sides[tries[t]][1], 0, 0, ring > 0};
      box.x1 = box.x0 + w, box.y1 = box.y0 + h;
      if (box.x0 < limit || box.y0 < limit || box.x1 > plan->width - limit ||
          box.y1 > plan->height - limit)
        continue;
      gboolean free = TRUE;
      for (guint i = 0; i < n_obstacles && free; i++)
        free = !knnwb_plan_overlaps(&box, obstacles[i]);
      if (free && knnwb_grid_free(grid, plan->labels, &box)) {
        knnwb_grid_add(grid, plan->labels->len, &box);
        g_array_append_val(plan->labels, box);
        return TRUE;
      }
    }
  }
  return FALSE;
}

/* Labels in priority order; beyond label_limit nodes only the focus, its neighbours and
 * label_limit more (tried among the 4 x label_limit highest degrees). Obstacles: the title, the
 * legend and the focus discs. */
static void knnwb_plan_labels(KnnwbDrawingPlan *plan, const KnnwbDrawing *drawing, cairo_t *cr,
                              guint label_limit)
{
  guint n = drawing->nodes->len;
  const KnnwbDrawingNode *nodes = (const KnnwbDrawingNode *)(void *)drawing->nodes->data;
  g_autoptr(GArray) obstacles = g_array_new(FALSE, FALSE, sizeof(double[4]));
  if (plan->title != NULL) {
    double title[4] = {0, 0, plan->width, plan->area[1]};
    g_array_append_val(obstacles, title);
  }
  if (plan->legend_box[2] > 0)
    g_array_append_val(obstacles, plan->legend_box);
  for (guint v = 0; v < n; v++)
    if (nodes[v].focus) {
      double cx = plan->offset_x + plan->scale * nodes[v].x;
      double cy = plan->offset_y + plan->scale * nodes[v].y;
      double r = knnwb_drawing_plan_radius(plan, &nodes[v]);
      double disc[4] = {cx - r, cy - r, cx + r, cy + r};
      g_array_append_val(obstacles, disc);
    }
  guint n_first = 0;
  g_autofree guint *order = knnwb_plan_label_order(drawing, &n_first);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  guint hubs = 0, tried = 0;
  KnnwbLabelGrid grid;
  knnwb_grid_init(&grid, plan->width, plan->height);
  for (guint i = 0; i < n; i++) {
    const KnnwbDrawingNode *node = &nodes[order[i]];
    gboolean first = i < n_first;
    if (!first && n > label_limit && (hubs >= label_limit || tried >= 4 * label_limit))
      break;
    if (node->label == NULL || node->label[0] == '\0')
      continue;
    tried += !first;
    gboolean placed = knnwb_plan_place(plan, &grid, node, order[i], first, cr,
                                       (const double(*)[4])(void *)obstacles->data, obstacles->len);
    hubs += placed && !first;
  }
  knnwb_grid_clear(&grid);
}

/* Whether box overlaps a placed node or edge label. */
static gboolean knnwb_plan_taken(const KnnwbDrawingPlan *plan, const KnnwbLabelBox *box)
{
  const GArray *sets[2] = {plan->labels, plan->edge_labels};
  for (int s = 0; s < 2; s++)
    for (guint i = 0; i < sets[s]->len; i++) {
      const KnnwbLabelBox *other = &g_array_index(sets[s], KnnwbLabelBox, i);
      double b[4] = {other->x0, other->y0, other->x1, other->y1};
      if (knnwb_plan_overlaps(box, b))
        return TRUE;
    }
  return FALSE;
}

/* An edge from a focus to another node (directed: the focus's own out-edges, its k nearest). */
static gboolean knnwb_plan_focus_edge(const KnnwbDrawing *drawing, const KnnwbDrawingEdge *edge)
{
  const KnnwbDrawingNode *nodes = (const KnnwbDrawingNode *)(void *)drawing->nodes->data;
  gboolean from = nodes[edge->source].focus, to = nodes[edge->target].focus;
  return drawing->directed ? from && !to : from != to;
}

/* The focus's edges (at most 100) labelled with their r (else their distance) at the first of a
 * few points along their middle where the text overlaps no label and stays in the drawing's
 * area. */
static void knnwb_plan_edge_labels(KnnwbDrawingPlan *plan, const KnnwbDrawing *drawing, cairo_t *cr)
{
  const KnnwbDrawingNode *nodes = (const KnnwbDrawingNode *)(void *)drawing->nodes->data;
  guint focus_edges = 0;
  for (guint e = 0; e < drawing->edges->len; e++) {
    const KnnwbDrawingEdge *edge = &g_array_index(drawing->edges, KnnwbDrawingEdge, e);
    focus_edges += knnwb_plan_focus_edge(drawing, edge);
  }
  if (focus_edges == 0 || focus_edges > 100)
    return;
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, KNNWB_EDGE_LABEL_SIZE);
  cairo_font_extents_t font;
  cairo_font_extents(cr, &font);
  for (guint e = 0; e < drawing->edges->len; e++) {
    const KnnwbDrawingEdge *edge = &g_array_index(drawing->edges, KnnwbDrawingEdge, e);
    if (!knnwb_plan_focus_edge(drawing, edge))
      continue;
    char text[32];
    if (!knnwb_drawing_edge_label(edge, text, sizeof text))
      continue;
    cairo_text_extents_t extents;
    cairo_text_extents(cr, text, &extents);
    double w = extents.x_advance + 2, h = font.ascent + font.descent + 2;
    const KnnwbDrawingNode *a = &nodes[edge->source], *b = &nodes[edge->target];
    static const double along[5] = {0.5, 0.4, 0.6, 0.3, 0.7};
    for (int t = 0; t < 5; t++) {
      double x = plan->offset_x + plan->scale * (a->x + along[t] * (b->x - a->x));
      double y = plan->offset_y + plan->scale * (a->y + along[t] * (b->y - a->y));
      KnnwbLabelBox box = {e, x - w / 2, y - h / 2, x + w / 2, y + h / 2, FALSE};
      if (box.x0 < plan->area[0] || box.y0 < plan->area[1] || box.x1 > plan->area[2] ||
          box.y1 > plan->area[3] || knnwb_plan_taken(plan, &box))
        continue;
      g_array_append_val(plan->edge_labels, box);
      break;
    }
  }
}

KnnwbDrawingPlan *knnwb_drawing_plan_new(const KnnwbDrawing *drawing,
                                         const KnnwbRenderOptions *options, GError **error)
{
  g_autoptr(KnnwbDrawingPlan) plan = g_new0(KnnwbDrawingPlan, 1);
  plan->labels = g_array_new(FALSE, FALSE, sizeof(KnnwbLabelBox));
  plan->edge_labels = g_array_new(FALSE, FALSE, sizeof(KnnwbLabelBox));
  const char *color_by = options->color_by;
  if (color_by == NULL && knnwb_drawing_attribute(drawing, "cluster") != NULL)
    color_by = "cluster";
  if (!knnwb_drawing_colour_nodes(drawing, color_by, &plan->colours, error))
    return NULL;
  plan->title = options->title != NULL
                    ? (options->title[0] != '\0' ? g_strdup(options->title) : NULL)
                    : knnwb_plan_default_title(options, &plan->colours);
  plan->density = options->density || drawing->nodes->len > options->density_above;
  cairo_surface_t *scratch = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  cairo_t *cr = cairo_create(scratch);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  knnwb_plan_frame(plan, drawing, cr, options->width);
  if (!plan->density) {
    knnwb_plan_labels(plan, drawing, cr, options->label_limit);
    knnwb_plan_edge_labels(plan, drawing, cr);
  }
  cairo_destroy(cr);
  cairo_surface_destroy(scratch);
  return g_steal_pointer(&plan);
}

#else

KnnwbDrawingPlan *knnwb_drawing_plan_new(const KnnwbDrawing *drawing,
                                         const KnnwbRenderOptions *options, GError **error)
{
  (void)drawing, (void)options;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "this knnwb was built without cairo (libcairo2-dev; cmake -DKNNWB_CAIRO=ON)");
  return NULL;
}

#endif
