/* The workflow commands end to end through the knnwb program: outputs read back and compared with
 * values computed here, usage errors, file:line errors, nothing left behind by a failure. */
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>
#include <knnwb/error.h>
#include <knnwb/classify.h>
#include <knnwb/formats.h>
#include <knnwb/metafeatures.h>
#include <knnwb/neighbourhood.h>
#include <knnwb/phenotype.h>
#include <knnwb/write_matrix.h>
#include "knnwb_test_matrix.h"
#include "host_test_util.h"

static char *dir;

static char *path_in(const char *name)
{
  return g_build_filename(dir, name, NULL);
}

static void put(const char *name, const char *text)
{
  g_autofree char *path = path_in(name);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
}

static void test_metafeatures_command(void)
{
  put("in.tsv", "probe\tA\tB\tC\n"
                "p1\t1\t2\t3\n"
                "p2\t4\t1\t2\n"
                "p3\t0.5\t8\t1\n"
                "p4\t2\t2\t5\n");
  put("clin.tsv", "sample\tyears\nC\t3\nA\t1\nB\t2\n");
  g_autofree char *err = NULL;
  int status = host_test_run(dir, NULL, &err, "metafeatures", "in.tsv", "--ops", "difference,ratio",
                             "--phenotype", "clin.tsv:years", "-o", "out.tsv", "-q", NULL);
  g_assert_cmpint(status, ==, 0);
  g_autofree char *out = path_in("out.tsv");
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  g_autoptr(KnnwbMatrix) m = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_read_matrix(out, &options, &m, NULL, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(m->n_rows, ==, 4 + 2 * 6 + 1);
  g_assert_cmpstr(m->row_labels[4], ==, "p1-p2");
  g_assert_cmpstr(m->row_labels[10], ==, "p1/p2");
  g_assert_cmpstr(m->row_labels[15], ==, "p3/p4");
  g_assert_cmpstr(m->row_labels[16], ==, "years");
  g_assert_cmpfloat(m->values[4 * 3 + 0], ==, -3.0f);
  g_assert_cmpfloat(m->values[15 * 3 + 1], ==, 4.0f);
  g_assert_cmpfloat(m->values[16 * 3 + 2], ==, 3.0f);
  g_assert_cmpfloat(m->values[10 * 3 + 2], ==, (float)(3.0 / 2.0));

  /* NPY with its labels side file, read back through the NPY reader. */
  status = host_test_run(dir, NULL, NULL, "metafeatures", "in.tsv", "-o", "out.npy", "-q", NULL);
  g_assert_cmpint(status, ==, 0);
  g_autofree char *npy = path_in("out.npy");
  g_autofree char *labels = path_in("out.labels.txt");
  options.labels_path = labels;
  g_autoptr(KnnwbMatrix) n = NULL;
  g_assert_true(knnwb_formats_read_matrix(npy, &options, &n, NULL, &error));
  g_assert_cmpuint(n->n_rows, ==, 10);
  g_assert_cmpstr(n->row_labels[9], ==, "p3-p4");
  g_assert_cmpfloat(n->values[9 * 3 + 2], ==, -4.0f);
}

static void test_metafeatures_errors(void)
{
  put("zero.tsv", "probe\tA\tB\n"
                  "p1\t1\t2\n"
                  "p2\t0\t1\n");
  put("clin.tsv", "sample\tyears\nA\t1\nB\tsoon\nZ\t2\n");
  g_autofree char *err = NULL;
  int status = host_test_run(dir, NULL, &err, "metafeatures", "zero.tsv", "--ops", "ratio", "-o",
                             "bad.tsv", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "p1/p2: the denominator p2 is zero in column 1 (A)"));
  g_autofree char *bad = path_in("bad.tsv");
  g_assert_false(g_file_test(bad, G_FILE_TEST_EXISTS));
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "metafeatures", "zero.tsv", "--ops", "ratio", "--missing",
                         "drop-rows", "--phenotype", "clin.tsv:years", "-o", "bad.tsv", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "clin.tsv:3: sample 'B': 'soon' is not a number"));
  g_assert_false(g_file_test(bad, G_FILE_TEST_EXISTS));
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "metafeatures", "zero.tsv", NULL);
  g_assert_cmpint(status, ==, 2);
  g_assert_nonnull(strstr(err, "-o OUT is required"));
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "metafeatures", "zero.tsv", "--ops", "quotient", "-o",
                         "x.npy", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "'quotient' is unknown"));
  g_autofree char *help = NULL;
  status = host_test_run(dir, &help, NULL, "metafeatures", "--help", NULL);
  g_assert_cmpint(status, ==, 0);
  g_assert_nonnull(strstr(help, "384,126"));
}

