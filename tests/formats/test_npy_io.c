/*
 * The large-array paths of NPY input and `.npy` list output: a float32 NPY read on several
 * threads (each a range of whole 4 KiB units, 2 MiB pieces, the NaN/infinity check folded in) must
 * give the very matrix, the very errors and the very dropped rows that one thread gives, for sizes
 * that split into no whole number of units or pieces; a file cut short or an interruption while
 * it is read must fail as before. Arrays of other types (float64, float16, integers, the other
 * byte order) are converted on the reading threads: the same floats as a plain conversion, the
 * lowest float64 beyond the float range named whatever thread meets it, NaN found as for float32.
 * The two `.npy` list files, now written at once with early writeback, must hold exactly the header
 * and the raw lists, and a failed or interrupted write must leave the previous files and no
 * temporaries.
 */
#include "formats_test_util.h"

#include <errno.h>
#include <float.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <knnwb/knnwb.h>

static const int thread_counts[] = {1, 2, 3, 7, 0};

/* A float32 C-order NPY of rows x cols random values (subnormals, -0, huge ones among them) with
 * numpy's version 1 header; *values gets the data. */
static char *make_float_npy(const char *name, size_t rows, size_t cols, guint32 seed,
                            float **values)
{
  g_autoptr(GString) file = g_string_new(NULL);
  g_string_append_len(file, "\x93NUMPY\x01\x00\x00\x00", 10);
  g_string_append_printf(file, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }",
                         rows, cols);
  while ((file->len + 1) % 64 != 0)
    g_string_append_c(file, ' ');
  g_string_append_c(file, '\n');
  file->str[8] = (char)((file->len - 10) & 0xFF);
  file->str[9] = (char)((file->len - 10) >> 8);
  GRand *rand = g_rand_new_with_seed(seed);
  float *data = g_new(float, rows *cols);
  for (size_t i = 0; i < rows * cols; i++) {
    guint32 bits = g_rand_int(rand);
    if ((bits & 0x7f800000u) == 0x7f800000u) /* never NaN or infinite unless placed so */
      bits &= ~0x00800000u;
    memcpy(&data[i], &bits, 4);
  }
  g_rand_free(rand);
  g_string_append_len(file, (const char *)data, (gssize)(rows * cols * 4));
  char *path = formats_test_write(name, file->str, (gssize)file->len);
  *values = data;
  return path;
}

static KnnwbMatrix *read_with(const char *path, int n_threads, KnnwbMissingPolicy missing,
                              KnnwbReadInfo *info, GError **error)
{
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.n_threads = n_threads;
  options.missing = missing;
  KnnwbMatrix *matrix = NULL;
  KnnwbReadInfo local;
  if (!knnwb_formats_read_matrix(path, &options, &matrix, info ? info : &local, error))
    return NULL;
  return matrix;
}

/* Reading path with options succeeds: the matrix. */
static KnnwbMatrix *read_ok(const char *path, const KnnwbReadOptions *options, KnnwbReadInfo *info)
{
  KnnwbMatrix *matrix = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_read_matrix(path, options, &matrix, info, &error));
  g_assert_no_error(error);
  return matrix;
}

/* The message for a float64 beyond the float range at stored (row, col), counted from 0. */
static char *range_message(const char *path, size_t row, size_t col)
{
  return g_strdup_printf(
      "%s: row %zu, column %zu: the float64 value is beyond the float range (+-3.4e38)", path,
      row + 1, col + 1);
}

/* Two files of one shape read in turn on every thread count give their values (then freed, with
 * the paths): a byte left unread shows the other file's value when the allocator hands the freed
 * matrix back (or zero when it does not). */
static void assert_pair_read(char *paths[2], float *values[2], size_t rows, size_t cols)
{
  for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++)
    for (int f = 0; f < 2; f++) {
      g_autoptr(GError) error = NULL;
      g_autoptr(KnnwbMatrix) matrix =
          read_with(paths[f], thread_counts[t], KNNWB_MISSING_ERROR, NULL, &error);
      g_assert_no_error(error);
      g_assert_cmpuint(matrix->n_rows, ==, rows);
      g_assert_cmpuint(matrix->n_cols, ==, cols);
      g_assert_true(memcmp(matrix->values, values[f], rows * cols * 4) == 0);
    }
  for (int f = 0; f < 2; f++) {
    g_free(values[f]);
    g_free(paths[f]);
  }
}

/* Sizes that are no multiple of 4 KiB, of 2 MiB pieces or of the thread count: every thread's
 * range ends inside a unit or a piece somewhere. */
static void test_npy_threads_same_matrix(void)
{
  const size_t shapes[][2] = {{100003, 13}, {7, 5}, {262147, 9}, {1, 1048579}};
  for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++) {
    const size_t rows = shapes[s][0], cols = shapes[s][1];
    float *values[2] = {NULL, NULL};
    char *paths[2] = {make_float_npy("same-a.npy", rows, cols, 11 + (guint32)s, &values[0]),
                      make_float_npy("same-b.npy", rows, cols, 99 + (guint32)s, &values[1])};
    assert_pair_read(paths, values, rows, cols);
  }
}

/* One rank's block of rows is read from its own offset, on several threads too. */
static void test_npy_threads_block(void)
{
  const size_t rows = 300007, cols = 11;
  g_autofree float *values = NULL;
  g_autofree char *path = make_float_npy("block.npy", rows, cols, 5, &values);
  for (int block = 0; block < 3; block++) {
    size_t first, last;
    knnwb_knn_group_rows(rows, block, 3, &first, &last);
    for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
      KnnwbReadOptions options;
      knnwb_formats_read_options_init(&options);
      options.n_threads = thread_counts[t];
      options.block_index = block;
      options.block_count = 3;
      KnnwbReadInfo info;
      KnnwbMatrix *matrix = read_ok(path, &options, &info);
      g_assert_true(info.block_read);
      g_assert_cmpuint(matrix->n_rows, ==, last - first);
      g_assert_true(memcmp(matrix->values, values + first * cols, (last - first) * cols * 4) == 0);
      knnwb_matrix_free(matrix);
    }
  }
}

/* Reading path with options fails with code and exactly message. */
static void assert_read_error(const char *path, const KnnwbReadOptions *options, int code,
                              const char *message)
{
  KnnwbMatrix *matrix = NULL;
  KnnwbReadInfo info;
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_formats_read_matrix(path, options, &matrix, &info, &error));
  g_assert_null(matrix);
  g_assert_error(error, KNNWB_ERROR, code);
  g_assert_cmpstr(error->message, ==, message);
}

