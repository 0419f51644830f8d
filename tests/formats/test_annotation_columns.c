/* Annotation columns in expression tables: --skip-columns NAME,... and a second text column (a GEO
 * GDS table's IDENTIFIER, gene symbols beside probe IDs) recognised and left out with a warning. */
#include <string.h>
#include <knnwb/knnwb.h>
#include "formats_test_util.h"

#define GDS                                                                                        \
  "ID_REF\tIDENTIFIER\tGSM1\tGSM2\tGSM3\n"                                                         \
  "1007_s_at\tDDR1\t5.1\t6.2\t7.0\n"                                                               \
  "1053_at\tRFC2\t3.3\t2.1\t4.4\n"                                                                 \
  "117_at\t117_at\t9.9\t8.8\t7.7\n"

static KnnwbMatrix *read_skipping(const char *path, const char *skip, GError **error)
{
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.skip_columns = skip;
  KnnwbMatrix *matrix = NULL;
  knnwb_formats_read_matrix(path, &options, &matrix, NULL, error);
  return matrix;
}

static void assert_gds(const KnnwbMatrix *m)
{
  g_assert_cmpuint(m->n_rows, ==, 3);
  g_assert_cmpuint(m->n_cols, ==, 3);
  g_assert_cmpstr(m->row_labels[0], ==, "1007_s_at");
  g_assert_cmpstr(m->col_labels[0], ==, "GSM1");
  g_assert_cmpfloat(m->values[0], ==, 5.1f);
  g_assert_cmpfloat(m->values[8], ==, 7.7f);
}

/* Without options the IDENTIFIER column is found (text in the first data row) and left out, with
 * a warning naming it; a later symbol that looks like a probe ID ("117_at") is text too. */
static void test_recognised(void)
{
  g_autofree char *path = formats_test_write("gds.tsv", GDS, -1);
  g_autoptr(GError) error = NULL;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING, "*'IDENTIFIER'*annotation column*");
  g_autoptr(KnnwbMatrix) m = read_skipping(path, NULL, &error);
  g_test_assert_expected_messages();
  g_assert_no_error(error);
  assert_gds(m);
  /* The same in CSV, gene symbols beside probe IDs. */
  g_autofree char *csv = formats_test_write(
      "symbols.csv", "probe,symbol,a,b\np1,TP53,1,2\np2,BRCA1,3,4\np3,,5,6\n", -1);
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING, "*'symbol'*annotation column*");
  g_autoptr(KnnwbMatrix) c = read_skipping(csv, NULL, &error);
  g_test_assert_expected_messages();
  g_assert_no_error(error);
  g_assert_cmpuint(c->n_cols, ==, 2);
  g_assert_cmpfloat(c->values[5], ==, 6.0f);
}

/* A number further down the column taken for text: an error at that line, not a dropped column
 * of data. */
static void test_recognised_then_number(void)
{
  g_autofree char *path =
      formats_test_write("typo.tsv", "id\tS1\tS2\tS3\nA\tx\t1\t2\nB\t2\t3\t4\n", -1);
  g_autoptr(GError) error = NULL;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING, "*'S1'*annotation column*");
  g_autoptr(KnnwbMatrix) m = read_skipping(path, NULL, &error);
  g_test_assert_expected_messages();
  g_assert_null(m);
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_assert_nonnull(strstr(error->message, "typo.tsv:3:"));
  g_assert_nonnull(strstr(error->message, "--skip-columns"));
}

/* --skip-columns by name or number (no warning then); a name the header lacks, or the label
 * column, is an error. */
static void test_named(void)
{
  g_autofree char *path = formats_test_write("gds2.tsv", GDS, -1);
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbMatrix) by_name = read_skipping(path, "IDENTIFIER", &error);
  g_assert_no_error(error);
  assert_gds(by_name);
  g_autoptr(KnnwbMatrix) by_number = read_skipping(path, "2", &error);
  g_assert_no_error(error);
  assert_gds(by_number);
  g_autoptr(KnnwbMatrix) two = read_skipping(path, "IDENTIFIER, GSM2", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(two->n_cols, ==, 2);
  g_assert_cmpstr(two->col_labels[1], ==, "GSM3");
  g_autoptr(KnnwbMatrix) unknown = read_skipping(path, "SYMBOL", &error);
  g_assert_null(unknown);
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_assert_nonnull(strstr(error->message, "no column is named 'SYMBOL'"));
  g_clear_error(&error);
  g_autoptr(KnnwbMatrix) label = read_skipping(path, "ID_REF", &error);
  g_assert_null(label);
  g_assert_nonnull(strstr(error->message, "the label column"));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/formats/annotation-columns/recognised", test_recognised);
  g_test_add_func("/formats/annotation-columns/recognised-then-number",
                  test_recognised_then_number);
  g_test_add_func("/formats/annotation-columns/named", test_named);
  return g_test_run();
}
