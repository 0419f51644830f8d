/*
 * Pictures checked pixel by pixel: small GMLs with known geometry (each node its own fill colour)
 * drawn as PNG by knnwb_drawing_render, decoded with cairo; every edge the GML names is drawn along
 * the segment between its nodes' discs, no line is drawn where the GML has no edge, and nothing
 * touches the picture's border (nodes and labels at the edge of the layout are not cut); the legend
 * holds the palette's colours (swatches in its box, counts in the model), placed labels never
 * overlap and the focus and its neighbours are all labelled, directed edges end in arrowheads, and
 * a large graph is a density image with its clusters where their nodes are.
 */
#include <knnwb/drawing.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "picture_check.h"

/* A node of a test GML: its id, position, fill and label. */
typedef struct {
  int id;
  double x, y;
  guint32 fill;
  const char *label;
} TestNode;

static char *write_gml(const char *dir, const char *name, const TestNode *nodes, size_t n,
                       const int (*edges)[2], size_t m)
{
  GString *text = g_string_new("graph [\n  directed 0\n");
  for (size_t v = 0; v < n; v++)
    g_string_append_printf(text,
                           "  node [ id %d label \"%s\"\n    graphics [ x %.1f y %.1f w 30.0 h "
                           "30.0 type \"ellipse\" fill \"#%06X\" outline \"#404040\" ] ]\n",
                           nodes[v].id, nodes[v].label, nodes[v].x, nodes[v].y, nodes[v].fill);
  for (size_t e = 0; e < m; e++)
    g_string_append_printf(text,
                           "  edge [ source %d target %d graphics [ fill \"#A0A0A0\" width 1.0 ] "
                           "]\n",
                           edges[e][0], edges[e][1]);
  g_string_append(text, "]\n");
  char *path = g_build_filename(dir, name, NULL);
  g_assert_true(g_file_set_contents(path, text->str, (gssize)text->len, NULL));
  g_string_free(text, TRUE);
  return path;
}

/* Draws path as a PNG width pixels wide and decodes it; FALSE without cairo. */
static gboolean draw(const char *gml, const char *png, int width, KnnwbTestPicture *picture)
{
  GError *error = NULL;
  g_autoptr(KnnwbDrawing) drawing = knnwb_formats_read_gml(gml, &error);
  g_assert_no_error(error);
  if (!knnwb_drawing_render(drawing, png, KNNWB_PICTURE_PNG, width, 100, TRUE, NULL, NULL, NULL,
                            &error)) {
    g_assert_true(g_error_matches(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT));
    g_clear_error(&error);
    return FALSE;
  }
  *picture = knnwb_test_picture_read(png);
  return TRUE;
}

/* The darkest pixel along the middle of the segment between two node centres (away from the
 * discs and labels at its ends). */
static int segment_darkest_max(const KnnwbTestPicture *picture, const KnnwbTestBlob *a,
                               const KnnwbTestBlob *b, double from, double to)
{
  int lightest = 0;
  for (double t = from; t <= to + 1e-9; t += 0.02) {
    double x = a->x + t * (b->x - a->x), y = a->y + t * (b->y - a->y);
    lightest = MAX(lightest, knnwb_test_picture_darkest(picture, x, y, 1));
  }
  return lightest;
}

static int segment_darkest_min(const KnnwbTestPicture *picture, const KnnwbTestBlob *a,
                               const KnnwbTestBlob *b, double from, double to)
{
  int darkest = 255;
  for (double t = from; t <= to + 1e-9; t += 0.02) {
    double x = a->x + t * (b->x - a->x), y = a->y + t * (b->y - a->y);
    darkest = MIN(darkest, knnwb_test_picture_darkest(picture, x, y, 2));
  }
  return darkest;
}

/* Checks a picture of nodes against the GML's edges: each pair with an edge is joined by a line
 * visible everywhere along its middle; each pair without one has only background along the
 * stretches that no other edge crosses (from..to given per pair). */
