/* The duplicate-row search (core/engine/duplicates.c) against an independent grouping: a hash table
 * keyed on each row's bytes. */
#include <string.h>
#include <knnwb/knnwb.h>
#include "engine/engine_internal.h"

/* A table keyed on a row's bytes (d floats). */
static guint row_hash(gconstpointer key)
{
  const GBytes *bytes = key;
  return g_bytes_hash(bytes);
}

/*
 * n rows drawn from a small alphabet (values 0..levels-1 in d columns), so that groups of every
 * size occur, some rows are unique and copies lie far apart; then each row's group is checked: the
 * representative is the first row with the same bytes, representatives increase and are the
 * groups' first rows, members list each group's rows in order. With 1, 2 and 7 threads, and sizes
 * around the bucket and chunk boundaries of the parallel grouping (one bucket below 512 rows, 2^16
 * buckets from 32 M, chunks of at least 16,384 rows). Odd seeds hand the search hashes made
 * beforehand (knnwb_duplicates_find_hashed, as a self search's prepare pass does); seeds 3 mod 4
 * weak ones, equal for many rows that are not copies.
 */
static void check_duplicates(size_t n, size_t d, int levels, guint32 seed, int threads)
{
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, d, NULL);
  g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
  for (size_t c = 0; c < n * d; c++)
    m->values[c] = (float)g_rand_int_range(rng, 0, levels);
  /* -0.0 and 0.0 compare equal but are different bytes: different rows for this search. */
  if (n > 3) {
    memset(m->values, 0, d * sizeof(float));
    memset(m->values + d, 0, d * sizeof(float));
    m->values[d] = -0.0f;
  }
  KnnwbDuplicates duplicates;
  g_autoptr(GError) error = NULL;
  /* odd seeds: the hashes made beforehand, as the prepare pass makes them */
  g_autofree guint64 *hashes = seed % 2 ? g_new(guint64, n) : NULL;
  /* seeds 3 mod 4: hashes that repeat for rows that are not copies (three values under the top
   * bits), so that buckets hold equal hashes whose rows only their bytes tell apart */
  for (size_t i = 0; hashes != NULL && i < n; i++) {
    const guint64 hash = knnwb_duplicates_row_hash(m, m->values, i);
    hashes[i] = seed % 4 == 3 ? (hash >> 61 << 61) | (hash % 3) : hash;
  }
  g_assert_true(knnwb_duplicates_find_hashed(m, KNNWB_METRIC_EUCLIDEAN, hashes, threads, NULL,
                                             &duplicates, &error));
  g_assert_no_error(error);

  g_autoptr(GHashTable) first =
      g_hash_table_new_full(row_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL);
  g_autofree int64_t *expected = g_new(int64_t, n);
  size_t n_unique = 0;
  for (size_t i = 0; i < n; i++) {
    GBytes *key = g_bytes_new(m->values + i * d, d * sizeof(float));
    gpointer value = NULL;
    if (g_hash_table_lookup_extended(first, key, NULL, &value)) {
      expected[i] = GPOINTER_TO_SIZE(value) - 1;
      g_bytes_unref(key);
    } else {
      expected[i] = (int64_t)i;
      g_hash_table_insert(first, key, GSIZE_TO_POINTER(i + 1));
      n_unique++;
    }
  }
  g_assert_cmpuint(duplicates.n_unique, ==, n_unique);
  if (n_unique == n) {
    g_assert_null(duplicates.group_of);
  } else {
    for (size_t g = 0; g < n_unique; g++) {
      int64_t r = duplicates.representative[g];
      g_assert_cmpint(expected[r], ==, r);
      if (g > 0)
        g_assert_cmpint(r, >, duplicates.representative[g - 1]);
      g_assert_cmpuint(duplicates.group_start[g], <, duplicates.group_start[g + 1]);
      g_assert_cmpint(duplicates.members[duplicates.group_start[g]], ==, r);
      for (size_t t = duplicates.group_start[g] + 1; t < duplicates.group_start[g + 1]; t++)
        g_assert_cmpint(duplicates.members[t], >, duplicates.members[t - 1]);
    }
    g_assert_cmpuint(duplicates.group_start[n_unique], ==, n);
    for (size_t i = 0; i < n; i++)
      g_assert_cmpint(duplicates.representative[duplicates.group_of[i]], ==, expected[i]);
  }
  knnwb_duplicates_clear(&duplicates);
}

static void test_duplicates_groups(void)
{
  const int threads[] = {1, 2, 7};
  for (size_t t = 0; t < G_N_ELEMENTS(threads); t++) {
    check_duplicates(2, 3, 1, 1, threads[t]);        /* one pair of copies */
    check_duplicates(5, 3, 2, 2, threads[t]);        /* -0.0 apart */
    check_duplicates(511, 4, 3, 3, threads[t]);      /* one bucket */
    check_duplicates(1025, 2, 9, 4, threads[t]);     /* 2 buckets, groups of all sizes */
    check_duplicates(70001, 3, 40, 5, threads[t]);   /* 128 buckets, 4 chunks: a third unique */
    check_duplicates(40003, 5, 1000, 6, threads[t]); /* no copies at all */
    check_duplicates(33000, 1, 1, 7, threads[t]);    /* every row the same */
    /* rows of whole 32-byte blocks of the hash's four chains, and blocks with a tail */
    check_duplicates(3001, 8, 3, 9, threads[t]);
    check_duplicates(3001, 9, 2, 11, threads[t]);
    check_duplicates(2003, 41, 1, 8, threads[t]);
  }
}

