/*
 * Readers: good files of every flavour (CRLF, BOM, trailing blanks, quoted labels holding
 * delimiters and newlines, UTF-8, R-style headers, transposition, NPY layouts) and, per reader,
 * malformed files whose error message and line are asserted.
 */
#include "formats_test_util.h"

#include <math.h>
#include <string.h>

static KnnwbMatrix *read_ok(const char *path, const KnnwbReadOptions *options, KnnwbReadInfo *info)
{
  KnnwbMatrix *matrix = NULL;
  GError *error = NULL;
  gboolean ok = knnwb_formats_read_matrix(path, options, &matrix, info, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  g_assert_nonnull(matrix);
  return matrix;
}

static void assert_row(const KnnwbMatrix *matrix, size_t i, const char *label, const float *values)
{
  if (label != NULL) {
    g_assert_nonnull(matrix->row_labels);
    g_assert_cmpstr(matrix->row_labels[i], ==, label);
  }
  for (size_t j = 0; j < matrix->n_cols; j++)
    g_assert_cmpfloat(matrix->values[i * matrix->n_cols + j], ==, values[j]);
}

static KnnwbReadOptions options_for(KnnwbInputFormat format)
{
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.format = format;
  return options;
}

/* ---------------------------------------------------------------- CIBM */

static void test_cibm_seed_sample(void)
{
  const char *path = KNNWB_SHARED_DATA_DIR "/cibm-sample.txt";
  KnnwbReadInfo info;
  KnnwbMatrix *m = read_ok(path, NULL, &info);
  g_assert_cmpint(info.format, ==, KNNWB_INPUT_CIBM);
  g_assert_cmpuint(m->n_rows, ==, 10);
  g_assert_cmpuint(m->n_cols, ==, 6);
  assert_row(m, 0, "F_1", (const float[]){1, 4.5f, 2, 7.3f, 8.21f, 5.71f});
  assert_row(m, 9, "F_10", (const float[]){-3, 0, 3, 1, 3.82f, 2.7f});
  g_assert_cmpstr(m->col_labels[0], ==, "C1");
  g_assert_cmpstr(m->col_labels[5], ==, "C6");
  g_assert_cmpstr(m->col_classes[0], ==, "1");
  g_assert_cmpstr(m->col_classes[5], ==, "0");
  knnwb_matrix_free(m);

  KnnwbReadOptions options = options_for(KNNWB_INPUT_CIBM);
  options.transpose = TRUE;
  m = read_ok(path, &options, NULL);
  g_assert_cmpuint(m->n_rows, ==, 6);
  g_assert_cmpuint(m->n_cols, ==, 10);
  g_assert_cmpstr(m->row_labels[0], ==, "C1");
  g_assert_cmpfloat(m->values[0 * 10 + 9], ==, -3.0f);
  g_assert_cmpfloat(m->values[5 * 10 + 0], ==, 5.71f);
  knnwb_matrix_free(m);
}

static void test_cibm_flavours(void)
{
  /* BOM, CRLF, spaces instead of tabs, trailing blanks, blank lines, UTF-8 labels, no names. */
  const char *text = "\xEF\xBB\xBF<MicroarrayData>\r\n"
                     "2 3\r\n"
                     "g\xC3\xA8ne_1   1.5 2 3   \r\n"
                     "\r\n"
                     "gene_2\t-1\t-2e1\t3.25\r\n"
                     "<EndOfFile>\r\n\r\n";
  g_autofree char *path = formats_test_write("flavours.txt", text, -1);
  KnnwbMatrix *m = read_ok(path, NULL, NULL);
  g_assert_cmpuint(m->n_rows, ==, 2);
  assert_row(m, 0, "g\xC3\xA8ne_1", (const float[]){1.5f, 2, 3});
  assert_row(m, 1, "gene_2", (const float[]){-1, -20, 3.25f});
  g_assert_null(m->col_labels);
  knnwb_matrix_free(m);

  /* Missing values left out on request, with a warning naming the rows, which keep their
   * numbers: the row stays, absent (zeros), with its label. */
  const char *missing = "<MicroarrayData>\n3 2\na 1 2\nb NA 2\nc 3 4\n<EndOfFile>\n";
  g_autofree char *missing_path = formats_test_write("missing.txt", missing, -1);
  KnnwbReadOptions options = options_for(KNNWB_INPUT_CIBM);
  options.missing = KNNWB_MISSING_DROP_ROWS;
  KnnwbReadInfo info;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "*1 row with missing values keeps its number but gets no edges: row 1 (b)"
                        "*line 4*");
  m = read_ok(missing_path, &options, &info);
  g_test_assert_expected_messages();
  g_assert_cmpuint(info.n_dropped_rows, ==, 1);
  g_assert_cmpuint(info.first_dropped_line, ==, 4);
  g_assert_cmpuint(m->n_rows, ==, 3);
  g_assert_cmpuint(m->n_absent_rows, ==, 1);
  g_assert_true(knnwb_matrix_row_is_absent(m, 1));
  g_assert_false(knnwb_matrix_row_is_absent(m, 2));
  assert_row(m, 1, "b", (const float[]){0, 0});
  assert_row(m, 2, "c", (const float[]){3, 4});
  knnwb_matrix_free(m);
}

/* A string literal that may hold NUL bytes, with its length. */
#define BIN(literal) literal, (gssize)(sizeof(literal) - 1)

typedef struct {
  const char *name;
  const char *content;
  gssize length; /* -1: strlen */
  int line;
  const char *needle;
} BadFile;

static void run_bad_files(const BadFile *cases, size_t n, KnnwbInputFormat format,
                          const KnnwbReadOptions *base)
{
  for (size_t i = 0; i < n; i++) {
    g_autofree char *name = g_strdup_printf("bad-%s", cases[i].name);
    g_autofree char *path = formats_test_write(name, cases[i].content, cases[i].length);
    KnnwbReadOptions options = base ? *base : options_for(format);
    options.format = format;
    g_test_message("case %s", cases[i].name);
    formats_test_expect_parse_error(path, &options, cases[i].line, cases[i].needle);
  }
}