static void check_edges(const KnnwbTestPicture *picture, const TestNode *nodes, size_t n,
                        const int (*edges)[2], size_t m)
{
  KnnwbTestBlob blobs[8];
  g_assert_cmpuint(n, <=, G_N_ELEMENTS(blobs));
  for (size_t v = 0; v < n; v++) {
    blobs[v] = knnwb_test_picture_find(picture, nodes[v].fill);
    /* A whole disc: about as many pixels as its bounding box's inscribed circle holds. */
    g_assert_cmpuint(blobs[v].count, >, 20);
    double diameter = blobs[v].x1 - blobs[v].x0 + 1.0;
    g_assert_cmpfloat(fabs(diameter - (blobs[v].y1 - blobs[v].y0 + 1.0)), <=, 2.0);
    g_assert_cmpfloat(blobs[v].count, >, 0.6 * G_PI / 4 * diameter * diameter);
  }
  for (size_t a = 0; a < n; a++)
    for (size_t b = a + 1; b < n; b++) {
      gboolean joined = FALSE;
      for (size_t e = 0; e < m; e++)
        joined |= (edges[e][0] == nodes[a].id && edges[e][1] == nodes[b].id) ||
                  (edges[e][1] == nodes[a].id && edges[e][0] == nodes[b].id);
      if (joined) {
        int lightest = segment_darkest_max(picture, &blobs[a], &blobs[b], 0.3, 0.7);
        if (lightest > 235)
          g_error("edge %d-%d: a pixel of %d along its middle (want a drawn line)", nodes[a].id,
                  nodes[b].id, lightest);
      } else {
        /* Both thirds, leaving the middle where the other diagonal may cross. */
        int darkest = MIN(segment_darkest_min(picture, &blobs[a], &blobs[b], 0.3, 0.42),
                          segment_darkest_min(picture, &blobs[a], &blobs[b], 0.58, 0.7));
        if (darkest < 250)
          g_error("no edge %d-%d in the GML, but a pixel of %d along it", nodes[a].id, nodes[b].id,
                  darkest);
      }
    }
}

/* A rectangle: two edges from one corner and one side (ids not 0-based, one node alone). */
static void test_square(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-pixels-XXXXXX", NULL);
  static const TestNode nodes[] = {{10, 0, 0, 0x1F77B4, "A"},
                                   {11, 300, 0, 0xFF7F0E, "B"},
                                   {12, 300, 200, 0x2CA02C, "C"},
                                   {13, 0, 200, 0x9467BD, "D"}};
  static const int edges[][2] = {{10, 11}, {10, 12}, {11, 12}};
  g_autofree char *gml = write_gml(dir, "square.gml", nodes, 4, edges, 3);
  g_autofree char *png = g_build_filename(dir, "square.png", NULL);
  KnnwbTestPicture picture;
  if (!draw(gml, png, 400, &picture)) {
    g_test_skip("built without cairo");
  } else {
    check_edges(&picture, nodes, 4, edges, 3);
    g_assert_true(knnwb_test_picture_border_white(&picture, 3));
    knnwb_test_picture_clear(&picture);
  }
  g_unlink(png);
  g_unlink(gml);
  g_rmdir(dir);
}

/* A triangle whose right-most node carries a long label and whose nodes sit on the layout's
 * bounding box: the label and the discs stay inside the picture; a path of two edges. */
static void test_border(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-pixels-XXXXXX", NULL);
  static const TestNode nodes[] = {{0, 0, 0, 0xD62728, "left-most-node-with-a-long-label"},
                                   {1, 400, 60, 0x17BECF, "right-most-node-with-a-long-label"},
                                   {2, 150, 300, 0xBCBD22, "bottom-node-with-a-long-label"}};
  static const int edges[][2] = {{0, 1}, {1, 2}};
  g_autofree char *gml = write_gml(dir, "triangle.gml", nodes, 3, edges, 2);
  g_autofree char *png = g_build_filename(dir, "triangle.png", NULL);
  KnnwbTestPicture picture;
  for (int width = 300; width <= 900; width += 300) {
    if (!draw(gml, png, width, &picture)) {
      g_test_skip("built without cairo");
      break;
    }
    check_edges(&picture, nodes, 3, edges, 2);
    g_assert_true(knnwb_test_picture_border_white(&picture, 3));
    knnwb_test_picture_clear(&picture);
  }
  g_unlink(png);
  g_unlink(gml);
  g_rmdir(dir);
}

