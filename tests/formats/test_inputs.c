/* Inputs people have: gzip-compressed files of every format (the same matrix as the plain file),
 * damaged gzip, files whose name or --format contradicts their content (the message says what the
 * file looks like), and NCBI GEO series matrices with their sample annotations. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include "formats_test_util.h"
#include "knnwb_test_process.h"

#if defined(__SANITIZE_ADDRESS__)
#define KNNWB_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KNNWB_TEST_ASAN 1
#endif
#endif

/* gzip of [data, data + length) at level, as `gzip` writes it. */
static GByteArray *gzip_bytes(const void *data, size_t length, int level)
{
  z_stream stream = {0};
  g_assert_cmpint(deflateInit2(&stream, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
                  ==, Z_OK);
  GByteArray *out = g_byte_array_sized_new((guint)(deflateBound(&stream, (uLong)length)));
  g_byte_array_set_size(out, (guint)deflateBound(&stream, (uLong)length));
  stream.next_in = (Bytef *)data;
  stream.avail_in = (uInt)length;
  stream.next_out = out->data;
  stream.avail_out = out->len;
  g_assert_cmpint(deflate(&stream, Z_FINISH), ==, Z_STREAM_END);
  g_byte_array_set_size(out, (guint)stream.total_out);
  deflateEnd(&stream);
  return out;
}

static char *write_bytes(const char *name, const GByteArray *bytes)
{
  return formats_test_write(name, (const char *)bytes->data, (gssize)bytes->len);
}

static KnnwbMatrix *read_or_fail(const char *path, const KnnwbReadOptions *options)
{
  KnnwbMatrix *matrix = NULL;
  g_autoptr(GError) error = NULL;
  if (!knnwb_formats_read_matrix(path, options, &matrix, NULL, &error))
    g_error("%s: %s", path, error->message);
  return matrix;
}

static void assert_same_strings(char **a, char **b, size_t n)
{
  g_assert_true((a == NULL) == (b == NULL));
  for (size_t i = 0; a != NULL && i < n; i++)
    g_assert_cmpstr(a[i], ==, b[i]);
}

static void assert_same_matrix(const KnnwbMatrix *a, const KnnwbMatrix *b)
{
  g_assert_cmpuint(a->n_rows, ==, b->n_rows);
  g_assert_cmpuint(a->n_cols, ==, b->n_cols);
  g_assert_cmpint(memcmp(a->values, b->values, a->n_rows * a->n_cols * sizeof(float)), ==, 0);
  assert_same_strings(a->row_labels, b->row_labels, a->n_rows);
  assert_same_strings(a->col_labels, b->col_labels, a->n_cols);
  assert_same_strings(a->col_classes, b->col_classes, a->n_cols);
}

/* A float32 C-order NPY of rows x cols values i * 0.5 - j. */
static GByteArray *npy_bytes(size_t rows, size_t cols)
{
  g_autofree char *header = g_strdup_printf(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, cols);
  GString *text = g_string_new(header);
  while ((10 + text->len + 1) % 64 != 0)
    g_string_append_c(text, ' ');
  g_string_append_c(text, '\n');
  GByteArray *bytes = g_byte_array_new();
  g_byte_array_append(bytes, (const guint8 *)"\x93NUMPY\x01\x00", 8);
  guint8 length[2] = {(guint8)(text->len & 0xff), (guint8)(text->len >> 8)};
  g_byte_array_append(bytes, length, 2);
  g_byte_array_append(bytes, (const guint8 *)text->str, (guint)text->len);
  g_string_free(text, TRUE);
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++) {
      float value = (float)i * 0.5f - (float)j;
      g_byte_array_append(bytes, (const guint8 *)&value, sizeof value);
    }
  return bytes;
}

static const char geo_fixture[] =
    "!Series_title\t\"A small study\"\n"
    "!Series_geo_accession\t\"GSE0001\"\n"
    "!Series_summary\t\"Three samples, tab\tinside quotes\"\n"
    "\n"
    "!Sample_title\t\"liver, rep 1\"\t\"brain rep 1\"\t\"liver rep 2\"\n"
    "!Sample_geo_accession\t\"GSM11\"\t\"GSM12\"\t\"GSM13\"\n"
    "!Sample_characteristics_ch1\t\"tissue: liver\"\t\"tissue: brain\"\t\"tissue: liver\"\n"
    "!Sample_characteristics_ch1\t\"age: 5\"\t\"age: 7\"\t\"sex: male\"\n"
    "!series_matrix_table_begin\n"
    "\"ID_REF\"\t\"GSM11\"\t\"GSM12\"\t\"GSM13\"\n"
    "\"1007_s_at\"\t1.5\t2.25\t-3\n"
    "\"1053_at\"\t0.125\t\"4\"\t5e-1\n"
    "\"117_at\"\t7\t8\t9\n"
    "\"121_at\"\t10\t11\t12.5\n"
    "!series_matrix_table_end\n";

