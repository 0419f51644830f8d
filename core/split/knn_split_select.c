/* One selection of a split-memory run, as the passes and the re-selection use it: a select job over
 * two sides (blocks, or parts of blocks) filled for the run's backend and run with rank 0's
 * progress, and its candidates turned into global indices (with their exact distances where the
 * re-selection wants them; the passes take theirs in with knn_split_best.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "cpu/cpu.h"
#include "split/split_internal.h"

size_t knnwb_split_valid(const KnnwbSplitSide *side)
{
  size_t valid = side->count;
  for (size_t t = 0; t < side->count && side->rows->invalid != NULL; t++)
    valid -= side->rows->invalid[side->first + t] != 0;
  return valid;
}

/* Turns a job's local candidate indices of side `of` into global ones and computes each one's
 * exact distance from its list's row (of side `rows`), as the refinement would; without
 * `distances` they are left NaN (unless the backend returned them) for whoever takes the lists
 * in: the first pass's knnwb_split_best_take, which skips those provably too far, or the
 * re-selection's refinement (the own reference block's). */
typedef struct {
  const KnnwbSplitSide *rows, *of;
  KnnwbSplitLists *lists;
  gboolean distances;
} KnnwbSplitFinish;

static void knnwb_split_finish_rows(size_t first, size_t last, void *user)
{
  KnnwbSplitFinish *finish = user;
  const size_t kc = finish->lists->kc;
  for (size_t t = first; t < last; t++)
    for (size_t c = 0; c < kc; c++) {
      int64_t *index = &finish->lists->index[t * kc + c];
      if (*index < 0) {
        finish->lists->distance[t * kc + c] = NAN;
        continue;
      }
      const size_t j = finish->of->first + (size_t)*index;
      if (finish->lists->distances_filled) {
        /* the backend's, kept */
      } else if (finish->distances) {
        if (c + 1 < kc && index[1] >= 0)
          knnwb_split_prefetch(finish->of->rows, finish->of->first + (size_t)index[1]);
        finish->lists->distance[t * kc + c] = knnwb_prepared_distance(
            finish->rows->rows, finish->rows->first + t, finish->of->rows, j);
      } else {
        finish->lists->distance[t * kc + c] = NAN;
      }
      *index = (int64_t)(finish->of->global + (size_t)*index);
    }
}

void knnwb_split_finish_as(const KnnwbSplitRun *run, const KnnwbSplitSide *rows,
                           const KnnwbSplitSide *of, KnnwbSplitLists *lists, gboolean distances)
{
  KnnwbSplitFinish finish = {rows, of, lists, distances};
  knnwb_parallel_for(run->threads, lists->rows, 64, knnwb_split_finish_rows, &finish);
}

