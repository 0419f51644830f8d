/*
 * Layouts: FR, DrL and UMAP give finite, centred coordinates with drawn neighbours two node sizes
 * apart; AUTO picks FR below its limit and nothing above; cancellation and progress; UMAP refuses
 * the graphs igraph 0.10.2 crashes on; a layout leaves the caller's random stream alone; layout
 * names.
 */
#include <knnwb/drawing.h>
#include <knnwb/error.h>

#include <glib.h>
#include "knnwb_test_graph.h"
#include <math.h>

static void count_progress(uint64_t done, uint64_t total, void *data)
{
  g_assert_cmpuint(done, <=, total);
  (*(guint *)data)++;
}

/* A layout leaves a library caller's igraph random stream where it was (it seeds a private
 * generator; before, every layout reset the caller's stream to the layout's seed), and the same
 * seed still gives the same coordinates. */
static void test_layout_caller_rng_kept(void)
{
  igraph_t graph;
  igraph_vector_t weights;
  GRand *rand = g_rand_new_with_seed(8);
  knnwb_test_random_graph(rand, 40, 100, FALSE, &graph, &weights);
  g_rand_free(rand);
  igraph_rng_seed(igraph_rng_default(), 77);
  igraph_integer_t expected[2];
  for (int i = 0; i < 2; i++)
    expected[i] = igraph_rng_get_integer(igraph_rng_default(), 0, 1000000000);
  igraph_rng_seed(igraph_rng_default(), 77);
  igraph_matrix_t first, again;
  igraph_matrix_init(&first, 0, 0);
  igraph_matrix_init(&again, 0, 0);
  for (int i = 0; i < 2; i++) {
    GError *error = NULL;
    g_assert_true(knnwb_drawing_layout_run(&graph, &weights, KNNWB_LAYOUT_FR, 100, 3, 30.0, NULL,
                                           i == 0 ? &first : &again, NULL, &error));
    g_assert_no_error(error);
    g_assert_cmpint(igraph_rng_get_integer(igraph_rng_default(), 0, 1000000000), ==, expected[i]);
  }
  g_assert_true(igraph_matrix_all_e(&first, &again));
  igraph_matrix_destroy(&first);
  igraph_matrix_destroy(&again);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
}

/* FR, DrL and UMAP give finite coordinates, centred, with drawn neighbours two node sizes apart;
 * AUTO picks FR below its limit and nothing above; a raised cancel flag stops every layout with
 * CANCELLED after reporting progress. */
