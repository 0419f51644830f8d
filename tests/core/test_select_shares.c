/* A self job shared out as whole-input ranks share it, on the CPU backend: each share run in turn
 * with its own tiling (another budget, as processes with other cores or memory choose), the lists
 * merged by score. With the shares' plan made common (KnnwbSelectJob.share_plan: the smallest tile
 * of theirs) the merge equals the whole job's lists and no pair lies in two shares; without it the
 * shares' tilings split the pairs differently, which the same checks catch (so they can fail).
 * Manhattan scores on random floats: a pair's score is the same bits in any tile. Host only. */
#include <string.h>
#include <knnwb/knnwb.h>
#include "cpu/cpu.h"

enum { N = 701, D = 7, KC = 9, SHARES = 2 };

typedef struct {
  int64_t index;
  float score;
} Entry;

static int entry_compare(const void *a, const void *b)
{
  const Entry *x = a, *y = b;
  if (x->score != y->score)
    return x->score < y->score ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

static int int64_compare(const void *a, const void *b)
{
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The group's smallest tile, as the ranks' reduction gives it: the offered one or *data. */
static int plan_min(int64_t *values, size_t n, void *data)
{
  g_assert_cmpuint(n, ==, KNNWB_SELECT_SHARE_PLAN_VALUES);
  values[0] = MIN(values[0], *(const int64_t *)data);
  return 1;
}

static void job_of(KnnwbSelectJob *job, const float *rows, int64_t *index, float *score)
{
  memset(job, 0, sizeof *job);
  job->query = rows;
  job->n_query = N;
  job->reference = rows;
  job->n_reference = N;
  job->dim = D;
  job->score_kind = KNNWB_SCORE_L1;
  job->screen = KNNWB_KERNELS_SCREEN_FP32;
  job->self = TRUE;
  job->kc = KC;
  job->n_threads = 1;
  job->out_index = index;
  job->out_score = score;
}

/* The shares' lists merged per row against the whole job's: rows whose kc best differ, and pairs
 * found by two shares. */
static void merge_shares(const int64_t *whole, int64_t *const *index, float *const *score,
                         size_t *differ, size_t *twice)
{
  *differ = *twice = 0;
  Entry row[SHARES * KC];
  for (size_t i = 0; i < N; i++) {
    size_t m = 0;
    for (int s = 0; s < SHARES; s++)
      for (size_t t = 0; t < KC; t++)
        if (index[s][i * KC + t] >= 0)
          row[m++] = (Entry){index[s][i * KC + t], score[s][i * KC + t]};
    qsort(row, m, sizeof *row, entry_compare);
    for (size_t t = 1; t < m; t++)
      *twice += row[t].index == row[t - 1].index;
    int64_t got[KC], want[KC];
    for (size_t t = 0; t < KC; t++) {
      got[t] = t < m ? row[t].index : -1;
      want[t] = whole[i * KC + t];
    }
    /* (the backend's lists are its kc best in any order) */
    qsort(got, KC, sizeof *got, int64_compare);
    qsort(want, KC, sizeof *want, int64_compare);
    *differ += memcmp(got, want, sizeof got) != 0;
  }
}

/* Each share run with its own budget (tiles of 64 and 96 rows at one thread), the plan shared
 * through share_plan when agree; the merge against the whole job. */
static void run_shares(const float *rows, const int64_t *whole, gboolean agree, size_t *differ,
                       size_t *twice)
{
  /* threads * B^2 floats: tiles of 64 and 96 rows */
  const size_t budgets[SHARES] = {4 * 64 * 64, 4 * 96 * 96};
  int64_t group_min = 64; /* the smaller share's tile, as the ranks' reduction would give */
  int64_t *index[SHARES];
  float *score[SHARES];
  for (int s = 0; s < SHARES; s++) {
    index[s] = g_new(int64_t, N * KC);
    score[s] = g_new(float, N *KC);
    KnnwbSelectJob job;
    job_of(&job, rows, index[s], score[s]);
    job.memory_bytes = budgets[s];
    job.share_index = s;
    job.share_count = SHARES;
    if (agree) {
      job.share_plan = plan_min;
      job.share_plan_data = &group_min;
    }
    char message[256] = "";
    g_assert_cmpint(knnwb_cpu_select(&job, message, sizeof message), ==, KNNWB_KERNELS_OK);
  }
  merge_shares(whole, index, score, differ, twice);
  for (int s = 0; s < SHARES; s++) {
    g_free(index[s]);
    g_free(score[s]);
  }
}

static void test_shares(void)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(29);
  float *rows = g_new(float, N *D);
  for (size_t i = 0; i < N * D; i++)
    rows[i] = (float)g_rand_double_range(rng, -1, 1);
  int64_t *whole = g_new(int64_t, N * KC);
  float *whole_score = g_new(float, N *KC);
  KnnwbSelectJob job;
  job_of(&job, rows, whole, whole_score);
  char message[256] = "";
  g_assert_cmpint(knnwb_cpu_select(&job, message, sizeof message), ==, KNNWB_KERNELS_OK);
  size_t differ, twice;
  run_shares(rows, whole, TRUE, &differ, &twice);
  g_assert_cmpuint(twice, ==, 0);
  g_assert_cmpuint(differ, ==, 0);
  /* The same shares, each with its own tiling: pairs split apart (the checks above can fail). */
  run_shares(rows, whole, FALSE, &differ, &twice);
  g_assert_cmpuint(differ + twice, >, 0);
  g_free(whole_score);
  g_free(whole);
  g_free(rows);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/core/select-cpu/shares", test_shares);
  return g_test_run();
}
