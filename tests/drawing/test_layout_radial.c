/*
 * The radial layout of a neighbourhood: the focus at the centre, its neighbours on one ring in the
 * order of their distance (clockwise from the top), each second-order vertex farther out and
 * nearer in angle to the neighbour that brought it than to any other; the caller's hop counts
 * decide the rings; unreached vertices outside; bad arguments refused.
 */
#include <knnwb/drawing.h>
#include <knnwb/error.h>

#include <glib.h>
#include <math.h>

/* The angle from a to b, in [0, pi]. */
static double angle_between(double a, double b)
{
  double d = fabs(fmod(a - b, 2 * G_PI));
  return d > G_PI ? 2 * G_PI - d : d;
}

static void test_radial(void)
{
  /* Focus 0; neighbours 1..6 at distances 0.6, 0.1, 0.5, 0.2, 0.4, 0.3; each neighbour brings
   * two vertices of its own (7..18); vertex 19 is unreached. */
  igraph_vector_int_t edges;
  igraph_vector_int_init(&edges, 0);
  igraph_vector_t distances;
  igraph_vector_init(&distances, 0);
  static const double first[6] = {0.6, 0.1, 0.5, 0.2, 0.4, 0.3};
  for (int i = 0; i < 6; i++) {
    igraph_vector_int_push_back(&edges, 0);
    igraph_vector_int_push_back(&edges, 1 + i);
    igraph_vector_push_back(&distances, first[i]);
  }
  for (int i = 0; i < 12; i++) {
    igraph_vector_int_push_back(&edges, 1 + i / 2);
    igraph_vector_int_push_back(&edges, 7 + i);
    igraph_vector_push_back(&distances, 0.5);
  }
  igraph_t graph;
  igraph_create(&graph, &edges, 20, IGRAPH_DIRECTED);
  igraph_vector_int_t focus;
  igraph_vector_int_init(&focus, 1);
  igraph_matrix_t xy;
  igraph_matrix_init(&xy, 0, 0);
  GError *error = NULL;
  g_assert_true(knnwb_drawing_layout_radial(&graph, &distances, &focus, NULL, 30, &xy, &error));
  g_assert_no_error(error);
  g_assert_cmpint(igraph_matrix_nrow(&xy), ==, 20);
  g_assert_cmpfloat(hypot(MATRIX(xy, 0, 0), MATRIX(xy, 0, 1)), ==, 0.0);
  double ring = hypot(MATRIX(xy, 1, 0), MATRIX(xy, 1, 1)), angle[20], radius[20];
  for (int v = 0; v < 20; v++) {
    angle[v] = atan2(MATRIX(xy, v, 1), MATRIX(xy, v, 0));
    radius[v] = hypot(MATRIX(xy, v, 0), MATRIX(xy, v, 1));
  }
  /* One ring, clockwise (y down) from the top in the order of distance: 2, 4, 6, 5, 3, 1. */
  static const int by_distance[6] = {2, 4, 6, 5, 3, 1};
  for (int i = 0; i < 6; i++) {
    g_assert_cmpfloat(fabs(radius[by_distance[i]] - ring), <, 1e-6);
    double expected = -G_PI / 2 + 2 * G_PI * (i + 0.5) / 6 - G_PI / 6;
    g_assert_cmpfloat(angle_between(angle[by_distance[i]], expected), <, G_PI / 6 + 1e-6);
    if (i > 0) {
      double step = fmod(angle[by_distance[i]] - angle[by_distance[i - 1]] + 4 * G_PI, 2 * G_PI);
      g_assert_cmpfloat(fabs(step - G_PI / 3), <, 1e-6);
    }
  }
  g_assert_cmpfloat(ring, >=, 6 * 30 - 1e-9);
  /* Second order: outside, nearest in angle to its own parent. */
  for (int v = 7; v < 19; v++) {
    int parent = 1 + (v - 7) / 2;
    g_assert_cmpfloat(radius[v], >, ring + 3 * 30);
    for (int other = 1; other <= 6; other++)
      if (other != parent)
        g_assert_cmpfloat(angle_between(angle[v], angle[parent]), <,
                          angle_between(angle[v], angle[other]));
  }
  g_assert_cmpfloat(radius[19], >, radius[7]);
  /* The caller's hops: vertex 7 counted as a first-order one joins the first ring. */
  int hops[20];
  for (int v = 0; v < 20; v++)
    hops[v] = v == 0 ? 0 : v <= 6 ? 1 : v < 19 ? 2 : -1;
  g_assert_true(knnwb_drawing_layout_radial(&graph, &distances, &focus, hops, 30, &xy, &error));
  g_assert_no_error(error);
  g_assert_cmpfloat(fabs(hypot(MATRIX(xy, 1, 0), MATRIX(xy, 1, 1)) - ring), <, 1e-6);
  /* Refused: a focus out of range, distances of the wrong length. */
  VECTOR(focus)[0] = 20;
  g_assert_false(knnwb_drawing_layout_radial(&graph, &distances, &focus, NULL, 30, &xy, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  VECTOR(focus)[0] = 0;
  igraph_vector_resize(&distances, 3);
  g_assert_false(knnwb_drawing_layout_radial(&graph, &distances, &focus, NULL, 30, &xy, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  igraph_matrix_destroy(&xy);
  igraph_vector_int_destroy(&focus);
  igraph_destroy(&graph);
  igraph_vector_destroy(&distances);
  igraph_vector_int_destroy(&edges);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/drawing/layout/radial", test_radial);
  return g_test_run();
}