/* The search follows the cancel flag (0.5 s at 1,533,876 rows: a Ctrl-C during it waited for all
 * of it): a raised flag gives CANCELLED with nothing left to free, with 1 and 2 threads; a lowered
 * one groups as without a flag. */
static void test_duplicates_cancelled(void)
{
  const size_t n = 70001, d = 3;
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, d, NULL);
  g_autoptr(GRand) rng = g_rand_new_with_seed(11);
  for (size_t c = 0; c < n * d; c++)
    m->values[c] = (float)g_rand_int_range(rng, 0, 40);
  KnnwbDuplicates plain;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_duplicates_find(m, KNNWB_METRIC_EUCLIDEAN, 1, NULL, &plain, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(plain.n_unique, <, n);
  for (int threads = 1; threads <= 2; threads++) {
    KnnwbDuplicates duplicates;
    gint cancel = 1;
    g_assert_false(
        knnwb_duplicates_find(m, KNNWB_METRIC_EUCLIDEAN, threads, &cancel, &duplicates, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
    g_clear_error(&error);
    g_assert_null(duplicates.representative);
    g_assert_null(duplicates.group_of);
    g_assert_null(duplicates.members);
    g_assert_null(duplicates.group_start);
    cancel = 0;
    g_assert_true(
        knnwb_duplicates_find(m, KNNWB_METRIC_EUCLIDEAN, threads, &cancel, &duplicates, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(duplicates.n_unique, ==, plain.n_unique);
    g_assert_cmpmem(duplicates.group_of, n * sizeof(int64_t), plain.group_of, n * sizeof(int64_t));
    g_assert_cmpmem(duplicates.members, n * sizeof(int64_t), plain.members, n * sizeof(int64_t));
    knnwb_duplicates_clear(&duplicates);
  }
  knnwb_duplicates_clear(&plain);
}

typedef struct {
  gint *cancel;
  gint64 delay; /* microseconds */
} RaiseLater;

static gpointer raise_later(gpointer data)
{
  RaiseLater *r = data;
  g_usleep((gulong)r->delay);
  g_atomic_int_set(r->cancel, 1);
  return NULL;
}

/* Every row the same: one bucket, whose sort and comparisons run on one thread and take most of
 * the search. A flag raised from another thread at several points of a search (the first third
 * hashes, the rest sorts and compares that one bucket) either finds the search done, with the one
 * group whole, or stops it with CANCELLED and nothing kept: never a half-grouped result. (How soon
 * it stops is measured, not asserted: 10 ms against 0.2 s before the bucket polled.) */
static void test_duplicates_cancelled_one_bucket(void)
{
  const size_t n = (size_t)1 << 20, d = 1;
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, d, NULL);
  for (size_t i = 0; i < n; i++)
    m->values[i] = 1.5f;
  KnnwbDuplicates duplicates;
  g_autoptr(GError) error = NULL;
  gint64 start = g_get_monotonic_time();
  g_assert_true(knnwb_duplicates_find(m, KNNWB_METRIC_EUCLIDEAN, 2, NULL, &duplicates, &error));
  const gint64 whole = MAX(g_get_monotonic_time() - start, 1);
  g_assert_cmpuint(duplicates.n_unique, ==, 1);
  knnwb_duplicates_clear(&duplicates);
  for (int part = 1; part <= 5; part++) {
    gint cancel = 0;
    RaiseLater raise = {&cancel, whole * part / 6};
    start = g_get_monotonic_time();
    GThread *thread = g_thread_new("raise", raise_later, &raise);
    const gboolean ok =
        knnwb_duplicates_find(m, KNNWB_METRIC_EUCLIDEAN, 2, &cancel, &duplicates, &error);
    const gint64 end = g_get_monotonic_time();
    g_thread_join(thread);
    g_test_message("flag raised after %.3f s: %s after %.3f s", raise.delay / 1e6,
                   ok ? "done" : "cancelled", (end - start) / 1e6);
    if (ok) {
      g_assert_cmpuint(duplicates.n_unique, ==, 1);
      for (size_t i = 0; i < n; i++)
        g_assert_cmpint(duplicates.group_of[i], ==, 0);
      knnwb_duplicates_clear(&duplicates);
    } else {
      g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
      g_assert_null(duplicates.group_of);
      g_clear_error(&error);
    }
  }
}

/* Absent rows (zeros, left out of the search) are copies of each other only, not of rows of
 * zeros that are present: rows 0 and 2 one group, the absent rows 1 and 3 another. */
static void test_duplicates_absent(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(4, 3, NULL);
  knnwb_matrix_set_row_absent(m, 1);
  knnwb_matrix_set_row_absent(m, 3);
  for (int threads = 1; threads <= 2; threads++) {
    KnnwbDuplicates duplicates;
    g_autoptr(GError) error = NULL;
    g_assert_true(
        knnwb_duplicates_find(m, KNNWB_METRIC_EUCLIDEAN, threads, NULL, &duplicates, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(duplicates.n_unique, ==, 2);
    g_assert_cmpmem(duplicates.representative, 2 * sizeof(int64_t), ((const int64_t[]){0, 1}),
                    2 * sizeof(int64_t));
    g_assert_cmpmem(duplicates.group_of, 4 * sizeof(int64_t), ((const int64_t[]){0, 1, 0, 1}),
                    4 * sizeof(int64_t));
    knnwb_duplicates_clear(&duplicates);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/duplicates/groups", test_duplicates_groups);
  g_test_add_func("/duplicates/cancelled", test_duplicates_cancelled);
  g_test_add_func("/duplicates/cancelled-one-bucket", test_duplicates_cancelled_one_bucket);
  g_test_add_func("/duplicates/absent", test_duplicates_absent);
  return g_test_run();
}
