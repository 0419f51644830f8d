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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "engine/engine_internal.h"

/* Polled every this many rows, and every this many steps of a bucket's sort and comparisons (one
 * bucket can hold every row: all of them copies of one row): 1,533,876 rows take 0.5 s in all, so
 * a raised flag is seen within a few ms. */
#define KNNWB_DUPLICATES_POLL_ROWS 4096

/* Whether the search should stop: the caller's flag was raised (then every worker is told through
 * cancelled, so the others leave their chunks at their next poll too). */
static gboolean knnwb_duplicates_stop(const volatile gint *cancel, gint *cancelled)
{
  if (g_atomic_int_get(cancelled))
    return TRUE;
  if (cancel != NULL && g_atomic_int_get(cancel) != 0) {
    g_atomic_int_set(cancelled, 1);
    return TRUE;
  }
  return FALSE;
}

typedef struct {
  const KnnwbMatrix *data;
  guint64 *hash;
  const volatile gint *cancel;
  gint cancelled;
  const float *values; /* the rows compared (see knnwb_duplicates_find) */
} KnnwbHashLoop;

const float *knnwb_duplicates_values(const KnnwbMatrix *data, KnnwbMetric metric)
{
  /* spearman on the ranks a reader kept: rows with the same ranks are copies for the metric,
   * and rows whose float32 values agree may not be (their values as read differ). */
  const float *ranks = knnwb_matrix_row_ranks(data);
  return metric == KNNWB_METRIC_SPEARMAN && ranks ? ranks : data->values;
}

/* Four FNV-style chains over the row's 8-byte words in turn (independent multiplications, so a
 * row costs a quarter of one chain's latency: the hashes are made in the prepare pass, beside its
 * arithmetic), folded and finished by a 64-bit avalanche (murmur3's), whose top bits pick the
 * bucket. Collisions are harmless (equal hashes are compared byte for byte). */
guint64 knnwb_duplicates_row_hash(const KnnwbMatrix *data, const float *values, size_t i)
{
  const size_t n_bytes = data->n_cols * sizeof(float);
  const unsigned char *bytes = (const unsigned char *)(values + i * data->n_cols);
  const guint64 prime = 1099511628211ull;
  guint64 h[4] = {14695981039346656037ull, 0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full,
                  0x165667b19e3779f9ull};
  size_t b = 0;
  for (; b + 32 <= n_bytes; b += 32)
    for (int l = 0; l < 4; l++) {
      guint64 word;
      memcpy(&word, bytes + b + 8 * l, 8);
      h[l] = (h[l] ^ word) * prime;
      h[l] ^= h[l] >> 29;
    }
  guint64 x = h[0];
  for (int l = 1; l < 4; l++)
    x = ((x ^ h[l]) * prime) ^ (x >> 31);
  for (; b < n_bytes; b++)
    x = (x ^ bytes[b]) * prime;
  x ^= (guint64)n_bytes;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  /* an absent row (zeros, knnwb_matrix_row_is_absent) is no copy of a row of zeros */
  return knnwb_matrix_row_is_absent(data, i) ? ~x : x;
}

static void knnwb_duplicates_hash_rows(size_t first, size_t last, void *user)
{
  KnnwbHashLoop *loop = user;
  for (size_t i = first; i < last; i++) {
    /* (One thread gets the whole range in one call: the poll is inside the loop.) */
    if ((i - first) % KNNWB_DUPLICATES_POLL_ROWS == 0 &&
        knnwb_duplicates_stop(loop->cancel, &loop->cancelled))
      return;
    loop->hash[i] = knnwb_duplicates_row_hash(loop->data, loop->values, i);
  }
}

/* A row's hash and number, sorted by (hash, row). */
typedef struct {
  guint64 hash;
  int64_t row;
} KnnwbHashedRow;

static int knnwb_hashed_row_compare(const void *a, const void *b)
{
  const KnnwbHashedRow *x = a, *y = b;
  if (x->hash != y->hash)
    return x->hash < y->hash ? -1 : 1;
  return x->row < y->row ? -1 : (x->row > y->row);
}

/*
 * The grouping runs in parallel: the rows are spread over 2^bits buckets by their hashes' top bits
 * (a stable counting sort: per-chunk counts, then every chunk scatters its rows in row order), so
 * equal hashes share a bucket and each bucket is grouped on its own: at once when no hash repeats
 * in it (knnwb_group_hashes_repeat), else sorted by (hash, row) first.
 * Replaces one thread's LSD radix sort over all n pairs (0.2 s at 1,533,876 rows before every
 * search, a fixed cost that more GPUs did not shrink).
 */
