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
  if (n_threads > 0)
    return n_threads;
  return MAX(1, (int)g_get_num_processors());
}

void knnwb_clustering_team_run(int n_threads, void (*body)(int thread, int n_threads, void *data),
                               void *data)
{
  if (n_threads <= 1) {
    body(0, 1, data);
    return;
  }
  KnnwbClusteringWorker *workers = g_new(KnnwbClusteringWorker, n_threads);
  GThread **threads = g_new(GThread *, n_threads);
  for (int t = 1; t < n_threads; t++) {
    workers[t] = (KnnwbClusteringWorker){body, data, t, n_threads};
    threads[t] = g_thread_new("knnwb-cluster", knnwb_clustering_worker_main, &workers[t]);
  }
  body(0, n_threads, data);
  for (int t = 1; t < n_threads; t++)
    g_thread_join(threads[t]);
  g_free(threads);
  g_free(workers);
}
