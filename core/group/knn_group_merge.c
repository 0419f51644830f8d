/*
 * The candidates of a shared self job, moved to the ranks that own their rows: every rank's backend
 * selected over its share of the tiles for all n rows; each rank needs, for its own rows, the kc
 * best by (score, index) of every rank's candidates. First the ranks agree on a bound per row, the
 * smallest over the ranks of their full lists' worst score: the rank holding it has kc candidates
 * at least that good, so nothing worse can be among the kc best, and only candidates within the
 * bound travel (about half of them with two ranks). They go packed (32-bit indices when n allows,
 * float scores, the exact distances only when every backend gave them), one message per pair of
 * ranks: the counts of the rows, then their candidates; a rank's own block is read in place. The
 * merge is a selection of kc per row (linear on average), not a sort: the lists come in any order
 * and refinement sorts what is kept.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "group/group_internal.h"

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

/* The kc first of a row's pool by (score, index). */
KNNWB_DEFINE_SELECT_FIRST(knnwb_group_select_smallest, KnnwbGroupCandidate,
                          knnwb_group_candidate_before)

typedef struct {
  KnnwbGroupPacking packing;
  size_t kc, own_first; /* own_first: this rank's first row in the all-rows arrays */
  int ranks, me;
  /* this rank's candidates of all n rows, and the keys of the rows' common bounds */
  const int64_t *index;
  const float *score;
  const double *distance;
  int64_t *bound;
  /* packing rows [first, first + rows) of the all-rows arrays: counts, then records at offsets */
  size_t pack_first;
  uint32_t *pack_counts;
  const size_t *pack_offsets;
  char *pack_records;
  /* merging: the other ranks' messages (counts, offsets and records of this rank's rows) */
  const uint32_t *const *received_counts;
  const size_t *const *received_offsets;
  const char *const *received_records;
  int64_t *out_index; /* rows x kc: this rank's rows of index/score/distance */
  float *out_score;
  double *out_distance;
} KnnwbGroupMerge;

static inline gboolean knnwb_group_within(const KnnwbGroupMerge *m, size_t row, size_t at)
{
  return m->index[at] >= 0 && knnwb_group_bound_key(m->score[at]) <= m->bound[row];
}

/* Each row's bound key: its list's worst score when the list is full, else +inf. */
static void knnwb_group_bound_rows(size_t first, size_t last, void *user)
{
  KnnwbGroupMerge *m = user;
  for (size_t i = first; i < last; i++) {
    float worst = -INFINITY;
    for (size_t c = 0; c < m->kc && worst < INFINITY; c++)
      worst = m->index[i * m->kc + c] < 0 ? INFINITY : MAX(worst, m->score[i * m->kc + c]);
    m->bound[i] = knnwb_group_bound_key(worst);
  }
}

static void knnwb_group_count_rows(size_t first, size_t last, void *user)
{
  const KnnwbGroupMerge *m = user;
  for (size_t i = first; i < last; i++) {
    const size_t row = m->pack_first + i;
    uint32_t count = 0;
    for (size_t c = 0; c < m->kc; c++)
      count += knnwb_group_within(m, row, row * m->kc + c);
    m->pack_counts[i] = count;
  }
}

