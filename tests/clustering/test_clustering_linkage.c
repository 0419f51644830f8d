/* Single linkage: merge table, flat cuts and Newick, against fixed answers and a naive oracle. */
#include <math.h>
#include <string.h>
#include <igraph.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>

static void make_tree(igraph_t *tree, igraph_integer_t n, const igraph_integer_t *pairs,
                      igraph_integer_t m)
{
  igraph_vector_int_t edges;
  igraph_vector_int_init(&edges, 2 * m);
  for (igraph_integer_t i = 0; i < 2 * m; i++)
    VECTOR(edges)[i] = pairs[i];
  g_assert_cmpint(igraph_create(tree, &edges, n, IGRAPH_UNDIRECTED), ==, 0);
  igraph_vector_int_destroy(&edges);
}

static void test_fixed(void)
{
  const igraph_integer_t pairs[] = {0, 1, 2, 3, 1, 2};
  double w[] = {1, 2, 3};
  igraph_t tree;
  make_tree(&tree, 4, pairs, 3);
  igraph_vector_t weights;
  igraph_vector_view(&weights, w, 3);
  igraph_matrix_t linkage;
  igraph_matrix_init(&linkage, 0, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_clustering_single_linkage(&tree, &weights, &linkage, &error));
  const double expected[3][4] = {{0, 1, 1, 2}, {2, 3, 2, 2}, {4, 5, 3, 4}};
  g_assert_cmpint(igraph_matrix_nrow(&linkage), ==, 3);
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 4; c++)
      g_assert_cmpfloat(MATRIX(linkage, r, c), ==, expected[r][c]);
  g_autofree char *newick = knnwb_clustering_newick(&linkage, 4, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(newick, ==, "((0:1,1:1):2,(2:2,3:2):1);\n");
  const char *labels[] = {"a", "b c", "it's", "d"};
  g_autofree char *named = knnwb_clustering_newick(&linkage, 4, labels, &error);
  g_assert_cmpstr(named, ==, "((a:1,'b c':1):2,('it''s':2,d:2):1);\n");

  igraph_vector_int_t membership;
  igraph_vector_int_init(&membership, 0);
  igraph_integer_t count = 0;
  g_assert_true(knnwb_clustering_cut_distance(&tree, &weights, 1.5, &membership, &count, &error));
  g_assert_cmpint(count, ==, 3);
  g_assert_cmpint(VECTOR(membership)[0], ==, 0);
  g_assert_cmpint(VECTOR(membership)[1], ==, 0);
  g_assert_cmpint(VECTOR(membership)[2], ==, 1);
  g_assert_cmpint(VECTOR(membership)[3], ==, 2);
  g_assert_true(knnwb_clustering_cut_distance(&tree, &weights, 2.0, &membership, &count, &error));
  g_assert_cmpint(count, ==, 2); /* merges at exactly the height are joined (scipy "distance") */
  g_assert_true(knnwb_clustering_cut_count(&tree, &weights, 2, &membership, &count, &error));
  g_assert_cmpint(count, ==, 2);
  g_assert_cmpint(VECTOR(membership)[3], ==, 1);
  g_assert_cmpint(VECTOR(membership)[1], ==, 0);
  g_assert_true(knnwb_clustering_cut_count(&tree, &weights, 4, &membership, &count, &error));
  g_assert_cmpint(count, ==, 4);
  g_assert_false(knnwb_clustering_cut_count(&tree, &weights, 0, &membership, &count, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  g_assert_false(knnwb_clustering_cut_distance(&tree, &weights, NAN, &membership, &count, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  igraph_destroy(&tree);

  /* A forest (0-1, 2 alone, 3-4): two merges, three Newick trees. */
  const igraph_integer_t forest_pairs[] = {3, 4, 0, 1};
  double fw[] = {0.5, 0.25};
  make_tree(&tree, 5, forest_pairs, 2);
  igraph_vector_view(&weights, fw, 2);
  g_assert_true(knnwb_clustering_single_linkage(&tree, &weights, &linkage, &error));
  g_assert_cmpint(igraph_matrix_nrow(&linkage), ==, 2);
  g_assert_cmpfloat(MATRIX(linkage, 0, 2), ==, 0.25);
  g_autofree char *forest_text = knnwb_clustering_newick(&linkage, 5, NULL, &error);
  g_assert_cmpstr(forest_text, ==, "(3:0.5,4:0.5);\n(0:0.25,1:0.25);\n2;\n");
  g_assert_true(knnwb_clustering_cut_count(&tree, &weights, 1, &membership, &count, &error));
  g_assert_cmpint(count, ==, 3); /* cannot go below the forest's components */
  igraph_destroy(&tree);

  /* A cycle is not a forest. */
  const igraph_integer_t cycle[] = {0, 1, 1, 2, 2, 0};
  double cw[] = {1, 1, 1};
  make_tree(&tree, 4, cycle, 3);
  igraph_vector_view(&weights, cw, 3);
  g_assert_false(knnwb_clustering_single_linkage(&tree, &weights, &linkage, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  igraph_destroy(&tree);

  /* A bad merge table. */
  igraph_matrix_resize(&linkage, 1, 4);
  MATRIX(linkage, 0, 0) = 0;
  MATRIX(linkage, 0, 1) = 7;
  g_assert_null(knnwb_clustering_newick(&linkage, 3, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  igraph_matrix_destroy(&linkage);
  igraph_vector_int_destroy(&membership);
}

/* Naive agglomerative single linkage on points (O(n^3)) against the MST route. */
static void test_against_naive(void)
{
  GRand *rand = g_rand_new_with_seed(1234);
  for (int trial = 0; trial < 5; trial++) {
    size_t n = 5 + (size_t)trial * 9, d = 3;
    g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
    for (size_t i = 0; i < n * d; i++)
      data->values[i] = (float)g_rand_double_range(rand, 0, 10);
    KnnwbMstOptions options;
    knnwb_clustering_mst_options_init(&options);
    options.metric = KNNWB_METRIC_EUCLIDEAN;
    options.backend = KNNWB_BACKEND_CPU;
    igraph_t tree;
    igraph_vector_t weights;
    igraph_vector_init(&weights, 0);
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_clustering_mst_points(data, &options, &tree, &weights, &error));
    igraph_matrix_t linkage;
    igraph_matrix_init(&linkage, 0, 0);
    g_assert_true(knnwb_clustering_single_linkage(&tree, &weights, &linkage, &error));
    g_assert_cmpint(igraph_matrix_nrow(&linkage), ==, (igraph_integer_t)n - 1);
    /* naive: cluster label per point, merge the closest pair of clusters each step */
    size_t *label = g_new(size_t, n);
    for (size_t i = 0; i < n; i++)
      label[i] = i;
    for (size_t step = 0; step + 1 < n; step++) {
      double best = INFINITY;
      size_t la = 0, lb = 0;
      for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
          if (label[i] == label[j])
            continue;
          double dist = knnwb_distance_exact(KNNWB_METRIC_EUCLIDEAN, data->values + i * d,
                                             data->values + j * d, d);
          if (dist < best) {
            best = dist;
            la = label[i];
            lb = label[j];
          }
        }
      size_t size = 0;
      for (size_t i = 0; i < n; i++) {
        if (label[i] == lb)
          label[i] = la;
        size += label[i] == la;
      }
      g_assert_cmpfloat_with_epsilon(MATRIX(linkage, step, 2), best, 1e-9);
      g_assert_cmpfloat(MATRIX(linkage, step, 3), ==, (double)size);
      /* flat cut by count matches the naive partition with n - step - 1 clusters */
      igraph_vector_int_t membership;
      igraph_vector_int_init(&membership, 0);
      igraph_integer_t count = 0;
      g_assert_true(knnwb_clustering_cut_count(&tree, &weights, (igraph_integer_t)(n - step - 1),
                                               &membership, &count, &error));
      for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
          g_assert_cmpint(VECTOR(membership)[i] == VECTOR(membership)[j], ==, label[i] == label[j]);
      igraph_vector_int_destroy(&membership);
    }
    g_free(label);
    igraph_matrix_destroy(&linkage);
    igraph_destroy(&tree);
    igraph_vector_destroy(&weights);
  }
  g_rand_free(rand);
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/clustering/linkage/fixed", test_fixed);
  g_test_add_func("/clustering/linkage/naive", test_against_naive);
  return g_test_run();
}
