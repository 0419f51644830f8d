/* Metafeatures against a brute-force expansion written here: sizes, labels, order, values, the
 * missing-value policy, the memory refusal, threads and cancellation. */
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/metafeatures.h>
#include <knnwb/write_matrix.h>
#include "knnwb_test_matrix.h"
#include "knnwb_test_progress.h"

static void test_counts(void)
{
  size_t n = 0;
  g_autoptr(GError) error = NULL;
  /* The seed's expanded_A and expanded_B, counted without building anything. */
  g_assert_true(knnwb_metafeatures_count(876, 876, 1, &n, &error));
  g_assert_cmpuint(n, ==, 384126);
  g_assert_true(knnwb_metafeatures_count(876, 876, 4, &n, &error));
  g_assert_cmpuint(n, ==, 1533876);
  g_assert_true(knnwb_metafeatures_count(5, 0, 4, &n, &error));
  g_assert_cmpuint(n, ==, 5);
  g_assert_true(knnwb_metafeatures_count(5, 1, 4, &n, &error));
  g_assert_cmpuint(n, ==, 5);
  g_assert_true(knnwb_metafeatures_count(7, 3, 2, &n, &error));
  g_assert_cmpuint(n, ==, 7 + 2 * 3);
  g_assert_false(knnwb_metafeatures_count(10, SIZE_MAX / 2, 1, &n, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
  g_clear_error(&error);
  g_assert_false(knnwb_metafeatures_count(SIZE_MAX, 3, 1, &n, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
}

static void test_parse_ops(void)
{
  KnnwbMetafeatureOp ops[KNNWB_METAFEATURE_COUNT];
  size_t n = 0;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_metafeatures_parse_ops("ratio, difference", ops, &n, &error));
  g_assert_cmpuint(n, ==, 2);
  g_assert_cmpint(ops[0], ==, KNNWB_METAFEATURE_RATIO);
  g_assert_cmpint(ops[1], ==, KNNWB_METAFEATURE_DIFFERENCE);
  g_assert_true(knnwb_metafeatures_parse_ops("all", ops, &n, &error));
  g_assert_cmpuint(n, ==, 4);
  g_assert_false(knnwb_metafeatures_parse_ops("difference,quotient", ops, &n, &error));
  g_assert_nonnull(strstr(error->message, "quotient"));
  g_clear_error(&error);
  g_assert_false(knnwb_metafeatures_parse_ops("sum,sum", ops, &n, &error));
  g_assert_nonnull(strstr(error->message, "twice"));
  g_clear_error(&error);
  g_assert_false(knnwb_metafeatures_parse_ops("", ops, &n, &error));
}

static KnnwbMatrix *labelled(size_t n, size_t d, guint32 seed)
{
  KnnwbMatrix *m = knnwb_test_random_matrix(n, d, seed);
  for (size_t i = 0; i < n; i++) {
    g_autofree char *label = g_strdup_printf("g%zu", i);
    knnwb_matrix_set_row_label(m, i, label);
    /* Ratios need non-zero denominators: keep values away from zero. */
    for (size_t j = 0; j < d; j++)
      if (fabsf(m->values[i * d + j]) < 0.01f)
        m->values[i * d + j] = 0.5f;
  }
  for (size_t j = 0; j < d; j++) {
    g_autofree char *label = g_strdup_printf("s%zu", j);
    knnwb_matrix_set_col_label(m, j, label);
  }
  return m;
}

/* The brute force: nested loops in the documented order. */
static void check_expansion(const KnnwbMatrix *data, const size_t *rows, size_t m,
                            const KnnwbMetafeatureOp *ops, size_t n_ops, const KnnwbMatrix *out)
{
  static const char symbol[] = {'-', '+', '*', '/'};
  const size_t d = data->n_cols;
  g_assert_cmpuint(out->n_cols, ==, d);
  g_assert_cmpuint(out->n_rows, ==, data->n_rows + n_ops * m * (m - 1) / 2);
  for (size_t i = 0; i < data->n_rows; i++) {
    g_assert_cmpstr(out->row_labels[i], ==, data->row_labels[i]);
    g_assert_cmpmem(out->values + i * d, d * 4, data->values + i * d, d * 4);
  }
  size_t r = data->n_rows;
  for (size_t o = 0; o < n_ops; o++)
    for (size_t a = 0; a < m; a++)
      for (size_t b = a + 1; b < m; b++, r++) {
        g_autofree char *label = g_strdup_printf("%s%c%s", data->row_labels[rows[a]],
                                                 symbol[ops[o]], data->row_labels[rows[b]]);
        g_assert_cmpstr(out->row_labels[r], ==, label);
        for (size_t j = 0; j < d; j++) {
          double x = data->values[rows[a] * d + j], y = data->values[rows[b] * d + j];
          double v = ops[o] == 0 ? x - y : ops[o] == 1 ? x + y : ops[o] == 2 ? x * y : x / y;
          g_assert_cmpfloat(out->values[r * d + j], ==, (float)v);
        }
      }
  g_assert_cmpstr(out->col_labels[d - 1], ==, data->col_labels[d - 1]);
}

static void test_expand_all(void)
{
  g_autoptr(KnnwbMatrix) data = labelled(13, 7, 11);
  KnnwbMetafeatureOp ops[] = {KNNWB_METAFEATURE_DIFFERENCE, KNNWB_METAFEATURE_SUM,
                              KNNWB_METAFEATURE_PRODUCT, KNNWB_METAFEATURE_RATIO};
  size_t all[13];
  for (size_t i = 0; i < 13; i++)
    all[i] = i;
  for (int threads = 1; threads <= 3; threads += 2) {
    KnnwbMetafeatureOptions options;
    knnwb_metafeatures_options_init(&options);
    options.ops = ops;
    options.n_ops = 4;
    options.n_threads = threads;
    g_autoptr(KnnwbMatrix) out = NULL;
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_metafeatures_expand(data, &options, &out, &error));
    g_assert_no_error(error);
    check_expansion(data, all, 13, ops, 4, out);
  }
  /* Default: difference only. */
  KnnwbMetafeatureOptions options;
  knnwb_metafeatures_options_init(&options);
  g_autoptr(KnnwbMatrix) out = NULL;
  g_assert_true(knnwb_metafeatures_expand(data, &options, &out, NULL));
  check_expansion(data, all, 13, ops, 1, out);
}

static void test_expand_subset(void)
{
  g_autoptr(KnnwbMatrix) data = labelled(9, 5, 3);
  KnnwbMetafeatureOp ops[] = {KNNWB_METAFEATURE_RATIO, KNNWB_METAFEATURE_DIFFERENCE};
  size_t rows[] = {6, 0, 4, 8};
  KnnwbMetafeatureOptions options;
  knnwb_metafeatures_options_init(&options);
  options.ops = ops;
  options.n_ops = 2;
  options.rows = rows;
  options.n_rows = 4;
  g_autoptr(KnnwbMatrix) out = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_metafeatures_expand(data, &options, &out, &error));
  check_expansion(data, rows, 4, ops, 2, out);
  g_assert_cmpstr(out->row_labels[9], ==, "g6/g0");

  size_t bad_rows[] = {1, 9};
  options.rows = bad_rows;
  options.n_rows = 2;
  g_clear_pointer(&out, knnwb_matrix_free);
  g_assert_false(knnwb_metafeatures_expand(data, &options, &out, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  size_t twice[] = {1, 1};
  options.rows = twice;
  g_assert_false(knnwb_metafeatures_expand(data, &options, &out, &error));
  g_assert_nonnull(strstr(error->message, "'g1' is listed twice"));
}

static void test_policy(void)
{
  g_autoptr(KnnwbMatrix) data = labelled(5, 4, 5);
  data->values[3 * 4 + 2] = 0.0f;   /* g3 has a zero: a/g3 fails */
  data->values[4 * 4 + 1] = 1e-40f; /* g4 a subnormal: a/g4 fails */
  KnnwbMetafeatureOp ratio[] = {KNNWB_METAFEATURE_RATIO};
  KnnwbMetafeatureOptions options;
  knnwb_metafeatures_options_init(&options);
  options.ops = ratio;
  options.n_ops = 1;
  g_autoptr(KnnwbMatrix) out = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_metafeatures_expand(data, &options, &out, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
  /* The first failing pair in output order: g0/g3, column 3 (s2), 7 pairs in all. */
  g_assert_nonnull(strstr(error->message, "g0/g3: the denominator g3 is zero in column 3 (s2)"));
  g_assert_nonnull(strstr(error->message, "7 pairs"));
  g_clear_error(&error);

  options.missing = KNNWB_MISSING_DROP_ROWS;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING, "*7 pairs dropped*g0/g3*");
  g_assert_true(knnwb_metafeatures_expand(data, &options, &out, &error));
  g_test_assert_expected_messages();
  g_assert_no_error(error);
  /* Kept: pairs (a, b) with b not in {3, 4}: (0,1) (0,2) (1,2). */
  g_assert_cmpuint(out->n_rows, ==, 5 + 3);
  g_assert_cmpstr(out->row_labels[5], ==, "g0/g1");
  g_assert_cmpstr(out->row_labels[7], ==, "g1/g2");
  g_assert_cmpfloat(out->values[7 * 4 + 3], ==,
                    (float)((double)data->values[1 * 4 + 3] / (double)data->values[2 * 4 + 3]));
  g_clear_pointer(&out, knnwb_matrix_free);

  /* Overflow to infinity: a product beyond 3.4e38. */
  g_autoptr(KnnwbMatrix) big = labelled(3, 2, 9);
  big->values[0] = 3e30f;
  big->values[2] = 3e30f;
  KnnwbMetafeatureOp product[] = {KNNWB_METAFEATURE_DIFFERENCE, KNNWB_METAFEATURE_PRODUCT};
  options.ops = product;
  options.n_ops = 2;
  options.missing = KNNWB_MISSING_ERROR;
  g_assert_false(knnwb_metafeatures_expand(big, &options, &out, &error));
  g_assert_nonnull(strstr(error->message, "g0*g1 = 3e+30 * 3e+30 overflows to infinity"));
}

/* A row kept absent for its missing values (`--drop-missing`, pipeline missing="drop-rows") holds
 * zeros, not data: its pairs are left out (with a warning), under either policy, and it stays
 * absent in the result. Written, it reads NA (TSV) or NaN (NPY), not zeros. Before, its pairs
 * were made from the zeros (g2-g? = -g?, with edges in the kNN graph) and the files held zeros. */
static void test_absent_rows(void)
{
  g_autoptr(KnnwbMatrix) data = labelled(5, 3, 12);
  for (size_t j = 0; j < 3; j++)
    data->values[2 * 3 + j] = 0.0f;
  knnwb_matrix_set_row_absent(data, 2);
  KnnwbMetafeatureOp ops[] = {KNNWB_METAFEATURE_DIFFERENCE, KNNWB_METAFEATURE_RATIO};
  KnnwbMetafeatureOptions options;
  knnwb_metafeatures_options_init(&options);
  options.ops = ops;
  options.n_ops = 2;
  g_autoptr(KnnwbMatrix) out = NULL;
  g_autoptr(GError) error = NULL;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "*8 pairs with a row of missing values left out, the first: g0-g2 (g2 *");
  g_assert_true(knnwb_metafeatures_expand(data, &options, &out, &error));
  g_test_assert_expected_messages();
  g_assert_no_error(error);
  /* 5 originals, then 6 pairs of 4 present rows per operator. */
  g_assert_cmpuint(out->n_rows, ==, 5 + 2 * 6);
  for (size_t i = 5; i < out->n_rows; i++)
    g_assert_null(strstr(out->row_labels[i], "g2"));
  g_assert_cmpstr(out->row_labels[5], ==, "g0-g1");
  g_assert_cmpstr(out->row_labels[6], ==, "g0-g3");
  g_assert_true(knnwb_matrix_row_is_absent(out, 2));
  g_assert_false(knnwb_matrix_row_is_absent(out, 1));

  g_autofree char *dir = g_dir_make_tmp("knnwb-mf-absent-XXXXXX", NULL);
  g_autofree char *tsv = g_build_filename(dir, "m.tsv", NULL);
  g_autofree char *npy = g_build_filename(dir, "m.npy", NULL);
  g_assert_true(knnwb_formats_write_matrix(tsv, out, &error));
  g_assert_true(knnwb_formats_write_matrix(npy, out, &error));
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(tsv, &text, NULL, NULL));
  g_assert_nonnull(strstr(text, "\ng2\tNA\tNA\tNA\n"));
  KnnwbReadOptions read;
  knnwb_formats_read_options_init(&read);
  read.missing = KNNWB_MISSING_DROP_ROWS;
  g_autoptr(KnnwbMatrix) back = NULL;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING, "*1 row with missing values*");
  g_assert_true(knnwb_formats_read_matrix(npy, &read, &back, NULL, &error));
  g_test_assert_expected_messages();
  g_assert_no_error(error);
  g_assert_cmpuint(back->n_rows, ==, out->n_rows);
  g_assert_true(knnwb_matrix_row_is_absent(back, 2));
  g_assert_cmpmem(back->values + 3 * 3, (out->n_rows - 3) * 3 * sizeof(float), out->values + 3 * 3,
                  (out->n_rows - 3) * 3 * sizeof(float));
  g_remove(tsv);
  g_remove(npy);
  g_autofree char *labels = g_build_filename(dir, "m.labels.txt", NULL);
  g_remove(labels);
  g_rmdir(dir);
}

