/* A shared self job's plan made common between the ranks (KnnwbSelectJob.share_plan): each
 * backend splits the job's pairs by its plan, which each rank makes from its own memory, cores and
 * devices, so the ranks take the smallest of their plans. */
#include <string.h>
#include <knnwb/error.h>
#include "group/group.h"
#include "knnwb_kernels.h"

void knnwb_group_plan_init(KnnwbGroupPlan *plan, const KnnwbKnnGroup *group)
{
  memset(plan, 0, sizeof *plan);
  plan->group = group;
}

int knnwb_group_plan_share(int64_t *values, size_t n, void *data)
{
  KnnwbGroupPlan *plan = data;
  if (plan->done)
    return 0; /* once per job: a second call would meet no other rank's */
  plan->done = TRUE;
  /* none offered (finish, or a call of another size): take part with no plan */
  const gboolean offered = values != NULL && n == KNNWB_SELECT_SHARE_PLAN_VALUES;
  int64_t own[KNNWB_SELECT_SHARE_PLAN_VALUES];
  for (size_t i = 0; i < KNNWB_SELECT_SHARE_PLAN_VALUES; i++)
    own[i] = offered ? values[i] : -1;
  GError *error = NULL;
  if (!plan->group->reduce(plan->group, own, KNNWB_SELECT_SHARE_PLAN_VALUES, KNNWB_GROUP_MIN,
                           &error)) {
    /* A transport failure: the job cannot go on; the next agreement reports it. */
    g_debug("knnwb: sharing the plan: %s", error->message);
    g_error_free(error);
    return 0;
  }
  if (offered)
    memcpy(values, own, sizeof own);
  return offered;
}

void knnwb_group_plan_finish(KnnwbGroupPlan *plan)
{
  if (plan->group != NULL && !plan->done)
    knnwb_group_plan_share(NULL, 0, plan);
}
