/*
 * The number parser behind every text reader must give exactly what strtof gives: thousands of
 * random decimal strings of every shape (short, long, exponents, subnormals, exact float
 * midpoints that the fast path must hand to strtof) go through a TSV file and are compared bit
 * for bit.
 */
#include "formats_test_util.h"

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 400, COLS = 120 };

static void random_number(GRand *rand, GString *out)
{
  g_string_truncate(out, 0);
  if (g_rand_boolean(rand))
    g_string_append_c(out, g_rand_boolean(rand) ? '-' : '+');
  int shape = g_rand_int_range(rand, 0, 7);
  if (shape == 0) {
    /* An exact float midpoint above 2^24: an odd integer, ties to even. */
    gint64 base = (gint64)1 << g_rand_int_range(rand, 24, 40);
    gint64 step = base >> 23;
    gint64 value = base + step * g_rand_int_range(rand, 0, 1000) + step / 2;
    g_string_append_printf(out, "%" G_GINT64_FORMAT, value);
    return;
  }
  if (shape == 1) {
    /* A float printed with 9 significant digits (the usual round trip). */
    union {
      guint32 bits;
      float value;
    } u;
    do
      u.bits = g_rand_int(rand);
    while (!isfinite(u.value));
    g_string_append_printf(out, "%.9g", fabsf(u.value));
    return;
  }
  int digits = g_rand_int_range(rand, 1, shape == 2 ? 26 : 12);
  int point = g_rand_int_range(rand, -1, digits + 1);
  for (int i = 0; i < digits; i++) {
    if (i == point)
      g_string_append_c(out, '.');
    g_string_append_c(out, (char)('0' + g_rand_int_range(rand, 0, 10)));
  }
  if (point == digits)
    g_string_append_c(out, '.');
  if (shape >= 5) {
    int exponent = shape == 5 ? g_rand_int_range(rand, -50, 40) : g_rand_int_range(rand, -46, -36);
    g_string_append_printf(out, "%c%d", g_rand_boolean(rand) ? 'e' : 'E', exponent);
  }
}

static void test_float_matches_strtof(void)
{
  GRand *rand = g_rand_new_with_seed(20240611);
  GString *file = g_string_new(NULL);
  GString *number = g_string_new(NULL);
  float *expected = g_new(float, ROWS *COLS);
  for (int i = 0; i < ROWS; i++) {
    g_string_append_printf(file, "r%d", i);
    for (int j = 0; j < COLS; j++) {
      float value;
      do {
        random_number(rand, number);
        value = strtof(number->str, NULL);
      } while (isinf(value));
      expected[i * COLS + j] = value;
      g_string_append_c(file, '\t');
      g_string_append(file, number->str);
    }
    g_string_append_c(file, '\n');
  }
  g_autofree char *path = formats_test_write("numbers.tsv", file->str, (gssize)file->len);
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  options.header = KNNWB_HEADER_NO;
  KnnwbMatrix *matrix = NULL;
  GError *error = NULL;
  /* The subnormal shapes are told once (they lose digits in a float, as strtof's do). */
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "*values below float's smallest normal magnitude*");
  g_assert_true(knnwb_formats_read_matrix(path, &options, &matrix, NULL, &error));
  g_test_assert_expected_messages();
  g_assert_no_error(error);
  g_assert_cmpuint(matrix->n_rows, ==, ROWS);
  g_assert_cmpuint(matrix->n_cols, ==, COLS);
  int mismatches = 0;
  for (int k = 0; k < ROWS * COLS; k++) {
    if (memcmp(&matrix->values[k], &expected[k], sizeof(float)) != 0 && mismatches++ < 10)
      g_test_message("value %d: got %.9g, strtof gives %.9g", k, matrix->values[k], expected[k]);
  }
  g_assert_cmpint(mismatches, ==, 0);
  knnwb_matrix_free(matrix);
  g_free(expected);
  g_string_free(number, TRUE);
  g_string_free(file, TRUE);
  g_rand_free(rand);
}

static void test_float_edge_cases(void)
{
  static const struct {
    const char *text;
    float value;
  } cases[] = {
      {"16777217", 16777216.0f},
      {"16777219", 16777220.0f},
      {"-16777217", -16777216.0f},
      {"0", 0.0f},
      {"-0.0", -0.0f},
      {".5", 0.5f},
      {"5.", 5.0f},
      {"+1.25", 1.25f},
      {"1e-45", 1.40129846e-45f},
      {"3.4028235e38", 3.4028235e38f},
      {"0.000000000000000000000000000001", 1e-30f},
      {"1234567890123456789012345", 1.23456789e24f},
  };
  GString *file = g_string_new("label");
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
    g_string_append_printf(file, ",c%zu", i);
  g_string_append(file, "\nrow");
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
    g_string_append_printf(file, ",%s", cases[i].text);
  g_string_append_c(file, '\n');
  g_autofree char *path = formats_test_write("edges.csv", file->str, -1);
  g_string_free(file, TRUE);
  KnnwbMatrix *matrix = NULL;
  GError *error = NULL;
  g_test_expect_message("knnwb", G_LOG_LEVEL_WARNING,
                        "*1 value below float's smallest normal magnitude*"); /* 1e-45 */
  g_assert_true(knnwb_formats_read_matrix(path, NULL, &matrix, NULL, &error));
  g_test_assert_expected_messages();
  g_assert_no_error(error);
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_assert_cmpfloat(matrix->values[i], ==, cases[i].value);
    g_assert_cmpint(signbit(matrix->values[i]), ==, signbit(cases[i].value));
  }
  knnwb_matrix_free(matrix);
}

/* A host that calls setlocale(LC_ALL, "") in a decimal-comma locale must still read '.'. */
static void test_float_ignores_locale(void)
{
  const char *locales[] = {"de_DE.UTF-8", "fr_FR.UTF-8", "de_DE.utf8"};
  const char *set = NULL;
  for (size_t i = 0; i < G_N_ELEMENTS(locales) && set == NULL; i++)
    set = setlocale(LC_NUMERIC, locales[i]);
  if (set == NULL) {
    g_test_skip("no decimal-comma locale installed");
    return;
  }
  g_autofree char *path =
      formats_test_write("locale.tsv", "id\ta\tb\nx\t1.5\t12345678901234567890.5\n", -1);
  KnnwbMatrix *matrix = NULL;
  GError *error = NULL;
  gboolean ok = knnwb_formats_read_matrix(path, NULL, &matrix, NULL, &error);
  setlocale(LC_NUMERIC, "C");
  g_assert_no_error(error);
  g_assert_true(ok);
  g_assert_cmpfloat(matrix->values[0], ==, 1.5f);
  g_assert_cmpfloat(matrix->values[1], ==, 12345678901234567890.5f);
  knnwb_matrix_free(matrix);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_add_func("/formats/float/matches-strtof", test_float_matches_strtof);
  g_test_add_func("/formats/float/edge-cases", test_float_edge_cases);
  g_test_add_func("/formats/float/ignores-locale", test_float_ignores_locale);
  return g_test_run();
}
