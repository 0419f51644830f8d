/* A fixed team of threads with static ranges, for passes whose outputs must line up per thread. */
#include "clustering_internal.h"

typedef struct {
  void (*body)(int, int, void *);
  void *data;
  int thread;
  int n_threads;
} KnnwbClusteringWorker;

static gpointer knnwb_clustering_worker_main(gpointer user)
{
  KnnwbClusteringWorker *worker = user;
  worker->body(worker->thread, worker->n_threads, worker->data);
  return NULL;
}

int knnwb_clustering_thread_count(int n_threads)
{
  return knnwb_thread_count(n_threads);
}

void knnwb_clustering_team_run(int n_threads, void (*body)(int thread, int n_threads, void *data),
                               void *data)
{
  if (n_threads <= 1) {
    body(0, 1, data);
    return;
  }
  KnnwbClusteringWorker *workers = g_try_new(KnnwbClusteringWorker, n_threads);
  GThread **threads = g_try_new0(GThread *, n_threads);
  if (workers == NULL || threads == NULL) {
    g_free(workers);
    g_free(threads);
    for (int t = 0; t < n_threads; t++)
      body(t, n_threads, data);
    return;
  }
  for (int t = 1; t < n_threads; t++) {
    workers[t] = (KnnwbClusteringWorker){body, data, t, n_threads};
    threads[t] = g_thread_try_new("knnwb-cluster", knnwb_clustering_worker_main, &workers[t], NULL);
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
