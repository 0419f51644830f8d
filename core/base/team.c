/* A fixed team of threads with static ranges, for passes whose outputs must line up per thread,
 * on the process's helper threads (workers.c). */
#include <knnwb/parallel.h>
#include "base/base_internal.h"

typedef struct {
  KnnwbPoolTask task; /* first: the helpers' view of the team */
  void (*body)(int, int, void *);
  void *data;
  int n_threads;
} KnnwbTeam;

static void knnwb_team_help(KnnwbPoolTask *task, int slot)
{
  KnnwbTeam *team = (KnnwbTeam *)task;
  team->body(slot, team->n_threads, team->data);
}

void knnwb_team_run(int n_threads, void (*body)(int thread, int n_threads, void *data), void *data)
{
  if (n_threads <= 1) {
    body(0, 1, data);
    return;
  }
  KnnwbTeam team = {.task = {.run = knnwb_team_help, .slots = n_threads - 1},
                    .body = body,
                    .data = data,
                    .n_threads = n_threads};
  knnwb_pool_offer(&team.task);
  body(0, n_threads, data);
  /* The ranges are static and the passes have no barriers, so the range of a thread that no
   * helper took (all busy, or none could start) is done here, after ours: same results, less
   * parallel. */
  const int taken = knnwb_pool_close(&team.task);
  for (int t = taken + 1; t < n_threads; t++)
    body(t, n_threads, data);
}
