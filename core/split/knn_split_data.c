/* Data of a split-memory group run: the prepared rows that travel between ranks (array by array,
 * so a block is sent without a packed copy), the candidate lists that travel back, and where each
 * rank's block lies. The schedule is in knn_split.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "split/split_internal.h"

/* ---- Prepared rows that travel ----------------------------------------------------------------
 */

/* Whether the scored rows travel (KNNWB_SPLIT_DERIVED=0, tests and comparisons: for every metric;
 * every rank must see the same value, as `mpirun -x` gives it, since the layout is the ranks'
 * common format), or are derived from the exact ones where they are read
 * (knnwb_prepared_scored_rows): a block then takes half the bytes in the shared window and in
 * every exchange. */
static gboolean knnwb_split_scored_travel(KnnwbMetric metric)
{
  return !knnwb_prepared_derivable(metric) || g_strcmp0(g_getenv("KNNWB_SPLIT_DERIVED"), "0") == 0;
}

KnnwbSplitLayout knnwb_split_layout(KnnwbMetric metric, int scale_exponent, size_t d)
{
  const gboolean euclidean = metric == KNNWB_METRIC_EUCLIDEAN;
  const gboolean manhattan = metric == KNNWB_METRIC_MANHATTAN;
  KnnwbSplitLayout layout = {{
      euclidean ? sizeof(double) : 0,                            /* norm */
      euclidean || manhattan ? 0 : sizeof(double),               /* mean */
      euclidean || manhattan ? 0 : sizeof(double),               /* sum_squares */
      knnwb_split_scored_travel(metric) ? d * sizeof(float) : 0, /* scored */
      manhattan && scale_exponent == 0 ? 0 : d * sizeof(float),  /* exact */
      euclidean ? sizeof(float) : 0,                             /* sqnorms */
      1,                                                         /* invalid */
  }};
  return layout;
}

/* The arrays of p (invalid: flags for every row, never NULL). */
void knnwb_split_arrays(const KnnwbPrepared *p, const unsigned char *invalid, const void **arrays)
{
  arrays[0] = p->norm;
  arrays[1] = p->mean;
  arrays[2] = p->sum_squares;
  arrays[3] = p->scored;
  arrays[4] = p->exact;
  arrays[5] = p->sqnorms;
  arrays[6] = invalid;
}

size_t knnwb_split_bytes(const KnnwbSplitLayout *layout, size_t rows)
{
  size_t bytes = 0;
  for (int s = 0; s < KNNWB_SPLIT_SEGMENTS; s++)
    bytes += rows * layout->row_bytes[s];
  return bytes;
}

/* A prepared view of rows packed segment by segment in buffer; the rest (metric, frame, screen,
 * global norm bound) from like. Without a scored segment its scored is NULL: its readers derive
 * the rows (knnwb_prepared_scored_at). Never cleared: it owns nothing. */
void knnwb_split_view(const KnnwbSplitLayout *layout, const KnnwbPrepared *like, char *buffer,
                      size_t rows, KnnwbPrepared *view)
{
  *view = *like;
  view->n = rows;
  view->scored_owned = NULL;
  view->ranks_owned = NULL;
  void *arrays[KNNWB_SPLIT_SEGMENTS];
  for (int s = 0; s < KNNWB_SPLIT_SEGMENTS; s++) {
    arrays[s] = layout->row_bytes[s] ? buffer : NULL;
    buffer += rows * layout->row_bytes[s];
  }
  view->norm = arrays[0];
  view->mean = arrays[1];
  view->sum_squares = arrays[2];
  view->scored = arrays[3];
  view->exact = arrays[4] ? arrays[4] : arrays[3];
  view->sqnorms = arrays[5];
  view->invalid = arrays[6];
  view->n_invalid = 0;
  for (size_t i = 0; i < rows; i++)
    view->n_invalid += view->invalid[i] != 0;
}

/* Packs the given rows of p (flags from invalid) segment by segment into out; a whole block:
 * knnwb_split_pack_block. */