/* An NPY with a labels side file is read by rows too: each block gets its rows and their labels
 * (a plain side file above the parallel threshold as well, read on threads); a side file that
 * names one row too few is not the array's (no labels, a warning), and one given with --labels
 * that does is an error that says so, as for the whole file. */
static void test_npy_block_labels(void)
{
  const size_t rows = 1003, cols = 3;
  g_autofree float *values = NULL;
  g_autofree char *path = make_float_npy("block-labels.npy", rows, cols, 7, &values);
  g_autofree char *side = knnwb_formats_npy_labels_path(path);
  g_autoptr(GString) text = g_string_new(NULL);
  for (size_t i = 0; i < rows; i++)
    g_string_append_printf(text, "cell-%zu\n", i * 7);
  g_assert_true(g_file_set_contents(side, text->str, (gssize)text->len, NULL));
  const char *parallel[] = {"1", "1048576"}; /* every size on threads, or the line reader */
  for (size_t w = 0; w < G_N_ELEMENTS(parallel); w++) {
    g_setenv("KNNWB_LABELS_PARALLEL_BYTES", parallel[w], TRUE);
    for (int block = 0; block < 3; block++) {
      size_t first, last;
      knnwb_knn_group_rows(rows, block, 3, &first, &last);
      KnnwbReadOptions options;
      knnwb_formats_read_options_init(&options);
      options.block_index = block;
      options.block_count = 3;
      KnnwbReadInfo info;
      KnnwbMatrix *matrix = read_ok(path, &options, &info);
      g_assert_true(info.block_read);
      g_assert_cmpuint(info.first_row, ==, first);
      g_assert_cmpuint(matrix->n_rows, ==, last - first);
      g_assert_true(memcmp(matrix->values, values + first * cols, (last - first) * cols * 4) == 0);
      g_assert_nonnull(matrix->row_labels);
      for (size_t i = 0; i < last - first; i++) {
        g_autofree char *want = g_strdup_printf("cell-%zu", (first + i) * 7);
        g_assert_cmpstr(knnwb_matrix_row_label(matrix, i), ==, want);
      }
      knnwb_matrix_free(matrix);
    }
  }
  g_unsetenv("KNNWB_LABELS_PARALLEL_BYTES");
  /* One label short: beside the array, a warning and no labels; given, an error. */
  const char *newline = strrchr(text->str, 'c');
  g_assert_true(g_file_set_contents(side, text->str, newline - text->str, NULL));
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.block_index = 1;
  options.block_count = 3;
  KnnwbReadInfo info;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING, "*the labels beside it are not its rows'*");
  KnnwbMatrix *matrix = read_ok(path, &options, &info);
  g_test_assert_expected_messages();
  g_assert_true(info.block_read);
  g_assert_null(matrix->row_labels);
  knnwb_matrix_free(matrix);
  options.labels_path = side;
  g_autofree char *message =
      g_strdup_printf("%s:1002: 1002 labels for 1003 rows (one label per line)", side);
  assert_read_error(path, &options, KNNWB_ERROR_PARSE, message);
  g_unlink(side);
  g_unlink(path);
}

/* Every thread count fails on the NaN (or the infinity) that is item place, with the message one
 * thread gives, which names its row and column. */
static void assert_missing_error(const char *path, size_t place, size_t cols, gboolean nan)
{
  g_autofree char *expected = g_strdup_printf(
      "%s: row %zu, column %zu: %s; clean the array, or choose the policy that drops rows with "
      "missing values",
      path, place / cols + 1, place % cols + 1, nan ? "NaN" : "infinite value");
  for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
    KnnwbReadOptions options;
    knnwb_formats_read_options_init(&options);
    options.n_threads = thread_counts[t];
    assert_read_error(path, &options, KNNWB_ERROR_PARSE, expected);
  }
}

/* A NaN or an infinity anywhere (the first value, the last, on a range's edge for some thread
 * count) is found. */
static void test_npy_threads_missing_error(void)
{
  const size_t rows = 120011, cols = 7, count = rows * cols;
  const size_t places[] = {0, count - 1, count / 2, count / 3, 1024 * 5 + 3, count - 1025};
  for (size_t p = 0; p < G_N_ELEMENTS(places); p++) {
    g_autofree float *values = NULL;
    g_autofree char *path = make_float_npy("missing.npy", rows, cols, 3, &values);
    values[places[p]] = p % 2 == 0 ? NAN : -INFINITY;
    /* rewrite the data after the 128-byte header */
    g_autofree char *bytes = NULL;
    gsize length = 0;
    g_assert_true(g_file_get_contents(path, &bytes, &length, NULL));
    memcpy(bytes + 128, values, count * 4);
    g_assert_true(g_file_set_contents(path, bytes, (gssize)length, NULL));
    assert_missing_error(path, places[p], cols, p % 2 == 0);
  }
}

/* Dropping rows: the same rows absent (with zeros), the rest as stored, for every thread count. */
static void test_npy_threads_drop_rows(void)
{
  const size_t rows = 150001, cols = 9;
  g_autofree float *values = NULL;
  g_autofree char *path = make_float_npy("drop.npy", rows, cols, 9, &values);
  const size_t bad_rows[] = {0, 4095, 75000, rows - 1};
  for (size_t b = 0; b < G_N_ELEMENTS(bad_rows); b++)
    values[bad_rows[b] * cols + b % cols] = b % 2 ? INFINITY : NAN;
  g_autofree char *bytes = NULL;
  gsize length = 0;
  g_assert_true(g_file_get_contents(path, &bytes, &length, NULL));
  memcpy(bytes + 128, values, rows * cols * 4);
  g_assert_true(g_file_set_contents(path, bytes, (gssize)length, NULL));
  for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
    g_autoptr(GError) error = NULL;
    KnnwbReadInfo info;
    g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                          "*4 rows with missing values*rows 0, 4095, 75000, 150000*");
    g_autoptr(KnnwbMatrix) matrix =
        read_with(path, thread_counts[t], KNNWB_MISSING_DROP_ROWS, &info, &error);
    g_test_assert_expected_messages();
    g_assert_no_error(error);
    g_assert_cmpuint(info.n_dropped_rows, ==, G_N_ELEMENTS(bad_rows));
    g_assert_cmpuint(info.first_dropped_line, ==, 1);
    g_assert_cmpuint(matrix->n_absent_rows, ==, G_N_ELEMENTS(bad_rows));
    size_t b = 0;
    for (size_t r = 0; r < rows; r++) {
      const gboolean bad = b < G_N_ELEMENTS(bad_rows) && bad_rows[b] == r;
      g_assert_cmpint(knnwb_matrix_row_is_absent(matrix, r), ==, bad);
      for (size_t c = 0; c < cols && bad; c++)
        g_assert_cmpfloat(matrix->values[r * cols + c], ==, 0.0f);
      if (!bad)
        g_assert_true(memcmp(matrix->values + r * cols, values + r * cols, cols * 4) == 0);
      b += bad;
    }
  }
}

