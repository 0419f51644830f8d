/*
 * Rows compared with every reference row (the certify loop's exhaustive rounds): each row's k best
 * by (exact distance, index) of every valid reference row, as knnwb_refine_row_exhaustive gives
 * one. Many rows run a row per thread. A few rows (the loop's small rounds: one to a handful of
 * rows against millions) would leave every thread but a few idle: there the reference rows are cut
 * into one slice per thread, each slice keeps its best k per row, and each row's slices are merged.
 * (distance, index) is a total order (indices are unique) and each pair's distance is the same
 * knnwb_prepared_distance wherever it is computed, so the k best of the slices' k best are the
 * same entries in the same order: the same bytes as a row per thread.
 */
#include <math.h>
#include <knnwb/parallel.h>
#include "engine/engine.h"

/* Reference rows between two looks at the cancel flag, per query row: 1,024 x the rows (at most 4
 * per thread) stays far below 10^7 distances. */
#define KNNWB_EXHAUSTIVE_BLOCK 1024
/* The fewest reference rows of a slice: a slice costs a thread and k entries per row. */
#define KNNWB_EXHAUSTIVE_MIN_SLICE 64
/* The slices' lists together stay within this (rows x k x 16 bytes per slice). */
#define KNNWB_EXHAUSTIVE_MEMORY ((size_t)256 << 20)

typedef struct {
  double distance;
  int64_t index;
} KnnwbExhaustiveEntry;

/* a comes after b by (distance, index). */
static inline gboolean knnwb_exhaustive_after(const KnnwbExhaustiveEntry *a,
                                              const KnnwbExhaustiveEntry *b)
{
  return a->distance > b->distance || (a->distance == b->distance && a->index > b->index);
}

/* The best k entries seen, as a heap whose top is the worst of them. */
typedef struct {
  KnnwbExhaustiveEntry *entries; /* k */
  size_t size, k;
} KnnwbExhaustiveBest;

static void knnwb_exhaustive_sift_down(KnnwbExhaustiveEntry *heap, size_t size, size_t at)
{
  for (;;) {
    size_t worst = at, left = 2 * at + 1, right = left + 1;
    if (left < size && knnwb_exhaustive_after(&heap[left], &heap[worst]))
      worst = left;
    if (right < size && knnwb_exhaustive_after(&heap[right], &heap[worst]))
      worst = right;
    if (worst == at)
      return;
    KnnwbExhaustiveEntry t = heap[at];
    heap[at] = heap[worst];
    heap[worst] = t;
    at = worst;
  }
}

static void knnwb_exhaustive_offer(KnnwbExhaustiveBest *best, KnnwbExhaustiveEntry entry)
{
  KnnwbExhaustiveEntry *heap = best->entries;
  if (best->size < best->k) {
    size_t at = best->size++;
    while (at > 0 && knnwb_exhaustive_after(&entry, &heap[(at - 1) / 2])) {
      heap[at] = heap[(at - 1) / 2];
      at = (at - 1) / 2;
    }
    heap[at] = entry;
  } else if (best->k > 0 && knnwb_exhaustive_after(&heap[0], &entry)) {
    heap[0] = entry;
    knnwb_exhaustive_sift_down(heap, best->size, 0);
  }
}

/* The heap's entries sorted by (distance, index) into out (k slots, padded with -1 and +inf). */
static void knnwb_exhaustive_write(KnnwbExhaustiveBest *best, int64_t *out_index,
                                   double *out_distance)
{
  const size_t kept = best->size;
  for (size_t r = kept; r < best->k; r++) {
    out_index[r] = -1;
    out_distance[r] = INFINITY;
  }
  for (size_t left = kept; left > 0; left--) { /* the worst of those left goes last */
    out_index[left - 1] = best->entries[0].index;
    out_distance[left - 1] = best->entries[0].distance;
    best->entries[0] = best->entries[left - 1];
    knnwb_exhaustive_sift_down(best->entries, left - 1, 0);
  }
  best->size = 0;
}

typedef struct {
  const KnnwbExhaustiveJob *job;
  size_t slices;
  KnnwbExhaustiveBest *best; /* slices x rows */
  KnnwbExhaustiveEntry *entries;
  gint cancelled;
} KnnwbExhaustiveSlices;

static size_t knnwb_exhaustive_row(const KnnwbExhaustiveJob *job, size_t t)
{
  return job->rows != NULL ? (size_t)job->rows[t] : t;
}

static gboolean knnwb_exhaustive_skip_row(const KnnwbExhaustiveJob *job, size_t t)
{
  const KnnwbPrepared *query = job->query;
  return query->invalid != NULL && query->invalid[knnwb_exhaustive_row(job, t)];
}

/* Row t against reference rows [first, end) into best: the valid ones but the row's own (self
 * index) and its group's. */
static void knnwb_exhaustive_scan(const KnnwbExhaustiveJob *job, size_t t, size_t first, size_t end,
                                  KnnwbExhaustiveBest *best)
{
  const KnnwbPrepared *reference = job->reference;
  const size_t i = knnwb_exhaustive_row(job, t);
  const int64_t self_index = job->self_index != NULL ? job->self_index[t] : -1;
  const int32_t group = job->group != NULL ? job->group[i] : -1;
  for (size_t j = first; j < end; j++) {
    if ((int64_t)j == self_index || (reference->invalid != NULL && reference->invalid[j]) ||
        (job->group != NULL && job->group[j] == group))
      continue;
    const KnnwbExhaustiveEntry entry = {knnwb_prepared_distance(job->query, i, reference, j),
                                        (int64_t)j};
    knnwb_exhaustive_offer(best, entry);
  }
}

