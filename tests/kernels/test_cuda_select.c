/*
 * The CUDA selection job (knnwb_cuda_select) against a double-precision brute force of the same
 * scores: every returned set must hold kc distinct valid candidates whose true scores are no worse
 * than the kc-th best true score (up to float rounding), on odd sizes, every score kind, kc up to
 * 4096 + margin, budgets that force small tiles and streaming, and the same device listed twice.
 * Every case also asks for the candidates' exact distances, which must equal core's
 * knnwb_pair_distance bit for bit (and must be given whenever the budget is the default).
 * Skips (passes) when no GPU is usable, as on CI.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib.h>
#include "engine/engine_internal.h"
#include "knnwb_kernels.h"

typedef struct {
  size_t n_query, n_reference, dim, kc;
  int kind;
  gboolean self;
  size_t budget;
  int n_devices; /* devices listed: 0 = all, 2 = device 0 twice */
  gboolean with_invalid;
  gboolean with_duplicates;
  guint32 seed;
} Case;

static gboolean gpu_or_skip(void)
{
  if (knnwb_cuda_device_count() > 0)
    return TRUE;
  g_test_skip("no usable CUDA device");
  return FALSE;
}

static void fill_rows(float *rows, size_t n, size_t d, int kind, gboolean duplicates, GRand *rng)
{
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < d; j++) {
      double v = g_rand_double_range(rng, -1, 1);
      if (i % 4 == 1)
        v = sin((double)(j + 1) * (double)(i % 5 + 1)) + 0.1 * v; /* planted modules */
      rows[i * d + j] = (float)v;
    }
    if (duplicates && i % 7 == 3 && i >= 7)
      memcpy(rows + i * d, rows + (i - 7) * d, d * sizeof(float)); /* exact ties */
    if (kind == KNNWB_SCORE_DOT || kind == KNNWB_SCORE_ABS_DOT) {
      double s = 0;
      for (size_t j = 0; j < d; j++)
        s += (double)rows[i * d + j] * rows[i * d + j];
      for (size_t j = 0; j < d; j++)
        rows[i * d + j] = (float)(rows[i * d + j] / sqrt(s));
    }
  }
}

static double true_score(int kind, const float *q, const float *r, size_t d, double r_sq)
{
  double acc = 0;
  for (size_t t = 0; t < d; t++)
    acc += kind == KNNWB_SCORE_L1 ? fabs((double)q[t] - r[t]) : (double)q[t] * r[t];
  switch (kind) {
  case KNNWB_SCORE_DOT:
    return 1 - acc;
  case KNNWB_SCORE_ABS_DOT:
    return 1 - fabs(acc);
  case KNNWB_SCORE_L2:
    return r_sq - 2 * acc;
  default:
    return acc;
  }
}

static int compare_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The metric whose exact formula goes with a score kind; DOT alternates pearson and cosine. */
static KnnwbMetric exact_metric(int kind, guint32 seed)
{
  switch (kind) {
  case KNNWB_SCORE_ABS_DOT:
    return KNNWB_METRIC_ABS_PEARSON;
  case KNNWB_SCORE_L2:
    return KNNWB_METRIC_EUCLIDEAN;
  case KNNWB_SCORE_L1:
    return KNNWB_METRIC_MANHATTAN;
  default:
    return seed % 2 ? KNNWB_METRIC_COSINE : KNNWB_METRIC_PEARSON;
  }
}

static void progress_count(uint64_t done, uint64_t total, void *data)
{
  uint64_t *last = data;
  g_assert_cmpuint(done, <=, total);
  g_assert_cmpuint(done, >=, *last);
  *last = done;
}

typedef struct {
  int64_t index;
  float score;
  double distance;
} ShareEntry;

static int share_entry_by_index(const void *a, const void *b)
{
  const ShareEntry *x = a, *y = b;
  return (x->index > y->index) - (x->index < y->index);
}

