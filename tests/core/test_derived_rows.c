/* Scored rows derived from the exact ones (knnwb_prepared_scored_rows), as a split run's blocks
 * give them: the same bits as the prepared copy for every metric that derives them, rows left out
 * (degenerate) included, over any range; and the CPU backend fed derived rows (KnnwbSelectJob's
 * rows_fill) gives the same candidates and scores as fed the rows themselves, self and two-sided,
 * in tiles smaller than the rows, in FP32 and (where the CPU runs it) BF16. Host only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "cpu/cpu.h"
#include "engine/engine.h"

enum { N = 403, D = 13, KC = 7 };

/* Random rows, with (wide) an offset column and a column of large values; rows 5 and N - 2
 * constant (degenerate for the pearson family and spearman), row 9 all zeros (degenerate for
 * cosine). Wide rows are all nearly parallel, so their scores tie often: the bits' test. */
static KnnwbMatrix *test_rows(guint32 seed, gboolean wide)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(N, D, NULL);
  for (size_t i = 0; i < N; i++)
    for (size_t j = 0; j < D; j++) {
      double x = g_rand_double_range(rand, -1.0, 1.0);
      if (wide && j == 0)
        x += 1e4; /* an offset the centring takes away */
      if (wide && j == 1)
        x *= 1e3;
      if (j == 2)
        x = floor(x * 3.0); /* ties, for spearman's ranks */
      m->values[i * D + j] = (float)x;
    }
  for (size_t j = 0; j < D; j++) {
    m->values[5 * D + j] = 2.5f;
    m->values[(N - 2) * D + j] = -1.0f;
    m->values[9 * D + j] = 0.0f;
  }
  return m;
}

static const KnnwbMetric derived_metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_ABS_PEARSON,
                                              KNNWB_METRIC_SPEARMAN, KNNWB_METRIC_EUCLIDEAN,
                                              KNNWB_METRIC_COSINE};

/* p prepared as a split rank prepares its block (degenerate rows flagged, no message). */
static void prepare(KnnwbPrepared *p, const KnnwbMatrix *data, KnnwbMetric metric)
{
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_prepared_init_block(p, data, 0, metric, "data", 2, NULL, NULL, &error));
  g_assert_no_error(error);
}

static void test_derived_bits(void)
{
  g_autoptr(KnnwbMatrix) data = test_rows(3, TRUE);
  g_assert_false(knnwb_prepared_derivable(KNNWB_METRIC_MANHATTAN));
  static const size_t ranges[][2] = {{0, N}, {1, N - 3}, {N - 1, 1}, {5, 5}, {9, 0}};
  for (size_t m = 0; m < G_N_ELEMENTS(derived_metrics); m++) {
    KnnwbPrepared p;
    prepare(&p, data, derived_metrics[m]);
    g_assert_true(knnwb_prepared_derivable(p.metric));
    g_assert_cmpuint(p.n_invalid, >=, derived_metrics[m] == KNNWB_METRIC_EUCLIDEAN ? 0 : 1);
    KnnwbPrepared view = p;
    view.scored = NULL;
    g_autofree float *out = g_new(float, N *D);
    for (size_t r = 0; r < G_N_ELEMENTS(ranges); r++) {
      const size_t first = ranges[r][0], count = ranges[r][1];
      memset(out, 0xff, N * D * sizeof(float));
      knnwb_prepared_scored_rows(&view, first, count, out);
      g_assert_cmpmem(out, count * D * sizeof(float), p.scored + first * D,
                      count * D * sizeof(float));
      /* the given rows are copied as they are */
      knnwb_prepared_scored_rows(&p, first, count, out);
      g_assert_cmpmem(out, count * D * sizeof(float), p.scored + first * D,
                      count * D * sizeof(float));
      const float *at = knnwb_prepared_scored_at(&view, first, count, out);
      g_assert_true(at == out);
      g_assert_true(knnwb_prepared_scored_at(&p, first, count, out) == p.scored + first * D);
    }
    knnwb_prepared_clear(&p);
  }
}

/* A job over p's rows [q0, q0 + nq) against [r0, r0 + nr) (self when both are the same), the rows
 * given or derived from view (p without its scored copy). */
static void job_of(KnnwbSelectJob *job, const KnnwbPrepared *p, const KnnwbPrepared *view,
                   gboolean derived, size_t q0, size_t nq, size_t r0, size_t nr, int screen,
                   int64_t *index, float *score)
{
  memset(job, 0, sizeof *job);
  if (derived) {
    job->rows_fill = knnwb_prepared_scored_fill;
    job->query_source = job->reference_source = view;
    job->query_source_first = q0;
    job->reference_source_first = r0;
  } else {
    job->query = p->scored + q0 * D;
    job->reference = p->scored + r0 * D;
  }
  job->n_query = nq;
  job->n_reference = nr;
  job->self = q0 == r0 && nq == nr;
  job->reference_sqnorms = p->sqnorms ? p->sqnorms + r0 : NULL;
  job->query_sqnorms = p->sqnorms ? p->sqnorms + q0 : NULL;
  job->reference_invalid = p->invalid ? p->invalid + r0 : NULL;
  job->query_invalid = p->invalid ? p->invalid + q0 : NULL;
  job->dim = D;
  job->score_kind = knnwb_metric_score_kind(p->metric);
  job->screen = screen;
  job->screen_row_norm = p->screen_row_norm > 0.0 ? p->screen_row_norm : 1.0;
  job->kc = KC;
  /* one thread (which of two equal scores a list keeps follows the tiles' order), tiles of 64
   * rows: several blocks a side, the last one short */
  job->n_threads = 1;
  job->memory_bytes = 4 * 64 * 64;
  job->out_index = index;
  job->out_score = score;
}

