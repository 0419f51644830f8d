/*
 * The candidates of a shared self job, moved to the ranks that own their rows: every rank's backend
 * selected over its share of the tiles for all n rows; each rank needs, for its own rows, the kc
 * best by (score, index) of every rank's candidates. Only the other ranks' blocks travel, packed
 * (32-bit indices when n allows, float scores, the exact distances only when every backend gave
 * them), in one message per pair of ranks; a rank's own block is read in place. The merge is a
 * selection of kc among ranks x kc per row (linear on average), not a sort: the lists come in any
 * order and refinement sorts what is kept.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include "knn_internal.h"

/* The packed form of one candidate: score (float), index (uint32, or int64 when n >= 2^32 - 1,
 * UINT32_MAX standing for -1), then the distance (double) when distances travel. */
typedef struct {
  gboolean wide, with_distance;
  size_t bytes;
} KnnwbGroupPacking;

static KnnwbGroupPacking knnwb_group_packing(size_t n, gboolean with_distance)
{
  KnnwbGroupPacking p = {n >= (size_t)UINT32_MAX, with_distance, 0};
  p.bytes = sizeof(float) + (p.wide ? sizeof(int64_t) : sizeof(uint32_t)) +
            (with_distance ? sizeof(double) : 0);
  return p;
}

typedef struct {
  float score;
  int64_t index;
  double distance;
} KnnwbGroupCandidate;

/* (score, index) order; a NaN score (never produced by the backends) sorts last. */
static inline gboolean knnwb_group_candidate_before(const KnnwbGroupCandidate *x,
                                                    const KnnwbGroupCandidate *y)
{
  if (x->score < y->score || (isnan(y->score) && !isnan(x->score)))
    return TRUE;
  if (y->score < x->score || isnan(x->score) != isnan(y->score))
    return FALSE;
  return x->index < y->index;
}

/* Moves the kc smallest of pool[0, count) (count > kc) to its front, in any order: Hoare's
 * selection with a median of three, expected O(count). */
static void knnwb_group_select_smallest(KnnwbGroupCandidate *pool, size_t count, size_t kc)
{
  size_t lo = 0, hi = count - 1;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    KnnwbGroupCandidate t;
#define KNNWB_SWAP(a, b) (t = pool[a], pool[a] = pool[b], pool[b] = t)
    if (knnwb_group_candidate_before(&pool[mid], &pool[lo]))
      KNNWB_SWAP(mid, lo);
    if (knnwb_group_candidate_before(&pool[hi], &pool[lo]))
      KNNWB_SWAP(hi, lo);
    if (knnwb_group_candidate_before(&pool[hi], &pool[mid]))
      KNNWB_SWAP(hi, mid);
    const KnnwbGroupCandidate pivot = pool[mid];
    size_t i = lo, j = hi;
    for (;;) {
      while (knnwb_group_candidate_before(&pool[i], &pivot))
        i++;
      while (knnwb_group_candidate_before(&pivot, &pool[j]))
        j--;
      if (i >= j)
        break;
      KNNWB_SWAP(i, j);
      i++;
      j--;
    }
#undef KNNWB_SWAP
    /* [lo, j] <= pivot <= [j + 1, hi] */
    if (kc - 1 <= j)
      hi = j;
    else
      lo = j + 1;
  }
}

typedef struct {
  KnnwbGroupPacking packing;
  size_t kc, own_first; /* own_first: this rank's first row in the all-rows arrays */
  int ranks, me;
  /* this rank's candidates of all n rows */
  const int64_t *index;
  const float *score;
  const double *distance;
  /* packing: rows [first, first + rows) of the all-rows arrays into out */
  size_t pack_first;
  char *pack_out;
  /* merging: the other ranks' packed blocks of this rank's rows */
  const char *const *received;
  int64_t *out_index; /* rows x kc */
  float *out_score;
  double *out_distance;
} KnnwbGroupMerge;

static void knnwb_group_pack_rows(size_t first, size_t last, void *user)
{
  const KnnwbGroupMerge *m = user;
  const KnnwbGroupPacking p = m->packing;
  char *out = m->pack_out + first * m->kc * p.bytes;
  for (size_t at = (m->pack_first + first) * m->kc; at < (m->pack_first + last) * m->kc; at++) {
    memcpy(out, &m->score[at], sizeof(float));
    out += sizeof(float);
    if (p.wide) {
      memcpy(out, &m->index[at], sizeof(int64_t));
      out += sizeof(int64_t);
    } else {
      const uint32_t index = m->index[at] < 0 ? UINT32_MAX : (uint32_t)m->index[at];
      memcpy(out, &index, sizeof index);
      out += sizeof index;
    }
    if (p.with_distance) {
      memcpy(out, &m->distance[at], sizeof(double));
      out += sizeof(double);
    }
  }
}

static void knnwb_group_unpack(const KnnwbGroupPacking p, const char *in, KnnwbGroupCandidate *c)
{
  memcpy(&c->score, in, sizeof(float));
  in += sizeof(float);
  if (p.wide) {
    memcpy(&c->index, in, sizeof(int64_t));
    in += sizeof(int64_t);
  } else {
    uint32_t index;
    memcpy(&index, in, sizeof index);
    in += sizeof index;
    c->index = index == UINT32_MAX ? -1 : (int64_t)index;
  }
  c->distance = NAN;
  if (p.with_distance)
    memcpy(&c->distance, in, sizeof(double));
}

