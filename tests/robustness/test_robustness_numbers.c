/* Numbers with a stated behaviour (ROBUSTNESS.md): NaN/Inf are an error with file:line (or dropped
 * rows with --drop-missing), constant rows an error naming the row (or isolated vertices with a
 * warning under --drop-degenerate), duplicate rows are kept with exact ties broken by the lower
 * index, repeated labels are kept with one warning and node ids stay unique. */
#include <math.h>
#include <stdio.h>
#include <igraph.h>
#include <knnwb/formats.h>
#include <knnwb/knnwb.h>
#include "host_test_util.h"

static const KnnwbMetric all_metrics[] = {KNNWB_METRIC_PEARSON,   KNNWB_METRIC_ABS_PEARSON,
                                          KNNWB_METRIC_SPEARMAN,  KNNWB_METRIC_EUCLIDEAN,
                                          KNNWB_METRIC_MANHATTAN, KNNWB_METRIC_COSINE};

static KnnwbMatrix *read_text(const char *path, KnnwbMissingPolicy missing, KnnwbReadInfo *info,
                              GError **error)
{
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.missing = missing;
  KnnwbMatrix *matrix = NULL;
  knnwb_formats_read_matrix(path, &options, &matrix, info, error);
  return matrix;
}

/* Every spelling of a missing or non-finite value, on line 3: an error naming path:3, or, with the
 * drop policy, that row gone and one warning. A finite spelling beyond the float range is an error
 * under both policies. */
static void test_nan_inf_text(void)
{
  g_autofree char *dir = host_test_tmpdir();
  const char *values[] = {"NaN", "nan", "NA", "Inf", "-Inf", "inf", "1e999", "-1e999", ""};
  for (size_t v = 0; v < G_N_ELEMENTS(values); v++) {
    g_autofree char *text =
        g_strdup_printf("id\ta\tb\tc\nr1\t1\t2\t3\nr2\t4\t%s\t6\nr3\t7\t8\t10\n", values[v]);
    g_autofree char *path = host_test_write(dir, "values.tsv", text);
    g_autoptr(GError) error = NULL;
    KnnwbReadInfo info;
    g_assert_null(read_text(path, KNNWB_MISSING_ERROR, &info, &error));
    g_assert_nonnull(error);
    g_autofree char *where = g_strdup_printf("%s:3:", path);
    if (!g_str_has_prefix(error->message, where))
      g_error("'%s': %s", values[v], error->message);

    if (strstr(values[v], "e999") != NULL) {
      /* Not a missing value but one no float can hold (a typo, or wrong units): an error with
       * either policy. */
      g_assert_nonnull(strstr(error->message, "beyond the float range"));
      g_clear_error(&error);
      g_assert_null(read_text(path, KNNWB_MISSING_DROP_ROWS, &info, &error));
      g_assert_true(g_str_has_prefix(error->message, where));
      continue;
    }
    g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                          "*1 row with missing values*row 1 (r2)*line 3*");
    g_autoptr(KnnwbMatrix) kept = read_text(path, KNNWB_MISSING_DROP_ROWS, &info, NULL);
    g_test_assert_expected_messages();
    g_assert_nonnull(kept);
    g_assert_cmpuint(kept->n_rows, ==, 3); /* rows keep their numbers: r2 stays, absent */
    g_assert_true(knnwb_matrix_row_is_absent(kept, 1));
    g_assert_cmpstr(kept->row_labels[2], ==, "r3");
    g_assert_cmpuint(info.n_dropped_rows, ==, 1);
  }
  host_test_rmtree(dir);
}

