/* The parallel loops (core/base/parallel.c, team.c): every index and every team member runs
 * exactly once, whatever the threads asked for; loops inside loops, loops from several threads at
 * once and teams larger than the thread limit all finish (one that waited on another would hang
 * here, and the test's timeout fails it). */
#include <knnwb/knn.h>
#include <knnwb/parallel.h>

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

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/core/parallel/every-index-once", test_parallel_every_index_once);
  g_test_add_func("/core/parallel/nested", test_parallel_nested);
  g_test_add_func("/core/parallel/from-many-threads", test_parallel_from_many_threads);
  g_test_add_func("/core/parallel/team-every-member-once", test_team_every_member_once);
  g_test_add_func("/core/parallel/team-nested-loops", test_team_nested_loops);
  return g_test_run();
}
