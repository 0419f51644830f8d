/*
 * Rendering: a laid-out GML written by the GML writer, read back as a drawing
 * (knnwb_formats_read_gml) and drawn as PNG, SVG and PDF; a raised cancel flag stops the drawing
 * and leaves no file; progress reaches the total. Skipped where knnwb was built without cairo.
 */
#include <knnwb/drawing.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

static void count_progress(uint64_t done, uint64_t total, void *data)
{
  g_assert_cmpuint(done, <=, total);
  *(uint64_t *)data = done;
}

/* A ring of n vertices in two clusters, one focus vertex, written as laid-out GML into dir. */
static char *ring_gml(const char *dir, igraph_integer_t n)
{
  igraph_t graph;
  igraph_ring(&graph, n, IGRAPH_UNDIRECTED, FALSE, TRUE);
  igraph_vector_t weights;
  igraph_vector_init(&weights, igraph_ecount(&graph));
  igraph_vector_fill(&weights, 0.5);
  igraph_vector_int_t membership, focus;
  igraph_vector_int_init(&membership, n);
  for (igraph_integer_t v = 0; v < n; v++)
    VECTOR(membership)[v] = v < n / 2 ? 0 : 1;
  igraph_vector_int_init(&focus, 1);
  KnnwbDrawingOptions options;
  knnwb_drawing_options_init(&options);
  options.layout = KNNWB_LAYOUT_FR;
  options.focus = &focus;
  KnnwbGraphOutput output = {
      .graph = &graph, .weights = &weights, .membership = &membership, .gml = &options};
  char *path = g_build_filename(dir, "ring.gml", NULL);
  GError *error = NULL;
  g_assert_true(knnwb_formats_write_gml(path, &output, &error));
  g_assert_no_error(error);
  igraph_vector_int_destroy(&focus);
  igraph_vector_int_destroy(&membership);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
  return path;
}

static void test_render(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-drawing-XXXXXX", NULL);
  g_autofree char *gml = ring_gml(dir, 12);
  GError *error = NULL;
  g_autoptr(KnnwbDrawing) drawing = knnwb_formats_read_gml(gml, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(drawing->nodes->len, ==, 12);
  g_assert_cmpuint(drawing->edges->len, ==, 12);
  g_assert_false(drawing->directed);
  g_assert_true(g_array_index(drawing->nodes, KnnwbDrawingNode, 0).focus);
  g_assert_true(g_array_index(drawing->nodes, KnnwbDrawingNode, 0).hexagon);
  static const struct {
    const char *name;
    KnnwbPictureFormat format;
    const char *magic;
  } pictures[] = {{"ring.png", KNNWB_PICTURE_PNG, "\x89PNG"},
                  {"ring.svg", KNNWB_PICTURE_SVG, "<?xml"},
                  {"ring.pdf", KNNWB_PICTURE_PDF, "%PDF"}};
  for (size_t i = 0; i < G_N_ELEMENTS(pictures); i++) {
    g_autofree char *path = g_build_filename(dir, pictures[i].name, NULL);
    uint64_t done = 0;
    gboolean ok = knnwb_drawing_render(drawing, path, pictures[i].format, 200, 100, TRUE, NULL,
                                       count_progress, &done, &error);
    if (!ok && g_error_matches(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT)) {
      g_clear_error(&error);
      g_test_skip("built without cairo");
      break;
    }
    g_assert_no_error(error);
    g_assert_cmpuint(done, ==, 24);
    g_autofree char *bytes = NULL;
    gsize length = 0;
    g_assert_true(g_file_get_contents(path, &bytes, &length, NULL));
    g_assert_cmpuint(length, >, strlen(pictures[i].magic));
    g_assert_true(memcmp(bytes, pictures[i].magic, strlen(pictures[i].magic)) == 0);
    g_unlink(path);
  }
  /* Cancelled: an error and no picture. */
  gint cancel = 1;
  g_autofree char *cancelled = g_build_filename(dir, "cancelled.png", NULL);
  g_assert_false(knnwb_drawing_render(drawing, cancelled, KNNWB_PICTURE_PNG, 200, 100, TRUE,
                                      &cancel, NULL, NULL, &error));
  g_assert_true(g_error_matches(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED) ||
                g_error_matches(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT));
  g_clear_error(&error);
  g_assert_false(g_file_test(cancelled, G_FILE_TEST_EXISTS));
  g_unlink(gml);
  g_rmdir(dir);
}

/* The model on its own: an empty drawing, freed with its labels; NULL is fine. */
static void test_model(void)
{
  KnnwbDrawing *drawing = knnwb_drawing_new();
  g_assert_cmpuint(drawing->nodes->len, ==, 0);
  g_assert_cmpuint(drawing->edges->len, ==, 0);
  KnnwbDrawingNode node = {.label = g_strdup("a")};
  g_array_append_val(drawing->nodes, node);
  knnwb_drawing_free(drawing);
  knnwb_drawing_free(NULL);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_add_func("/drawing/render", test_render);
  g_test_add_func("/drawing/model", test_model);
  return g_test_run();
}
