/*
 * Exact duplicate rows, found up front by hashing so that they cost nothing. Copies of a row are at
 * one and the same distance from every row (their inputs to every distance computation are the
 * same bytes), so a self kNN graph of the distinct rows, with k neighbours each, determines the
 * lists of all rows: a row's neighbours are the other copies of itself and the copies of its
 * distinct neighbours, merged by (distance, row index). Without this, a group of copies larger
 * than the candidate margin ties at the k-th distance, can never be certified by the float bound,
 * and is re-selected with ever more candidates, up to every row (20,000 copies took 57 s and
 * 4.7 GB).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include "knn_internal.h"

typedef struct {
  const KnnwbMatrix *data;
  guint64 *hash;
} KnnwbHashLoop;

/* FNV-1a over the row's bytes, 8 at a time: cheap next to the search, and collisions are harmless
 * (equal hashes are compared byte for byte). */
static void knnwb_duplicates_hash_rows(size_t first, size_t last, void *user)
{
  KnnwbHashLoop *loop = user;
  const size_t d = loop->data->n_cols;
  for (size_t i = first; i < last; i++) {
    const unsigned char *bytes = (const unsigned char *)(loop->data->values + i * d);
    guint64 h = 14695981039346656037ull;
    size_t n_bytes = d * sizeof(float), b = 0;
    for (; b + 8 <= n_bytes; b += 8) {
      guint64 word;
      memcpy(&word, bytes + b, 8);
      h = (h ^ word) * 1099511628211ull;
      h ^= h >> 29;
    }
    for (; b < n_bytes; b++)
      h = (h ^ bytes[b]) * 1099511628211ull;
    loop->hash[i] = h;
  }
}

/*
 * order[0 .. n) = the rows 0 .. n-1 sorted by (hash, row): a stable LSD radix sort on the 64-bit
 * hashes of rows given in row order, 8 passes of 8 bits (passes whose byte is the same in every
 * hash are skipped). O(n) time and 2 n (hash, row) pairs of scratch; FALSE when that is not
 * available. Replaces qsort_r with a comparator reading hash[] at random (about 0.25 s at
 * 1.5 M rows, single-threaded, before every search).
 */
static gboolean knnwb_duplicates_sort(const guint64 *hash, size_t n, int64_t *order)
{
  typedef struct {
    guint64 hash;
    int64_t row;
  } Pair;
  Pair *a = g_try_malloc(n * sizeof(Pair)), *b = g_try_malloc(n * sizeof(Pair));
  if (a == NULL || b == NULL) {
    g_free(a);
    g_free(b);
    return FALSE;
  }
  for (size_t i = 0; i < n; i++)
    a[i] = (Pair){hash[i], (int64_t)i};
  for (int shift = 0; shift < 64; shift += 8) {
    size_t count[256] = {0};
    for (size_t i = 0; i < n; i++)
      count[(a[i].hash >> shift) & 0xff]++;
    if (count[(a[0].hash >> shift) & 0xff] == n)
      continue; /* every hash has this byte: the pass would not move anything */
    size_t start = 0;
    for (int digit = 0; digit < 256; digit++) {
      size_t c = count[digit];
      count[digit] = start;
      start += c;
    }
    for (size_t i = 0; i < n; i++)
      b[count[(a[i].hash >> shift) & 0xff]++] = a[i];
    Pair *t = a;
    a = b;
    b = t;
  }
  for (size_t i = 0; i < n; i++)
    order[i] = a[i].row;
  g_free(a);
  g_free(b);
  return TRUE;
}

void knnwb_duplicates_clear(KnnwbDuplicates *duplicates)
{
  g_free(duplicates->representative);
  g_free(duplicates->group_of);
  g_free(duplicates->members);
  g_free(duplicates->group_start);
  memset(duplicates, 0, sizeof *duplicates);
}