static void test_layouts(void)
{
  igraph_t graph;
  igraph_vector_t weights;
  GRand *rand = g_rand_new_with_seed(5);
  knnwb_test_random_graph(rand, 60, 150, FALSE, &graph, &weights);
  /* A kNN graph has no self-loops, repeated edges or isolated vertices (UMAP refuses those). */
  for (igraph_integer_t v = 0; v < 60; v++)
    igraph_add_edge(&graph, v, (v + 1) % 60);
  igraph_simplify(&graph, TRUE, TRUE, NULL);
  igraph_integer_t m = igraph_ecount(&graph);
  igraph_vector_resize(&weights, m);
  for (igraph_integer_t e = 0; e < m; e++)
    VECTOR(weights)[e] = g_rand_double(rand);
  /* UMAP is tested on kNN graphs (readback_lists.py): igraph 0.10.2's UMAP crashes inside on
   * some random graphs like this one. */
  const KnnwbLayout layouts[] = {KNNWB_LAYOUT_AUTO, KNNWB_LAYOUT_FR, KNNWB_LAYOUT_DRL};
  for (size_t l = 0; l < G_N_ELEMENTS(layouts); l++) {
    igraph_matrix_t coordinates;
    igraph_matrix_init(&coordinates, 0, 0);
    GError *error = NULL;
    guint calls = 0;
    KnnwbWriteControl control = {.progress = count_progress, .progress_data = &calls};
    KnnwbLayout used = KNNWB_LAYOUT_NONE;
    g_assert_true(knnwb_drawing_layout_run(&graph, &weights, layouts[l], 100, 1, 30.0, &control,
                                           &coordinates, &used, &error));
    g_assert_no_error(error);
    g_assert_cmpint(used, ==, layouts[l] == KNNWB_LAYOUT_AUTO ? KNNWB_LAYOUT_FR : layouts[l]);
    g_assert_cmpuint(calls, >, 0);
    g_assert_cmpint(igraph_matrix_nrow(&coordinates), ==, 60);
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (igraph_integer_t v = 0; v < 60; v++) {
      g_assert_true(isfinite(MATRIX(coordinates, v, 0)) && isfinite(MATRIX(coordinates, v, 1)));
      x0 = MIN(x0, MATRIX(coordinates, v, 0));
      x1 = MAX(x1, MATRIX(coordinates, v, 0));
      y0 = MIN(y0, MATRIX(coordinates, v, 1));
      y1 = MAX(y1, MATRIX(coordinates, v, 1));
    }
    g_assert_cmpfloat(fabs(x0 + x1), <, 1e-9 * (x1 - x0));
    g_assert_cmpfloat(fabs(y0 + y1), <, 1e-9 * (y1 - y0));
    /* The quarter of vertices with the shortest shortest-edge: about 60 apart (2 x 30). */
    double shortest[60];
    for (int v = 0; v < 60; v++)
      shortest[v] = INFINITY;
    for (igraph_integer_t e = 0; e < m; e++) {
      igraph_integer_t a = IGRAPH_FROM(&graph, e), b = IGRAPH_TO(&graph, e);
      double d = hypot(MATRIX(coordinates, a, 0) - MATRIX(coordinates, b, 0),
                       MATRIX(coordinates, a, 1) - MATRIX(coordinates, b, 1));
      if (a != b && d > 0) {
        shortest[a] = MIN(shortest[a], d);
        shortest[b] = MIN(shortest[b], d);
      }
    }
    int below = 0;
    for (int v = 0; v < 60; v++)
      below += shortest[v] < 60.0 - 1e-6;
    g_assert_cmpint(below, >=, 10);
    g_assert_cmpint(below, <=, 20);

    gint cancel = 1;
    control.cancel = &cancel;
    {
      g_assert_false(knnwb_drawing_layout_run(&graph, &weights, layouts[l], 100, 1, 30.0, &control,
                                              &coordinates, NULL, &error));
      g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
      g_clear_error(&error);
    }
    igraph_matrix_destroy(&coordinates);
  }
  /* UMAP refuses self-loops (igraph 0.10.2 crashes on them). */
  igraph_add_edge(&graph, 3, 3);
  igraph_vector_push_back(&weights, 0.5);
  igraph_matrix_t coordinates;
  igraph_matrix_init(&coordinates, 0, 0);
  GError *error = NULL;
  g_assert_false(knnwb_drawing_layout_run(&graph, &weights, KNNWB_LAYOUT_UMAP, 100, 1, 30.0, NULL,
                                          &coordinates, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  igraph_matrix_destroy(&coordinates);
  /* AUTO above its limit lays out nothing. */
  g_assert_cmpint(knnwb_drawing_layout_choose(KNNWB_LAYOUT_AUTO, 60, 10), ==, KNNWB_LAYOUT_NONE);
  g_rand_free(rand);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
}

static void test_layout_names(void)
{
  KnnwbLayout layout;
  GError *error = NULL;
  g_assert_true(knnwb_drawing_layout_from_string("DrL", &layout, NULL));
  g_assert_cmpint(layout, ==, KNNWB_LAYOUT_DRL);
  g_assert_false(knnwb_drawing_layout_from_string("circle", &layout, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  for (int l = KNNWB_LAYOUT_AUTO; l <= KNNWB_LAYOUT_UMAP; l++) {
    g_assert_true(
        knnwb_drawing_layout_from_string(knnwb_drawing_layout_to_string(l), &layout, NULL));
    g_assert_cmpint(layout, ==, l);
  }
  g_assert_cmpstr(knnwb_drawing_layout_to_string((KnnwbLayout)99), ==, "unknown");
  g_assert_cmpint(knnwb_drawing_layout_choose(KNNWB_LAYOUT_AUTO, 10, 10), ==, KNNWB_LAYOUT_FR);
  g_assert_cmpint(knnwb_drawing_layout_choose(KNNWB_LAYOUT_DRL, 10, 1), ==, KNNWB_LAYOUT_DRL);
  /* NONE computes nothing. */
  igraph_t graph;
  igraph_empty(&graph, 3, IGRAPH_UNDIRECTED);
  igraph_matrix_t coordinates;
  igraph_matrix_init(&coordinates, 0, 0);
  g_assert_false(
      knnwb_drawing_layout(&graph, NULL, KNNWB_LAYOUT_NONE, 100, 1, 30.0, &coordinates, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  igraph_matrix_destroy(&coordinates);
  igraph_destroy(&graph);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_add_func("/drawing/layouts", test_layouts);
  g_test_add_func("/drawing/layout-caller-rng-kept", test_layout_caller_rng_kept);
  g_test_add_func("/drawing/layout-names", test_layout_names);
  return g_test_run();
}
