/*
 * Refinement: candidates scored in float32 become exact neighbours. Each candidate's distance is
 * recomputed in double, the list is sorted by (distance, index), and a rounding-error bound on the
 * float scores decides whether a row that was not a candidate could still be nearer than the k-th.
 *
 * The bound: a float32 dot product of length d has error at most d*u*|x||y| (u = 2^-24), plus a few
 * u for rounding the normalised inputs and the final subtraction. For unit rows that is below
 * (d + 16) * u; we use twice that. L2 scores (|r|^2 - 2 q.r) err by at most the same factor times
 * (|q| + |r|)^2, and L1 sums by a relative (d + 16) * u. A GPU screen in TF32 or FP16 has a larger
 * bound (screen.c derives each); the run's is in the prepared rows (screen_slack).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "cpu/cpu.h"
#include "engine/engine_internal.h"

#define KNNWB_UNIT_ROUNDOFF (1.0 / 16777216.0)

typedef KnnwbNeighbour KnnwbScored;

/* Order-preserving unsigned image of a double (no NaN reaches here): negative values flipped. */
static uint64_t knnwb_scored_key(double distance)
{
  uint64_t bits;
  memcpy(&bits, &distance, sizeof bits);
  return bits >> 63 ? ~bits : bits | ((uint64_t)1 << 63);
}

/*
 * Sorts m > 64 items by (distance, index): a stable LSD radix sort on the distance's key (passes
 * whose byte is the same for every item skipped: distances of one row share their high bytes),
 * then every run of equal distances by index. Large k (thousands of candidates per row) made
 * qsort's comparator calls the refine's main cost. O(m) per pass, m + 2 m words of scratch.
 */
static int knnwb_scored_index_compare(const void *a, const void *b)
{
  const KnnwbScored *x = a, *y = b;
  return x->index < y->index ? -1 : (x->index > y->index);
}

static void knnwb_scored_radix_sort(KnnwbScored *items, size_t m, uint64_t *keys,
                                    KnnwbScored *other)
{
  uint64_t *key = keys, *key_other = keys + m;
  for (size_t i = 0; i < m; i++)
    key[i] = knnwb_scored_key(items[i].distance);
  KnnwbScored *from = items, *to = other;
  for (int shift = 0; shift < 64; shift += 8) {
    size_t count[256] = {0};
    for (size_t i = 0; i < m; i++)
      count[(key[i] >> shift) & 0xff]++;
    if (count[(key[0] >> shift) & 0xff] == m)
      continue; /* every item has this byte */
    size_t offset = 0;
    for (int b = 0; b < 256; b++) {
      size_t c = count[b];
      count[b] = offset;
      offset += c;
    }
    for (size_t i = 0; i < m; i++) {
      size_t slot = count[(key[i] >> shift) & 0xff]++;
      to[slot] = from[i];
      key_other[slot] = key[i];
    }
    KnnwbScored *t = from;
    from = to;
    to = t;
    uint64_t *tk = key;
    key = key_other;
    key_other = tk;
  }
  if (from != items)
    memcpy(items, from, m * sizeof *items);
  for (size_t i = 0; i < m;) {
    size_t j = i + 1;
    while (j < m && items[j].distance == items[i].distance)
      j++;
    if (j - i > 32) {
      /* a long run of equal distances (rows alike up to scale: thousands of exact ties) */
      qsort(items + i, j - i, sizeof *items, knnwb_scored_index_compare);
    } else {
      for (size_t a = i + 1; a < j; a++) { /* ties: lower index first */
        KnnwbScored item = items[a];
        size_t b = a;
        while (b > i && items[b - 1].index > item.index) {
          items[b] = items[b - 1];
          b--;
        }
        items[b] = item;
      }
    }
    i = j;
  }
}

/*
 * One block of scratch memory for the refine of many rows (knnwb_refine_scratch_get): a row's
 * candidates, exact distances and sort buffers came from a dozen allocations of m items each,
 * and above glibc's mmap threshold every one was a fresh mapping whose pages faulted in again:
 * rows whose ties put every row in the window (m = 18,000) spent most of the refine there.
 */
static void *knnwb_refine_scratch_get(KnnwbRefineScratch *scratch, size_t bytes)
{
  if (bytes > scratch->bytes) {
    g_free(scratch->block);
    scratch->block = g_malloc(bytes);
    scratch->bytes = bytes;
  }
  return scratch->block;
}