/* A GML of n nodes on a small disc (crowded: labels must give way) with a string attribute
 * lineage (B, T, NK by 3), a number age, node 0 the focus joined to nodes 1..8 (and to 9, whose
 * edge to the node 9 places before it reaches the focus). */
static char *crowded_gml(const char *dir, int n, gboolean directed)
{
  static const char *lineages[3] = {"B", "T", "NK"};
  GString *text = g_string_new(NULL);
  g_string_append_printf(text, "graph [\n directed %d\n", directed);
  for (int v = 0; v < n; v++) {
    double angle = v * 2.399963, radius = 14.0 * sqrt((double)v);
    g_string_append_printf(text,
                           " node [ id %d label \"node-with-a-long-name-%d\" lineage \"%s\" age "
                           "%d.5 score \"%d.25\" %s graphics [ x %.3f y %.3f w 12 h 12 ] ]\n",
                           v, v, lineages[v % 3], 20 + v, v, v == 0 ? "focus 1" : "",
                           radius * cos(angle), radius * sin(angle));
  }
  for (int v = 1; v <= 8 && v < n; v++)
    g_string_append_printf(text, " edge [ source 0 target %d weight 0.%d r 0.%d ]\n", v, v, 9 - v);
  for (int v = 9; v < n; v++)
    g_string_append_printf(text, " edge [ source %d target %d weight 0.5 ]\n", v, v - 9);
  g_string_append(text, "]\n");
  char *path = g_build_filename(dir, directed ? "crowded-directed.gml" : "crowded.gml", NULL);
  g_assert_true(g_file_set_contents(path, text->str, (gssize)text->len, NULL));
  g_string_free(text, TRUE);
  return path;
}

static guint32 rgb_word(const double rgb[3])
{
  return (guint32)lround(rgb[0] * 255) << 16 | (guint32)lround(rgb[1] * 255) << 8 |
         (guint32)lround(rgb[2] * 255);
}

/* Pixels of exactly colour inside box (x0 y0 x1 y1). */
static size_t count_in_box(const KnnwbTestPicture *picture, guint32 colour, const double box[4])
{
  size_t count = 0;
  for (int y = (int)box[1]; y < (int)ceil(box[3]); y++)
    for (int x = (int)box[0]; x < (int)ceil(box[2]); x++) {
      const guint8 *p = knnwb_test_picture_at(picture, x, y);
      count += ((guint32)p[0] << 16 | (guint32)p[1] << 8 | p[2]) == colour;
    }
  return count;
}

/* --color-by a string attribute: three categories with their counts in the model, each colour
 * filling a swatch in the legend's box of the PNG and nodes outside it; a numeric attribute gets
 * the scale; an unknown one is refused naming those there are. */
