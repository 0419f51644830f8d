/*
 * The lists a split run's first pass keeps between its steps: each row's k best candidates so far
 * by (exact distance, index), and a bound on what the jobs left out, instead of the kc best by
 * screen score with their distances. A job's kc-wide lists are taken in while the rows their
 * candidates lie in are present (the exact distances the backend did not return are computed then,
 * skipping those provably farther than the row's k-th), and what stays is k wide: 16 bytes a
 * neighbour instead of 20 bytes a candidate, 200 candidates a row for k = 30 under an FP16 screen.
 *
 * Why the lists stay exact. A job keeps, for each of its rows, the kc best pairs by screen score
 * among those below the row's starting threshold. A pair it leaves out scores at least the
 * threshold or, when the job's list is full (kc candidates, and the job could choose from more),
 * at least the list's worst score. The bound of a row is the least worst score of its full lists
 * (knnwb_split_best_take); the threshold a job starts from is the bound, or less where the row
 * already holds k neighbours: the least score whose pairs are provably farther than its k-th
 * (knnwb_refine_score_bound, the certificate's error model). So every pair never taken in either
 * scores at least the bound or is provably farther than a k-th distance the row held then, which
 * only falls; every pair taken in has its exact distance and is kept if among the k best. At the
 * end (knnwb_split_best_certify) a row whose k-th distance the bound clears is exact, and one the
 * bound cannot certify goes through the certify loop as before. The bound is at or above the kc-th
 * best score of all the pairs taken in (each full list holds kc pairs at or below its worst), so
 * every row that kc-wide lists would certify is certified.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "cpu/cpu.h"
#include "split/split_internal.h"

size_t knnwb_split_best_bytes(size_t rows, size_t k)
{
  return rows * (k * (sizeof(int64_t) + sizeof(double)) + sizeof(float));
}

KnnwbSplitBest knnwb_split_best_over(char *buffer, size_t rows, size_t k)
{
  KnnwbSplitBest best = {.rows = rows, .k = k, .buffer = buffer, .borrowed = TRUE};
  best.index = (int64_t *)(void *)buffer;
  best.distance = (double *)(void *)(buffer + rows * k * sizeof(int64_t));
  best.bound = (float *)(void *)(buffer + rows * k * (sizeof(int64_t) + sizeof(double)));
  return best;
}

static void knnwb_split_best_empty_rows(size_t first, size_t last, void *user)
{
  KnnwbSplitBest *best = user;
  for (size_t c = first * best->k; c < last * best->k; c++) {
    best->index[c] = -1;
    best->distance[c] = INFINITY;
  }
  for (size_t t = first; t < last; t++)
    best->bound[t] = INFINITY;
}

gboolean knnwb_split_best_init_in(KnnwbSplitBest *best, size_t rows, size_t k, char *room,
                                  int threads, GError **error)
{
  char *buffer = room ? room : g_try_malloc(MAX(knnwb_split_best_bytes(rows, k), (size_t)1));
  if (buffer == NULL) {
    memset(best, 0, sizeof *best);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate neighbour lists for %zu rows x %zu neighbours", rows, k);
    return FALSE;
  }
  *best = knnwb_split_best_over(buffer, rows, k);
  best->borrowed = room != NULL;
  knnwb_parallel_for(threads, rows, 4096, knnwb_split_best_empty_rows, best);
  return TRUE;
}

KnnwbSplitBest knnwb_split_best_window(const KnnwbSplitBest *best, size_t first, size_t rows)
{
  KnnwbSplitBest window = *best;
  window.rows = rows;
  window.buffer = NULL;
  window.borrowed = TRUE;
  window.index += first * best->k;
  window.distance += first * best->k;
  window.bound += first;
  return window;
}

void knnwb_split_best_clear(KnnwbSplitBest *best)
{
  if (!best->borrowed)
    g_free(best->buffer);
  memset(best, 0, sizeof *best);
}

/* The bound of two sets of pairs left out: the lesser; NaN (some list's worst score overflowed,
 * so what it left out is bounded by nothing) stays NaN. */