void knnwb_split_pack(const KnnwbSplitLayout *layout, const KnnwbPrepared *p,
                      const unsigned char *invalid, const int64_t *rows, size_t count, char *out)
{
  const void *arrays[KNNWB_SPLIT_SEGMENTS];
  knnwb_split_arrays(p, invalid, arrays);
  for (int s = 0; s < KNNWB_SPLIT_SEGMENTS; s++) {
    const size_t width = layout->row_bytes[s];
    for (size_t t = 0; t < count && width > 0; t++)
      memcpy(out + t * width, (const char *)arrays[s] + (size_t)rows[t] * width, width);
    out += count * width;
  }
}

/* The pack of a block's first rows on threads: each takes a range of rows in every segment. */
typedef struct {
  const KnnwbSplitLayout *layout;
  const void *arrays[KNNWB_SPLIT_SEGMENTS];
  size_t count;
  char *out;
} KnnwbSplitPackRows;

static void knnwb_split_pack_range(size_t first, size_t last, void *data)
{
  const KnnwbSplitPackRows *pack = data;
  char *out = pack->out;
  for (int s = 0; s < KNNWB_SPLIT_SEGMENTS; s++) {
    const size_t width = pack->layout->row_bytes[s];
    if (width > 0)
      memcpy(out + first * width, (const char *)pack->arrays[s] + first * width,
             (last - first) * width);
    out += pack->count * width;
  }
}

void knnwb_split_pack_block(const KnnwbSplitLayout *layout, const KnnwbPrepared *p,
                            const unsigned char *invalid, size_t count, char *out, int threads)
{
  KnnwbSplitPackRows pack = {.layout = layout, .count = count, .out = out};
  knnwb_split_arrays(p, invalid, pack.arrays);
  knnwb_parallel_for(threads, count, 4096, knnwb_split_pack_range, &pack);
}

/* ---- Candidate lists ---------------------------------------------------------------------------
 */

size_t knnwb_split_lists_bytes(size_t rows, size_t kc)
{
  return rows * kc * (sizeof(int64_t) + sizeof(double) + sizeof(float));
}

/* Empties rows [first, last) of a lists' buffer. */
static void knnwb_split_lists_empty_rows(size_t first, size_t last, void *user)
{
  KnnwbSplitLists *lists = user;
  for (size_t c = first * lists->kc; c < last * lists->kc; c++) {
    lists->index[c] = -1;
    lists->distance[c] = NAN;
    lists->score[c] = INFINITY;
  }
}

KnnwbSplitLists knnwb_split_lists_over(char *buffer, size_t rows, size_t kc)
{
  KnnwbSplitLists lists = {.rows = rows, .kc = kc, .buffer = buffer, .borrowed = TRUE};
  lists.index = (int64_t *)(void *)buffer;
  lists.distance = (double *)(void *)(buffer + rows * kc * sizeof(int64_t));
  lists.score = (float *)(void *)(buffer + rows * kc * (sizeof(int64_t) + sizeof(double)));
  return lists;
}

gboolean knnwb_split_lists_init_in(KnnwbSplitLists *lists, size_t rows, size_t kc, char *room,
                                   int threads, GError **error)
{
  char *buffer = room ? room : g_try_malloc(MAX(knnwb_split_lists_bytes(rows, kc), (size_t)1));
  if (buffer == NULL) {
    memset(lists, 0, sizeof *lists);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate candidate lists for %zu rows x %zu candidates", rows, kc);
    return FALSE;
  }
  *lists = knnwb_split_lists_over(buffer, rows, kc);
  lists->borrowed = room != NULL;
  /* On every thread: at 500,000 rows x 200 candidates this is 2 GB of stores, which one thread
   * took most of a second for, several times a step. */
  knnwb_parallel_for(threads, rows, 1024, knnwb_split_lists_empty_rows, lists);
  return TRUE;
}

gboolean knnwb_split_lists_init(KnnwbSplitLists *lists, size_t rows, size_t kc, int threads,
                                GError **error)
{
  return knnwb_split_lists_init_in(lists, rows, kc, NULL, threads, error);
}

void knnwb_split_lists_clear(KnnwbSplitLists *lists)
{
  if (!lists->borrowed)
    g_free(lists->buffer);
  memset(lists, 0, sizeof *lists);
}

typedef struct {
  float score;
  int64_t index;
  double distance;
} KnnwbSplitCandidate;

