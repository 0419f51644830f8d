/*
 * A shared self job's lists when each rank has them refined to k (the GPUs sort and cut each row's
 * candidates on the device; a rank whose backend declined refines its kc lists on the host first):
 * for every row, its k best of this rank's share of the tiles by (exact distance, index), the
 * worst score of its kc candidates and how many valid ones it had. Each rank sends each other rank
 * the records of its rows (16 bytes a neighbour and 8 a row, where the candidates' merge by score
 * sent up to 16-20 bytes a candidate: kc = 200 at k = 30 under an FP16 screen), and each row keeps
 * the k best of all ranks' lists and a bound for its certificate: the least worst score of the
 * ranks' full lists. Every pair of rows was scored on exactly one rank; one it left out scored at
 * least its list's worst (a full list) or a threshold, which came from some rank's full list at
 * least as good as that list's final worst (the shared thresholds only fall). So every pair
 * outside the merged list scores at least the bound, and knnwb_refine_certify_row certifies the
 * row as it certifies one process's: the lists are one process's lists, byte for byte.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "group/group_internal.h"

KNNWB_DEFINE_SELECT_FIRST(knnwb_group_near_select, KnnwbNeighbour, knnwb_neighbour_before)

/* One row's record: k indices, k distances, the worst score, the valid count. */
static size_t knnwb_group_best_record(size_t k)
{
  return k * (sizeof(int64_t) + sizeof(double)) + sizeof(float) + sizeof(int32_t);
}

struct KnnwbGroupBestLists {
  size_t n, k, ranks, record;
  int me;
  size_t *first, *count; /* each rank's rows [first, first + count) */
  char **part;           /* each rank's rows' records, in row order */
};

KnnwbGroupBestLists *knnwb_group_best_lists_new(const KnnwbKnnGroup *group, size_t n, size_t k,
                                                size_t row0, size_t rows)
{
  /* every rank sends and receives by the same cut */
  size_t my_first = 0, my_last = 0;
  knnwb_knn_group_rows(n, group->rank, group->size, &my_first, &my_last);
  g_return_val_if_fail(row0 == my_first && rows == my_last - my_first, NULL);
  KnnwbGroupBestLists *lists = g_new0(KnnwbGroupBestLists, 1);
  lists->n = n;
  lists->k = k;
  lists->ranks = (size_t)group->size;
  lists->record = knnwb_group_best_record(k);
  lists->me = group->rank;
  lists->first = g_new0(size_t, lists->ranks);
  lists->count = g_new0(size_t, lists->ranks);
  lists->part = g_new0(char *, lists->ranks);
  gboolean ok = TRUE;
  for (size_t r = 0; r < lists->ranks && ok; r++) {
    size_t last = 0;
    knnwb_knn_group_rows(n, (int)r, group->size, &lists->first[r], &last);
    lists->count[r] = last - lists->first[r];
    if (lists->count[r] > 0) {
      lists->part[r] = knnwb_memory_try_alloc(lists->count[r] * lists->record, FALSE);
      ok = lists->part[r] != NULL;
    }
  }
  if (!ok)
    g_clear_pointer(&lists, knnwb_group_best_lists_free);
  return lists;
}

void knnwb_group_best_lists_free(KnnwbGroupBestLists *lists)
{
  if (lists == NULL)
    return;
  size_t *bytes = g_new(size_t, lists->ranks);
  for (size_t r = 0; r < lists->ranks; r++)
    bytes[r] = lists->count[r] * lists->record;
  /* (gigabytes at millions of rows: unmapped later, not in the middle of the run) */
  knnwb_release_later((void *const *)lists->part, bytes, lists->ranks);
  g_free(bytes);
  g_free(lists->part);
  g_free(lists->first);
  g_free(lists->count);
  g_free(lists);
}

void knnwb_group_best_lists_put(KnnwbGroupBestLists *lists, size_t first, size_t count,
                                const int64_t *index, const double *distance, const float *worst,
                                const int32_t *valid)
{
  const size_t k = lists->k, record = lists->record;
  size_t r = 0; /* the rank whose rows hold row i (blocks in rank order), found once and stepped */
  for (size_t t = 0; t < count; t++) {
    const size_t i = first + t;
    while (r + 1 < lists->ranks && i >= lists->first[r] + lists->count[r])
      r++;
    g_assert(i >= lists->first[r] && i < lists->first[r] + lists->count[r]);
    char *at = lists->part[r] + (i - lists->first[r]) * record;
    memcpy(at, index + t * k, k * sizeof(int64_t));
    memcpy(at + k * sizeof(int64_t), distance + t * k, k * sizeof(double));
    memcpy(at + k * (sizeof(int64_t) + sizeof(double)), &worst[t], sizeof(float));
    memcpy(at + k * (sizeof(int64_t) + sizeof(double)) + sizeof(float), &valid[t], sizeof(int32_t));
  }
}

