/* A minimal parallel-for over index ranges, with dynamic chunk scheduling. */
#include "knn_internal.h"

typedef struct {
  size_t n, grain;
  gssize next; /* atomically advanced chunk start */
  void (*body)(size_t, size_t, void *);
  void *data;
} KnnwbParallelLoop;

static gpointer knnwb_parallel_worker(gpointer user)
{
  KnnwbParallelLoop *loop = user;
  for (;;) {
    gssize first = g_atomic_pointer_add(&loop->next, (gssize)loop->grain);
    if ((size_t)first >= loop->n)
      break;
    size_t last = MIN(loop->n, (size_t)first + loop->grain);
    loop->body((size_t)first, last, loop->data);
  }
  return NULL;
}

int knnwb_thread_count(int n_threads)
{
  if (n_threads > 0)
    return n_threads;
  return MAX(1, (int)g_get_num_processors());
}

void knnwb_parallel_for(int n_threads, size_t n, size_t grain,
                        void (*body)(size_t first, size_t last, void *data), void *data)
{
  if (n == 0)
    return;
  grain = MAX((size_t)1, grain);
  size_t chunks = (n + grain - 1) / grain;
  int threads = (int)MIN((size_t)knnwb_thread_count(n_threads), chunks);
  if (threads <= 1) {
    body(0, n, data);
    return;
  }
  KnnwbParallelLoop loop = {n, grain, 0, body, data};
  GThread **workers = g_new(GThread *, threads - 1);
  for (int t = 0; t < threads - 1; t++)
    workers[t] = g_thread_new("knnwb-worker", knnwb_parallel_worker, &loop);
  knnwb_parallel_worker(&loop);
  for (int t = 0; t < threads - 1; t++)
    g_thread_join(workers[t]);
  g_free(workers);
}