static size_t knnwb_exhaustive_slot(const KnnwbExhaustiveJob *job, size_t t)
{
  return job->rows != NULL && !job->in_order ? knnwb_exhaustive_row(job, t) - job->out_first : t;
}

/* Slice s of the reference rows against every row: its best k per row. */
static void knnwb_exhaustive_slice(size_t first_slice, size_t last_slice, void *user)
{
  KnnwbExhaustiveSlices *slices = user;
  const KnnwbExhaustiveJob *job = slices->job;
  const KnnwbPrepared *reference = job->reference;
  for (size_t s = first_slice; s < last_slice; s++) {
    size_t first, last;
    knnwb_team_range(reference->n, (int)s, (int)slices->slices, &first, &last);
    KnnwbExhaustiveBest *best = slices->best + s * job->n_rows;
    for (size_t block = first; block < last; block += KNNWB_EXHAUSTIVE_BLOCK) {
      if (job->cancel != NULL && *job->cancel) {
        g_atomic_int_set(&slices->cancelled, 1);
        return;
      }
      const size_t end = MIN(last, block + KNNWB_EXHAUSTIVE_BLOCK);
      for (size_t t = 0; t < job->n_rows; t++)
        if (!knnwb_exhaustive_skip_row(job, t))
          knnwb_exhaustive_scan(job, t, block, end, &best[t]);
    }
  }
}

/* Each row's slices merged: their entries offered to one heap (the best k of the union). */
static void knnwb_exhaustive_merge(size_t first, size_t last, void *user)
{
  KnnwbExhaustiveSlices *slices = user;
  const KnnwbExhaustiveJob *job = slices->job;
  const size_t k = job->k;
  KnnwbExhaustiveEntry *merged = g_new(KnnwbExhaustiveEntry, MAX(k, (size_t)1));
  for (size_t t = first; t < last; t++) {
    if (knnwb_exhaustive_skip_row(job, t))
      continue;
    KnnwbExhaustiveBest best = {merged, 0, k};
    for (size_t s = 0; s < slices->slices; s++) {
      const KnnwbExhaustiveBest *slice = &slices->best[s * job->n_rows + t];
      for (size_t e = 0; e < slice->size; e++)
        knnwb_exhaustive_offer(&best, slice->entries[e]);
    }
    const size_t slot = knnwb_exhaustive_slot(job, t);
    knnwb_exhaustive_write(&best, job->out_index + slot * k, job->out_distance + slot * k);
  }
  g_free(merged);
}

/* Rows enough for the threads: a row per thread, its k best kept as the reference rows go by
 * (k entries, where keeping every distance took 48 bytes a reference row per thread). */
static void knnwb_exhaustive_by_row(size_t first, size_t last, void *user)
{
  const KnnwbExhaustiveJob *job = user;
  const size_t k = job->k, n = job->reference->n;
  KnnwbExhaustiveEntry *entries = g_new(KnnwbExhaustiveEntry, MAX(k, (size_t)1));
  for (size_t t = first; t < last; t++) {
    if (knnwb_exhaustive_skip_row(job, t))
      continue;
    KnnwbExhaustiveBest best = {entries, 0, k};
    for (size_t block = 0; block < n; block += KNNWB_EXHAUSTIVE_BLOCK) {
      if (job->cancel != NULL && *job->cancel) {
        g_free(entries);
        return;
      }
      knnwb_exhaustive_scan(job, t, block, MIN(n, block + KNNWB_EXHAUSTIVE_BLOCK), &best);
    }
    const size_t slot = knnwb_exhaustive_slot(job, t);
    knnwb_exhaustive_write(&best, job->out_index + slot * k, job->out_distance + slot * k);
  }
  g_free(entries);
}

size_t knnwb_exhaustive_slices(size_t n_rows, size_t n_reference, size_t k, int threads)
{
  const size_t usable = (size_t)knnwb_thread_count(threads);
  /* Four rows per thread keep a row per thread busy enough; fewer leave threads idle. */
  if (usable < 2 || n_rows == 0 || n_rows >= 4 * usable)
    return 1;
  size_t slices = MIN(usable, n_reference / KNNWB_EXHAUSTIVE_MIN_SLICE);
  const size_t per_slice = n_rows * MAX(k, (size_t)1) * sizeof(KnnwbExhaustiveEntry);
  slices = MIN(slices, KNNWB_EXHAUSTIVE_MEMORY / per_slice);
  return MAX(slices, (size_t)1);
}

gboolean knnwb_exhaustive_run(const KnnwbExhaustiveJob *job)
{
  const size_t slices =
      knnwb_exhaustive_slices(job->n_rows, job->reference->n, job->k, job->threads);
  if (slices < 2) {
    knnwb_parallel_for(job->threads, job->n_rows, 16, knnwb_exhaustive_by_row, (void *)job);
    return !(job->cancel != NULL && *job->cancel);
  }
  const size_t k = MAX(job->k, (size_t)1);
  KnnwbExhaustiveSlices state = {job, slices, g_new0(KnnwbExhaustiveBest, slices * job->n_rows),
                                 g_new(KnnwbExhaustiveEntry, slices * job->n_rows * k), 0};
  for (size_t b = 0; b < slices * job->n_rows; b++)
    state.best[b] = (KnnwbExhaustiveBest){state.entries + b * k, 0, job->k};
  g_debug("knnwb: %zu row(s) compared with %zu rows in %zu slices, one a thread", job->n_rows,
          job->reference->n, slices);
  knnwb_parallel_for(job->threads, slices, 1, knnwb_exhaustive_slice, &state);
  const gboolean ok = !g_atomic_int_get(&state.cancelled);
  if (ok)
    knnwb_parallel_for(job->threads, job->n_rows, 4, knnwb_exhaustive_merge, &state);
  g_free(state.best);
  g_free(state.entries);
  return ok;
}