/* 12 probes x 8 samples and a clinical table. */
static void write_expression(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(12, 8, 21);
  for (size_t i = 0; i < 12; i++) {
    g_autofree char *label = g_strdup_printf("g%02zu", i);
    knnwb_matrix_set_row_label(m, i, label);
  }
  for (size_t j = 0; j < 8; j++) {
    g_autofree char *label = g_strdup_printf("S%zu", j);
    knnwb_matrix_set_col_label(m, j, label);
  }
  g_autofree char *path = path_in("expr.tsv");
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_write_matrix_tsv(path, m, &error));
  put("clinical.tsv", "sample\tYears\tGroup\n"
                      "S0\t1.5\tA\nS1\t2\tA\nS2\t7\tB\nS3\t3\tA\n"
                      "S4\t9\tB\nS5\t4\tA\nS6\t8.5\tB\nS7\t6\tB\n");
}

static void test_neighbourhood_command(void)
{
  write_expression();
  g_autofree char *err = NULL;
  int status =
      host_test_run(dir, NULL, &err, "neighbourhood", "expr.tsv", "--metafeatures", "difference",
                    "--phenotype", "clinical.tsv:Years", "--focus", "Years", "-k", "4", "--metric",
                    "pearson", "--order", "2", "-o", "n.gml", "--table", "n.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  /* The same through the C API, by hand. */
  g_autofree char *expr = path_in("expr.tsv");
  g_autofree char *clinical = path_in("clinical.tsv");
  KnnwbReadOptions read_options;
  knnwb_formats_read_options_init(&read_options);
  g_autoptr(KnnwbMatrix) data = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_read_matrix(expr, &read_options, &data, NULL, &error));
  KnnwbMetafeatureOptions mf;
  knnwb_metafeatures_options_init(&mf);
  KnnwbMatrix *expanded = NULL;
  g_assert_true(knnwb_metafeatures_expand(data, &mf, &expanded, &error));
  knnwb_matrix_free(data);
  data = expanded;
  g_assert_true(knnwb_phenotype_append(&data, clinical, NULL, "Years", NULL, &error));
  g_assert_cmpuint(data->n_rows, ==, 12 + 66 + 1);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 4;
  const int64_t focus[] = {78};
  g_autoptr(KnnwbNeighbourhood) nb = NULL;
  g_assert_true(
      knnwb_neighbourhood_find(data, focus, 1, 2, KNNWB_DIRECTION_OUT, &options, &nb, &error));
  g_autofree char *expected = path_in("expected.tsv");
  g_assert_true(knnwb_neighbourhood_write_table(expected, nb, data, options.metric, &error));
  g_autofree char *got_text = NULL, *expected_text = NULL;
  g_autofree char *table = path_in("n.tsv");
  g_assert_true(g_file_get_contents(table, &got_text, NULL, NULL));
  g_assert_true(g_file_get_contents(expected, &expected_text, NULL, NULL));
  g_assert_cmpstr(got_text, ==, expected_text);
  g_assert_true(
      g_str_has_prefix(got_text, "focus\trank\tlabel\torder\tdistance\tr\tp\tq\nYears\t1\t"));

  /* The pipeline gives the same table. */
  put("nb.xml",
      "<pipeline name=\"nb\" version=\"1\">\n"
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"expr.tsv\"/></step>\n"
      "  <step id=\"pairs\" type=\"metafeatures\"><input name=\"data\" step=\"load\"/></step>\n"
      "  <step id=\"pheno\" type=\"append-phenotype\"><input name=\"data\" step=\"pairs\"/>\n"
      "    <param name=\"table\" value=\"clinical.tsv\"/><param name=\"column\" "
      "value=\"Years\"/></step>\n"
      "  <step id=\"nb\" type=\"neighbourhood\"><input name=\"data\" step=\"pheno\"/>\n"
      "    <param name=\"k\" value=\"4\"/><param name=\"focus\" value=\"Years\"/>\n"
      "    <param name=\"order\" value=\"2\"/><param name=\"table\" value=\"p.tsv\"/>\n"
      "    <param name=\"gml\" value=\"p.gml\"/></step>\n"
      "  <step id=\"write\" type=\"write-graph\"><input name=\"graph\" step=\"nb\"/>\n"
      "    <param name=\"path\" value=\"p.knn\"/></step>\n"
      "</pipeline>\n");
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "run", "nb.xml", "--quiet", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *pipeline_table = path_in("p.tsv");
  g_autofree char *pipeline_text = NULL;
  g_assert_true(g_file_get_contents(pipeline_table, &pipeline_text, NULL, NULL));
  g_assert_cmpstr(pipeline_text, ==, expected_text);
  g_autofree char *knn = path_in("p.knn");
  g_autofree char *knn_text = NULL;
  g_assert_true(g_file_get_contents(knn, &knn_text, NULL, NULL));
  g_autofree char *head =
      g_strdup_printf("%zu %" IGRAPH_PRId "\n", nb->n_vertices, igraph_ecount(&nb->graph));
  g_assert_true(g_str_has_prefix(knn_text, head));
}

