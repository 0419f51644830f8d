/* The parallel loops (core/base/parallel.c, team.c): every index and every team member runs
 * exactly once, whatever the threads asked for; loops inside loops, loops from several threads at
 * once and teams larger than the thread limit all finish (one that waited on another would hang
 * here, and the test's timeout fails it). Their workers (thread_pool.c) are kept between loops,
 * start afresh in a forked child, and never take SIGINT or SIGTERM. The throttled progress report
 * (progress_throttle.c) reports from one thread at a time, counts that only go up, and always the
 * last one. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <knnwb/knn.h>
#include <knnwb/parallel.h>
#include "base/base_internal.h"

typedef struct {
  gint *hits;
  size_t n;
} Hits;

static void count_hits(size_t first, size_t last, void *data)
{
  Hits *h = data;
  for (size_t i = first; i < last; i++)
    g_atomic_int_inc(&h->hits[i]);
}

/* Runs a loop over n indices and checks that each ran once. */
static void loop_once(int threads, size_t n, size_t grain)
{
  Hits h = {g_new0(gint, MAX(n, 1)), n};
  knnwb_parallel_for(threads, n, grain, count_hits, &h);
  for (size_t i = 0; i < n; i++)
    if (h.hits[i] != 1)
      g_error("%d threads, %zu items, grain %zu: item %zu ran %d times", threads, n, grain, i,
              h.hits[i]);
  g_free(h.hits);
}

static void test_parallel_every_index_once(void)
{
  const int threads[] = {0, 1, 2, 3, 8, knnwb_thread_limit()};
  const size_t sizes[] = {0, 1, 7, 1000, 100003};
  const size_t grains[] = {0, 1, 13, 4096};
  for (size_t t = 0; t < G_N_ELEMENTS(threads); t++)
    for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++)
      for (size_t g = 0; g < G_N_ELEMENTS(grains); g++)
        loop_once(threads[t], sizes[s], grains[g]);
}

/* Every outer chunk runs a loop of its own on 8 threads. */
static void nested_body(size_t first, size_t last, void *data)
{
  (void)data;
  for (size_t i = first; i < last; i++)
    loop_once(8, 5000 + i, 7);
}

static void test_parallel_nested(void)
{
  for (int round = 0; round < 20; round++)
    knnwb_parallel_for(8, 16, 1, nested_body, NULL);
}

static gpointer loops_of_a_thread(gpointer data)
{
  (void)data;
  for (int round = 0; round < 200; round++)
    loop_once(6, 20011, 101);
  return NULL;
}

static void test_parallel_from_many_threads(void)
{
  GThread *threads[6];
  for (int t = 0; t < 6; t++)
    threads[t] = g_thread_new("loops", loops_of_a_thread, NULL);
  for (int t = 0; t < 6; t++)
    g_thread_join(threads[t]);
}

typedef struct {
  gint *ran;
  int n_threads;
  gint wrong_count;
} Team;

static void team_member(int thread, int n_threads, void *data)
{
  Team *team = data;
  if (n_threads != team->n_threads || thread < 0 || thread >= n_threads)
    g_atomic_int_inc(&team->wrong_count);
  else
    g_atomic_int_inc(&team->ran[thread]);
}

/* Teams of 1 to several times the thread limit: each member once. */
static void test_team_every_member_once(void)
{
  const int sizes[] = {1, 2, 5, 16, knnwb_thread_limit() + 3, 3 * knnwb_thread_limit()};
  for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++)
    for (int round = 0; round < 10; round++) {
      Team team = {g_new0(gint, sizes[s]), sizes[s], 0};
      knnwb_team_run(sizes[s], team_member, &team);
      g_assert_cmpint(team.wrong_count, ==, 0);
      for (int t = 0; t < sizes[s]; t++)
        if (team.ran[t] != 1)
          g_error("team of %d: member %d ran %d times", sizes[s], t, team.ran[t]);
      g_free(team.ran);
    }
}