/* A file shorter than its header says fails before any data is read, as it always did. */
static void test_npy_threads_truncated(void)
{
  g_autofree float *values = NULL;
  g_autofree char *path = make_float_npy("short.npy", 200003, 5, 2, &values);
  g_assert_cmpint(truncate(path, 128 + 200003 * 5 * 4 - 4099), ==, 0);
  for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
    g_autoptr(GError) error = NULL;
    KnnwbMatrix *matrix = read_with(path, thread_counts[t], KNNWB_MISSING_ERROR, NULL, &error);
    g_assert_null(matrix);
    g_autofree char *expected =
        g_strdup_printf("%s: the shape (200003, 5) needs more bytes of data but the file has "
                        "3995961 after the header (truncated?)",
                        path);
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
    g_assert_cmpstr(error->message, ==, expected);
  }
}

/* ---- other item types, converted on the reading threads ---- */

/* A stored item type: numpy's descr without its byte order, the item's size, and that order. */
typedef struct {
  const char *descr;
  size_t size;
  gboolean big_endian;
} ItemType;

static const ItemType item_types[] = {{"f8", 8, FALSE}, {"f2", 2, FALSE}, {"i4", 4, FALSE},
                                      {"u1", 1, FALSE}, {"i8", 8, FALSE}, {"f4", 4, TRUE},
                                      {"f8", 8, TRUE}};
static const ItemType float64 = {"f8", 8, FALSE};

static gboolean is_type(const ItemType *type, const char *descr)
{
  return strcmp(type->descr, descr) == 0;
}

/* A random finite item of the type as the host's bits, over the type's whole range (doubles from
 * below float's subnormals to near its largest, -0 among them). */
static guint64 random_item(GRand *rand, const ItemType *type, size_t i)
{
  if (is_type(type, "f8")) {
    double value = i % 97 == 3 ? -0.0
                               : ldexp(g_rand_double_range(rand, -1.0, 1.0),
                                       g_rand_int_range(rand, -160, 128));
    guint64 bits;
    memcpy(&bits, &value, 8);
    return bits;
  }
  guint64 bits = (guint64)g_rand_int(rand) << 32 | g_rand_int(rand);
  if (is_type(type, "f2") && (bits & 0x7c00u) == 0x7c00u)
    bits &= ~(guint64)0x0400u;
  if (is_type(type, "f4") && (bits & 0x7f800000u) == 0x7f800000u)
    bits &= ~(guint64)0x00800000u;
  return type->size == 8 ? bits : bits & ((G_GUINT64_CONSTANT(1) << (8 * type->size)) - 1);
}

/* The float an item must become, computed plainly (half precision from its definition). */
static float reference_float(const ItemType *type, guint64 bits)
{
  if (is_type(type, "f8")) {
    double value;
    memcpy(&value, &bits, 8);
    return (float)value;
  }
  if (is_type(type, "f4")) {
    guint32 narrow = (guint32)bits;
    float value;
    memcpy(&value, &narrow, 4);
    return value;
  }
  if (is_type(type, "f2")) {
    int exponent = (int)(bits >> 10 & 0x1f), mantissa = (int)(bits & 0x3ff);
    float magnitude = exponent == 0 ? ldexpf((float)mantissa, -24)
                                    : ldexpf((float)(mantissa + 1024), exponent - 25);
    return (bits & 0x8000u) != 0 ? -magnitude : magnitude;
  }
  if (is_type(type, "i4"))
    return (float)(gint32)(guint32)bits;
  if (is_type(type, "i8"))
    return (float)(gint64)bits;
  return (float)bits; /* u1 */
}

/* A C-order NPY of rows x cols random items of the type, in the type's byte order whatever the
 * host's, with the bits placed[p] at item places[p]; *floats gets what the reader must give. */
static char *make_item_npy(const char *name, const ItemType *type, size_t rows, size_t cols,
                           guint32 seed, const size_t *places, const guint64 *placed,
                           size_t n_placed, float **floats)
{
  const size_t count = rows * cols;
  g_autoptr(GString) file = knnwb_formats_npy_header(type->descr, rows, cols);
  /* The dictionary follows a 10-byte preamble (which holds a NUL). */
  strstr(file->str + 10, "'descr': '")[10] = type->big_endian ? '>' : '<';
  const size_t data_at = file->len;
  g_string_set_size(file, data_at + count * type->size);
  GRand *rand = g_rand_new_with_seed(seed);
  float *expected = g_new(float, count);
  for (size_t i = 0; i < count; i++) {
    guint64 bits = random_item(rand, type, i);
    for (size_t p = 0; p < n_placed; p++)
      bits = places[p] == i ? placed[p] : bits;
    expected[i] = reference_float(type, bits);
    unsigned char *item = (unsigned char *)file->str + data_at + i * type->size;
    for (size_t b = 0; b < type->size; b++)
      item[type->big_endian ? type->size - 1 - b : b] = (unsigned char)(bits >> (8 * b));
  }
  g_rand_free(rand);
  *floats = expected;
  return formats_test_write(name, file->str, (gssize)file->len);
}

static guint64 double_bits(double value)
{
  guint64 bits;
  memcpy(&bits, &value, 8);
  return bits;
}

/* Every type, on shapes that split into no whole number of pages, pieces or threads, gives the
 * plainly converted floats for every thread count. */
