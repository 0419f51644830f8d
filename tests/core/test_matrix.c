/* The data matrix: labels, transpose, row selection, finiteness, overflow, released values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "base/base.h"

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
  /* A rank's block: rows named by their number in the whole run, labels by the block's own. */
  g_assert_true(knnwb_matrix_check_finite_rows(m, 0, 2, 100, NULL));
  knnwb_matrix_set_row_label(m, 2, "third");
  g_assert_false(knnwb_matrix_check_finite_rows(m, 1, 3, 100, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
  g_assert_nonnull(strstr(error->message,
                          "row 102 (third), column 1 (both counted from 0) holds an "
                          "infinite value"));
  g_clear_error(&error);
  g_assert_null(knnwb_matrix_new((size_t)1 << 40, (size_t)1 << 40, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
  size_t out = 7;
  g_assert_false(knnwb_size_multiply(SIZE_MAX, 2, &out));
  g_assert_cmpuint(out, ==, 7);
  g_assert_true(knnwb_size_multiply(0, SIZE_MAX, &out));
  g_assert_cmpuint(out, ==, 0);
}

/* A matrix of rows r0.. whose column j is named names[j] and holds 100 * row + the number in the
 * name ("g7" -> 7), so a column's values say which gene they belong to wherever it stands. */
static KnnwbMatrix *named_columns(size_t n_rows, const char *const *names, size_t d)
{
  KnnwbMatrix *m = knnwb_matrix_new(n_rows, d, NULL);
  for (size_t i = 0; i < n_rows; i++) {
    g_autofree char *label = g_strdup_printf("r%zu", i);
    knnwb_matrix_set_row_label(m, i, label);
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] = (float)(100 * i + (size_t)atoi(names[j] + 1));
  }
  for (size_t j = 0; j < d; j++)
    knnwb_matrix_set_col_label(m, j, names[j]);
  return m;
}

/* New samples from another file: the same genes in another order (compared position by position
 * before, silently), more genes, too few, repeated or no names. */
static void test_match_columns(void)
{
  const char *const genes[] = {"g1", "g2", "g3", "g4"};
  g_autoptr(KnnwbMatrix) reference = named_columns(3, genes, 4);
  g_autoptr(GError) error = NULL;
  KnnwbMatrix *matched = NULL;
  /* Same order, or no names: used as it is. */
  g_autoptr(KnnwbMatrix) same = named_columns(2, genes, 4);
  g_assert_true(knnwb_matrix_match_columns(same, reference, &matched, &error));
  g_assert_null(matched);
  g_autoptr(KnnwbMatrix) bare = knnwb_matrix_new(2, 4, NULL);
  g_assert_true(knnwb_matrix_match_columns(bare, reference, &matched, &error));
  g_assert_null(matched);
  /* Shuffled, with two extra genes and an absent row: the reference's order, by name. */
  const char *const shuffled[] = {"g9", "g3", "g1", "g4", "g8", "g2"};
  g_autoptr(KnnwbMatrix) query = named_columns(2, shuffled, 6);
  knnwb_matrix_set_row_absent(query, 1);
  g_assert_true(knnwb_matrix_match_columns(query, reference, &matched, &error));
  g_assert_no_error(error);
  g_autoptr(KnnwbMatrix) aligned = matched;
  g_assert_nonnull(aligned);
  g_assert_cmpuint(aligned->n_rows, ==, 2);
  g_assert_cmpuint(aligned->n_cols, ==, 4);
  for (size_t i = 0; i < 2; i++)
    for (size_t j = 0; j < 4; j++)
      g_assert_cmpfloat(aligned->values[i * 4 + j], ==, (float)(100 * i + j + 1));
  g_assert_cmpstr(aligned->col_labels[2], ==, "g3");
  g_assert_cmpstr(knnwb_matrix_row_label(aligned, 1), ==, "r1");
  g_assert_true(knnwb_matrix_row_is_absent(aligned, 1));
  g_assert_false(knnwb_matrix_row_is_absent(aligned, 0));
  /* Genes missing from the query: named. */
  const char *const partial[] = {"g4", "g1", "g7", "g6"};
  g_autoptr(KnnwbMatrix) short_query = named_columns(2, partial, 4);
  g_assert_false(knnwb_matrix_match_columns(short_query, reference, &matched, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull(strstr(error->message, "2 of the reference's 4 columns are not in the query "
                                          "('g2', 'g3')"));
  g_clear_error(&error);
  /* A needed name twice in the query. */
  const char *const twice[] = {"g4", "g1", "g2", "g3", "g2"};
  g_autoptr(KnnwbMatrix) twice_query = named_columns(1, twice, 5);
  g_assert_false(knnwb_matrix_match_columns(twice_query, reference, &matched, &error));
  g_assert_nonnull(strstr(error->message, "the query names column 'g2' twice"));
  g_clear_error(&error);
  /* Other names for the columns (probe ids against symbols): by position, with a warning. */
  const char *const others[] = {"p1", "p2", "p3", "p4"};
  g_autoptr(KnnwbMatrix) renamed = named_columns(1, others, 4);
  g_test_expect_message(NULL, G_LOG_LEVEL_WARNING, "*share no name*compared by position*");
  g_assert_true(knnwb_matrix_match_columns(renamed, reference, &matched, &error));
  g_test_assert_expected_messages();
  g_assert_null(matched);
}

/* A block of a whole matrix: its rows are the whole's (no copy), the whole comes back with the
 * block's first row, and freeing the block frees the whole (the sanitizer builds see a leak). */
static void test_block_of(void)
{
  KnnwbMatrix *whole = knnwb_matrix_new(7, 3, NULL);
  for (size_t t = 0; t < 21; t++)
    whole->values[t] = (float)t;
  KnnwbMatrix *block = knnwb_matrix_new_block_of(whole, 2, 4);
  g_assert_cmpuint(block->n_rows, ==, 4);
  g_assert_cmpuint(block->n_cols, ==, 3);
  g_assert_true(block->values == whole->values + 6);
  g_assert_cmpfloat(block->values[11], ==, 17.0f);
  size_t first = 99;
  g_assert_true(knnwb_matrix_whole_of(block, &first) == whole);
  g_assert_cmpuint(first, ==, 2);
  g_assert_null(knnwb_matrix_whole_of(whole, &first)); /* (a plain matrix) */
  knnwb_matrix_free(block);
  /* an empty block at the end */
  KnnwbMatrix *other = knnwb_matrix_new(5, 2, NULL);
  KnnwbMatrix *empty = knnwb_matrix_new_block_of(other, 5, 0);
  g_assert_cmpuint(empty->n_rows, ==, 0);
  g_assert_true(knnwb_matrix_whole_of(empty, &first) == other);
  g_assert_cmpuint(first, ==, 5);
  knnwb_matrix_free(empty);
}

/* A values_destroy that counts its calls and frees as knnwb_matrix_free would. */
static void count_destroy(void *values, size_t n_bytes, void *data)
{
  int *calls = data;
  g_assert_cmpuint(n_bytes, ==, 6 * sizeof(float)); /* the shape it was made with */
  (*calls)++;
  g_free(values);
}

/* The values (and row ranks) freed while the shape, labels and absent marks stay, for every kind
 * of ownership, and knnwb_matrix_free afterwards frees nothing twice (the sanitizer builds see a
 * double free or a leak). */
static void test_release_values(void)
{
  /* owned */
  KnnwbMatrix *owned = knnwb_matrix_new(3, 2, NULL);
  knnwb_matrix_set_row_label(owned, 1, "b");
  knnwb_matrix_set_col_label(owned, 0, "c0");
  knnwb_matrix_set_row_absent(owned, 2);
  knnwb_matrix_take_row_ranks(owned, g_new0(float, 6));
  knnwb_matrix_release_values(owned);
  g_assert_null(owned->values);
  g_assert_null(knnwb_matrix_row_ranks(owned));
  g_assert_cmpuint(owned->n_rows, ==, 3);
  g_assert_cmpuint(owned->n_cols, ==, 2);
  g_assert_cmpstr(knnwb_matrix_row_label(owned, 1), ==, "b");
  g_assert_cmpstr(owned->col_labels[0], ==, "c0");
  g_assert_true(knnwb_matrix_row_is_absent(owned, 2));
  knnwb_matrix_release_values(owned); /* again: nothing */
  knnwb_matrix_free(owned);
  /* wrapped with a destroy function: called once, with the values and their bytes */
  int calls = 0;
  KnnwbMatrix *wrapped = knnwb_matrix_new_wrapped(3, 2, g_new0(float, 6), count_destroy, &calls);
  knnwb_matrix_release_values(wrapped);
  g_assert_cmpint(calls, ==, 1);
  g_assert_null(wrapped->values);
  knnwb_matrix_release_values(wrapped);
  knnwb_matrix_free(wrapped);
  g_assert_cmpint(calls, ==, 1);
  /* borrowed: let go of, never freed */
  float borrowed_values[6] = {1, 2, 3, 4, 5, 6};
  KnnwbMatrix *borrowed = knnwb_matrix_new_wrapped(3, 2, borrowed_values, NULL, NULL);
  knnwb_matrix_release_values(borrowed);
  g_assert_null(borrowed->values);
  knnwb_matrix_free(borrowed);
  g_assert_cmpfloat(borrowed_values[5], ==, 6.0f);
  /* a block of a whole: the whole's values go, its labels stay until the block is freed */
  KnnwbMatrix *whole = knnwb_matrix_new(5, 2, NULL);
  for (size_t i = 0; i < 5; i++) {
    g_autofree char *label = g_strdup_printf("r%zu", i);
    knnwb_matrix_set_row_label(whole, i, label);
  }
  knnwb_matrix_take_row_ranks(whole, g_new0(float, 10));
  KnnwbMatrix *block = knnwb_matrix_new_block_of(whole, 1, 3);
  knnwb_matrix_set_row_label(block, 0, "own");
  const char *const *labels = (const char *const *)whole->row_labels;
  knnwb_matrix_release_values(block);
  g_assert_null(block->values);
  size_t first = 0;
  g_assert_true(knnwb_matrix_whole_of(block, &first) == whole);
  g_assert_cmpuint(first, ==, 1);
  g_assert_null(whole->values);
  g_assert_null(knnwb_matrix_row_ranks(whole));
  g_assert_cmpuint(whole->n_rows, ==, 5);
  g_assert_cmpstr(labels[4], ==, "r4");
  g_assert_cmpstr(knnwb_matrix_row_label(block, 0), ==, "own");
  g_assert_cmpuint(block->n_rows, ==, 3);
  knnwb_matrix_release_values(block);
  knnwb_matrix_free(block);
  knnwb_matrix_release_values(NULL);
}

/* A row appended (knnwb_matrix_append_row) to a matrix with every per-row attribute: each grows
 * by one entry (the sanitizer builds see a read past a shorter one), the rows before keep theirs,
 * the new row has its values, its values' average ranks where the matrix kept ranks, and no
 * label, class, annotation or absent mark; for owned values (grown in place), wrapped values
 * (copied, the old ones destroyed once) and a block of a whole matrix. */
static void check_appended(const KnnwbMatrix *m, const float *row)
{
  g_assert_cmpuint(m->n_rows, ==, 4);
  g_assert_cmpuint(m->n_cols, ==, 3);
  for (size_t i = 0; i < 9; i++)
    g_assert_cmpfloat(m->values[i], ==, (float)i);
  g_assert_cmpmem(m->values + 9, 3 * sizeof(float), row, 3 * sizeof(float));
  g_assert_cmpstr(knnwb_matrix_row_label(m, 1), ==, "b");
  g_assert_null(knnwb_matrix_row_label(m, 3));
  g_assert_cmpstr(m->row_classes[0], ==, "x");
  g_assert_null(m->row_classes[3]);
  g_assert_cmpstr(m->col_labels[2], ==, "c2");
  g_assert_true(knnwb_matrix_row_is_absent(m, 2));
  g_assert_false(knnwb_matrix_row_is_absent(m, 3));
  g_assert_cmpuint(m->n_absent_rows, ==, 1);
  const char *const *tissue = knnwb_matrix_annotation(m, KNNWB_MATRIX_ROWS, "tissue");
  g_assert_cmpstr(tissue[2], ==, "liver");
  g_assert_null(tissue[3]);
  g_assert_cmpstr(knnwb_matrix_annotation(m, KNNWB_MATRIX_COLUMNS, "age")[1], ==, "40");
  const float *ranks = knnwb_matrix_row_ranks(m);
  g_assert_nonnull(ranks);
  g_assert_cmpfloat(ranks[4], ==, 7.0f);
  /* 5, -1, 5: ranks 2.5, 1, 2.5 */
  g_assert_cmpfloat(ranks[9], ==, 2.5f);
  g_assert_cmpfloat(ranks[10], ==, 1.0f);
  g_assert_cmpfloat(ranks[11], ==, 2.5f);
}

static void fill_for_append(KnnwbMatrix *m)
{
  for (size_t i = 0; i < 9; i++)
    m->values[i] = (float)i;
  knnwb_matrix_set_row_label(m, 1, "b");
  knnwb_matrix_set_row_class(m, 0, "x");
  knnwb_matrix_set_col_label(m, 2, "c2");
  knnwb_matrix_set_row_absent(m, 2);
  knnwb_matrix_set_annotation(m, KNNWB_MATRIX_ROWS, "tissue", 2, "liver");
  knnwb_matrix_set_annotation(m, KNNWB_MATRIX_COLUMNS, "age", 1, "40");
  float *ranks = g_new(float, 9);
  for (size_t i = 0; i < 9; i++)
    ranks[i] = (float)(i + 3);
  knnwb_matrix_take_row_ranks(m, ranks);
}

/* As count_destroy, for the 3 x 3 matrices of test_append_row. */
static void count_destroy_nine(void *values, size_t n_bytes, void *data)
{
  int *calls = data;
  g_assert_cmpuint(n_bytes, ==, 9 * sizeof(float));
  (*calls)++;
  g_free(values);
}

static void test_append_row(void)
{
  const float row[3] = {5, -1, 5};
  g_autoptr(GError) error = NULL;
  /* owned */
  KnnwbMatrix *owned = knnwb_matrix_new(3, 3, NULL);
  fill_for_append(owned);
  KnnwbMatrix *same = owned;
  g_assert_true(knnwb_matrix_append_row(&owned, row, &error));
  g_assert_no_error(error);
  g_assert_true(owned == same);
  check_appended(owned, row);
  knnwb_matrix_free(owned);
  /* wrapped with a destroy function: copied, the old values destroyed once */
  int calls = 0;
  KnnwbMatrix *wrapped =
      knnwb_matrix_new_wrapped(3, 3, g_new0(float, 9), count_destroy_nine, &calls);
  fill_for_append(wrapped);
  g_assert_true(knnwb_matrix_append_row(&wrapped, row, &error));
  g_assert_cmpint(calls, ==, 1);
  check_appended(wrapped, row);
  knnwb_matrix_free(wrapped);
  g_assert_cmpint(calls, ==, 1);
  /* a block of a whole matrix: copied, the whole freed with the old block */
  KnnwbMatrix *whole = knnwb_matrix_new(5, 3, NULL);
  KnnwbMatrix *block = knnwb_matrix_new_block_of(whole, 1, 3);
  fill_for_append(block);
  g_assert_true(knnwb_matrix_append_row(&block, row, &error));
  check_appended(block, row);
  size_t first;
  g_assert_null(knnwb_matrix_whole_of(block, &first));
  knnwb_matrix_free(block);
  /* a matrix without any per-row array: none made */
  KnnwbMatrix *plain = knnwb_matrix_new(2, 3, NULL);
  g_assert_true(knnwb_matrix_append_row(&plain, row, &error));
  g_assert_cmpuint(plain->n_rows, ==, 3);
  g_assert_null(plain->row_labels);
  g_assert_null(knnwb_matrix_row_ranks(plain));
  g_assert_false(knnwb_matrix_row_is_absent(plain, 2));
  g_assert_cmpfloat(plain->values[7], ==, -1.0f);
  knnwb_matrix_free(plain);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/matrix/transpose-and-labels", test_transpose_and_labels);
  g_test_add_func("/matrix/select-rows", test_select_rows);
  g_test_add_func("/matrix/block-of", test_block_of);
  g_test_add_func("/matrix/release-values", test_release_values);
  g_test_add_func("/matrix/append-row", test_append_row);
  g_test_add_func("/matrix/match-columns", test_match_columns);
  g_test_add_func("/matrix/finite-and-overflow", test_finite_and_overflow);
  return g_test_run();
}
