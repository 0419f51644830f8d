/* The annotation table reader and the phenotype probe: matching by sample name, every mismatch
 * reported with its table line, categorical columns, in-place growth and copies. */
#include <string.h>
#include <glib/gstdio.h>
#include <knnwb/error.h>
#include <knnwb/phenotype.h>

static char *test_dir;

static char *write_file(const char *name, const char *text)
{
  char *path = g_build_filename(test_dir, name, NULL);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  return path;
}

/* 2 rows x 4 samples S1..S4. */
static KnnwbMatrix *samples_matrix(void)
{
  KnnwbMatrix *m = knnwb_matrix_new(2, 4, NULL);
  for (size_t i = 0; i < 8; i++)
    m->values[i] = (float)i;
  knnwb_matrix_set_row_label(m, 0, "geneA");
  knnwb_matrix_set_row_label(m, 1, "geneB");
  for (size_t j = 0; j < 4; j++) {
    g_autofree char *name = g_strdup_printf("S%zu", j + 1);
    knnwb_matrix_set_col_label(m, j, name);
  }
  return m;
}

static void test_table_read(void)
{
  g_autofree char *path = write_file("t.csv", "\xef\xbb\xbfid,\"years, to relapse\",group\r\n"
                                              "S2,1.5,\"a\"\"b\"\r\n\r\n  S1 , 2 ,c\r\n");
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(path, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(table->n_columns, ==, 3);
  g_assert_cmpuint(table->n_records, ==, 2);
  g_assert_cmpstr(table->header[1], ==, "years, to relapse");
  g_assert_cmpstr(knnwb_annotation_field(table, 0, 2), ==, "a\"b");
  g_assert_cmpstr(knnwb_annotation_field(table, 1, 0), ==, "S1");
  g_assert_cmpuint(table->line[1], ==, 4);
  size_t column = 9;
  g_assert_true(knnwb_annotation_column(table, "group", &column, &error));
  g_assert_cmpuint(column, ==, 2);
  g_assert_false(knnwb_annotation_column(table, "age", &column, &error));
  g_assert_nonnull(strstr(error->message, ":1: no column 'age'"));
}

static void expect_parse_error(const char *text, const char *message)
{
  g_autofree char *path = write_file("bad.tsv", text);
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(path, &error);
  g_assert_null(table);
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_autofree char *expected = g_strdup_printf("%s:%s", path, message);
  if (strstr(error->message, expected) == NULL)
    g_error("expected '%s', got '%s'", expected, error->message);
}

static void test_table_errors(void)
{
  expect_parse_error("", "1: the table is empty");
  expect_parse_error("\n\n", "2: the table is empty");
  expect_parse_error("id\n", "1: the header has 1 column");
  expect_parse_error("id\tx\tx\n", "1: column name 'x' appears twice");
  expect_parse_error("id\tx\t\nS1\t1\t2\n", "1: column 3 has no name");
  expect_parse_error("id\tx\nS1\t1\nS2\t1\t3\n", "3: the line has 3 fields, the header on line 1");
  expect_parse_error("id\tx\nS1\t\"1\n", "3:3: quoted field is never closed");
  expect_parse_error("id\tx\nS\xff\t1\n", "2: field 1 is not valid UTF-8");
  g_autofree char *missing = g_build_filename(test_dir, "none.tsv", NULL);
  g_autoptr(GError) error = NULL;
  g_assert_null(knnwb_annotation_read(missing, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_IO);
}

/* R's write.table (row.names = TRUE, its default) writes the header without the row names'
 * column: every line has one field more than the header. That column names the rows, as the
 * first column does in other tables (before: "the line has 4 fields, the header on line 1 has
 * 3"). A one-column data frame written with sep = "," likewise. */
static void test_table_r_layout(void)
{
  g_autofree char *path = write_file("r.tsv", "\"YearsToRelapse\"\t\"Group\"\n"
                                              "\"S2\"\t1.5\t\"a\"\n\"S1\"\t2\t\"b\"\n");
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(path, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(table->n_columns, ==, 3);
  g_assert_cmpuint(table->n_records, ==, 2);
  g_assert_cmpstr(table->header[0], ==, "");
  g_assert_cmpstr(table->header[2], ==, "Group");
  g_assert_cmpstr(knnwb_annotation_field(table, 1, 0), ==, "S1");
  g_assert_cmpstr(knnwb_annotation_field(table, 1, 1), ==, "2");
  size_t column = 9;
  g_assert_true(knnwb_annotation_column(table, "YearsToRelapse", &column, &error));
  g_assert_cmpuint(column, ==, 1);

  /* One-column data frames, with tabs and with commas. */
  g_autofree char *tabs = write_file("r4.tsv", "x\nS3\t3\nS1\t1\nS4\t4\nS2\t2\n");
  g_autofree char *commas = write_file("r1.csv", "\"x\"\n\"S3\",3\n\"S1\",1\n\"S4\",4\n\"S2\",2\n");
  const char *tables[] = {tabs, commas};
  for (size_t t = 0; t < G_N_ELEMENTS(tables); t++) {
    g_autoptr(GError) failure = NULL;
    g_autofree char *spec = g_strdup_printf("%s:x", tables[t]);
    g_autofree char *table_path = NULL, *column_name = NULL;
    g_assert_true(knnwb_annotation_parse_spec(spec, &table_path, &column_name, &failure));
    g_autoptr(KnnwbAnnotationTable) read = knnwb_annotation_read(table_path, &failure);
    g_assert_no_error(failure);
    g_assert_cmpuint(read->n_columns, ==, 2);
    g_assert_cmpstr(knnwb_annotation_field(read, 1, 0), ==, "S1");
    g_assert_cmpstr(knnwb_annotation_field(read, 1, 1), ==, "1");
  }
  /* Only the first line decides: a later line with one field more is still an error. */
  expect_parse_error("id\tx\nS1\t1\nS2\t1\t3\n", "3: the line has 3 fields, the header on line 1");
}

static void test_append(void)
{
  g_autofree char *path = write_file("p.tsv", "sample\tyears\tname\n"
                                              "S3\t3.5\tx\nS1\t1.25\tx\nS4\t-4\tx\nS2\t2e1\tx\n");
  g_autoptr(KnnwbMatrix) data = samples_matrix();
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_phenotype_append(&data, path, NULL, "years", NULL, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(data->n_rows, ==, 3);
  g_assert_cmpstr(data->row_labels[2], ==, "years");
  g_assert_cmpstr(data->row_labels[0], ==, "geneA");
  float expected[] = {1.25f, 20.0f, 3.5f, -4.0f};
  g_assert_cmpmem(data->values + 8, sizeof expected, expected, sizeof expected);
  g_assert_cmpfloat(data->values[7], ==, 7.0f);
  /* Appending the same label again is refused. */
  g_assert_false(knnwb_phenotype_append(&data, path, "sample", "years", NULL, &error));
  g_assert_nonnull(strstr(error->message, "'years' exists already"));
  g_clear_error(&error);
  /* The id in another column, a custom label. */
  g_autofree char *other = write_file("q.tsv", "v\tid\n9\tS4\n8\tS3\n7\tS2\n6\tS1\n");
  g_assert_true(knnwb_phenotype_append(&data, other, "id", "v", "dummy probe", &error));
  g_assert_no_error(error);
  g_assert_cmpstr(data->row_labels[3], ==, "dummy probe");
  g_assert_cmpfloat(data->values[12], ==, 6.0f);
  g_assert_cmpfloat(data->values[15], ==, 9.0f);
}

static void test_append_borrowed(void)
{
  /* A matrix over values it does not own (a mapped file) is copied, the original untouched. */
  float values[4] = {1, 2, 3, 4};
  KnnwbMatrix *data = knnwb_matrix_new_wrapped(1, 4, values, NULL, NULL);
  for (size_t j = 0; j < 4; j++) {
    g_autofree char *name = g_strdup_printf("S%zu", j + 1);
    knnwb_matrix_set_col_label(data, j, name);
  }
  float row[4] = {5, 6, 7, 8};
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_phenotype_append_row(&data, row, "p", &error));
  g_assert_cmpuint(data->n_rows, ==, 2);
  g_assert_true(data->values != values);
  g_assert_cmpstr(data->row_labels[0], ==, "0"); /* unlabelled rows get their numbers */
  g_assert_cmpstr(data->row_labels[1], ==, "p");
  g_assert_cmpstr(data->col_labels[3], ==, "S4");
  g_assert_cmpfloat(data->values[5], ==, 6.0f);
  g_assert_cmpfloat(values[0], ==, 1.0f);
  knnwb_matrix_free(data);
}

static void test_mismatches(void)
{
  /* S2 missing, S9 extra, S1 twice, S3 not a number, S4 empty: all reported, with lines. */
  g_autofree char *path = write_file("m.tsv", "sample\tyears\n"
                                              "S1\t1\n"
                                              "S9\t2\n"
                                              "S3\tlots\n"
                                              "S1\t4\n"
                                              "S4\t\n");
  g_autoptr(KnnwbMatrix) data = samples_matrix();
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_phenotype_append(&data, path, NULL, "years", NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
  const char *expected[] = {":4: sample 'S3': 'lots' is not a number in column 'years'",
                            ":5: sample 'S1' is listed twice (first on line 2)",
                            ":6: sample 'S4': '' is empty in column 'years'",
                            ": sample 'S2' is not in the table's column 'sample'", "(4 problems)"};
  for (guint i = 0; i < G_N_ELEMENTS(expected); i++)
    if (strstr(error->message, expected[i]) == NULL)
      g_error("expected '%s' in '%s'", expected[i], error->message);
  g_assert_cmpuint(data->n_rows, ==, 2); /* untouched */
  g_clear_error(&error);

  /* No sample matches (GEO's GSM ids against sample titles): one sentence with both sides'
   * names, not a line per sample. */
  g_autofree char *other = write_file("o.tsv", "sample\tyears\nGSM1\t1\nGSM2\t2\n");
  g_assert_false(knnwb_phenotype_append(&data, other, NULL, "years", NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
  g_autofree char *none = g_strdup_printf(
      "%s: none of the matrix's 4 samples (columns) is named in the table's column 'sample': the "
      "samples are named like 'S1', 'S2', the column holds 'GSM1', 'GSM2'",
      other);
  if (strstr(error->message, none) == NULL || strchr(error->message, '\n') != NULL)
    g_error("expected one line '%s...', got '%s'", none, error->message);
  g_clear_error(&error);

  /* Only extra samples: a warning naming them, and the row is appended. */
  g_autofree char *extra =
      write_file("e.tsv", "sample\tyears\nS1\t1\nS2\t2\nS3\t3\nS4\t4\nS7\t7\n");
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "1 sample of the phenotype table is not*e.tsv:6: 'S7'*");
  g_assert_true(knnwb_phenotype_append(&data, extra, NULL, "years", NULL, &error));
  g_test_assert_expected_messages();
  g_assert_cmpuint(data->n_rows, ==, 3);
}

static void test_categorical(void)
{
  g_autofree char *path = write_file("c.tsv", "sample\tstatus\n"
                                              "S1\trelapse\nS2\tno relapse\nS3\trelapse\nS4\tNA\n");
  g_autoptr(KnnwbMatrix) data = samples_matrix();
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_phenotype_append(&data, path, NULL, "status", NULL, &error));
  g_autofree char *expected = g_strdup_printf("%s:1: column 'status' is categorical (values such "
                                              "as 'relapse', 'no relapse')",
                                              path);
  if (strstr(error->message, expected) == NULL)
    g_error("expected '%s' in '%s'", expected, error->message);
  g_clear_error(&error);
  /* The names column itself, and a matrix without sample names. */
  g_assert_false(knnwb_phenotype_append(&data, path, "sample", "sample", NULL, &error));
  g_assert_nonnull(strstr(error->message, "holds the sample names"));
  g_clear_error(&error);
  g_autoptr(KnnwbMatrix) bare = knnwb_matrix_new(1, 4, NULL);
  g_assert_false(knnwb_phenotype_append(&bare, path, NULL, "status", NULL, &error));
  g_assert_nonnull(strstr(error->message, "no sample (column) names"));
}

static void test_spec(void)
{
  g_autofree char *path = NULL, *column = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_annotation_parse_spec("dir:x/clin.tsv:Years", &path, &column, &error));
  g_assert_cmpstr(path, ==, "dir:x/clin.tsv");
  g_assert_cmpstr(column, ==, "Years");
  g_assert_false(knnwb_annotation_parse_spec("clin.tsv", &path, &column, &error));
  g_clear_error(&error);
  g_assert_false(knnwb_annotation_parse_spec("clin.tsv:", &path, &column, &error));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  test_dir = g_dir_make_tmp("knnwb-phenotype-XXXXXX", NULL);
  g_test_add_func("/workflow/phenotype/table-read", test_table_read);
  g_test_add_func("/workflow/phenotype/table-errors", test_table_errors);
  g_test_add_func("/workflow/phenotype/table-r-layout", test_table_r_layout);
  g_test_add_func("/workflow/phenotype/append", test_append);
  g_test_add_func("/workflow/phenotype/append-borrowed", test_append_borrowed);
  g_test_add_func("/workflow/phenotype/mismatches", test_mismatches);
  g_test_add_func("/workflow/phenotype/categorical", test_categorical);
  g_test_add_func("/workflow/phenotype/spec", test_spec);
  int status = g_test_run();
  g_autoptr(GDir) dir = g_dir_open(test_dir, 0, NULL);
  const char *name;
  while (dir && (name = g_dir_read_name(dir)) != NULL) {
    g_autofree char *path = g_build_filename(test_dir, name, NULL);
    g_unlink(path);
  }
  g_rmdir(test_dir);
  g_free(test_dir);
  return status;
}