void knnwb_refine_scratch_clear(KnnwbRefineScratch *scratch)
{
  g_free(scratch->block);
  scratch->block = NULL;
  scratch->bytes = 0;
}

/* Sorts m items by (distance, index); m > 64 needs keys (2 m) and other (m) as scratch. */
static void knnwb_scored_sort(KnnwbScored *items, size_t m, uint64_t *keys, KnnwbScored *other)
{
  if (m > 64) {
    knnwb_scored_radix_sort(items, m, keys, other);
    return;
  }
  for (size_t i = 1; i < m; i++) {
    KnnwbScored item = items[i];
    size_t j = i;
    while (j > 0 && knnwb_neighbour_compare(&items[j - 1], &item) > 0) {
      items[j] = items[j - 1];
      j--;
    }
    items[j] = item;
  }
}

static inline gboolean knnwb_scored_less(const KnnwbScored *x, const KnnwbScored *y)
{
  return x->distance < y->distance || (x->distance == y->distance && x->index < y->index);
}

/*
 * The k smallest of m items by (distance, index), sorted, in items[0 .. k): a quickselect
 * (median-of-three pivots; indices are unique, so no key repeats) that sorts what is left when it
 * recurses too deep, then the sort of the k. O(m + k log k) expected, where sorting all m was
 * the refine's cost for rows with thousands of candidates and k of a few. Scratch as
 * knnwb_scored_sort's for max(m, k) items.
 */
static void knnwb_scored_smallest(KnnwbScored *items, size_t m, size_t k, uint64_t *keys,
                                  KnnwbScored *other)
{
  if (k >= m || m <= 64) {
    knnwb_scored_sort(items, m, keys, other);
    return;
  }
  size_t lo = 0, hi = m; /* items[lo .. hi) holds the k-th smallest */
  int depth = 2 * (int)g_bit_storage(m);
  while (hi - lo > 64) {
    if (depth-- == 0) {
      knnwb_scored_sort(items + lo, hi - lo, keys, other);
      lo = hi;
      break;
    }
    KnnwbScored *a = &items[lo], *b = &items[lo + (hi - lo) / 2], *c = &items[hi - 1];
    const KnnwbScored *median = knnwb_scored_less(a, b) ? (knnwb_scored_less(b, c)   ? b
                                                           : knnwb_scored_less(a, c) ? c
                                                                                     : a)
                                                        : (knnwb_scored_less(a, c)   ? a
                                                           : knnwb_scored_less(b, c) ? c
                                                                                     : b);
    const KnnwbScored pivot = *median;
    /* three parts: below the pivot, the pivot, above it */
    size_t below = lo;
    for (size_t i = lo; i < hi; i++)
      if (knnwb_scored_less(&items[i], &pivot)) {
        KnnwbScored t = items[i];
        items[i] = items[below];
        items[below++] = t;
      }
    size_t at = below;
    for (size_t i = below; i < hi; i++)
      if (items[i].index == pivot.index && items[i].distance == pivot.distance) {
        KnnwbScored t = items[i];
        items[i] = items[at];
        items[at] = t;
        break;
      }
    if (k <= below)
      hi = below;
    else if (k == below + 1)
      hi = lo = below + 1;
    else
      lo = below + 1;
  }
  if (lo < hi)
    knnwb_scored_sort(items + lo, hi - lo, keys, other);
  knnwb_scored_sort(items, k, keys, other);
}

/* L1 scores of rows scaled by 2^-e (e > 0 only near the float limit): scaling is exact except
 * where a value becomes subnormal, off by at most 2^-150 each, so a sum of d differences is off by
 * at most d 2^-149 besides the relative rounding. In data units. */
static double knnwb_refine_l1_absolute(const KnnwbPrepared *reference)
{
  return reference->scale_exponent > 0
             ? (double)reference->d * ldexp(1.0, reference->scale_exponent - 149)
             : 0.0;
}

/* The screen's error bound per unit (screen.c); manhattan is always screened in float32. */
static double knnwb_refine_slack(const KnnwbPrepared *query)
{
  if (query->screen_slack > 0.0 && knnwb_metric_score_kind(query->metric) != KNNWB_SCORE_L1)
    return query->screen_slack;
  return 2.0 * ((double)query->d + 16.0) * KNNWB_UNIT_ROUNDOFF;
}

/* The norm bound the euclidean error scales with: the reference rows' largest, and under a half
 * precision screen also the query rows' (its tail term is relative to every scored row's norm). */
