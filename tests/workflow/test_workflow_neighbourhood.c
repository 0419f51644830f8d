/* Neighbourhoods: a small hand-made graph in every direction, the focused search equal to the cut
 * from the whole graph and to a breadth-first search over brute-force lists written here, the
 * ranked table and the GML. */
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>
#include <knnwb/error.h>
#include <knnwb/neighbourhood.h>
#include "knnwb_test_matrix.h"

/* Hand-made lists over 7 rows, k = 2 (row: its two nearest):
 *   0: 1 2   1: 0 3   2: 4 0   3: 1 5   4: 2 6   5: 3 1   6: 4 5
 * From focus 0, order 1: out {1, 2}; in (rows listing 0) {1, 2}; order 2: out adds 3 (from 1) and
 * 4 (from 2); in adds 5 (lists 1) and 4 (lists 2). */
static const int64_t hand_lists[7][2] = {{1, 2}, {0, 3}, {4, 0}, {1, 5}, {2, 6}, {3, 1}, {4, 5}};

static KnnwbNeighbors *hand_neighbors(void)
{
  KnnwbNeighbors *lists = g_new0(KnnwbNeighbors, 1);
  lists->n_queries = 7;
  lists->k = 2;
  lists->indices = g_new(int64_t, 14);
  lists->distances = g_new(double, 14);
  lists->n_found = g_new(int32_t, 7);
  for (int i = 0; i < 7; i++) {
    lists->n_found[i] = 2;
    for (int r = 0; r < 2; r++) {
      lists->indices[i * 2 + r] = hand_lists[i][r];
      lists->distances[i * 2 + r] = 0.1 * (i + 1) + r;
    }
  }
  lists->backend_used = g_strdup("test");
  return lists;
}

/* The vertex rows sorted, as a string "0 1 2". */
static char *row_set(const KnnwbNeighbourhood *nb)
{
  g_autofree int64_t *rows = g_memdup2(nb->rows, nb->n_vertices * sizeof(int64_t));
  for (size_t i = 1; i < nb->n_vertices; i++)
    for (size_t j = i; j > 0 && rows[j - 1] > rows[j]; j--) {
      int64_t t = rows[j];
      rows[j] = rows[j - 1];
      rows[j - 1] = t;
    }
  GString *text = g_string_new(NULL);
  for (size_t i = 0; i < nb->n_vertices; i++)
    g_string_append_printf(text, "%s%" G_GINT64_FORMAT, i ? " " : "", (gint64)rows[i]);
  return g_string_free(text, FALSE);
}

