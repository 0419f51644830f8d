/*
 * Appearance: the defaults of the drawing options, node sizes from the spacing of drawn
 * neighbours, similarity weights and edge widths from the distances, cluster colours, and the
 * setup the GML and GraphML writers start from (given coordinates, a computed layout, no layout,
 * focus flags).
 */
#include <knnwb/drawing.h>
#include <knnwb/error.h>

#include <glib.h>
#include <math.h>
#include <string.h>

/* A path 0 - 1 - ... - (n - 1) with distances 1, 2, ..., n - 1. */
static void path_graph(igraph_integer_t n, igraph_t *graph, igraph_vector_t *weights)
{
  igraph_vector_int_t edges;
  igraph_vector_int_init(&edges, 2 * (n - 1));
  igraph_vector_init(weights, n - 1);
  for (igraph_integer_t e = 0; e < n - 1; e++) {
    VECTOR(edges)[2 * e] = e;
    VECTOR(edges)[2 * e + 1] = e + 1;
    VECTOR(*weights)[e] = (double)(e + 1);
  }
  igraph_create(graph, &edges, n, IGRAPH_UNDIRECTED);
  igraph_vector_int_destroy(&edges);
}

static void test_options_defaults(void)
{
  KnnwbDrawingOptions options;
  memset(&options, 0xff, sizeof options);
  knnwb_drawing_options_init(&options);
  g_assert_cmpint(options.layout, ==, KNNWB_LAYOUT_AUTO);
  g_assert_cmpint(options.fr_max_vertices, ==, 20000);
  g_assert_cmpuint(options.seed, ==, 42);
  g_assert_null(options.coordinates);
  g_assert_null(options.focus);
  g_assert_cmpfloat(options.node_size, ==, 30.0);
  g_assert_cmpfloat(options.font_size, ==, 12.0);
  g_assert_cmpfloat(options.edge_width, ==, 1.0);
}

/* Nodes at most half the spacing wide, the font scaled with them; weights and widths from the
 * distance range. */
static void test_appearance(void)
{
  igraph_t graph;
  igraph_vector_t weights;
  path_graph(5, &graph, &weights);
  igraph_matrix_t coordinates;
  igraph_matrix_init(&coordinates, 5, 2);
  for (igraph_integer_t v = 0; v < 5; v++)
    MATRIX(coordinates, v, 0) = 10.0 * (double)v; /* neighbours 10 apart */
  KnnwbDrawingOptions options;
  knnwb_drawing_options_init(&options);
  KnnwbAppearance appearance;
  knnwb_drawing_appearance_init(&appearance, &graph, &weights, &options, &coordinates);
  g_assert_cmpfloat(appearance.node_size, ==, 5.0);
  g_assert_cmpfloat(appearance.font_size, ==, 2.0);
  g_assert_cmpfloat(appearance.distance_lo, ==, 1.0);
  g_assert_cmpfloat(appearance.distance_hi, ==, 4.0);
  g_assert_cmpfloat(appearance.distance_shift, ==, 0.0);
  g_assert_cmpfloat(knnwb_drawing_similarity(&appearance, 1.0), ==, 0.5);
  g_assert_cmpfloat(knnwb_drawing_edge_width(&appearance, 1.0), ==, 3.0);
  g_assert_cmpfloat(knnwb_drawing_edge_width(&appearance, 4.0), ==, 0.5);
  g_assert_cmpfloat(knnwb_drawing_edge_width(&appearance, NAN), ==, 1.75);
  /* Not drawn: the options' sizes; a negative distance shifts the similarities. */
  VECTOR(weights)[0] = -1.0;
  knnwb_drawing_appearance_init(&appearance, &graph, &weights, &options, NULL);
  g_assert_cmpfloat(appearance.node_size, ==, 30.0);
  g_assert_cmpfloat(appearance.font_size, ==, 12.0);
  g_assert_cmpfloat(appearance.distance_shift, ==, 1.0);
  g_assert_cmpfloat(knnwb_drawing_similarity(&appearance, -1.0), ==, 1.0);
  igraph_matrix_destroy(&coordinates);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
}