static gboolean knnwb_split_candidate_before(const KnnwbSplitCandidate *x,
                                             const KnnwbSplitCandidate *y)
{
  return x->score < y->score || (x->score == y->score && x->index < y->index);
}

/* Merges every row u of incoming into row at + u of lists: each keeps its kc best by (score,
 * index), sorted. lists' rows are sorted already (every list starts empty and changes only here),
 * incoming's need not be: those of its valid candidates that can enter are sorted (8-byte keys;
 * ranked for lists up to 64, a job's kc, a few after a job with starting thresholds) and the two
 * runs merged, O(kc + c^2) a row for c entering (O(kc + c log c) past 64). */
typedef struct {
  KnnwbSplitLists *lists;
  const KnnwbSplitLists *incoming;
  size_t at;
} KnnwbSplitMerge;

/* An incoming candidate while a row is merged: its score and where it is (8 bytes to move). */
typedef struct {
  float score;
  uint32_t at;
} KnnwbSplitKey;

static gint knnwb_split_key_compare(gconstpointer a, gconstpointer b, gpointer indices)
{
  const KnnwbSplitKey *x = a, *y = b;
  if (x->score != y->score)
    return x->score < y->score ? -1 : 1;
  const int64_t i = ((const int64_t *)indices)[x->at], j = ((const int64_t *)indices)[y->at];
  return i < j ? -1 : (i > j);
}

/* Lists up to this long (a job's kc) have their entering candidates ranked; longer ones (the
 * re-selection's) sorted with qsort. A multiple of KNNWB_SPLIT_LANES. */
#define KNNWB_SPLIT_RANKED_MAX 64
#define KNNWB_SPLIT_LANES 8

/* The entering candidates of a row (indices: the row's incoming indices, by key.at) in (score,
 * index) order, equal ones in arrival order. */
static void knnwb_split_insertion_sort(KnnwbSplitKey *added, size_t count, const int64_t *indices)
{
  for (size_t y = 1; y < count; y++) {
    const KnnwbSplitKey key = added[y];
    const int64_t index = indices[key.at];
    size_t place = y;
    for (; place > 0; place--) {
      const KnnwbSplitKey *before = &added[place - 1];
      if (!(key.score < before->score ||
            (key.score == before->score && index < indices[before->at])))
        break;
      added[place] = *before;
    }
    added[place] = key;
  }
}

/* ranks[y]: how many of keys[0, padded) are below keys[y], y < count (keys past count: UINT64_MAX),
 * in lanes the compiler turns into vector compares. */
KNNWB_VECTOR_CLONES
static void knnwb_split_rank_keys(const uint64_t *keys, size_t count, size_t padded,
                                  uint32_t *ranks)
{
  for (size_t y = 0; y < count; y++) {
    const uint64_t key = keys[y];
    uint64_t below[KNNWB_SPLIT_LANES] = {0};
    for (size_t x = 0; x < padded; x += KNNWB_SPLIT_LANES)
      for (int t = 0; t < KNNWB_SPLIT_LANES; t++)
        below[t] += keys[x + t] < key;
    uint64_t rank = 0;
    for (int t = 0; t < KNNWB_SPLIT_LANES; t++)
      rank += below[t];
    ranks[y] = (uint32_t)rank;
  }
}

/*
 * The order of knnwb_split_insertion_sort (count <= KNNWB_SPLIT_RANKED_MAX), in place, from each
 * candidate's rank among them: the number of keys below its own, counted branch-free. An insertion
 * sort of a job's unsorted list (step 0: all kc enter an empty list) spent most of the merge's
 * time on mispredicted compares (perf annotate, the MPI CPU scaling check). Key: the score's bits
 * made orderable as an unsigned integer (-0 as +0, which compare equal as floats) above the index's
 * offset from the row's smallest, so comparing keys compares (score, index). FALSE, nothing
 * changed, where that cannot order them alike: a NaN score, indices spanning 2^32 or more, or two
 * equal keys (the same candidate twice).
 */