static void test_hand_graph(void)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(7, 4, 1);
  g_autoptr(KnnwbNeighbors) lists = hand_neighbors();
  const int64_t focus[] = {0};
  struct {
    KnnwbDirection direction;
    int order;
    const char *rows;
    int n_edges;
  } cases[] = {
      {KNNWB_DIRECTION_OUT, 1, "0 1 2", 4},         /* 0->1 0->2 1->0 2->0 */
      {KNNWB_DIRECTION_IN, 1, "0 1 2", 4},          /* 1 and 2 list 0 */
      {KNNWB_DIRECTION_OUT, 2, "0 1 2 3 4", 8},     /* + 1->3 2->4 3->1 4->2 */
      {KNNWB_DIRECTION_IN, 2, "0 1 2 3 4 5", 11},   /* 3,5 list 1; 4 lists 2; all but 4->6 */
      {KNNWB_DIRECTION_BOTH, 2, "0 1 2 3 4 5", 11}, /* out 3,4 and in 3,4,5 */
      {KNNWB_DIRECTION_OUT, 3, "0 1 2 3 4 5 6", 14},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autoptr(KnnwbNeighbourhood) nb = NULL;
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_neighbourhood_from_lists(data, lists, focus, 1, cases[c].order,
                                                 cases[c].direction, KNNWB_METRIC_EUCLIDEAN, &nb,
                                                 &error));
    g_assert_no_error(error);
    g_autofree char *rows = row_set(nb);
    g_assert_cmpstr(rows, ==, cases[c].rows);
    g_assert_cmpint(igraph_ecount(&nb->graph), ==, cases[c].n_edges);
    g_assert_cmpint(nb->rows[0], ==, 0);
    g_assert_cmpint(nb->order[0], ==, 0);
    /* Every member but the focus is in the ranked table, once. */
    g_assert_cmpuint(nb->n_members, ==, nb->n_vertices - 1);
  }
  /* Orders: out, order 2: 1 and 2 at 1, 3 and 4 at 2. */
  g_autoptr(KnnwbNeighbourhood) nb = NULL;
  g_assert_true(knnwb_neighbourhood_from_lists(data, lists, focus, 1, 2, KNNWB_DIRECTION_OUT,
                                               KNNWB_METRIC_EUCLIDEAN, &nb, NULL));
  for (size_t v = 0; v < nb->n_vertices; v++) {
    int expected = nb->rows[v] == 0 ? 0 : nb->rows[v] <= 2 ? 1 : 2;
    g_assert_cmpint(nb->order[v], ==, expected);
  }
  /* The table ranks by exact distance to the focus, then row. */
  for (size_t i = 0; i < nb->n_members; i++) {
    const KnnwbNeighbourhoodMember *m = &nb->members[i];
    g_assert_cmpuint(m->rank, ==, i + 1);
    double d =
        knnwb_distance_exact(KNNWB_METRIC_EUCLIDEAN, data->values, data->values + m->row * 4, 4);
    g_assert_cmpfloat(m->distance, ==, d);
    g_assert_true(isnan(m->r));
    if (i > 0)
      g_assert_cmpfloat(nb->members[i - 1].distance, <=, m->distance);
  }
  /* Two foci: two tables; the focus of the second is in the first's table. */
  const int64_t two[] = {0, 6};
  g_clear_pointer(&nb, knnwb_neighbourhood_free);
  g_assert_true(knnwb_neighbourhood_from_lists(data, lists, two, 2, 1, KNNWB_DIRECTION_OUT,
                                               KNNWB_METRIC_EUCLIDEAN, &nb, NULL));
  g_autofree char *rows = row_set(nb);
  g_assert_cmpstr(rows, ==, "0 1 2 4 5 6");
  g_assert_cmpuint(nb->n_members, ==, 4);
  g_assert_cmpuint(nb->members[2].focus, ==, 1);
}

/* Brute force: every row's k nearest by (double distance, index), then a BFS, in the test. */
static char *brute_force_rows(const KnnwbMatrix *data, KnnwbMetric metric, size_t k,
                              const int64_t *focus, size_t n_focus, int order)
{
  const size_t n = data->n_rows, d = data->n_cols;
  g_autofree int *hops = g_new(int, n);
  for (size_t i = 0; i < n; i++)
    hops[i] = -1;
  g_autoptr(GArray) frontier = g_array_new(FALSE, FALSE, sizeof(size_t));
  for (size_t f = 0; f < n_focus; f++) {
    size_t row = (size_t)focus[f];
    hops[row] = 0;
    g_array_append_val(frontier, row);
  }
  g_autofree double *dist = g_new(double, n);
  g_autofree size_t *index = g_new(size_t, n);
  for (int level = 0; level < order; level++) {
    g_autoptr(GArray) next = g_array_new(FALSE, FALSE, sizeof(size_t));
    for (guint t = 0; t < frontier->len; t++) {
      size_t i = g_array_index(frontier, size_t, t);
      size_t m = 0;
      for (size_t j = 0; j < n; j++)
        if (j != i) {
          dist[m] = knnwb_distance_exact(metric, data->values + i * d, data->values + j * d, d);
          index[m++] = j;
        }
      for (size_t a = 0; a < k; a++) /* partial selection sort: the k smallest in order */
        for (size_t b = a + 1; b < m; b++)
          if (dist[b] < dist[a] || (dist[b] == dist[a] && index[b] < index[a])) {
            double td = dist[a];
            dist[a] = dist[b];
            dist[b] = td;
            size_t ti = index[a];
            index[a] = index[b];
            index[b] = ti;
          }
      for (size_t a = 0; a < k; a++)
        if (hops[index[a]] < 0) {
          hops[index[a]] = level + 1;
          g_array_append_val(next, index[a]);
        }
    }
    g_array_set_size(frontier, 0);
    g_array_append_vals(frontier, next->data, next->len);
  }
  GString *text = g_string_new(NULL);
  for (size_t i = 0; i < n; i++)
    if (hops[i] >= 0)
      g_string_append_printf(text, "%s%zu", text->len ? " " : "", i);
  return g_string_free(text, FALSE);
}