static void test_cibm_malformed(void)
{
  static const BadFile cases[] = {
      {"empty", "", -1, 1, "empty"},
      {"no-tag", "2 3\na 1 2 3\n", -1, 1, "<MicroarrayData>"},
      {"bad-dims", "<MicroarrayData>\n2 x\n", -1, 2, "dimensions"},
      {"absurd-dims", "<MicroarrayData>\n99999999999 99999999999\na 1\n<EndOfFile>\n", -1, 2,
       "cannot fit"},
      {"overflow-dims", "<MicroarrayData>\n18446744073709551615 18446744073709551615\n", -1, 2,
       "expected the dimensions line"},
      {"few-rows", "<MicroarrayData>\n3 2\na 1 2\nb 3 4\n<EndOfFile>\n", -1, 5,
       "a tag after 2 data rows"},
      {"truncated", "<MicroarrayData>\n3 2\na 1 2\nb 3 4\n", -1, 4, "the file ends after 2"},
      {"many-rows", "<MicroarrayData>\n1 2\na 1 2\nb 3 4\n<EndOfFile>\n", -1, 4,
       "more data rows than the 1"},
      {"short-row", "<MicroarrayData>\n2 3\na 1 2 3\nb 3 4\n<EndOfFile>\n", -1, 4,
       "has 2 values, the dimensions line declares 3"},
      {"long-row", "<MicroarrayData>\n2 2\na 1 2\nb 3 4 5\n<EndOfFile>\n", -1, 4,
       "more than the 2 values"},
      {"not-number", "<MicroarrayData>\n2 2\na 1 2\nb 3 x4\n<EndOfFile>\n", -1, 4,
       "'x4' in column 2 is not a number"},
      {"nan", "<MicroarrayData>\n2 2\na 1 NaN\nb 3 4\n<EndOfFile>\n", -1, 3, "missing value 'NaN'"},
      {"huge", "<MicroarrayData>\n1 2\na 1 1e39\n<EndOfFile>\n", -1, 3, "beyond the float range"},
      {"names-count", "<MicroarrayData>\n1 2\na 1 2\n<SamplesNames>\nx y z\n<EndOfFile>\n", -1, 5,
       "lists 3 names"},
      {"classes-count", "<MicroarrayData>\n1 2\na 1 2\n<SamplesClasses>\n1\n<EndOfFile>\n", -1, 5,
       "lists 1 name, the dimensions line declares 2 columns"},
      {"no-eof", "<MicroarrayData>\n1 2\na 1 2\n<SamplesNames>\nx y\n", -1, 5,
       "without <EndOfFile>"},
      {"after-eof", "<MicroarrayData>\n1 2\na 1 2\n<EndOfFile>\nmore\n", -1, 5,
       "text after <EndOfFile>"},
      {"unknown-tag", "<MicroarrayData>\n1 2\na 1 2\n<Other>\n<EndOfFile>\n", -1, 4,
       "unexpected tag"},
      {"nul-value", BIN("<MicroarrayData>\n1 2\na 1 2\0\n<EndOfFile>\n"), 3, "NUL byte"},
      {"nul-label", BIN("<MicroarrayData>\n1 2\na\0b 1 2\n<EndOfFile>\n"), 3, "NUL byte"},
      {"bad-utf8", "<MicroarrayData>\n1 2\na\xff 1 2\n<EndOfFile>\n", -1, 3, "not valid UTF-8"},
      {"zero-dims", "<MicroarrayData>\n0 2\n<EndOfFile>\n", -1, 2, "hold no values"},
  };
  run_bad_files(cases, G_N_ELEMENTS(cases), KNNWB_INPUT_CIBM, NULL);
}

/* ---------------------------------------------------------------- CSV / TSV */

static void test_csv_flavours(void)
{
  /* Header, quoted labels holding commas, quotes and a newline, CRLF, UTF-8, blanks around
   * numbers, a quoted number, blank lines, no newline at the end. */
  const char *text = "\xEF\xBB\xBF"
                     "probe,S1,S2,S3\r\n"
                     "\"a,b\",1,2,3\r\n"
                     "\r\n"
                     "\"say \"\"hi\"\"\", 4 ,5 , \"6\"\r\n"
                     "\"two\nlines\",7,8,9\r\n"
                     "\xE6\x97\xA5\xE6\x9C\xAC,-1e-3,+.5,1.\r\n"
                     "last,1,2,3";
  g_autofree char *path = formats_test_write("flavours.csv", text, -1);
  KnnwbReadInfo info;
  KnnwbMatrix *m = read_ok(path, NULL, &info);
  g_assert_cmpint(info.format, ==, KNNWB_INPUT_CSV);
  g_assert_cmpuint(m->n_rows, ==, 5);
  g_assert_cmpuint(m->n_cols, ==, 3);
  assert_row(m, 0, "a,b", (const float[]){1, 2, 3});
  assert_row(m, 1, "say \"hi\"", (const float[]){4, 5, 6});
  assert_row(m, 2, "two\nlines", (const float[]){7, 8, 9});
  assert_row(m, 3, "\xE6\x97\xA5\xE6\x9C\xAC", (const float[]){-1e-3f, 0.5f, 1});
  assert_row(m, 4, "last", (const float[]){1, 2, 3});
  g_assert_cmpstr(m->col_labels[0], ==, "S1");
  g_assert_cmpstr(m->col_labels[2], ==, "S3");
  knnwb_matrix_free(m);
}

static void test_tsv_flavours(void)
{
  /* R's write.table header (no name for the label column), trailing blanks, a tab in a quoted
   * label; then the same without header, without labels, and transposed. */
  const char *text = "S1\tS2\n"
                     "x\t1\t2  \n"
                     "\"t\tab\"\t3\t4\n";
  g_autofree char *path = formats_test_write("r-style.tsv", text, -1);
  KnnwbMatrix *m = read_ok(path, NULL, NULL);
  g_assert_cmpuint(m->n_rows, ==, 2);
  g_assert_cmpuint(m->n_cols, ==, 2);
  assert_row(m, 1, "t\tab", (const float[]){3, 4});
  g_assert_cmpstr(m->col_labels[1], ==, "S2");
  knnwb_matrix_free(m);

  g_autofree char *bare = formats_test_write("bare.txt", "1\t2\t3\n4\t5\t6\n", -1);
  KnnwbReadOptions options = options_for(KNNWB_INPUT_AUTO);
  options.label_column = -1;
  KnnwbReadInfo info;
  m = read_ok(bare, &options, &info);
  g_assert_cmpint(info.format, ==, KNNWB_INPUT_TSV);
  g_assert_cmpuint(m->n_rows, ==, 2);
  g_assert_cmpuint(m->n_cols, ==, 3);
  g_assert_null(m->row_labels);
  g_assert_null(m->col_labels);
  assert_row(m, 1, NULL, (const float[]){4, 5, 6});
  knnwb_matrix_free(m);

  options.transpose = TRUE;
  m = read_ok(bare, &options, NULL);
  g_assert_cmpuint(m->n_rows, ==, 3);
  assert_row(m, 2, NULL, (const float[]){3, 6});
  knnwb_matrix_free(m);

  /* Label in the last column; header forced on although every field is numeric. */
  g_autofree char *last = formats_test_write("last.tsv", "1\t2\tid\n5\t6\tq\n", -1);
  options = options_for(KNNWB_INPUT_TSV);
  options.label_column = 2;
  options.header = KNNWB_HEADER_YES;
  m = read_ok(last, &options, NULL);
  g_assert_cmpuint(m->n_rows, ==, 1);
  assert_row(m, 0, "q", (const float[]){5, 6});
  g_assert_cmpstr(m->col_labels[0], ==, "1");
  knnwb_matrix_free(m);

  /* Missing values dropped: NA, empty and NaN. */
  g_autofree char *missing =
      formats_test_write("missing.tsv", "id\ta\tb\nr1\t1\tNA\nr2\t2\t3\nr3\t\t4\nr4\tnan\t1\n", -1);
  options = options_for(KNNWB_INPUT_TSV);
  options.missing = KNNWB_MISSING_DROP_ROWS;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "*3 rows with missing values keep their numbers but get no edges: rows 0 "
                        "(r1), 2 (r3), 3 (r4) (counted from 0*line 2*");
  m = read_ok(missing, &options, &info);
  g_test_assert_expected_messages();
  g_assert_cmpuint(info.n_dropped_rows, ==, 3);
  g_assert_cmpuint(m->n_rows, ==, 4);
  g_assert_cmpuint(m->n_absent_rows, ==, 3);
  assert_row(m, 1, "r2", (const float[]){2, 3});
  knnwb_matrix_free(m);
  /* Transposed, the file's rows are features: those with missing values go, every sample stays. */
  options.transpose = TRUE;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING, "*dropped 3 rows of the file*features*");
  m = read_ok(missing, &options, &info);
  g_test_assert_expected_messages();
  g_assert_cmpuint(m->n_rows, ==, 2);
  g_assert_cmpuint(m->n_cols, ==, 1);
  g_assert_cmpuint(m->n_absent_rows, ==, 0);
  assert_row(m, 0, "a", (const float[]){2});
  knnwb_matrix_free(m);
}