static void test_memory_refused(void)
{
  g_autoptr(KnnwbMatrix) data = labelled(40, 10, 2);
  KnnwbMetafeatureOptions options;
  knnwb_metafeatures_options_init(&options);
  options.available_bytes = 10000;
  g_autoptr(KnnwbMatrix) out = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_metafeatures_expand(data, &options, &out, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
  g_assert_nonnull(strstr(error->message, "needs"));
  g_assert_nonnull(strstr(error->message, "(10000 bytes) available"));
  g_assert_null(out);
}

static void test_cancel(void)
{
  g_autoptr(KnnwbMatrix) data = labelled(50, 10, 2);
  volatile gint cancel = 1;
  KnnwbMetafeatureOptions options;
  knnwb_metafeatures_options_init(&options);
  options.cancel = &cancel;
  g_autoptr(KnnwbMatrix) out = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_metafeatures_expand(data, &options, &out, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
}

/* The expansion's progress, its first report held (knnwb_test_progress_held). */
static void test_progress(void)
{
  g_autoptr(KnnwbMatrix) data = labelled(300, 4, 3);
  KnnwbMetafeatureOptions options;
  knnwb_metafeatures_options_init(&options);
  options.n_threads = 2;
  KnnwbTestProgress last = {0};
  options.progress = knnwb_test_progress_held;
  options.progress_data = &last;
  g_autoptr(KnnwbMatrix) out = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_metafeatures_expand(data, &options, &out, &error));
  g_assert_no_error(error);
  const uint64_t pairs = 300 * 299 / 2;
  g_assert_cmpuint(out->n_rows, ==, 300 + pairs);
  g_assert_cmpuint(last.total, ==, pairs);
  g_assert_cmpuint(last.done, ==, pairs); /* (the last pairs are always reported) */
}

static void test_rows_file(void)
{
  g_autoptr(KnnwbMatrix) data = labelled(6, 3, 1);
  g_autofree char *dir = g_dir_make_tmp("knnwb-mf-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "rows.txt", NULL);
  g_assert_true(g_file_set_contents(path, "g4\n\n  g1 \ng5\n", -1, NULL));
  g_autofree size_t *rows = NULL;
  size_t n = 0;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_metafeatures_rows_from_file(data, path, &rows, &n, &error));
  g_assert_cmpuint(n, ==, 3);
  g_assert_cmpuint(rows[0], ==, 4);
  g_assert_cmpuint(rows[1], ==, 1);
  g_assert_cmpuint(rows[2], ==, 5);
  g_clear_pointer(&rows, g_free);
  /* Saved by Notepad or Excel: a byte-order mark and CRLF ("'\xEF\xBB\xBFg4' is not a row label"
   * before). */
  g_assert_true(g_file_set_contents(path, "\xEF\xBB\xBFg4\r\ng1 \r\n\r\n", -1, NULL));
  g_assert_true(knnwb_metafeatures_rows_from_file(data, path, &rows, &n, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(n, ==, 2);
  g_assert_cmpuint(rows[0], ==, 4);
  g_assert_cmpuint(rows[1], ==, 1);
  g_clear_pointer(&rows, g_free);
  /* A label naming several rows (probes sharing a gene symbol): the first is paired, with a
   * warning (silent before). */
  knnwb_matrix_set_row_label(data, 5, "g1");
  g_assert_true(g_file_set_contents(path, "g1\ng4\n", -1, NULL));
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "*1 listed label names several rows (first: 'g1' names 2 rows); the first "
                        "row of each is paired");
  g_assert_true(knnwb_metafeatures_rows_from_file(data, path, &rows, &n, &error));
  g_test_assert_expected_messages();
  g_assert_cmpuint(n, ==, 2);
  g_assert_cmpuint(rows[0], ==, 1);
  g_clear_pointer(&rows, g_free);
  knnwb_matrix_set_row_label(data, 5, "g5");
  g_assert_true(g_file_set_contents(path, "g4\nnope\ng4\nzz\n", -1, NULL));
  g_assert_false(knnwb_metafeatures_rows_from_file(data, path, &rows, &n, &error));
  g_autofree char *unknown = g_strdup_printf("%s:2: 'nope' is not a row label", path);
  g_autofree char *twice = g_strdup_printf("%s:3: 'g4' is listed twice", path);
  g_autofree char *unknown2 = g_strdup_printf("%s:4: 'zz'", path);
  g_assert_nonnull(strstr(error->message, unknown));
  g_assert_nonnull(strstr(error->message, twice));
  g_assert_nonnull(strstr(error->message, unknown2));
  g_unlink(path);
  g_rmdir(dir);
}

static void count_warning(const char *domain, GLogLevelFlags level, const char *message,
                          gpointer data)
{
  (void)domain, (void)level, (void)message;
  (*(guint *)data)++;
}

/* Shares (one rank's part of a split-memory job): in order they are the whole result, values,
 * labels and drops, for every share count, with a subset of rows and several operators. */
static void check_shares(const KnnwbMatrix *data, const KnnwbMetafeatureOptions *base)
{
  g_autoptr(KnnwbMatrix) whole = NULL;
  g_assert_true(knnwb_metafeatures_expand(data, base, &whole, NULL));
  const size_t d = data->n_cols;
  for (int count = 2; count <= 7; count++) {
    size_t at = 0;
    for (int share = 0; share < count; share++) {
      KnnwbMetafeatureOptions options = *base;
      options.share_index = share;
      options.share_count = count;
      g_autoptr(KnnwbMatrix) part = NULL;
      g_assert_true(knnwb_metafeatures_expand(data, &options, &part, NULL));
      g_assert_cmpuint(at + part->n_rows, <=, whole->n_rows);
      if (part->n_rows * d > 0)
        g_assert_cmpmem(part->values, part->n_rows * d * sizeof(float), whole->values + at * d,
                        part->n_rows * d * sizeof(float));
      for (size_t i = 0; i < part->n_rows; i++)
        g_assert_cmpstr(part->row_labels[i], ==, whole->row_labels[at + i]);
      for (size_t j = 0; j < d; j++)
        g_assert_cmpstr(part->col_labels[j], ==, whole->col_labels[j]);
      at += part->n_rows;
    }
    g_assert_cmpuint(at, ==, whole->n_rows);
  }
}

static void test_shares(void)
{
  g_autoptr(KnnwbMatrix) data = labelled(11, 5, 13);
  KnnwbMetafeatureOptions options;
  knnwb_metafeatures_options_init(&options);
  options.n_threads = 2;
  check_shares(data, &options); /* difference only */
  KnnwbMetafeatureOp all[] = {KNNWB_METAFEATURE_DIFFERENCE, KNNWB_METAFEATURE_SUM,
                              KNNWB_METAFEATURE_PRODUCT, KNNWB_METAFEATURE_RATIO};
  options.ops = all;
  options.n_ops = 4;
  check_shares(data, &options);
  const size_t subset[] = {9, 2, 4, 7};
  options.rows = subset;
  options.n_rows = G_N_ELEMENTS(subset);
  check_shares(data, &options);
  /* Failing pairs dropped, wherever the share boundaries fall (each share that drops warns). */
  data->values[3 * 5 + 2] = 0.0f;
  options.rows = NULL;
  options.missing = KNNWB_MISSING_DROP_ROWS;
  GLogLevelFlags fatal = g_log_set_always_fatal(G_LOG_FATAL_MASK);
  guint warnings = 0;
  guint handler = g_log_set_handler("knnwb", G_LOG_LEVEL_WARNING, count_warning, &warnings);
  check_shares(data, &options);
  g_log_remove_handler("knnwb", handler);
  g_log_set_always_fatal(fatal);
  g_assert_cmpuint(warnings, >, 6);
  /* Two rows (one pair) and one row (none) in more shares than pairs. */
  g_autoptr(KnnwbMatrix) two = labelled(2, 3, 17);
  g_autoptr(KnnwbMatrix) one = labelled(1, 3, 19);
  options.missing = KNNWB_MISSING_ERROR;
  check_shares(two, &options);
  check_shares(one, &options);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/workflow/metafeatures/counts", test_counts);
  g_test_add_func("/workflow/metafeatures/parse-ops", test_parse_ops);
  g_test_add_func("/workflow/metafeatures/expand-all", test_expand_all);
  g_test_add_func("/workflow/metafeatures/expand-subset", test_expand_subset);
  g_test_add_func("/workflow/metafeatures/policy", test_policy);
  g_test_add_func("/workflow/metafeatures/absent-rows", test_absent_rows);
  g_test_add_func("/workflow/metafeatures/shares", test_shares);
  g_test_add_func("/workflow/metafeatures/memory-refused", test_memory_refused);
  g_test_add_func("/workflow/metafeatures/cancel", test_cancel);
  g_test_add_func("/workflow/metafeatures/progress", test_progress);
  g_test_add_func("/workflow/metafeatures/rows-file", test_rows_file);
  return g_test_run();
}