gboolean knnwb_duplicates_find(const KnnwbMatrix *data, int n_threads, KnnwbDuplicates *duplicates,
                               GError **error)
{
  memset(duplicates, 0, sizeof *duplicates);
  const size_t n = data->n_rows, d = data->n_cols;
  duplicates->n_unique = n;
  if (n < 2)
    return TRUE;
  guint64 *hash = g_try_malloc(n * sizeof(guint64));
  int64_t *order = g_try_malloc(n * sizeof(int64_t));
  int64_t *group_of = g_try_malloc(n * sizeof(int64_t));
  if (hash == NULL || order == NULL || group_of == NULL) {
    g_free(hash);
    g_free(order);
    g_free(group_of);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the row hashes of %zu rows", n);
    return FALSE;
  }
  KnnwbHashLoop loop = {data, hash};
  knnwb_parallel_for(n_threads, n, 4096, knnwb_duplicates_hash_rows, &loop);
  if (!knnwb_duplicates_sort(hash, n, order)) {
    g_free(hash);
    g_free(order);
    g_free(group_of);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the row hashes of %zu rows", n);
    return FALSE;
  }

  /* Within a run of equal hashes (in row order), each row joins the first earlier row with the
   * same bytes, or is the first of its group. group_of holds the representative row for now. */
  size_t n_unique = 0;
  for (size_t start = 0; start < n;) {
    size_t end = start + 1;
    while (end < n && hash[order[end]] == hash[order[start]])
      end++;
    for (size_t a = start; a < end; a++) {
      int64_t i = order[a];
      group_of[i] = i;
      for (size_t b = start; b < a; b++) {
        int64_t j = order[b];
        if (group_of[j] == j && memcmp(data->values + (size_t)i * d, data->values + (size_t)j * d,
                                       d * sizeof(float)) == 0) {
          group_of[i] = j;
          break;
        }
      }
      if (group_of[i] == i)
        n_unique++;
    }
    start = end;
  }
  g_free(hash);
  g_free(order);
  duplicates->n_unique = n_unique;
  if (n_unique == n) {
    g_free(group_of);
    return TRUE;
  }
  /* Groups numbered in the order of their first rows, so the distinct rows keep the data's order
   * and ties broken by distinct-row index are ties broken by row index. Members by row index. */
  const char *what = "the duplicate groups";
  size_t *fill = NULL;
  if ((duplicates->representative =
           knnwb_try_new_array(n_unique, sizeof(int64_t), what, n, error)) == NULL ||
      (duplicates->group_start =
           knnwb_try_new0_array(n_unique + 1, sizeof(size_t), what, n, error)) == NULL ||
      (duplicates->members = knnwb_try_new_array(n, sizeof(int64_t), what, n, error)) == NULL ||
      (fill = knnwb_try_new_array(n_unique, sizeof(size_t), what, n, error)) == NULL) {
    g_free(group_of);
    knnwb_duplicates_clear(duplicates);
    return FALSE;
  }
  size_t next = 0;
  for (size_t i = 0; i < n; i++) {
    if (group_of[i] == (int64_t)i) {
      duplicates->representative[next] = (int64_t)i;
      group_of[i] = (int64_t)next++;
    } else {
      group_of[i] = group_of[group_of[i]]; /* the representative came first: already numbered */
    }
    duplicates->group_start[group_of[i] + 1]++;
  }
  for (size_t g = 0; g < n_unique; g++)
    duplicates->group_start[g + 1] += duplicates->group_start[g];
  memcpy(fill, duplicates->group_start, n_unique * sizeof(size_t));
  for (size_t i = 0; i < n; i++)
    duplicates->members[fill[group_of[i]]++] = (int64_t)i;
  g_free(fill);
  duplicates->group_of = group_of;
  return TRUE;
}

static gboolean knnwb_gather(void **out, const void *from, size_t item_bytes, const int64_t *rows,
                             size_t n_rows)
{
  *out = NULL;
  if (from == NULL)
    return TRUE;
  char *to = g_try_malloc(MAX(n_rows * item_bytes, (size_t)1));
  if (to == NULL)
    return FALSE;
  for (size_t t = 0; t < n_rows; t++)
    memcpy(to + t * item_bytes, (const char *)from + (size_t)rows[t] * item_bytes, item_bytes);
  *out = to;
  return TRUE;
}