/* Every reader reads a gzip file exactly as the plain one, whatever the gzip file is called. */
static void test_gzip_every_format(void)
{
  static const struct {
    const char *name;
    const char *content;
  } texts[] = {
      {"m.tsv", "id\ta\tb\tc\nr1\t1\t2.5\t3\nr2\t4\t5\t-6e-3\nr3\t7\t8\t9\n"},
      {"m.csv", "id,a,b\n\"r,1\",1,2\nr2,3,4\n"},
      {"m.gct", "#1.2\n2\t2\nName\tDescription\tS1\tS2\ng1\td1\t1\t2\ng2\td2\t3\t4\n"},
      {"m.txt", "<MicroarrayData>\n2 3\ng1 1 2 3\ng2 4 5 6\n<EndOfFile>\n"},
      {"GSE0001_series_matrix.txt", geo_fixture},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(texts); i++) {
    g_autofree char *plain = formats_test_write(texts[i].name, texts[i].content, -1);
    g_autoptr(KnnwbMatrix) expected = read_or_fail(plain, NULL);
    g_autoptr(GByteArray) compressed = gzip_bytes(texts[i].content, strlen(texts[i].content), 6);
    g_autofree char *gz_name = g_strdup_printf("%s.gz", texts[i].name);
    g_autofree char *gz = write_bytes(gz_name, compressed);
    g_autoptr(KnnwbMatrix) from_gz = read_or_fail(gz, NULL);
    assert_same_matrix(expected, from_gz);
    /* A compressed file named like a plain one is still read (the content decides). */
    g_autofree char *misnamed_name = g_strdup_printf("misnamed-%s", texts[i].name);
    g_autofree char *misnamed = write_bytes(misnamed_name, compressed);
    g_autoptr(KnnwbMatrix) from_misnamed = read_or_fail(misnamed, NULL);
    assert_same_matrix(expected, from_misnamed);
  }
  /* NPY: the array decompressed into memory, then read (and mapped) as the file. */
  g_autoptr(GByteArray) npy = npy_bytes(7, 5);
  g_autofree char *npy_plain = write_bytes("a.npy", npy);
  g_autoptr(GByteArray) npy_gz_bytes = gzip_bytes(npy->data, npy->len, 9);
  g_autofree char *npy_gz = write_bytes("a.npy.gz", npy_gz_bytes);
  g_autoptr(KnnwbMatrix) expected = read_or_fail(npy_plain, NULL);
  g_autoptr(KnnwbMatrix) from_gz = read_or_fail(npy_gz, NULL);
  assert_same_matrix(expected, from_gz);
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.transpose = TRUE;
  g_autoptr(KnnwbMatrix) t_plain = read_or_fail(npy_plain, &options);
  g_autoptr(KnnwbMatrix) t_gz = read_or_fail(npy_gz, &options);
  assert_same_matrix(t_plain, t_gz);
}

/* Many megabytes (several buffer refills, lines across them) and concatenated members. */
static void test_gzip_large_and_members(void)
{
  GString *text = g_string_new("id\tx\ty\tz\tw\n");
  for (int i = 0; i < 120000; i++)
    g_string_append_printf(text, "row%d\t%d.25\t%d\t%.6g\t-%d\n", i, i % 977, (i * 7) % 1013,
                           (double)i / 3.0, i % 11);
  g_autofree char *plain = formats_test_write("large.tsv", text->str, (gssize)text->len);
  g_autoptr(KnnwbMatrix) expected = read_or_fail(plain, NULL);
  g_assert_cmpuint(expected->n_rows, ==, 120000);
  g_autoptr(GByteArray) compressed = gzip_bytes(text->str, text->len, 1);
  g_autofree char *gz = write_bytes("large.tsv.gz", compressed);
  g_autoptr(KnnwbMatrix) from_gz = read_or_fail(gz, NULL);
  assert_same_matrix(expected, from_gz);
  /* Split in the middle of a line into two members, as `cat a.gz b.gz` would make. */
  size_t half = text->len / 2 + 3;
  g_autoptr(GByteArray) first = gzip_bytes(text->str, half, 6);
  g_autoptr(GByteArray) second = gzip_bytes(text->str + half, text->len - half, 6);
  g_byte_array_append(first, second->data, second->len);
  g_autofree char *members = write_bytes("members.tsv.gz", first);
  g_autoptr(KnnwbMatrix) from_members = read_or_fail(members, NULL);
  assert_same_matrix(expected, from_members);
  g_string_free(text, TRUE);
}

typedef struct {
  guint calls;
  uint64_t done, total;
  gboolean raise; /* raise the cancel flag at the first report */
  gint cancel;
} ReadWatch;

static void read_watch_progress(uint64_t done, uint64_t total, void *data)
{
  ReadWatch *watch = data;
  g_assert_cmpuint(done, <=, total);
  g_assert_cmpuint(done, >=, watch->done);
  watch->calls++;
  watch->done = done;
  watch->total = total;
  if (watch->raise)
    g_atomic_int_set(&watch->cancel, 1);
}

