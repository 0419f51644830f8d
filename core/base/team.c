/* A fixed team of threads with static ranges, for passes whose outputs must line up per thread. */
#include <knnwb/parallel.h>

typedef struct {
  void (*body)(int, int, void *);
  void *data;
  int thread;
  int n_threads;
} KnnwbTeamWorker;

static gpointer knnwb_team_worker_main(gpointer user)
{
  KnnwbTeamWorker *worker = user;
  worker->body(worker->thread, worker->n_threads, worker->data);
  return NULL;
}

void knnwb_team_run(int n_threads, void (*body)(int thread, int n_threads, void *data),
                               void *data)
{
  if (n_threads <= 1) {
    body(0, 1, data);
    return;
  }
  KnnwbTeamWorker *workers = g_try_new(KnnwbTeamWorker, n_threads);
  GThread **threads = g_try_new0(GThread *, n_threads);
  if (workers == NULL || threads == NULL) {
    g_free(workers);
    g_free(threads);
    for (int t = 0; t < n_threads; t++)
      body(t, n_threads, data);
    return;
  }
  for (int t = 1; t < n_threads; t++) {
    workers[t] = (KnnwbTeamWorker){body, data, t, n_threads};
    threads[t] = g_thread_try_new("knnwb-team", knnwb_team_worker_main, &workers[t], NULL);
  }
  body(0, n_threads, data);
  /* The ranges are static and the passes have no barriers, so the range of a thread that could not
   * start (memory or process limits) is done here, after ours: same results, less parallel. */
  for (int t = 1; t < n_threads; t++)
    if (threads[t] == NULL)
      body(t, n_threads, data);
  for (int t = 1; t < n_threads; t++)
    if (threads[t] != NULL)
      g_thread_join(threads[t]);
  g_free(threads);
  g_free(workers);
}
