/*
 * A shared self job (the ranks of a whole-input run each score their share of the tiles over every
 * row) refined to k before its lists travel: the GPUs sort and cut each row's candidates on the
 * device (KnnwbSelectJob.out_k), so each rank holds n x k neighbours instead of n x kc candidates
 * (4 GB at 1,000,000 rows x 200 candidates), and the ranks exchange and merge those
 * (knnwb_knn_group_merge_best). A rank whose backend declined, or a CPU rank in the tests, refines
 * its kc lists here first, so that every rank takes the same collective path.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <knnwb/parallel.h>
#include "engine/engine_internal.h"

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
  KnnwbSharedBest *best;
} KnnwbSharedRefine;

/* Each row's k best as knnwb_refine_row keeps them (the k best scores' distances first, then only
 * the candidates whose lower bound does not exceed their largest), which are the k best of all its
 * candidates by (distance, index); the worst score and the valid count as the device gives them. */
static void knnwb_shared_refine_rows(size_t first, size_t last, void *user)
{
  const KnnwbSharedRefine *x = user;
  const size_t kc = x->kc, k = x->k;
  KnnwbRefineScratch scratch = {0};
  for (size_t i = first; i < last; i++) {
    size_t valid = 0;
    float worst = -INFINITY;
    int64_t *out_index = x->best->index + i * k;
    double *out_distance = x->best->distance + i * k;
    if (x->query->invalid != NULL && x->query->invalid[i]) {
      for (size_t c = 0; c < k; c++) {
        out_index[c] = -1;
        out_distance[c] = INFINITY;
      }
    } else {
      for (size_t c = 0; c < kc; c++) {
        const int64_t j = x->cand_index[i * kc + c];
        if (j < 0)
          continue;
        worst = MAX(worst, x->cand_score[i * kc + c]);
        valid += (size_t)j != i;
      }
      knnwb_refine_row(x->query, i, x->reference, (int64_t)i, x->cand_index + i * kc,
                       x->cand_score + i * kc,
                       x->cand_distance != NULL ? x->cand_distance + i * kc : NULL, kc, SIZE_MAX, k,
                       &scratch, out_index, out_distance);
    }
    x->best->worst[i] = worst;
    x->best->valid[i] = (int32_t)valid;
  }
  knnwb_refine_scratch_clear(&scratch);
}

void knnwb_knn_shared_best_host(const KnnwbPrepared *query, const KnnwbPrepared *reference,
                                size_t kc, const int64_t *cand_index, const float *cand_score,
                                const double *cand_distance, int threads, KnnwbSharedBest *best)
{
  KnnwbSharedRefine x = {query,      reference,     kc,  best->k, cand_index,
                         cand_score, cand_distance, best};
  knnwb_parallel_for(threads, best->n, 256, knnwb_shared_refine_rows, &x);
}