/* A row of more than one 4 MiB buffer, and many rows: the buffer logic at its seams. */
static void test_tsv_large(void)
{
  GString *text = g_string_new("id");
  const size_t wide = 700000; /* ~5 MB per row */
  for (size_t j = 0; j < wide; j++)
    g_string_append_printf(text, "\tc%zu", j);
  g_string_append_c(text, '\n');
  for (int i = 0; i < 3; i++) {
    g_string_append_printf(text, "r%d", i);
    for (size_t j = 0; j < wide; j++)
      g_string_append_printf(text, "\t%zu.5", (j * 7 + (size_t)i) % 1000);
    g_string_append_c(text, '\n');
  }
  g_autofree char *path = formats_test_write("wide.tsv", text->str, (gssize)text->len);
  g_string_free(text, TRUE);
  KnnwbMatrix *m = read_ok(path, NULL, NULL);
  g_assert_cmpuint(m->n_rows, ==, 3);
  g_assert_cmpuint(m->n_cols, ==, wide);
  for (int i = 0; i < 3; i++)
    for (size_t j = 0; j < wide; j += 9973)
      g_assert_cmpfloat(m->values[(size_t)i * wide + j], ==,
                        (float)((j * 7 + (size_t)i) % 1000) + 0.5f);
  g_assert_cmpstr(m->col_labels[wide - 1], ==, "c699999");
  knnwb_matrix_free(m);

  text = g_string_new("id\tv\n");
  for (int i = 0; i < 300000; i++)
    g_string_append_printf(text, "row%d\t%d\n", i, i);
  g_autofree char *tall = formats_test_write("tall.tsv", text->str, (gssize)text->len);
  g_string_free(text, TRUE);
  m = read_ok(tall, NULL, NULL);
  g_assert_cmpuint(m->n_rows, ==, 300000);
  for (int i = 0; i < 300000; i += 7919) {
    g_assert_cmpfloat(m->values[i], ==, (float)i);
    g_autofree char *label = g_strdup_printf("row%d", i);
    g_assert_cmpstr(m->row_labels[i], ==, label);
  }
  knnwb_matrix_free(m);
}