static gboolean knnwb_split_rank_sort(KnnwbSplitKey *added, size_t count, const int64_t *indices,
                                      uint64_t *keys, uint32_t *ranks)
{
  int64_t lowest = indices[added[0].at], highest = lowest;
  for (size_t y = 1; y < count; y++) {
    lowest = MIN(lowest, indices[added[y].at]);
    highest = MAX(highest, indices[added[y].at]);
  }
  if ((uint64_t)(highest - lowest) > UINT32_MAX)
    return FALSE;
  const size_t padded = (count + KNNWB_SPLIT_LANES - 1) / KNNWB_SPLIT_LANES * KNNWB_SPLIT_LANES;
  for (size_t y = 0; y < count; y++) {
    const float score = added[y].score + 0.0f; /* -0 becomes +0 */
    if (isnan(score))
      return FALSE;
    uint32_t bits;
    memcpy(&bits, &score, sizeof bits);
    bits = bits & 0x80000000u ? ~bits : bits | 0x80000000u;
    keys[y] = (uint64_t)bits << 32 | (uint64_t)(indices[added[y].at] - lowest);
  }
  for (size_t y = count; y < padded; y++)
    keys[y] = UINT64_MAX; /* above every key: no score maps to all ones */
  knnwb_split_rank_keys(keys, count, padded, ranks);
  uint64_t taken = 0; /* distinct keys: ranks 0..count-1, each once */
  for (size_t y = 0; y < count; y++)
    taken |= (uint64_t)1 << ranks[y];
  if (taken != (count == 64 ? UINT64_MAX : ((uint64_t)1 << count) - 1))
    return FALSE;
  KnnwbSplitKey ordered[KNNWB_SPLIT_RANKED_MAX];
  for (size_t y = 0; y < count; y++)
    ordered[ranks[y]] = added[y];
  memcpy(added, ordered, count * sizeof *added);
  return TRUE;
}

static void knnwb_split_merge_rows(size_t first, size_t last, void *user)
{
  KnnwbSplitMerge *merge = user;
  KnnwbSplitLists *lists = merge->lists;
  const KnnwbSplitLists *incoming = merge->incoming;
  const size_t kc = lists->kc;
  KnnwbSplitCandidate *held = g_new(KnnwbSplitCandidate, MAX(kc, (size_t)1));
  KnnwbSplitKey *added = g_new(KnnwbSplitKey, MAX(incoming->kc, (size_t)1));
  KnnwbSplitCandidate *sorted = g_new(KnnwbSplitCandidate, MAX(incoming->kc, (size_t)1));
  uint64_t keys[KNNWB_SPLIT_RANKED_MAX];
  uint32_t ranks[KNNWB_SPLIT_RANKED_MAX];
  for (size_t u = first; u < last; u++) {
    const size_t t = merge->at + u, base = u * incoming->kc;
    /* A full list takes only what beats its last (most incoming candidates, after the lists they
     * were selected against have improved). */
    const gboolean full = kc > 0 && lists->index[t * kc + kc - 1] >= 0;
    const KnnwbSplitCandidate last_held = {full ? lists->score[t * kc + kc - 1] : INFINITY,
                                           full ? lists->index[t * kc + kc - 1] : 0, 0.0};
    size_t count = 0;
    for (size_t c = 0; c < incoming->kc; c++) {
      const int64_t index = incoming->index[base + c];
      if (index < 0)
        continue;
      const KnnwbSplitKey key = {incoming->score[base + c], (uint32_t)c};
      if (full && !(key.score < last_held.score ||
                    (key.score == last_held.score && index < last_held.index)))
        continue;
      added[count++] = key;
    }
    if (count == 0)
      continue;
    if (incoming->kc > KNNWB_SPLIT_RANKED_MAX) /* long lists (re-selection) */
      g_qsort_with_data(added, (gint)count, sizeof *added, knnwb_split_key_compare,
                        (gpointer)(incoming->index + base));
    else if (count > 1 && !knnwb_split_rank_sort(added, count, incoming->index + base, keys, ranks))
      knnwb_split_insertion_sort(added, count, incoming->index + base);
    for (size_t y = 0; y < count; y++) {
      const size_t at = base + added[y].at;
      sorted[y] =
          (KnnwbSplitCandidate){incoming->score[at], incoming->index[at], incoming->distance[at]};
    }
    size_t kept = 0;
    while (kept < kc && lists->index[t * kc + kept] >= 0) {
      held[kept] = (KnnwbSplitCandidate){lists->score[t * kc + kept], lists->index[t * kc + kept],
                                         lists->distance[t * kc + kept]};
      kept++;
    }
    size_t x = 0, y = 0;
    for (size_t c = 0; c < kc; c++) {
      const KnnwbSplitCandidate *next = NULL;
      if (x < kept && (y == count || knnwb_split_candidate_before(&held[x], &sorted[y])))
        next = &held[x++];
      else if (y < count)
        next = &sorted[y++];
      lists->index[t * kc + c] = next ? next->index : -1;
      lists->score[t * kc + c] = next ? next->score : INFINITY;
      lists->distance[t * kc + c] = next ? next->distance : NAN;
    }
  }
  g_free(held);
  g_free(added);
  g_free(sorted);
}

