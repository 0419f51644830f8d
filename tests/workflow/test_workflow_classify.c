/* kNN classification against a brute-force vote written here: the vote and its tie rule, query
 * classification, stratified folds, cross-validation and leave-one-out, class tables, metrics. */
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>
#include <knnwb/classify.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include "knnwb_test_matrix.h"

/* Brute force: the k nearest of x among the rows with usable[j] (by double distance, then index),
 * then the class counts and the tie rule, in the plainest possible code. */
static void brute_classify(const KnnwbMatrix *data, const float *x, const gboolean *usable,
                           const int32_t *cls, int n_classes, size_t k, KnnwbMetric metric,
                           int32_t *predicted, int32_t *votes)
{
  const size_t n = data->n_rows, d = data->n_cols;
  g_autofree double *dist = g_new(double, n);
  g_autofree gboolean *taken = g_new0(gboolean, n);
  g_autofree size_t *nearest = g_new(size_t, k);
  for (size_t j = 0; j < n; j++)
    dist[j] = usable[j] ? knnwb_distance_exact(metric, x, data->values + j * d, d) : INFINITY;
  for (size_t r = 0; r < k; r++) {
    size_t best = n;
    for (size_t j = 0; j < n; j++)
      if (usable[j] && !taken[j] && (best == n || dist[j] < dist[best]))
        best = j;
    taken[best] = TRUE;
    nearest[r] = best;
  }
  int32_t count[16] = {0};
  for (size_t r = 0; r < k; r++)
    count[cls[nearest[r]]]++;
  int32_t top = 0;
  for (int c = 0; c < n_classes; c++)
    if (count[c] > top)
      top = count[c];
  *votes = top;
  for (size_t r = 0; r < k; r++)
    if (count[cls[nearest[r]]] == top) {
      *predicted = cls[nearest[r]];
      return;
    }
}

static KnnwbNeighbors *lists_of(size_t n_queries, size_t k, const int64_t *indices)
{
  KnnwbNeighbors *lists = g_new0(KnnwbNeighbors, 1);
  lists->n_queries = n_queries;
  lists->k = k;
  lists->indices = g_memdup2(indices, n_queries * k * sizeof(int64_t));
  lists->distances = g_new0(double, n_queries *k);
  lists->n_found = g_new(int32_t, n_queries);
  for (size_t q = 0; q < n_queries; q++)
    lists->n_found[q] = (int32_t)k;
  return lists;
}

static void test_vote_ties(void)
{
  /* Reference classes: rows 0,3 -> A(0); 1,2 -> B(1); 4 -> C(2); 5 unknown. */
  const int32_t cls[] = {0, 1, 1, 0, 2, -1};
  const int64_t indices[] = {0, 1, 2, 3, 4, /* A 2, B 2: A is nearer */
                             4, 1, 0, 2, 3, /* B 2, A 2, C 1: B (rank 2) is the nearest tied */
                             4, 5, 5, 5, 1, /* C 1, B 1 (unknowns do not vote): C */
                             5, 5, 5, 5, 5 /* no labelled neighbour */};
  g_autoptr(KnnwbNeighbors) lists = lists_of(4, 5, indices);
  int32_t predicted[4], votes[4];
  knnwb_classify_vote(lists, cls, 3, predicted, votes);
  g_assert_cmpint(predicted[0], ==, 0);
  g_assert_cmpint(votes[0], ==, 2);
  g_assert_cmpint(predicted[1], ==, 1);
  g_assert_cmpint(votes[1], ==, 2);
  g_assert_cmpint(predicted[2], ==, 2);
  g_assert_cmpint(votes[2], ==, 1);
  g_assert_cmpint(predicted[3], ==, -1);
  g_assert_cmpint(votes[3], ==, 0);
}