void knnwb_split_fill_job(const KnnwbSplitRun *run, KnnwbSelectJob *job,
                          const KnnwbSplitSide *query, const KnnwbSplitSide *reference, size_t kc,
                          KnnwbSplitLists *out)
{
  const KnnwbPrepared *r = reference->rows;
  const size_t d = r->d;
  memset(job, 0, sizeof *job);
  if (query->rows->scored != NULL && r->scored != NULL) {
    job->query = query->rows->scored + query->first * d;
    job->reference = r->scored + reference->first * d;
  } else {
    /* rows packed without their scored copy: the backend derives them as it reads them */
    job->rows_fill = knnwb_prepared_scored_fill;
    job->query_source = query->rows;
    job->query_source_first = query->first;
    job->reference_source = r;
    job->reference_source_first = reference->first;
  }
  job->n_query = query->count;
  job->n_reference = reference->count;
  job->reference_sqnorms = r->sqnorms ? r->sqnorms + reference->first : NULL;
  job->reference_invalid = r->invalid ? r->invalid + reference->first : NULL;
  job->dim = d;
  job->score_kind = knnwb_metric_score_kind(r->metric);
  job->screen = knnwb_screen_kernel_precision(r->screen);
  job->screen_row_norm = r->screen_row_norm;
  job->screen_half_scores = knnwb_screen_half_scores(r->screen);
  job->n_threads = run->threads;
  job->memory_bytes =
      run->select == knnwb_cpu_select ? run->options->memory_bytes : run->options->gpu_memory_bytes;
  job->devices = run->options->devices;
  job->n_devices = run->options->n_devices;
  knnwb_knn_gpu_share(run->options, &job->device_share, &job->device_shares);
  job->cancel = run->options->cancel;
  job->kc = kc;
  job->out_index = out->index;
  job->out_score = out->score;
  if (run->select != knnwb_cpu_select || run->test_exact != 0) {
    /* The GPUs compute the candidates' exact distances beside the tiles (bit for bit as
     * knnwb_prepared_distance), where the host took most of a pair's time: 100 million of them
     * at 500,000 rows x 200 candidates. They may decline (no room); the host computes them then. */
    const KnnwbPrepared *q = query->rows;
    out->distances_filled = 0;
    job->exact_kind = knnwb_metric_exact_kind(q->metric); /* as knnwb_prepared_distance */
    job->exact_query = q->exact + query->first * d;
    job->exact_reference = r->exact + reference->first * d;
    job->exact_query_mean = q->mean ? q->mean + query->first : NULL;
    job->exact_query_squares = q->sum_squares ? q->sum_squares + query->first : NULL;
    job->exact_reference_mean = r->mean ? r->mean + reference->first : NULL;
    job->exact_reference_squares = r->sum_squares ? r->sum_squares + reference->first : NULL;
    job->out_distance = out->distance;
    job->out_distance_filled = &out->distances_filled;
  }
}

/* Tests (run->test_exact): the exact distances of a job's candidates, in its stride, as a GPU
 * returns them (knnwb_prepared_distance is what the GPUs match bit for bit), so the path that
 * keeps a backend's distances runs without a GPU; in mode 2 about every other job declines (by
 * its sides' first rows, so the same jobs on every run); in mode 3 every job returns the k best
 * as a GPU refining on the device does (knnwb_split_test_refine). */

/* Row i's k best of job's kc lists, as a GPU's refine gives them, into index/distance (k each),
 * *worst and *count. */
static void knnwb_split_test_refine_row(const KnnwbSelectJob *job, size_t i, KnnwbNeighbour *pairs,
                                        int64_t *index, double *distance, float *worst,
                                        int32_t *count)
{
  const size_t kc = job->kc, k = job->out_k;
  size_t valid = 0;
  *worst = -INFINITY;
  for (size_t t = 0; t < kc; t++) {
    const int64_t j = job->out_index[i * kc + t];
    if (j >= 0 && job->out_score[i * kc + t] > *worst)
      *worst = job->out_score[i * kc + t];
    if (j >= 0 && !(job->self && (size_t)j == i))
      pairs[valid++] = (KnnwbNeighbour){job->out_distance[i * kc + t], j};
  }
  qsort(pairs, valid, sizeof *pairs, knnwb_neighbour_compare);
  for (size_t t = 0; t < k; t++) {
    index[t] = t < valid ? pairs[t].index : -1;
    distance[t] = t < valid ? pairs[t].distance : INFINITY;
  }
  *count = (int32_t)valid;
}

/* Every row's k best of job's kc lists handed to its out_refined_take as side side, in pieces of
 * 1 to 7 rows, from several threads at once for disjoint rows (as a GPU hands each spreading
 * thread's rows of a chunk). */
typedef struct {
  const KnnwbSelectJob *job;
  int side;
} KnnwbSplitTestHand;

