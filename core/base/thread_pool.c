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
 * itself. A worker is back on the idle list before its caller learns that its task returned, so
 * the next loop finds it there. A worker idle for KNNWB_POOL_IDLE_SECONDS leaves. How many wait
 * idle is bounded by the address space their stacks hold (KNNWB_POOL_IDLE_STACKS, less under
 * `ulimit -v`), and none wait when a thread's default stack is over KNNWB_POOL_STACK_MAX: each
 * then leaves after its task, as before the pool. A worker that leaves after its task is joined
 * by the caller's wait, one whose idle time ran out by the next caller, and every one before any
 * fork (core/base/isolated.c forks): a child forked while a thread was still ending could inherit
 * an allocator lock that thread held (see the ticker's fork handlers in
 * plugin/host/runtime/progress.c). A forked child starts with no workers.
 *
 * A kept worker keeps what its tasks leave in its thread's state: the OpenMP thread count is
 * restored by the CPU GEMMs that change it (core/cpu/gemm_cpu.c); the CUDA device that a select
 * makes current on its calling thread (kernels/cuda_select.cu, in a partitioned search's team
 * members) stays current, and no task relies on a fresh thread's device 0.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <knnwb/knn.h>
#include <knnwb/parallel.h>
#include "base/base_internal.h"

#define KNNWB_POOL_IDLE_SECONDS 10
#define KNNWB_POOL_STACK_MAX ((size_t)64 << 20)
#define KNNWB_POOL_IDLE_STACKS ((size_t)1 << 30)

/* A worker waits on its own lock, so that the workers a loop wakes do not queue for one. */
typedef struct KnnwbPoolWorker KnnwbPoolWorker;
struct KnnwbPoolWorker {
  GMutex lock; /* task, data, group */
  GCond wake;
  void (*task)(void *data); /* NULL while idle */
  void *data;
  KnnwbPoolGroup *group;
  GThread *thread;            /* set by its creator once the thread is made (w->lock) */
  KnnwbPoolWorker *next_idle; /* pool_lock */
};

static GMutex pool_lock; /* everything below */
static KnnwbPoolWorker *pool_idle;
static int pool_idle_count;
static int pool_idle_max;    /* 0: no worker waits; read once (knnwb_pool_keeps) */
static GSList *pool_leaving; /* GThread of workers that left, to join */

/* Joins the threads of leaving, a list taken off pool_leaving (the caller holds no lock: a thread's
 * end runs its destructors, libgomp's and the CUDA runtime's among them, which a caller of
 * knnwb_pool_run need not wait for behind the pool's lock). */
static void knnwb_pool_join(GSList *leaving)
{
  for (GSList *at = leaving; at != NULL; at = at->next)
    g_thread_join(at->data);
  g_slist_free(leaving);
}

/* Every worker that left, joined: taken off the list under pool_lock, joined outside it. */
static void knnwb_pool_join_leaving(void)
{
  g_mutex_lock(&pool_lock);
  GSList *leaving = g_steal_pointer(&pool_leaving);
  g_mutex_unlock(&pool_lock);
  knnwb_pool_join(leaving);
}

/* Before a fork, every leaving thread has ended (under the lock: none may start leaving meanwhile;
 * their destructors take no lock of knnwb's). */
static void knnwb_pool_fork_prepare(void)
{
  g_mutex_lock(&pool_lock);
  knnwb_pool_join(g_steal_pointer(&pool_leaving));
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
  pool_leaving = NULL; /* (empty: the prepare handler joined them) */
  g_mutex_unlock(&pool_lock);
}

/* A new thread's default stack in bytes (what GLib's threads get), 0 when unknown. glibc takes it
 * from `ulimit -s`, and 2 MiB under `ulimit -s unlimited`. */
static size_t knnwb_pool_default_stack(void)
{
  pthread_attr_t attr;
  size_t bytes = 0;
  if (pthread_getattr_default_np(&attr) != 0)
    return 0;
  if (pthread_attr_getstacksize(&attr, &bytes) != 0)
    bytes = 0;
  pthread_attr_destroy(&attr);
  return bytes;
}