static int share_entry_compare(const void *a, const void *b)
{
  const ShareEntry *x = a, *y = b;
  if (x->score != y->score)
    return x->score < y->score ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

/*
 * job run once per share (share_count = shares, no shared thresholds), as the ranks of a
 * whole-input group run it, each into lists of its own; then each row's lists merged by score
 * into job's outputs, as core merges the ranks' lists. The contract: every pair lies in exactly
 * one share's lists, and the merge is the kc best of the whole job. A pair in two shares' lists
 * fails here; a pair in none shows in run_case's checks (a worse kc-th). *filled: every share
 * gave exact distances.
 */
/* Shares whose own plans differ (set by test_shares): share s plans with tiles of at most
 * 512 >> s rows, as ranks with other memory choose other tiles, and the plan the group agrees on
 * (KnnwbSelectJob.share_plan) is the smallest of theirs: the shares first run with share_plan
 * taking their offer down and failing the job (as a rank without a plan would make it fail), then
 * with share_plan giving back the minimum of the offers, as the ranks' reduction does. */
static gboolean differing_tiles;
static int64_t share_offers[4][KNNWB_SELECT_SHARE_PLAN_VALUES];
static int64_t share_agreed[KNNWB_SELECT_SHARE_PLAN_VALUES];

static int share_plan_offer(int64_t *values, size_t n, void *data)
{
  g_assert_cmpuint(n, ==, KNNWB_SELECT_SHARE_PLAN_VALUES);
  memcpy(share_offers[*(const int *)data], values, sizeof share_offers[0]);
  return 0;
}

static int share_plan_agreed(int64_t *values, size_t n, void *data)
{
  (void)data;
  g_assert_cmpuint(n, ==, KNNWB_SELECT_SHARE_PLAN_VALUES);
  memcpy(values, share_agreed, sizeof share_agreed);
  return 1;
}

/* The group's plan for differing_tiles: each share's offer, then their minimum. */
static void share_plans_agree(KnnwbSelectJob *job, int shares)
{
  for (int s = 0; s < shares; s++) {
    char tile[16], message[512];
    g_snprintf(tile, sizeof tile, "%d", 512 >> s);
    g_setenv("KNNWB_CUDA_MAX_TILE", tile, TRUE);
    job->share_count = shares;
    job->share_index = s;
    job->share_plan = share_plan_offer;
    job->share_plan_data = &s;
    g_assert_cmpint(knnwb_cuda_select(job, message, sizeof message), ==,
                    KNNWB_KERNELS_OUT_OF_MEMORY);
    for (size_t v = 0; v < KNNWB_SELECT_SHARE_PLAN_VALUES; v++)
      share_agreed[v] = s == 0 ? share_offers[0][v] : MIN(share_agreed[v], share_offers[s][v]);
  }
  g_assert_cmpint(share_agreed[1], ==, 512 >> (shares - 1));
  job->share_plan = share_plan_agreed;
  job->share_plan_data = NULL;
}

static void run_shares(KnnwbSelectJob *job, int shares, int *filled)
{
  const size_t n = job->n_query, kc = job->kc;
  int64_t *merged_index = job->out_index;
  float *merged_score = job->out_score;
  double *merged_distance = job->out_distance;
  int *merged_filled = job->out_distance_filled;
  uint64_t *progress = job->progress_data;
  int64_t *index = g_new(int64_t, (size_t)shares * n * kc);
  float *score = g_new(float, (size_t)shares *n *kc);
  double *distance = g_new(double, (size_t)shares *n *kc);
  uint64_t progressed = 0;
  *filled = 1;
  if (differing_tiles)
    share_plans_agree(job, shares);
  for (int s = 0; s < shares; s++) {
    int share_filled = 0;
    if (differing_tiles) {
      char tile[16];
      g_snprintf(tile, sizeof tile, "%d", 512 >> s);
      g_setenv("KNNWB_CUDA_MAX_TILE", tile, TRUE);
    }
    *progress = 0;
    job->share_count = shares;
    job->share_index = s;
    job->out_index = index + (size_t)s * n * kc;
    job->out_score = score + (size_t)s * n * kc;
    job->out_distance = distance + (size_t)s * n * kc;
    job->out_distance_filled = &share_filled;
    char message[512];
    int status = knnwb_cuda_select(job, message, sizeof message);
    if (status != KNNWB_KERNELS_OK)
      g_error("knnwb_cuda_select, share %d of %d: status %d: %s", s, shares, status, message);
    progressed += *progress; /* (a share may hold no tile at all: 0 of 0) */
    *filled = *filled && share_filled;
  }
  g_assert_cmpuint(progressed, >, 0);
  ShareEntry *row = g_new(ShareEntry, (size_t)shares * kc);
  size_t twice = 0;
  for (size_t i = 0; i < n; i++) {
    size_t m = 0;
    if (job->reference_invalid != NULL && job->reference_invalid[i])
      continue; /* not queried: its lists hold anything */
    for (int s = 0; s < shares; s++)
      for (size_t t = 0; t < kc; t++) {
        const size_t at = ((size_t)s * n + i) * kc + t;
        if (index[at] >= 0)
          row[m++] = (ShareEntry){index[at], score[at], distance[at]};
      }
    qsort(row, m, sizeof *row, share_entry_by_index);
    for (size_t t = 1; t < m; t++)
      if (row[t].index == row[t - 1].index && twice++ < 5)
        g_printerr("row %zu: candidate %" G_GINT64_FORMAT " in two shares' lists\n", i,
                   row[t].index);
    qsort(row, m, sizeof *row, share_entry_compare);
    for (size_t t = 0; t < kc; t++) {
      merged_index[i * kc + t] = t < m ? row[t].index : -1;
      merged_score[i * kc + t] = t < m ? row[t].score : INFINITY;
      merged_distance[i * kc + t] = t < m ? row[t].distance : NAN;
    }
  }
  g_assert_cmpuint(twice, ==, 0);
  job->out_index = merged_index;
  job->out_score = merged_score;
  job->out_distance = merged_distance;
  job->out_distance_filled = merged_filled;
  job->share_count = 0;
  job->share_index = 0;
  job->share_plan = NULL;
  g_setenv("KNNWB_CUDA_MAX_TILE", "512", TRUE);
  g_free(row);
  g_free(index);
  g_free(score);
  g_free(distance);
}

/* c's job, checked; shares > 1: the self job run once per share (run_shares), the lists merged */
/* Derived rows (set by test_derived): the jobs take their rows from KnnwbSelectJob.rows_fill, which
 * copies them from the test's arrays, as a split run's derivation gives them. */
static gboolean derived_rows;
typedef struct {
  const float *values;
  size_t dim;
} DerivedSource;

static void derived_fill(const void *source, size_t first, size_t count, float *out)
{
  const DerivedSource *rows = source;
  memcpy(out, rows->values + first * rows->dim, count * rows->dim * sizeof(float));
}

static void run_case_shared(const Case *c, int shares)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(c->seed);
  const size_t d = c->dim;
  float *reference = g_new(float, c->n_reference *d);
  fill_rows(reference, c->n_reference, d, c->kind, c->with_duplicates, rng);
  float *query = reference;
  if (!c->self) {
    query = g_new(float, c->n_query *d);
    fill_rows(query, c->n_query, d, c->kind, FALSE, rng);
  }
  float *sq = g_new(float, c->n_reference);
  double *sq_double = g_new(double, c->n_reference);
  for (size_t j = 0; j < c->n_reference; j++) {
    double s = 0;
    for (size_t t = 0; t < d; t++)
      s += (double)reference[j * d + t] * reference[j * d + t];
    sq[j] = (float)s;
    sq_double[j] = sq[j];
  }
  unsigned char *invalid = NULL;
  if (c->with_invalid) {
    invalid = g_new0(unsigned char, c->n_reference);
    for (size_t j = 0; j < c->n_reference; j += 11)
      invalid[j] = 1;
  }
  int devices[2] = {0, 0};
  uint64_t last_progress = 0;
  KnnwbSelectJob job;
  memset(&job, 0, sizeof job);
  job.query = query;
  job.n_query = c->n_query;
  job.reference = reference;
  job.n_reference = c->n_reference;
  job.reference_sqnorms = c->kind == KNNWB_SCORE_L2 ? sq : NULL;
  job.reference_invalid = invalid;
  job.dim = d;
  job.score_kind = c->kind;
  job.self = c->self;
  DerivedSource sources[2] = {{query, d}, {reference, d}};
  if (derived_rows) {
    job.query = job.reference = NULL;
    job.rows_fill = derived_fill;
    job.query_source = c->self ? &sources[1] : &sources[0];
    job.reference_source = &sources[1];
  }
  job.kc = c->kc;
  job.n_threads = 1;
  job.memory_bytes = c->budget;
  job.devices = c->n_devices == 2 ? devices : NULL;
  job.n_devices = c->n_devices == 2 ? 2 : 0;
  job.progress = progress_count;
  job.progress_data = &last_progress;
  job.out_index = g_new(int64_t, c->n_query * c->kc);
  job.out_score = g_new(float, c->n_query * c->kc);
  for (size_t t = 0; t < c->n_query * c->kc; t++) {
    job.out_index[t] = -7; /* poison: every slot must be written */
    job.out_score[t] = NAN;
  }
  /* Exact distances on the same rows, with core's own row statistics (cosine: no means). */
  const KnnwbMetric metric = exact_metric(c->kind, c->seed);
  double *stats = g_new0(double, 2 * (c->n_query + c->n_reference));
  double *q_mean = stats, *q_squares = stats + c->n_query;
  double *r_mean = q_squares + c->n_query, *r_squares = r_mean + c->n_reference;
  for (size_t i = 0; i < c->n_query; i++)
    knnwb_row_statistics(metric, query + i * d, d, &q_mean[i], &q_squares[i]);
  for (size_t j = 0; j < c->n_reference; j++)
    knnwb_row_statistics(metric, reference + j * d, d, &r_mean[j], &r_squares[j]);
  const gboolean no_means = metric == KNNWB_METRIC_COSINE;
  int distances_filled = 0;
  job.exact_kind = knnwb_metric_exact_kind(metric);
  job.exact_query = query;
  job.exact_reference = reference;
  job.exact_query_mean = no_means ? NULL : q_mean;
  job.exact_query_squares = q_squares;
  job.exact_reference_mean = no_means ? NULL : r_mean;
  job.exact_reference_squares = r_squares;
  job.out_distance = g_new(double, c->n_query * c->kc);
  job.out_distance_filled = &distances_filled;
  if (shares > 1) {
    run_shares(&job, shares, &distances_filled);
  } else {
    char message[512];
    int status = knnwb_cuda_select(&job, message, sizeof message);
    if (status != KNNWB_KERNELS_OK)
      g_error("knnwb_cuda_select: status %d: %s", status, message);
  }
  g_assert_cmpuint(last_progress, >, 0);
  if (c->budget == 0)
    g_assert_cmpint(distances_filled, ==, 1);
  size_t distance_failures = 0;
  for (size_t i = 0; distances_filled && i < c->n_query; i++) {
    if (c->self && invalid && invalid[i])
      continue;
    for (size_t t = 0; t < c->kc; t++) {
      int64_t j = job.out_index[i * c->kc + t];
      double got = job.out_distance[i * c->kc + t];
      if (j < 0) {
        g_assert_true(isnan(got));
        continue;
      }
      double want = knnwb_pair_distance(metric, query + i * d, reference + (size_t)j * d, d,
                                        q_mean[i], q_squares[i], r_mean[j], r_squares[j]);
      if (memcmp(&got, &want, sizeof got) != 0 && distance_failures++ < 5)
        g_printerr("row %zu candidate %" G_GINT64_FORMAT ": GPU distance %.17g, host %.17g\n", i, j,
                   got, want);
    }
  }
  g_assert_cmpuint(distance_failures, ==, 0);
  g_free(stats);
  g_free(job.out_distance);

  double *all = g_new(double, c->n_reference);
  unsigned char *seen = g_new0(unsigned char, c->n_reference);
  size_t failures = 0;
  for (size_t i = 0; i < c->n_query; i++) {
    if (c->self && invalid && invalid[i])
      continue; /* invalid rows are not queried */
    const float *q = query + i * d;
    size_t m = 0;
    double scale = 0;
    for (size_t j = 0; j < c->n_reference; j++) {
      if ((c->self && j == i) || (invalid && invalid[j]))
        continue;
      all[m] = true_score(c->kind, q, reference + j * d, d, sq_double[j]);
      scale = fmax(scale, fabs(all[m]));
      m++;
    }
    g_assert_cmpuint(m, >=, c->kc);
    qsort(all, m, sizeof *all, compare_double);
    double kth = all[c->kc - 1];
    double tolerance = 1e-5 * (scale + 1) * sqrt((double)d);
    double worst = -INFINITY;
    for (size_t t = 0; t < c->kc; t++) {
      int64_t j = job.out_index[i * c->kc + t];
      if (j < 0 || (size_t)j >= c->n_reference || (c->self && (size_t)j == i) ||
          (invalid && invalid[j]) || seen[j]) {
        if (failures++ < 5)
          g_printerr("row %zu slot %zu: bad index %" G_GINT64_FORMAT "\n", i, t, j);
        continue;
      }
      seen[j] = 1;
      double s = true_score(c->kind, q, reference + j * d, d, sq_double[j]);
      if (fabs(s - job.out_score[i * c->kc + t]) > tolerance && failures++ < 5)
        g_printerr("row %zu: score %g reported as %g\n", i, s, job.out_score[i * c->kc + t]);
      worst = fmax(worst, s);
    }
    if (worst > kth + tolerance && failures++ < 5)
      g_printerr("row %zu: worst candidate %.9g but the %zu-th best is %.9g\n", i, worst, c->kc,
                 kth);
    for (size_t t = 0; t < c->kc; t++) {
      int64_t j = job.out_index[i * c->kc + t];
      if (j >= 0 && (size_t)j < c->n_reference)
        seen[j] = 0;
    }
  }
  g_assert_cmpuint(failures, ==, 0);
  g_free(all);
  g_free(seen);
  g_free(job.out_index);
  g_free(job.out_score);
  g_free(invalid);
  g_free(sq);
  g_free(sq_double);
  if (query != reference)
    g_free(query);
  g_free(reference);
}