/* NPY carries NaN/Inf as bits: same policy, with row and column in the message. */
static void test_nan_inf_npy(void)
{
  g_autofree char *dir = host_test_tmpdir();
  const float specials[] = {NAN, INFINITY, -INFINITY};
  for (size_t s = 0; s < G_N_ELEMENTS(specials); s++) {
    const char *header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }";
    g_autoptr(GString) bytes = g_string_new_len("\x93NUMPY\x01\x00", 8);
    guint16 length = 118; /* 10 + 118 = 128: padded to 64 bytes */
    g_string_append_len(bytes, (const char *)&length, 2);
    g_string_append(bytes, header);
    while (bytes->len < 127)
      g_string_append_c(bytes, ' ');
    g_string_append_c(bytes, '\n');
    float values[6] = {1, 2, 3, specials[s], 5, 7};
    g_string_append_len(bytes, (const char *)values, sizeof values);
    g_autofree char *path = g_build_filename(dir, "values.npy", NULL);
    g_assert_true(g_file_set_contents(path, bytes->str, (gssize)bytes->len, NULL));
    g_autoptr(GError) error = NULL;
    g_assert_null(read_text(path, KNNWB_MISSING_ERROR, NULL, &error));
    g_assert_nonnull(error);
    g_assert_true(g_str_has_prefix(error->message, path));
    g_assert_nonnull(strstr(error->message, "row 2"));
    g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING, "*1 row with missing values*");
    g_autoptr(KnnwbMatrix) kept = read_text(path, KNNWB_MISSING_DROP_ROWS, NULL, NULL);
    g_test_assert_expected_messages();
    g_assert_nonnull(kept);
    g_assert_cmpuint(kept->n_rows, ==, 3); /* rows keep their numbers */
    g_assert_true(knnwb_matrix_row_is_absent(kept, 1));
    g_assert_cmpfloat(kept->values[4], ==, 5.0f);
  }
  host_test_rmtree(dir);
}

/* The library refuses non-finite values handed to it directly (no reader in between). */
static void test_nan_library(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(4, 3, NULL);
  for (size_t i = 0; i < 12; i++)
    m->values[i] = (float)((i * 7) % 5) + (float)i / 10.0f;
  m->values[7] = NAN;
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 2;
  options.backend = KNNWB_BACKEND_CPU;
  KnnwbNeighbors *neighbors = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_knn_self(m, &options, &neighbors, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
  g_assert_nonnull(strstr(error->message, "row 2, column 1 (both counted from 0)"));
}

/* The program: NaN is exit 1 with file:line and no output; --drop-missing leaves the row out but
 * keeps the input's row numbers (the row is a vertex without edges) and names it. */
static void test_nan_cli(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = host_test_write(dir, "in.tsv",
                                           "id\ta\tb\tc\nr1\t1\t2\t3\nr2\tNaN\t5\t6\nr3\t7\t8\t10\n"
                                           "r4\t1\t9\t2\n");
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  g_autofree char *output = g_build_filename(out_dir, "g.knn", NULL);
  g_autofree char *err = NULL;
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", input, "-k", "1", "--metric", "euclidean",
                                "-q", "-o", output, NULL),
                  ==, 1);
  g_autofree char *where = g_strdup_printf("%s:3:", input);
  g_assert_nonnull(strstr(err, where));
  g_assert_cmpuint(host_test_count_files(out_dir), ==, 0);
  g_clear_pointer(&err, g_free);
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", input, "-k", "1", "--metric", "euclidean",
                                "--drop-missing", "-q", "-o", output, NULL),
                  ==, 0);
  g_assert_nonnull(strstr(err,
                          "1 row with missing values keeps its number but gets no edges: "
                          "row 1 (r2) (counted from 0, as in the outputs; the first on line 3)"));
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(output, &text, NULL, NULL));
  /* Euclidean, k = 1, by hand: r1 (1,2,3) -> r4 (1,9,2) at sqrt(50); r3 (7,8,10) -> r4 at
   * sqrt(101) (r1 is at sqrt(121)); r4 -> r1. Vertex 1 (r2) has no edge. */
  g_assert_cmpstr(text, ==,
                  "4 3\n0 3 7.0710678118654755\n2 3 10.04987562112089\n3 0 7.0710678118654755\n");
  host_test_rmtree(dir);
}

/* Constant rows: an error naming the row and the way out; with --drop-degenerate the row stays a
 * vertex without edges, and one warning says so. */