gboolean knnwb_prepared_gather(KnnwbPrepared *out, const KnnwbPrepared *from, const int64_t *rows,
                               size_t n_rows, GError **error)
{
  memset(out, 0, sizeof *out);
  const size_t d = from->d;
  out->metric = from->metric;
  out->n = n_rows;
  out->d = d;
  out->max_norm = from->max_norm;
  out->scale_exponent = from->scale_exponent;
  out->score_scale = from->score_scale;
  gboolean ok = TRUE;
  void *exact = NULL, *scored = NULL;
  /* The gathered exact rows live in ranks_owned (what knnwb_prepared_clear frees for them). */
  ok = ok && knnwb_gather(&exact, from->exact, d * sizeof(float), rows, n_rows);
  out->ranks_owned = exact;
  out->exact = exact;
  if (from->scored == from->exact) {
    out->scored = exact;
  } else {
    ok = ok && knnwb_gather(&scored, from->scored, d * sizeof(float), rows, n_rows);
    out->scored_owned = scored;
    out->scored = scored;
  }
  ok = ok && knnwb_gather((void **)&out->sqnorms, from->sqnorms, sizeof(float), rows, n_rows);
  ok = ok && knnwb_gather((void **)&out->mean, from->mean, sizeof(double), rows, n_rows);
  ok = ok &&
       knnwb_gather((void **)&out->sum_squares, from->sum_squares, sizeof(double), rows, n_rows);
  ok = ok && knnwb_gather((void **)&out->norm, from->norm, sizeof(double), rows, n_rows);
  if (ok && from->column_mean != NULL) {
    out->column_mean = g_try_malloc(MAX(d, (size_t)1) * sizeof(double));
    ok = out->column_mean != NULL;
    if (ok)
      memcpy(out->column_mean, from->column_mean, d * sizeof(double));
  }
  if (ok && from->invalid != NULL) {
    ok = knnwb_gather((void **)&out->invalid, from->invalid, 1, rows, n_rows);
    for (size_t t = 0; ok && t < n_rows; t++)
      out->n_invalid += out->invalid[t] != 0;
  }
  if (!ok) {
    knnwb_prepared_clear(out);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the prepared copy of %zu distinct rows", n_rows);
  }
  return ok;
}

typedef struct {
  const KnnwbDuplicates *duplicates;
  const KnnwbPrepared *prepared;  /* all rows */
  const KnnwbNeighbors *distinct; /* the distinct rows' lists, or NULL when there is one */
  KnnwbNeighbors *result;
} KnnwbExpandLoop;

typedef struct {
  double distance;
  int64_t index;
} KnnwbExpandItem;

static int knnwb_expand_compare(const void *a, const void *b)
{
  const KnnwbExpandItem *x = a, *y = b;
  if (x->distance != y->distance)
    return x->distance < y->distance ? -1 : 1;
  return x->index < y->index ? -1 : (x->index > y->index);
}

/* Adds up to limit members of group g (by row index, skipping skip) at distance. */
static size_t knnwb_expand_add(const KnnwbDuplicates *duplicates, size_t g, int64_t skip,
                               double distance, size_t limit, GArray *items)
{
  size_t added = 0;
  for (size_t m = duplicates->group_start[g]; m < duplicates->group_start[g + 1] && added < limit;
       m++) {
    int64_t row = duplicates->members[m];
    if (row == skip)
      continue;
    KnnwbExpandItem item = {distance, row};
    g_array_append_val(items, item);
    added++;
  }
  return added;
}

/* The k best items by (distance, index) into a list of k slots (the rest empty); returns how
 * many were found. */
static size_t knnwb_expand_write(GArray *items, size_t k, int64_t *out_index, double *out_distance)
{
  g_array_sort(items, knnwb_expand_compare);
  const KnnwbExpandItem *sorted = (const KnnwbExpandItem *)(void *)items->data;
  size_t kept = MIN(k, (size_t)items->len);
  for (size_t r = 0; r < k; r++) {
    out_index[r] = r < kept ? sorted[r].index : -1;
    out_distance[r] = r < kept ? sorted[r].distance : INFINITY;
  }
  return kept;
}