static double knnwb_refine_reach(const KnnwbPrepared *query, const KnnwbPrepared *reference)
{
  if (query->screen == KNNWB_SCREEN_FP16 || query->screen == KNNWB_SCREEN_TF32 ||
      query->screen == KNNWB_SCREEN_BF16)
    return MAX(reference->max_norm, query->max_norm);
  return reference->max_norm;
}

/* TRUE when every pair scored at least worst_score (in float) is provably farther than kth. A
 * score that is not finite (a float sum that overflowed) proves nothing. */
static gboolean knnwb_refine_certified(const KnnwbPrepared *query, size_t query_row,
                                       const KnnwbPrepared *reference, float worst_score,
                                       double kth)
{
  const double slack = knnwb_refine_slack(query);
  if (!isfinite(worst_score))
    return FALSE;
  switch (knnwb_metric_score_kind(query->metric)) {
  case KNNWB_SCORE_L2: {
    double qn = query->norm[query_row];
    double reach = knnwb_refine_reach(query, reference);
    double bound = slack * (qn + reach) * (qn + reach);
    double least_squared = (double)worst_score * reference->score_scale + qn * qn - bound;
    return kth * kth * (1.0 + 1e-12) < least_squared;
  }
  case KNNWB_SCORE_L1:
    return kth * (1.0 + 1e-12) < (double)worst_score * reference->score_scale / (1.0 + slack) -
                                     knnwb_refine_l1_absolute(reference);
  default:
    return kth + 1e-12 < (double)worst_score - slack;
  }
}

/* A lower bound of the exact distance of any pair whose float score is at least score: the same
 * error model as the certification, so skipping a candidate whose bound exceeds the k-th exact
 * distance can never change the result. */
double knnwb_refine_lower_bound(const KnnwbPrepared *query, size_t query_row,
                                const KnnwbPrepared *reference, float score)
{
  const double slack = knnwb_refine_slack(query);
  if (!isfinite(score))
    return 0.0; /* an overflowed float score: the exact distance must be computed */
  switch (knnwb_metric_score_kind(query->metric)) {
  case KNNWB_SCORE_L2: {
    double qn = query->norm[query_row];
    double reach = knnwb_refine_reach(query, reference);
    double bound = slack * (qn + reach) * (qn + reach);
    double least_squared = (double)score * reference->score_scale + qn * qn - bound;
    return least_squared > 0.0 ? sqrt(least_squared) * (1.0 - 1e-12) : 0.0;
  }
  case KNNWB_SCORE_L1:
    return MAX(0.0, ((double)score * reference->score_scale / (1.0 + slack) -
                     knnwb_refine_l1_absolute(reference)) *
                        (1.0 - 1e-12));
  default:
    return (double)score - slack - 1e-12;
  }
}

double knnwb_refine_window_limit(const KnnwbPrepared *query, size_t query_row,
                                 const KnnwbPrepared *reference, double kth)
{
  const double slack = knnwb_refine_slack(query);
  switch (knnwb_metric_score_kind(query->metric)) {
  case KNNWB_SCORE_L2: {
    /* a score may err by bound either way: the kc-th candidate's screened score must clear the
     * k-th distance by the bound, and its own screened score may lie the bound below its exact */
    double qn = query->norm[query_row];
    double reach = knnwb_refine_reach(query, reference);
    double bound = slack * (qn + reach) * (qn + reach);
    return sqrt(kth * kth + 2.0 * bound);
  }
  case KNNWB_SCORE_L1:
    return (kth + knnwb_refine_l1_absolute(reference)) * (1.0 + slack) * (1.0 + slack);
  default:
    return kth + 2.0 * slack;
  }
}

float knnwb_refine_score_bound(const KnnwbPrepared *query, size_t query_row,
                               const KnnwbPrepared *reference, double within)
{
  if (!(within >= 0.0) || !isfinite(within))
    return INFINITY;
  const double slack = knnwb_refine_slack(query);
  double score;
  switch (knnwb_metric_score_kind(query->metric)) {
  case KNNWB_SCORE_L2: {
    const double qn = query->norm[query_row];
    const double reach = knnwb_refine_reach(query, reference);
    const double bound = slack * (qn + reach) * (qn + reach), beyond = within / (1.0 - 1e-12);
    score = (beyond * beyond - qn * qn + bound) / reference->score_scale;
    break;
  }
  case KNNWB_SCORE_L1:
    score = (within / (1.0 - 1e-12) + knnwb_refine_l1_absolute(reference)) * (1.0 + slack) /
            reference->score_scale;
    break;
  default:
    score = within + slack + 1e-12;
  }
  if (!(score < (double)FLT_MAX))
    return INFINITY;
  /* The inverse above is exact up to rounding: a few steps of one float find the least whose
   * bound clears within (none found: no bound). */
  float s = (float)score;
  int step = 0;
  while (step++ < 64 && !(knnwb_refine_lower_bound(query, query_row, reference, s) > within))
    s = nextafterf(s, INFINITY);
  if (!(knnwb_refine_lower_bound(query, query_row, reference, s) > within))
    return INFINITY;
  for (step = 0; step < 64; step++) {
    const float lower = nextafterf(s, -INFINITY);
    if (!(knnwb_refine_lower_bound(query, query_row, reference, lower) > within))
      break;
    s = lower;
  }
  return s;
}