static void test_npy_convert_same_matrix(void)
{
  const size_t shapes[][2] = {{3001, 7}, {1, 1}, {7, 5}, {200003, 9}, {1, 262147}};
  for (size_t y = 0; y < G_N_ELEMENTS(item_types); y++)
    for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++) {
      const size_t rows = shapes[s][0], cols = shapes[s][1];
      float *expected[2] = {NULL, NULL};
      char *paths[2];
      for (int f = 0; f < 2; f++)
        paths[f] = make_item_npy(f == 0 ? "convert-a.npy" : "convert-b.npy", &item_types[y], rows,
                                 cols, (guint32)(7 * y + s + 100 * f), NULL, NULL, 0, &expected[f]);
      assert_pair_read(paths, expected, rows, cols);
    }
}

/* Holds the calling thread (the one that reads the first range) after its first piece, so that
 * the threads above it meet their own errors first. */
static void hold_first_range(uint64_t done, uint64_t total, void *data)
{
  (void)done;
  (void)total;
  int *calls = data;
  if ((*calls)++ == 0)
    g_usleep(200000);
}

/* float64 values beyond the float range in several threads' ranges: the message names the lowest,
 * past the first piece of the first range, even when the ranges above meet theirs first. */
static void test_npy_convert_lowest_out_of_range(void)
{
  const size_t rows = 200003, cols = 9, count = rows * cols;
  const size_t places[] = {300001, 1349633, count - 7};
  const guint64 placed[] = {double_bits(-5e38), double_bits(1e39), double_bits(DBL_MAX)};
  g_autofree float *expected = NULL;
  g_autofree char *path = make_item_npy("range.npy", &float64, rows, cols, 8, places, placed,
                                        G_N_ELEMENTS(places), &expected);
  g_autofree char *message = range_message(path, places[0] / cols, places[0] % cols);
  for (int n_threads = 1; n_threads <= 4; n_threads++) {
    int calls = 0;
    KnnwbReadOptions options;
    knnwb_formats_read_options_init(&options);
    options.n_threads = n_threads;
    options.progress = hold_first_range;
    options.progress_data = &calls;
    assert_read_error(path, &options, KNNWB_ERROR_PARSE, message);
  }
}

/* One rank's block of a float64 array is converted on threads too: its rows only, and a value
 * beyond the float range named by its row in the whole file; the other blocks do not see it. */
static void test_npy_convert_block(void)
{
  const size_t rows = 300007, cols = 11, place = 150001 * cols + 4; /* in the middle block */
  const guint64 placed = double_bits(4e38);
  g_autofree float *expected = NULL;
  g_autofree char *path =
      make_item_npy("block64.npy", &float64, rows, cols, 6, &place, &placed, 1, &expected);
  g_autofree char *message = range_message(path, place / cols, place % cols);
  for (int block = 0; block < 3; block++)
    for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
      size_t first, last;
      knnwb_knn_group_rows(rows, block, 3, &first, &last);
      KnnwbReadOptions options;
      knnwb_formats_read_options_init(&options);
      options.n_threads = thread_counts[t];
      options.block_index = block;
      options.block_count = 3;
      if (block == 1) {
        assert_read_error(path, &options, KNNWB_ERROR_PARSE, message);
        continue;
      }
      KnnwbReadInfo info;
      KnnwbMatrix *matrix = read_ok(path, &options, &info);
      g_assert_true(info.block_read);
      g_assert_cmpuint(matrix->n_rows, ==, last - first);
      g_assert_true(memcmp(matrix->values, expected + first * cols, (last - first) * cols * 4) ==
                    0);
      knnwb_matrix_free(matrix);
    }
}

/* Marks an NPY written by make_item_npy as Fortran order: its data is then the C order of the
 * transpose, which a read with transpose wants. */
static void make_fortran(const char *path)
{
  g_autofree char *bytes = NULL;
  gsize length = 0;
  g_assert_true(g_file_get_contents(path, &bytes, &length, NULL));
  char *order = strstr(bytes + 10, "'fortran_order': False");
  memcpy(order, "'fortran_order': True ", strlen("'fortran_order': True "));
  g_assert_true(g_file_set_contents(path, bytes, (gssize)length, NULL));
}

/* A Fortran-order float64 read transposed is in the wanted order too: the same floats on every
 * thread count, and an out-of-range value named by its stored row and column; read as it is, it
 * is transposed into C order. */
static void test_npy_convert_fortran_transposed(void)
{
  const size_t rows = 200003, cols = 9, place = 1234567;
  const guint64 placed = double_bits(-1e300);
  for (int bad = 0; bad < 2; bad++) {
    g_autofree float *expected = NULL;
    g_autofree char *path = make_item_npy("fortran.npy", &float64, rows, cols, 12, &place, &placed,
                                          bad ? 1 : 0, &expected);
    make_fortran(path);
    g_autofree char *message = range_message(path, place % rows, place / rows);
    for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
      KnnwbReadOptions options;
      knnwb_formats_read_options_init(&options);
      options.n_threads = thread_counts[t];
      options.transpose = TRUE;
      if (bad) {
        assert_read_error(path, &options, KNNWB_ERROR_PARSE, message);
        continue;
      }
      KnnwbReadInfo info;
      KnnwbMatrix *matrix = read_ok(path, &options, &info);
      g_assert_cmpuint(matrix->n_rows, ==, cols);
      g_assert_true(memcmp(matrix->values, expected, rows * cols * 4) == 0);
      knnwb_matrix_free(matrix);
      /* Not transposed, it is the other order: transposed in memory, by the one-thread path. */
      options.transpose = FALSE;
      matrix = read_ok(path, &options, &info);
      g_assert_cmpuint(matrix->n_rows, ==, rows);
      for (size_t k = 0; k < rows * cols; k++)
        g_assert_true(memcmp(&matrix->values[k % rows * cols + k / rows], &expected[k], 4) == 0);
      knnwb_matrix_free(matrix);
    }
  }
}

/* NaN and infinity among converted values (float64 of either byte order, float16): found with
 * the message that names their row and column, or their rows dropped, for every thread count. */