static inline float knnwb_split_bound_min(float a, float b)
{
  return isnan(a) || isnan(b) ? NAN : MIN(a, b);
}

KNNWB_DEFINE_SELECT_FIRST(knnwb_split_found_select, KnnwbNeighbour, knnwb_neighbour_before)

/* Row t of best (k wide, sorted) and found[0, count) (sorted) merged into row t: the k first by
 * (distance, index), a pair listed twice kept once. out: k entries of scratch. */
static void knnwb_split_best_merge_row(KnnwbSplitBest *best, size_t t, const KnnwbNeighbour *found,
                                       size_t count, KnnwbNeighbour *out)
{
  const size_t k = best->k;
  int64_t *index = best->index + t * k;
  double *distance = best->distance + t * k;
  size_t a = 0, b = 0, n = 0;
  while (n < k) {
    const gboolean have_a = a < k && index[a] >= 0, have_b = b < count;
    if (!have_a && !have_b)
      break;
    const KnnwbNeighbour x =
        have_a ? (KnnwbNeighbour){distance[a], index[a]} : (KnnwbNeighbour){INFINITY, -1};
    if (have_a && (!have_b || !knnwb_neighbour_before(&found[b], &x))) {
      a++;
      b += have_b && found[b].index == x.index && found[b].distance == x.distance;
      out[n++] = x;
    } else {
      out[n++] = found[b++];
    }
  }
  for (size_t c = 0; c < k; c++) {
    index[c] = c < n ? out[c].index : -1;
    distance[c] = c < n ? out[c].distance : INFINITY;
  }
}

/* ---- Taking a job's candidates in ---------------------------------------------------------- */

typedef struct {
  KnnwbSplitBest *best;
  size_t at;
  KnnwbSplitLists *lists;
  const KnnwbSplitSide *rows, *of;
  size_t complete_at; /* a list this wide holds every row the job could choose from */
  gboolean self;      /* a side against itself: a row is not its own candidate */
} KnnwbSplitTake;

/* The candidate c of list t, unless empty or the row itself. */
static inline gboolean knnwb_split_take_listed(const KnnwbSplitTake *take, size_t t, int64_t j)
{
  return j >= 0 && !(take->self && (size_t)j == take->rows->global + t);
}

/* The exact distance of candidate c of list t (global index j among of's rows). */
static double knnwb_split_take_distance(const KnnwbSplitTake *take, size_t t, int64_t j)
{
  return knnwb_prepared_distance(take->rows->rows, take->rows->first + t, take->of->rows,
                                 take->of->first + ((size_t)j - take->of->global));
}

/* The worst score of list t, when full and the job left pairs out: the bound merged into the
 * row's. */
static void knnwb_split_take_bound(const KnnwbSplitTake *take, size_t t, size_t count)
{
  const size_t kc = take->lists->kc;
  if (count < kc || kc >= take->complete_at)
    return;
  const float *score = take->lists->score + t * kc;
  float worst = -INFINITY;
  gboolean finite = TRUE;
  for (size_t c = 0; c < kc; c++) {
    finite = finite && isfinite(score[c]);
    worst = MAX(worst, score[c]);
  }
  float *bound = &take->best->bound[take->at + t];
  *bound = knnwb_split_bound_min(*bound, finite ? worst : NAN);
}

/* Where no distance came with the candidates and the row holds fewer than k neighbours: the exact
 * distances of the k best by score (marked in first), whose largest bounds the k-th distance of
 * the row from above (as knnwb_refine_row does), so the others can be skipped against it. */