/* "#RRGGBB", the first ids all different, the same id always the same colour. */
static void test_cluster_colours(void)
{
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (igraph_integer_t c = 0; c < 60; c++) {
    char hex[8], again[8];
    knnwb_drawing_cluster_colour(c, hex);
    knnwb_drawing_cluster_colour(c, again);
    g_assert_cmpstr(hex, ==, again);
    g_assert_cmpint(strlen(hex), ==, 7);
    g_assert_cmpint(hex[0], ==, '#');
    for (int i = 1; i < 7; i++)
      g_assert_true(g_ascii_isxdigit(hex[i]));
    g_assert_false(g_hash_table_contains(seen, hex));
    g_hash_table_add(seen, g_strdup(hex));
  }
}

/* The writers' setup: the defaults without options, given coordinates used as they are, a layout
 * computed when asked for, nothing for layout none, focus flags; clear is safe twice. */
static void test_setup(void)
{
  igraph_t graph;
  igraph_vector_t weights;
  path_graph(6, &graph, &weights);
  GError *error = NULL;
  KnnwbDrawingSetup setup;
  g_assert_true(knnwb_drawing_setup_init(&setup, "x.gml", &graph, &weights, NULL, NULL, &error));
  g_assert_no_error(error);
  g_assert_true(setup.options == &setup.defaults);
  g_assert_nonnull(setup.coordinates); /* AUTO: FR at 6 vertices */
  g_assert_cmpint(igraph_matrix_nrow(setup.coordinates), ==, 6);
  g_assert_null(setup.focus);
  knnwb_drawing_setup_clear(&setup);
  knnwb_drawing_setup_clear(&setup);

  KnnwbDrawingOptions options;
  knnwb_drawing_options_init(&options);
  options.layout = KNNWB_LAYOUT_NONE;
  igraph_vector_int_t focus;
  igraph_vector_int_init(&focus, 1);
  VECTOR(focus)[0] = 4;
  options.focus = &focus;
  g_assert_true(
      knnwb_drawing_setup_init(&setup, "x.gml", &graph, &weights, &options, NULL, &error));
  g_assert_null(setup.coordinates);
  g_assert_nonnull(setup.focus);
  for (int v = 0; v < 6; v++)
    g_assert_cmpint(setup.focus[v], ==, v == 4);
  g_assert_cmpfloat(setup.appearance.node_size, ==, 30.0);
  knnwb_drawing_setup_clear(&setup);

  igraph_matrix_t given;
  igraph_matrix_init(&given, 6, 2);
  for (igraph_integer_t v = 0; v < 6; v++)
    MATRIX(given, v, 1) = 100.0 * (double)v;
  options.coordinates = &given;
  options.layout = KNNWB_LAYOUT_FR;
  g_assert_true(
      knnwb_drawing_setup_init(&setup, "x.gml", &graph, &weights, &options, NULL, &error));
  g_assert_true(setup.coordinates == &given);
  knnwb_drawing_setup_clear(&setup);

  /* A cancelled layout fails with nothing left to clear. */
  options.coordinates = NULL;
  gint cancel = 1;
  KnnwbWriteControl control = {.cancel = &cancel};
  g_assert_false(
      knnwb_drawing_setup_init(&setup, "x.gml", &graph, &weights, &options, &control, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
  g_clear_error(&error);
  igraph_matrix_destroy(&given);
  igraph_vector_int_destroy(&focus);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_add_func("/drawing/options-defaults", test_options_defaults);
  g_test_add_func("/drawing/appearance", test_appearance);
  g_test_add_func("/drawing/cluster-colours", test_cluster_colours);
  g_test_add_func("/drawing/setup", test_setup);
  return g_test_run();
}
