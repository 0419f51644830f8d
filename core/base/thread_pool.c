/*
 * Worker threads kept between parallel loops and teams (parallel.c, team.c).
 *
 * Each loop used to start its threads and join them. A thread start maps a fresh 8 MiB stack
 * (glibc keeps only 40 MiB of freed stacks), and a mapping waits for the process's memory-map
 * lock, which the CUDA driver holds while it allocates. At 1,533,876 x 295 rows, with the rows'
 * upload to the GPU starting beside them, the duplicate search's two loops took 0.045-0.058 s
 * instead of 0.005 s and the margin planner 0.100-0.127 s instead of 0.056-0.069 s (one H200;
 * the same runs with glibc's stack cache made large enough, GLIBC_TUNABLES
 * glibc.pthread.stack_cache_size, took the short times). A kept worker maps nothing.
 *
 * A task is handed to an idle worker or, when none is idle, to a new one: never queued behind a
 * busy worker, so a loop inside a loop, or a team whose members run at once, cannot wait on
 * itself. A worker idle for KNNWB_POOL_IDLE_SECONDS leaves. Workers are kept only while the
 * default thread stack is small (RLIMIT_STACK up to KNNWB_POOL_STACK_MAX): huge stacks held
 * between loops would take address space that a limited process needs for its data, so such
 * workers leave after their task, as before. A forked child starts with no workers
 * (knnwb_isolated_run forks, and the parent's workers do not exist in the child).
 */
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <knnwb/knn.h>
#include <knnwb/parallel.h>
#include "base/base_internal.h"

#define KNNWB_POOL_IDLE_SECONDS 10
#define KNNWB_POOL_STACK_MAX ((rlim_t)64 << 20)

/* A worker waits on its own lock, so that the workers a loop wakes do not queue for one. */
typedef struct KnnwbPoolWorker KnnwbPoolWorker;
struct KnnwbPoolWorker {
  GMutex lock; /* task, data, group */
  GCond wake;
  void (*task)(void *data); /* NULL while idle */
  void *data;
  KnnwbPoolGroup *group;
  KnnwbPoolWorker *next_idle; /* pool_lock */
};

static GMutex pool_lock; /* pool_idle, pool_idle_count */
static KnnwbPoolWorker *pool_idle;
static int pool_idle_count;
static int pool_idle_max; /* knnwb_thread_limit(), read once */

static void knnwb_pool_fork_prepare(void)
{
  g_mutex_lock(&pool_lock);
}

static void knnwb_pool_fork_parent(void)
{
  g_mutex_unlock(&pool_lock);
}

/* The child has only the forking thread: the idle list names threads it does not have (their
 * records are left behind). */
static void knnwb_pool_fork_child(void)
{
  pool_idle = NULL;
  pool_idle_count = 0;
  g_mutex_unlock(&pool_lock);
}

/* Whether workers wait for the next task (see the top of this file): a small default stack, and
 * KNNWB_THREAD_POOL not 0 (0: every worker leaves after its task, as before the pool; to
 * measure). Read once; registers the fork handlers. */
static gboolean knnwb_pool_keeps(void)
{
  static gsize keeps;
  if (g_once_init_enter(&keeps)) {
    struct rlimit stack;
    const gboolean small = getrlimit(RLIMIT_STACK, &stack) == 0 &&
                           stack.rlim_cur != RLIM_INFINITY &&
                           stack.rlim_cur <= KNNWB_POOL_STACK_MAX;
    pool_idle_max = knnwb_thread_limit();
    pthread_atfork(knnwb_pool_fork_prepare, knnwb_pool_fork_parent, knnwb_pool_fork_child);
    g_once_init_leave(&keeps, small && g_strcmp0(g_getenv("KNNWB_THREAD_POOL"), "0") != 0 ? 2 : 1);
  }
  return keeps == 2;
}

/* The group's task returned: the last one tells the caller. */
static void knnwb_pool_task_done(KnnwbPoolGroup *group)
{
  g_mutex_lock(&group->lock);
  if (--group->running == 0)
    g_cond_signal(&group->done);
  g_mutex_unlock(&group->lock);
}

/* Puts w on the idle list and waits for a task; FALSE when none came in time or the pool is
 * full (w then off the list). A worker whose time ran out just as a caller took it from the list
 * waits for that caller's task. */