static void knnwb_split_test_refine_rows(size_t row0, size_t row1, void *user)
{
  enum { PIECE = 7 };
  const KnnwbSplitTestHand *hand = user;
  const KnnwbSelectJob *job = hand->job;
  const size_t k = job->out_k;
  g_autofree KnnwbNeighbour *pairs = g_new(KnnwbNeighbour, job->kc + 1);
  g_autofree int64_t *index = g_new(int64_t, PIECE * k);
  g_autofree double *distance = g_new(double, PIECE *k);
  float worst[PIECE];
  int32_t count[PIECE];
  for (size_t first = row0, piece = 1; first < row1; first += piece, piece = piece % PIECE + 1) {
    piece = MIN(piece, row1 - first);
    for (size_t r = 0; r < piece; r++)
      knnwb_split_test_refine_row(job, first + r, pairs, index + r * k, distance + r * k, &worst[r],
                                  &count[r]);
    job->out_refined_take(job->out_refined_take_data, hand->side, first, piece, index, distance,
                          worst, count);
  }
}

static void knnwb_split_test_refine(const KnnwbSelectJob *job, int side)
{
  KnnwbSplitTestHand hand = {job, side};
  knnwb_parallel_for(MAX(job->n_threads, 2), job->n_query, 64, knnwb_split_test_refine_rows, &hand);
}

static void knnwb_split_test_exact(const KnnwbSplitRun *run, const KnnwbSelectJob *job,
                                   const KnnwbSplitSide *query, const KnnwbSplitSide *reference)
{
  if (run->test_exact == 0 || job->out_distance_filled == NULL ||
      (run->test_exact == 2 && (query->global + reference->global) % 2 == 0))
    return;
  for (size_t i = 0; i < job->n_query; i++)
    for (size_t t = 0; t < job->kc; t++) {
      const int64_t index = job->out_index[i * job->kc + t];
      job->out_distance[i * job->kc + t] =
          index < 0 ? NAN
                    : knnwb_prepared_distance(query->rows, query->first + i, reference->rows,
                                              reference->first + (size_t)index);
    }
  *job->out_distance_filled = 1;
  if (run->test_exact >= 3 && job->out_k > 0 && job->out_refined_take != NULL) {
    knnwb_split_test_refine(job, 0);
    *job->out_refined = 1;
  }
}

gboolean knnwb_split_run_job(const KnnwbSplitRun *run, const KnnwbSelectJob *job,
                             const KnnwbSplitSide *query, const KnnwbSplitSide *reference,
                             GError **error)
{
  char message[512] = "";
  KnnwbSelectJob shown = *job;
  if (run->progress != NULL) {
    shown.progress = knnwb_split_job_progress;
    shown.progress_data = (void *)run;
  }
  if (!knnwb_knn_status_to_error(run->select(&shown, message, sizeof message), message,
                                 run->backend, error))
    return FALSE;
  knnwb_split_test_exact(run, job, query, reference);
  return TRUE;
}

gboolean knnwb_split_refine_wanted(const KnnwbSplitRun *run)
{
  return run->select != knnwb_cpu_select || run->test_exact >= 3;
}

gboolean knnwb_split_cross_wanted(const KnnwbSplitRun *run)
{
  return !run->two_sided && knnwb_split_refine_wanted(run) &&
         (run->select != knnwb_cpu_select || run->test_exact == 4) &&
         g_strcmp0(g_getenv("KNNWB_SPLIT_CROSS"), "0") != 0;
}

/* A job's refined lists as they come off the device (KnnwbSelectJob.out_refined_take): each side's
 * rows straight into its k best (sides[0]: the query rows', sides[1]: a job for both sides' other
 * side's), without room for all of them (at 766,938 rows a side and k = 20, 240 MiB each); done:
 * whether the backend refined each side (else the query side's kc lists were written). */
typedef struct {
  KnnwbSplitTaker sides[2];
  size_t k;
  int done[2];
} KnnwbSplitTakers;

static void knnwb_split_takers_take(void *data, int side, size_t first, size_t count,
                                    const int64_t *index, const double *distance,
                                    const float *worst, const int32_t *valid)
{
  const KnnwbSplitTakers *takers = data;
  knnwb_split_best_take_rows(&takers->sides[side], first, count, takers->k, index, distance, worst,
                             valid);
}

/* The backend asked to hand over each query row's k best (at most the job's kc, into best's rows
 * from at, from a job that chose among complete_at rows) instead of its kc candidates: lists k
 * wide come back from a GPU instead of kc wide (2 GB at 500,000 rows x 200 candidates, k = 30:
 * 244 MB), and go straight into best. The job must have its exact distances asked for. */