void knnwb_split_merge(KnnwbSplitLists *lists, const KnnwbSplitLists *incoming, size_t at,
                       int threads)
{
  KnnwbSplitMerge merge = {lists, incoming, at};
  knnwb_parallel_for(threads, incoming->rows, 256, knnwb_split_merge_rows, &merge);
}

/* ---- Moving things between ranks ---------------------------------------------------------------
 */

/* send (send_bytes) to rank to, receive (receive_bytes) from rank from: one exchange. */
gboolean knnwb_split_shift(const KnnwbKnnGroup *group, int to, const void *send, size_t send_bytes,
                           int from, void *receive, size_t receive_bytes, GError **error)
{
  const size_t ranks = (size_t)group->size;
  g_autofree const void **sends = g_new0(const void *, ranks);
  g_autofree size_t *sends_bytes = g_new0(size_t, ranks);
  g_autofree void **receives = g_new0(void *, ranks);
  g_autofree size_t *receives_bytes = g_new0(size_t, ranks);
  sends[to] = send;
  sends_bytes[to] = send_bytes;
  receives[from] = receive;
  receives_bytes[from] = receive_bytes;
  return group->exchange(group, sends, sends_bytes, (void *const *)receives, receives_bytes, error);
}

/* Every rank's block size (this rank's: mine), learnt from all. Collective. */
gboolean knnwb_split_blocks_init(const KnnwbKnnGroup *group, size_t mine, KnnwbSplitBlocks *blocks,
                                 GError **error)
{
  const size_t ranks = (size_t)group->size;
  memset(blocks, 0, sizeof *blocks);
  blocks->ranks = group->size;
  blocks->first = g_new0(size_t, ranks);
  blocks->count = g_new0(size_t, ranks);
  g_autofree int64_t *counts = g_new0(int64_t, ranks);
  if (!knnwb_knn_group_gather_values(group, (int64_t)mine, counts, error))
    return FALSE;
  for (size_t r = 0; r < ranks; r++) {
    blocks->first[r] = blocks->n;
    blocks->count[r] = (size_t)counts[r];
    blocks->n += (size_t)counts[r];
    blocks->largest = MAX(blocks->largest, (size_t)counts[r]);
  }
  return TRUE;
}

void knnwb_split_blocks_clear(KnnwbSplitBlocks *blocks)
{
  g_free(blocks->first);
  g_free(blocks->count);
  memset(blocks, 0, sizeof *blocks);
}

void knnwb_split_rows_of(const KnnwbSplitBlocks *blocks, int rank, size_t *first, size_t *count)
{
  const int r = ((rank % blocks->ranks) + blocks->ranks) % blocks->ranks;
  *first = blocks->first[r];
  *count = blocks->count[r];
}

/* Block of rank from (rows rows) into buffer (view set), this rank's own (p, invalid) going to
 * rank to: one exchange per array, so the own block is never copied. */
gboolean knnwb_split_fetch(const KnnwbKnnGroup *group, const KnnwbSplitLayout *layout,
                           const KnnwbPrepared *own, const unsigned char *own_invalid, int to,
                           int from, size_t rows, char *buffer, KnnwbPrepared *view, GError **error)
{
  const void *arrays[KNNWB_SPLIT_SEGMENTS];
  knnwb_split_arrays(own, own_invalid, arrays);
  char *at = buffer;
  for (int s = 0; s < KNNWB_SPLIT_SEGMENTS; s++) {
    const size_t width = layout->row_bytes[s];
    if (width == 0)
      continue;
    if (!knnwb_split_shift(group, to, arrays[s], own->n * width, from, at, rows * width, error))
      return FALSE;
    at += rows * width;
  }
  knnwb_split_view(layout, own, buffer, rows, view);
  return TRUE;
}

