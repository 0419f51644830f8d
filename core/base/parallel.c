/* A minimal parallel-for over index ranges, with dynamic chunk scheduling, on kept workers
 * (thread_pool.c). */
#include <sched.h>
#include <unistd.h>
#include <knnwb/knn.h>
#include <knnwb/parallel.h>
#include "base/base_internal.h"

typedef struct {
  size_t n, grain;
  gssize next; /* atomically advanced chunk start */
  void (*body)(size_t, size_t, void *);
  void *data;
} KnnwbParallelLoop;

static void knnwb_parallel_worker(void *user)
{
  KnnwbParallelLoop *loop = user;
  for (;;) {
    gssize first = g_atomic_pointer_add(&loop->next, (gssize)loop->grain);
    if ((size_t)first >= loop->n)
      break;
    size_t last = MIN(loop->n, (size_t)first + loop->grain);
    loop->body((size_t)first, last, loop->data);
  }
}

int knnwb_thread_limit(void)
{
  return (int)MIN((guint)KNNWB_THREADS_MAX, 4 * MAX(1u, g_get_num_processors()));
}

/*
 * The CPUs this process may run on: its affinity mask, which a SLURM or container cpuset, taskset
 * or mpirun's binding narrows. GLib's g_get_num_processors does not read it in every build
 * (Debian's 2.74 returns every online CPU), which started a thread per CPU of the machine on a
 * bound process. The online count when the mask cannot be read (more CPUs than a cpu_set_t).
 */
static int knnwb_usable_cpus(void)
{
  /* read once, as GLib does: every parallel loop asks, and the affinity is set at launch */
  static gint usable;
  int n = g_atomic_int_get(&usable);
  if (n > 0)
    return n;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0 && CPU_COUNT(&mask) > 0)
    n = CPU_COUNT(&mask);
  else
    n = MAX(1, (int)g_get_num_processors());
  g_atomic_int_set(&usable, n);
  return n;
}

/*
 * One warning per process when more threads are asked for than this process may run on while its
 * CPU affinity is narrower than the machine. Under mpirun, Open MPI binds each rank to one core
 * (two ranks or fewer) unless told otherwise, so `mpirun -np 1 knnwb knn -t 2` ran both threads on
 * one core at half speed without a word (40,000 x 128 rows: 1.7-1.8 s against 0.9 s). A count
 * within the affinity, or the default (which follows it), says nothing.
 */
static void knnwb_thread_warn_bound(int n_threads)
{
  const int usable = knnwb_usable_cpus();
  if (n_threads <= usable)
    return;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online <= 0 || usable >= online)
    return;
  static gint warned;
  if (g_atomic_int_compare_and_exchange(&warned, 0, 1))
    g_warning("%d threads asked for, but this process may only run on %d of the machine's %ld "
              "CPUs (its CPU affinity: under mpirun, Open MPI binds each rank to a core unless "
              "run with --bind-to none, or --map-by slot:PE=%d), so the threads share them",
              n_threads, usable, online, n_threads);
}

int knnwb_thread_count(int n_threads)
{
  if (n_threads <= 0)
    return knnwb_usable_cpus();
  knnwb_thread_warn_bound(n_threads);
  int limit = knnwb_thread_limit();
  if (n_threads <= limit)
    return n_threads;
  static gint warned;
  if (g_atomic_int_compare_and_exchange(&warned, 0, 1))
    g_warning("%d threads asked for; using %d (at most 4 per online CPU and %d in all: more "
              "only add memory and switching)",
              n_threads, limit, KNNWB_THREADS_MAX);
  return limit;
}

GThread *knnwb_thread_try_start(const char *name, GThreadFunc body, gpointer data)
{
  g_autoptr(GError) error = NULL;
  GThread *thread = g_thread_try_new(name, body, data, &error);
  if (thread == NULL) {
    static gint warned;
    if (g_atomic_int_compare_and_exchange(&warned, 0, 1))
      g_warning("cannot start a thread (%s); going on with fewer", error->message);
  }
  return thread;
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
  /* The chunks are shared through one counter, so threads that cannot start (a memory or process
   * limit) only leave more chunks to the others. */
  KnnwbPoolGroup group;
  knnwb_pool_group_init(&group);
  for (int t = 1; t < threads; t++)
    if (!knnwb_pool_run(&group, knnwb_parallel_worker, &loop))
      break;
  knnwb_parallel_worker(&loop);
  knnwb_pool_group_wait(&group);
}
