/*
 * A shared self job (the ranks of a whole-input run each score their share of the tiles over every
 * row) refined to k before its lists travel: the GPUs sort and cut each row's candidates on the
 * device (KnnwbSelectJob.out_k), so each rank holds n x k neighbours instead of n x kc candidates
 * (4 GB at 1,000,000 rows x 200 candidates), put as they come into what travels to their ranks
 * (knnwb_group_best_lists_put), and the ranks exchange and merge those. A rank whose backend
 * declined, or a CPU rank in the tests, refines its kc lists here first, so that every rank takes
 * the same collective path.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <knnwb/parallel.h>
#include "engine/engine_internal.h"
#include "group/group.h"

gboolean knnwb_knn_shared_best_wanted(gboolean on_device)
{
  /* KNNWB_GROUP_REFINED=0: the candidates travel kc wide, merged by score (benchmarks);
   * =1: refined on the CPU too (tests). */
  const char *knob = g_getenv("KNNWB_GROUP_REFINED");
  if (knob != NULL && *knob != '\0')
    return strcmp(knob, "0") != 0;
  return on_device;
}

typedef struct {
  const KnnwbPrepared *query, *reference;
  size_t kc, k;
  const int64_t *cand_index;
  const float *cand_score;
  const double *cand_distance;
  KnnwbGroupBestLists *lists;
} KnnwbSharedRefine;

/* Rows put into the lists at once: buffers of a fixed size, whatever range a thread is given (one
 * thread gets every row). */
enum { KNNWB_SHARED_PIECE = 256 };

/* Each row's k best as knnwb_refine_row keeps them (the k best scores' distances first, then only
 * the candidates whose lower bound does not exceed their largest), which are the k best of all its
 * candidates by (distance, index); the worst score and the valid count as the device gives them;
 * put into the lists KNNWB_SHARED_PIECE rows at a time. */
static void knnwb_shared_refine_rows(size_t first, size_t last, void *user)
{
  const KnnwbSharedRefine *x = user;
  const size_t kc = x->kc, k = x->k;
  KnnwbRefineScratch scratch = {0};
  int64_t *index = g_new(int64_t, KNNWB_SHARED_PIECE * k);
  double *distance = g_new(double, KNNWB_SHARED_PIECE *k);
  float worst[KNNWB_SHARED_PIECE];
  int32_t valid[KNNWB_SHARED_PIECE];
  for (size_t piece0 = first; piece0 < last; piece0 += KNNWB_SHARED_PIECE) {
    const size_t rows = MIN((size_t)KNNWB_SHARED_PIECE, last - piece0);
    for (size_t t = 0; t < rows; t++) {
      const size_t i = piece0 + t;
      size_t listed = 0;
      worst[t] = -INFINITY;
      if (x->query->invalid != NULL && x->query->invalid[i]) {
        for (size_t c = 0; c < k; c++) {
          index[t * k + c] = -1;
          distance[t * k + c] = INFINITY;
        }
      } else {
        for (size_t c = 0; c < kc; c++) {
          const int64_t j = x->cand_index[i * kc + c];
          if (j < 0)
            continue;
          worst[t] = MAX(worst[t], x->cand_score[i * kc + c]);
          listed += (size_t)j != i;
        }
        knnwb_refine_row(x->query, i, x->reference, (int64_t)i, x->cand_index + i * kc,
                         x->cand_score + i * kc,
                         x->cand_distance != NULL ? x->cand_distance + i * kc : NULL, kc, SIZE_MAX,
                         k, &scratch, index + t * k, distance + t * k);
      }
      valid[t] = (int32_t)listed;
    }
    knnwb_group_best_lists_put(x->lists, piece0, rows, index, distance, worst, valid);
  }
  knnwb_refine_scratch_clear(&scratch);
  g_free(index);
  g_free(distance);
}

void knnwb_knn_shared_best_host(const KnnwbPrepared *query, const KnnwbPrepared *reference,
                                size_t kc, size_t k, const int64_t *cand_index,
                                const float *cand_score, const double *cand_distance, int threads,
                                KnnwbGroupBestLists *lists)
{
  KnnwbSharedRefine x = {query, reference, kc, k, cand_index, cand_score, cand_distance, lists};
  knnwb_parallel_for(threads, query->n, 256, knnwb_shared_refine_rows, &x);
}