static void run_case(const Case *c)
{
  run_case_shared(c, 0);
}

#define MIB ((size_t)1 << 20)

static void test_kinds(void)
{
  if (!gpu_or_skip())
    return;
  for (int kind = 0; kind < 4; kind++) {
    Case c = {1237, 1237, 37, 28, kind, TRUE, 0, 0, FALSE, TRUE, 11u + kind};
    run_case(&c);
    Case q = {301, 1999, 29, 9, kind, FALSE, 0, 0, TRUE, FALSE, 21u + kind};
    run_case(&q);
  }
}

static void test_k1(void)
{
  if (!gpu_or_skip())
    return;
  Case c = {777, 777, 5, 1, KNNWB_SCORE_L2, TRUE, 0, 0, FALSE, TRUE, 5};
  run_case(&c);
}

/* Budgets just above the fixed overhead: tiles of 128-256 rows, reference blocks streamed. */
static void test_small_budgets(void)
{
  if (!gpu_or_skip())
    return;
  Case c = {3001, 3001, 300, 28, KNNWB_SCORE_DOT, TRUE, 96 * MIB + 3 * MIB, 0, TRUE, TRUE, 7};
  run_case(&c);
  Case q = {1501, 2999, 300, 28, KNNWB_SCORE_L1, FALSE, 96 * MIB + 2 * MIB, 0, FALSE, FALSE, 8};
  run_case(&q);
  /* state for all rows does not fit half the budget: the panel schedule */
  Case p = {2500, 2500,  41,   1100, KNNWB_SCORE_ABS_DOT, TRUE, 96 * MIB + 12 * MIB,
            0,    FALSE, TRUE, 9};
  run_case(&p);
}

