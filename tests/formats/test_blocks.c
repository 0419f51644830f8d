/*
 * Reading one rank's block of a file (KnnwbReadOptions.block_index/block_count, split-memory MPI
 * runs): the blocks of every rank, in order, must hold exactly the rows (values, labels, absent
 * marks) of the whole read, whatever the byte or row boundaries; messages keep the file's line
 * numbers; a quote is reported so the caller reads whole.
 */
#include <math.h>
#include <string.h>
#include "formats_test_util.h"

/* Reads path whole and as 1..max_blocks blocks; the concatenated blocks equal the whole read. */
static void check_blocks(const char *path, KnnwbInputFormat format, gboolean expect_block,
                         int max_blocks)
{
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.format = format;
  options.missing = KNNWB_MISSING_DROP_ROWS;
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbMatrix) whole = NULL;
  g_assert_true(knnwb_formats_read_matrix(path, &options, &whole, NULL, &error));
  g_assert_no_error(error);
  const size_t d = whole->n_cols;
  for (int count = 2; count <= max_blocks; count++) {
    size_t row = 0;
    for (int index = 0; index < count; index++) {
      options.block_index = index;
      options.block_count = count;
      g_autoptr(KnnwbMatrix) block = NULL;
      KnnwbReadInfo info;
      g_assert_true(knnwb_formats_read_matrix(path, &options, &block, &info, &error));
      g_assert_no_error(error);
      g_assert_cmpint(info.block_read, ==, expect_block);
      g_assert_false(info.quoted);
      g_assert_cmpuint(block->n_cols, ==, d);
      if (format == KNNWB_INPUT_NPY)
        g_assert_cmpuint(info.first_row, ==, row);
      g_assert_cmpuint(row + block->n_rows, <=, whole->n_rows);
      if (block->n_rows > 0)
        g_assert_cmpmem(block->values, block->n_rows * d * sizeof(float), whole->values + row * d,
                        block->n_rows * d * sizeof(float));
      for (size_t i = 0; i < block->n_rows; i++) {
        g_assert_cmpstr(knnwb_matrix_row_label(block, i), ==,
                        knnwb_matrix_row_label(whole, row + i));
        g_assert_cmpint(knnwb_matrix_row_is_absent(block, i), ==,
                        knnwb_matrix_row_is_absent(whole, row + i));
      }
      row += block->n_rows;
    }
    g_assert_cmpuint(row, ==, whole->n_rows);
  }
}

static void test_tsv_blocks(void)
{
  /* A BOM, CRLF, blank lines, a row with a missing value (absent), lines of different lengths. */
  GString *text = g_string_new("\xEF\xBB\xBFname\ta\tb\tc\r\n");
  for (int i = 0; i < 61; i++) {
    g_string_append_printf(text, "row%d\t%d.5\t%g\t%s\r\n", i, i, 1.0 / (i + 1),
                           i == 17 ? "NA" : (i % 5 ? "2" : "-7.125e3"));
    if (i % 13 == 0)
      g_string_append(text, "\r\n");
  }
  g_autofree char *path = formats_test_write("blocks.tsv", text->str, (gssize)text->len);
  g_string_free(text, TRUE);
  check_blocks(path, KNNWB_INPUT_TSV, TRUE, 7);
}

static void test_csv_without_header(void)
{
  GString *text = g_string_new(NULL);
  for (int i = 0; i < 40; i++)
    g_string_append_printf(text, "r%d,%d,%d,%d\n", i, i * 3 % 7, i, 40 - i);
  g_autofree char *path = formats_test_write("blocks.csv", text->str, (gssize)text->len);
  g_string_free(text, TRUE);
  check_blocks(path, KNNWB_INPUT_CSV, TRUE, 5);
}