static void test_npy_convert_missing(void)
{
  const size_t rows = 120011, cols = 7, count = rows * cols;
  const size_t places[] = {0, count - 1, count / 2, count / 3, 1024 * 5 + 3, count - 1025};
  const ItemType types[] = {{"f8", 8, FALSE}, {"f8", 8, TRUE}, {"f2", 2, FALSE}};
  for (size_t y = 0; y < G_N_ELEMENTS(types); y++)
    for (size_t p = 0; p < G_N_ELEMENTS(places); p++) {
      const gboolean nan = p % 2 == 0, half = is_type(&types[y], "f2");
      const guint64 bits = half ? (nan ? 0x7e00u : 0xfc00u) : double_bits(nan ? NAN : -INFINITY);
      g_autofree float *expected = NULL;
      g_autofree char *path =
          make_item_npy("missing.npy", &types[y], rows, cols, 3, &places[p], &bits, 1, &expected);
      assert_missing_error(path, places[p], cols, nan);
    }
  /* Dropped: the rows holding them absent, the others as converted. */
  const size_t bad[] = {0, 4095 * cols + 2, 75000 * cols + 6, count - 1};
  const guint64 bits[] = {double_bits(NAN), double_bits(INFINITY), double_bits(-NAN),
                          double_bits(-INFINITY)};
  g_autofree float *expected = NULL;
  g_autofree char *path =
      make_item_npy("drop.npy", &float64, rows, cols, 4, bad, bits, G_N_ELEMENTS(bad), &expected);
  for (size_t t = 0; t < G_N_ELEMENTS(thread_counts); t++) {
    g_autoptr(GError) error = NULL;
    KnnwbReadInfo info;
    g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING, "*4 rows with missing values*");
    g_autoptr(KnnwbMatrix) matrix =
        read_with(path, thread_counts[t], KNNWB_MISSING_DROP_ROWS, &info, &error);
    g_test_assert_expected_messages();
    g_assert_no_error(error);
    g_assert_cmpuint(info.n_dropped_rows, ==, G_N_ELEMENTS(bad));
    for (size_t r = 0, b = 0; r < rows; r++) {
      const gboolean absent = b < G_N_ELEMENTS(bad) && bad[b] / cols == r;
      g_assert_cmpint(knnwb_matrix_row_is_absent(matrix, r), ==, absent);
      if (!absent)
        g_assert_true(memcmp(matrix->values + r * cols, expected + r * cols, cols * 4) == 0);
      b += absent;
    }
  }
}

/* What the progress callback does to the file or the run while it is being read. */
typedef struct {
  const char *path;
  volatile gint cancel;
  gboolean truncate;
  int calls;
} ReadMeddler;

static void meddle(uint64_t done, uint64_t total, void *data)
{
  (void)done;
  (void)total;
  ReadMeddler *meddler = data;
  if (meddler->calls++ > 0)
    return;
  if (meddler->truncate)
    g_assert_cmpint(truncate(meddler->path, 1 << 20), ==, 0);
  else
    g_atomic_int_set(&meddler->cancel, 1);
}

/* A file cut short while it is read (the callback runs after the first 2 MiB piece, and every
 * thread's range has more) fails with the read error; an interruption stops the read. float32 is
 * read in place, float64 converted. */
static void test_npy_threads_changed_while_read(void)
{
  const size_t rows = 1000003, cols = 6; /* 24 MB: 3 threads' ranges of 4 pieces each */
  for (int truncating = 0; truncating < 2; truncating++)
    for (int n_threads = 1; n_threads <= 3; n_threads++) {
      g_autofree float *values = NULL;
      g_autofree char *path =
          n_threads == 2
              ? make_item_npy("changed.npy", &float64, rows, cols, 1, NULL, NULL, 0, &values)
              : make_float_npy("changed.npy", rows, cols, 1, &values);
      ReadMeddler meddler = {.path = path, .truncate = truncating};
      KnnwbReadOptions options;
      knnwb_formats_read_options_init(&options);
      options.n_threads = n_threads;
      options.cancel = &meddler.cancel;
      options.progress = meddle;
      options.progress_data = &meddler;
      KnnwbMatrix *matrix = NULL;
      g_autoptr(GError) error = NULL;
      g_assert_false(knnwb_formats_read_matrix(path, &options, &matrix, NULL, &error));
      g_assert_null(matrix);
      g_autofree char *expected =
          truncating ? g_strdup_printf("%s: read failed: it ended early (was the file rewritten "
                                       "while knnwb read it?)",
                                       path)
                     : g_strdup_printf("%s: interrupted while reading", path);
      const int code = truncating ? KNNWB_ERROR_IO : KNNWB_ERROR_CANCELLED;
      g_assert_error(error, KNNWB_ERROR, code);
      g_assert_cmpstr(error->message, ==, expected);
    }
}

/* ---- .npy lists ---- */

static KnnwbNeighbors *make_lists(size_t n, size_t k)
{
  KnnwbNeighbors *nb = g_new0(KnnwbNeighbors, 1);
  nb->n_queries = n;
  nb->k = k;
  nb->indices = g_new(int64_t, n * k);
  nb->distances = g_new(double, n *k);
  nb->n_found = g_new(int32_t, n);
  GRand *rand = g_rand_new_with_seed(17);
  for (size_t i = 0; i < n; i++) {
    nb->n_found[i] = (int32_t)(i % 97 == 5 ? k - 1 : k);
    for (size_t r = 0; r < k; r++) {
      const gboolean unused = r >= (size_t)nb->n_found[i];
      nb->indices[i * k + r] = unused ? -1 : (int64_t)g_rand_int_range(rand, 0, (gint32)n);
      nb->distances[i * k + r] = unused ? INFINITY : g_rand_double(rand) * 1e3;
    }
  }
  g_rand_free(rand);
  return nb;
}

static void free_lists(KnnwbNeighbors *nb)
{
  g_free(nb->indices);
  g_free(nb->distances);
  g_free(nb->n_found);
  g_free(nb);
}

/* The file holds numpy's version 1 header of an (n, k) array of descr, then the raw data. */
static void assert_npy_file_item(const char *path, const char *descr, size_t n, size_t k,
                                 size_t item, const void *data)
{
  g_autofree char *bytes = NULL;
  gsize length = 0;
  g_assert_true(g_file_get_contents(path, &bytes, &length, NULL));
  g_autofree char *dict = g_strdup_printf(
      "{'descr': '<%s', 'fortran_order': False, 'shape': (%zu, %zu), }", descr, n, k);
  const size_t header = 128;
  g_assert_cmpuint(length, ==, header + n * k * item);
  g_assert_true(memcmp(bytes, "\x93NUMPY\x01\x00\x76\x00", 10) == 0);
  g_assert_true(memcmp(bytes + 10, dict, strlen(dict)) == 0);
  for (size_t i = 10 + strlen(dict); i < header - 1; i++)
    g_assert_cmpint(bytes[i], ==, ' ');
  g_assert_cmpint(bytes[header - 1], ==, '\n');
  g_assert_true(memcmp(bytes + header, data, n * k * item) == 0);
}

