/* One throttled progress report for the threads of a loop (the tree's search, the metafeatures'
 * expansion, the CPU select's tiles): written once, so the rules that keep reports in order and the
 * last one from being lost hold for every caller. */
#include <knnwb/parallel.h>

void knnwb_progress_throttle_init(KnnwbProgressThrottle *throttle)
{
  g_mutex_init(&throttle->lock);
  throttle->last_us = 0;
  throttle->last_done = 0;
}

void knnwb_progress_throttle_clear(KnnwbProgressThrottle *throttle)
{
  g_mutex_clear(&throttle->lock);
}

void knnwb_progress_throttle_offer(KnnwbProgressThrottle *throttle, gsize *done, uint64_t total,
                                   gboolean last,
                                   void (*progress)(uint64_t done, uint64_t total, void *data),
                                   void *data)
{
  if (progress == NULL)
    return;
  /* The thread with the final count waits: passing, it lost the last rows whenever another thread
   * was reporting. The others pass, so reports never hold the loop up. */
  if (last)
    g_mutex_lock(&throttle->lock);
  else if (!g_mutex_trylock(&throttle->lock))
    return;
  /* Read under the lock: a count read before taking it could reach it after a later one and go
   * back. */
  const uint64_t count = (uint64_t)g_atomic_pointer_get(done);
  const gint64 now = g_get_monotonic_time();
  if (count > throttle->last_done &&
      (last || count >= total || now - throttle->last_us >= KNNWB_PROGRESS_THROTTLE_US)) {
    throttle->last_us = now;
    throttle->last_done = count;
    progress(count, total, data);
  }
  g_mutex_unlock(&throttle->lock);
}
