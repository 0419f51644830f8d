/* The data matrix: labels, transpose, row selection, finiteness, overflow. */
#include <math.h>
#include <string.h>
#include <knnwb/knnwb.h>

static void test_transpose_and_labels(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(37, 45, &error);
  g_assert_no_error(error);
  for (size_t i = 0; i < 37; i++) {
    g_autofree char *label = g_strdup_printf("gene-%zu", i);
    knnwb_matrix_set_row_label(m, i, label);
    for (size_t j = 0; j < 45; j++)
      m->values[i * 45 + j] = (float)(i * 1000 + j);
  }
  for (size_t j = 0; j < 45; j++) {
    g_autofree char *label = g_strdup_printf("sample-%zu", j);
    knnwb_matrix_set_col_label(m, j, label);
    knnwb_matrix_set_col_class(m, j, j % 2 ? "tumour" : "normal");
  }
  g_autoptr(KnnwbMatrix) t = knnwb_matrix_transpose(m, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(t->n_rows, ==, 45);
  g_assert_cmpuint(t->n_cols, ==, 37);
  for (size_t i = 0; i < 37; i++)
    for (size_t j = 0; j < 45; j++)
      g_assert_cmpfloat(t->values[j * 37 + i], ==, m->values[i * 45 + j]);
  g_assert_cmpstr(knnwb_matrix_row_label(t, 44), ==, "sample-44");
  g_assert_cmpstr(t->col_labels[36], ==, "gene-36");
  g_assert_cmpstr(t->row_classes[3], ==, "tumour");
  g_assert_null(t->col_classes);
}

static void test_select_rows(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(5, 2, NULL);
  for (size_t i = 0; i < 5; i++) {
    m->values[i * 2] = (float)i;
    g_autofree char *label = g_strdup_printf("r%zu", i);
    knnwb_matrix_set_row_label(m, i, label);
  }
  gboolean keep[5] = {TRUE, FALSE, TRUE, FALSE, TRUE};
  g_autoptr(KnnwbMatrix) s = knnwb_matrix_select_rows(m, keep, NULL);
  g_assert_cmpuint(s->n_rows, ==, 3);
  g_assert_cmpfloat(s->values[2 * 2], ==, 4.0f);
  g_assert_cmpstr(knnwb_matrix_row_label(s, 1), ==, "r2");
}

static void test_finite_and_overflow(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(3, 3, NULL);
  g_assert_true(knnwb_matrix_check_finite(m, NULL));
  m->values[7] = -INFINITY;
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_matrix_check_finite(m, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
  g_assert_nonnull(strstr(error->message, "row 2, column 1 (both counted from 0)"));
  g_clear_error(&error);
  g_assert_null(knnwb_matrix_new((size_t)1 << 40, (size_t)1 << 40, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
  size_t out = 7;
  g_assert_false(knnwb_size_multiply(SIZE_MAX, 2, &out));
  g_assert_cmpuint(out, ==, 7);
  g_assert_true(knnwb_size_multiply(0, SIZE_MAX, &out));
  g_assert_cmpuint(out, ==, 0);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/matrix/transpose-and-labels", test_transpose_and_labels);
  g_test_add_func("/matrix/select-rows", test_select_rows);
  g_test_add_func("/matrix/finite-and-overflow", test_finite_and_overflow);
  return g_test_run();
}