gboolean knnwb_pool_keeps(void)
{
  static gsize once;
  if (g_once_init_enter(&once)) {
    const size_t stack = knnwb_pool_default_stack();
    size_t budget = KNNWB_POOL_IDLE_STACKS;
    struct rlimit space;
    if (getrlimit(RLIMIT_AS, &space) == 0 && space.rlim_cur != RLIM_INFINITY)
      budget = MIN(budget, (size_t)space.rlim_cur / 16);
    if (stack > 0 && stack <= KNNWB_POOL_STACK_MAX &&
        g_strcmp0(g_getenv("KNNWB_THREAD_POOL"), "0") != 0)
      pool_idle_max = (int)MIN((size_t)knnwb_thread_limit(), budget / stack);
    pthread_atfork(knnwb_pool_fork_prepare, knnwb_pool_fork_parent, knnwb_pool_fork_child);
    g_once_init_leave(&once, 1);
  }
  return pool_idle_max > 0;
}

/* The group's task returned: the last one tells the caller. */
static void knnwb_pool_task_done(KnnwbPoolGroup *group)
{
  g_mutex_lock(&group->lock);
  if (--group->running == 0)
    g_cond_signal(&group->done);
  g_mutex_unlock(&group->lock);
}

/* Puts w on the idle list; FALSE when the list is full. */
static gboolean knnwb_pool_idle_push(KnnwbPoolWorker *w)
{
  g_mutex_lock(&pool_lock);
  const gboolean room = pool_idle_count < pool_idle_max;
  if (room) {
    w->next_idle = pool_idle;
    pool_idle = w;
    pool_idle_count++;
  }
  g_mutex_unlock(&pool_lock);
  return room;
}

/* Waits, idle, for a task; FALSE when none came in time (w then off the idle list). A worker whose
 * time ran out just as a caller took it from the list waits for that caller's task. */
static gboolean knnwb_pool_wait_task(KnnwbPoolWorker *w)
{
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

static void knnwb_pool_worker_free(KnnwbPoolWorker *w)
{
  g_mutex_clear(&w->lock);
  g_cond_clear(&w->wake);
  g_free(w);
}

/* Puts w's thread on the list of those to join, once its creator has it: GLib finishes a thread's
 * record after the thread runs (a join before that found the record's lock reset under it). */
static void knnwb_pool_leave(KnnwbPoolWorker *w)
{
  g_mutex_lock(&w->lock);
  while (w->thread == NULL)
    g_cond_wait(&w->wake, &w->lock);
  GThread *self = w->thread;
  g_mutex_unlock(&w->lock);
  g_mutex_lock(&pool_lock);
  pool_leaving = g_slist_prepend(pool_leaving, self);
  g_mutex_unlock(&pool_lock);
}

static gpointer knnwb_pool_worker_main(gpointer user)
{
  KnnwbPoolWorker *w = user;
  for (;;) {
    g_mutex_lock(&w->lock);
    void (*task)(void *) = w->task;
    void *data = w->data;
    KnnwbPoolGroup *group = w->group;
    w->task = NULL;
    g_mutex_unlock(&w->lock);
    task(data);
    /* Idle again, or to be joined, before the caller learns that the task returned: the next
     * loop finds it idle, and the caller's wait joins it (its stack given back as before the
     * pool, which a process under `ulimit -v` with huge stacks needs). */
    const gboolean idle = knnwb_pool_idle_push(w);
    if (!idle)
      knnwb_pool_leave(w);
    knnwb_pool_task_done(group);
    if (!idle)
      break;
    if (!knnwb_pool_wait_task(w)) {
      knnwb_pool_leave(w);
      break;
    }
  }
  knnwb_pool_worker_free(w);
  return NULL;
}

/* A new worker for the task; FALSE when no thread can start. It starts with SIGINT, SIGTERM and
 * SIGCONT blocked: the host takes those on a thread of its own and blocks them in every thread it
 * starts (plugin/host/runtime/signals.c), and a worker started before that and kept must not take
 * them either. */
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
  sigaddset(&caught, SIGINT);
  sigaddset(&caught, SIGTERM);
  sigaddset(&caught, SIGCONT);
  const gboolean masked = pthread_sigmask(SIG_BLOCK, &caught, &before) == 0;
  /* (its reference is the one knnwb_pool_join gives back) */
  GThread *thread = knnwb_thread_try_start("knnwb-worker", knnwb_pool_worker_main, w);
  if (masked)
    pthread_sigmask(SIG_SETMASK, &before, NULL);
  if (thread == NULL) {
    knnwb_pool_worker_free(w);
    return FALSE;
  }
  g_mutex_lock(&w->lock);
  w->thread = thread;
  g_cond_broadcast(&w->wake);
  g_mutex_unlock(&w->lock);
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
  knnwb_pool_join_leaving();
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
  knnwb_pool_join_leaving();
}
