/* The workflow commands end to end through the knnwb program: outputs read back and compared with
 * values computed here, usage errors, file:line errors, nothing left behind by a failure. */
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
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

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  dir = host_test_tmpdir();
  g_test_add_func("/workflow/cli/metafeatures", test_metafeatures_command);
  g_test_add_func("/workflow/cli/metafeatures-errors", test_metafeatures_errors);
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