/* Every team member runs a loop of its own. */
static void team_with_loops(int thread, int n_threads, void *data)
{
  (void)n_threads;
  (void)data;
  loop_once(4, 30000 + (size_t)thread, 64);
}

static void test_team_nested_loops(void)
{
  for (int round = 0; round < 20; round++)
    knnwb_team_run(12, team_with_loops, NULL);
}

/* The threads of this process (Linux: /proc/self/task); 0 when unknown. */
static int process_threads(void)
{
  DIR *d = opendir("/proc/self/task");
  if (d == NULL)
    return 0;
  int n = 0;
  for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n;
}

/* The pool's workers alive (threads named knnwb-worker). */
static int pool_workers(void)
{
  DIR *d = opendir("/proc/self/task");
  if (d == NULL)
    return 0;
  int n = 0;
  for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
    if (e->d_name[0] == '.')
      continue;
    g_autofree char *path = g_strdup_printf("/proc/self/task/%s/comm", e->d_name);
    g_autofree char *comm = NULL;
    if (g_file_get_contents(path, &comm, NULL, NULL) && g_str_has_prefix(comm, "knnwb-worker"))
      n++;
  }
  closedir(d);
  return n;
}

/* Loops reuse the workers of the loops before: from one thread, loops and teams of 8 never have
 * more than 7 workers alive, however many run, and some wait between loops (started per loop,
 * every loop would leave the main thread alone; started and never reused, they would pile up).
 * Each start maps a fresh stack, which waits for the memory-map lock that a GPU driver holds while
 * it allocates. */
static void test_parallel_workers_kept(void)
{
  if (process_threads() == 0 || !knnwb_pool_keeps()) {
    g_test_skip("no /proc/self/task, or stacks too large to keep workers");
    return;
  }
  const int most = MAX(pool_workers(), 7); /* (idle ones of the tests before are reused) */
  for (int round = 0; round < 200; round++) {
    loop_once(8, 20011, 1);
    g_assert_cmpint(pool_workers(), <=, most);
  }
  for (int round = 0; round < 20; round++) {
    Team team = {g_new0(gint, 8), 8, 0};
    knnwb_team_run(8, team_member, &team);
    g_free(team.ran);
    g_assert_cmpint(pool_workers(), <=, most);
  }
  g_assert_cmpint(pool_workers(), >, 0);
}

/* A forked child has none of its parent's kept workers: its loops start their own (a loop that
 * handed chunks to the parent's workers would wait for ever). */
static void test_parallel_after_fork(void)
{
  loop_once(8, 100003, 1);
  pid_t child = fork();
  g_assert_cmpint(child, >=, 0);
  if (child == 0) {
    for (int round = 0; round < 20; round++)
      loop_once(8, 20011, 1);
    Team team = {g_new0(gint, 6), 6, 0};
    knnwb_team_run(6, team_member, &team);
    _exit(team.wrong_count == 0 && team.ran[5] == 1 ? 0 : 2);
  }
  int status = 0;
  pid_t done = 0;
  for (int wait = 0; wait < 600 && done == 0; wait++) { /* 60 s */
    done = waitpid(child, &status, WNOHANG);
    if (done == 0)
      g_usleep(100000);
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    g_error("the forked child's loops did not finish");
  }
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 0);
}

typedef struct {
  GThread *caller;
  gint unblocked; /* a worker with SIGINT or SIGTERM deliverable */
  gint on_workers;
} Masks;

static void check_mask(size_t first, size_t last, void *data)
{
  (void)first;
  (void)last;
  Masks *m = data;
  g_usleep(1000); /* (every chunk takes a while, so that the workers take some) */
  if (g_thread_self() == m->caller)
    return;
  g_atomic_int_inc(&m->on_workers);
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, NULL, &now);
  if (!sigismember(&now, SIGINT) || !sigismember(&now, SIGTERM))
    g_atomic_int_inc(&m->unblocked);
}