/* Reads path watched: returns the error code (0 on success) and fills watch. */
static int read_watched(const char *path, ReadWatch *watch)
{
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.cancel = &watch->cancel;
  options.progress = read_watch_progress;
  options.progress_data = watch;
  KnnwbMatrix *matrix = NULL;
  g_autoptr(GError) error = NULL;
  gboolean ok = knnwb_formats_read_matrix(path, &options, &matrix, NULL, &error);
  g_assert_true(ok == (matrix != NULL));
  knnwb_matrix_free(matrix);
  if (ok)
    return 0;
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
  g_assert_true(g_str_has_prefix(error->message, path));
  g_assert_nonnull(strstr(error->message, "interrupted while reading"));
  return error->code;
}

/* A read follows the cancel flag and reports its progress in bytes of the file: a 5.5 MB TSV and
 * its gzip copy stop with CANCELLED at the next 4 MiB buffer after the flag rises mid-read (before,
 * a read went on to the end: 0.74 s for a 1.1 GB CSV, 3.4 s for its gzip copy, then the run
 * stopped); read to the end, the last report is the whole file (compressed bytes for gzip). An
 * gzip-compressed NPY stops while it is inflated; an NPY and a CIBM file with the flag already
 * raised stop at once. */
static void test_read_cancel_and_progress(void)
{
  GString *text = g_string_new("id\tx\ty\tz\n");
  for (int i = 0; i < 200000; i++)
    g_string_append_printf(text, "row%d\t%d.25\t%d\t%.6g\n", i, i % 977, (i * 7) % 1013,
                           (double)i / 3.0);
  g_assert_cmpuint(text->len, >, (guint)(5 << 20));
  g_autofree char *plain = formats_test_write("watched.tsv", text->str, (gssize)text->len);
  g_autoptr(GByteArray) compressed = gzip_bytes(text->str, text->len, 1);
  g_autofree char *gz = write_bytes("watched.tsv.gz", compressed);
  const char *paths[] = {plain, gz};
  const uint64_t sizes[] = {text->len, compressed->len};
  for (int f = 0; f < 2; f++) {
    ReadWatch whole = {0};
    g_assert_cmpint(read_watched(paths[f], &whole), ==, 0);
    g_assert_cmpuint(whole.calls, >=, 2);
    g_assert_cmpuint(whole.total, ==, sizes[f]);
    g_assert_cmpuint(whole.done, ==, sizes[f]);
    ReadWatch stopped = {.raise = TRUE};
    g_assert_cmpint(read_watched(paths[f], &stopped), ==, KNNWB_ERROR_CANCELLED);
    g_assert_cmpuint(stopped.calls, ==, 1);
    g_assert_cmpuint(stopped.done, <, sizes[f]);
  }
  g_autoptr(GByteArray) npy = npy_bytes(300, 7);
  g_autofree char *npy_path = write_bytes("watched.npy", npy);
  ReadWatch npy_whole = {0};
  g_assert_cmpint(read_watched(npy_path, &npy_whole), ==, 0);
  g_assert_cmpuint(npy_whole.done, ==, npy->len);
  g_assert_cmpuint(npy_whole.total, ==, npy->len);
  g_autofree char *cibm = formats_test_write(
      "watched.txt", "<MicroarrayData>\n2 2\na 1 2\nb 3 4\n<SamplesNames>\nx y\n<EndOfFile>\n", -1);
  /* A gzip NPY is inflated as its data is read, a MiB at a time: that loop follows the flag. */
  g_autoptr(GByteArray) big_npy = npy_bytes(30000, 64);
  g_autoptr(GByteArray) big_npy_gz = gzip_bytes(big_npy->data, big_npy->len, 1);
  g_assert_cmpuint(big_npy->len, >, (guint)(2 << 20)); /* inflated a MiB at a time */
  g_autofree char *npy_gz = write_bytes("watched.npy.gz", big_npy_gz);
  ReadWatch npy_gz_stopped = {.raise = TRUE};
  g_assert_cmpint(read_watched(npy_gz, &npy_gz_stopped), ==, KNNWB_ERROR_CANCELLED);
  g_assert_cmpuint(npy_gz_stopped.calls, ==, 1);
  g_assert_cmpuint(npy_gz_stopped.total, ==, big_npy_gz->len);
  const char *raised[] = {npy_path, cibm, plain};
  for (size_t f = 0; f < G_N_ELEMENTS(raised); f++) {
    ReadWatch early = {.cancel = 1};
    g_assert_cmpint(read_watched(raised[f], &early), ==, KNNWB_ERROR_CANCELLED);
    g_assert_cmpuint(early.calls, ==, 0);
  }
  g_string_free(text, TRUE);
}