static void test_query_brute_force(void)
{
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(97, 7, 17);
  g_autoptr(KnnwbMatrix) query = knnwb_test_random_matrix(23, 7, 18);
  int32_t cls[97];
  gboolean usable[97];
  for (int i = 0; i < 97; i++) {
    cls[i] = i % 11 == 0 ? -1 : (i * 7) % 4;
    usable[i] = cls[i] >= 0;
  }
  const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_EUCLIDEAN,
                                 KNNWB_METRIC_MANHATTAN};
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++)
    for (size_t k = 1; k <= 8; k += 3) {
      KnnwbKnnOptions options;
      knnwb_knn_options_init(&options);
      options.k = k;
      options.metric = metrics[m];
      int32_t predicted[23], votes[23];
      g_autoptr(GError) error = NULL;
      g_assert_true(knnwb_classify_query(data, cls, 4, query, &options, predicted, votes, &error));
      g_assert_no_error(error);
      for (int q = 0; q < 23; q++) {
        int32_t p = -2, v = -2;
        brute_classify(data, query->values + q * 7, usable, cls, 4, k, metrics[m], &p, &v);
        g_assert_cmpint(predicted[q], ==, p);
        g_assert_cmpint(votes[q], ==, v);
      }
    }
  /* The query from another file, its genes (named columns) in another order: the same
   * predictions as the brute force on the reference's order (compared by position before). */
  static const size_t order[7] = {3, 6, 0, 5, 1, 4, 2};
  g_autoptr(KnnwbMatrix) shuffled = knnwb_matrix_new(23, 7, NULL);
  for (size_t j = 0; j < 7; j++) {
    g_autofree char *name = g_strdup_printf("gene%zu", j);
    knnwb_matrix_set_col_label(data, j, name);
    g_autofree char *moved = g_strdup_printf("gene%zu", order[j]);
    knnwb_matrix_set_col_label(shuffled, j, moved);
    for (size_t q = 0; q < 23; q++)
      shuffled->values[q * 7 + j] = query->values[q * 7 + order[j]];
  }
  {
    KnnwbKnnOptions options;
    knnwb_knn_options_init(&options);
    options.k = 5;
    options.metric = KNNWB_METRIC_EUCLIDEAN;
    int32_t predicted[23], votes[23];
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_classify_query(data, cls, 4, shuffled, &options, predicted, votes, &error));
    g_assert_no_error(error);
    for (int q = 0; q < 23; q++) {
      int32_t p = -2, v = -2;
      brute_classify(data, query->values + q * 7, usable, cls, 4, 5, options.metric, &p, &v);
      g_assert_cmpint(predicted[q], ==, p);
      g_assert_cmpint(votes[q], ==, v);
    }
  }
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 200;
  int32_t predicted[23], votes[23];
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_classify_query(data, cls, 4, query, &options, predicted, votes, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
}

static void test_folds(void)
{
  enum { N = 103 };
  int32_t cls[N], fold[N], again[N], other[N];
  for (int i = 0; i < N; i++)
    cls[i] = i % 13 == 5 ? -1 : (i < 60 ? 0 : i < 90 ? 1 : 2);
  g_autoptr(GError) error = NULL;
  for (size_t n_folds = 2; n_folds <= 10; n_folds += 4) {
    g_assert_true(knnwb_classify_folds(cls, N, n_folds, 7, fold, &error));
    size_t size[10] = {0}, per_class[3][10] = {{0}};
    for (int i = 0; i < N; i++) {
      if (cls[i] < 0) {
        g_assert_cmpint(fold[i], ==, -1);
        continue;
      }
      /* Every labelled row in exactly one fold. */
      g_assert_cmpint(fold[i], >=, 0);
      g_assert_cmpint(fold[i], <, (int)n_folds);
      size[fold[i]]++;
      per_class[cls[i]][fold[i]]++;
    }
    size_t total = 0;
    for (size_t f = 0; f < n_folds; f++) {
      total += size[f];
      for (size_t g = 0; g < n_folds; g++) {
        g_assert_cmpint(labs((long)size[f] - (long)size[g]), <=, 1);
        for (int c = 0; c < 3; c++) /* stratified */
          g_assert_cmpint(labs((long)per_class[c][f] - (long)per_class[c][g]), <=, 1);
      }
    }
    g_assert_cmpuint(total, ==, N - 8);
  }
  g_assert_true(knnwb_classify_folds(cls, N, 5, 7, fold, &error));
  g_assert_true(knnwb_classify_folds(cls, N, 5, 7, again, &error));
  g_assert_true(knnwb_classify_folds(cls, N, 5, 8, other, &error));
  g_assert_cmpmem(fold, sizeof fold, again, sizeof again);
  g_assert_true(memcmp(fold, other, sizeof fold) != 0);
  g_assert_false(knnwb_classify_folds(cls, N, 96, 7, fold, &error));
  g_clear_error(&error);
  g_assert_false(knnwb_classify_folds(cls, N, 1, 7, fold, &error));
  g_clear_error(&error);
  size_t n_folds = 0;
  g_assert_true(knnwb_classify_folds_from_string("loo", &n_folds, &error));
  g_assert_cmpuint(n_folds, ==, 0);
  g_assert_true(knnwb_classify_folds_from_string("7", &n_folds, &error));
  g_assert_cmpuint(n_folds, ==, 7);
  g_assert_false(knnwb_classify_folds_from_string("1", &n_folds, &error));
}