static void assert_same(const KnnwbNeighbourhood *a, const KnnwbNeighbourhood *b)
{
  g_assert_cmpuint(a->n_vertices, ==, b->n_vertices);
  g_assert_cmpmem(a->rows, a->n_vertices * 8, b->rows, b->n_vertices * 8);
  g_assert_cmpmem(a->order, a->n_vertices * sizeof(int), b->order, b->n_vertices * sizeof(int));
  g_assert_cmpint(igraph_ecount(&a->graph), ==, igraph_ecount(&b->graph));
  for (igraph_integer_t e = 0; e < igraph_ecount(&a->graph); e++) {
    g_assert_cmpint(IGRAPH_FROM(&a->graph, e), ==, IGRAPH_FROM(&b->graph, e));
    g_assert_cmpint(IGRAPH_TO(&a->graph, e), ==, IGRAPH_TO(&b->graph, e));
    g_assert_cmpfloat(VECTOR(a->weights)[e], ==, VECTOR(b->weights)[e]);
  }
  g_assert_cmpuint(a->n_members, ==, b->n_members);
  for (size_t i = 0; i < a->n_members; i++) {
    g_assert_cmpint(a->members[i].row, ==, b->members[i].row);
    g_assert_cmpint(a->members[i].order, ==, b->members[i].order);
    g_assert_cmpfloat(a->members[i].distance, ==, b->members[i].distance);
  }
}

static void test_focused_equals_cut(void)
{
  const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_EUCLIDEAN,
                                 KNNWB_METRIC_SPEARMAN, KNNWB_METRIC_MANHATTAN,
                                 KNNWB_METRIC_ABS_PEARSON};
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(211, 9, 7);
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++)
    for (int order = 1; order <= 3; order++) {
      KnnwbKnnOptions options;
      knnwb_knn_options_init(&options);
      options.metric = metrics[m];
      options.k = order == 3 ? 3 : 5;
      options.backend = KNNWB_BACKEND_CPU;
      const int64_t focus[] = {5, 100, 210};
      size_t n_focus = order == 2 ? 3 : 1;
      g_autoptr(GError) error = NULL;
      g_autoptr(KnnwbNeighbors) lists = NULL;
      g_assert_true(knnwb_knn_self(data, &options, &lists, &error));
      g_assert_no_error(error);
      for (int direction = 0; direction < 3; direction++) {
        g_autoptr(KnnwbNeighbourhood) found = NULL, cut = NULL;
        g_assert_true(knnwb_neighbourhood_find(
            data, focus, n_focus, order, (KnnwbDirection)direction, &options, &found, &error));
        g_assert_no_error(error);
        g_assert_true(knnwb_neighbourhood_from_lists(data, lists, focus, n_focus, order,
                                                     (KnnwbDirection)direction, metrics[m], &cut,
                                                     &error));
        assert_same(found, cut);
        if (direction == KNNWB_DIRECTION_OUT) {
          /* Focused: only the members were queried, never the whole graph. */
          g_assert_false(found->whole_graph);
          g_assert_cmpuint(found->n_queries, ==, found->n_vertices);
          g_assert_cmpuint(found->n_queries, <, data->n_rows);
          g_autofree char *brute =
              brute_force_rows(data, metrics[m], options.k, focus, n_focus, order);
          g_autofree char *rows = row_set(found);
          g_assert_cmpstr(rows, ==, brute);
        } else {
          g_assert_true(found->whole_graph);
        }
      }
    }
}

