/* The labels side file (--labels FILE, pipeline labels) on every input format, not only NPY. */
#include <string.h>
#include <knnwb/knnwb.h>
#include "formats_test_util.h"

static KnnwbMatrix *read_with_labels(const char *path, const char *labels, KnnwbInputFormat format,
                                     gboolean transpose, GError **error)
{
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.format = format;
  options.transpose = transpose;
  options.labels_path = labels;
  KnnwbMatrix *matrix = NULL;
  if (!knnwb_formats_read_matrix(path, &options, &matrix, NULL, error))
    return NULL;
  return matrix;
}

/* The side file's labels replace the file's own row labels; transposed they name the features. */
static void test_text_formats(void)
{
  g_autofree char *labels = formats_test_write("three.txt", "x\ny\nz\n\n", -1);
  struct {
    const char *name, *content;
    KnnwbInputFormat format;
  } inputs[] = {
      {"a.tsv", "name\tc1\tc2\na\t1\t2\nb\t3\t4\nc\t5\t7\n", KNNWB_INPUT_TSV},
      {"a.csv", "name,c1,c2\na,1,2\nb,3,4\nc,5,7\n", KNNWB_INPUT_CSV},
      {"a.gct", "#1.2\n3\t2\nName\tDescription\tc1\tc2\na\tna\t1\t2\nb\tna\t3\t4\nc\tna\t5\t7\n",
       KNNWB_INPUT_GCT},
      {"a.txt", "<MicroarrayData>\n3\t2\na\t1\t2\nb\t3\t4\nc\t5\t7\n<EndOfFile>\n",
       KNNWB_INPUT_CIBM},
  };
  for (size_t f = 0; f < G_N_ELEMENTS(inputs); f++) {
    g_autofree char *path = formats_test_write(inputs[f].name, inputs[f].content, -1);
    g_autoptr(GError) error = NULL;
    g_autoptr(KnnwbMatrix) rows = read_with_labels(path, labels, inputs[f].format, FALSE, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(rows->n_rows, ==, 3);
    g_assert_cmpstr(rows->row_labels[0], ==, "x");
    g_assert_cmpstr(rows->row_labels[2], ==, "z");
    g_assert_cmpfloat(rows->values[5], ==, 7.0f);
    g_autoptr(KnnwbMatrix) columns = read_with_labels(path, labels, inputs[f].format, TRUE, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(columns->n_rows, ==, 2);
    g_assert_cmpstr(columns->col_labels[1], ==, "y");
    /* A count that differs is an error naming the side file and both counts. */
    g_autofree char *two = formats_test_write("two.txt", "x\ny\n", -1);
    g_autoptr(KnnwbMatrix) none = read_with_labels(path, two, inputs[f].format, FALSE, &error);
    g_assert_null(none);
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
    g_assert_nonnull(strstr(error->message, two));
    g_assert_nonnull(strstr(error->message, "2 labels for 3 rows"));
  }
}

/* A row dropped for missing values keeps its label slot (rows as stored); transposed it is a
 * feature and its label goes with it. */
static void test_dropped_rows(void)
{
  g_autofree char *labels = formats_test_write("four.txt", "w\nx\ny\nz\n", -1);
  g_autofree char *path =
      formats_test_write("gap.tsv", "name\tc1\tc2\na\t1\t2\nb\tNA\t4\nc\t5\t7\nd\t1\t1\n", -1);
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.labels_path = labels;
  options.missing = KNNWB_MISSING_DROP_ROWS;
  g_autoptr(KnnwbMatrix) rows = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_read_matrix(path, &options, &rows, NULL, &error));
  g_assert_cmpuint(rows->n_rows, ==, 4);
  g_assert_true(knnwb_matrix_row_is_absent(rows, 1));
  g_assert_cmpstr(rows->row_labels[3], ==, "z");
  options.transpose = TRUE;
  g_autoptr(KnnwbMatrix) columns = NULL;
  g_assert_true(knnwb_formats_read_matrix(path, &options, &columns, NULL, &error));
  g_assert_cmpuint(columns->n_cols, ==, 3);
  g_assert_cmpstr(columns->col_labels[0], ==, "w");
  g_assert_cmpstr(columns->col_labels[1], ==, "y");
  g_assert_cmpstr(columns->col_labels[2], ==, "z");
}

/* A side file with more labels than rows names both counts (trailing blank lines are not labels;
 * a blank line within is an empty label). */
static void test_label_counts(void)
{
  g_autofree char *path = formats_test_write("b.tsv", "name\tc1\na\t1\nb\t3\nc\t5\n", -1);
  g_autofree char *blank = formats_test_write("blank.txt", "x\n\nz\n\n\n", -1);
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbMatrix) rows = read_with_labels(path, blank, KNNWB_INPUT_TSV, FALSE, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(rows->row_labels[0], ==, "x");
  g_assert_cmpstr(rows->row_labels[1], ==, "");
  g_assert_cmpstr(rows->row_labels[2], ==, "z");
  g_autofree char *four = formats_test_write("four.txt", "x\ny\nz\nw\n\n", -1);
  g_autoptr(KnnwbMatrix) none = read_with_labels(path, four, KNNWB_INPUT_TSV, FALSE, &error);
  g_assert_null(none);
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_assert_nonnull(strstr(error->message, "4 labels for 3 rows"));
}

/* Repeated labels among many rows (hashed on several threads, then entered in row order): the
 * warning counts every repeat and names the first one in row order, whichever thread hashed it. */
static void test_repeated_labels(void)
{
  enum { N = 40001 };
  GString *table = g_string_new("name\tc1\n"), *labels = g_string_new(NULL);
  for (int i = 0; i < N; i++) {
    g_string_append_printf(table, "r%d\t%d\n", i, i);
    /* rows 30000 and 40000 repeat rows 29999 and 17; row 35000 repeats row 30000's label */
    const int named = i == 30000 || i == 35000 ? 29999 : i == 40000 ? 17 : i;
    g_string_append_printf(labels, "L%d\n", named);
  }
  g_autofree char *path = formats_test_write("many.tsv", table->str, (gssize)table->len);
  g_autofree char *side = formats_test_write("many.txt", labels->str, (gssize)labels->len);
  g_string_free(table, TRUE);
  g_string_free(labels, TRUE);
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "*3 rows repeat an earlier row's label (first: 'L29999' on rows 29999 "
                        "and 30000,*");
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbMatrix) rows = read_with_labels(path, side, KNNWB_INPUT_TSV, FALSE, &error);
  g_test_assert_expected_messages();
  g_assert_no_error(error);
  g_assert_cmpstr(rows->row_labels[40000], ==, "L17");
}

