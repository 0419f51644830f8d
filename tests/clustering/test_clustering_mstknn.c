/* MST-kNN against the R package on dslanguages.csv, on blobs, and points vs distance matrix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>
#include <igraph.h>
#include <knnwb/formats.h>
#include <knnwb/clustering.h>
#include <knnwb/knn.h>
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
  g_assert_true(knnwb_formats_read_distance_csv(KNNWB_SHARED_DATA_DIR "/dslanguages.csv",
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
    g_assert_false(knnwb_formats_read_distance_csv(path, &m, NULL, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
    g_assert_nonnull(strstr(error->message, path));
  }
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_formats_read_distance_csv("/nonexistent/d.csv", &m, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_IO);
  g_clear_error(&error);
  write_file(path, "\"\",\"a b\",\"c\"\"d\"\r\n\"a b\",0,2.5\r\n\"c\"\"d\",2.5,0\r\n");
  char **labels = NULL;
  g_assert_true(knnwb_formats_read_distance_csv(path, &m, &labels, &error));
  g_assert_cmpstr(labels[1], ==, "c\"d");
  g_assert_cmpfloat(MATRIX(m, 0, 1), ==, 2.5);
  g_strfreev(labels);
  /* Asymmetric matrix: the MST refuses it. */
  write_file(path, "\"\",\"a\",\"b\"\n\"a\",0,1\n\"b\",2,0\n");
  g_assert_true(knnwb_formats_read_distance_csv(path, &m, NULL, &error));
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
  for (int reuse = 0; reuse < 2; reuse++) {
    KnnwbMstKnnOptions options;
    knnwb_clustering_mstknn_options_init(&options);
    options.metric = KNNWB_METRIC_EUCLIDEAN;
    options.backend = KNNWB_BACKEND_CPU;
    options.n_threads = 2;
    /* Second pass: lists given by the caller (as from a knn-graph step) instead of computed. */
    g_autoptr(KnnwbNeighbors) lists = NULL;
    if (reuse) {
      KnnwbKnnOptions knn;
      knnwb_knn_options_init(&knn);
      knn.metric = KNNWB_METRIC_EUCLIDEAN;
      knn.k = 6;
      g_assert_true(knnwb_knn_self(data, &knn, &lists, NULL));
      options.neighbors = lists;
    }
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

/* Points on a line (1 column) as a matrix and as their Euclidean distance matrix. */
static void line_points(const double *x, size_t n, KnnwbMatrix **data, igraph_matrix_t *distances)
{
  *data = knnwb_matrix_new(n, 1, NULL);
  igraph_matrix_init(distances, (igraph_integer_t)n, (igraph_integer_t)n);
  for (size_t i = 0; i < n; i++) {
    (*data)->values[i] = (float)x[i];
    for (size_t j = 0; j < n; j++)
      MATRIX(*distances, i, j) = fabs(x[i] - x[j]);
  }
}

static void assert_membership(const igraph_vector_int_t *membership, const igraph_integer_t *want,
                              size_t n)
{
  g_assert_cmpint(igraph_vector_int_size(membership), ==, (igraph_integer_t)n);
  for (size_t i = 0; i < n; i++)
    g_assert_cmpint(VECTOR(*membership)[i], ==, want[i]);
}

/* The R package's generate.knn stably sorts the pairs (a, b), a < b, by distance, so row i lists
 * tied neighbours in the order i + 1, ..., n - 1, 0, ..., i - 1. On 0, 2, 7, 12, 14
 * (k = floor(ln 5) = 1), p2 is 5 from both p1 and p3: the package takes p3, so the kept edges are
 * p0-p1, p2-p3, p3-p4: {p0,p1},{p2,p3,p4}. The points path keeps knnwb's lower-index rule (p2
 * takes p1): {p0,p1,p2},{p3,p4}. */
static void test_r_tie_rule(void)
{
  const double x[] = {0, 2, 7, 12, 14};
  g_autoptr(KnnwbMatrix) data = NULL;
  igraph_matrix_t distances;
  line_points(x, 5, &data, &distances);
  igraph_vector_int_t membership;
  igraph_vector_int_init(&membership, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(
      knnwb_clustering_mstknn_distance_matrix(&distances, NULL, &membership, NULL, NULL, &error));
  const igraph_integer_t r_rule[] = {0, 0, 1, 1, 1};
  assert_membership(&membership, r_rule, 5);
  KnnwbMstKnnOptions options;
  knnwb_clustering_mstknn_options_init(&options);
  options.metric = KNNWB_METRIC_EUCLIDEAN;
  options.backend = KNNWB_BACKEND_CPU;
  g_assert_true(knnwb_clustering_mstknn_points(data, &options, &membership, NULL, NULL, &error));
  const igraph_integer_t lower_rule[] = {0, 0, 0, 1, 1};
  assert_membership(&membership, lower_rule, 5);
  igraph_vector_int_destroy(&membership);
  igraph_matrix_destroy(&distances);
}

/* The smallest case where the package's order (i + 1 first, wrapping round) and "higher index
 * first" differ: d(0,1) = d(0,2) = d(1,3) = 1, d(0,3) = d(1,2) = 2, d(2,3) = 3, k = 1. The
 * package lists p0 -> p1 (p1 before p2), p1 -> p3, p2 -> p0, p3 -> p1; the tree of the three
 * edges of length 1 is all kept: one cluster. Higher index first (p0 -> p2) would cut it into
 * {p0,p2},{p1,p3}. */
static void test_r_tie_order_wraps(void)
{
  const double d[4][4] = {{0, 1, 1, 2}, {1, 0, 2, 1}, {1, 2, 0, 3}, {2, 1, 3, 0}};
  igraph_matrix_t distances;
  igraph_matrix_init(&distances, 4, 4);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      MATRIX(distances, i, j) = d[i][j];
  igraph_vector_int_t membership;
  igraph_vector_int_init(&membership, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(
      knnwb_clustering_mstknn_distance_matrix(&distances, NULL, &membership, NULL, NULL, &error));
  g_assert_no_error(error);
  const igraph_integer_t one[] = {0, 0, 0, 0};
  assert_membership(&membership, one, 4);
  igraph_vector_int_destroy(&membership);
  igraph_matrix_destroy(&distances);
}

/* Duplicated rows: 0, 0, 3, 3, 10 (k = 1). Prim from p0 (igraph's, as the package) gives the tree
 * p0-p1 (0), p1-p3 (3), p3-p2 (0), p3-p4 (7) (checked below). p4 is 7 from p2 and from p3; the
 * package lists p4's tied neighbours in the order p0, ..., p3 (none after p4), so p4 -> p2, and
 * p3 -> p2: p3-p4 is no kNN edge, nor is p1-p3 (p1 -> p0, p3 -> p2). The package's clusters are
 * {p0,p1} and {p2,p3}, and it leaves p4 out; knnwb reports p4 as a cluster of its own. The points
 * path (Borůvka, ties by the lower pair) builds p0-p2 and p2-p4 instead, and with knnwb's
 * lower-index rule (p4 -> p2) keeps p2-p4: {p0,p1},{p2,p3,p4}. */
static void test_duplicated_rows(void)
{
  const double x[] = {0, 0, 3, 3, 10};
  g_autoptr(KnnwbMatrix) data = NULL;
  igraph_matrix_t distances;
  line_points(x, 5, &data, &distances);
  igraph_vector_int_t membership;
  igraph_vector_int_init(&membership, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(
      knnwb_clustering_mstknn_distance_matrix(&distances, NULL, &membership, NULL, NULL, &error));
  const igraph_integer_t r_rule[] = {0, 0, 1, 1, 2};
  assert_membership(&membership, r_rule, 5);
  igraph_t tree;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_assert_true(knnwb_clustering_mst_distance_matrix(&distances, &tree, &weights, &error));
  const igraph_integer_t prim[4][2] = {{0, 1}, {1, 3}, {2, 3}, {3, 4}};
  for (igraph_integer_t e = 0; e < 4; e++) {
    g_assert_cmpint(MIN(IGRAPH_FROM(&tree, e), IGRAPH_TO(&tree, e)), ==, prim[e][0]);
    g_assert_cmpint(MAX(IGRAPH_FROM(&tree, e), IGRAPH_TO(&tree, e)), ==, prim[e][1]);
  }
  igraph_destroy(&tree);
  igraph_vector_destroy(&weights);
  KnnwbMstKnnOptions options;
  knnwb_clustering_mstknn_options_init(&options);
  options.metric = KNNWB_METRIC_EUCLIDEAN;
  options.backend = KNNWB_BACKEND_CPU;
  g_assert_true(knnwb_clustering_mstknn_points(data, &options, &membership, NULL, NULL, &error));
  const igraph_integer_t lower_rule[] = {0, 0, 1, 1, 1};
  assert_membership(&membership, lower_rule, 5);
  igraph_vector_int_destroy(&membership);
  igraph_matrix_destroy(&distances);
}

/* Lists given by the caller give the same clusters as lists computed inside; lists too short for
 * the first level are ignored (recomputed), not an error. */
static void test_given_lists(void)
{
  GRand *rand = g_rand_new_with_seed(99);
  const size_t n = 157, d = 3;
  g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
  for (size_t i = 0; i < n * d; i++)
    data->values[i] = (float)g_rand_double_range(rand, -5, 5) + (float)(10 * ((i / d) % 4));
  g_rand_free(rand);
  KnnwbMstKnnOptions options;
  knnwb_clustering_mstknn_options_init(&options);
  options.metric = KNNWB_METRIC_EUCLIDEAN;
  options.backend = KNNWB_BACKEND_CPU;
  igraph_vector_int_t computed, given;
  igraph_vector_int_init(&computed, 0);
  igraph_vector_int_init(&given, 0);
  g_autoptr(GError) error = NULL;
  KnnwbMstKnnHierarchy hierarchy;
  g_assert_true(knnwb_mstknn_hierarchy_init(&hierarchy, &error));
  options.hierarchy = &hierarchy;
  g_assert_true(knnwb_clustering_mstknn_points(data, &options, &computed, NULL, NULL, &error));
  options.hierarchy = NULL;
  /* The hierarchy's invariants: children partition their parent; each final cluster's size is
   * its point count; every cluster appears once; k = min(floor(ln s), connecting k) >= 1. */
  igraph_integer_t m = igraph_vector_int_size(&hierarchy.parent);
  igraph_integer_t clusters = igraph_vector_int_max(&computed) + 1;
  g_autofree igraph_integer_t *children_size = g_new0(igraph_integer_t, m);
  g_autofree igraph_integer_t *cluster_size = g_new0(igraph_integer_t, clusters);
  g_autofree int *seen = g_new0(int, clusters);
  for (size_t v = 0; v < n; v++)
    cluster_size[VECTOR(computed)[v]]++;
  g_assert_cmpint(VECTOR(hierarchy.size)[0], ==, (igraph_integer_t)n);
  g_assert_cmpint(m, >, 1);
  for (igraph_integer_t i = 0; i < m; i++) {
    igraph_integer_t p = VECTOR(hierarchy.parent)[i], c = VECTOR(hierarchy.cluster)[i];
    if (i > 0) {
      g_assert_cmpint(p, >=, 0);
      g_assert_cmpint(p, <, i);
      g_assert_cmpint(VECTOR(hierarchy.cluster)[p], ==, -1);
      children_size[p] += VECTOR(hierarchy.size)[i];
    }
    if (c >= 0) {
      g_assert_cmpint(VECTOR(hierarchy.size)[i], ==, cluster_size[c]);
      seen[c]++;
    }
    igraph_integer_t s = VECTOR(hierarchy.size)[i];
    if (s > 1) {
      g_assert_cmpint(VECTOR(hierarchy.k)[i], >=, 1);
      g_assert_cmpint(VECTOR(hierarchy.k)[i], <=, MAX(1, (igraph_integer_t)floor(log((double)s))));
    }
  }
  for (igraph_integer_t i = 0; i < m; i++)
    if (VECTOR(hierarchy.cluster)[i] < 0)
      g_assert_cmpint(children_size[i], ==, VECTOR(hierarchy.size)[i]);
  for (igraph_integer_t c = 0; c < clusters; c++)
    g_assert_cmpint(seen[c], ==, 1);
  g_autofree char *newick = knnwb_mstknn_hierarchy_newick(&hierarchy, &computed, NULL, &error);
  g_assert_nonnull(newick);
  knnwb_mstknn_hierarchy_destroy(&hierarchy);
  const size_t lengths[] = {5, 9, 2};
  for (guint t = 0; t < G_N_ELEMENTS(lengths); t++) {
    KnnwbKnnOptions knn;
    knnwb_knn_options_init(&knn);
    knn.metric = KNNWB_METRIC_EUCLIDEAN;
    knn.backend = KNNWB_BACKEND_CPU;
    knn.k = lengths[t];
    g_autoptr(KnnwbNeighbors) lists = NULL;
    g_assert_true(knnwb_knn_self(data, &knn, &lists, &error));
    options.neighbors = lists;
    g_assert_true(knnwb_clustering_mstknn_points(data, &options, &given, NULL, NULL, &error));
    g_assert_true(igraph_vector_int_all_e(&computed, &given));
  }
  igraph_vector_int_destroy(&computed);
  igraph_vector_int_destroy(&given);
}

/* An n x n NPY file: float64 C order, or float32 Fortran order. */
static void write_npy(const char *path, const igraph_matrix_t *m, gboolean single, gboolean fortran)
{
  igraph_integer_t n = igraph_matrix_nrow(m);
  g_autofree char *dict = g_strdup_printf(
      "{'descr': '%s', 'fortran_order': %s, 'shape': (%" IGRAPH_PRId ", %" IGRAPH_PRId "), }",
      single ? "<f4" : "<f8", fortran ? "True" : "False", n, n);
  GString *header = g_string_new(dict);
  while ((10 + header->len + 1) % 64 != 0)
    g_string_append_c(header, ' ');
  g_string_append_c(header, '\n');
  GByteArray *bytes = g_byte_array_new();
  g_byte_array_append(bytes, (const guint8 *)"\x93NUMPY\x01\x00", 8);
  guint8 length[2] = {(guint8)(header->len & 0xff), (guint8)(header->len >> 8)};
  g_byte_array_append(bytes, length, 2);
  g_byte_array_append(bytes, (const guint8 *)header->str, (guint)header->len);
  for (igraph_integer_t a = 0; a < n; a++)
    for (igraph_integer_t b = 0; b < n; b++) {
      double value = fortran ? MATRIX(*m, b, a) : MATRIX(*m, a, b);
      if (single) {
        float f = (float)value;
        g_byte_array_append(bytes, (const guint8 *)&f, 4);
      } else
        g_byte_array_append(bytes, (const guint8 *)&value, 8);
    }
  g_assert_true(g_file_set_contents(path, (const char *)bytes->data, bytes->len, NULL));
  g_byte_array_unref(bytes);
  g_string_free(header, TRUE);
}

/* The same matrix from CSV, TSV and NPY (float64 C order exactly; float32 Fortran order as its
 * float32 values) gives the same clusters as the package's CSV. */
static void test_distance_files(void)
{
  igraph_matrix_t csv, other;
  igraph_matrix_init(&csv, 0, 0);
  igraph_matrix_init(&other, 0, 0);
  char **labels = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_read_distance_matrix(KNNWB_SHARED_DATA_DIR "/dslanguages.csv", &csv,
                                                   &labels, &error));
  igraph_integer_t n = igraph_matrix_nrow(&csv);
  g_autofree char *dir = g_dir_make_tmp("knnwb-dist-XXXXXX", NULL);
  g_autofree char *tsv = g_build_filename(dir, "d.tsv", NULL);
  GString *text = g_string_new("");
  for (igraph_integer_t j = 0; j < n; j++)
    g_string_append_printf(text, "\t%s", labels[j]);
  g_string_append_c(text, '\n');
  for (igraph_integer_t i = 0; i < n; i++) {
    g_string_append(text, labels[i]);
    for (igraph_integer_t j = 0; j < n; j++)
      g_string_append_printf(text, "\t%.17g", MATRIX(csv, i, j));
    g_string_append_c(text, '\n');
  }
  g_assert_true(g_file_set_contents(tsv, text->str, -1, NULL));
  g_string_free(text, TRUE);
  char **tsv_labels = NULL;
  g_assert_true(knnwb_formats_read_distance_matrix(tsv, &other, &tsv_labels, &error));
  g_assert_true(igraph_matrix_all_e(&csv, &other));
  g_assert_cmpstr(tsv_labels[5], ==, labels[5]);
  g_strfreev(tsv_labels);
  g_autofree char *npy = g_build_filename(dir, "d.npy", NULL);
  write_npy(npy, &csv, FALSE, FALSE);
  g_assert_true(knnwb_formats_read_distance_matrix(npy, &other, &tsv_labels, &error));
  g_assert_null(tsv_labels);
  g_assert_true(igraph_matrix_all_e(&csv, &other));
  write_npy(npy, &csv, TRUE, TRUE);
  g_assert_true(knnwb_formats_read_distance_npy(npy, &other, &error));
  for (igraph_integer_t i = 0; i < n; i++)
    for (igraph_integer_t j = 0; j < n; j++)
      g_assert_cmpfloat(MATRIX(other, i, j), ==, (double)(float)MATRIX(csv, i, j));
  /* Not square, not NPY. */
  g_assert_true(g_file_set_contents(npy,
                                    "\x93NUMPY\x01\x00\x46\x00{'descr': '<f8', "
                                    "'fortran_order': False, 'shape': (2, 3), }      \n",
                                    -1, NULL));
  g_assert_false(knnwb_formats_read_distance_npy(npy, &other, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_clear_error(&error);
  g_assert_true(g_file_set_contents(npy, "not numpy", -1, NULL));
  g_assert_false(knnwb_formats_read_distance_npy(npy, &other, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_unlink(npy);
  g_unlink(tsv);
  g_rmdir(dir);
  g_strfreev(labels);
  igraph_matrix_destroy(&csv);
  igraph_matrix_destroy(&other);
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/clustering/mstknn/dslanguages", test_dslanguages);
  g_test_add_func("/clustering/mstknn/csv-bad-input", test_csv_bad_input);
  g_test_add_func("/clustering/mstknn/blobs", test_blobs);
  g_test_add_func("/clustering/mstknn/r-tie-rule", test_r_tie_rule);
  g_test_add_func("/clustering/mstknn/r-tie-order-wraps", test_r_tie_order_wraps);
  g_test_add_func("/clustering/mstknn/duplicated-rows", test_duplicated_rows);
  g_test_add_func("/clustering/mstknn/given-lists", test_given_lists);
  g_test_add_func("/clustering/mstknn/distance-files", test_distance_files);
  g_test_add_func("/clustering/mstknn/points-equal-matrix", test_points_equal_matrix);
  return g_test_run();
}