/* A focus row with missing values (kept absent, zeros: --drop-missing) has no neighbours in the
 * whole graph, so its out-neighbourhood is itself alone, as --direction both says. The focused
 * search queried its zeros: euclidean found neighbours of the origin, pearson failed with "query
 * row 0 is constant". A second focus keeps its own neighbourhood. */
static void test_absent_focus(void)
{
  const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_PEARSON,
                                 KNNWB_METRIC_MANHATTAN};
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(61, 7, 11);
  memset(data->values + 44 * 7, 0, 7 * sizeof(float));
  knnwb_matrix_set_row_absent(data, 44);
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
    KnnwbKnnOptions options;
    knnwb_knn_options_init(&options);
    options.metric = metrics[m];
    options.k = 4;
    options.backend = KNNWB_BACKEND_CPU;
    g_autoptr(GError) error = NULL;
    g_autoptr(KnnwbNeighbors) lists = NULL;
    g_assert_true(knnwb_knn_self(data, &options, &lists, &error));
    g_assert_cmpint(lists->n_found[44], ==, 0);
    const int64_t focus[][2] = {{44, -1}, {44, 3}};
    for (guint f = 0; f < G_N_ELEMENTS(focus); f++) {
      size_t n_focus = focus[f][1] < 0 ? 1 : 2;
      g_autoptr(KnnwbNeighbourhood) found = NULL, cut = NULL;
      g_assert_true(knnwb_neighbourhood_find(data, focus[f], n_focus, 2, KNNWB_DIRECTION_OUT,
                                             &options, &found, &error));
      g_assert_no_error(error);
      g_assert_true(knnwb_neighbourhood_from_lists(data, lists, focus[f], n_focus, 2,
                                                   KNNWB_DIRECTION_OUT, metrics[m], &cut, &error));
      assert_same(found, cut);
      if (n_focus == 1)
        g_assert_cmpuint(found->n_vertices, ==, 1);
      else
        g_assert_cmpuint(found->n_vertices, >, 2);
    }
  }
}

static void test_r_column(void)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(60, 12, 3);
  for (int j = 0; j < 12; j++) /* row 11 anti-correlated with the focus */
    data->values[11 * 12 + j] = -2.0f * data->values[10 * 12 + j] + 0.01f * (float)(j % 3);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 4;
  options.metric = KNNWB_METRIC_ABS_PEARSON;
  const int64_t focus[] = {10};
  g_autoptr(KnnwbNeighbourhood) nb = NULL;
  g_assert_true(
      knnwb_neighbourhood_find(data, focus, 1, 2, KNNWB_DIRECTION_OUT, &options, &nb, NULL));
  gboolean negative = FALSE;
  for (size_t i = 0; i < nb->n_members; i++) {
    const KnnwbNeighbourhoodMember *m = &nb->members[i];
    /* Brute-force signed Pearson r in double. */
    const float *x = data->values + 10 * 12, *y = data->values + m->row * 12;
    double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    for (int j = 0; j < 12; j++) {
      mx += x[j] / 12.0;
      my += y[j] / 12.0;
    }
    for (int j = 0; j < 12; j++) {
      sxy += (x[j] - mx) * (y[j] - my);
      sxx += (x[j] - mx) * (x[j] - mx);
      syy += (y[j] - my) * (y[j] - my);
    }
    double r = sxy / sqrt(sxx * syy);
    g_assert_cmpfloat_with_epsilon(m->r, r, 1e-9);
    g_assert_cmpfloat_with_epsilon(m->distance, 1 - fabs(r), 1e-9);
    negative |= r < 0;
  }
  g_assert_true(negative); /* abs-pearson finds anti-correlated rows: the sign is kept */
}

