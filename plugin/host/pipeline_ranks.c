/* A pipeline run by several MPI ranks: where each step runs, and how the ranks learn each other's
 * failures. */
#include <knnwb/error.h>
#include "pipeline_internal.h"

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