/* ---- Rows every rank sends every rank (certify rounds) -----------------------------------------
 */

gboolean knnwb_split_share_rows(const KnnwbSplitRows *rows, const KnnwbSplitLayout *layout,
                                const int64_t *mine, size_t count, KnnwbSplitShared *shared,
                                GError **error)
{
  const KnnwbKnnGroup *group = rows->run->group;
  const size_t ranks = (size_t)group->size;
  memset(shared, 0, sizeof *shared);
  shared->ranks = ranks;
  shared->counts = g_new0(int64_t, ranks);
  shared->start = g_new0(size_t, ranks + 1);
  shared->offset = g_new0(size_t, ranks + 1);
  if (!knnwb_knn_group_gather_values(group, (int64_t)count, shared->counts, error))
    return FALSE;
  g_autofree size_t *global_bytes = g_new(size_t, ranks);
  g_autofree size_t *packed_bytes = g_new(size_t, ranks);
  for (size_t r = 0; r < ranks; r++) {
    global_bytes[r] = (size_t)shared->counts[r] * sizeof(int64_t);
    packed_bytes[r] = knnwb_split_bytes(layout, (size_t)shared->counts[r]);
    shared->start[r + 1] = shared->start[r] + (size_t)shared->counts[r];
    /* Each block starts aligned for its doubles (its flags' bytes end it). */
    shared->offset[r + 1] = shared->offset[r] + (packed_bytes[r] + 63) / 64 * 64;
  }
  shared->total = shared->start[ranks];
  g_autofree int64_t *numbers = g_new(int64_t, MAX(count, (size_t)1));
  for (size_t t = 0; t < count; t++)
    numbers[t] = (int64_t)rows->query_first + mine[t];
  g_autofree char *packed = g_malloc(MAX(knnwb_split_bytes(layout, count), (size_t)1));
  knnwb_split_pack(layout, rows->query, rows->query_invalid, mine, count, packed);
  shared->global = g_new(int64_t, MAX(shared->total, (size_t)1));
  shared->packed = g_malloc(MAX(shared->offset[ranks], (size_t)1));
  if (!knnwb_knn_group_gather_bytes(group, numbers, global_bytes, shared->global, error))
    return FALSE;
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree size_t *send_bytes = g_new(size_t, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  for (size_t r = 0; r < ranks; r++) {
    send[r] = packed;
    send_bytes[r] = packed_bytes[group->rank];
    receive[r] = shared->packed + shared->offset[r];
  }
  return group->exchange(group, send, send_bytes, (void *const *)receive, packed_bytes, error);
}

void knnwb_split_shared_view(const KnnwbSplitShared *shared, const KnnwbSplitLayout *layout,
                             const KnnwbPrepared *like, size_t r, KnnwbPrepared *view)
{
  knnwb_split_view(layout, like, shared->packed + shared->offset[r], (size_t)shared->counts[r],
                   view);
}

void knnwb_split_shared_clear(KnnwbSplitShared *shared)
{
  g_free(shared->counts);
  g_free(shared->start);
  g_free(shared->offset);
  g_free(shared->global);
  g_free(shared->packed);
  memset(shared, 0, sizeof *shared);
}

gboolean knnwb_split_return_lists(const KnnwbKnnGroup *group, const KnnwbSplitShared *shared,
                                  KnnwbSplitLists *found, size_t count, size_t kc,
                                  KnnwbSplitLists *back, GError **error)
{
  const size_t ranks = shared->ranks;
  g_autofree const void **send = g_new0(const void *, ranks);
  g_autofree size_t *send_bytes = g_new0(size_t, ranks);
  g_autofree void **receive = g_new0(void *, ranks);
  g_autofree size_t *receive_bytes = g_new0(size_t, ranks);
  for (size_t r = 0; r < ranks; r++) {
    send[r] = found[r].buffer;
    send_bytes[r] = knnwb_split_lists_bytes((size_t)shared->counts[r], kc);
    receive[r] = back[r].buffer;
    receive_bytes[r] = knnwb_split_lists_bytes(count, kc);
  }
  return group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
}