static void test_large_k(void)
{
  if (!gpu_or_skip())
    return;
  Case c = {4701, 4701, 13, 4096 + 512, KNNWB_SCORE_DOT, TRUE, 0, 0, FALSE, TRUE, 12};
  run_case(&c);
  Case l = {4701, 4701, 13,    1000 + 125, KNNWB_SCORE_L1, TRUE, 96 * MIB + 40 * MIB,
            2,    TRUE, FALSE, 13};
  run_case(&l);
}

/* One diagonal tile wider than 8,192 columns (the planner's tiles reach 16,384): the first tile of
 * fresh rows in its widest form: its column stages of doubling width, the narrow ones in the
 * filter's narrow layout (or the wide one in the test_cuda_select_wide_filter run). */
static void test_wide_tile(void)
{
  if (!gpu_or_skip())
    return;
  Case c = {12345, 12345, 9, 28, KNNWB_SCORE_L2, TRUE, 0, 0, TRUE, TRUE, 51};
  run_case(&c);
  Case a = {9001, 9001, 17, 41, KNNWB_SCORE_ABS_DOT, TRUE, 0, 0, FALSE, TRUE, 52};
  run_case(&a);
  /* kc = 200 (euclidean k = 30): the stages' merges by the block's radix select */
  Case e = {9001, 9001, 23, 200, KNNWB_SCORE_L2, TRUE, 0, 0, TRUE, TRUE, 53};
  run_case(&e);
}