static void test_delimited_malformed(void)
{
  static const BadFile tsv[] = {
      {"empty.tsv", "", -1, 1, "empty"},
      {"blank.tsv", "\n  \n", -1, 2, "empty"},
      {"header-only.tsv", "id\ta\tb\n", -1, 1, "no data rows"},
      {"short.tsv", "id\ta\tb\nx\t1\t2\ny\t1\n", -1, 3, "the row has 2 fields, expected 3"},
      {"long.tsv", "id\ta\tb\nx\t1\t2\ny\t1\t2\t3\t4\n", -1, 3, "the row has 5 fields, expected 3"},
      {"header-count.tsv", "id\ta\tb\tc\td\nx\t1\t2\n", -1, 2, "the header on line 1 has 5"},
      {"word.tsv", "id\ta\tb\nx\t1\t2\ny\t1\tabc\n", -1, 3, "'abc' in column b is not a number"},
      {"na.tsv", "id\ta\tb\nx\t1\t2\ny\tNA\t3\n", -1, 3, "missing value 'NA' in column a"},
      {"empty-field.tsv", "id\ta\tb\nx\t1\t\n", -1, 2, "missing value (empty field) in column b"},
      {"inf.tsv", "id\ta\tb\nx\t1\t-Inf\n", -1, 2, "infinite value '-Inf'"},
      {"range.tsv", "id\ta\tb\nx\t1\t4e38\n", -1, 2, "beyond the float range"},
      {"dangling-e.tsv", "id\ta\tb\nx\t1\t2e\n", -1, 2, "'2e' in column b is not a number"},
      {"hex.tsv", "id\ta\tb\nx\t0x10\t2\n", -1, 2, "'0x10' in column a is not a number"},
      {"nul.tsv", BIN("id\ta\tb\nx\t1\t2\0\n"), 2, "NUL byte"},
      {"nul-label.tsv", BIN("id\ta\tb\nx\0y\t1\t2\n"), 2, "NUL byte"},
      {"bad-utf8.tsv", "id\ta\tb\nx\xc3\t1\t2\n", -1, 2, "not valid UTF-8 (a Latin-1"},
      {"unclosed.tsv", "id\ta\tb\n\"x\t1\t2\ny\t3\t4\n", -1, 2, "never closed"},
      {"after-quote.tsv", "id\ta\tb\n\"x\"y\t1\t2\n", -1, 2, "after a closing quote"},
      {"labels-only.tsv", "id\nx\ny\n", -1, 1, "no numeric columns (only the label column)"},
      /* The wrong separator: one field per line, and the message says which one the line has. */
      {"commas.tsv", "id,a,b\nx,1,2\n", -1, 1, "the line is one field, yet it holds ','"},
      /* R's write.table() without sep: spaces between (quoted) columns. */
      {"spaces.tsv", "S1 S2 S3\ng0 1 2 3\n", -1, 1, "the line is one field, yet it holds spaces"},
      {"r-default.tsv", "\"S1\" \"S2\"\n\"g0\" 1 2\n", -1, 1,
       "columns separated by spaces (R's write.table without sep) are not read"},
  };
  run_bad_files(tsv, G_N_ELEMENTS(tsv), KNNWB_INPUT_TSV, NULL);

  static const BadFile csv[] = {
      {"short.csv", "id,a,b\r\nx,1,2\r\ny,1\r\n", -1, 3, "the row has 2 fields, expected 3"},
      /* Excel where the comma is the decimal mark is read (below); "1,234,5" there is no number. */
      {"excel-thousands.csv", "id;a;b\r\nx;1,234,5;2\r\n", -1, 2, "'1,234,5' in column a"},
      {"tabs.csv", "id\ta\tb\nx\t1\t2\n", -1, 1, "yet it holds a tab"},
      {"word.csv", "id,a,b\nx,1,2\ny,\"1,5\",3\n", -1, 3, "'1,5' in column a is not a number"},
      {"quote-newline.csv", "id,a,b\n\"multi\nline\",1,x\n", -1, 3, "'x' in column b"},
  };
  run_bad_files(csv, G_N_ELEMENTS(csv), KNNWB_INPUT_CSV, NULL);

  /* Column positions: "path:3:5:" for the field starting at byte 5 of line 3. */
  g_autofree char *path = formats_test_write("column.tsv", "id\ta\tb\nx\t1\t2\ny\t1\tz\n", -1);
  KnnwbReadOptions options = options_for(KNNWB_INPUT_TSV);
  g_autofree char *prefix = g_strdup_printf("%s:3:5: ", path);
  GError *error = NULL;
  KnnwbMatrix *m = NULL;
  g_assert_false(knnwb_formats_read_matrix(path, &options, &m, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_assert_true(g_str_has_prefix(error->message, prefix));
  g_clear_error(&error);

  options.label_column = 7;
  formats_test_expect_parse_error(path, &options, 1, "label column 8 does not exist");

  g_assert_false(knnwb_formats_read_matrix("/nonexistent/x.tsv", NULL, &m, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_IO);
  g_clear_error(&error);
}

/* Headers made of numbers over count data: pandas' to_csv of an array (empty top-left cell, columns
 * 0, 1, 2, ...), an index named above them, numbered samples. Each header was read as a data row
 * (an extra point, exit 0, no warning). A headerless file whose first label is a word over other
 * whole numbers stays data. */
static void test_delimited_numeric_headers(void)
{
  static const struct {
    const char *name, *text;
    const char *first_column;
  } files[] = {
      {"pandas.csv", ",0,1,2\ng0,5,0,12\ng1,3,3,1\n", "0"},
      {"pandas-named.csv", "gene,0,1,2\ng0,5,0,12\ng1,3,3,1\n", "0"},
      {"samples.tsv", "Geneid\t1001\t1002\t1003\ng0\t5\t0\t12\ng1\t3\t3\t1\n", "1001"},
      {"r.csv", "\"\",\"1\",\"2\",\"3\"\n\"g0\",5,0,12\n\"g1\",3,3,1\n", "1"},
      {"hours.tsv", "Gene_ID\t0\t4\t24\ng0\t5\t0\t12\ng1\t3\t3\t1\n", "0"},
  };
  for (size_t f = 0; f < G_N_ELEMENTS(files); f++) {
    g_test_message("%s", files[f].name);
    g_autofree char *path = formats_test_write(files[f].name, files[f].text, -1);
    KnnwbMatrix *m = read_ok(path, NULL, NULL);
    g_assert_cmpuint(m->n_rows, ==, 2);
    g_assert_cmpuint(m->n_cols, ==, 3);
    assert_row(m, 0, "g0", (const float[]){5, 0, 12});
    assert_row(m, 1, "g1", (const float[]){3, 3, 1});
    g_assert_nonnull(m->col_labels);
    g_assert_cmpstr(m->col_labels[0], ==, files[f].first_column);
    knnwb_matrix_free(m);
  }
  g_autofree char *data = formats_test_write("data.tsv", "g0\t5\t0\t12\ng1\t3\t3\t1\n", -1);
  KnnwbMatrix *m = read_ok(data, NULL, NULL);
  g_assert_cmpuint(m->n_rows, ==, 2);
  assert_row(m, 0, "g0", (const float[]){5, 0, 12});
  knnwb_matrix_free(m);
  /* An unnamed first row of measurements (not whole numbers) stays a data row. */
  g_autofree char *unnamed = formats_test_write("unnamed.tsv", "\t0.5\t1.25\ng1\t3\t3\n", -1);
  m = read_ok(unnamed, NULL, NULL);
  g_assert_cmpuint(m->n_rows, ==, 2);
  assert_row(m, 0, "", (const float[]){0.5f, 1.25f});
  knnwb_matrix_free(m);
}

/* Values below float's normal range (p-values of 1e-300): read as float rounds them (to 0 or a
 * subnormal with fewer digits), with one warning that counts them and names the first line; zeros
 * written as such and the smallest normal float are not counted. Before, silently: a row of such
 * p-values then failed as "constant" for Pearson. */
static void test_delimited_tiny_values(void)
{
  g_autofree char *path =
      formats_test_write("pvalues.tsv",
                         "id\ta\tb\tc\nr0\t1\t0.0\t0e-5\nr1\t1e-300\t1e-42\t-1e-50\n"
                         "r2\t1.1754944e-38\t1.0e-38\t2\n",
                         -1);
  KnnwbReadInfo info;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "*4 values below float's smallest normal magnitude (1.2e-38) were read "
                        "with fewer digits or as 0 (the first on line 3)*");
  KnnwbMatrix *m = read_ok(path, NULL, &info);
  g_test_assert_expected_messages();
  g_assert_cmpuint(info.n_tiny_values, ==, 4);
  g_assert_cmpuint(info.first_tiny_line, ==, 3);
  assert_row(m, 1, "r1", (const float[]){0, 1e-42f, -0.0f});
  g_assert_true(signbit(m->values[1 * 3 + 2]));
  assert_row(m, 2, "r2", (const float[]){1.1754944e-38f, 1.0e-38f, 2});
  knnwb_matrix_free(m);
}

/* featureCounts' output, the usual RNA-seq count file: a "# Program:featureCounts" line above the
 * table and five columns of gene annotation ("1;1", "+;+", the length) before the counts. Was
 * "cannot tell the format ... spaces" (.txt) and "'1;1' in column Chr is not a number". A '#'
 * header with separators stays the header; annotation columns are skipped only under
 * featureCounts' exact header. */
static void test_delimited_feature_counts(void)
{
  const char *text = "# Program:featureCounts v2.0.1; Command:\"featureCounts\" \"-a\" \"g.gtf\"\n"
                     "Geneid\tChr\tStart\tEnd\tStrand\tLength\ta.bam\tb.bam\n"
                     "G1\t1;1\t11869;12010\t12227;12057\t+;+\t1735\t0\t3\n"
                     "G2\t1\t14404\t29570\t-\t15000\t10\t30\n";
  g_autofree char *path = formats_test_write("counts.txt", text, -1);
  KnnwbReadInfo info;
  KnnwbMatrix *m = read_ok(path, NULL, &info);
  g_assert_cmpint(info.format, ==, KNNWB_INPUT_TSV);
  g_assert_cmpuint(m->n_rows, ==, 2);
  g_assert_cmpuint(m->n_cols, ==, 2);
  assert_row(m, 0, "G1", (const float[]){0, 3});
  assert_row(m, 1, "G2", (const float[]){10, 30});
  g_assert_cmpstr(m->col_labels[0], ==, "a.bam");
  g_assert_cmpstr(m->col_labels[1], ==, "b.bam");
  knnwb_matrix_free(m);

  g_autofree char *hashed =
      formats_test_write("hashed.tsv", "#gene\tS1\tS2\nG1\t1\t2\nG2\t3\t4\n", -1);
  m = read_ok(hashed, NULL, NULL);
  g_assert_cmpuint(m->n_rows, ==, 2);
  g_assert_cmpstr(m->col_labels[0], ==, "S1");
  knnwb_matrix_free(m);
}

/* Excel in the locales where the comma is the decimal mark (German, French, ...) saves "CSV" with
 * ';' between the fields and 1,5 for 1.5: read as such, with or without a header, also named .txt;
 * refused before ("the line is one field, yet it holds ';'"). */
static void test_delimited_decimal_comma(void)
{
  static const struct {
    const char *name, *text;
  } files[] = {
      {"excel-de.csv", "\xef\xbb\xbfgene;S1;S2;S3\r\ng0;1,5;2;-0,25\r\ng1;3;4,75;1e-3\r\n"},
      {"excel-de.txt", "gene;S1;S2;S3\ng0;1,5;2;-0,25\ng1;3;4,75;1e-3\n"},
      {"no-header.csv", "g0;1,5;2;-0,25\ng1;3;4,75;1e-3\n"},
  };
  for (size_t f = 0; f < G_N_ELEMENTS(files); f++) {
    g_test_message("%s", files[f].name);
    g_autofree char *path = formats_test_write(files[f].name, files[f].text, -1);
    KnnwbReadInfo info;
    KnnwbMatrix *m = read_ok(path, NULL, &info);
    g_assert_cmpint(info.format, ==, KNNWB_INPUT_CSV);
    g_assert_cmpuint(m->n_rows, ==, 2);
    g_assert_cmpuint(m->n_cols, ==, 3);
    assert_row(m, 0, "g0", (const float[]){1.5f, 2, -0.25f});
    assert_row(m, 1, "g1", (const float[]){3, 4.75f, 1e-3f});
    knnwb_matrix_free(m);
  }
}

/* Separators ending the lines, as real exports have them: Excel's unnamed empty column (every line,
 * the header too), scripts printing a tab after every value (data lines only: this looked like
 * R's header without the label column and shifted every column name), a header alone, two
 * trailing columns, quotes, a last line without it; GCT and GEO tables padded with tabs. Each
 * must read as the plain 2 x 3 matrix with its column names. */
static void test_delimited_trailing_separators(void)
{
  static const struct {
    const char *name, *text;
  } files[] = {
      {"excel.csv", "\xef\xbb\xbfgene,S1,S2,S3,\r\ng0,1,2,3,\r\ng1,4,5,6,\r\n"},
      {"data-only.tsv", "gene\tS1\tS2\tS3\ng0\t1\t2\t3\t\ng1\t4\t5\t6\t\n"},
      {"header-only.tsv", "gene\tS1\tS2\tS3\t\ng0\t1\t2\t3\ng1\t4\t5\t6\n"},
      {"two.csv", "gene,S1,S2,S3,,\ng0,1,2,3,,\ng1,4,5,6,,\n"},
      {"quoted.csv", "\"gene\",\"S1\",\"S2\",\"S3\",\n\"g0\",1,2,3,\n\"g1\",4,5,6,\n"},
      {"last-without.tsv", "gene\tS1\tS2\tS3\t\ng0\t1\t2\t3\t\ng1\t4\t5\t6"},
      {"padded.gct", "#1.3\t\n2\t3\t1\t1\t\nid\tdesc\tS1\tS2\tS3\t\nkind\tna\ta\tb\tc\t\n"
                     "g0\tx\t1\t2\t3\t\ng1\ty\t4\t5\t6\t\n"},
      {"padded_series_matrix.txt",
       "!Series_title\t\"t\"\n!Sample_title\t\"a\"\t\"b\"\t\"c\"\t\n!series_matrix_table_begin\n"
       "\"ID_REF\"\t\"S1\"\t\"S2\"\t\"S3\"\t\n\"g0\"\t1\t2\t3\t\n\"g1\"\t4\t5\t6\t\n"
       "!series_matrix_table_end\n"},
  };
  for (size_t f = 0; f < G_N_ELEMENTS(files); f++) {
    g_test_message("%s", files[f].name);
    g_autofree char *path = formats_test_write(files[f].name, files[f].text, -1);
    KnnwbMatrix *m = read_ok(path, NULL, NULL);
    g_assert_cmpuint(m->n_rows, ==, 2);
    g_assert_cmpuint(m->n_cols, ==, 3);
    assert_row(m, 0, "g0", (const float[]){1, 2, 3});
    assert_row(m, 1, "g1", (const float[]){4, 5, 6});
    g_assert_nonnull(m->col_labels);
    g_assert_cmpstr(m->col_labels[0], ==, "S1");
    g_assert_cmpstr(m->col_labels[2], ==, "S3");
    knnwb_matrix_free(m);
  }
  /* Only empty fields may follow: a value there is an error at its line, and a missing last
   * value of a file without trailing separators stays a missing value. */
  static const BadFile bad[] = {
      {"value-after.tsv", "gene\tS1\tS2\t\ng0\t1\t2\t\ng1\t1\t5\t9\n", -1, 3,
       "fields past the last named column may only be empty"},
      {"value-after-data.tsv", "gene\tS1\tS2\ng0\t1\t2\t\ng1\t1\t5\t9\n", -1, 3,
       "fields past the last named column may only be empty"},
      {"last-missing.tsv", "gene\tS1\tS2\ng0\t1\t\ng1\t1\t5\n", -1, 2,
       "missing value (empty field) in column S2"},
  };
  run_bad_files(bad, G_N_ELEMENTS(bad), KNNWB_INPUT_TSV, NULL);
}

/* ---------------------------------------------------------------- GCT */

static void test_gct_good(void)
{
  const char *v12 = "#1.2\t\t\n"
                    "2\t3\t\n"
                    "Name\tDescription\tA\tB\tC\n"
                    "g1\tfirst gene\t1\t2\t3\n"
                    "g2\t\t4\t5\t6\n";
  g_autofree char *p12 = formats_test_write("v12.gct", v12, -1);
  KnnwbReadInfo info;
  KnnwbMatrix *m = read_ok(p12, NULL, &info);
  g_assert_cmpint(info.format, ==, KNNWB_INPUT_GCT);
  g_assert_cmpuint(m->n_rows, ==, 2);
  g_assert_cmpuint(m->n_cols, ==, 3);
  assert_row(m, 1, "g2", (const float[]){4, 5, 6});
  g_assert_cmpstr(m->col_labels[2], ==, "C");
  knnwb_matrix_free(m);

  const char *v13 = "#1.3\r\n"
                    "2\t2\t2\t1\r\n"
                    "id\tsymbol\tchr\ts1\ts2\r\n"
                    "tissue\tna\tna\tliver\tlung\r\n"
                    "p1\tTP53\t17\t0.5\t-0.5\r\n"
                    "p2\tBRCA1\t17\t1e2\t2\r\n";
  g_autofree char *p13 = formats_test_write("v13.txt", v13, -1);
  KnnwbReadOptions options = options_for(KNNWB_INPUT_AUTO);
  options.transpose = TRUE;
  m = read_ok(p13, &options, &info);
  g_assert_cmpint(info.format, ==, KNNWB_INPUT_GCT);
  g_assert_cmpuint(m->n_rows, ==, 2);
  g_assert_cmpstr(m->row_labels[0], ==, "s1");
  g_assert_cmpstr(m->col_labels[1], ==, "p2");
  assert_row(m, 0, "s1", (const float[]){0.5f, 100});
  knnwb_matrix_free(m);
}

static void test_gct_malformed(void)
{
  static const BadFile cases[] = {
      {"empty", "", -1, 1, "empty"},
      {"version", "#1.4\n1\t1\n", -1, 1, "#1.2 or #1.3"},
      {"no-dims", "#1.2\n", -1, 2, "before the dimensions line"},
      {"bad-dims", "#1.2\n2\tx\n", -1, 2, "dimensions line"},
      {"dims13", "#1.3\n2\t2\n", -1, 2, "row metadata"},
      {"absurd", "#1.2\n4000000000\t4000000000\nName\tDescription\tA\n", -1, 2, "cannot fit"},
      {"overflow", "#1.2\n99999999999999999999\t2\n", -1, 2, "dimensions line"},
      {"header-count", "#1.2\n1\t2\nName\tDescription\tA\ng\td\t1\t2\n", -1, 3,
       "the header has 3 fields, expected 4"},
      {"few-rows", "#1.2\n3\t1\nName\tDescription\tA\ng\td\t1\nh\td\t2\n", -1, 5,
       "after 2 data rows, the header declares 3"},
      {"many-rows", "#1.2\n1\t1\nName\tDescription\tA\ng\td\t1\nh\td\t2\n", -1, 5,
       "more data rows than the 1"},
      {"ragged", "#1.2\n2\t2\nName\tDescription\tA\tB\ng\td\t1\t2\nh\td\t2\n", -1, 5,
       "the row has 3 fields, expected 4"},
      {"word", "#1.2\n1\t2\nName\tDescription\tA\tB\ng\td\t1\tten\n", -1, 4,
       "'ten' in column B is not a number"},
      {"na", "#1.2\n1\t2\nName\tDescription\tA\tB\ng\td\tNA\t1\n", -1, 4, "missing value 'NA'"},
      {"meta-rows", "#1.3\n1\t1\t0\t2\nid\tA\nm1\tx\n", -1, 5, "inside the 2 column metadata"},
      {"nul", BIN("#1.2\n1\t1\nName\tDescription\tA\ng\td\t1\0\n"), 4, "NUL byte"},
  };
  run_bad_files(cases, G_N_ELEMENTS(cases), KNNWB_INPUT_GCT, NULL);
}

/* ---------------------------------------------------------------- NPY */

/* Builds an .npy file: header dictionary text, then raw data bytes. */
static char *make_npy(const char *name, int version, const char *dict, const void *data,
                      size_t data_bytes)
{
  GByteArray *bytes = g_byte_array_new();
  size_t prefix = version == 1 ? 10 : 12;
  size_t total = prefix + strlen(dict) + 1;
  size_t padded = (total + 63) / 64 * 64;
  size_t header_length = padded - prefix;
  guint8 magic[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (guint8)version, 0};
  if (version == 1) {
    magic[8] = (guint8)(header_length & 0xff);
    magic[9] = (guint8)(header_length >> 8);
  } else {
    for (int b = 0; b < 4; b++)
      magic[8 + b] = (guint8)(header_length >> (8 * b));
  }
  g_byte_array_append(bytes, magic, (guint)prefix);
  g_byte_array_append(bytes, (const guint8 *)dict, (guint)strlen(dict));
  for (size_t k = prefix + strlen(dict); k < padded - 1; k++)
    g_byte_array_append(bytes, (const guint8 *)" ", 1);
  g_byte_array_append(bytes, (const guint8 *)"\n", 1);
  g_byte_array_append(bytes, data, (guint)data_bytes);
  char *path = formats_test_write(name, (const char *)bytes->data, (gssize)bytes->len);
  g_byte_array_free(bytes, TRUE);
  return path;
}

static void test_npy_good(void)
{
  const float c_order[6] = {1, 2, 3, 4, 5, 6}; /* 2 x 3 */
  g_autofree char *f4 =
      make_npy("c.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", c_order,
               sizeof c_order);
  g_autofree char *labels = formats_test_write("c.labels", "first\nsecond\n\n", -1);
  KnnwbReadOptions options = options_for(KNNWB_INPUT_AUTO);
  options.labels_path = labels;
  KnnwbReadInfo info;
  KnnwbMatrix *m = read_ok(f4, &options, &info);
  g_assert_false(info.mapped); /* read, never mapped */
  g_assert_cmpint(info.format, ==, KNNWB_INPUT_NPY);
  assert_row(m, 0, "first", (const float[]){1, 2, 3});
  assert_row(m, 1, "second", (const float[]){4, 5, 6});
  knnwb_matrix_free(m);

  options.transpose = TRUE;
  m = read_ok(f4, &options, &info);
  g_assert_false(info.mapped);
  g_assert_cmpuint(m->n_rows, ==, 3);
  assert_row(m, 2, NULL, (const float[]){3, 6});
  g_assert_cmpstr(m->col_labels[1], ==, "second");
  knnwb_matrix_free(m);

  /* Fortran order: the same 2 x 3 matrix stored column by column; transposed it maps as is. */
  const float f_order[6] = {1, 4, 2, 5, 3, 6};
  g_autofree char *fortran =
      make_npy("f.npy", 2, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f_order,
               sizeof f_order);
  options = options_for(KNNWB_INPUT_NPY);
  m = read_ok(fortran, &options, &info);
  g_assert_false(info.mapped);
  assert_row(m, 1, NULL, (const float[]){4, 5, 6});
  knnwb_matrix_free(m);
  options.transpose = TRUE;
  m = read_ok(fortran, &options, &info);
  g_assert_false(info.mapped); /* read, never mapped */
  assert_row(m, 0, NULL, (const float[]){1, 4});
  assert_row(m, 2, NULL, (const float[]){3, 6});
  knnwb_matrix_free(m);

  /* float64 big-endian, version 3 header, shape written with "L" and no trailing comma. */
  double big[4] = {1.5, -2.25, 1e-3, 65504};
  for (int i = 0; i < 4; i++) {
    guint64 bits;
    memcpy(&bits, &big[i], 8);
    bits = GUINT64_TO_BE(bits);
    memcpy(&big[i], &bits, 8);
  }
  g_autofree char *f8 =
      make_npy("d.npy", 3, "{\"descr\": \">f8\", \"fortran_order\": False, \"shape\": (2L, 2L)}",
               big, sizeof big);
  options = options_for(KNNWB_INPUT_AUTO);
  m = read_ok(f8, &options, &info);
  assert_row(m, 0, NULL, (const float[]){1.5f, -2.25f});
  assert_row(m, 1, NULL, (const float[]){1e-3f, 65504});
  knnwb_matrix_free(m);

  /* Integer and float16 arrays (RNA-seq counts saved from pandas are int64): converted to float
   * as the text readers round, in either byte order and Fortran order; refused before. */
  const gint64 counts[6] = {0, -3, G_GINT64_CONSTANT(9007199254740993), 7, 1 << 24, -(1 << 20)};
  g_autofree char *i8 =
      make_npy("i8.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }", counts,
               sizeof counts);
  m = read_ok(i8, &options, &info);
  assert_row(m, 0, NULL, (const float[]){0, -3, 9007199254740992.0f});
  assert_row(m, 1, NULL, (const float[]){7, 16777216, -1048576});
  knnwb_matrix_free(m);
  const guint16 be16[6] = {GUINT16_TO_BE(1), GUINT16_TO_BE(65535), GUINT16_TO_BE(2),
                           GUINT16_TO_BE(3), GUINT16_TO_BE(40000), GUINT16_TO_BE(4)};
  g_autofree char *u2 = make_npy(
      "u2.npy", 1, "{'descr': '>u2', 'fortran_order': True, 'shape': (2, 3), }", be16, sizeof be16);
  m = read_ok(u2, &options, &info); /* column by column: (1, 65535) is the first column */
  assert_row(m, 0, NULL, (const float[]){1, 2, 40000});
  assert_row(m, 1, NULL, (const float[]){65535, 3, 4});
  knnwb_matrix_free(m);
  const gint8 small[4] = {-128, 127, -1, 0};
  g_autofree char *i1 =
      make_npy("i1.npy", 1, "{'descr': '|i1', 'fortran_order': False, 'shape': (2, 2), }", small,
               sizeof small);
  m = read_ok(i1, &options, &info);
  assert_row(m, 0, NULL, (const float[]){-128, 127});
  assert_row(m, 1, NULL, (const float[]){-1, 0});
  knnwb_matrix_free(m);
  /* Halves: 1.5, -2, the largest (65504), the smallest subnormal (2^-24), -0, 2^-14. */
  const guint16 halves[6] = {0x3e00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x0400};
  g_autofree char *f2 =
      make_npy("f2.npy", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }", halves,
               sizeof halves);
  m = read_ok(f2, &options, &info);
  assert_row(m, 0, NULL, (const float[]){1.5f, -2, 65504});
  assert_row(m, 1, NULL, (const float[]){0x1p-24f, -0.0f, 0x1p-14f});
  g_assert_true(signbit(m->values[4]));
  knnwb_matrix_free(m);

  /* NaN rows dropped on request. */
  const float with_nan[6] = {1, 2, NAN, 4, 5, 6}; /* 3 x 2 */
  g_autofree char *nan =
      make_npy("nan.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }",
               with_nan, sizeof with_nan);
  options.missing = KNNWB_MISSING_DROP_ROWS;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING, "*1 row with missing values*row 1 (counted*");
  m = read_ok(nan, &options, &info);
  g_test_assert_expected_messages();
  g_assert_cmpuint(m->n_rows, ==, 3); /* the NaN row stays, absent, with zeros */
  g_assert_true(knnwb_matrix_row_is_absent(m, 1));
  assert_row(m, 1, NULL, (const float[]){0, 0});
  assert_row(m, 2, NULL, (const float[]){5, 6});
  knnwb_matrix_free(m);
}