/* Workers never take SIGINT or SIGTERM, even when the thread that started them did: the host takes
 * them on a thread of its own, and a worker kept from before must not run their handler. */
static void test_parallel_workers_block_signals(void)
{
  sigset_t interrupts, before;
  sigemptyset(&interrupts);
  sigaddset(&interrupts, SIGINT);
  sigaddset(&interrupts, SIGTERM);
  g_assert_cmpint(pthread_sigmask(SIG_UNBLOCK, &interrupts, &before), ==, 0);
  Masks m = {g_thread_self(), 0, 0};
  /* (until a worker took a chunk: on a loaded machine the caller may take them all) */
  for (int round = 0; round < 200 && g_atomic_int_get(&m.on_workers) == 0; round++)
    knnwb_parallel_for(8, 64, 1, check_mask, &m);
  pthread_sigmask(SIG_SETMASK, &before, NULL);
  g_assert_cmpint(m.on_workers, >, 0);
  g_assert_cmpint(m.unblocked, ==, 0);
}

/* Without kept workers (KNNWB_THREAD_POOL=0, as under huge stacks) every worker leaves after its
 * task and is joined by a later caller or before a fork: loops, teams and forks still finish, and
 * no worker is left once they are done. In a subprocess, whose pool reads the knob afresh. */