static void expect_error(const char *path, const KnnwbReadOptions *options, const char *needle)
{
  KnnwbMatrix *matrix = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_formats_read_matrix(path, options, &matrix, NULL, &error));
  g_assert_null(matrix);
  g_assert_nonnull(error);
  g_test_message("%s", error->message);
  g_assert_true(g_str_has_prefix(error->message, path));
  if (strstr(error->message, needle) == NULL)
    g_error("message '%s' lacks '%s'", error->message, needle);
}

/* Damaged gzip: truncated, corrupt, trailing garbage; every one an error naming the file. */
static void test_gzip_damaged(void)
{
  GString *text = g_string_new("id\ta\tb\n");
  for (int i = 0; i < 5000; i++)
    g_string_append_printf(text, "r%d\t%d\t%d\n", i, i, i * 3 % 17);
  g_autoptr(GByteArray) good = gzip_bytes(text->str, text->len, 6);
  g_string_free(text, TRUE);

  g_autoptr(GByteArray) truncated = g_byte_array_new();
  g_byte_array_append(truncated, good->data, good->len - 20);
  g_autofree char *truncated_path = write_bytes("truncated.tsv.gz", truncated);
  expect_error(truncated_path, NULL, "ends early");

  g_autoptr(GByteArray) corrupt = g_byte_array_new();
  g_byte_array_append(corrupt, good->data, good->len);
  for (guint i = good->len / 2; i < good->len / 2 + 16; i++)
    corrupt->data[i] ^= 0x5a;
  g_autofree char *corrupt_path = write_bytes("corrupt.tsv.gz", corrupt);
  expect_error(corrupt_path, NULL, "corrupt");

  g_autoptr(GByteArray) trailing = g_byte_array_new();
  g_byte_array_append(trailing, good->data, good->len);
  g_byte_array_append(trailing, (const guint8 *)"garbage\n", 8);
  g_autofree char *trailing_path = write_bytes("trailing.tsv.gz", trailing);
  expect_error(trailing_path, NULL, "not gzip follows");

  /* Only the magic: a gzip header cut short. */
  g_autofree char *magic = formats_test_write("magic.tsv.gz", "\x1f\x8b", 2);
  expect_error(magic, NULL, "ends early");
}

