/* A fixed team of threads with static ranges, for passes whose outputs must line up per thread;
 * its members run on kept workers (thread_pool.c). */
#include <knnwb/parallel.h>
#include "base/base_internal.h"

typedef struct {
  void (*body)(int, int, void *);
  void *data;
  int thread;
  int n_threads;
} KnnwbTeamWorker;

static void knnwb_team_worker_main(void *user)
{
  KnnwbTeamWorker *worker = user;
  worker->body(worker->thread, worker->n_threads, worker->data);
}

void knnwb_team_run(int n_threads, void (*body)(int thread, int n_threads, void *data), void *data)
{
  if (n_threads <= 1) {
    body(0, 1, data);
    return;
  }
  KnnwbTeamWorker *workers = g_try_new(KnnwbTeamWorker, n_threads);
  if (workers == NULL) {
    for (int t = 0; t < n_threads; t++)
      body(t, n_threads, data);
    return;
  }
  KnnwbPoolGroup group;
  knnwb_pool_group_init(&group);
  int started = n_threads;
  for (int t = 1; t < n_threads && started == n_threads; t++) {
    workers[t] = (KnnwbTeamWorker){body, data, t, n_threads};
    if (!knnwb_pool_run(&group, knnwb_team_worker_main, &workers[t]))
      started = t;
  }
  body(0, n_threads, data);
  /* The ranges are static and the passes have no barriers, so the ranges of threads that could
   * not start (memory or process limits) are done here, after ours: same results, less parallel. */
  for (int t = started; t < n_threads; t++)
    body(t, n_threads, data);
  knnwb_pool_group_wait(&group);
  g_free(workers);
}