static void test_parallel_workers_leave(void)
{
  if (g_test_subprocess()) {
    g_assert_false(knnwb_pool_keeps());
    for (int round = 0; round < 300; round++)
      loop_once(8, 20011, 1);
    test_parallel_nested();
    test_parallel_after_fork();
    int workers = pool_workers();
    for (int wait = 0; wait < 100 && workers > 0; wait++) { /* 10 s */
      g_usleep(100000);
      workers = pool_workers();
    }
    g_assert_cmpint(workers, ==, 0);
    return;
  }
  g_setenv("KNNWB_THREAD_POOL", "0", TRUE);
  g_test_trap_subprocess(NULL, 120 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_unsetenv("KNNWB_THREAD_POOL");
  g_test_trap_assert_passed();
}

/* The reports a throttle made, checked as they come. */
typedef struct {
  gint inside;      /* callbacks running now (atomic) */
  gint most_inside; /* the most seen at once */
  uint64_t done, total, reports;
} ThrottleReports;

/* A progress callback that holds its first report 200 ms, so the other threads go on and finish
 * the items while it reports. */
static void throttle_record(uint64_t done, uint64_t total, void *data)
{
  ThrottleReports *r = data;
  const gint inside = g_atomic_int_add(&r->inside, 1) + 1;
  if (inside > g_atomic_int_get(&r->most_inside))
    g_atomic_int_set(&r->most_inside, inside);
  g_assert_cmpuint(done, <=, total);
  g_assert_cmpuint(done, >, r->done); /* (never back, never the same count twice) */
  if (r->reports++ == 0)
    g_usleep(200000);
  else
    g_usleep(1000); /* (slow, so the threads meet at the lock) */
  r->done = done;
  r->total = total;
  g_atomic_int_add(&r->inside, -1);
}

/* Items taken from a shared counter, as the parallel loops take chunks: the thread held in the
 * first report leaves its share to the others, and one of them finishes the items meanwhile. */
typedef struct {
  KnnwbProgressThrottle throttle;
  ThrottleReports reports;
  gsize next, done;
  gsize total;
  gboolean finisher_waits; /* the thread that finishes offers `last` (else the caller, after) */
} ThrottleLoop;

static gpointer throttle_worker(gpointer data)
{
  ThrottleLoop *loop = data;
  while ((gsize)g_atomic_pointer_add(&loop->next, 1) < loop->total) {
    const gboolean finished = (gsize)g_atomic_pointer_add(&loop->done, 1) + 1 == loop->total;
    knnwb_progress_throttle_offer(&loop->throttle, &loop->done, loop->total,
                                  loop->finisher_waits && finished, throttle_record,
                                  &loop->reports);
  }
  return NULL;
}

static void throttle_run(gboolean finisher_waits)
{
  ThrottleLoop loop = {.total = 20011, .finisher_waits = finisher_waits};
  knnwb_progress_throttle_init(&loop.throttle);
  GThread *threads[4];
  for (size_t t = 0; t < G_N_ELEMENTS(threads); t++)
    threads[t] = g_thread_new("throttle", throttle_worker, &loop);
  for (size_t t = 0; t < G_N_ELEMENTS(threads); t++)
    g_thread_join(threads[t]);
  if (!finisher_waits)
    knnwb_progress_throttle_offer(&loop.throttle, &loop.done, loop.total, TRUE, throttle_record,
                                  &loop.reports);
  knnwb_progress_throttle_clear(&loop.throttle);
  g_assert_cmpint(loop.reports.most_inside, ==, 1);
  g_assert_cmpuint(loop.reports.reports, >=, 1);
  g_assert_cmpuint(loop.reports.total, ==, loop.total);
  g_assert_cmpuint(loop.reports.done, ==, loop.total); /* (the last count is never lost) */
}

/* Several threads offering under a slow callback: one report at a time, counts that only go up,
 * the last count reported by the thread that finished (the tree's search). */
static void test_progress_throttle_finisher(void)
{
  throttle_run(TRUE);
}

/* The same with the last count offered by the caller once the threads are joined (the
 * metafeatures, the CPU select). */
static void test_progress_throttle_after_join(void)
{
  throttle_run(FALSE);
}

/* A count is reported once: a last offer of a count already reported, a count of 0 and a NULL
 * callback report nothing. */
static void test_progress_throttle_once(void)
{
  KnnwbProgressThrottle throttle;
  knnwb_progress_throttle_init(&throttle);
  ThrottleReports r = {0};
  gsize done = 0;
  knnwb_progress_throttle_offer(&throttle, &done, 10, TRUE, throttle_record, &r);
  g_assert_cmpuint(r.reports, ==, 0);
  done = 4;
  knnwb_progress_throttle_offer(&throttle, &done, 10, FALSE, throttle_record, &r);
  g_assert_cmpuint(r.reports, ==, 1);
  g_assert_cmpuint(r.done, ==, 4);
  done = 10;
  knnwb_progress_throttle_offer(&throttle, &done, 10, FALSE, NULL, NULL);
  knnwb_progress_throttle_offer(&throttle, &done, 10, FALSE, throttle_record, &r);
  knnwb_progress_throttle_offer(&throttle, &done, 10, TRUE, throttle_record, &r);
  g_assert_cmpuint(r.reports, ==, 2); /* (10 reached the total: at once, and once) */
  g_assert_cmpuint(r.done, ==, 10);
  knnwb_progress_throttle_clear(&throttle);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/core/parallel/every-index-once", test_parallel_every_index_once);
  g_test_add_func("/core/parallel/nested", test_parallel_nested);
  g_test_add_func("/core/parallel/from-many-threads", test_parallel_from_many_threads);
  g_test_add_func("/core/parallel/team-every-member-once", test_team_every_member_once);
  g_test_add_func("/core/parallel/team-nested-loops", test_team_nested_loops);
  g_test_add_func("/core/parallel/workers-kept", test_parallel_workers_kept);
  g_test_add_func("/core/parallel/after-fork", test_parallel_after_fork);
  g_test_add_func("/core/parallel/workers-block-signals", test_parallel_workers_block_signals);
  g_test_add_func("/core/parallel/workers-leave", test_parallel_workers_leave);
  g_test_add_func("/core/parallel/progress-throttle-finisher", test_progress_throttle_finisher);
  g_test_add_func("/core/parallel/progress-throttle-after-join", test_progress_throttle_after_join);
  g_test_add_func("/core/parallel/progress-throttle-once", test_progress_throttle_once);
  return g_test_run();
}