static void test_two_devices(void)
{
  if (!gpu_or_skip())
    return;
  /* with peer access (where the GPUs have it), then as if they had none */
  for (int no_peer = 0; no_peer < 2; no_peer++) {
    if (no_peer)
      g_setenv("KNNWB_CUDA_NO_PEER_ACCESS", "1", TRUE);
    for (int kind = 0; kind < 4; kind++) {
      Case c = {2049,
                2049,
                19,
                28,
                kind,
                TRUE,
                96 * MIB + 4 * MIB,
                2,
                kind == 1,
                TRUE,
                31u + kind + 7u * no_peer};
      run_case(&c);
    }
    if (knnwb_cuda_device_count() >= 2) {
      Case all = {3333, 3333, 23, 28, KNNWB_SCORE_DOT, TRUE, 0, 0, FALSE, TRUE, 41u + no_peer};
      run_case(&all);
      Case big_k = {3001, 3001, 9, 700, KNNWB_SCORE_L2, TRUE, 0, 0, TRUE, TRUE, 43u + no_peer};
      run_case(&big_k);
    }
  }
  g_unsetenv("KNNWB_CUDA_NO_PEER_ACCESS");
}

/* A self job shared out as whole-input ranks share it (share_count 2 and 3, each share run in
 * turn here, their lists merged by score): every pair in one share's lists only, and the merge as
 * good as the whole job's; resident and streamed (small budgets), in the symmetric schedule and in
 * query panels (KNNWB_CUDA_SYMMETRIC=0, the schedule of large shares under small budgets), on
 * every GPU and on device 0 listed twice, with and without peer access. */