static void test_npy_blocks(void)
{
  /* float32 C order: rows read by byte offsets; float64: converted on the reading threads. */
  for (int item = 4; item <= 8; item += 4) {
    const size_t rows = 23, cols = 3;
    g_autofree char *header = g_strdup_printf(
        "{'descr': '<f%d', 'fortran_order': False, 'shape': (%zu, %zu), }", item, rows, cols);
    GString *bytes = g_string_new_len("\x93NUMPY\x01\x00", 8);
    size_t length = strlen(header) + 1;
    size_t padded = length + (64 - (10 + length) % 64) % 64;
    guint16 header_length = GUINT16_TO_LE((guint16)padded);
    g_string_append_len(bytes, (const char *)&header_length, 2);
    g_string_append(bytes, header);
    while (bytes->len < 10 + padded - 1)
      g_string_append_c(bytes, ' ');
    g_string_append_c(bytes, '\n');
    for (size_t v = 0; v < rows * cols; v++) {
      if (item == 4) {
        float value = (float)v * 0.25f - 3.0f;
        g_string_append_len(bytes, (const char *)&value, 4);
      } else {
        double value = (double)v * 0.25 - 3.0;
        g_string_append_len(bytes, (const char *)&value, 8);
      }
    }
    g_autofree char *path =
        formats_test_write(item == 4 ? "b4.npy" : "b8.npy", bytes->str, (gssize)bytes->len);
    g_string_free(bytes, TRUE);
    check_blocks(path, KNNWB_INPUT_NPY, TRUE, 6);
  }
}

/* A bad value in the last block: the message names its line in the file. */
static void test_tsv_block_error_line(void)
{
  GString *text = g_string_new("name\ta\tb\n");
  for (int i = 0; i < 30; i++)
    g_string_append_printf(text, "row%d\t%d\t%s\n", i, i, i == 27 ? "oops" : "1");
  g_autofree char *path = formats_test_write("bad-block.tsv", text->str, (gssize)text->len);
  g_string_free(text, TRUE);
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.format = KNNWB_INPUT_TSV;
  options.block_count = 3;
  options.block_index = 2;
  formats_test_expect_parse_error(path, &options, 29, "oops");
  options.block_index = 0; /* line 29 is not in the first third */
  g_autoptr(KnnwbMatrix) block = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_read_matrix(path, &options, &block, NULL, &error));
}

/* A quote anywhere that a block's reader passes is reported: the caller then reads whole. */
static void test_tsv_quote_reported(void)
{
  GString *text = g_string_new("name\ta\tb\n");
  for (int i = 0; i < 30; i++)
    g_string_append_printf(text, i == 4 ? "\"row%d\"\t%d\t1\n" : "row%d\t%d\t1\n", i, i);
  g_autofree char *path = formats_test_write("quoted-block.tsv", text->str, (gssize)text->len);
  g_string_free(text, TRUE);
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.format = KNNWB_INPUT_TSV;
  options.block_count = 2;
  options.block_index = 1; /* passes line 6 on its way to the second half */
  g_autoptr(KnnwbMatrix) block = NULL;
  g_autoptr(GError) error = NULL;
  KnnwbReadInfo info;
  g_assert_true(knnwb_formats_read_matrix(path, &options, &block, &info, &error));
  g_assert_true(info.block_read);
  g_assert_true(info.quoted);
}

static void ignore_warning(const char *domain, GLogLevelFlags level, const char *message,
                           gpointer data)
{
  (void)domain, (void)level, (void)message, (void)data;
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  /* The row with a missing value is reported with a warning on each read: expected. */
  g_log_set_always_fatal(G_LOG_FATAL_MASK);
  g_log_set_handler("knnwb", G_LOG_LEVEL_WARNING, ignore_warning, NULL);
  g_test_add_func("/formats/blocks/tsv", test_tsv_blocks);
  g_test_add_func("/formats/blocks/csv-without-header", test_csv_without_header);
  g_test_add_func("/formats/blocks/npy", test_npy_blocks);
  g_test_add_func("/formats/blocks/tsv-error-line", test_tsv_block_error_line);
  g_test_add_func("/formats/blocks/tsv-quote-reported", test_tsv_quote_reported);
  return g_test_run();
}