static void knnwb_group_merge_rows(size_t first, size_t last, void *user)
{
  const KnnwbGroupMerge *m = user;
  const size_t kc = m->kc, ranks = (size_t)m->ranks;
  KnnwbGroupCandidate *pool = g_new(KnnwbGroupCandidate, ranks * kc);
  for (size_t i = first; i < last; i++) {
    size_t count = 0;
    for (size_t r = 0; r < ranks; r++)
      for (size_t c = 0; c < kc; c++) {
        KnnwbGroupCandidate *x = &pool[count];
        if ((int)r == m->me) {
          const size_t at = (m->own_first + i) * kc + c;
          *x = (KnnwbGroupCandidate){m->score[at], m->index[at],
                                     m->distance ? m->distance[at] : NAN};
        } else {
          knnwb_group_unpack(m->packing, m->received[r] + (i * kc + c) * m->packing.bytes, x);
        }
        count += x->index >= 0;
      }
    /* The tiles of the shares are disjoint, so no pair comes twice: the kc best by (score,
     * index) of the union are the kc best of the whole job. */
    if (count > kc)
      knnwb_group_select_smallest(pool, count, kc);
    for (size_t c = 0; c < kc; c++) {
      const gboolean kept = c < count;
      m->out_index[i * kc + c] = kept ? pool[c].index : -1;
      m->out_score[i * kc + c] = kept ? pool[c].score : INFINITY;
      if (m->out_distance != NULL)
        m->out_distance[i * kc + c] = kept ? pool[c].distance : NAN;
    }
  }
  g_free(pool);
}

gboolean knnwb_knn_group_merge(const KnnwbKnnGroup *group, size_t n, size_t kc,
                               const int64_t *index, const float *score, const double *distance,
                               size_t row0, size_t rows, int threads, int64_t **own_index,
                               float **own_score, double **own_distance, GError **error)
{
  const int ranks = group->size, me = group->rank;
  *own_index = NULL;
  *own_score = NULL;
  *own_distance = NULL;
  /* Distances travel only when every rank's backend computed them. */
  int64_t with_distance = distance != NULL;
  if (!group->reduce(group, &with_distance, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  KnnwbGroupMerge m = {0};
  m.packing = knnwb_group_packing(n, with_distance != 0);
  m.kc = kc;
  m.own_first = row0;
  m.ranks = ranks;
  m.me = me;
  m.index = index;
  m.score = score;
  m.distance = with_distance ? distance : NULL;
  const size_t record = m.packing.bytes;
  g_autofree const void **send = g_new0(const void *, ranks);
  g_autofree size_t *send_bytes = g_new0(size_t, ranks);
  g_autofree void **receive = g_new0(void *, ranks);
  g_autofree size_t *receive_bytes = g_new0(size_t, ranks);
  /* Every row block of n x kc was allocated by the backend's caller, so these sizes fit. */
  gboolean ok = TRUE;
  for (int r = 0; r < ranks && ok; r++) {
    if (r == me)
      continue;
    size_t first, last;
    knnwb_knn_group_rows(n, r, ranks, &first, &last);
    send_bytes[r] = (last - first) * kc * record;
    receive_bytes[r] = rows * kc * record;
    send[r] = send_bytes[r] ? g_try_malloc(send_bytes[r]) : NULL;
    receive[r] = receive_bytes[r] ? g_try_malloc(receive_bytes[r]) : NULL;
    ok = (send[r] != NULL || !send_bytes[r]) && (receive[r] != NULL || !receive_bytes[r]);
  }
  const size_t cells = MAX(rows * kc, (size_t)1);
  if (ok) {
    *own_index = g_try_malloc(cells * sizeof(int64_t));
    *own_score = g_try_malloc(cells * sizeof(float));
    *own_distance = with_distance ? g_try_malloc(cells * sizeof(double)) : NULL;
    ok = *own_index != NULL && *own_score != NULL && (!with_distance || *own_distance);
  }
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the candidate lists of %d ranks for %zu rows", ranks, rows);
  for (int r = 0; r < ranks && ok; r++) {
    if (r == me || send_bytes[r] == 0)
      continue;
    size_t first, last;
    knnwb_knn_group_rows(n, r, ranks, &first, &last);
    m.pack_first = first;
    m.pack_out = (char *)send[r];
    knnwb_parallel_for(threads, last - first, 4096, knnwb_group_pack_rows, &m);
  }
  /* Allocation may fail on one rank only: agree before exchanging. */
  gint64 start = g_get_monotonic_time();
  if (!group->agree(group, ok, error))
    ok = FALSE;
  gint64 agreed = g_get_monotonic_time();
  if (ok)
    ok = group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
  gint64 exchanged = g_get_monotonic_time();
  if (ok) {
    m.received = (const char *const *)receive;
    m.out_index = *own_index;
    m.out_score = *own_score;
    m.out_distance = *own_distance;
    knnwb_parallel_for(threads, rows, 1024, knnwb_group_merge_rows, &m);
    g_autofree char *size = g_format_size_full(
        (guint64)receive_bytes[(me + 1) % ranks] * (guint64)(ranks - 1), G_FORMAT_SIZE_IEC_UNITS);
    g_debug("knnwb: rank %d: candidates received (%s) in %.3f s after waiting %.3f s, merged in "
            "%.3f s",
            me, size, (double)(exchanged - agreed) / 1e6, (double)(agreed - start) / 1e6,
            (double)(g_get_monotonic_time() - exchanged) / 1e6);
  }
  for (int r = 0; r < ranks; r++) {
    g_free((void *)send[r]);
    g_free(receive[r]);
  }
  if (!ok) {
    g_clear_pointer(own_index, g_free);
    g_clear_pointer(own_score, g_free);
    g_clear_pointer(own_distance, g_free);
  }
  return ok;
}