typedef struct {
  const KnnwbMatrix *data;
  const float *values; /* the rows compared (see knnwb_duplicates_find) */
  const guint64 *hash;
  size_t n, n_chunks, n_buckets;
  int shift;              /* bucket = hash >> shift (not used with one bucket: 64 would be UB) */
  size_t *count;          /* n_chunks x n_buckets: rows, then each chunk's first slot */
  KnnwbHashedRow *sorted; /* n: by bucket, then (hash, row) where the bucket was sorted */
  KnnwbHashedRow *spare;  /* n: the merge sort's other half, each bucket at its place in sorted */
  size_t *bucket_start;   /* n_buckets + 1 */
  int64_t *group_of;      /* n: each row's representative */
  size_t *bucket_unique;  /* n_buckets: representatives per bucket */
  const volatile gint *cancel;
  gint cancelled;
} KnnwbGroupLoop;

static size_t knnwb_group_bucket(const KnnwbGroupLoop *loop, guint64 hash)
{
  return loop->n_buckets > 1 ? (size_t)(hash >> loop->shift) : 0;
}

static void knnwb_group_count(size_t first, size_t last, void *user)
{
  KnnwbGroupLoop *loop = user;
  for (size_t c = first; c < last; c++) {
    size_t *count = loop->count + c * loop->n_buckets;
    const size_t begin = loop->n * c / loop->n_chunks;
    for (size_t i = begin; i < loop->n * (c + 1) / loop->n_chunks; i++) {
      if ((i - begin) % KNNWB_DUPLICATES_POLL_ROWS == 0 &&
          knnwb_duplicates_stop(loop->cancel, &loop->cancelled))
        return;
      count[knnwb_group_bucket(loop, loop->hash[i])]++;
    }
  }
}

static void knnwb_group_scatter(size_t first, size_t last, void *user)
{
  KnnwbGroupLoop *loop = user;
  for (size_t c = first; c < last; c++) {
    size_t *slot = loop->count + c * loop->n_buckets;
    const size_t begin = loop->n * c / loop->n_chunks;
    for (size_t i = begin; i < loop->n * (c + 1) / loop->n_chunks; i++) {
      if ((i - begin) % KNNWB_DUPLICATES_POLL_ROWS == 0 &&
          knnwb_duplicates_stop(loop->cancel, &loop->cancelled))
        return;
      guint64 h = loop->hash[i];
      loop->sorted[slot[knnwb_group_bucket(loop, h)]++] = (KnnwbHashedRow){h, (int64_t)i};
    }
  }
}

/* One step of a bucket's work done: whether to stop there (polled every
 * KNNWB_DUPLICATES_POLL_ROWS steps, so that one bucket of every row stops too). */
static gboolean knnwb_group_step(KnnwbGroupLoop *loop, size_t *steps)
{
  return ++*steps % KNNWB_DUPLICATES_POLL_ROWS == 0 &&
         knnwb_duplicates_stop(loop->cancel, &loop->cancelled);
}

/* from[lo, mid) and from[mid, hi), each sorted by (hash, row), merged into to[lo, hi). */
static gboolean knnwb_group_merge(KnnwbGroupLoop *loop, const KnnwbHashedRow *from,
                                  KnnwbHashedRow *to, size_t lo, size_t mid, size_t hi,
                                  size_t *steps)
{
  size_t a = lo, b = mid;
  for (size_t out = lo; out < hi; out++) {
    if (knnwb_group_step(loop, steps))
      return FALSE;
    const gboolean take_a =
        b == hi || (a < mid && knnwb_hashed_row_compare(&from[a], &from[b]) < 0);
    to[out] = take_a ? from[a++] : from[b++];
  }
  return TRUE;
}

/* rows[0, m) sorted by (hash, row), spare[0, m) the scratch: a bottom-up merge sort instead of
 * qsort, which cannot be left when the flag is raised. FALSE when stopped (rows then unordered). */
static gboolean knnwb_group_sort(KnnwbGroupLoop *loop, KnnwbHashedRow *rows, KnnwbHashedRow *spare,
                                 size_t m, size_t *steps)
{
  KnnwbHashedRow *from = rows, *to = spare;
  for (size_t width = 1; width < m; width *= 2) {
    for (size_t lo = 0; lo < m; lo += 2 * width)
      if (!knnwb_group_merge(loop, from, to, lo, MIN(lo + width, m), MIN(lo + 2 * width, m), steps))
        return FALSE;
    KnnwbHashedRow *swap = from;
    from = to;
    to = swap;
  }
  if (from != rows)
    memcpy(rows, from, m * sizeof *rows);
  return TRUE;
}

/* Within a run of equal hashes (in row order), each row joins the first earlier row with the same
 * bytes and the same absence (an absent row holds zeros but is left out, a row of zeros is not:
 * grouped, the one would take the other's place in every list), or is the first of its group.
 * group_of holds the representative row; unique counts the firsts. FALSE when stopped. */