static double knnwb_split_take_first(const KnnwbSplitTake *take, size_t t, size_t k, float *scores,
                                     unsigned char *first)
{
  const size_t kc = take->lists->kc;
  const int64_t *index = take->lists->index + t * kc;
  const float *score = take->lists->score + t * kc;
  double *distance = take->lists->distance + t * kc;
  size_t count = 0;
  for (size_t c = 0; c < kc; c++)
    if (knnwb_split_take_listed(take, t, index[c]))
      scores[count++] = score[c];
  memset(first, 0, kc);
  if (count <= k)
    return INFINITY;
  const float kth_score = knnwb_float_kth_smallest(scores, count, k);
  size_t below = 0;
  for (size_t c = 0; c < kc; c++)
    below += knnwb_split_take_listed(take, t, index[c]) && score[c] < kth_score;
  size_t ties = k - below;
  double limit = -INFINITY;
  for (size_t c = 0; c < kc; c++) {
    if (!knnwb_split_take_listed(take, t, index[c]))
      continue;
    first[c] = score[c] < kth_score || (score[c] == kth_score && ties > 0);
    ties -= score[c] == kth_score && first[c];
    if (first[c]) {
      if (isnan(distance[c]))
        distance[c] = knnwb_split_take_distance(take, t, index[c]);
      limit = MAX(limit, distance[c]);
    }
  }
  return limit;
}

/* A row flagged invalid (never a candidate, its lists empty at the end), whose lists a self job
 * may leave arbitrary. */
static inline gboolean knnwb_split_invalid_row(const KnnwbSplitSide *rows, size_t t)
{
  return rows->rows->invalid != NULL && rows->rows->invalid[rows->first + t];
}

static void knnwb_split_take_row(const KnnwbSplitTake *take, size_t t, KnnwbNeighbour *found,
                                 float *scores, unsigned char *first)
{
  if (knnwb_split_invalid_row(take->rows, t))
    return;
  const size_t kc = take->lists->kc, k = take->best->k, row = take->at + t;
  const int64_t *index = take->lists->index + t * kc;
  const float *score = take->lists->score + t * kc;
  double *distance = take->lists->distance + t * kc;
  size_t count = 0; /* the row itself counts: a list that holds it is full all the same */
  gboolean missing = FALSE;
  for (size_t c = 0; c < kc; c++)
    if (index[c] >= 0) {
      count++;
      missing = missing || (isnan(distance[c]) && knnwb_split_take_listed(take, t, index[c]));
    }
  knnwb_split_take_bound(take, t, count);
  if (count == 0 || k == 0)
    return;
  const gboolean full = take->best->index[row * k + k - 1] >= 0;
  const KnnwbNeighbour kth = full ? (KnnwbNeighbour){take->best->distance[row * k + k - 1],
                                                     take->best->index[row * k + k - 1]}
                                  : (KnnwbNeighbour){INFINITY, INT64_MAX};
  double limit = kth.distance;
  if (missing && !full)
    limit = knnwb_split_take_first(take, t, k, scores, first);
  else
    memset(first, 0, kc);
  size_t kept = 0;
  for (size_t c = 0; c < kc; c++) {
    if (!knnwb_split_take_listed(take, t, index[c]))
      continue;
    if (isnan(distance[c])) {
      /* Provably farther than a k-th distance the row holds (or its k best by score give): it
       * could never be kept. */
      if (!first[c] && knnwb_refine_lower_bound(take->rows->rows, take->rows->first + t,
                                                take->of->rows, score[c]) > limit)
        continue;
      distance[c] = knnwb_split_take_distance(take, t, index[c]);
    }
    const KnnwbNeighbour x = {distance[c], index[c]};
    if (knnwb_neighbour_before(&x, &kth))
      found[kept++] = x;
  }
  if (kept == 0)
    return;
  /* Only the k first of them can be kept: selected, then sorted (the first step takes in 200
   * candidates a row at k = 30 under an FP16 screen). */
  if (kept > k) {
    knnwb_split_found_select(found, kept, k);
    kept = k;
  }
  qsort(found, kept, sizeof *found, knnwb_neighbour_compare);
  knnwb_split_best_merge_row(take->best, row, found, kept, found + kc);
}

