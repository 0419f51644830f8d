/* MST-kNN against the R package on dslanguages.csv, on blobs, and points vs distance matrix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>
#include <igraph.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>

/* Same partition up to renumbering: a bijection between the labels. */
static gboolean same_partition(const igraph_integer_t *a, const igraph_integer_t *b, size_t n)
{
  GHashTable *forward = g_hash_table_new(g_int64_hash, g_int64_equal);
  GHashTable *backward = g_hash_table_new(g_int64_hash, g_int64_equal);
  gboolean same = TRUE;
  for (size_t i = 0; i < n && same; i++) {
    gint64 *x = (gint64 *)&a[i], *y = (gint64 *)&b[i];
    gint64 *fx = g_hash_table_lookup(forward, x), *by = g_hash_table_lookup(backward, y);
    if (!fx && !by) {
      g_hash_table_insert(forward, x, y);
      g_hash_table_insert(backward, y, x);
    } else if (!fx || !by || *fx != *y || *by != *x) {
      same = FALSE;
    }
  }
  g_hash_table_destroy(forward);
  g_hash_table_destroy(backward);
  return same;
}

static int compare_size_desc(const void *a, const void *b)
{
  igraph_integer_t x = *(const igraph_integer_t *)a, y = *(const igraph_integer_t *)b;
  return (x < y) - (x > y);
}