static void knnwb_duplicates_expand_rows(size_t first, size_t last, void *user)
{
  KnnwbExpandLoop *loop = user;
  const KnnwbDuplicates *duplicates = loop->duplicates;
  KnnwbNeighbors *result = loop->result;
  const size_t k = result->k;
  GArray *items = g_array_new(FALSE, FALSE, sizeof(KnnwbExpandItem));
  for (size_t i = first; i < last; i++) {
    int64_t *out_index = result->indices + i * k;
    double *out_distance = result->distances + i * k;
    size_t g = (size_t)duplicates->group_of[i];
    if (loop->prepared->invalid != NULL && loop->prepared->invalid[i]) {
      for (size_t r = 0; r < k; r++) {
        out_index[r] = -1;
        out_distance[r] = INFINITY;
      }
      result->n_found[i] = 0;
      continue;
    }
    /* Groups in order of distance: the row's own copies (at the distance of a row to an identical
     * one) and its distinct neighbours' groups. Every group at or before the distance where k rows
     * are reached takes part, each with at most k members: the k first by (distance, index) are
     * among them (ties at that distance go to the groups whose first rows come first, which the
     * distinct lists keep in order). */
    g_array_set_size(items, 0);
    int64_t representative = duplicates->representative[g];
    double own = knnwb_prepared_distance(loop->prepared, (size_t)representative, loop->prepared,
                                         (size_t)representative);
    gboolean own_done = FALSE;
    size_t count = 0, r = 0;
    double threshold = INFINITY;
    const size_t n_distinct = loop->distinct ? (size_t)loop->distinct->n_found[g] : 0;
    for (;;) {
      double next =
          r < n_distinct ? loop->distinct->distances[g * loop->distinct->k + r] : INFINITY;
      gboolean take_own = !own_done && own <= next;
      if (!take_own && r == n_distinct)
        break;
      double distance = take_own ? own : next;
      if (distance > threshold)
        break;
      if (take_own) {
        count += knnwb_expand_add(duplicates, g, (int64_t)i, own, k, items);
        own_done = TRUE;
      } else {
        size_t h = (size_t)loop->distinct->indices[g * loop->distinct->k + r];
        count += knnwb_expand_add(duplicates, h, -1, next, k, items);
        r++;
      }
      if (count >= k && threshold == INFINITY)
        threshold = distance;
    }
    result->n_found[i] = (int32_t)knnwb_expand_write(items, k, out_index, out_distance);
  }
  g_array_free(items, TRUE);
}

/* Query rows: no own copies; otherwise as knnwb_duplicates_expand_rows. Every group at or before
 * the distance where k rows are reached takes part, each with at most k members. Groups cut off
 * from the distinct list at the last listed distance come after every listed group at that
 * distance (the engine breaks ties by distinct index, which follows the groups' first rows), and
 * the listed groups' first rows alone fill k places before any of theirs: so the first k rows by
 * (distance, index) are among the groups taken. */
static void knnwb_duplicates_expand_query_rows(size_t first, size_t last, void *user)
{
  KnnwbExpandLoop *loop = user;
  const KnnwbDuplicates *duplicates = loop->duplicates;
  const KnnwbNeighbors *distinct = loop->distinct;
  KnnwbNeighbors *result = loop->result;
  const size_t k = result->k, kd = distinct->k;
  GArray *items = g_array_new(FALSE, FALSE, sizeof(KnnwbExpandItem));
  for (size_t i = first; i < last; i++) {
    g_array_set_size(items, 0);
    size_t count = 0;
    double threshold = INFINITY;
    for (size_t r = 0; r < (size_t)distinct->n_found[i]; r++) {
      double distance = distinct->distances[i * kd + r];
      if (distance > threshold)
        break;
      size_t h = (size_t)distinct->indices[i * kd + r];
      count += knnwb_expand_add(duplicates, h, -1, distance, k, items);
      if (count >= k && threshold == INFINITY)
        threshold = distance;
    }
    result->n_found[i] =
        (int32_t)knnwb_expand_write(items, k, result->indices + i * k, result->distances + i * k);
  }
  g_array_free(items, TRUE);
}

void knnwb_duplicates_expand_query(const KnnwbDuplicates *duplicates,
                                   const KnnwbNeighbors *distinct, int n_threads,
                                   KnnwbNeighbors *result)
{
  KnnwbExpandLoop loop = {duplicates, NULL, distinct, result};
  knnwb_parallel_for(n_threads, result->n_queries, 1024, knnwb_duplicates_expand_query_rows, &loop);
}

void knnwb_duplicates_expand(const KnnwbDuplicates *duplicates, const KnnwbPrepared *prepared,
                             const KnnwbNeighbors *distinct, int n_threads, KnnwbNeighbors *result)
{
  KnnwbExpandLoop loop = {duplicates, prepared, distinct, result};
  knnwb_parallel_for(n_threads, prepared->n, 1024, knnwb_duplicates_expand_rows, &loop);
}