/* A name or --format that contradicts the content: the message says what the file looks like. */
static void test_wrong_format_messages(void)
{
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  g_autoptr(GByteArray) npy = npy_bytes(3, 2);

  g_autofree char *npy_as_tsv = write_bytes("array.tsv", npy);
  expect_error(npy_as_tsv, NULL,
               "the name says tsv, but the file looks like a NumPy .npy array; "
               "rename it or name the format (--format npy)");

  g_autofree char *npy_plain = write_bytes("array2.npy", npy);
  options.format = KNNWB_INPUT_CSV;
  expect_error(npy_plain, &options,
               "format csv was asked for, but the file looks like a NumPy .npy array; read it "
               "with format npy or auto");

  g_autofree char *tsv_as_npy = formats_test_write("table.npy", "id\ta\nr\t1\n", -1);
  expect_error(tsv_as_npy, NULL, "not an NPY file");
  expect_error(tsv_as_npy, NULL,
               "looks like tab-separated text; rename it or name the format "
               "(--format tsv)");

  g_autofree char *zip = formats_test_write("arrays.npz", "PK\x03\x04\x14\x00\x00\x00", 8);
  options.format = KNNWB_INPUT_NPY;
  expect_error(zip, &options, "zip archive");
  expect_error(zip, NULL, "cannot read it as a matrix: the file looks like a zip archive");

  g_autofree char *gml = formats_test_write(
      "graph.txt", "Creator \"igraph\"\nVersion 1\ngraph\n[\n  directed 0\n]\n", -1);
  expect_error(gml, NULL, "GML (a graph, not a matrix)");

  g_autofree char *graphml = formats_test_write(
      "graph.csv", "<?xml version=\"1.0\"?>\n<graphml xmlns=\"x\"></graphml>\n", -1);
  expect_error(graphml, NULL, "GraphML");

  g_autofree char *html = formats_test_write(
      "download.tsv", "<!DOCTYPE html>\n<html><body>Not found</body></html>\n", -1);
  expect_error(html, NULL, "an HTML page");

  g_autofree char *bzip2 = formats_test_write("data.tsv.gz", "BZh91AY&SY", 10);
  expect_error(bzip2, NULL, "bzip2-compressed data");

  const char *plain = "id\ta\nr\t1\n";
  g_autoptr(GByteArray) once = gzip_bytes(plain, strlen(plain), 6);
  g_autoptr(GByteArray) twice = gzip_bytes(once->data, once->len, 6);
  g_autofree char *double_gz = write_bytes("twice.tsv.gz", twice);
  expect_error(double_gz, NULL, "(once decompressed) looks like gzip data inside gzip data");

  /* Single-cell and R exports: named, with the way to a matrix knnwb reads (10x's matrix.mtx.gz
   * was told "columns separated by spaces ... R's write.table", HDF5 "binary data"). */
  const char *mtx = "%%MatrixMarket matrix coordinate integer general\n%\n3 2 2\n1 1 5\n3 2 1\n";
  g_autoptr(GByteArray) mtx_gz = gzip_bytes(mtx, strlen(mtx), 6);
  g_autofree char *tenx = write_bytes("matrix.mtx.gz", mtx_gz);
  /* 10x's features x barcodes file is read with the barcodes (cells) as the points. */
  KnnwbMatrix *cells = NULL;
  g_autoptr(GError) tenx_error = NULL;
  g_assert_true(knnwb_formats_read_matrix(tenx, NULL, &cells, NULL, &tenx_error));
  g_assert_cmpuint(cells->n_rows, ==, 2);
  g_assert_cmpuint(cells->n_cols, ==, 3);
  const float expected_cells[6] = {5, 0, 0, 0, 0, 1};
  g_assert_cmpmem(cells->values, sizeof expected_cells, expected_cells, sizeof expected_cells);
  knnwb_matrix_free(cells);
  /* An HDF5 signature goes to the AnnData reader, which says the rest is not HDF5; a knnwb built
   * without libhdf5 (it is optional) says so instead. */
  g_autofree char *h5ad = formats_test_write("cells.h5ad", "\x89HDF\r\n\x1a\n\0\0\0", 11);
  KnnwbMatrix *none = NULL;
  g_autoptr(GError) h5ad_error = NULL;
  g_assert_false(knnwb_formats_read_matrix(h5ad, NULL, &none, NULL, &h5ad_error));
  g_assert_null(none);
  g_assert_true(g_str_has_prefix(h5ad_error->message, h5ad));
  if (strstr(h5ad_error->message, "built without libhdf5") == NULL)
    expect_error(h5ad, NULL, "not an HDF5 file that libhdf5 can open");
  g_autofree char *xlsx =
      formats_test_write("sheet.csv", "PK\x03\x04\x14\0\x06\0[Content_Types].xml", 27);
  expect_error(xlsx, NULL, "the name says csv, but the file looks like an Excel workbook (.xlsx)");
  /* A pipe (`knnwb knn <(zcat x.gz)`, /dev/stdin): read twice, it looked empty ("the file is
   * empty: no header and no data rows"); now refused for what it is. */
  int ends[2];
  g_assert_cmpint(pipe(ends), ==, 0);
  const char *piped = "id\ta\nr\t1\ns\t2\n";
  g_assert_cmpint(write(ends[1], piped, strlen(piped)), ==, (gssize)strlen(piped));
  close(ends[1]);
  g_autofree char *pipe_path = g_strdup_printf("/proc/self/fd/%d", ends[0]);
  expect_error(pipe_path, NULL, "a pipe, not a file");
  close(ends[0]);
  /* Excel's "Unicode Text": UTF-16 with its byte-order mark (was "binary data"). */
  g_autofree char *utf16 = formats_test_write("unicode.txt", "\xff\xfeg\0\t\0a\0\n\0", 10);
  expect_error(utf16, NULL, "looks like UTF-16 text (as Excel's 'Unicode Text' saves)");
  /* Classic Mac OS line ends (old Excel for Mac): said "a header but no data rows follow it". */
  g_autofree char *mac = formats_test_write("mac.csv", "gene,a,b\rg0,1,2\rg1,3,4\r", -1);
  expect_error(mac, NULL, "mac.csv:1: the lines end with a carriage return alone");
  g_autofree char *soft = formats_test_write(
      "GSE1_family.soft", "^DATABASE = GeoMiame\n!Database_name = Gene Expression Omnibus\n", -1);
  expect_error(soft, NULL, "looks like an NCBI GEO SOFT file");
  g_autofree char *rds = formats_test_write("m.rds", "X\n\0\0\0\x03", 6);
  expect_error(rds, NULL, "looks like an R data file (.rds, .RData)");

  g_autofree char *geo_as_tsv = formats_test_write("series.tsv", geo_fixture, -1);
  expect_error(geo_as_tsv, NULL,
               "looks like an NCBI GEO series matrix; rename it or name the "
               "format (--format geo)");
}