static void knnwb_split_takers_ask(KnnwbSelectJob *job, KnnwbSplitTakers *takers,
                                   KnnwbSplitBest *best, size_t at, const KnnwbSplitSide *rows,
                                   const KnnwbSplitSide *of, size_t complete_at, size_t k)
{
  memset(takers, 0, sizeof *takers);
  takers->k = MIN(k, job->kc);
  takers->sides[0] = (KnnwbSplitTaker){best, at, job->kc, complete_at, rows, of};
  if (takers->k == 0 || job->out_distance == NULL)
    return;
  job->out_k = takers->k;
  job->out_refined = &takers->done[0];
  job->out_refined_take = knnwb_split_takers_take;
  job->out_refined_take_data = takers;
}

/* The other side's k best of a job that scores each pair once for both sides (b's rows, into
 * b_best from its first row, among a's complete_at rows), handed over as the query side's. */
static void knnwb_split_takers_ask_other(KnnwbSelectJob *job, KnnwbSplitTakers *takers,
                                         KnnwbSplitBest *b_best, const KnnwbSplitSide *b,
                                         const KnnwbSplitSide *a, size_t complete_at)
{
  takers->sides[1] = (KnnwbSplitTaker){b_best, 0, job->kc, complete_at, b, a};
  if (job->out_refined_take != NULL)
    job->out_reference_refined = &takers->done[1];
}

/* A job's candidates of rows (among of's, complete at choose valid ones) taken into best's rows
 * from at: its k best where the backend refined them, else its kc lists (lists, in the job's
 * stride), finished here. */
static void knnwb_split_take_job(const KnnwbSplitRun *run, KnnwbSplitBest *best, size_t at,
                                 const KnnwbSplitTakers *takers, KnnwbSplitLists *lists,
                                 const KnnwbSplitSide *rows, const KnnwbSplitSide *of,
                                 size_t choose)
{
  if (takers->done[0])
    return; /* handed over as they came */
  knnwb_split_finish_as(run, rows, of, lists, FALSE);
  knnwb_split_best_take(run, best, at, lists, rows, of, choose);
}

gboolean knnwb_split_panel(const KnnwbSplitRun *run, const KnnwbSplitSide *query,
                           const KnnwbSplitSide *reference, const float *bounds,
                           const KnnwbSplitRoom *room, KnnwbSplitBest *best, size_t at,
                           GError **error)
{
  const KnnwbSplitSide *of = reference != NULL ? reference : query;
  const size_t valid = knnwb_split_valid(of);
  const size_t choose = reference != NULL ? valid : (valid > 0 ? valid - 1 : 0);
  if (choose == 0 || query->count == 0)
    return TRUE;
  KnnwbSplitLists lists;
  /* Asked for the k best, a backend writes every slot of the kc lists of its valid rows when it
   * declines (rows flagged invalid may hold anything: the take skips them), so the room is left
   * as it is: untouched pages cost no memory. */
  if (room->refine)
    lists = knnwb_split_lists_over(room->lists, query->count, run->kc);
  else if (!knnwb_split_lists_init_in(&lists, query->count, run->kc, room->lists, run->threads,
                                      error))
    return FALSE;
  KnnwbSelectJob job;
  knnwb_split_fill_job(run, &job, query, of, MIN(run->kc, choose), &lists);
  job.self = reference == NULL;
  job.query_bounds = bounds;
  KnnwbSplitTakers takers = {0};
  if (room->refine)
    knnwb_split_takers_ask(&job, &takers, best, at, query, of, choose, run->options->k);
  if (!knnwb_split_run_job(run, &job, query, of, error))
    return FALSE;
  lists.kc = job.kc; /* the job's stride */
  knnwb_split_take_job(run, best, at, &takers, &lists, query, of, choose);
  return TRUE;
}