static void test_constant_rows(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = host_test_write(
      dir, "in.tsv",
      "id\ta\tb\tc\td\nG1\t1\t2\t3\t5\nG2\t2\t1\t4\t3\nFLAT\t4\t4\t4\t4\nG4\t9\t1\t2\t2\n"
      "G5\t1\t1\t3\t8\n");
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  g_autofree char *output = g_build_filename(out_dir, "g.knn", NULL);
  const char *metrics[] = {"pearson", "abs-pearson", "spearman"};
  for (size_t m = 0; m < G_N_ELEMENTS(metrics); m++) {
    g_autofree char *err = NULL;
    g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", input, "-k", "2", "--metric", metrics[m],
                                  "-q", "-o", output, NULL),
                    ==, 1);
    g_assert_nonnull(strstr(err, "row 2 (FLAT) (counted from 0) is constant"));
    g_assert_nonnull(strstr(err, "--drop-degenerate, pipeline drop-degenerate=\"true\")"));
    g_assert_cmpuint(host_test_count_files(out_dir), ==, 0);
    g_clear_pointer(&err, g_free);
    g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", input, "-k", "2", "--metric", metrics[m],
                                  "--drop-degenerate", "-q", "-o", output, NULL),
                    ==, 0);
    g_assert_nonnull(strstr(err, "1 row left out"));
    /* The warning names the file, not "data". */
    g_autofree char *named = g_strdup_printf("%s: 1 row left out", input);
    g_assert_nonnull(strstr(err, named));
    g_assert_nonnull(strstr(err, "first: row 2 (FLAT), counted from 0"));
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(output, &text, NULL, NULL));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    /* Five vertices (row numbers keep their meaning), 4 x 2 edges, none touching vertex 2. */
    g_assert_cmpstr(lines[0], ==, "5 8");
    for (guint l = 1; lines[l] && *lines[l]; l++) {
      long source = -1, target = -1;
      g_assert_cmpint(sscanf(lines[l], "%ld %ld", &source, &target), ==, 2);
      g_assert_cmpint(source, !=, 2);
      g_assert_cmpint(target, !=, 2);
    }
    g_unlink(output);
  }
  /* Cosine: an all-zero row is the degenerate one; a constant non-zero row is fine. */
  g_autofree char *zeros =
      host_test_write(dir, "zeros.tsv", "id\ta\tb\nA\t1\t2\nZ\t0\t0\nC\t3\t3\nD\t2\t7\n");
  g_autofree char *err = NULL;
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", zeros, "-k", "1", "--metric", "cosine",
                                "-q", "-o", output, NULL),
                  ==, 1);
  g_assert_nonnull(strstr(err, "row 1 (Z) (counted from 0) is all zeros"));
  host_test_rmtree(dir);
}

/* Duplicate rows are kept; copies are at one exact distance from a row, so the tie is broken by
 * the lower index. A group larger than the candidate margin forces the re-selection rounds. */
static void test_duplicate_rows(void)
{
  const size_t n = 90, d = 7, k = 12;
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, d, NULL);
  guint32 state = 11;
  for (size_t i = 0; i < n * d; i++) {
    state = state * 1664525u + 1013904223u;
    m->values[i] = (float)(state >> 8) / 16777216.0f * 4.0f - 2.0f;
  }
  /* Group A: 30 copies of row 3 spread over the matrix (more than k + the margin of 8);
   * group B: 4 copies of row 50. */
  gboolean in_a[90] = {FALSE}, in_b[90] = {FALSE};
  for (size_t i = 3; i < n; i += 3) {
    memcpy(m->values + i * d, m->values + 3 * d, d * sizeof(float));
    in_a[i] = TRUE;
  }
  const size_t group_b[] = {50, 52, 71, 89};
  for (size_t g = 0; g < G_N_ELEMENTS(group_b); g++) {
    memcpy(m->values + group_b[g] * d, m->values + 50 * d, d * sizeof(float));
    in_a[group_b[g]] = FALSE;
    in_b[group_b[g]] = TRUE;
  }
  for (size_t metric = 0; metric < G_N_ELEMENTS(all_metrics); metric++) {
    KnnwbKnnOptions options;
    knnwb_knn_options_init(&options);
    options.k = k;
    options.metric = all_metrics[metric];
    options.backend = KNNWB_BACKEND_CPU;
    options.n_threads = 2;
    g_autoptr(KnnwbNeighbors) neighbors = NULL;
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_knn_self(m, &options, &neighbors, &error));
    g_assert_no_error(error);
    for (size_t i = 0; i < n; i++) {
      const int64_t *row = neighbors->indices + i * k;
      const double *distance = neighbors->distances + i * k;
      g_assert_cmpint(neighbors->n_found[i], ==, (int32_t)k);
      /* Sorted by (distance, index) everywhere. */
      for (size_t r = 1; r < k; r++)
        g_assert_true(distance[r - 1] < distance[r] ||
                      (distance[r - 1] == distance[r] && row[r - 1] < row[r]));
      const gboolean *group = in_a[i] ? in_a : in_b[i] ? in_b : NULL;
      if (group == NULL)
        continue;
      /* The copies come first, lowest index first, all at one distance. */
      size_t expected = 0, r = 0;
      for (size_t j = 0; j < n && r < k; j++) {
        if (j == i || !group[j])
          continue;
        expected = j;
        g_assert_cmpint(row[r], ==, (int64_t)expected);
        g_assert_cmpfloat(distance[r], ==, distance[0]);
        r++;
      }
      (void)expected;
    }
  }
}