static void test_dslanguages(void)
{
  g_autoptr(GError) error = NULL;
  igraph_matrix_t distances;
  igraph_matrix_init(&distances, 0, 0);
  char **labels = NULL;
  g_assert_true(knnwb_clustering_read_distance_csv(KNNWB_SHARED_DATA_DIR "/dslanguages.csv",
                                                   &distances, &labels, &error));
  g_assert_no_error(error);
  size_t n = igraph_matrix_nrow(&distances);
  g_assert_cmpuint(n, ==, 84);
  g_assert_cmpstr(labels[0], ==, "IrishA");

  igraph_vector_int_t membership;
  igraph_vector_int_init(&membership, 0);
  igraph_t forest;
  igraph_vector_t forest_weights;
  igraph_vector_init(&forest_weights, 0);
  g_assert_true(knnwb_clustering_mstknn_distance_matrix(&distances, NULL, &membership, &forest,
                                                        &forest_weights, &error));
  g_assert_no_error(error);
  igraph_integer_t clusters = igraph_vector_int_max(&membership) + 1;
  g_assert_cmpint(clusters, ==, 17);
  igraph_integer_t sizes[17] = {0};
  for (size_t i = 0; i < n; i++)
    sizes[VECTOR(membership)[i]]++;
  qsort(sizes, 17, sizeof sizes[0], compare_size_desc);
  const igraph_integer_t expected[17] = {13, 11, 10, 8, 5, 5, 5, 5, 3, 3, 3, 3, 2, 2, 2, 2, 2};
  for (int c = 0; c < 17; c++)
    g_assert_cmpint(sizes[c], ==, expected[c]);
  /* A spanning tree of each cluster: n - clusters edges, all inside clusters. */
  g_assert_cmpint(igraph_ecount(&forest), ==, (igraph_integer_t)n - clusters);
  for (igraph_integer_t e = 0; e < igraph_ecount(&forest); e++)
    g_assert_cmpint(VECTOR(membership)[IGRAPH_FROM(&forest, e)], ==,
                    VECTOR(membership)[IGRAPH_TO(&forest, e)]);

  /* The package's labels, by name. */
  g_autofree char *text = NULL;
  g_assert_true(
      g_file_get_contents(KNNWB_SHARED_DATA_DIR "/dslanguages_R_labels.csv", &text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  igraph_integer_t *r_labels = g_new(igraph_integer_t, n);
  size_t found = 0;
  for (size_t l = 1; lines[l] && lines[l][0]; l++) {
    g_auto(GStrv) fields = g_strsplit(g_strchomp(lines[l]), ",", 2);
    g_assert_nonnull(fields[1]);
    char *name = g_strndup(fields[0] + 1, strlen(fields[0]) - 2); /* drop the quotes */
    for (size_t i = 0; i < n; i++) {
      if (strcmp(labels[i], name) == 0) {
        r_labels[i] = g_ascii_strtoll(fields[1], NULL, 10);
        found++;
      }
    }
    g_free(name);
  }
  g_assert_cmpuint(found, ==, n);
  g_assert_true(same_partition(VECTOR(membership), r_labels, n));
  g_free(r_labels);

  /* The exact MST of the matrix: n - 1 edges, as the package's Prim. */
  igraph_t tree;
  igraph_vector_t tree_weights;
  igraph_vector_init(&tree_weights, 0);
  g_assert_true(knnwb_clustering_mst_distance_matrix(&distances, &tree, &tree_weights, &error));
  g_assert_cmpint(igraph_ecount(&tree), ==, 83);
  igraph_bool_t connected = FALSE;
  igraph_is_connected(&tree, &connected, IGRAPH_WEAK);
  g_assert_true(connected);
  igraph_destroy(&tree);
  igraph_vector_destroy(&tree_weights);

  g_strfreev(labels);
  igraph_destroy(&forest);
  igraph_vector_destroy(&forest_weights);
  igraph_vector_int_destroy(&membership);
  igraph_matrix_destroy(&distances);
}

static void write_file(const char *path, const char *text)
{
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
}

static void test_csv_bad_input(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-csv-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "d.csv", NULL);
  igraph_matrix_t m;
  igraph_matrix_init(&m, 0, 0);
  const char *bad[] = {
      "",                                         /* empty */
      "\"\",\"a\",\"b\"\n\"a\",0,1\n",            /* not square */
      "\"\",\"a\",\"b\"\n\"a\",0,1\n\"b\",1\n",   /* short line */
      "\"\",\"a\",\"b\"\n\"a\",0,x\n\"b\",1,0\n", /* bad number */
      "\"\",\"a\",\"b\"\n\"a\",0,1\n\"c\",1,0\n", /* label mismatch */
      "\"\",\"a,\"b\"\n\"a\",0,1\n\"b\",1,0\n",   /* unterminated quote */
  };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    write_file(path, bad[i]);
    g_autoptr(GError) error = NULL;
    g_assert_false(knnwb_clustering_read_distance_csv(path, &m, NULL, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
    g_assert_nonnull(strstr(error->message, path));
  }
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_clustering_read_distance_csv("/nonexistent/d.csv", &m, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_IO);
  g_clear_error(&error);
  write_file(path, "\"\",\"a b\",\"c\"\"d\"\r\n\"a b\",0,2.5\r\n\"c\"\"d\",2.5,0\r\n");
  char **labels = NULL;
  g_assert_true(knnwb_clustering_read_distance_csv(path, &m, &labels, &error));
  g_assert_cmpstr(labels[1], ==, "c\"d");
  g_assert_cmpfloat(MATRIX(m, 0, 1), ==, 2.5);
  g_strfreev(labels);
  /* Asymmetric matrix: the MST refuses it. */
  write_file(path, "\"\",\"a\",\"b\"\n\"a\",0,1\n\"b\",2,0\n");
  g_assert_true(knnwb_clustering_read_distance_csv(path, &m, NULL, &error));
  igraph_t tree;
  igraph_vector_t w;
  igraph_vector_init(&w, 0);
  g_assert_false(knnwb_clustering_mst_distance_matrix(&m, &tree, &w, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  igraph_vector_destroy(&w);
  g_unlink(path);
  g_rmdir(dir);
  igraph_matrix_destroy(&m);
}

/* Well-separated Gaussian blobs: every MST-kNN cluster lies inside one blob. */
static void test_blobs(void)
{
  GRand *rand = g_rand_new_with_seed(4242);
  const size_t blobs = 5, per_blob = 60, d = 3, n = blobs * per_blob;
  g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
  size_t *truth = g_new(size_t, n);
  for (size_t i = 0; i < n; i++) {
    size_t b = i % blobs; /* interleaved, so blobs are not index ranges */
    truth[i] = b;
    for (size_t j = 0; j < d; j++) {
      double centre = 100.0 * (double)((b * 7 + j * 3) % 11);
      /* Box-Muller */
      double u1 = g_rand_double_range(rand, 1e-12, 1), u2 = g_rand_double(rand);
      data->values[i * d + j] = (float)(centre + sqrt(-2 * log(u1)) * cos(2 * G_PI * u2));
    }
  }
  for (int tree = 0; tree < 2; tree++) {
    KnnwbMstKnnOptions options;
    knnwb_clustering_mstknn_options_init(&options);
    options.metric = KNNWB_METRIC_EUCLIDEAN;
    options.backend = KNNWB_BACKEND_CPU;
    options.n_threads = 2;
    options.tree = tree == 0 ? KNNWB_MSTKNN_TREE_EXACT : KNNWB_MSTKNN_TREE_KNN_FOREST;
    igraph_vector_int_t membership;
    igraph_vector_int_init(&membership, 0);
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_clustering_mstknn_points(data, &options, &membership, NULL, NULL, &error));
    g_assert_no_error(error);
    igraph_integer_t clusters = igraph_vector_int_max(&membership) + 1;
    size_t *blob_of = g_new(size_t, clusters);
    for (igraph_integer_t c = 0; c < clusters; c++)
      blob_of[c] = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
      igraph_integer_t c = VECTOR(membership)[i];
      if (blob_of[c] == SIZE_MAX)
        blob_of[c] = truth[i];
      g_assert_cmpuint(blob_of[c], ==, truth[i]);
    }
    g_assert_cmpint(clusters, >=, (igraph_integer_t)blobs);
    g_free(blob_of);
    igraph_vector_int_destroy(&membership);
  }
  g_free(truth);
  g_rand_free(rand);
}

/* Points and their distance matrix agree when distances are distinct (no tie rules involved). */
static void test_points_equal_matrix(void)
{
  GRand *rand = g_rand_new_with_seed(31337);
  for (int trial = 0; trial < 6; trial++) {
    size_t n = (size_t)g_rand_int_range(rand, 3, 120), d = 4;
    g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
    for (size_t i = 0; i < n * d; i++)
      data->values[i] = (float)g_rand_double_range(rand, -10, 10);
    igraph_matrix_t distances;
    igraph_matrix_init(&distances, n, n);
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < n; j++)
        MATRIX(distances, i, j) =
            i == j ? 0
                   : knnwb_distance_exact(KNNWB_METRIC_EUCLIDEAN, data->values + i * d,
                                          data->values + j * d, d);
    KnnwbMstKnnOptions options;
    knnwb_clustering_mstknn_options_init(&options);
    options.metric = KNNWB_METRIC_EUCLIDEAN;
    options.backend = KNNWB_BACKEND_CPU;
    options.list_k = 2; /* short lists: forces the in-set brute-force path */
    igraph_vector_int_t a, b;
    igraph_vector_int_init(&a, 0);
    igraph_vector_int_init(&b, 0);
    igraph_t fa, fb;
    igraph_vector_t wa, wb;
    igraph_vector_init(&wa, 0);
    igraph_vector_init(&wb, 0);
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_clustering_mstknn_points(data, &options, &a, &fa, &wa, &error));
    g_assert_no_error(error);
    g_assert_true(knnwb_clustering_mstknn_distance_matrix(&distances, NULL, &b, &fb, &wb, &error));
    g_assert_no_error(error);
    g_assert_true(igraph_vector_int_all_e(&a, &b));
    g_assert_cmpint(igraph_ecount(&fa), ==, igraph_ecount(&fb));
    g_assert_cmpfloat_with_epsilon(igraph_vector_sum(&wa), igraph_vector_sum(&wb), 1e-9);
    igraph_destroy(&fa);
    igraph_destroy(&fb);
    igraph_vector_destroy(&wa);
    igraph_vector_destroy(&wb);
    igraph_vector_int_destroy(&a);
    igraph_vector_int_destroy(&b);
    igraph_matrix_destroy(&distances);
  }
  g_rand_free(rand);
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/clustering/mstknn/dslanguages", test_dslanguages);
  g_test_add_func("/clustering/mstknn/csv-bad-input", test_csv_bad_input);
  g_test_add_func("/clustering/mstknn/blobs", test_blobs);
  g_test_add_func("/clustering/mstknn/points-equal-matrix", test_points_equal_matrix);
  return g_test_run();
}