typedef struct {
  float score;
  int64_t index;
  double distance; /* given by the backend, or NAN: compute it here */
} KnnwbCandidate;

/* The exact distance of candidate c into item (the backend's, or computed here while the next
 * candidate's row is fetched: candidate rows are scattered over the matrix). */
static void knnwb_refine_compute(const KnnwbPrepared *query, size_t query_row,
                                 const KnnwbPrepared *reference, const KnnwbCandidate *candidates,
                                 size_t count, size_t c, const double *candidate_distance,
                                 KnnwbScored *item)
{
  item->index = candidates[c].index;
  if (candidate_distance != NULL) {
    item->distance = candidates[c].distance;
    return;
  }
  if (c + 1 < count) {
    const char *next =
        (const char *)(reference->exact + (size_t)candidates[c + 1].index * reference->d);
    for (size_t offset = 0; offset < reference->d * sizeof(float); offset += 64)
      __builtin_prefetch(next + offset);
  }
  item->distance =
      knnwb_prepared_distance(query, query_row, reference, (size_t)candidates[c].index);
}

/* The refine's arrays for m candidates and k, carved from one scratch block. */
typedef struct {
  KnnwbCandidate *candidates; /* m */
  KnnwbScored *items;         /* max(m, k) */
  KnnwbScored *other;         /* max(m, k): sort scratch */
  uint64_t *keys;             /* 2 max(m, k): sort scratch */
  float *scores;              /* m */
  unsigned char *first;       /* m */
} KnnwbRefineArrays;

static KnnwbRefineArrays knnwb_refine_arrays(KnnwbRefineScratch *scratch, size_t m, size_t k)
{
  const size_t n = MAX(m, k);
  const size_t bytes = m * sizeof(KnnwbCandidate) + 2 * n * sizeof(KnnwbScored) +
                       2 * n * sizeof(uint64_t) + m * sizeof(float) + m;
  char *block = knnwb_refine_scratch_get(scratch, bytes);
  KnnwbRefineArrays a;
  a.candidates = (KnnwbCandidate *)(void *)block;
  a.items = (KnnwbScored *)(void *)(block + m * sizeof(KnnwbCandidate));
  a.other = a.items + n;
  a.keys = (uint64_t *)(void *)(a.other + n);
  a.scores = (float *)(void *)(a.keys + 2 * n);
  a.first = (unsigned char *)(a.scores + m);
  return a;
}

/* The k best of the m items by (distance, index) into out_index/out_distance, sorted, padded with
 * -1 and +inf past m; returns how many were real. */
static size_t knnwb_refine_keep_best(const KnnwbRefineArrays *arrays, size_t m, size_t k,
                                     int64_t *out_index, double *out_distance)
{
  const size_t kept = MIN(k, m);
  knnwb_scored_smallest(arrays->items, m, kept, arrays->keys, arrays->other);
  for (size_t r = 0; r < kept; r++) {
    out_index[r] = arrays->items[r].index;
    out_distance[r] = arrays->items[r].distance;
  }
  for (size_t r = kept; r < k; r++) {
    out_index[r] = -1;
    out_distance[r] = INFINITY;
  }
  return kept;
}