/* The pair (a, b) as one two-sided job (the CPU's), its candidates taken into a_best and b_best. */
static gboolean knnwb_split_select_two_sided(const KnnwbSplitRun *run, const KnnwbSplitSide *a,
                                             const KnnwbSplitSide *b, const float *a_bounds,
                                             const float *b_bounds, const KnnwbSplitRoom *room,
                                             KnnwbSplitBest *a_best, size_t a_at,
                                             KnnwbSplitBest *b_best, GError **error)
{
  const size_t kc = run->kc;
  const size_t valid_a = knnwb_split_valid(a), valid_b = knnwb_split_valid(b);
  if (valid_a == 0 || valid_b == 0)
    return TRUE;
  KnnwbSplitLists a_lists, b_lists;
  if (!knnwb_split_lists_init_in(&a_lists, a->count, kc, room->lists, run->threads, error))
    return FALSE;
  if (!knnwb_split_lists_init(&b_lists, b->count, kc, run->threads, error)) {
    knnwb_split_lists_clear(&a_lists);
    return FALSE;
  }
  /* One pass over the tiles gives both sides (the CPU backend pads short lists with -1). */
  KnnwbSelectJob job;
  knnwb_split_fill_job(run, &job, a, b, kc, &a_lists);
  job.query_bounds = a_bounds;
  job.reference_bounds = b_bounds;
  job.out_reference_index = b_lists.index;
  job.out_reference_score = b_lists.score;
  job.query_sqnorms = a->rows->sqnorms ? a->rows->sqnorms + a->first : NULL;
  job.query_invalid = a->rows->invalid ? a->rows->invalid + a->first : NULL;
  const gboolean ok = knnwb_split_run_job(run, &job, a, b, error);
  if (ok) {
    knnwb_split_finish_as(run, a, b, &a_lists, FALSE);
    knnwb_split_best_take(run, a_best, a_at, &a_lists, a, b, valid_b);
    knnwb_split_finish_as(run, b, a, &b_lists, FALSE);
    knnwb_split_best_take(run, b_best, 0, &b_lists, b, a, valid_a);
  }
  knnwb_split_lists_clear(&b_lists);
  knnwb_split_lists_clear(&a_lists);
  return ok;
}

/* Tests (KNNWB_SPLIT_TEST_EXACT=4): a job for both sides as a GPU runs it, from the CPU's
 * two-sided job: b's kc lists, their exact distances and k best into the job's reference outputs.
 * Every third pair (by its sides' first rows, so the same ones on every run) declines, as a GPU
 * without room for both sides: a's side only. */
static gboolean knnwb_split_test_cross(const KnnwbSplitRun *run, KnnwbSelectJob *job,
                                       const KnnwbSplitSide *a, const KnnwbSplitSide *b,
                                       GError **error)
{
  int *done = job->out_reference_refined;
  job->out_reference_refined = NULL;
  if (done == NULL || (a->global + b->global) % 3 == 0)
    return knnwb_split_run_job(run, job, a, b, error);
  KnnwbSplitLists b_lists;
  if (!knnwb_split_lists_init(&b_lists, b->count, job->kc, run->threads, error))
    return FALSE;
  job->out_reference_index = b_lists.index;
  job->out_reference_score = b_lists.score;
  job->query_sqnorms = a->rows->sqnorms ? a->rows->sqnorms + a->first : NULL;
  job->query_invalid = a->rows->invalid ? a->rows->invalid + a->first : NULL;
  gboolean ok = knnwb_split_run_job(run, job, a, b, error);
  if (ok) {
    KnnwbSelectJob other = {.n_query = b->count,
                            .kc = job->kc,
                            .out_index = b_lists.index,
                            .out_score = b_lists.score,
                            .out_distance = b_lists.distance,
                            .out_k = job->out_k,
                            .out_refined_take = job->out_refined_take,
                            .out_refined_take_data = job->out_refined_take_data};
    for (size_t i = 0; i < b->count; i++)
      for (size_t t = 0; t < job->kc; t++) {
        const int64_t index = b_lists.index[i * job->kc + t];
        b_lists.distance[i * job->kc + t] =
            index < 0
                ? NAN
                : knnwb_prepared_distance(b->rows, b->first + i, a->rows, a->first + (size_t)index);
      }
    knnwb_split_test_refine(&other, 1);
    *done = 1;
  }
  job->out_reference_index = NULL;
  job->out_reference_score = NULL;
  knnwb_split_lists_clear(&b_lists);
  return ok;
}