static void knnwb_split_take_rows(size_t first, size_t last, void *user)
{
  const KnnwbSplitTake *take = user;
  const size_t kc = take->lists->kc, k = take->best->k;
  KnnwbNeighbour *found = g_new(KnnwbNeighbour, kc + k + 1);
  float *scores = g_new(float, kc + 1);
  unsigned char *marks = g_new(unsigned char, kc + 1);
  for (size_t t = first; t < last; t++)
    knnwb_split_take_row(take, t, found, scores, marks);
  g_free(marks);
  g_free(scores);
  g_free(found);
}

void knnwb_split_best_take(const KnnwbSplitRun *run, KnnwbSplitBest *best, size_t at,
                           KnnwbSplitLists *lists, const KnnwbSplitSide *rows,
                           const KnnwbSplitSide *of, size_t complete_at)
{
  KnnwbSplitTake take = {
      best, at, lists, rows, of, complete_at, rows->rows == of->rows && rows->global == of->global};
  knnwb_parallel_for(run->threads, lists->rows, 256, knnwb_split_take_rows, &take);
}

void knnwb_split_best_take_rows(const KnnwbSplitTaker *taker, size_t first, size_t count, size_t k,
                                const int64_t *index, const double *distance, const float *worst,
                                const int32_t *valid)
{
  KnnwbSplitBest *best = taker->best;
  const size_t best_k = best->k;
  /* The row itself is never among a self job's valid candidates: a list that held it was full
   * all the same (as knnwb_split_take_bound counts it). */
  const gboolean self =
      taker->rows->rows == taker->of->rows && taker->rows->global == taker->of->global;
  KnnwbNeighbour *found = g_new(KnnwbNeighbour, k + best_k + 1);
  for (size_t i = 0; i < count; i++) {
    const size_t t = first + i;
    if (knnwb_split_invalid_row(taker->rows, t))
      continue;
    const size_t row = taker->at + t;
    if ((size_t)valid[i] + (self ? 1 : 0) >= taker->kc && taker->kc < taker->complete_at)
      best->bound[row] =
          knnwb_split_bound_min(best->bound[row], isfinite(worst[i]) ? worst[i] : NAN);
    const gboolean full = best_k > 0 && best->index[row * best_k + best_k - 1] >= 0;
    const KnnwbNeighbour kth = full ? (KnnwbNeighbour){best->distance[row * best_k + best_k - 1],
                                                       best->index[row * best_k + best_k - 1]}
                                    : (KnnwbNeighbour){INFINITY, INT64_MAX};
    size_t n_found = 0;
    for (size_t c = 0; c < k; c++) {
      const int64_t j = index[i * k + c];
      if (j < 0)
        break;
      const KnnwbNeighbour x = {distance[i * k + c], (int64_t)(taker->of->global + (size_t)j)};
      if (!knnwb_neighbour_before(&x, &kth))
        break; /* sorted: the rest come later still */
      found[n_found++] = x;
    }
    if (n_found > 0 && best_k > 0)
      knnwb_split_best_merge_row(best, row, found, n_found, found + k);
  }
  g_free(found);
}

/* ---- Lists merged, thresholds, the end ------------------------------------------------------ */

typedef struct {
  KnnwbSplitBest *best;
  const KnnwbSplitBest *incoming;
  size_t at;
} KnnwbSplitBestMerge;

static void knnwb_split_best_merge_rows(size_t first, size_t last, void *user)
{
  const KnnwbSplitBestMerge *merge = user;
  const size_t k = merge->best->k;
  KnnwbNeighbour *found = g_new(KnnwbNeighbour, 2 * k + 1);
  for (size_t t = first; t < last; t++) {
    const int64_t *index = merge->incoming->index + t * k;
    const double *distance = merge->incoming->distance + t * k;
    size_t count = 0;
    while (count < k && index[count] >= 0) {
      found[count] = (KnnwbNeighbour){distance[count], index[count]};
      count++;
    }
    float *bound = &merge->best->bound[merge->at + t];
    *bound = knnwb_split_bound_min(*bound, merge->incoming->bound[t]);
    if (count > 0)
      knnwb_split_best_merge_row(merge->best, merge->at + t, found, count, found + k);
  }
  g_free(found);
}

