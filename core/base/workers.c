/*
 * The process's helper threads, kept between parallel loops (knnwb_parallel_for, knnwb_team_run).
 * Why: a loop that started its own threads paid for them every time, and with the GPU driver's
 * mappings in the process a thread took about 0.2 ms to start: the real-like knn command (48
 * loops of 16 threads) spent 0.11-0.15 s starting threads, on its critical path.
 *
 * A loop offers its task (knnwb_pool_offer) and works on it itself; idle helpers take its slots in
 * order (1, 2, ...), each running task->run once. knnwb_pool_close then takes the slots no helper
 * took and waits for the helpers that did, so a caller never waits for work that has not begun:
 * loops inside loops, and loops of several threads at once, cannot deadlock, and with no helper
 * free the caller simply does everything. Helpers are started as offers need them, up to the
 * thread limit (knnwb_thread_limit), and never end; a forked child starts with none.
 */
#include <pthread.h>
#include <knnwb/knn.h>
#include <knnwb/parallel.h>
#include "base/base_internal.h"

static GMutex knnwb_pool_lock;
static GCond knnwb_pool_work; /* a task was offered (helpers wait) */
static GCond knnwb_pool_done; /* a closed task's last helper left (callers wait) */
static KnnwbPoolTask *knnwb_pool_head, *knnwb_pool_tail; /* offered tasks with free slots */
static int knnwb_pool_threads;                           /* helpers started */
static int knnwb_pool_free; /* helpers not running a task (waiting, or about to look) */

/* Takes task off the queue (the lock held); nothing when it is not there. */
static void knnwb_pool_unqueue(KnnwbPoolTask *task)
{
  KnnwbPoolTask **link = &knnwb_pool_head, *previous = NULL;
  while (*link != NULL && *link != task) {
    previous = *link;
    link = &(*link)->next;
  }
  if (*link == NULL)
    return;
  *link = task->next;
  if (knnwb_pool_tail == task)
    knnwb_pool_tail = previous;
  task->next = NULL;
}

static gpointer knnwb_pool_helper(gpointer unused)
{
  (void)unused;
  g_mutex_lock(&knnwb_pool_lock);
  for (;;) {
    while (knnwb_pool_head == NULL)
      g_cond_wait(&knnwb_pool_work, &knnwb_pool_lock);
    KnnwbPoolTask *task = knnwb_pool_head;
    knnwb_pool_free--;
    const int slot = ++task->taken;
    task->active++;
    if (task->taken == task->slots)
      knnwb_pool_unqueue(task);
    g_mutex_unlock(&knnwb_pool_lock);
    task->run(task, slot);
    g_mutex_lock(&knnwb_pool_lock);
    knnwb_pool_free++;
    if (--task->active == 0 && task->closed)
      g_cond_broadcast(&knnwb_pool_done);
  }
  return NULL;
}

/* In a forked child only the forking thread exists: no helper, nothing offered, and the lock
 * (which another thread may have held at the fork) free. */
static void knnwb_pool_forked(void)
{
  g_mutex_init(&knnwb_pool_lock);
  g_cond_init(&knnwb_pool_work);
  g_cond_init(&knnwb_pool_done);
  knnwb_pool_head = knnwb_pool_tail = NULL;
  knnwb_pool_threads = knnwb_pool_free = 0;
}

void knnwb_pool_offer(KnnwbPoolTask *task)
{
  static gsize forked_handler;
  if (g_once_init_enter(&forked_handler)) {
    pthread_atfork(NULL, NULL, knnwb_pool_forked);
    g_once_init_leave(&forked_handler, 1);
  }
  task->taken = task->active = 0;
  task->closed = FALSE;
  task->next = NULL;
  if (task->slots <= 0)
    return;
  g_mutex_lock(&knnwb_pool_lock);
  if (knnwb_pool_tail != NULL)
    knnwb_pool_tail->next = task;
  else
    knnwb_pool_head = task;
  knnwb_pool_tail = task;
  /* Enough helpers for every slot on offer, within the limit; one started now finds the queue as
   * it starts. */
  int wanted = 0;
  for (const KnnwbPoolTask *t = knnwb_pool_head; t != NULL; t = t->next)
    wanted += t->slots - t->taken;
  const int limit = knnwb_thread_limit() - 1;
  while (knnwb_pool_free < wanted && knnwb_pool_threads < limit) {
    GThread *thread = knnwb_thread_try_start("knnwb-helper", knnwb_pool_helper, NULL);
    if (thread == NULL)
      break;
    g_thread_unref(thread);
    knnwb_pool_threads++;
    knnwb_pool_free++;
  }
  g_cond_broadcast(&knnwb_pool_work);
  g_mutex_unlock(&knnwb_pool_lock);
}

int knnwb_pool_close(KnnwbPoolTask *task)
{
  if (task->slots <= 0)
    return 0;
  g_mutex_lock(&knnwb_pool_lock);
  task->closed = TRUE;
  knnwb_pool_unqueue(task);
  while (task->active > 0)
    g_cond_wait(&knnwb_pool_done, &knnwb_pool_lock);
  const int taken = task->taken;
  g_mutex_unlock(&knnwb_pool_lock);
  return taken;
}