/* The pair (a, b) as one job that scores each pair once for both sides and returns both sides' k
 * best (a GPU's, KnnwbSelectJob.out_reference_refined): half the arithmetic of two panels. Where
 * the backend declines, a's side came back as a panel's, and b's runs as a panel of its own. */
static gboolean knnwb_split_select_cross(const KnnwbSplitRun *run, const KnnwbSplitSide *a,
                                         const KnnwbSplitSide *b, const float *a_bounds,
                                         const float *b_bounds, const KnnwbSplitRoom *room,
                                         KnnwbSplitBest *a_best, size_t a_at,
                                         KnnwbSplitBest *b_best, GError **error)
{
  const size_t valid_a = knnwb_split_valid(a), valid_b = knnwb_split_valid(b);
  if (valid_a == 0 || valid_b == 0 || a->count == 0 || b->count == 0)
    return TRUE;
  /* As a panel's: a backend that declines writes every slot of a's kc lists. */
  KnnwbSplitLists lists = knnwb_split_lists_over(room->lists, a->count, run->kc);
  KnnwbSelectJob job;
  knnwb_split_fill_job(run, &job, a, b, run->kc, &lists);
  job.query_bounds = a_bounds;
  job.reference_bounds = b_bounds;
  job.query_sqnorms = a->rows->sqnorms ? a->rows->sqnorms + a->first : NULL;
  job.query_invalid = a->rows->invalid ? a->rows->invalid + a->first : NULL;
  KnnwbSplitTakers takers;
  knnwb_split_takers_ask(&job, &takers, a_best, a_at, a, b, valid_b, run->options->k);
  knnwb_split_takers_ask_other(&job, &takers, b_best, b, a, valid_a);
  if (!(run->test_exact == 4 ? knnwb_split_test_cross(run, &job, a, b, error)
                             : knnwb_split_run_job(run, &job, a, b, error)))
    return FALSE;
  lists.kc = job.kc; /* the job's stride */
  knnwb_split_take_job(run, a_best, a_at, &takers, &lists, a, b, valid_b);
  if (takers.done[1])
    return TRUE;
  return knnwb_split_panel(run, b, a, b_bounds, room, b_best, 0, error);
}

gboolean knnwb_split_select(const KnnwbSplitRun *run, const KnnwbSplitSide *a,
                            const KnnwbSplitSide *b, const float *a_bounds, const float *b_bounds,
                            const KnnwbSplitRoom *room, KnnwbSplitBest *a_best, size_t a_at,
                            KnnwbSplitBest *b_best, GError **error)
{
  if (b == NULL)
    return knnwb_split_panel(run, a, NULL, NULL, room, a_best, a_at, error);
  if (run->two_sided)
    return knnwb_split_select_two_sided(run, a, b, a_bounds, b_bounds, room, a_best, a_at, b_best,
                                        error);
  /* A job for both sides has one kc: a side with fewer valid rows than kc would cut the other's
   * candidates, so such a pair (a small chunk or block) goes as two panels. */
  if (room->cross && knnwb_split_valid(a) >= run->kc && knnwb_split_valid(b) >= run->kc)
    return knnwb_split_select_cross(run, a, b, a_bounds, b_bounds, room, a_best, a_at, b_best,
                                    error);
  /* Two panel jobs for backends that select for query rows only: b's first, then a's in the same
   * room, so the pair holds one job's lists at a time. Both start from thresholds fixed before
   * the pair, so their order changes no list. */
  return knnwb_split_panel(run, b, a, b_bounds, room, b_best, 0, error) &&
         knnwb_split_panel(run, a, b, a_bounds, room, a_best, a_at, error);
}