static gboolean knnwb_group_run(KnnwbGroupLoop *loop, const KnnwbHashedRow *rows, size_t m,
                                size_t *unique, size_t *steps)
{
  const size_t d = loop->data->n_cols;
  for (size_t a = 0; a < m; a++) {
    int64_t i = rows[a].row;
    loop->group_of[i] = i;
    for (size_t b = 0; b < a; b++) {
      if (knnwb_group_step(loop, steps))
        return FALSE;
      int64_t j = rows[b].row;
      if (loop->group_of[j] == j &&
          knnwb_matrix_row_is_absent(loop->data, (size_t)i) ==
              knnwb_matrix_row_is_absent(loop->data, (size_t)j) &&
          memcmp(loop->values + (size_t)i * d, loop->values + (size_t)j * d, d * sizeof(float)) ==
              0) {
        loop->group_of[i] = j;
        break;
      }
    }
    if (loop->group_of[i] == i)
      (*unique)++;
  }
  return TRUE;
}

/* Rows of a bucket up to which its hashes are first looked for repeats (in a table of twice as many
 * slots on the stack): a bucket without one is all its own representatives, unsorted. */
#define KNNWB_GROUP_TABLE_ROWS 1024

/* Whether two of rows[0, m) (m <= KNNWB_GROUP_TABLE_ROWS) hold the same hash: an open-addressing
 * table of their indices by the hash's low bits (a bucket's rows share its top bits). O(m). */
static gboolean knnwb_group_hashes_repeat(const KnnwbHashedRow *rows, size_t m)
{
  uint32_t slot[2 * KNNWB_GROUP_TABLE_ROWS];
  size_t size = 16;
  while (size < 2 * m)
    size *= 2;
  memset(slot, 0, size * sizeof slot[0]);
  for (size_t a = 0; a < m; a++) {
    const guint64 hash = rows[a].hash;
    size_t at = (size_t)hash & (size - 1);
    for (; slot[at] != 0; at = (at + 1) & (size - 1))
      if (rows[slot[at] - 1].hash == hash)
        return TRUE;
    slot[at] = (uint32_t)(a + 1);
  }
  return FALSE;
}

static void knnwb_group_buckets(size_t first, size_t last, void *user)
{
  KnnwbGroupLoop *loop = user;
  size_t steps = 0;
  for (size_t bucket = first; bucket < last; bucket++) {
    if (knnwb_duplicates_stop(loop->cancel, &loop->cancelled))
      return;
    KnnwbHashedRow *rows = loop->sorted + loop->bucket_start[bucket];
    const size_t m = loop->bucket_start[bucket + 1] - loop->bucket_start[bucket];
    /* Most buckets of most data hold no repeated hash: no sort, and the bucket's part of the
     * merge sort's other half is never touched (nor, where no bucket needs it, faulted in). */
    if (m <= KNNWB_GROUP_TABLE_ROWS && !knnwb_group_hashes_repeat(rows, m)) {
      for (size_t a = 0; a < m; a++)
        loop->group_of[rows[a].row] = rows[a].row;
      loop->bucket_unique[bucket] = m;
      continue;
    }
    if (!knnwb_group_sort(loop, rows, loop->spare + loop->bucket_start[bucket], m, &steps))
      return;
    size_t unique = 0;
    for (size_t start = 0; start < m;) {
      size_t end = start + 1;
      while (end < m && rows[end].hash == rows[start].hash)
        end++;
      if (!knnwb_group_run(loop, rows + start, end - start, &unique, &steps))
        return;
      start = end;
    }
    loop->bucket_unique[bucket] = unique;
  }
}

/* group_of[i] = the first row with the bytes of row i; returns the number of distinct rows, or
 * SIZE_MAX when the scratch (n pairs and the counts) cannot be allocated, or *cancelled set when
 * cancel was raised (then group_of is incomplete). */