static void test_neighbourhood_errors(void)
{
  write_expression();
  guint before = host_test_count_files(dir);
  g_autofree char *err = NULL;
  int status = host_test_run(dir, NULL, &err, "neighbourhood", "expr.tsv", "--focus", "g01,nope",
                             "-k", "3", "-o", "x.gml", "--table", "x.tsv", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "expr.tsv: focus: no row is labelled 'nope'"));
  g_assert_cmpuint(host_test_count_files(dir), ==, before);
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "neighbourhood", "expr.tsv", "--focus", "g01", "-k", "3",
                         "--phenotype", "clinical.tsv:Group", "-o", "x.gml", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "clinical.tsv:1: column 'Group' is categorical"));
  g_assert_cmpuint(host_test_count_files(dir), ==, before);
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "neighbourhood", "expr.tsv", "--focus", "g01", "-o",
                         "x.gml", NULL);
  g_assert_cmpint(status, ==, 2);
  g_assert_nonnull(strstr(err, "-k K is required"));
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "neighbourhood", "expr.tsv", "--focus", "g01", "-k", "3",
                         "--direction", "sideways", "-o", "x.gml", NULL);
  g_assert_cmpint(status, ==, 2);
  g_autofree char *help = NULL;
  status = host_test_run(dir, &help, NULL, "neighbourhood", "--help", NULL);
  g_assert_cmpint(status, ==, 0);
  g_assert_nonnull(strstr(help, "--direction"));
}