/* What KnnwbReadOptions.shape_known was told: calls, then the last rows and columns. */
typedef struct {
  int calls;
  size_t rows, cols;
} ShapeSeen;

static void shape_seen(size_t rows, size_t cols, void *data)
{
  ShapeSeen *seen = data;
  seen->calls++;
  seen->rows = rows;
  seen->cols = cols;
}

/* The NPY reader tells the matrix's shape once, before its values: as stored, transposed, a
 * rank's block; a file whose header is bad tells nothing, one whose values are bad tells it
 * (the header was good) and fails after; text formats never tell. */
static void test_npy_shape_known(void)
{
  const float values[15] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}; /* 5 x 3 */
  g_autofree char *npy =
      make_npy("shape.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 3), }",
               values, sizeof values);
  ShapeSeen seen = {0};
  KnnwbReadOptions options = options_for(KNNWB_INPUT_AUTO);
  options.shape_known = shape_seen;
  options.shape_known_data = &seen;
  KnnwbReadInfo info;
  KnnwbMatrix *m = read_ok(npy, &options, &info);
  g_assert_cmpint(seen.calls, ==, 1);
  g_assert_cmpuint(seen.rows, ==, m->n_rows);
  g_assert_cmpuint(seen.cols, ==, m->n_cols);
  g_assert_cmpuint(seen.rows, ==, 5);
  knnwb_matrix_free(m);

  options.transpose = TRUE;
  m = read_ok(npy, &options, &info);
  g_assert_cmpint(seen.calls, ==, 2);
  g_assert_cmpuint(seen.rows, ==, 3);
  g_assert_cmpuint(seen.cols, ==, 5);
  knnwb_matrix_free(m);

  /* rank 1 of 2 reads rows 3 .. 4 (knnwb_knn_group_rows gives the first block the extra row) */
  options.transpose = FALSE;
  options.block_index = 1;
  options.block_count = 2;
  m = read_ok(npy, &options, &info);
  g_assert_true(info.block_read);
  g_assert_cmpint(seen.calls, ==, 3);
  g_assert_cmpuint(seen.rows, ==, m->n_rows);
  g_assert_cmpuint(seen.rows, ==, 2);
  knnwb_matrix_free(m);

  options.block_index = options.block_count = 0;
  const float with_nan[6] = {1, 2, NAN, 4, 5, 6};
  g_autofree char *nan =
      make_npy("shape-nan.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
               with_nan, sizeof with_nan);
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_formats_read_matrix(nan, &options, &m, &info, &error));
  g_assert_cmpint(seen.calls, ==, 4);
  g_assert_cmpuint(seen.rows, ==, 2);
  g_clear_error(&error);
  g_autofree char *bad = formats_test_write("shape-bad.npy", "NUMPY is not here", -1);
  g_assert_false(knnwb_formats_read_matrix(bad, &options, &m, &info, &error));
  g_clear_error(&error);
  g_autofree char *csv = formats_test_write("shape.csv", "id,a,b\nr1,1,2\nr2,3,4\n", -1);
  m = read_ok(csv, &options, &info);
  g_assert_cmpint(seen.calls, ==, 4);
  knnwb_matrix_free(m);
}