gboolean knnwb_refine_row(const KnnwbPrepared *query, size_t query_row,
                          const KnnwbPrepared *reference, int64_t self_index,
                          const int64_t *candidate_index, const float *candidate_score,
                          const double *candidate_distance, size_t m, size_t available, size_t k,
                          KnnwbRefineScratch *scratch, int64_t *out_index, double *out_distance)
{
  KnnwbRefineScratch own = {0};
  const KnnwbRefineArrays arrays = knnwb_refine_arrays(scratch ? scratch : &own, m, k);
  KnnwbScored *items = arrays.items;
  KnnwbCandidate *candidates = arrays.candidates;
  size_t count = 0;
  float worst = -INFINITY;
  for (size_t c = 0; c < m; c++) {
    int64_t j = candidate_index[c];
    if (j < 0)
      continue;
    if (candidate_score[c] > worst)
      worst = candidate_score[c];
    if (j == self_index)
      continue;
    candidates[count++] =
        (KnnwbCandidate){candidate_score[c], j, candidate_distance ? candidate_distance[c] : NAN};
  }
  /* Exact distances of the k best scores always (their largest, kth, bounds the k-th exact
   * distance from above), then only of candidates whose lower bound does not exceed kth (the
   * margin past k rarely needs them all). Those left out are farther than the k-th, so the lists
   * are the k best of all candidates by (distance, index) whatever the order: with the backend's
   * distances, no order is needed. */
  unsigned char *first = arrays.first;
  if (candidate_distance == NULL && count > k) {
    /* The k best scores by the k-th of them (selected on a copy: O(m), where sorting every
     * candidate by score was most of the refine at large k); ties at the k-th: the first ones. */
    float *scores = arrays.scores;
    for (size_t c = 0; c < count; c++)
      scores[c] = candidates[c].score;
    const float kth_score = knnwb_float_kth_smallest(scores, count, k);
    size_t below = 0;
    for (size_t c = 0; c < count; c++)
      below += candidates[c].score < kth_score;
    size_t ties = k - below;
    for (size_t c = 0; c < count; c++) {
      const float s = candidates[c].score;
      first[c] = s < kth_score || (s == kth_score && ties > 0);
      ties -= s == kth_score && first[c];
    }
  } else {
    memset(first, 1, count);
  }
  size_t computed = 0;
  double kth = -INFINITY;
  /* Two passes: the k best first (kth: their largest exact distance), then the others whose lower
   * bound does not exceed it. */
  for (int pass = 0; pass < 2; pass++)
    for (size_t c = 0; c < count; c++) {
      if (first[c] != (pass == 0))
        continue;
      if (pass == 1 &&
          knnwb_refine_lower_bound(query, query_row, reference, candidates[c].score) > kth)
        continue; /* an overflowed (infinite) score bounds nothing: it is computed */
      knnwb_refine_compute(query, query_row, reference, candidates, count, c, candidate_distance,
                           &items[computed]);
      if (pass == 0 && items[computed].distance > kth)
        kth = items[computed].distance;
      computed++;
    }
  /* Only the k best are kept: selected, then sorted (sorting all was the cost where ties put
   * thousands of candidates within the bound) */
  const size_t kept = knnwb_refine_keep_best(&arrays, computed, k, out_index, out_distance);
  gboolean certified = count >= available || (kept == k && k > 0 &&
                                              knnwb_refine_certified(query, query_row, reference,
                                                                     worst, items[k - 1].distance));
  knnwb_refine_scratch_clear(&own);
  return certified;
}

void knnwb_refine_row_exhaustive(const KnnwbPrepared *query, size_t query_row,
                                 const KnnwbPrepared *reference, int64_t self_index, size_t k,
                                 KnnwbRefineScratch *scratch, int64_t *out_index,
                                 double *out_distance)
{
  KnnwbRefineScratch own = {0};
  const size_t n = reference->n;
  const KnnwbRefineArrays arrays = knnwb_refine_arrays(scratch ? scratch : &own, 0, MAX(n, k));
  KnnwbScored *items = arrays.items;
  size_t count = 0;
  for (size_t j = 0; j < n; j++) {
    if ((int64_t)j == self_index || (reference->invalid != NULL && reference->invalid[j]))
      continue;
    items[count].index = (int64_t)j;
    items[count].distance = knnwb_prepared_distance(query, query_row, reference, j);
    count++;
  }
  knnwb_refine_keep_best(&arrays, count, k, out_index, out_distance);
  knnwb_refine_scratch_clear(&own);
}

gboolean knnwb_refine_certify_row(const KnnwbPrepared *query, size_t query_row,
                                  const KnnwbPrepared *reference, float worst, size_t valid,
                                  size_t available, size_t k, int64_t *out_index,
                                  double *out_distance)
{
  size_t kept = MIN(k, valid);
  for (size_t r = kept; r < k; r++) {
    out_index[r] = -1;
    out_distance[r] = INFINITY;
  }
  return valid >= available ||
         (kept == k && k > 0 &&
          knnwb_refine_certified(query, query_row, reference, worst, out_distance[k - 1]));
}