/* The GEO series matrix: table, labels, annotations, detection by content. */
static void test_geo_good(void)
{
  g_autofree char *path = formats_test_write("any-name.txt", geo_fixture, -1);
  KnnwbReadInfo info;
  KnnwbMatrix *raw = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_read_matrix(path, NULL, &raw, &info, &error));
  g_assert_no_error(error);
  g_autoptr(KnnwbMatrix) m = raw;
  g_assert_cmpint(info.format, ==, KNNWB_INPUT_GEO);
  g_assert_cmpuint(m->n_rows, ==, 4);
  g_assert_cmpuint(m->n_cols, ==, 3);
  const float expected[] = {1.5f, 2.25f, -3, 0.125f, 4, 0.5f, 7, 8, 9, 10, 11, 12.5f};
  g_assert_cmpint(memcmp(m->values, expected, sizeof expected), ==, 0);
  const char *rows[] = {"1007_s_at", "1053_at", "117_at", "121_at"};
  for (size_t i = 0; i < 4; i++)
    g_assert_cmpstr(m->row_labels[i], ==, rows[i]);
  const char *samples[] = {"GSM11", "GSM12", "GSM13"};
  for (size_t j = 0; j < 3; j++)
    g_assert_cmpstr(m->col_labels[j], ==, samples[j]);

  const char *const *title = knnwb_matrix_annotation(m, KNNWB_MATRIX_COLUMNS, "Sample_title");
  g_assert_nonnull(title);
  g_assert_cmpstr(title[0], ==, "liver, rep 1");
  g_assert_cmpstr(title[2], ==, "liver rep 2");
  const char *const *tissue = knnwb_matrix_annotation(m, KNNWB_MATRIX_COLUMNS, "tissue");
  g_assert_nonnull(tissue);
  g_assert_cmpstr(tissue[0], ==, "liver");
  g_assert_cmpstr(tissue[1], ==, "brain");
  g_assert_cmpstr(tissue[2], ==, "liver");
  const char *const *age = knnwb_matrix_annotation(m, KNNWB_MATRIX_COLUMNS, "age");
  g_assert_cmpstr(age[0], ==, "5");
  g_assert_cmpstr(age[1], ==, "7");
  g_assert_null(age[2]); /* the third sample gives its sex on that line, not its age */
  const char *const *sex = knnwb_matrix_annotation(m, KNNWB_MATRIX_COLUMNS, "sex");
  g_assert_null(sex[0]);
  g_assert_cmpstr(sex[2], ==, "male");
  const char *const *second =
      knnwb_matrix_annotation(m, KNNWB_MATRIX_COLUMNS, "Sample_characteristics_ch1#2");
  g_assert_cmpstr(second[1], ==, "age: 7");
  g_assert_null(knnwb_matrix_annotation(m, KNNWB_MATRIX_COLUMNS, "Series_title"));
  g_assert_null(knnwb_matrix_annotation(m, KNNWB_MATRIX_ROWS, "tissue"));
  g_autofree const char **keys = knnwb_matrix_annotation_keys(m, KNNWB_MATRIX_COLUMNS);
  const char *expected_keys[] = {"Sample_title",
                                 "Sample_geo_accession",
                                 "Sample_characteristics_ch1",
                                 "tissue",
                                 "Sample_characteristics_ch1#2",
                                 "age",
                                 "sex",
                                 NULL};
  for (size_t k = 0; k < G_N_ELEMENTS(expected_keys); k++)
    g_assert_cmpstr(keys[k], ==, expected_keys[k]);

  /* Samples as points: the annotations follow them to the rows. */
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.transpose = TRUE;
  g_autoptr(KnnwbMatrix) t = read_or_fail(path, &options);
  g_assert_cmpuint(t->n_rows, ==, 3);
  g_assert_cmpstr(t->row_labels[1], ==, "GSM12");
  const char *const *row_tissue = knnwb_matrix_annotation(t, KNNWB_MATRIX_ROWS, "tissue");
  g_assert_nonnull(row_tissue);
  g_assert_cmpstr(row_tissue[1], ==, "brain");
  g_assert_null(knnwb_matrix_annotation(t, KNNWB_MATRIX_COLUMNS, "tissue"));

  /* Missing values: an error at the cell, or the row dropped (annotations untouched). */
  g_auto(GStrv) parts = g_strsplit(geo_fixture, "\"117_at\"\t7\t8\t9", 2);
  g_autofree char *fixed = g_strjoinv("\"117_at\"\t7\tnull\t9", parts);
  g_autofree char *missing = formats_test_write("missing_series_matrix.txt", fixed, -1);
  expect_error(missing, NULL, ":13:");
  options.transpose = FALSE;
  options.missing = KNNWB_MISSING_DROP_ROWS;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "*missing_series_matrix.txt: 1 row*row 2 (117_at)*line 13*");
  g_autoptr(KnnwbMatrix) dropped = read_or_fail(missing, &options);
  g_test_assert_expected_messages();
  g_assert_cmpuint(dropped->n_rows, ==, 4);
  g_assert_true(knnwb_matrix_row_is_absent(dropped, 2));
  g_assert_cmpstr(dropped->row_labels[3], ==, "121_at");
  g_assert_nonnull(knnwb_matrix_annotation(dropped, KNNWB_MATRIX_COLUMNS, "tissue"));
}