/* The bound of one rank's list: its worst score when full (the row itself, never valid, may have
 * held a slot: counted as full then too, which can only lower the bound), NaN for a worst score
 * that overflowed; +inf when it left nothing out but by a threshold. */
static float knnwb_group_best_bound(size_t kc, float worst, int32_t valid)
{
  if ((size_t)MAX(valid, 0) + 1 < kc)
    return INFINITY;
  return isfinite(worst) ? worst : NAN;
}

/* Merging every rank's records of this rank's rows (from[r], rank r's; this rank's own part). */
typedef struct {
  size_t k, kc, ranks, record;
  char *const *from;
  int64_t *out_index;
  double *out_distance;
  float *out_bound;
  int32_t *out_valid;
} KnnwbGroupBestMerge;

static void knnwb_group_best_merge_rows(size_t a, size_t b, void *user)
{
  const KnnwbGroupBestMerge *x = user;
  const size_t k = x->k, record = x->record;
  KnnwbNeighbour *pool = g_new(KnnwbNeighbour, x->ranks * k + 1);
  for (size_t t = a; t < b; t++) {
    size_t count = 0;
    float bound = INFINITY;
    int64_t valid = 0;
    for (size_t r = 0; r < x->ranks; r++) {
      const char *at = x->from[r] + t * record;
      const int64_t *index = (const int64_t *)(const void *)at;
      const double *distance = (const double *)(const void *)(at + k * sizeof(int64_t));
      float worst;
      int32_t listed;
      memcpy(&worst, at + k * (sizeof(int64_t) + sizeof(double)), sizeof(float));
      memcpy(&listed, at + k * (sizeof(int64_t) + sizeof(double)) + sizeof(float), sizeof(int32_t));
      for (size_t c = 0; c < k && index[c] >= 0; c++)
        pool[count++] = (KnnwbNeighbour){distance[c], index[c]};
      const float own = knnwb_group_best_bound(x->kc, worst, listed);
      bound = isnan(bound) || isnan(own) ? NAN : MIN(bound, own);
      valid += MAX(listed, 0);
    }
    if (count > k) {
      knnwb_group_near_select(pool, count, k);
      count = k;
    }
    qsort(pool, count, sizeof *pool, knnwb_neighbour_compare);
    for (size_t c = 0; c < k; c++) {
      x->out_index[t * k + c] = c < count ? pool[c].index : -1;
      x->out_distance[t * k + c] = c < count ? pool[c].distance : INFINITY;
    }
    x->out_bound[t] = bound;
    x->out_valid[t] = (int32_t)MIN(valid, (int64_t)INT32_MAX);
  }
  g_free(pool);
}

gboolean knnwb_group_best_lists_merge(const KnnwbKnnGroup *group, KnnwbGroupBestLists *lists,
                                      size_t kc, int threads, int64_t *out_index,
                                      double *out_distance, float *out_bound, int32_t *out_valid,
                                      GError **error)
{
  const size_t ranks = lists->ranks, me = (size_t)lists->me, rows = lists->count[me];
  char **receive = g_new0(char *, ranks);
  size_t *send_bytes = g_new0(size_t, ranks), *receive_bytes = g_new0(size_t, ranks);
  gboolean ok = TRUE;
  for (size_t r = 0; r < ranks; r++) {
    if (r == me)
      continue;
    send_bytes[r] = lists->count[r] * lists->record;
    receive_bytes[r] = rows * lists->record;
    receive[r] = receive_bytes[r] > 0 ? g_try_malloc(receive_bytes[r]) : NULL;
    ok = ok && (receive_bytes[r] == 0 || receive[r] != NULL);
  }
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the neighbour lists of %zu rows that travel between the ranks",
                rows);
  char **send = g_new0(char *, ranks);
  for (size_t r = 0; r < ranks; r++)
    send[r] = r == me ? NULL : lists->part[r];
  ok = group->agree(group, ok, error) &&
       group->exchange(group, (const void *const *)send, send_bytes, (void *const *)receive,
                       receive_bytes, error);
  for (size_t r = 0; r < ranks; r++) /* sent: the others' records are done with */
    if (r != me)
      g_clear_pointer(&lists->part[r], g_free);
  if (ok) {
    receive[me] = lists->part[me];
    KnnwbGroupBestMerge x = {lists->k,  kc,           ranks,     lists->record, receive,
                             out_index, out_distance, out_bound, out_valid};
    knnwb_parallel_for(threads, rows, 256, knnwb_group_best_merge_rows, &x);
    receive[me] = NULL;
  }
  for (size_t r = 0; r < ranks; r++)
    g_free(receive[r]);
  g_free(send);
  g_free(receive);
  g_free(send_bytes);
  g_free(receive_bytes);
  return ok;
}