static void test_shares(void)
{
  if (!gpu_or_skip())
    return;
  /* tiles of 512 rows: 6 x 6 blocks, so that every share holds tiles of its own */
  g_setenv("KNNWB_CUDA_MAX_TILE", "512", TRUE);
  for (int panels = 0; panels < 2; panels++) {
    if (panels)
      g_setenv("KNNWB_CUDA_SYMMETRIC", "0", TRUE);
    for (int no_peer = 0; no_peer < 2; no_peer++) {
      if (no_peer)
        g_setenv("KNNWB_CUDA_NO_PEER_ACCESS", "1", TRUE);
      for (int kind = 0; kind < 4; kind++)
        for (int workers = 1; workers <= 2; workers++)
          for (int streamed = 0; streamed < 2; streamed++) {
            if (no_peer && workers == 1)
              continue;
            const int shares = 2 + (kind + streamed + panels) % 2;
            /* (300 columns under 100 MiB: smaller tiles, the rows streamed) */
            Case c = {3001,
                      3001,
                      streamed ? 300 : 21,
                      28,
                      kind,
                      TRUE,
                      streamed ? 96 * MIB + 4 * MIB : 0,
                      workers == 2 ? 2 : 0,
                      kind == 2,
                      TRUE,
                      61u + (guint32)kind};
            g_test_message("kind %d, %s, %s, %s, %d shares%s", kind,
                           workers == 2 ? "device 0 twice" : "every GPU",
                           streamed ? "streamed" : "resident", panels ? "panels" : "symmetric",
                           shares, no_peer ? ", no peer access" : "");
            run_case_shared(&c, shares);
          }
      g_unsetenv("KNNWB_CUDA_NO_PEER_ACCESS");
    }
  }
  g_unsetenv("KNNWB_CUDA_SYMMETRIC");
  /* Shares that would choose other tiles (512, 256, 128 rows) run the group's agreed plan. */
  differing_tiles = TRUE;
  for (int kind = 0; kind < 4; kind++)
    for (int panels = 0; panels < 2; panels++) {
      if (panels)
        g_setenv("KNNWB_CUDA_SYMMETRIC", "0", TRUE);
      const int shares = 2 + (kind + panels) % 2;
      Case c = {3001, 3001, 21, 28, kind, TRUE, 0, 0, kind == 2, TRUE, 71u + (guint32)kind};
      g_test_message("kind %d, %s, %d shares with differing tiles", kind,
                     panels ? "panels" : "symmetric", shares);
      run_case_shared(&c, shares);
      g_unsetenv("KNNWB_CUDA_SYMMETRIC");
    }
  differing_tiles = FALSE;
  g_unsetenv("KNNWB_CUDA_MAX_TILE");
}

/* Rows derived on demand (KnnwbSelectJob.rows_fill) instead of given: filled into the staging of
 * a resident upload, on one GPU and on device 0 twice (each worker its slice), or made whole for a
 * plan that streams them (small budgets, panels); self and query jobs, every kind. */