static void test_legend(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-pixels-XXXXXX", NULL);
  g_autofree char *gml = crowded_gml(dir, 60, FALSE);
  g_autofree char *png = g_build_filename(dir, "legend.png", NULL);
  GError *error = NULL;
  g_autoptr(KnnwbDrawing) drawing = knnwb_formats_read_gml(gml, &error);
  g_assert_no_error(error);
  KnnwbRenderOptions options;
  knnwb_drawing_render_options_init(&options);
  options.width = 700;
  options.color_by = "lineage";
  options.name = gml;
  g_autoptr(KnnwbDrawingPlan) plan = knnwb_drawing_plan_new(drawing, &options, &error);
  if (plan == NULL) {
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    g_test_skip("built without cairo");
    g_unlink(gml);
    g_rmdir(dir);
    return;
  }
  g_assert_false(plan->colours.numeric);
  g_assert_cmpuint(plan->colours.legend->len, ==, 3);
  g_assert_nonnull(strstr(plan->title, "lineage"));
  g_assert_cmpfloat(plan->legend_box[2], >, plan->legend_box[0]);
  g_assert_true(knnwb_drawing_render_picture(drawing, png, KNNWB_PICTURE_PNG, &options, NULL, NULL,
                                             NULL, &error));
  g_assert_no_error(error);
  KnnwbTestPicture picture = knnwb_test_picture_read(png);
  g_assert_cmpint(picture.width, ==, plan->width);
  g_assert_cmpint(picture.height, ==, plan->height);
  double whole[4] = {0, 0, picture.width, picture.height};
  for (guint i = 0; i < 3; i++) {
    const KnnwbLegendEntry *entry = &g_array_index(plan->colours.legend, KnnwbLegendEntry, i);
    g_assert_cmpuint(entry->count, ==, 20);
    guint32 colour = rgb_word(entry->rgb);
    /* A swatch (at least 6 x 6 of its colour) in the legend, and nodes beyond it. */
    size_t in_legend = count_in_box(&picture, colour, plan->legend_box);
    if (in_legend < 36)
      g_error("legend swatch of %s: %zu pixels of #%06X", entry->text, in_legend, colour);
    g_assert_cmpuint(count_in_box(&picture, colour, whole), >, in_legend + 20);
  }
  g_assert_true(knnwb_test_picture_border_white(&picture, 3));
  knnwb_test_picture_clear(&picture);
  /* Numbers: a scale from the lowest to the highest age. */
  options.color_by = "age";
  KnnwbDrawingPlan *numeric = knnwb_drawing_plan_new(drawing, &options, &error);
  g_assert_no_error(error);
  g_assert_true(numeric->colours.numeric);
  g_assert_cmpfloat(numeric->colours.lo, ==, 20.5);
  g_assert_cmpfloat(numeric->colours.hi, ==, 79.5);
  knnwb_drawing_plan_free(numeric);
  /* Numbers written as strings are numbers. */
  options.color_by = "score";
  numeric = knnwb_drawing_plan_new(drawing, &options, &error);
  g_assert_no_error(error);
  g_assert_true(numeric->colours.numeric);
  g_assert_cmpfloat(numeric->colours.hi, ==, 59.25);
  knnwb_drawing_plan_free(numeric);
  options.color_by = "colour";
  g_assert_null(knnwb_drawing_plan_new(drawing, &options, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull(strstr(error->message, "lineage, age, score"));
  g_clear_error(&error);
  g_unlink(png);
  g_unlink(gml);
  g_rmdir(dir);
}

/* Labels of a crowded drawing: pairwise disjoint boxes inside the picture, the focus and all its
 * neighbours among them; each placed box holds dark text pixels in the PNG; at most the limit
 * beyond them when the drawing has more nodes than the limit. */
static void test_labels(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-pixels-XXXXXX", NULL);
  g_autofree char *gml = crowded_gml(dir, 120, FALSE);
  g_autofree char *png = g_build_filename(dir, "labels.png", NULL);
  GError *error = NULL;
  g_autoptr(KnnwbDrawing) drawing = knnwb_formats_read_gml(gml, &error);
  g_assert_no_error(error);
  for (guint limit = 10; limit <= 200; limit += 190) {
    KnnwbRenderOptions options;
    knnwb_drawing_render_options_init(&options);
    options.width = 900;
    options.label_limit = limit;
    g_autoptr(KnnwbDrawingPlan) plan = knnwb_drawing_plan_new(drawing, &options, &error);
    if (plan == NULL) {
      g_clear_error(&error);
      g_test_skip("built without cairo");
      break;
    }
    GArray *labels = plan->labels;
    gboolean labelled[120] = {FALSE};
    for (guint i = 0; i < labels->len; i++) {
      const KnnwbLabelBox *a = &g_array_index(labels, KnnwbLabelBox, i);
      labelled[a->node] = TRUE;
      g_assert_cmpfloat(a->x0, >=, 3);
      g_assert_cmpfloat(a->y0, >=, 3);
      g_assert_cmpfloat(a->x1, <=, plan->width - 3);
      g_assert_cmpfloat(a->y1, <=, plan->height - 3);
      for (guint j = i + 1; j < labels->len; j++) {
        const KnnwbLabelBox *b = &g_array_index(labels, KnnwbLabelBox, j);
        gboolean overlap = a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
        if (overlap)
          g_error("labels of nodes %u and %u overlap", a->node, b->node);
      }
    }
    for (int v = 0; v <= 9; v++) /* 1..8, and 9 whose edge reaches node 0 */
      if (!labelled[v])
        g_error("node %d (the focus or its neighbour) has no label", v);
    /* The focus's edges carry their r, clear of every node label and of each other. */
    g_assert_cmpuint(plan->edge_labels->len, >, 0);
    g_assert_cmpuint(plan->edge_labels->len, <=, 8);
    for (guint i = 0; i < plan->edge_labels->len; i++) {
      const KnnwbLabelBox *a = &g_array_index(plan->edge_labels, KnnwbLabelBox, i);
      g_assert_cmpuint(a->node, <, 8); /* the edges 0-1 .. 0-8 come first in the file */
      for (guint j = 0; j < labels->len + plan->edge_labels->len; j++) {
        const KnnwbLabelBox *b =
            j < labels->len ? &g_array_index(labels, KnnwbLabelBox, j)
                            : &g_array_index(plan->edge_labels, KnnwbLabelBox, j - labels->len);
        if (b != a && a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1)
          g_error("the label of edge %u overlaps another label", a->node);
      }
    }
    g_assert_cmpuint(labels->len, <=, 10 + limit);
    g_assert_cmpuint(labels->len, >, 10);
    g_assert_true(knnwb_drawing_render_picture(drawing, png, KNNWB_PICTURE_PNG, &options, NULL,
                                               NULL, NULL, &error));
    g_assert_no_error(error);
    KnnwbTestPicture picture = knnwb_test_picture_read(png);
    for (guint i = 0; i < labels->len; i++) {
      const KnnwbLabelBox *a = &g_array_index(labels, KnnwbLabelBox, i);
      int darkest = 255;
      for (double y = a->y0; y < a->y1; y += 1)
        for (double x = a->x0; x < a->x1; x += 1)
          darkest = MIN(darkest, knnwb_test_picture_darkest(&picture, x, y, 0));
      g_assert_cmpint(darkest, <, 100);
    }
    g_assert_true(knnwb_test_picture_border_white(&picture, 3));
    knnwb_test_picture_clear(&picture);
  }
  g_unlink(png);
  g_unlink(gml);
  g_rmdir(dir);
}

/* A directed edge ends in an arrowhead at its target's rim: more dark pixels beside the line just
 * outside the target than just outside the source. */
static void test_arrows(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-pixels-XXXXXX", NULL);
  static const char text[] = "graph [ directed 1\n"
                             " node [ id 0 graphics [ x 0 y 0 w 30 h 30 fill \"#1F77B4\" ] ]\n"
                             " node [ id 1 graphics [ x 400 y 0 w 30 h 30 fill \"#FF7F0E\" ] ]\n"
                             " node [ id 2 graphics [ x 200 y 200 w 30 h 30 fill \"#2CA02C\" ] ]\n"
                             " edge [ source 0 target 1 ]\n]\n";
  g_autofree char *gml = g_build_filename(dir, "arrow.gml", NULL);
  g_assert_true(g_file_set_contents(gml, text, -1, NULL));
  g_autofree char *png = g_build_filename(dir, "arrow.png", NULL);
  KnnwbTestPicture picture;
  if (!draw(gml, png, 500, &picture)) {
    g_test_skip("built without cairo");
  } else {
    KnnwbTestBlob a = knnwb_test_picture_find(&picture, 0x1F77B4);
    KnnwbTestBlob b = knnwb_test_picture_find(&picture, 0xFF7F0E);
    double r = (b.x1 - b.x0) / 2.0;
    /* Pixels off the line's axis (3 to 4 pixels above and below), 4 to 8 pixels from each rim. */
    int near_target = 0, near_source = 0;
    for (double d = r + 4; d <= r + 8; d += 1)
      for (int side = -1; side <= 1; side += 2) {
        near_target += knnwb_test_picture_darkest(&picture, b.x - d, b.y + 3 * side, 0) < 200;
        near_source += knnwb_test_picture_darkest(&picture, a.x + d, a.y + 3 * side, 0) < 200;
      }
    g_assert_cmpint(near_target, >, near_source);
    g_assert_cmpint(near_source, ==, 0);
    knnwb_test_picture_clear(&picture);
  }
  g_unlink(png);
  g_unlink(gml);
  g_rmdir(dir);
}

/* More nodes than the density threshold: a density image. Three clusters of 8,000 nodes on three
 * separate squares: the legend's swatches with the counts, colour over each square's centre, only
 * background between them and at the border. */
static void test_density(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-pixels-XXXXXX", NULL);
  GString *text = g_string_new("graph [\n directed 0\n");
  GRand *rand = g_rand_new_with_seed(7);
  static const double corner[3][2] = {{0, 0}, {3000, 0}, {1500, 2400}};
  for (int v = 0; v < 24000; v++) {
    int c = v % 3;
    g_string_append_printf(text, " node [ id %d cluster %d graphics [ x %.1f y %.1f ] ]\n", v, c,
                           corner[c][0] + g_rand_double_range(rand, 0, 1000),
                           corner[c][1] + g_rand_double_range(rand, 0, 1000));
  }
  g_rand_free(rand);
  g_string_append(text, "]\n");
  g_autofree char *gml = g_build_filename(dir, "dense.gml", NULL);
  g_assert_true(g_file_set_contents(gml, text->str, (gssize)text->len, NULL));
  g_string_free(text, TRUE);
  g_autofree char *png = g_build_filename(dir, "dense.png", NULL);
  GError *error = NULL;
  g_autoptr(KnnwbDrawing) drawing = knnwb_formats_read_gml(gml, &error);
  g_assert_no_error(error);
  KnnwbRenderOptions options;
  knnwb_drawing_render_options_init(&options);
  options.width = 600;
  g_autoptr(KnnwbDrawingPlan) plan = knnwb_drawing_plan_new(drawing, &options, &error);
  if (plan == NULL) {
    g_clear_error(&error);
    g_test_skip("built without cairo");
  } else {
    g_assert_true(plan->density);
    g_assert_cmpuint(plan->labels->len, ==, 0);
    g_assert_true(knnwb_drawing_render_picture(drawing, png, KNNWB_PICTURE_PNG, &options, NULL,
                                               NULL, NULL, &error));
    g_assert_no_error(error);
    KnnwbTestPicture picture = knnwb_test_picture_read(png);
    for (guint i = 0; i < 3; i++) {
      const KnnwbLegendEntry *entry = &g_array_index(plan->colours.legend, KnnwbLegendEntry, i);
      g_assert_cmpuint(entry->count, ==, 8000);
      g_assert_cmpuint(count_in_box(&picture, rgb_word(entry->rgb), plan->legend_box), >=, 36);
      /* Inside the square, off its centre (where the name is written): coloured. */
      double x = plan->offset_x + plan->scale * (corner[i][0] + 250);
      double y = plan->offset_y + plan->scale * (corner[i][1] + 250);
      g_assert_cmpint(knnwb_test_picture_darkest(&picture, x, y, 2), <, 200);
    }
    /* Between the squares: nothing. */
    double gap_x = plan->offset_x + plan->scale * 2000, gap_y = plan->offset_y + plan->scale * 500;
    g_assert_cmpint(knnwb_test_picture_darkest(&picture, gap_x, gap_y, 3), ==, 255);
    g_assert_true(knnwb_test_picture_border_white(&picture, 3));
    knnwb_test_picture_clear(&picture);
  }
  g_unlink(png);
  g_unlink(gml);
  g_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/drawing/pixels/square", test_square);
  g_test_add_func("/drawing/pixels/border", test_border);
  g_test_add_func("/drawing/pixels/legend", test_legend);
  g_test_add_func("/drawing/pixels/labels", test_labels);
  g_test_add_func("/drawing/pixels/arrows", test_arrows);
  g_test_add_func("/drawing/pixels/density", test_density);
  return g_test_run();
}
