/* Each command writes the format its output's extension names (or refuses the name before any
 * work), with the row numbers and labels of the input. */
#include <knnwb/knnwb.h>
#include "host_test_util.h"

static char *read_text(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  return text;
}

/* Points on a line: c (row 2, at 9) has b (row 1, at 3) as its nearest. */
#define POINTS "name\tx\na\t1\nb\t3\nc\t9\n"

/* neighbourhood -o: .knn, .mtx and the .tsv edge table number the rows as the input does; GraphML
 * is GraphML; .npz and a cluster table are refused, as is an unknown extension, leaving nothing. */
static void test_neighbourhood_by_extension(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = host_test_write(dir, "points.tsv", POINTS);
  struct {
    const char *name, *want;
  } good[] = {
      {"n.knn", "3 1\n2 1 6\n"},
      {"n.tsv", "row\tlabel\trank\tneighbor_row\tneighbor\tdistance\n2\tc\t1\t1\tb\t6\n"},
      {"n.mtx", "3 3 1\n3 2 6\n"},
      {"n.graphml", "<graphml"},
      {"n.gml", "graph\n["},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(good); i++) {
    g_autofree char *err = NULL;
    int status = host_test_run(dir, NULL, &err, "neighbourhood", "points.tsv", "--focus", "c", "-k",
                               "1", "-m", "euclidean", "-q", "-o", good[i].name, NULL);
    g_assert_cmpint(status, ==, 0);
    g_autofree char *text = read_text(dir, good[i].name);
    g_assert_nonnull(strstr(text, good[i].want));
  }
  g_autofree char *rows = read_text(dir, "n.rows.txt");
  g_assert_cmpstr(rows, ==, "a\nb\nc\n");
  guint before = host_test_count_files(dir);
  const char *bad[] = {"n.npz", "n.labels.tsv", "n.xyz"};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *err = NULL;
    int status = host_test_run(dir, NULL, &err, "neighbourhood", "points.tsv", "--focus", "c", "-k",
                               "1", "-m", "euclidean", "-q", "-o", bad[i], NULL);
    g_assert_cmpint(status, ==, 2);
    g_assert_nonnull(strstr(err, bad[i]));
  }
  g_assert_cmpuint(host_test_count_files(dir), ==, before);
  host_test_rmtree(dir);
}

/* The .knn third column is a distance (the exact double), and the help says so. */
static void test_knn_column_words(void)
{
  g_autofree char *out = NULL;
  g_assert_cmpint(host_test_run(NULL, &out, NULL, "knn", "--help", NULL), ==, 0);
  g_assert_nonnull(strstr(out, "`source target distance`"));
  g_assert_null(strstr(out, "source target weight"));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/host/output-formats/neighbourhood", test_neighbourhood_by_extension);
  g_test_add_func("/host/output-formats/knn-column-words", test_knn_column_words);
  return g_test_run();
}