static void knnwb_group_pack_rows(size_t first, size_t last, void *user)
{
  const KnnwbGroupMerge *m = user;
  const KnnwbGroupPacking p = m->packing;
  char *out = m->pack_records + m->pack_offsets[first] * p.bytes;
  for (size_t i = first; i < last; i++) {
    const size_t row = m->pack_first + i;
    for (size_t at = row * m->kc; at < (row + 1) * m->kc; at++) {
      if (!knnwb_group_within(m, row, at))
        continue;
      memcpy(out, &m->score[at], sizeof(float));
      out += sizeof(float);
      if (p.wide) {
        memcpy(out, &m->index[at], sizeof(int64_t));
        out += sizeof(int64_t);
      } else {
        const uint32_t index = (uint32_t)m->index[at];
        memcpy(out, &index, sizeof index);
        out += sizeof index;
      }
      if (p.with_distance) {
        memcpy(out, &m->distance[at], sizeof(double));
        out += sizeof(double);
      }
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
    c->index = (int64_t)index;
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
    const size_t row = m->own_first + i;
    for (size_t r = 0; r < ranks; r++) {
      if ((int)r == m->me) {
        for (size_t at = row * kc; at < (row + 1) * kc; at++)
          if (knnwb_group_within(m, row, at))
            pool[count++] = (KnnwbGroupCandidate){m->score[at], m->index[at],
                                                  m->distance ? m->distance[at] : NAN};
        continue;
      }
      const size_t *offsets = m->received_offsets[r];
      for (size_t t = offsets[i]; t < offsets[i + 1] && count < ranks * kc; t++)
        knnwb_group_unpack(m->packing, m->received_records[r] + t * m->packing.bytes,
                           &pool[count++]);
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

/* offsets[0..rows] of counts[0..rows); FALSE when a count exceeds kc (a corrupt message). */
static gboolean knnwb_group_offsets(const uint32_t *counts, size_t rows, size_t kc, size_t *offsets)
{
  offsets[0] = 0;
  for (size_t i = 0; i < rows; i++) {
    if (counts[i] > kc)
      return FALSE;
    offsets[i + 1] = offsets[i] + counts[i];
  }
  return TRUE;
}

/* One merge's messages between the ranks (knnwb_knn_group_merge), phase by phase. */
typedef struct {
  const KnnwbKnnGroup *group;
  KnnwbGroupMerge *m;
  size_t n, kc, rows;
  int threads, ranks, me;
  gboolean shared;
  const void **send;
  size_t *send_bytes;
  void **receive;
  size_t *receive_bytes;
  uint64_t *sizes_out, *sizes_in; /* per rank: a message's bytes, where it starts when shared */
  size_t *offsets_out;
  void **blocks;
  size_t **pack_offsets;
  uint32_t **pack_counts;
  const uint32_t **received_counts;
  size_t **received_offsets;
  const char **received_records;
  gint64 exchanged, agreed;
  size_t received_total;
} KnnwbGroupExchange;

/* The common bounds. Allocation may fail on one rank only: agree before reducing. */
static gboolean knnwb_group_exchange_bounds(KnnwbGroupExchange *x, GError **error)
{
  KnnwbGroupMerge *m = x->m;
  m->bound = g_try_malloc(MAX(x->n, (size_t)1) * sizeof(int64_t));
  gboolean ok = m->bound != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate the bounds of %zu rows",
                x->n);
  if (!x->group->agree(x->group, ok, error))
    return FALSE;
  knnwb_parallel_for(x->threads, x->n, 4096, knnwb_group_bound_rows, m);
  return x->group->reduce(x->group, m->bound, x->n, KNNWB_GROUP_MIN, error);
}

/* What goes to each other rank: its rows' counts, then their candidates within the bounds. The
 * counts first, so that every message's size is known before it is packed. */
static gboolean knnwb_group_exchange_count(KnnwbGroupExchange *x, GError **error)
{
  KnnwbGroupMerge *m = x->m;
  gboolean ok = TRUE;
  for (int r = 0; r < x->ranks && ok; r++) {
    if (r == x->me)
      continue;
    size_t first, last;
    knnwb_knn_group_rows(x->n, r, x->ranks, &first, &last);
    const size_t block = last - first;
    x->pack_offsets[r] = g_try_malloc((block + 1) * sizeof(size_t));
    x->pack_counts[r] = g_try_malloc(MAX(block, (size_t)1) * sizeof(uint32_t));
    ok = x->pack_offsets[r] != NULL && x->pack_counts[r] != NULL;
    if (ok) {
      m->pack_first = first;
      m->pack_counts = x->pack_counts[r];
      knnwb_parallel_for(x->threads, block, 4096, knnwb_group_count_rows, m);
      knnwb_group_offsets(x->pack_counts[r], block, x->kc, x->pack_offsets[r]);
      x->send_bytes[r] = block * sizeof(uint32_t) + x->pack_offsets[r][block] * m->packing.bytes;
    }
  }
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the candidate counts of %zu rows for the other ranks", x->n);
  return x->group->agree(x->group, ok, error);
}

/* The messages: in blocks the other ranks read in place when the group shares memory (no
 * transport, no receive buffers: the candidates are written once and read once), else in buffers
 * of their own that the exchange copies. This rank's block holds its messages in rank order; each
 * receiver learns where its message starts. */
static gboolean knnwb_group_exchange_pack(KnnwbGroupExchange *x, GError **error)
{
  KnnwbGroupMerge *m = x->m;
  const int me = x->me;
  size_t shared_bytes = 0;
  for (int r = 0; r < x->ranks; r++) {
    x->offsets_out[r] = shared_bytes;
    shared_bytes += r == me ? 0 : x->send_bytes[r];
  }
  if (x->group->share_begin != NULL) {
    x->shared = x->group->share_begin(x->group, shared_bytes, x->blocks, error);
    if (!x->shared && error != NULL && *error != NULL)
      return FALSE;
  }
  gboolean ok = TRUE;
  for (int r = 0; r < x->ranks && ok; r++) {
    if (r == me)
      continue;
    size_t first, last;
    knnwb_knn_group_rows(x->n, r, x->ranks, &first, &last);
    const size_t block = last - first;
    char *message = x->shared ? (char *)x->blocks[me] + x->offsets_out[r]
                              : g_try_malloc(MAX(x->send_bytes[r], (size_t)1));
    if (!x->shared)
      x->send[r] = message;
    ok = message != NULL;
    if (ok) {
      memcpy(message, x->pack_counts[r], block * sizeof(uint32_t));
      m->pack_first = first;
      m->pack_offsets = x->pack_offsets[r];
      m->pack_records = message + block * sizeof(uint32_t);
      knnwb_parallel_for(x->threads, block, 4096, knnwb_group_pack_rows, m);
    }
    x->sizes_out[2 * r] = x->send_bytes[r];
    x->sizes_out[2 * r + 1] = x->offsets_out[r];
  }
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the candidates of %zu rows for the other ranks", x->n);
  return x->group->agree(x->group, ok, error);
}

/* The sizes (and where each message starts in a shared block) first, so that every receive is
 * posted with its length; then the room to receive them. */
static gboolean knnwb_group_exchange_sizes(KnnwbGroupExchange *x, GError **error)
{
  const int me = x->me, ranks = x->ranks;
  g_autofree const void **sizes_send = g_new0(const void *, ranks);
  g_autofree void **sizes_receive = g_new0(void *, ranks);
  g_autofree size_t *sizes_bytes = g_new0(size_t, ranks);
  for (int r = 0; r < ranks; r++) {
    sizes_send[r] = &x->sizes_out[2 * r];
    sizes_receive[r] = &x->sizes_in[2 * r];
    sizes_bytes[r] = r == me ? 0 : 2 * sizeof(uint64_t);
  }
  if (!x->group->exchange(x->group, sizes_send, sizes_bytes, sizes_receive, sizes_bytes, error))
    return FALSE;
  gboolean ok = TRUE;
  for (int r = 0; r < ranks && ok; r++) {
    if (r == me)
      continue;
    x->receive_bytes[r] = (size_t)x->sizes_in[2 * r];
    if (!x->shared) {
      x->receive[r] = g_try_malloc(MAX(x->receive_bytes[r], (size_t)1));
      ok = x->receive[r] != NULL;
    }
    x->received_offsets[r] = g_try_malloc((x->rows + 1) * sizeof(size_t));
    ok = ok && x->received_offsets[r] != NULL;
    x->received_total += x->receive_bytes[r];
  }
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the candidate lists of %d ranks for %zu rows", ranks, x->rows);
  x->agreed = g_get_monotonic_time();
  ok = x->group->agree(x->group, ok, error);
  x->agreed = g_get_monotonic_time() - x->agreed;
  return ok;
}

/* The messages themselves, then each one checked against its counts. */
static gboolean knnwb_group_exchange_messages(KnnwbGroupExchange *x, GError **error)
{
  const KnnwbKnnGroup *group = x->group;
  const size_t rows = x->rows, record = x->m->packing.bytes;
  x->exchanged = g_get_monotonic_time();
  if (x->shared ? !group->share_sync(group, error)
                : !group->exchange(group, x->send, x->send_bytes, (void *const *)x->receive,
                                   x->receive_bytes, error))
    return FALSE;
  x->exchanged = g_get_monotonic_time() - x->exchanged;
  gboolean ok = TRUE;
  for (int r = 0; r < x->ranks && ok; r++) {
    if (r == x->me)
      continue;
    const char *message = x->shared ? (const char *)x->blocks[r] + (size_t)x->sizes_in[2 * r + 1]
                                    : (const char *)x->receive[r];
    x->received_counts[r] = (const uint32_t *)(const void *)message;
    x->received_records[r] = message + rows * sizeof(uint32_t);
    ok = x->receive_bytes[r] >= rows * sizeof(uint32_t) &&
         knnwb_group_offsets(x->received_counts[r], rows, x->kc, x->received_offsets[r]) &&
         x->receive_bytes[r] == rows * sizeof(uint32_t) + x->received_offsets[r][rows] * record;
  }
  /* (Every rank reaches share_end after this: a corrupt message is a bug, seen by all alike.) */
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                "internal error: a rank sent candidates that do not add up");
  return ok;
}

/* Each own row's kc best of its own candidates and the received ones, in place: a row's own
 * candidates are in its pool before its slots are written, and no other row (nor the packing,
 * done) reads them. */
static void knnwb_group_exchange_merge(KnnwbGroupExchange *x, int64_t *index, float *score,
                                       double *distance, size_t row0, gint64 start)
{
  KnnwbGroupMerge *m = x->m;
  const gint64 merge_start = g_get_monotonic_time();
  m->received_counts = x->received_counts;
  m->received_offsets = (const size_t *const *)x->received_offsets;
  m->received_records = x->received_records;
  m->out_index = index + row0 * x->kc;
  m->out_score = score + row0 * x->kc;
  m->out_distance = m->distance != NULL ? distance + row0 * x->kc : NULL;
  knnwb_parallel_for(x->threads, x->rows, 1024, knnwb_group_merge_rows, m);
  g_autofree char *size = g_format_size_full(x->received_total, G_FORMAT_SIZE_IEC_UNITS);
  g_debug("knnwb: rank %d: candidates received (%s) in %.3f s (%s), waiting %.3f s; bounds and "
          "packing %.3f s, merge %.3f s",
          x->me, size, (double)x->exchanged / 1e6, x->shared ? "shared memory" : "messages",
          (double)x->agreed / 1e6, (double)(merge_start - start - x->exchanged - x->agreed) / 1e6,
          (double)(g_get_monotonic_time() - merge_start) / 1e6);
}

static void knnwb_group_exchange_clear(KnnwbGroupExchange *x)
{
  for (int r = 0; r < x->ranks; r++) {
    g_free((void *)x->send[r]);
    g_free(x->receive[r]);
    g_free(x->received_offsets[r]);
    g_free(x->pack_offsets[r]);
    g_free(x->pack_counts[r]);
  }
  g_free(x->send);
  g_free(x->send_bytes);
  g_free(x->receive);
  g_free(x->receive_bytes);
  g_free(x->sizes_out);
  g_free(x->sizes_in);
  g_free(x->offsets_out);
  g_free(x->blocks);
  g_free(x->pack_offsets);
  g_free(x->pack_counts);
  g_free(x->received_counts);
  g_free(x->received_offsets);
  g_free(x->received_records);
  g_free(x->m->bound);
}

gboolean knnwb_knn_group_merge(const KnnwbKnnGroup *group, size_t n, size_t kc, int64_t *index,
                               float *score, double *distance, size_t row0, size_t rows,
                               int threads, gboolean *distances_kept, GError **error)
{
  const int ranks = group->size;
  *distances_kept = FALSE;
  const gint64 start = g_get_monotonic_time();
  /* Distances travel only when every rank's backend computed them. */
  int64_t with_distance = distance != NULL;
  if (!group->reduce(group, &with_distance, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  KnnwbGroupMerge m = {0};
  m.packing = knnwb_group_packing(n, with_distance != 0);
  m.kc = kc;
  m.own_first = row0;
  m.ranks = ranks;
  m.me = group->rank;
  m.index = index;
  m.score = score;
  m.distance = with_distance ? distance : NULL;
  KnnwbGroupExchange x = {.group = group,
                          .m = &m,
                          .n = n,
                          .kc = kc,
                          .rows = rows,
                          .threads = threads,
                          .ranks = ranks,
                          .me = group->rank,
                          .send = g_new0(const void *, ranks),
                          .send_bytes = g_new0(size_t, ranks),
                          .receive = g_new0(void *, ranks),
                          .receive_bytes = g_new0(size_t, ranks),
                          .sizes_out = g_new0(uint64_t, 2 * ranks),
                          .sizes_in = g_new0(uint64_t, 2 * ranks),
                          .offsets_out = g_new0(size_t, ranks),
                          .blocks = g_new0(void *, ranks),
                          .pack_offsets = g_new0(size_t *, ranks),
                          .pack_counts = g_new0(uint32_t *, ranks),
                          .received_counts = g_new0(const uint32_t *, ranks),
                          .received_offsets = g_new0(size_t *, ranks),
                          .received_records = g_new0(const char *, ranks)};
  gboolean ok = knnwb_group_exchange_bounds(&x, error) && knnwb_group_exchange_count(&x, error) &&
                knnwb_group_exchange_pack(&x, error) && knnwb_group_exchange_sizes(&x, error) &&
                knnwb_group_exchange_messages(&x, error);
  if (ok)
    knnwb_group_exchange_merge(&x, index, score, distance, row0, start);
  /* Collective like share_begin: every rank that began reaches this (the agreements above fail
   * on all ranks alike). */
  if (x.shared && !group->share_end(group, ok ? error : NULL))
    ok = FALSE;
  knnwb_group_exchange_clear(&x);
  if (ok)
    *distances_kept = with_distance != 0;
  return ok;
}