static size_t knnwb_duplicates_group(const KnnwbMatrix *data, const float *values,
                                     const guint64 *hash, int n_threads, int64_t *group_of,
                                     const volatile gint *cancel, gboolean *cancelled)
{
  const size_t n = data->n_rows;
  KnnwbGroupLoop loop = {
      .data = data, .values = values, .hash = hash, .n = n, .group_of = group_of, .cancel = cancel};
  /* About 512 rows a bucket, at most 2^16 buckets; chunks of at least 16,384 rows. */
  int bits = 0;
  while (bits < 16 && (n >> (bits + 9)) > 0)
    bits++;
  loop.n_buckets = (size_t)1 << bits;
  loop.shift = 64 - bits;
  loop.n_chunks = MAX((size_t)1, MIN((size_t)4 * (size_t)knnwb_thread_count(n_threads), n >> 14));
  loop.count = g_try_malloc0(loop.n_chunks * loop.n_buckets * sizeof(size_t));
  loop.bucket_start = g_try_malloc((loop.n_buckets + 1) * sizeof(size_t));
  loop.bucket_unique = g_try_malloc(loop.n_buckets * sizeof(size_t));
  loop.sorted = g_try_malloc(n * sizeof(KnnwbHashedRow));
  loop.spare = g_try_malloc(n * sizeof(KnnwbHashedRow));
  size_t n_unique = SIZE_MAX;
  if (loop.count != NULL && loop.bucket_start != NULL && loop.bucket_unique != NULL &&
      loop.sorted != NULL && loop.spare != NULL) {
    const gint64 t0 = g_get_monotonic_time();
    knnwb_parallel_for(n_threads, loop.n_chunks, 1, knnwb_group_count, &loop);
    if (g_atomic_int_get(&loop.cancelled))
      goto out;
    const gint64 t1 = g_get_monotonic_time();
    /* Each chunk's first slot in each bucket: buckets in order, chunks in order within one. */
    size_t at = 0;
    for (size_t bucket = 0; bucket < loop.n_buckets; bucket++) {
      loop.bucket_start[bucket] = at;
      for (size_t c = 0; c < loop.n_chunks; c++) {
        size_t rows = loop.count[c * loop.n_buckets + bucket];
        loop.count[c * loop.n_buckets + bucket] = at;
        at += rows;
      }
    }
    loop.bucket_start[loop.n_buckets] = at;
    knnwb_parallel_for(n_threads, loop.n_chunks, 1, knnwb_group_scatter, &loop);
    if (g_atomic_int_get(&loop.cancelled))
      goto out;
    const gint64 t2 = g_get_monotonic_time();
    knnwb_parallel_for(n_threads, loop.n_buckets, 16, knnwb_group_buckets, &loop);
    if (g_atomic_int_get(&loop.cancelled))
      goto out;
    g_debug("knnwb: duplicate rows grouped: count %.3f s, scatter %.3f s, buckets %.3f s",
            (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
            (double)(g_get_monotonic_time() - t2) / 1e6);
    n_unique = 0;
    for (size_t bucket = 0; bucket < loop.n_buckets; bucket++)
      n_unique += loop.bucket_unique[bucket];
  }
out:
  *cancelled = g_atomic_int_get(&loop.cancelled) != 0;
  g_free(loop.count);
  g_free(loop.bucket_start);
  g_free(loop.bucket_unique);
  g_free(loop.sorted);
  g_free(loop.spare);
  return n_unique;
}

void knnwb_duplicates_clear(KnnwbDuplicates *duplicates)
{
  g_free(duplicates->representative);
  g_free(duplicates->group_of);
  g_free(duplicates->members);
  g_free(duplicates->group_start);
  memset(duplicates, 0, sizeof *duplicates);
}

gboolean knnwb_duplicates_find(const KnnwbMatrix *data, KnnwbMetric metric, int n_threads,
                               const volatile gint *cancel, KnnwbDuplicates *duplicates,
                               GError **error)
{
  return knnwb_duplicates_find_hashed(data, metric, NULL, n_threads, cancel, duplicates, error);
}

gboolean knnwb_duplicates_find_hashed(const KnnwbMatrix *data, KnnwbMetric metric,
                                      const guint64 *hashes, int n_threads,
                                      const volatile gint *cancel, KnnwbDuplicates *duplicates,
                                      GError **error)
{
  const float *values = knnwb_duplicates_values(data, metric);
  memset(duplicates, 0, sizeof *duplicates);
  const size_t n = data->n_rows;
  duplicates->n_unique = n;
  if (n < 2)
    return TRUE;
  guint64 *hash = hashes == NULL ? g_try_malloc(n * sizeof(guint64)) : NULL;
  int64_t *group_of = g_try_malloc(n * sizeof(int64_t));
  size_t n_unique = SIZE_MAX;
  gboolean cancelled = FALSE;
  if ((hashes != NULL || hash != NULL) && group_of != NULL) {
    if (hashes == NULL) {
      KnnwbHashLoop loop = {data, hash, cancel, 0, values};
      knnwb_parallel_for(n_threads, n, 4096, knnwb_duplicates_hash_rows, &loop);
      cancelled = g_atomic_int_get(&loop.cancelled) != 0;
    }
    if (!cancelled)
      n_unique = knnwb_duplicates_group(data, values, hashes != NULL ? hashes : hash, n_threads,
                                        group_of, cancel, &cancelled);
  }
  g_free(hash);
  if (cancelled) {
    g_free(group_of);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED,
                "cancelled while searching for duplicate rows");
    return FALSE;
  }
  if (n_unique == SIZE_MAX) {
    g_free(group_of);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the row hashes of %zu rows", n);
    return FALSE;
  }
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
      if (distance > threshold || distinct->indices[i * kd + r] < 0)
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