typedef struct {
  int64_t index;
  float score;
} Entry;

static int entry_compare(const void *a, const void *b)
{
  const Entry *x = a, *y = b;
  if (x->index != y->index)
    return (x->index > y->index) - (x->index < y->index);
  return (x->score > y->score) - (x->score < y->score);
}

/* The job over given rows and over derived ones: the same lists, bit for bit. */
static void compare_select(const KnnwbPrepared *p, size_t q0, size_t nq, size_t r0, size_t nr,
                           int screen)
{
  KnnwbPrepared view = *p;
  view.scored = NULL;
  int64_t *index[2] = {g_new(int64_t, nq * KC), g_new(int64_t, nq * KC)};
  float *score[2] = {g_new(float, nq *KC), g_new(float, nq *KC)};
  for (int derived = 0; derived < 2; derived++) {
    KnnwbSelectJob job;
    job_of(&job, p, &view, derived, q0, nq, r0, nr, screen, index[derived], score[derived]);
    g_assert_cmpint(knnwb_select_job_derived(&job), ==, derived);
    g_assert_cmpint(knnwb_select_job_same(&job), ==, job.self);
    char message[256] = "";
    g_assert_cmpint(knnwb_cpu_select(&job, message, sizeof message), ==, KNNWB_KERNELS_OK);
  }
  /* (a backend's lists are its kc best in any order: compared as sets of pairs) */
  for (size_t i = 0; i < nq; i++) {
    if (p->invalid != NULL && p->invalid[q0 + i])
      continue; /* (a left-out row's outputs are ignored) */
    Entry row[2][KC];
    for (int r = 0; r < 2; r++) {
      for (size_t t = 0; t < KC; t++)
        row[r][t] = (Entry){index[r][i * KC + t], score[r][i * KC + t]};
      qsort(row[r], KC, sizeof(Entry), entry_compare);
    }
    for (size_t t = 0; t < KC; t++) {
      g_assert_cmpint(row[0][t].index, ==, row[1][t].index);
      g_assert_true(memcmp(&row[0][t].score, &row[1][t].score, sizeof(float)) == 0);
    }
  }
  g_free(index[0]);
  g_free(index[1]);
  g_free(score[0]);
  g_free(score[1]);
}

static void test_derived_select(void)
{
  g_autoptr(KnnwbMatrix) data = test_rows(5, FALSE);
  const int screens[] = {KNNWB_KERNELS_SCREEN_FP32, KNNWB_KERNELS_SCREEN_BF16};
  for (size_t m = 0; m < G_N_ELEMENTS(derived_metrics); m++) {
    KnnwbPrepared p;
    prepare(&p, data, derived_metrics[m]);
    for (size_t s = 0; s < G_N_ELEMENTS(screens); s++) {
      if (screens[s] == KNNWB_KERNELS_SCREEN_BF16 && !knnwb_cpu_gemm_has_bf16())
        continue;
      compare_select(&p, 0, N, 0, N, screens[s]);           /* self */
      compare_select(&p, 0, 150, 150, N - 150, screens[s]); /* two blocks of one run */
      compare_select(&p, 211, 101, 17, 190, screens[s]);    /* overlapping ranges */
    }
    knnwb_prepared_clear(&p);
  }
}

/* L1 rows are never derived (manhattan's scored rows are its exact ones or their scaled copy):
 * the CPU backend refuses a derived L1 job with a message instead of reading NULL rows. */
static void test_derived_l1_refused(void)
{
  g_autoptr(KnnwbMatrix) data = test_rows(7, FALSE);
  KnnwbPrepared p;
  prepare(&p, data, KNNWB_METRIC_EUCLIDEAN);
  KnnwbPrepared view = p;
  view.scored = NULL;
  g_autofree int64_t *index = g_new(int64_t, N * KC);
  g_autofree float *score = g_new(float, N *KC);
  KnnwbSelectJob job;
  job_of(&job, &p, &view, TRUE, 0, N, 0, N, KNNWB_KERNELS_SCREEN_FP32, index, score);
  job.score_kind = KNNWB_SCORE_L1;
  char message[256] = "";
  g_assert_cmpint(knnwb_cpu_select(&job, message, sizeof message), ==, KNNWB_KERNELS_ERROR);
  g_assert_nonnull(strstr(message, "L1"));
  knnwb_prepared_clear(&p);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/core/derived-rows/bits", test_derived_bits);
  g_test_add_func("/core/derived-rows/select", test_derived_select);
  g_test_add_func("/core/derived-rows/l1-refused", test_derived_l1_refused);
  return g_test_run();
}