static void test_cross_validation_brute_force(void)
{
  enum { N = 61, D = 6 };
  g_autoptr(KnnwbMatrix) data = knnwb_test_random_matrix(N, D, 5);
  KnnwbClasses classes = {N, 3, NULL, g_new(int32_t, N)};
  for (int i = 0; i < N; i++)
    classes.of[i] = i % 17 == 3 ? -1 : (i % 3 == 0 ? 0 : (i * 5) % 3);
  int32_t fold[N], predicted[N], votes[N];
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 5;
  options.metric = KNNWB_METRIC_SPEARMAN;
  g_autoptr(GError) error = NULL;
  for (int loo = 0; loo <= 1; loo++) {
    g_assert_true(knnwb_classify_cross_validate(data, &classes, loo ? 0 : 4, 3, &options, fold,
                                                predicted, votes, &error));
    g_assert_no_error(error);
    for (int i = 0; i < N; i++) {
      gboolean usable[N];
      for (int j = 0; j < N; j++) {
        if (classes.of[i] < 0)
          usable[j] = classes.of[j] >= 0; /* unknown rows: against every labelled row */
        else if (loo)
          usable[j] = classes.of[j] >= 0 && j != i;
        else
          usable[j] = classes.of[j] >= 0 && fold[j] != fold[i];
      }
      int32_t p = -2, v = -2;
      brute_classify(data, data->values + i * D, usable, classes.of, 3, 5, options.metric, &p, &v);
      g_assert_cmpint(predicted[i], ==, p);
      g_assert_cmpint(votes[i], ==, v);
    }
  }
  g_free(classes.of);
}