/* A table of n rows for the side-file comparisons. */
static char *rows_table(const char *name, int n)
{
  GString *table = g_string_new("name\tc1\n");
  for (int i = 0; i < n; i++)
    g_string_append_printf(table, "r%d\t%d\n", i, i);
  char *path = formats_test_write(name, table->str, (gssize)table->len);
  g_string_free(table, TRUE);
  return path;
}

/* Reads table with the side file of content (length bytes) with the side file read whole on
 * every thread (parallel) or line by line; returns the labels joined by '|' or "error: " and
 * the message. */
static char *side_result(const char *table, const char *content, gssize length, gboolean parallel)
{
  g_autofree char *side = formats_test_write("side.txt", content, length);
  g_setenv("KNNWB_LABELS_PARALLEL_BYTES", parallel ? "0" : "1000000000000", TRUE);
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbMatrix) m = read_with_labels(table, side, KNNWB_INPUT_TSV, FALSE, &error);
  g_unsetenv("KNNWB_LABELS_PARALLEL_BYTES");
  if (m == NULL)
    return g_strconcat("error: ", error->message, NULL);
  GString *joined = g_string_new(NULL);
  for (size_t i = 0; i < m->n_rows; i++)
    g_string_append_printf(joined, "%s|", m->row_labels[i]);
  return g_string_free(joined, FALSE);
}

/* A side file read whole on every thread gives what the line reader gives: the same labels (a
 * byte-order mark skipped, "\r\n" and a last line without a newline), or the same message (line
 * and column of the first label that is not UTF-8 or holds a NUL byte, whatever thread meets it;
 * the counts). */
static void test_parallel_same(void)
{
  g_autofree char *three = rows_table("three.tsv", 3);
  static const struct {
    const char *content;
    gssize length;
  } cases[] = {
      {"a\nb\nc\n", -1},
      {"\xEF\xBB\xBF"
       "a\r\nb\r\nc",
       -1},
      {"a\n\nc\n\n\n", -1},
      {"a\nb\n", -1},
      {"a\nb\nc\nd\n", -1},
      {"a\nb\xff\nc\n", -1},
      {"a\nb\nc\0x\n", 9},
      {"a\r\nb\rc\r\n\r", -1},
      {"a\nb\nc\r\r\n", -1},
      {"", 0},
      {"\n\n\n", -1},
  };
  for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autofree char *lines = side_result(three, cases[c].content, cases[c].length, FALSE);
    g_autofree char *whole = side_result(three, cases[c].content, cases[c].length, TRUE);
    g_assert_cmpstr(whole, ==, lines);
  }
  /* Many lines over several threads: bad bytes in the first and the last part of the file, twice
   * in the first part, and in the last part alone. */
  enum { N = 20000 };
  g_autofree char *many = rows_table("many.tsv", N);
  const int bad[][2] = {{1500, 19000}, {1500, 1600}, {-1, 18500}, {-1, -1}};
  for (size_t c = 0; c < G_N_ELEMENTS(bad); c++) {
    GString *text = g_string_new(NULL);
    for (int i = 0; i < N; i++)
      g_string_append_printf(text, i == bad[c][0] || i == bad[c][1] ? "L%d\xc3\n" : "L%d\n", i);
    g_autofree char *lines = side_result(many, text->str, (gssize)text->len, FALSE);
    g_autofree char *whole = side_result(many, text->str, (gssize)text->len, TRUE);
    g_assert_cmpstr(whole, ==, lines);
    if (bad[c][1] >= 0)
      g_assert_nonnull(strstr(whole, bad[c][0] >= 0 ? ":1501:" : ":18501:"));
    g_string_free(text, TRUE);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  /* The dropped row's warning is expected. */
  g_log_set_always_fatal(G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL);
  g_test_add_func("/formats/side-labels/text-formats", test_text_formats);
  g_test_add_func("/formats/side-labels/dropped-rows", test_dropped_rows);
  g_test_add_func("/formats/side-labels/counts", test_label_counts);
  g_test_add_func("/formats/side-labels/repeated", test_repeated_labels);
  g_test_add_func("/formats/side-labels/parallel-same", test_parallel_same);
  return g_test_run();
}