static void assert_npy_file(const char *path, const char *descr, size_t n, size_t k,
                            const void *data)
{
  assert_npy_file_item(path, descr, n, k, 8, data);
}

/* Sizes of no whole number of 16 MiB blocks (and one of exactly one block, one of five and a
 * tail), by one writing thread and by two: the same bytes. */
static void test_npy_lists_bytes(void)
{
  const size_t shapes[][2] = {{1048583, 3}, {3, 2}, {262144, 8}, {999983, 5}, {2100001, 5}};
  g_autofree char *path = g_build_filename(formats_test_dir(), "lists.npy", NULL);
  g_autofree char *side = knnwb_formats_side_path(path, KNNWB_OUTPUT_NPY);
  for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++)
    for (int threads = 0; threads <= 2; threads++) {
      KnnwbNeighbors *nb = make_lists(shapes[s][0], shapes[s][1]);
      KnnwbWriteControl control = {.n_threads = threads};
      g_autoptr(GError) error = NULL;
      g_assert_true(knnwb_formats_write_lists(path, KNNWB_OUTPUT_NPY, nb, NULL, &control, &error));
      assert_npy_file(path, "i8", nb->n_queries, nb->k, nb->indices);
      assert_npy_file(side, "f8", nb->n_queries, nb->k, nb->distances);
      free_lists(nb);
    }
  g_unlink(path);
  g_unlink(side);
}

typedef struct {
  volatile gint cancel;
  gboolean cancel_at_quarter;
  uint64_t last;
  uint64_t total;
  gboolean backwards;
} WriteWatch;

static void watch_write(uint64_t done, uint64_t total, void *data)
{
  WriteWatch *watch = data;
  watch->backwards |= done < watch->last || done > total;
  watch->last = done;
  watch->total = total;
  if (watch->cancel_at_quarter && done >= total / 4)
    g_atomic_int_set(&watch->cancel, 1);
}

/* Writing the lists (with labels, or NULL) on threads fails because the distances' path is a
 * directory, with the message that says so. */
static void assert_distances_refused(const char *path, const char *side, const KnnwbNeighbors *nb,
                                     const char *const *labels, int threads)
{
  KnnwbWriteControl control = {.n_threads = threads};
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_formats_write_lists(path, KNNWB_OUTPUT_NPY, nb, labels, &control, &error));
  g_autofree char *expected =
      g_strdup_printf("%s: exists and is not a regular file; write to a file path instead", side);
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_IO);
  g_assert_cmpstr(error->message, ==, expected);
}

/* Progress goes forward to the total of both arrays; an interruption half-way leaves the previous
 * files as they were and no temporary behind, whatever the threads. */
