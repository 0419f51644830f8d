/*
 * Pictures checked pixel by pixel: small GMLs with known geometry (each node its own fill colour)
 * drawn as PNG by knnwb_drawing_render, decoded with cairo; every edge the GML names is drawn along
 * the segment between its nodes' discs, no line is drawn where the GML has no edge, and nothing
 * touches the picture's border (nodes and labels at the edge of the layout are not cut).
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

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/drawing/pixels/square", test_square);
  g_test_add_func("/drawing/pixels/border", test_border);
  return g_test_run();
}