static void test_classify_command(void)
{
  g_autofree char *demo =
      g_build_filename(KNNWB_SOURCE_DIR, "share", "examples", "demo-expression.txt", NULL);
  g_autofree char *out = NULL, *err = NULL;
  int status = host_test_run(dir, &out, &err, "classify", demo, "--transpose", "--folds", "loo",
                             "-k", "3", "-o", "loo.tsv", "--metrics", "loo.txt", NULL);
  if (status != 0)
    g_error("%s", err);
  g_assert_nonnull(strstr(out, "leave-one-out"));
  g_assert_nonnull(strstr(out, "confusion"));
  /* The same through the C API. */
  KnnwbReadOptions read;
  knnwb_formats_read_options_init(&read);
  read.transpose = TRUE;
  g_autoptr(KnnwbMatrix) samples = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_read_matrix(demo, &read, &samples, NULL, &error));
  g_autoptr(KnnwbClasses) classes = NULL;
  g_assert_true(knnwb_classes_from_rows(samples, &classes, &error));
  const size_t n = samples->n_rows;
  g_autofree int32_t *fold = g_new(int32_t, n), *predicted = g_new(int32_t, n),
                     *votes = g_new(int32_t, n);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 3;
  g_assert_true(knnwb_classify_cross_validate(samples, classes, 0, 1, &options, fold, predicted,
                                              votes, &error));
  g_autofree char *expected = path_in("expected-loo.tsv");
  g_assert_true(knnwb_classify_write_predictions(expected, samples, classes->names, classes->of,
                                                 predicted, votes, fold, 3, &error));
  g_autofree char *got_path = path_in("loo.tsv");
  g_autofree char *got = NULL, *want = NULL;
  g_assert_true(g_file_get_contents(got_path, &got, NULL, NULL));
  g_assert_true(g_file_get_contents(expected, &want, NULL, NULL));
  g_assert_cmpstr(got, ==, want);
  g_autofree char *metrics_path = path_in("loo.txt");
  g_autofree char *metrics_text = NULL;
  g_assert_true(g_file_get_contents(metrics_path, &metrics_text, NULL, NULL));
  g_assert_true(g_str_has_prefix(metrics_text, "accuracy\t"));

  /* A table of classes and a query file (two of the samples again: their true class shows). */
  write_expression();
  /* In INPUT's orientation (probes as rows), read with the same --transpose. */
  g_autoptr(GString) query_text = g_string_new("probe\tS2\tnew\n");
  for (int i = 0; i < 12; i++)
    g_string_append_printf(query_text, "g%02d\t%d\t%d\n", i, i + 1, (i * 5) % 7);
  put("query.tsv", query_text->str);
  g_clear_pointer(&err, g_free);
  g_clear_pointer(&out, g_free);
  status =
      host_test_run(dir, &out, &err, "classify", "expr.tsv", "-T", "--classes",
                    "clinical.tsv:Group", "-k", "3", "--query", "query.tsv", "-o", "q.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *q_path = path_in("q.tsv");
  g_autofree char *q_text = NULL;
  g_assert_true(g_file_get_contents(q_path, &q_text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(q_text, "\n", -1);
  g_assert_cmpuint(g_strv_length(lines), ==, 4);
  g_assert_true(g_str_has_prefix(lines[1], "S2\tB\t"));
  g_assert_true(g_str_has_prefix(lines[2], "new\t\t"));
  /* 4-fold cross-validation with the table. */
  status = host_test_run(dir, NULL, NULL, "classify", "expr.tsv", "-T", "--classes",
                         "clinical.tsv:Group", "-k", "2", "--folds", "4", "--seed", "9", "-o",
                         "cv.tsv", "-q", NULL);
  g_assert_cmpint(status, ==, 0);
  /* The pipeline step gives the same predictions. */
  put("cv.xml",
      "<pipeline name=\"cv\" version=\"1\">\n"
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"expr.tsv\"/>\n"
      "    <param name=\"transpose\" value=\"true\"/></step>\n"
      "  <step id=\"cv\" type=\"knn-classify\"><input name=\"data\" step=\"load\"/>\n"
      "    <param name=\"k\" value=\"2\"/><param name=\"classes\" value=\"clinical.tsv\"/>\n"
      "    <param name=\"column\" value=\"Group\"/><param name=\"folds\" value=\"4\"/>\n"
      "    <param name=\"seed\" value=\"9\"/><param name=\"predictions\" value=\"cv2.tsv\"/>\n"
      "    <param name=\"metrics\" value=\"cv2.txt\"/></step>\n"
      "</pipeline>\n");
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "run", "cv.xml", "--quiet", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *cv = path_in("cv.tsv");
  g_autofree char *cv2 = path_in("cv2.tsv");
  g_autofree char *cv_text = NULL, *cv2_text = NULL;
  g_assert_true(g_file_get_contents(cv, &cv_text, NULL, NULL));
  g_assert_true(g_file_get_contents(cv2, &cv2_text, NULL, NULL));
  g_assert_cmpstr(cv_text, ==, cv2_text);
}

static void test_classify_errors(void)
{
  write_expression();
  put("classes.tsv", "sample\tGroup\nS0\tA\nS1\tB\nS1\tA\n");
  guint before = host_test_count_files(dir);
  g_autofree char *err = NULL;
  int status = host_test_run(dir, NULL, &err, "classify", "expr.tsv", "-T", "--classes",
                             "classes.tsv:Group", "-k", "1", "-o", "x.tsv", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "classes.tsv:4: 'S1' is listed twice (first on line 3)"));
  g_assert_nonnull(strstr(err, "row 'S7' is not in the table"));
  g_assert_cmpuint(host_test_count_files(dir), ==, before);
  g_clear_pointer(&err, g_free);
  status =
      host_test_run(dir, NULL, &err, "classify", "expr.tsv", "-T", "-k", "1", "-o", "x.tsv", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "no class labels"));
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "classify", "expr.tsv", "-T", "--classes",
                         "clinical.tsv:Group", "-k", "1", "--folds", "one", "-o", "x.tsv", NULL);
  g_assert_cmpint(status, ==, 2);
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "classify", "expr.tsv", "-T", "--classes",
                         "clinical.tsv:Group", "-k", "7", "--folds", "4", "-o", "x.tsv", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "fold 1 of 4: k = 7"));
  g_assert_cmpuint(host_test_count_files(dir), ==, before);
  /* The command runs as steps; its messages still read as the command's: files by name, options
   * by option, no step lines, no pipeline file. */
  g_clear_pointer(&err, g_free);
  status =
      host_test_run(dir, NULL, &err, "classify", "missing.tsv", "-k", "1", "-o", "x.tsv", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "knnwb: missing.tsv: cannot open: No such file or directory"));
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "classify", "expr.tsv", "-T", "--classes",
                         "clinical.tsv:Group", "-k", "2", "-o", "x.tsv", "--metrics",
                         "no-such-dir/m.txt", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "knnwb: 'no-such-dir/m.txt': output directory"));
  g_assert_null(strstr(err, "step '"));
  g_assert_null(strstr(err, "[1/"));
  g_assert_cmpuint(host_test_count_files(dir), ==, before);
  g_autofree char *help = NULL;
  status = host_test_run(dir, &help, NULL, "classify", "--help", NULL);
  g_assert_cmpint(status, ==, 0);
  g_assert_nonnull(strstr(help, "--folds"));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  dir = host_test_tmpdir();
  g_test_add_func("/workflow/cli/metafeatures", test_metafeatures_command);
  g_test_add_func("/workflow/cli/metafeatures-errors", test_metafeatures_errors);
  g_test_add_func("/workflow/cli/neighbourhood", test_neighbourhood_command);
  g_test_add_func("/workflow/cli/neighbourhood-errors", test_neighbourhood_errors);
  g_test_add_func("/workflow/cli/classify", test_classify_command);
  g_test_add_func("/workflow/cli/classify-errors", test_classify_errors);
  int status = g_test_run();
  g_autoptr(GDir) handle = g_dir_open(dir, 0, NULL);
  const char *name;
  while (handle && (name = g_dir_read_name(handle)) != NULL) {
    g_autofree char *path = path_in(name);
    g_unlink(path);
  }
  g_rmdir(dir);
  g_free(dir);
  return status;
}