static void test_classes_and_metrics(void)
{
  /* The CIBM demo: <SamplesClasses> become row classes after transposing. */
  g_autofree char *path =
      g_build_filename(KNNWB_SOURCE_DIR, "share", "examples", "demo-expression.txt", NULL);
  KnnwbReadOptions read;
  knnwb_formats_read_options_init(&read);
  read.transpose = TRUE;
  g_autoptr(KnnwbMatrix) samples = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_read_matrix(path, &read, &samples, NULL, &error));
  g_autoptr(KnnwbClasses) from_rows = NULL;
  g_assert_true(knnwb_classes_from_rows(samples, &from_rows, &error));
  g_assert_cmpuint(from_rows->n_classes, ==, 2);
  g_assert_cmpstr(from_rows->names[0], ==, "0");
  g_assert_cmpint(from_rows->of[1], ==, 1);

  g_autofree char *dir = g_dir_make_tmp("knnwb-classify-XXXXXX", NULL);
  g_autofree char *table_path = g_build_filename(dir, "c.tsv", NULL);
  g_assert_true(g_file_set_contents(table_path, "name\tclass\nr1\tB\nr0\tA\nr2\tNA\nr9\tA\nr1\tA\n",
                                    -1, NULL));
  g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(table_path, &error);
  g_autoptr(KnnwbMatrix) rows = knnwb_matrix_new(4, 2, NULL);
  for (int i = 0; i < 4; i++) {
    g_autofree char *label = g_strdup_printf("r%d", i);
    knnwb_matrix_set_row_label(rows, (size_t)i, label);
  }
  g_autoptr(KnnwbClasses) classes = NULL;
  g_assert_false(knnwb_classes_from_table(rows, table, NULL, "class", &classes, &error));
  g_autofree char *twice =
      g_strdup_printf("%s:6: 'r1' is listed twice (first on line 2)", table_path);
  g_autofree char *missing = g_strdup_printf("%s: row 'r3' is not in the table", table_path);
  g_assert_nonnull(strstr(error->message, twice));
  g_assert_nonnull(strstr(error->message, missing));
  g_clear_error(&error);
  g_assert_true(
      g_file_set_contents(table_path, "name\tclass\nr1\tB\nr0\tA\nr2\tNA\nr3\tB\n", -1, NULL));
  g_clear_pointer(&table, knnwb_annotation_free);
  table = knnwb_annotation_read(table_path, &error);
  /* The row of unknown class is predicted, and a warning says how many there are. */
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "*1 of the 4 rows have no class in column 'class'*");
  g_assert_true(knnwb_classes_from_table(rows, table, "name", "class", &classes, &error));
  g_test_assert_expected_messages();
  g_assert_cmpuint(classes->n_classes, ==, 2);
  g_assert_cmpint(classes->of[0], ==, 0);
  g_assert_cmpint(classes->of[1], ==, 1);
  g_assert_cmpint(classes->of[2], ==, -1);

  /* No row matches (a GEO matrix's GSM ids against a sheet of sample titles): one sentence with
   * both sides' names, not a line per row. */
  g_assert_true(g_file_set_contents(table_path, "name\tclass\nS1\tA\nS2\tB\nS3\tA\n", -1, NULL));
  g_clear_pointer(&table, knnwb_annotation_free);
  table = knnwb_annotation_read(table_path, &error);
  g_clear_pointer(&classes, knnwb_classes_free);
  g_assert_false(knnwb_classes_from_table(rows, table, NULL, "class", &classes, &error));
  g_autofree char *none =
      g_strdup_printf("%s: none of the matrix's 4 rows is named in the table's column 'name': the "
                      "rows are named like 'r0', 'r1', the column holds 'S1', 'S2'",
                      table_path);
  if (strstr(error->message, none) == NULL || strchr(error->message, '\n') != NULL)
    g_error("expected one line '%s...', got '%s'", none, error->message);
  g_clear_error(&error);

  /* Metrics by hand: truth A A B B B, predicted A B B B A (and one unscored). */
  const int32_t truth[] = {0, 0, 1, 1, 1, -1};
  const int32_t predicted[] = {0, 1, 1, 1, 0, 1};
  g_autoptr(KnnwbClassifyMetrics) metrics = knnwb_classify_metrics_new(truth, predicted, 6, 2);
  g_assert_cmpuint(metrics->n_scored, ==, 5);
  g_assert_cmpuint(metrics->n_correct, ==, 3);
  g_assert_cmpuint(metrics->confusion[0 * 2 + 1], ==, 1);
  g_assert_cmpuint(metrics->confusion[1 * 2 + 0], ==, 1);
  g_assert_cmpfloat(knnwb_classify_precision(metrics, 0), ==, 0.5);
  g_assert_cmpfloat(knnwb_classify_recall(metrics, 1), ==, 2.0 / 3.0);
  g_autofree char *metrics_path = g_build_filename(dir, "m.txt", NULL);
  char *names[] = {"A", "B", NULL};
  g_assert_true(knnwb_classify_write_metrics(metrics_path, metrics, names, &error));
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(metrics_path, &text, NULL, NULL));
  g_assert_nonnull(strstr(text, "accuracy\t0.6000\t(3 of 5)"));
  g_assert_nonnull(strstr(text, "A\t0.5000\t0.5000\t2"));
  g_assert_nonnull(strstr(text, "B\t1\t2"));
  g_unlink(metrics_path);
  g_unlink(table_path);
  g_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/workflow/classify/vote-ties", test_vote_ties);
  g_test_add_func("/workflow/classify/query-brute-force", test_query_brute_force);
  g_test_add_func("/workflow/classify/folds", test_folds);
  g_test_add_func("/workflow/classify/cross-validation-brute-force",
                  test_cross_validation_brute_force);
  g_test_add_func("/workflow/classify/classes-and-metrics", test_classes_and_metrics);
  return g_test_run();
}