void knnwb_split_best_merge(KnnwbSplitBest *best, const KnnwbSplitBest *incoming, size_t at,
                            int threads)
{
  KnnwbSplitBestMerge merge = {best, incoming, at};
  knnwb_parallel_for(threads, incoming->rows, 1024, knnwb_split_best_merge_rows, &merge);
}

typedef struct {
  const KnnwbSplitBest *best;
  const KnnwbPrepared *rows, *reference;
  size_t first;
  float *bounds;
} KnnwbSplitThresholds;

static void knnwb_split_thresholds_rows(size_t first, size_t last, void *user)
{
  const KnnwbSplitThresholds *th = user;
  const size_t k = th->best->k;
  for (size_t t = first; t < last; t++) {
    const float bound = th->best->bound[t];
    const float within = k > 0 && th->best->index[t * k + k - 1] >= 0
                             ? knnwb_refine_score_bound(th->rows, th->first + t, th->reference,
                                                        th->best->distance[t * k + k - 1])
                             : INFINITY;
    th->bounds[t] = isnan(bound) ? within : MIN(bound, within);
  }
}

void knnwb_split_best_thresholds(const KnnwbSplitRun *run, const KnnwbSplitBest *best,
                                 const KnnwbPrepared *rows, size_t first,
                                 const KnnwbPrepared *reference, float *bounds)
{
  KnnwbSplitThresholds th = {best, rows, reference, first, bounds};
  knnwb_parallel_for(run->threads, best->rows, 1024, knnwb_split_thresholds_rows, &th);
}

typedef struct {
  const KnnwbSplitBest *best;
  const KnnwbPrepared *query, *reference;
  size_t available;
  KnnwbNeighbors *result;
  unsigned char *uncertified;
} KnnwbSplitCertifyRows;

static void knnwb_split_certify_rows(size_t first, size_t last, void *user)
{
  const KnnwbSplitCertifyRows *c = user;
  const size_t k = c->best->k;
  for (size_t i = first; i < last; i++) {
    int64_t *out_index = c->result->indices + i * k;
    double *out_distance = c->result->distances + i * k;
    c->uncertified[i] = 0;
    if (c->query->invalid != NULL && c->query->invalid[i]) {
      for (size_t r = 0; r < k; r++) {
        out_index[r] = -1;
        out_distance[r] = INFINITY;
      }
      c->result->n_found[i] = 0;
      continue;
    }
    size_t valid = 0;
    for (size_t r = 0; r < k; r++) {
      out_index[r] = c->best->index[i * k + r];
      out_distance[r] = c->best->distance[i * k + r];
      valid += out_index[r] >= 0;
    }
    c->result->n_found[i] = (int32_t)k;
    const float bound = c->best->bound[i];
    /* +inf: no job left a pair out but those provably farther than the row's k-th. */
    const gboolean certified =
        valid >= c->available || (isinf(bound) && bound > 0 && valid == k && k > 0) ||
        (isfinite(bound) && knnwb_refine_certify_row(c->query, i, c->reference, bound, valid,
                                                     c->available, k, out_index, out_distance));
    c->uncertified[i] = certified ? 0 : 1;
  }
}

void knnwb_split_best_certify(const KnnwbSplitRun *run, const KnnwbSplitBest *best,
                              const KnnwbPrepared *query, const KnnwbPrepared *reference,
                              size_t available, KnnwbNeighbors *result, GArray *left)
{
  KnnwbSplitCertifyRows c = {best,      query,  reference,
                             available, result, g_malloc0(MAX(best->rows, (size_t)1))};
  knnwb_parallel_for(run->threads, best->rows, 1024, knnwb_split_certify_rows, &c);
  for (size_t t = 0; t < best->rows; t++)
    if (c.uncertified[t]) {
      const int64_t i = (int64_t)t;
      g_array_append_val(left, i);
    }
  g_free(c.uncertified);
}