static void test_npy_lists_interrupted(void)
{
  g_autofree char *dir = g_build_filename(formats_test_dir(), "interrupted", NULL);
  g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
  g_autofree char *path = g_build_filename(dir, "g.npy", NULL);
  g_autofree char *side = knnwb_formats_side_path(path, KNNWB_OUTPUT_NPY);
  KnnwbNeighbors *nb = make_lists(1500007, 4); /* 48 MB per array: 3 blocks and a tail */
  /* one and two writers, with 64-bit lists and with 32-bit ones (24 MB an array, narrowed) */
  for (int variant = 0; variant < 4; variant++) {
    const int threads = 1 + variant % 2;
    const KnnwbListsDtype dtype = variant < 2 ? KNNWB_LISTS_DTYPE_64 : KNNWB_LISTS_DTYPE_32;
    const uint64_t item = dtype == KNNWB_LISTS_DTYPE_32 ? 4 : 8;
    WriteWatch full = {0};
    KnnwbWriteControl control = {.n_threads = threads,
                                 .progress = watch_write,
                                 .progress_data = &full,
                                 .lists_dtype = dtype};
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_formats_write_lists(path, KNNWB_OUTPUT_NPY, nb, NULL, &control, &error));
    g_assert_false(full.backwards);
    g_assert_cmpuint(full.last, ==, 2 * (uint64_t)nb->n_queries * nb->k * item);
    g_assert_cmpuint(full.total, ==, full.last);
    g_assert_true(g_file_set_contents(path, "old indices", -1, NULL));
    g_assert_true(g_file_set_contents(side, "old distances", -1, NULL));
    WriteWatch watch = {.cancel_at_quarter = TRUE};
    control = (KnnwbWriteControl){.n_threads = threads,
                                  .cancel = &watch.cancel,
                                  .progress = watch_write,
                                  .progress_data = &watch,
                                  .lists_dtype = dtype};
    g_assert_false(knnwb_formats_write_lists(path, KNNWB_OUTPUT_NPY, nb, NULL, &control, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
    g_autofree char *expected = g_strdup_printf("%s: interrupted while writing", path);
    g_assert_cmpstr(error->message, ==, expected);
    g_autofree char *indices = NULL, *distances = NULL;
    g_assert_true(g_file_get_contents(path, &indices, NULL, NULL));
    g_assert_true(g_file_get_contents(side, &distances, NULL, NULL));
    g_assert_cmpstr(indices, ==, "old indices");
    g_assert_cmpstr(distances, ==, "old distances");
    g_assert_cmpuint(formats_test_count_entries(dir), ==, 2);
  }
  /* The distances cannot be written (a directory has their name): the indices' writer stops too,
   * and nothing changes. */
  g_unlink(side);
  g_assert_cmpint(g_mkdir(side, 0755), ==, 0);
  for (int threads = 1; threads <= 2; threads++) {
    assert_distances_refused(path, side, nb, NULL, threads);
    g_autofree char *indices = NULL;
    g_assert_true(g_file_get_contents(path, &indices, NULL, NULL));
    g_assert_cmpstr(indices, ==, "old indices");
    g_assert_cmpuint(formats_test_count_entries(dir), ==, 2);
  }
  g_rmdir(side);
  g_unlink(path);
  g_rmdir(dir);
  free_lists(nb);
}

/* The labels side file is written beside the two arrays, each file by a thread of its own: one
 * label a line (an empty one where a row has none, a label longer than the writer's 1 MiB blocks
 * whole) on one, two and three threads. A label with a line break stops every writer: the
 * labels' error, the previous files as they were and no temporary left; a failing array leaves the
 * previous labels file too. */
static void test_npy_lists_labels(void)
{
  g_autofree char *dir = g_build_filename(formats_test_dir(), "labelled", NULL);
  g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
  g_autofree char *path = g_build_filename(dir, "g.npy", NULL);
  g_autofree char *side = knnwb_formats_side_path(path, KNNWB_OUTPUT_NPY);
  g_autofree char *labels_path = knnwb_formats_npy_labels_path(path);
  const size_t n = 300007;
  KnnwbNeighbors *nb = make_lists(n, 3);
  g_autoptr(GPtrArray) labels = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GString) expected = g_string_new(NULL);
  for (size_t i = 0; i < n; i++) {
    char *label = i % 1000 == 3 ? NULL
                  : i == 150001 ? g_strnfill(3 << 20, 'x')
                                : g_strdup_printf("gene%zu*probe%zu", i, n - i);
    g_ptr_array_add(labels, label);
    g_string_append_printf(expected, "%s\n", label != NULL ? label : "");
  }
  const char *const *names = (const char *const *)labels->pdata;
  for (int threads = 1; threads <= 3; threads++) {
    KnnwbWriteControl control = {.n_threads = threads};
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_formats_write_lists(path, KNNWB_OUTPUT_NPY, nb, names, &control, &error));
    assert_npy_file(path, "i8", n, 3, nb->indices);
    assert_npy_file(side, "f8", n, 3, nb->distances);
    g_autofree char *text = NULL;
    gsize length = 0;
    g_assert_true(g_file_get_contents(labels_path, &text, &length, NULL));
    g_assert_cmpuint(length, ==, expected->len);
    g_assert_true(memcmp(text, expected->str, length) == 0);
  }
  g_free(labels->pdata[n - 2]);
  labels->pdata[n - 2] = g_strdup("two\rlines");
  for (int threads = 1; threads <= 3; threads++) {
    g_assert_true(g_file_set_contents(path, "old indices", -1, NULL));
    KnnwbWriteControl control = {.n_threads = threads};
    g_autoptr(GError) error = NULL;
    g_assert_false(knnwb_formats_write_lists(path, KNNWB_OUTPUT_NPY, nb, names, &control, &error));
    g_autofree char *message = g_strdup_printf(
        "%s: row %zu's label holds a line break; a labels file has one label per line", labels_path,
        n - 2);
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
    g_assert_cmpstr(error->message, ==, message);
    g_autofree char *indices = NULL;
    g_assert_true(g_file_get_contents(path, &indices, NULL, NULL));
    g_assert_cmpstr(indices, ==, "old indices");
    assert_npy_file(side, "f8", n, 3, nb->distances);
    g_assert_cmpuint(formats_test_count_entries(dir), ==, 3);
  }
  /* Good labels, but the distances cannot be written (a directory has their name): that error,
   * and the labels file as it was. */
  g_free(labels->pdata[n - 2]);
  labels->pdata[n - 2] = g_strdup("one line");
  g_assert_true(g_file_set_contents(labels_path, "old labels", -1, NULL));
  g_unlink(side);
  g_assert_cmpint(g_mkdir(side, 0755), ==, 0);
  for (int threads = 1; threads <= 3; threads++) {
    assert_distances_refused(path, side, nb, names, threads);
    g_autofree char *old_labels = NULL, *indices = NULL;
    g_assert_true(g_file_get_contents(labels_path, &old_labels, NULL, NULL));
    g_assert_cmpstr(old_labels, ==, "old labels");
    g_assert_true(g_file_get_contents(path, &indices, NULL, NULL));
    g_assert_cmpstr(indices, ==, "old indices");
    g_assert_cmpuint(formats_test_count_entries(dir), ==, 3);
  }
  g_rmdir(side);
  g_unlink(path);
  g_unlink(labels_path);
  g_rmdir(dir);
  free_lists(nb);
}

/* The lists as 32-bit arrays, computed here element by element: int32 indices (-1 kept), float32
 * distances rounded to nearest (+inf kept). */
static void narrow_lists(const KnnwbNeighbors *nb, int32_t *indices, float *distances)
{
  for (size_t e = 0; e < nb->n_queries * nb->k; e++) {
    indices[e] = (int32_t)nb->indices[e];
    distances[e] = (float)nb->distances[e];
  }
}

static uint32_t lists_read_le32(const unsigned char *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Member m (0 indices, 1 distances) of a lists .npz: its NPY header's dtype and its data equal
 * descr and data, and its local header's CRC-32 is the member's. */
static void assert_npz_member(const char *bytes, gsize length, int m, const char *descr, size_t n,
                              size_t k, size_t item, const void *data)
{
  const unsigned char *at = (const unsigned char *)bytes;
  for (int skip = 0; skip < m; skip++) {
    g_assert_cmpuint(lists_read_le32(at), ==, 0x04034b50);
    at += 30 + (at[26] | at[27] << 8) + lists_read_le32(at + 18);
  }
  g_assert_cmpuint(lists_read_le32(at), ==, 0x04034b50);
  const uint32_t crc = lists_read_le32(at + 14), size = lists_read_le32(at + 18);
  const unsigned char *npy = at + 30 + (at[26] | at[27] << 8);
  g_assert_cmpuint(size, ==, 128 + n * k * item);
  g_assert_cmpuint((gsize)(npy - at) + size, <=, length);
  g_autofree char *dict = g_strdup_printf(
      "{'descr': '<%s', 'fortran_order': False, 'shape': (%zu, %zu), }", descr, n, k);
  g_assert_true(memcmp(npy + 10, dict, strlen(dict)) == 0);
  g_assert_true(memcmp(npy + 128, data, n * k * item) == 0);
  g_assert_cmpuint(knnwb_formats_crc32(0, npy, size), ==, crc);
}

/* --lists-dtype 32: .npy and .npz hold int32 and float32, narrowed from the lists element by
 * element, on sizes of no whole number of 16 MiB blocks and on one and two writing threads. */
static void test_npy_lists_32(void)
{
  const size_t shapes[][2] = {{4194307, 3}, {3, 2}, {999983, 5}};
  g_autofree char *path = g_build_filename(formats_test_dir(), "lists32.npy", NULL);
  g_autofree char *side = knnwb_formats_side_path(path, KNNWB_OUTPUT_NPY);
  g_autofree char *npz = g_build_filename(formats_test_dir(), "lists32.npz", NULL);
  for (size_t s = 0; s < G_N_ELEMENTS(shapes); s++) {
    KnnwbNeighbors *nb = make_lists(shapes[s][0], shapes[s][1]);
    nb->distances[1] = 0x1.fffffefffffffp+127; /* rounds to FLT_MAX, not to +inf */
    nb->distances[0] = 1.0 + 0x1p-30;          /* rounds to 1.0f */
    const size_t count = nb->n_queries * nb->k;
    g_autofree int32_t *indices = g_new(int32_t, count);
    g_autofree float *distances = g_new(float, count);
    narrow_lists(nb, indices, distances);
    g_assert_cmpfloat(distances[0], ==, 1.0f);
    for (int threads = 1; threads <= 2; threads++) {
      KnnwbWriteControl control = {.n_threads = threads, .lists_dtype = KNNWB_LISTS_DTYPE_32};
      g_autoptr(GError) error = NULL;
      g_assert_true(knnwb_formats_write_lists(path, KNNWB_OUTPUT_NPY, nb, NULL, &control, &error));
      assert_npy_file_item(path, "i4", nb->n_queries, nb->k, 4, indices);
      assert_npy_file_item(side, "f4", nb->n_queries, nb->k, 4, distances);
    }
    KnnwbWriteControl control = {.lists_dtype = KNNWB_LISTS_DTYPE_32};
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_formats_write_lists(npz, KNNWB_OUTPUT_NPZ, nb, NULL, &control, &error));
    g_autofree char *bytes = NULL;
    gsize length = 0;
    g_assert_true(g_file_get_contents(npz, &bytes, &length, NULL));
    assert_npz_member(bytes, length, 0, "i4", nb->n_queries, nb->k, 4, indices);
    assert_npz_member(bytes, length, 1, "f4", nb->n_queries, nb->k, 4, distances);
    free_lists(nb);
  }
  g_unlink(path);
  g_unlink(side);
  g_unlink(npz);
}

