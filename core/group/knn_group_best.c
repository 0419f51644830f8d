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

typedef struct {
  size_t k, kc, row0, rows, ranks;
  const int64_t *index;
  const double *distance;
  const float *worst;
  const int32_t *valid;
  int me;
  /* packing: the rows [first, first + count) into out */
  size_t first;
  char *out;
  /* merging: every rank's records of this rank's rows (this rank's: NULL, read in place) */
  char *const *from;
  int64_t *out_index;
  double *out_distance;
  float *out_bound;
  int32_t *out_valid;
} KnnwbGroupBest;

static void knnwb_group_best_pack(size_t a, size_t b, void *user)
{
  const KnnwbGroupBest *x = user;
  const size_t k = x->k, record = knnwb_group_best_record(k);
  for (size_t t = a; t < b; t++) {
    const size_t i = x->first + t;
    char *at = x->out + t * record;
    memcpy(at, x->index + i * k, k * sizeof(int64_t));
    memcpy(at + k * sizeof(int64_t), x->distance + i * k, k * sizeof(double));
    memcpy(at + k * (sizeof(int64_t) + sizeof(double)), &x->worst[i], sizeof(float));
    memcpy(at + k * (sizeof(int64_t) + sizeof(double)) + sizeof(float), &x->valid[i],
           sizeof(int32_t));
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

static void knnwb_group_best_merge_rows(size_t a, size_t b, void *user)
{
  const KnnwbGroupBest *x = user;
  const size_t k = x->k, record = knnwb_group_best_record(k);
  KnnwbNeighbour *pool = g_new(KnnwbNeighbour, x->ranks * k + 1);
  for (size_t t = a; t < b; t++) {
    size_t count = 0;
    float bound = INFINITY;
    int64_t valid = 0;
    for (size_t r = 0; r < x->ranks; r++) {
      const int64_t *index;
      const double *distance;
      float worst;
      int32_t listed;
      if ((int)r == x->me) {
        const size_t i = x->row0 + t;
        index = x->index + i * k;
        distance = x->distance + i * k;
        worst = x->worst[i];
        listed = x->valid[i];
      } else {
        const char *at = x->from[r] + t * record;
        index = (const int64_t *)(const void *)at;
        distance = (const double *)(const void *)(at + k * sizeof(int64_t));
        memcpy(&worst, at + k * (sizeof(int64_t) + sizeof(double)), sizeof(float));
        memcpy(&listed, at + k * (sizeof(int64_t) + sizeof(double)) + sizeof(float),
               sizeof(int32_t));
      }
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

gboolean knnwb_knn_group_merge_best(const KnnwbKnnGroup *group, size_t n, size_t k, size_t kc,
                                    const int64_t *index, const double *distance,
                                    const float *worst, const int32_t *valid, size_t row0,
                                    size_t rows, int threads, int64_t *out_index,
                                    double *out_distance, float *out_bound, int32_t *out_valid,
                                    GError **error)
{
  const size_t ranks = (size_t)group->size, record = knnwb_group_best_record(k);
  KnnwbGroupBest x = {k,        kc,        row0,         rows,        ranks,    index,
                      distance, worst,     valid,        group->rank, 0,        NULL,
                      NULL,     out_index, out_distance, out_bound,   out_valid};
  char **send = g_new0(char *, ranks), **receive = g_new0(char *, ranks);
  size_t *send_bytes = g_new0(size_t, ranks), *receive_bytes = g_new0(size_t, ranks);
  gboolean ok = TRUE;
  for (size_t r = 0; r < ranks; r++) {
    if ((int)r == group->rank)
      continue;
    size_t first, last;
    knnwb_knn_group_rows(n, (int)r, group->size, &first, &last);
    send_bytes[r] = (last - first) * record;
    receive_bytes[r] = rows * record;
    send[r] = send_bytes[r] > 0 ? g_try_malloc(send_bytes[r]) : NULL;
    receive[r] = receive_bytes[r] > 0 ? g_try_malloc(receive_bytes[r]) : NULL;
    ok = ok && (send_bytes[r] == 0 || send[r] != NULL) &&
         (receive_bytes[r] == 0 || receive[r] != NULL);
    if (ok && send[r] != NULL) {
      x.first = first;
      x.out = send[r];
      knnwb_parallel_for(threads, last - first, 1024, knnwb_group_best_pack, &x);
    }
  }
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the neighbour lists of %zu rows that travel between the ranks",
                rows);
  ok = group->agree(group, ok, error) &&
       group->exchange(group, (const void *const *)send, send_bytes, (void *const *)receive,
                       receive_bytes, error);
  for (size_t r = 0; r < ranks; r++)
    g_clear_pointer(&send[r], g_free);
  if (ok) {
    x.from = receive;
    knnwb_parallel_for(threads, rows, 256, knnwb_group_best_merge_rows, &x);
  }
  for (size_t r = 0; r < ranks; r++)
    g_free(receive[r]);
  g_free(send);
  g_free(receive);
  g_free(send_bytes);
  g_free(receive_bytes);
  return ok;
}