static void test_npy_malformed(void)
{
  const float data[6] = {1, 2, 3, 4, 5, 6};
  const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  static const struct {
    const char *name;
    const char *dict;
    size_t data_bytes;
    const char *needle;
  } cases[] = {
      {"dtype", "{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", 24,
       "dtype '<c8' is not supported"},
      {"dtype-size", "{'descr': '<i3', 'fortran_order': False, 'shape': (2, 3), }", 24,
       "dtype '<i3' is not supported"},
      {"struct", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }", 24,
       "'descr' must be a type string"},
      {"dims3", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }", 24,
       "3 dimensions"},
      {"dims1", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 24, "1 dimension;"},
      {"truncated", NULL, 20, "truncated"},
      {"trailing", NULL, 28, "4 bytes follow"},
      {"absurd", "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 4000000000), }",
       24, "truncated"},
      {"overflow", "{'descr': '<f8', 'fortran_order': False, 'shape': (9223372036854775807, 4), }",
       24, "truncated"},
      {"order", "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", 24, "True or False"},
      {"key", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", 24,
       "unknown key"},
      {"missing-key", "{'descr': '<f4', 'shape': (2, 3), }", 24, "lacks"},
      {"empty", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", 0, "is empty"},
      {"unclosed", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", 24, "bad header"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf("bad-%s.npy", cases[i].name);
    g_autofree char *path =
        make_npy(name, 1, cases[i].dict ? cases[i].dict : good, data, MIN(cases[i].data_bytes, 24));
    if (cases[i].data_bytes > 24) {
      /* Append bytes past the array. */
      FILE *f = fopen(path, "ab");
      fwrite("junk", 1, cases[i].data_bytes - 24, f);
      fclose(f);
    }
    g_test_message("case %s", cases[i].name);
    KnnwbReadOptions options = options_for(KNNWB_INPUT_NPY);
    formats_test_expect_parse_error(path, &options, 0, cases[i].needle);
  }
  g_autofree char *magic = formats_test_write("bad-magic.npy", "NUMPY is not here", -1);
  KnnwbReadOptions options = options_for(KNNWB_INPUT_NPY);
  formats_test_expect_parse_error(magic, &options, 0, "not an NPY file");
  g_autofree char *version =
      formats_test_write("bad-version.npy", BIN("\x93NUMPY\x04\x00\x10\x00{}"));
  formats_test_expect_parse_error(version, &options, 0, "version 4");
  g_autofree char *header = formats_test_write("bad-header.npy", BIN("\x93NUMPY\x01\x00\xff\x7f{"));
  formats_test_expect_parse_error(header, &options, 0, "the header claims");
  const float with_nan[6] = {1, 2, INFINITY, 4, 5, 6};
  g_autofree char *nan = make_npy("bad-nan.npy", 1, good, with_nan, sizeof with_nan);
  formats_test_expect_parse_error(nan, &options, 0, "row 1, column 3: infinite value");
  double too_big[6] = {1, 2, 3, 4, 1e300, 6};
  g_autofree char *range =
      make_npy("bad-range.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
               too_big, sizeof too_big);
  formats_test_expect_parse_error(range, &options, 0, "row 2, column 2: the float64 value");
  g_autofree char *labels = formats_test_write("bad.labels", "a\nb\nc\n", -1);
  g_autofree char *ok = make_npy("labels.npy", 1, good, data, sizeof data);
  options.labels_path = labels;
  KnnwbMatrix *m = NULL;
  GError *error = NULL;
  g_assert_false(knnwb_formats_read_matrix(ok, &options, &m, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_autofree char *prefix = g_strdup_printf("%s:3: 3 labels for 2 rows", labels);
  g_assert_true(g_str_has_prefix(error->message, prefix));
  g_clear_error(&error);
}

/* ---------------------------------------------------------------- example data in share/ */

static void test_example_data(void)
{
  const char *path = KNNWB_SOURCE_DIR "/share/examples/data/synthetic_expression.tsv";
  KnnwbMatrix *m = read_ok(path, NULL, NULL);
  g_assert_cmpuint(m->n_rows, ==, 5001);
  g_assert_cmpuint(m->n_cols, ==, 100);
  g_assert_cmpstr(m->row_labels[0], ==, "PRB00001");
  g_assert_cmpstr(m->row_labels[5000], ==, "phenotype");
  g_assert_cmpstr(m->col_labels[99], ==, "S100");
  GError *error = NULL;
  g_assert_true(knnwb_matrix_check_finite(m, &error));
  g_assert_no_error(error);
  knnwb_matrix_free(m);

  m = read_ok(KNNWB_SOURCE_DIR "/share/examples/data/cibm-sample.txt", NULL, NULL);
  g_assert_cmpuint(m->n_rows, ==, 10);
  knnwb_matrix_free(m);
}

/* ---------------------------------------------------------------- detection and names */

static void test_detection(void)
{
  static const struct {
    const char *name;
    const char *content;
    KnnwbInputFormat format;
  } cases[] = {
      {"a.csv", "x", KNNWB_INPUT_CSV},        {"a.TSV", "x", KNNWB_INPUT_TSV},
      {"a.gct", "#1.2\n", KNNWB_INPUT_GCT},   {"a.npy", "\x93NUMPY", KNNWB_INPUT_NPY},
      {"a.txt", "#1.2\n", KNNWB_INPUT_GCT},   {"b.txt", "\n<MicroarrayData>\n", KNNWB_INPUT_CIBM},
      {"c.txt", "a\tb,c\n", KNNWB_INPUT_TSV}, {"d.dat", "a,b\n", KNNWB_INPUT_CSV},
      {"e", "\x93NUMPY", KNNWB_INPUT_NPY},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *path = formats_test_write(cases[i].name, cases[i].content, -1);
    KnnwbInputFormat format;
    GError *error = NULL;
    g_assert_true(knnwb_formats_detect_input(path, &format, &error));
    g_assert_no_error(error);
    g_assert_cmpint(format, ==, cases[i].format);
  }
  g_autofree char *plain = formats_test_write("plain.txt", "just words\n", -1);
  KnnwbInputFormat format;
  GError *error = NULL;
  g_assert_false(knnwb_formats_detect_input(plain, &format, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_clear_error(&error);
  /* Space-separated (R's write.table default) has no --format: the message says how to write it. */
  g_autofree char *spaced = formats_test_write("r-default.txt", "\"S1\" \"S2\"\n\"g\" 1 2\n", -1);
  g_assert_false(knnwb_formats_detect_input(spaced, &format, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_assert_nonnull(strstr(error->message, "write.table(x, file, sep = \"\\t\")"));
  g_clear_error(&error);

  for (int f = KNNWB_INPUT_AUTO; f <= KNNWB_INPUT_GEO; f++) {
    KnnwbInputFormat back;
    g_assert_true(knnwb_formats_input_from_string(knnwb_formats_input_to_string(f), &back, NULL));
    g_assert_cmpint(back, ==, f);
  }
  g_assert_true(knnwb_formats_input_from_string("CSV", &format, NULL));
  g_assert_false(knnwb_formats_input_from_string("xlsx", &format, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
}

/* The laid-out GML of `knnwb render`: a small file read whole, then malformed ones, each with its
 * line and message. */
static void test_gml(void)
{
  static const char *const good =
      "Creator \"knnwb\"\ngraph\n[\n  directed 1\n"
      "  node [ id 7 label \"a&amp;b\" focus 1 graphics [ x 1.5 y -2 w 20 type \"hexagon\" "
      "fill \"#FF0000\" ] LabelGraphics [ fontSize 9 ] ]\n"
      "  node [ id 3 graphics [ x 0 y 0 ] ]\n"
      "  edge [ source 7 target 3 label \"ignored\" graphics [ fill \"#00FF00\" width 2.5 ] ]\n"
      "]\n";
  g_autofree char *path = formats_test_write("good.gml", good, -1);
  GError *error = NULL;
  g_autoptr(KnnwbDrawing) drawing = knnwb_formats_read_gml(path, &error);
  g_assert_no_error(error);
  g_assert_true(drawing->directed);
  g_assert_cmpuint(drawing->nodes->len, ==, 2);
  g_assert_cmpuint(drawing->edges->len, ==, 1);
  const KnnwbDrawingNode *first = &g_array_index(drawing->nodes, KnnwbDrawingNode, 0);
  g_assert_cmpstr(first->label, ==, "a&b");
  g_assert_true(first->focus && first->hexagon);
  g_assert_cmpfloat(first->x, ==, 1.5);
  g_assert_cmpfloat(first->y, ==, -2.0);
  g_assert_cmpfloat(first->w, ==, 20.0);
  g_assert_cmpfloat(first->font_size, ==, 9.0);
  g_assert_cmpfloat(first->fill[0], ==, 1.0);
  const KnnwbDrawingEdge *edge = &g_array_index(drawing->edges, KnnwbDrawingEdge, 0);
  g_assert_cmpfloat(edge->width, ==, 2.5);
  g_assert_cmpfloat(edge->colour[1], ==, 1.0);

  static const struct {
    const char *text;
    int code;
    const char *message; /* after "path" */
  } bad[] = {
      {"", KNNWB_ERROR_PARSE, ": no `graph [ ... ]` in this file"},
      {"graph [\n node [ id 1 label \"open ]\n]\n", KNNWB_ERROR_PARSE,
       ":4: a string is not closed"},
      {"graph [\n node [ graphics [ x 0 y 0 ] ]\n]\n", KNNWB_ERROR_PARSE,
       ":2: a node without an id"},
      {"graph [\n node [ id 1 graphics [ x 0 y 0 ] ]\n node [ id 1 graphics [ x 0 y 0 ] ]\n]\n",
       KNNWB_ERROR_PARSE, ":3: a second node with the same id"},
      {"graph [\n node [ id 1e300 label \"x\" graphics [ x 0 y 0 ] ]\n]\n", KNNWB_ERROR_PARSE,
       ":2: a node id beyond the 64-bit integers"},
      {"graph [\n node [ id 1 graphics [ x 0 y 0 ] ]\n edge [ source 1 target 2 ]\n]\n",
       KNNWB_ERROR_PARSE, ":3: edge target 2 is not a node"},
      {"graph [\n edge [ source 1e300 target 2 label \"x\" ]\n]\n", KNNWB_ERROR_PARSE,
       ":2: edge source 1.0000000000000001e+300 is not a node"},
      {"graph [\n node [ id 1 label \"x\" graphics [ x 0 ] ]\n]\n", KNNWB_ERROR_INVALID_DATA,
       ": node 0 has no coordinates"},
      {"graph [\n node [ id 1 label \"x\" = ]\n]\n", KNNWB_ERROR_PARSE, ":2: expected a key or ]"},
      {"graph [\n node [ id 1 label = ]\n]\n", KNNWB_ERROR_PARSE,
       ":2: expected a number, a \"string\" or ["},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *name = g_strdup_printf("bad%zu.gml", i);
    g_autofree char *bad_path = formats_test_write(name, bad[i].text, -1);
    KnnwbDrawing *none = knnwb_formats_read_gml(bad_path, &error);
    g_assert_null(none);
    g_assert_error(error, KNNWB_ERROR, bad[i].code);
    g_autofree char *expected = g_strconcat(bad_path, bad[i].message, NULL);
    if (!g_str_has_prefix(error->message, expected))
      g_error("case %zu: '%s' does not start with '%s'", i, error->message, expected);
    g_clear_error(&error);
  }
  g_assert_null(knnwb_formats_read_gml("/nonexistent/x.gml", &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_IO);
  g_clear_error(&error);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_add_func("/formats/cibm/seed-sample", test_cibm_seed_sample);
  g_test_add_func("/formats/cibm/flavours", test_cibm_flavours);
  g_test_add_func("/formats/cibm/malformed", test_cibm_malformed);
  g_test_add_func("/formats/delimited/csv-flavours", test_csv_flavours);
  g_test_add_func("/formats/delimited/tsv-flavours", test_tsv_flavours);
  g_test_add_func("/formats/delimited/large", test_tsv_large);
  g_test_add_func("/formats/delimited/malformed", test_delimited_malformed);
  g_test_add_func("/formats/delimited/trailing-separators", test_delimited_trailing_separators);
  g_test_add_func("/formats/delimited/numeric-headers", test_delimited_numeric_headers);
  g_test_add_func("/formats/delimited/tiny-values", test_delimited_tiny_values);
  g_test_add_func("/formats/delimited/feature-counts", test_delimited_feature_counts);
  g_test_add_func("/formats/delimited/decimal-comma", test_delimited_decimal_comma);
  g_test_add_func("/formats/gct/good", test_gct_good);
  g_test_add_func("/formats/gct/malformed", test_gct_malformed);
  g_test_add_func("/formats/npy/good", test_npy_good);
  g_test_add_func("/formats/npy/malformed", test_npy_malformed);
  g_test_add_func("/formats/npy/shape-known", test_npy_shape_known);
  g_test_add_func("/formats/detection", test_detection);
  g_test_add_func("/formats/example-data", test_example_data);
  g_test_add_func("/formats/gml", test_gml);
  return g_test_run();
}
