/* A pipeline run by several MPI ranks: where each step runs, and how the ranks learn each other's
 * failures. */
#include <knnwb/error.h>
#include "pipeline/pipeline_internal.h"
#include "runtime/runtime.h"

gboolean *knnwb_pipeline_split_plan(const KnnwbPipeline *pipeline)
{
  const guint n = pipeline->steps->len;
  gboolean *split = g_new0(gboolean, MAX(n, 1u));
  for (guint s = 0; s < n; s++) {
    const KnnwbPipelineStep *step = pipeline->steps->pdata[s];
    split[s] = (step->step->type->flags & KNNWB_STEP_SPLIT_ROWS) != 0;
  }
  /* Each pass only turns entries off, so it ends after at most n passes with changes. */
  gboolean changed = TRUE;
  while (changed) {
    changed = FALSE;
    for (guint t = 0; t < n; t++) {
      const KnnwbPipelineStep *step = pipeline->steps->pdata[t];
      const KnnwbStepType *type = step->step->type;
      for (guint i = 0; i < type->n_inputs; i++) {
        int s = step->sources[i];
        if (s < 0)
          continue;
        const KnnwbPipelineStep *source = pipeline->steps->pdata[s];
        gboolean split_matrix = split[s] && source->step->type->output == KNNWB_KIND_MATRIX;
        /* A step on rank 0 alone wants the whole matrix: then it is read whole (on rank 0). */
        if (split_matrix && !split[t]) {
          split[s] = FALSE;
          changed = TRUE;
        }
        /* A split step takes split matrices only (a graph, say, lives on rank 0). */
        if (split[t] && !split_matrix) {
          split[t] = FALSE;
          changed = TRUE;
        }
      }
    }
  }
  return split;
}

gboolean knnwb_pipeline_ranks_sync(const KnnwbKnnGroup *group, gboolean ok, GError **error)
{
  int64_t failed = !ok;
  g_autoptr(GError) transport = NULL;
  if (!group->reduce(group, &failed, 1, KNNWB_GROUP_SUM, &transport)) {
    if (ok)
      g_propagate_error(error, g_steal_pointer(&transport));
    return FALSE;
  }
  if (failed == 0)
    return TRUE;
  if (failed == group->size)
    return FALSE;
  return group->agree(group, ok, error);
}

gboolean knnwb_pipeline_ranks_ready(gboolean ok, GError **error)
{
  const KnnwbKnnGroup *group = knnwb_host_group();
  if (group == NULL || group->size <= 1)
    return ok;
  return knnwb_pipeline_ranks_sync(group, ok, error);
}

gboolean *knnwb_pipeline_scatter_plan(const KnnwbPipeline *pipeline, const gboolean *split)
{
  const guint n = pipeline->steps->len;
  gboolean *scatter = g_new0(gboolean, MAX(n, 1u));
  for (guint t = 0; t < n; t++) {
    const KnnwbPipelineStep *step = pipeline->steps->pdata[t];
    const KnnwbStepType *type = step->step->type;
    if (split[t] || !(type->flags & KNNWB_STEP_SPLIT_ROWS) || type->output == KNNWB_KIND_MATRIX)
      continue;
    gboolean matrices = TRUE;
    for (guint i = 0; i < type->n_inputs; i++)
      matrices &= step->sources[i] < 0 || type->inputs[i].kind == KNNWB_KIND_MATRIX;
    scatter[t] = matrices;
  }
  return scatter;
}

gboolean knnwb_pipeline_scatter_rows(const KnnwbKnnGroup *group, const KnnwbMatrix *whole,
                                     KnnwbMatrix **block, size_t *first, size_t *total,
                                     GError **error)
{
  *block = NULL;
  const gboolean root = group->rank == 0;
  const size_t ranks = (size_t)group->size;
  /* Rank 0's sizes to every rank: a sum to which the others add nothing. */
  int64_t shape[3] = {root ? (int64_t)whole->n_rows : 0, root ? (int64_t)whole->n_cols : 0,
                      root ? (int64_t)(whole->n_absent_rows > 0) : 0};
  if (!group->reduce(group, shape, 3, KNNWB_GROUP_SUM, error))
    return FALSE;
  const size_t n = (size_t)shape[0], d = (size_t)shape[1];
  size_t last;
  knnwb_knn_group_rows(n, group->rank, group->size, first, &last);
  *total = n;
  g_autoptr(KnnwbMatrix) mine = NULL;
  if (root) /* a view of rank 0's rows: the whole matrix outlives the run's values */
    mine = knnwb_matrix_new_wrapped(last - *first, d, whole->values + *first * d, NULL, NULL);
  else
    mine = knnwb_matrix_new(last - *first, d, error);
  g_autofree unsigned char *absent =
      shape[2] && !root ? g_try_malloc0(MAX(last - *first, (size_t)1)) : NULL;
  gboolean room = mine != NULL && (!shape[2] || root || absent != NULL);
  if (mine != NULL && !room)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot hold %zu row marks",
                last - *first);
  if (!group->agree(group, room, error))
    return FALSE;
  g_autofree const void **send = g_new0(const void *, ranks);
  g_autofree size_t *send_bytes = g_new0(size_t, ranks);
  g_autofree void **receive = g_new0(void *, ranks);
  g_autofree size_t *receive_bytes = g_new0(size_t, ranks);
  /* Values, then (when any row is absent) the absent marks; rank 0 keeps its own block. */
  for (int round = 0; round < (shape[2] ? 2 : 1); round++) {
    const size_t unit = round == 0 ? d * sizeof(float) : 1;
    for (size_t r = 1; r < ranks && root; r++) {
      size_t from, to;
      knnwb_knn_group_rows(n, (int)r, group->size, &from, &to);
      send[r] = round == 0 ? (const void *)(whole->values + from * d)
                           : (const void *)(whole->absent_rows + from);
      send_bytes[r] = (to - from) * unit;
    }
    if (!root) {
      receive[0] = round == 0 ? (void *)mine->values : (void *)absent;
      receive_bytes[0] = (last - *first) * unit;
    }
    if (!group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error))
      return FALSE;
  }
  for (size_t i = *first; i < last && shape[2]; i++)
    if (root ? knnwb_matrix_row_is_absent(whole, i) : absent[i - *first] != 0)
      knnwb_matrix_set_row_absent(mine, i - *first);
  *block = g_steal_pointer(&mine);
  return TRUE;
}