static gboolean knnwb_pool_wait_task(KnnwbPoolWorker *w)
{
  g_mutex_lock(&pool_lock);
  if (pool_idle_count >= pool_idle_max) {
    g_mutex_unlock(&pool_lock);
    return FALSE;
  }
  w->next_idle = pool_idle;
  pool_idle = w;
  pool_idle_count++;
  g_mutex_unlock(&pool_lock);
  const gint64 until = g_get_monotonic_time() + KNNWB_POOL_IDLE_SECONDS * G_TIME_SPAN_SECOND;
  g_mutex_lock(&w->lock);
  gboolean timed_out = FALSE;
  while (w->task == NULL && !timed_out)
    timed_out = !g_cond_wait_until(&w->wake, &w->lock, until);
  g_mutex_unlock(&w->lock);
  if (!timed_out)
    return TRUE;
  g_mutex_lock(&pool_lock);
  gboolean listed = FALSE;
  for (KnnwbPoolWorker **at = &pool_idle; *at != NULL; at = &(*at)->next_idle)
    if (*at == w) {
      *at = w->next_idle;
      pool_idle_count--;
      listed = TRUE;
      break;
    }
  g_mutex_unlock(&pool_lock);
  if (listed)
    return FALSE;
  g_mutex_lock(&w->lock); /* taken: its task is on the way */
  while (w->task == NULL)
    g_cond_wait(&w->wake, &w->lock);
  g_mutex_unlock(&w->lock);
  return TRUE;
}

static gpointer knnwb_pool_worker_main(gpointer user)
{
  KnnwbPoolWorker *w = user;
  const gboolean keep = knnwb_pool_keeps();
  do {
    g_mutex_lock(&w->lock);
    void (*task)(void *) = w->task;
    void *data = w->data;
    KnnwbPoolGroup *group = w->group;
    w->task = NULL;
    g_mutex_unlock(&w->lock);
    task(data);
    knnwb_pool_task_done(group);
  } while (keep && knnwb_pool_wait_task(w));
  g_mutex_clear(&w->lock);
  g_cond_clear(&w->wake);
  g_free(w);
  return NULL;
}

/* A new worker for the task, counted in group; FALSE when no thread can start. It starts with the
 * signals that a handler catches blocked: the host takes SIGINT and SIGTERM on a thread of its own
 * and blocks them in every thread it starts (plugin/host/runtime/signals.c), and a worker started
 * before that and kept must not take them either. */
static gboolean knnwb_pool_start(KnnwbPoolGroup *group, void (*task)(void *), void *data)
{
  KnnwbPoolWorker *w = g_try_new0(KnnwbPoolWorker, 1);
  if (w == NULL)
    return FALSE;
  g_mutex_init(&w->lock);
  g_cond_init(&w->wake);
  w->task = task;
  w->data = data;
  w->group = group;
  sigset_t caught, before;
  sigemptyset(&caught);
  const int signals[] = {SIGINT, SIGTERM, SIGCONT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};
  for (size_t i = 0; i < G_N_ELEMENTS(signals); i++)
    sigaddset(&caught, signals[i]);
  const gboolean masked = pthread_sigmask(SIG_BLOCK, &caught, &before) == 0;
  GThread *thread = knnwb_thread_try_start("knnwb-worker", knnwb_pool_worker_main, w);
  if (masked)
    pthread_sigmask(SIG_SETMASK, &before, NULL);
  if (thread == NULL) {
    g_mutex_clear(&w->lock);
    g_cond_clear(&w->wake);
    g_free(w);
    return FALSE;
  }
  g_thread_unref(thread);
  return TRUE;
}

void knnwb_pool_group_init(KnnwbPoolGroup *group)
{
  group->running = 0;
  g_mutex_init(&group->lock);
  g_cond_init(&group->done);
}

gboolean knnwb_pool_run(KnnwbPoolGroup *group, void (*task)(void *data), void *data)
{
  knnwb_pool_keeps(); /* the fork handlers, before any worker exists */
  g_mutex_lock(&group->lock);
  group->running++;
  g_mutex_unlock(&group->lock);
  g_mutex_lock(&pool_lock);
  KnnwbPoolWorker *w = pool_idle;
  if (w != NULL) {
    pool_idle = w->next_idle;
    pool_idle_count--;
  }
  g_mutex_unlock(&pool_lock);
  if (w != NULL) {
    g_mutex_lock(&w->lock);
    w->task = task;
    w->data = data;
    w->group = group;
    g_cond_signal(&w->wake);
    g_mutex_unlock(&w->lock);
    return TRUE;
  }
  if (knnwb_pool_start(group, task, data))
    return TRUE;
  knnwb_pool_task_done(group); /* (its signal, if any, finds nobody waiting yet) */
  return FALSE;
}

void knnwb_pool_group_wait(KnnwbPoolGroup *group)
{
  g_mutex_lock(&group->lock);
  while (group->running > 0)
    g_cond_wait(&group->done, &group->lock);
  g_mutex_unlock(&group->lock);
  g_mutex_clear(&group->lock);
  g_cond_clear(&group->done);
}