/* Malformed series matrices: each an error at its line. */
static void test_geo_malformed(void)
{
  static const struct {
    const char *name;
    const char *content;
    int line;
    const char *needle;
  } cases[] = {
      {"empty", "", 1, "empty"},
      {"no-table", "!Series_title\t\"x\"\n!Sample_title\t\"a\"\n", 2, "no data table"},
      {"stray-line", "!Series_title\t\"x\"\nhello\n!series_matrix_table_begin\n", 2,
       "expected a !Series_ or !Sample_ header line"},
      {"no-id-ref",
       "!Series_title\t\"x\"\n!series_matrix_table_begin\n\"probe\"\t\"GSM1\"\n\"p\"\t1\n"
       "!series_matrix_table_end\n",
       3, "ID_REF"},
      {"empty-table",
       "!Series_title\t\"x\"\n!series_matrix_table_begin\n!series_matrix_table_end\n", 3,
       "the data table is empty"},
      {"no-samples",
       "!Series_title\t\"x\"\n!series_matrix_table_begin\n\"ID_REF\"\n!series_matrix_table_end\n",
       3, "names no samples"},
      {"no-rows",
       "!Series_title\t\"x\"\n!series_matrix_table_begin\n\"ID_REF\"\t\"GSM1\"\n"
       "!series_matrix_table_end\n",
       4, "no rows"},
      {"truncated",
       "!Series_title\t\"x\"\n!series_matrix_table_begin\n\"ID_REF\"\t\"GSM1\"\t\"GSM2\"\n"
       "\"p1\"\t1\t2\n\"p2\"\t3\t4\n",
       5, "no !series_matrix_table_end"},
      {"short-row",
       "!Series_title\t\"x\"\n!series_matrix_table_begin\n\"ID_REF\"\t\"GSM1\"\t\"GSM2\"\n"
       "\"p1\"\t1\n!series_matrix_table_end\n",
       4, "field"},
      {"word",
       "!Series_title\t\"x\"\n!series_matrix_table_begin\n\"ID_REF\"\t\"GSM1\"\n\"p1\"\tabc\n"
       "!series_matrix_table_end\n",
       4, "not a number"},
      {"after-end",
       "!Series_title\t\"x\"\n!series_matrix_table_begin\n\"ID_REF\"\t\"GSM1\"\n\"p1\"\t1\n"
       "!series_matrix_table_end\n\"p2\"\t2\n",
       6, "text after !series_matrix_table_end"},
      {"sample-count",
       "!Series_title\t\"x\"\n!Sample_title\t\"a\"\t\"b\"\t\"c\"\n!series_matrix_table_begin\n"
       "\"ID_REF\"\t\"GSM1\"\t\"GSM2\"\n\"p1\"\t1\t2\n!series_matrix_table_end\n",
       2, "!Sample_title has 3 values but the table has 2 samples"},
      {"accession",
       "!Series_title\t\"x\"\n!Sample_geo_accession\t\"GSM1\"\t\"GSM9\"\n"
       "!series_matrix_table_begin\n\"ID_REF\"\t\"GSM1\"\t\"GSM2\"\n\"p1\"\t1\t2\n"
       "!series_matrix_table_end\n",
       2, "names sample 2 'GSM9' but the table's column 3 is 'GSM2'"},
      {"open-quote", "!Series_title\t\"x\"\n!Sample_title\t\"a\n!series_matrix_table_begin\n", 2,
       "quote"},
  };
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.format = KNNWB_INPUT_GEO;
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_test_message("case %s", cases[i].name);
    g_autofree char *name = g_strdup_printf("bad-%s_series_matrix.txt", cases[i].name);
    g_autofree char *path = formats_test_write(name, cases[i].content, -1);
    formats_test_expect_parse_error(path, &options, cases[i].line, cases[i].needle);
  }
}

/* A gzip file made of prefix then count copies of byte, compressed a MiB at a time (a bomb: the
 * file is about a thousandth of what it inflates to). */
static char *gzip_bomb(const char *name, const void *prefix, size_t prefix_length, char byte,
                       size_t count)
{
  z_stream stream = {0};
  g_assert_cmpint(deflateInit2(&stream, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), ==,
                  Z_OK);
  g_autofree char *chunk = g_malloc(1 << 20);
  memset(chunk, byte, 1 << 20);
  g_autofree unsigned char *out = g_malloc(1 << 20);
  g_autoptr(GByteArray) file = g_byte_array_new();
  for (size_t left = count + 1;;) {
    gboolean first = left == count + 1;
    size_t n = first ? prefix_length : MIN(left, (size_t)1 << 20);
    stream.next_in = first ? (Bytef *)prefix : (Bytef *)chunk;
    stream.avail_in = (uInt)n;
    left -= first ? 1 : n;
    int flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    int status;
    do {
      stream.next_out = out;
      stream.avail_out = 1 << 20;
      status = deflate(&stream, flush);
      g_byte_array_append(file, out, (1 << 20) - stream.avail_out);
    } while (stream.avail_out == 0 || (flush == Z_FINISH && status != Z_STREAM_END));
    if (left == 0)
      break;
  }
  deflateEnd(&stream);
  g_assert_cmpuint(file->len, <, count / 500 + 4096);
  return write_bytes(name, file);
}

/* The error of reading path in a child whose address space is capped at what it maps now plus
 * extra bytes (not under ASan, which reserves terabytes of shadow). */