static void test_files(void)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(30, 6, 5);
  for (size_t i = 0; i < 30; i++) {
    g_autofree char *label = g_strdup_printf(i == 7 ? "gene\t%zu" : "gene%zu", i);
    knnwb_matrix_set_row_label(data, i, label);
  }
  g_autofree int64_t *focus = NULL;
  size_t n_focus = 0;
  g_autoptr(GError) error = NULL;
  g_assert_false(
      knnwb_neighbourhood_focus_rows(data, "gene3,nope,gene4,zz", &focus, &n_focus, &error));
  g_assert_nonnull(strstr(error->message, "no row is labelled 'nope', 'zz'"));
  g_clear_error(&error);
  g_assert_true(
      knnwb_neighbourhood_focus_rows(data, "gene3, gene4,gene3", &focus, &n_focus, &error));
  g_assert_cmpuint(n_focus, ==, 2);
  g_assert_cmpint(focus[1], ==, 4);
  /* Probes sharing a gene symbol: the first row is the focus, and a warning names the others
   * (silent before). */
  g_autofree int64_t *probe_focus = NULL;
  size_t n_probe_focus = 0;
  const char *const probes[] = {"MYC", "TP53", "EGFR", "TP53", "TP53"};
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "focus 'TP53' labels 3 rows (1, 3, ..., counted from 0); the first, row "
                        "1, is the focus");
  g_assert_true(knnwb_neighbourhood_focus_labels(probes, 5, "EGFR,TP53", &probe_focus,
                                                 &n_probe_focus, &error));
  g_test_assert_expected_messages();
  g_assert_cmpuint(n_probe_focus, ==, 2);
  g_assert_cmpint(probe_focus[0], ==, 2);
  g_assert_cmpint(probe_focus[1], ==, 1);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 3;
  g_autoptr(KnnwbNeighbourhood) nb = NULL;
  g_assert_false(knnwb_neighbourhood_find(data, focus, n_focus, 0, KNNWB_DIRECTION_OUT, &options,
                                          &nb, &error));
  g_assert_nonnull(strstr(error->message, "order must be at least 1"));
  g_clear_error(&error);
  options.k = 30;
  g_assert_false(knnwb_neighbourhood_find(data, focus, n_focus, 1, KNNWB_DIRECTION_OUT, &options,
                                          &nb, &error));
  g_clear_error(&error);
  options.k = 3;
  g_assert_true(knnwb_neighbourhood_find(data, focus, n_focus, 2, KNNWB_DIRECTION_BOTH, &options,
                                         &nb, &error));
  g_autofree char *dir = g_dir_make_tmp("knnwb-nb-XXXXXX", NULL);
  g_autofree char *table = g_build_filename(dir, "t.tsv", NULL);
  g_autofree char *gml = g_build_filename(dir, "n.gml", NULL);
  g_assert_true(knnwb_neighbourhood_write_table(table, nb, data, KNNWB_METRIC_PEARSON, &error));
  g_assert_true(knnwb_neighbourhood_write_gml(gml, nb, data, 42, &error));
  g_assert_no_error(error);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(table, &text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  g_assert_cmpstr(lines[0], ==, "focus\trank\tlabel\torder\tdistance\tr\tp\tq");
  g_assert_cmpuint(g_strv_length(lines), ==, nb->n_members + 2);
  g_auto(GStrv) first = g_strsplit(lines[1], "\t", -1);
  g_assert_cmpstr(first[0], ==, "gene3");
  g_assert_cmpstr(first[1], ==, "1");
  g_assert_cmpfloat_with_epsilon(g_ascii_strtod(first[4], NULL), nb->members[0].distance, 1e-8);
  g_assert_cmpfloat_with_epsilon(g_ascii_strtod(first[5], NULL), 1 - nb->members[0].distance, 1e-8);
  g_autofree char *graph = NULL;
  g_assert_true(g_file_get_contents(gml, &graph, NULL, NULL));
  g_assert_nonnull(strstr(graph, "label \"gene3\""));
  g_assert_nonnull(strstr(graph, "focus 1"));
  g_assert_nonnull(strstr(graph, "x "));
  g_unlink(table);
  g_unlink(gml);
  g_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/workflow/neighbourhood/hand-graph", test_hand_graph);
  g_test_add_func("/workflow/neighbourhood/focused-equals-cut", test_focused_equals_cut);
  g_test_add_func("/workflow/neighbourhood/r-column", test_r_column);
  g_test_add_func("/workflow/neighbourhood/absent-focus", test_absent_focus);
  g_test_add_func("/workflow/neighbourhood/files", test_files);
  return g_test_run();
}