/* A finite distance beyond float32's range, or a row number beyond int32's, is refused with the
 * row's number: the previous files stay as they were, and no temporary is left. */
static void test_npy_lists_32_refused(void)
{
  g_autofree char *dir = g_build_filename(formats_test_dir(), "refused32", NULL);
  g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
  g_autofree char *path = g_build_filename(dir, "g.npy", NULL);
  g_autofree char *side = knnwb_formats_side_path(path, KNNWB_OUTPUT_NPY);
  g_autofree char *npz = g_build_filename(dir, "g.npz", NULL);
  for (int which = 0; which < 2; which++)
    for (int format = 0; format < 2; format++) {
      KnnwbNeighbors *nb = make_lists(3000017, 3); /* the bad element in the second block */
      const size_t row = 2000003;
      if (which == 0)
        nb->distances[row * 3 + 1] = 1e39;
      else
        nb->indices[row * 3 + 2] = (int64_t)INT32_MAX + 1;
      g_assert_true(g_file_set_contents(path, "old indices", -1, NULL));
      g_assert_true(g_file_set_contents(side, "old distances", -1, NULL));
      g_assert_true(g_file_set_contents(npz, "old archive", -1, NULL));
      KnnwbWriteControl control = {.n_threads = 2, .lists_dtype = KNNWB_LISTS_DTYPE_32};
      g_autoptr(GError) error = NULL;
      const char *out = format == 0 ? path : npz;
      g_assert_false(knnwb_formats_write_lists(
          out, format == 0 ? KNNWB_OUTPUT_NPY : KNNWB_OUTPUT_NPZ, nb, NULL, &control, &error));
      g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
      g_autofree char *expected =
          which == 0 ? g_strdup_printf("%s: row %zu's distance 1e+39 is beyond float32's range: "
                                       "write the lists as float64",
                                       format == 0 ? side : npz, row)
                     : g_strdup_printf("%s: row %zu's neighbour 2147483648 is beyond int32's "
                                       "range: write the lists as int64",
                                       out, row);
      g_assert_cmpstr(error->message, ==, expected);
      g_autofree char *indices = NULL, *distances = NULL, *archive = NULL;
      g_assert_true(g_file_get_contents(path, &indices, NULL, NULL));
      g_assert_true(g_file_get_contents(side, &distances, NULL, NULL));
      g_assert_true(g_file_get_contents(npz, &archive, NULL, NULL));
      g_assert_cmpstr(indices, ==, "old indices");
      g_assert_cmpstr(distances, ==, "old distances");
      g_assert_cmpstr(archive, ==, "old archive");
      g_assert_cmpuint(formats_test_count_entries(dir), ==, 3);
      free_lists(nb);
    }
  g_unlink(path);
  g_unlink(side);
  g_unlink(npz);
  g_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/formats/npy-io/threads-same-matrix", test_npy_threads_same_matrix);
  g_test_add_func("/formats/npy-io/threads-block", test_npy_threads_block);
  g_test_add_func("/formats/npy-io/block-labels", test_npy_block_labels);
  g_test_add_func("/formats/npy-io/threads-missing-error", test_npy_threads_missing_error);
  g_test_add_func("/formats/npy-io/threads-drop-rows", test_npy_threads_drop_rows);
  g_test_add_func("/formats/npy-io/threads-truncated", test_npy_threads_truncated);
  g_test_add_func("/formats/npy-io/threads-changed-while-read",
                  test_npy_threads_changed_while_read);
  g_test_add_func("/formats/npy-io/convert-same-matrix", test_npy_convert_same_matrix);
  g_test_add_func("/formats/npy-io/convert-lowest-out-of-range",
                  test_npy_convert_lowest_out_of_range);
  g_test_add_func("/formats/npy-io/convert-missing", test_npy_convert_missing);
  g_test_add_func("/formats/npy-io/convert-block", test_npy_convert_block);
  g_test_add_func("/formats/npy-io/convert-fortran-transposed",
                  test_npy_convert_fortran_transposed);
  g_test_add_func("/formats/npy-io/lists-bytes", test_npy_lists_bytes);
  g_test_add_func("/formats/npy-io/lists-interrupted", test_npy_lists_interrupted);
  g_test_add_func("/formats/npy-io/lists-labels", test_npy_lists_labels);
  g_test_add_func("/formats/npy-io/lists-32", test_npy_lists_32);
  g_test_add_func("/formats/npy-io/lists-32-refused", test_npy_lists_32_refused);
  return g_test_run();
}