static char *read_error_in_child(const char *path, guint64 extra)
{
  int pipe_fds[2];
  g_assert_cmpint(pipe(pipe_fds), ==, 0);
  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid == 0) {
    close(pipe_fds[0]);
#ifndef KNNWB_TEST_ASAN
    if (!knnwb_test_cap_address_space(extra))
      _exit(5);
#else
    (void)extra;
#endif
    KnnwbMatrix *matrix = NULL;
    GError *error = NULL;
    if (knnwb_formats_read_matrix(path, NULL, &matrix, NULL, &error))
      _exit(3);
    ssize_t written = write(pipe_fds[1], error->message, strlen(error->message));
    _exit(written > 0 ? 0 : 4);
  }
  close(pipe_fds[1]);
  GString *message = g_string_new(NULL);
  char buffer[512];
  ssize_t got;
  while ((got = read(pipe_fds[0], buffer, sizeof buffer)) > 0)
    g_string_append_len(message, buffer, got);
  close(pipe_fds[0]);
  int status = 0;
  g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
  g_test_message("%s: status %d: %s", path, status, message->str);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 0);
  return g_string_free(message, FALSE);
}

/* gzip bombs: an NPY whose small array is followed by 256 MiB of zeros fails at the first byte
 * past the array (before, the whole file was inflated into memory before the header was read),
 * one whose header claims more data than the compressed file can hold or a header of megabytes
 * is refused before anything is allocated; a text file inflating to gigabytes of blank lines
 * stops at twice the memory available (under a 64 MiB address-space cap: 128 MiB). Each child
 * runs in 64 MiB of address space above what it maps at the start. */
static void test_gzip_bombs(void)
{
  const guint64 headroom = (guint64)64 << 20;
  g_autoptr(GByteArray) small = npy_bytes(2, 3);
  g_autofree char *npy_bomb = gzip_bomb("bomb.npy.gz", small->data, small->len, 0, 256u << 20);
  g_autofree char *message = read_error_in_child(npy_bomb, headroom);
  g_assert_nonnull(strstr(message, "the decompressed data goes on after the (2, 3) array"));
  g_clear_pointer(&message, g_free);

  /* The header promises 10^10 floats; the file holds a few KiB. */
  GString *header = g_string_new("{'descr': '<f4', 'fortran_order': False, 'shape': (100000, "
                                 "100000), }");
  while ((10 + header->len + 1) % 64 != 0)
    g_string_append_c(header, ' ');
  g_string_append_c(header, '\n');
  g_autoptr(GByteArray) big = g_byte_array_new();
  g_byte_array_append(big, (const guint8 *)"\x93NUMPY\x01\x00", 8);
  guint8 length[2] = {(guint8)(header->len & 0xff), (guint8)(header->len >> 8)};
  g_byte_array_append(big, length, 2);
  g_byte_array_append(big, (const guint8 *)header->str, (guint)header->len);
  g_string_free(header, TRUE);
  g_autofree char *promise = gzip_bomb("promise.npy.gz", big->data, big->len, 0, 1 << 20);
  message = read_error_in_child(promise, headroom);
  g_assert_nonnull(strstr(message, "needs more bytes of data than the"));
  g_clear_pointer(&message, g_free);

  /* A version 2 header claiming 1 GiB of dictionary. */
  const guint8 v2[] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0, 0, 0, 0x40};
  g_autofree char *long_header = gzip_bomb("header.npy.gz", v2, sizeof v2, ' ', 4u << 20);
  message = read_error_in_child(long_header, headroom);
  g_assert_nonnull(strstr(message, "a compressed NPY header may have at most"));
  g_clear_pointer(&message, g_free);

#ifndef KNNWB_TEST_ASAN
  const char csv[] = "id,a,b\nr1,1,2\nr2,3,5\nr3,4,4\n";
  g_autofree char *text_bomb = gzip_bomb("bomb.csv.gz", csv, strlen(csv), '\n', 512u << 20);
  message = read_error_in_child(text_bomb, headroom);
  g_assert_nonnull(strstr(message, "decompresses to more than"));
  g_assert_nonnull(strstr(message, "twice the memory available"));
#endif
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/formats/inputs/gzip-every-format", test_gzip_every_format);
  g_test_add_func("/formats/inputs/gzip-large-and-members", test_gzip_large_and_members);
  g_test_add_func("/formats/inputs/read-cancel-and-progress", test_read_cancel_and_progress);
  g_test_add_func("/formats/inputs/gzip-damaged", test_gzip_damaged);
  g_test_add_func("/formats/inputs/gzip-bombs", test_gzip_bombs);
  g_test_add_func("/formats/inputs/wrong-format-messages", test_wrong_format_messages);
  g_test_add_func("/formats/inputs/geo-good", test_geo_good);
  g_test_add_func("/formats/inputs/geo-malformed", test_geo_malformed);
  return g_test_run();
}