static void test_derived(void)
{
  if (!gpu_or_skip())
    return;
  derived_rows = TRUE;
  for (int kind = 0; kind < 4; kind++) {
    Case c = {1237, 1237, 37, 28, kind, TRUE, 0, 0, kind == 1, TRUE, 81u + kind};
    run_case(&c);
    Case q = {301, 1999, 29, 9, kind, FALSE, 0, 0, TRUE, FALSE, 85u + kind};
    run_case(&q);
    Case two = {2049, 2049, 19, 28, kind, TRUE, 96 * MIB + 4 * MIB, 2, kind == 2, TRUE, 89u + kind};
    run_case(&two);
  }
  Case s = {3001, 3001, 300, 28, KNNWB_SCORE_DOT, TRUE, 96 * MIB + 3 * MIB, 0, TRUE, TRUE, 93};
  run_case(&s);
  Case p = {2500, 2500,  41,   1100, KNNWB_SCORE_ABS_DOT, TRUE, 96 * MIB + 12 * MIB,
            0,    FALSE, TRUE, 94};
  run_case(&p);
  /* without pinned staging: pageable buffers stand in for the derived rows */
  g_setenv("KNNWB_CUDA_TEST_NO_STAGING", "1", TRUE);
  Case u = {1237, 1237, 37, 28, KNNWB_SCORE_L2, TRUE, 0, 0, TRUE, TRUE, 95};
  run_case(&u);
  g_unsetenv("KNNWB_CUDA_TEST_NO_STAGING");
  derived_rows = FALSE;
}

static void test_errors(void)
{
  if (!gpu_or_skip())
    return;
  float rows[64] = {0};
  int64_t index[16];
  float score[16];
  KnnwbSelectJob job;
  memset(&job, 0, sizeof job);
  job.query = job.reference = rows;
  job.n_query = job.n_reference = 8;
  job.dim = 8;
  job.self = 1;
  job.kc = 2;
  job.out_index = index;
  job.out_score = score;
  int bad_device = 999;
  job.devices = &bad_device;
  job.n_devices = 1;
  char message[512];
  g_assert_cmpint(knnwb_cuda_select(&job, message, sizeof message), ==, KNNWB_KERNELS_NO_DEVICE);
  g_assert_nonnull(strstr(message, "999"));
  job.devices = NULL;
  job.n_devices = 0;
  job.memory_bytes = 1 << 20; /* below the fixed overhead */
  g_assert_cmpint(knnwb_cuda_select(&job, message, sizeof message), ==,
                  KNNWB_KERNELS_OUT_OF_MEMORY);
  g_assert_nonnull(strstr(message, "memory"));
  /* --gpu-memory 64M on 8 rows: the message names the fixed share and the budget to give, not the
   * input's sizes (it used to say the budget "cannot hold the smallest tiles for 8 x 8 rows") */
  job.memory_bytes = (size_t)64 << 20;
  g_assert_cmpint(knnwb_cuda_select(&job, message, sizeof message), ==,
                  KNNWB_KERNELS_OUT_OF_MEMORY);
  g_assert_nonnull(strstr(message, "64 MiB"));
  g_assert_nonnull(strstr(message, "--gpu-memory 128M"));
  job.memory_bytes = (size_t)128 << 20;
  g_assert_cmpint(knnwb_cuda_select(&job, message, sizeof message), ==, KNNWB_KERNELS_OK);
  volatile int cancel = 1;
  job.memory_bytes = 0;
  job.cancel = &cancel;
  g_assert_cmpint(knnwb_cuda_select(&job, message, sizeof message), ==, KNNWB_KERNELS_CANCELLED);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/cuda-select/kinds", test_kinds);
  g_test_add_func("/kernels/cuda-select/k1", test_k1);
  g_test_add_func("/kernels/cuda-select/small-budgets", test_small_budgets);
  g_test_add_func("/kernels/cuda-select/large-k", test_large_k);
  g_test_add_func("/kernels/cuda-select/wide-tile", test_wide_tile);
  g_test_add_func("/kernels/cuda-select/two-devices", test_two_devices);
  g_test_add_func("/kernels/cuda-select/shares", test_shares);
  g_test_add_func("/kernels/cuda-select/derived", test_derived);
  g_test_add_func("/kernels/cuda-select/errors", test_errors);
  return g_test_run();
}