/* Repeated labels (probes sharing a gene symbol): kept, one warning naming the first repeat; GML
 * and GraphML node ids are vertex numbers, so they stay unique. */
static void test_duplicate_labels(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *path = host_test_write(
      dir, "probes.tsv",
      "probe\ts1\ts2\ts3\nTP53\t1\t2\t4\nBRCA1\t2\t1\t3\nTP53\t5\t1\t2\nMYC\t3\t3\t1\n"
      "BRCA1\t4\t2\t6\nTP53\t1\t5\t2\n");
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "*3 rows repeat an earlier row's label (first: 'TP53' on rows 0 and 2, "
                        "counted from 0 as in the outputs)*");
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbMatrix) m = read_text(path, KNNWB_MISSING_ERROR, NULL, &error);
  g_test_assert_expected_messages();
  g_assert_no_error(error);
  g_assert_cmpuint(m->n_rows, ==, 6);
  g_assert_cmpstr(m->row_labels[5], ==, "TP53");

  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 2;
  options.backend = KNNWB_BACKEND_CPU;
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_assert_true(knnwb_knn_graph(m, &options, KNNWB_GRAPH_UNION, &graph, &weights, &error));
  const char *names[] = {"g.gml", "g.graphml"};
  for (size_t f = 0; f < 2; f++) {
    g_autofree char *out = g_build_filename(dir, names[f], NULL);
    KnnwbGraphOutput output = {
        .graph = &graph, .weights = &weights, .labels = (const char *const *)m->row_labels};
    g_assert_true(knnwb_formats_write_graph(out, KNNWB_OUTPUT_AUTO, &output, &error));
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(out, &text, NULL, NULL));
    for (int v = 0; v < 6; v++) {
      g_autofree char *id =
          f == 0 ? g_strdup_printf("id %d\n", v) : g_strdup_printf("<node id=\"n%d\">", v);
      const char *first = strstr(text, id);
      g_assert_nonnull(first);
      g_assert_null(strstr(first + 1, id)); /* exactly once */
    }
  }
  igraph_destroy(&graph);
  igraph_vector_destroy(&weights);
  host_test_rmtree(dir);
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/robustness/numbers/nan-inf-text", test_nan_inf_text);
  g_test_add_func("/robustness/numbers/nan-inf-npy", test_nan_inf_npy);
  g_test_add_func("/robustness/numbers/nan-library", test_nan_library);
  g_test_add_func("/robustness/numbers/nan-cli", test_nan_cli);
  g_test_add_func("/robustness/numbers/constant-rows", test_constant_rows);
  g_test_add_func("/robustness/numbers/duplicate-rows", test_duplicate_rows);
  g_test_add_func("/robustness/numbers/duplicate-labels", test_duplicate_labels);
  return g_test_run();
}
