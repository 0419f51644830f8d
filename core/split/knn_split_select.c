/* One selection of a split-memory run, as the passes and the re-selection use it: a select job over
 * two sides (blocks, or parts of blocks) filled for the run's backend and run with rank 0's
 * progress, and its candidates turned into global indices (with their exact distances where the
 * re-selection wants them; the passes take theirs in with knn_split_best.c). */
#include <math.h>
#include <string.h>
#include <knnwb/parallel.h>
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
 * `distances` (candidates from the rank's own reference block, which stays until the refinement)
 * they are left NaN and computed there for the candidates that are still listed
 * (knnwb_split_refine_rows): most of the first step's are displaced by the other blocks'. */
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
  job->query = query->rows->scored + query->first * d;
  job->n_query = query->count;
  job->reference = r->scored + reference->first * d;
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
 * its sides' first rows, so the same jobs on every run). */
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

/* The pair (a, b) as two panel jobs, for backends that select for query rows only: b's panel first,
 * in a_room (NULL: a buffer of its own), its lists taken into b_best; then a's panel in the same
 * room as *a_lists. So the pair holds one job's lists at a time besides the lists it takes them
 * into. Both panels start from thresholds fixed before the pair, so their order changes no list. */
static gboolean knnwb_split_select_panels(const KnnwbSplitRun *run, const KnnwbSplitSide *a,
                                          const KnnwbSplitSide *b, size_t valid_a, size_t valid_b,
                                          const float *a_bounds, const float *b_bounds,
                                          char *a_room, KnnwbSplitLists *a_lists,
                                          KnnwbSplitBest *b_best, GError **error)
{
  const size_t kc = run->kc;
  KnnwbSelectJob job;
  KnnwbSplitLists narrow;
  if (!knnwb_split_lists_init_in(&narrow, b->count, kc, a_room, run->threads, error))
    return FALSE;
  knnwb_split_fill_job(run, &job, b, a, MIN(kc, valid_a), &narrow);
  job.query_bounds = b_bounds;
  gboolean ok = knnwb_split_run_job(run, &job, b, a, error);
  narrow.kc = job.kc;
  if (ok) {
    knnwb_split_finish_as(run, b, a, &narrow, FALSE);
    knnwb_split_best_take(run, b_best, 0, &narrow, b, a, valid_a);
  }
  knnwb_split_lists_clear(&narrow);
  if (!ok || !knnwb_split_lists_init_in(a_lists, a->count, kc, a_room, run->threads, error))
    return FALSE;
  knnwb_split_fill_job(run, &job, a, b, MIN(kc, valid_b), a_lists);
  job.query_bounds = a_bounds;
  if (!knnwb_split_run_job(run, &job, a, b, error))
    return FALSE;
  a_lists->kc = job.kc;
  knnwb_split_finish_as(run, a, b, a_lists, FALSE);
  return TRUE;
}

/* Candidates of a's rows among b's (b NULL: a against itself, self pairs excluded) into *a_lists
 * (in a_room, at least knnwb_split_lists_bytes(MAX(a->count, b->count), run->kc) bytes; NULL:
 * allocated here) and, for a pair, b's rows' candidates among a's taken into b_best (b->count rows,
 * k wide, given: the window of the lists that go back to b's owner; on a two-sided backend, whose
 * job writes b's lists, through a room of their own). a_bounds/b_bounds (NULL: none): the rows'
 * starting thresholds (knnwb_split_best_thresholds), so the lists hold only pairs that beat them
 * (the rest padded with -1). a's lists come with global indices and without exact distances (NaN)
 * unless the backend returned them (distances_filled): the caller takes them in
 * (knnwb_split_best_take) while b's rows are present. */
gboolean knnwb_split_select(const KnnwbSplitRun *run, const KnnwbSplitSide *a,
                            const KnnwbSplitSide *b, const float *a_bounds, const float *b_bounds,
                            char *a_room, KnnwbSplitLists *a_lists, KnnwbSplitBest *b_best,
                            GError **error)
{
  const size_t kc = run->kc;
  const size_t valid_a = knnwb_split_valid(a), valid_b = b != NULL ? knnwb_split_valid(b) : 0;
  if (b != NULL && !run->two_sided && valid_a > 0 && valid_b > 0)
    return knnwb_split_select_panels(run, a, b, valid_a, valid_b, a_bounds, b_bounds, a_room,
                                     a_lists, b_best, error);
  if (!knnwb_split_lists_init_in(a_lists, a->count, kc, a_room, run->threads, error))
    return FALSE;
  KnnwbSelectJob job;
  if (b == NULL) {
    if (valid_a < 2)
      return TRUE;
    knnwb_split_fill_job(run, &job, a, a, MIN(kc, valid_a - 1), a_lists);
    job.self = 1;
    if (!knnwb_split_run_job(run, &job, a, a, error))
      return FALSE;
    a_lists->kc = job.kc; /* the job's stride; knnwb_split_finish_as and the take read it */
    knnwb_split_finish_as(run, a, a, a_lists, FALSE);
    return TRUE;
  }
  if (valid_a == 0 || valid_b == 0)
    return TRUE;
  /* One pass over the tiles gives both sides (the CPU backend pads short lists with -1). */
  KnnwbSplitLists b_lists;
  if (!knnwb_split_lists_init(&b_lists, b->count, kc, run->threads, error))
    return FALSE;
  knnwb_split_fill_job(run, &job, a, b, kc, a_lists);
  job.query_bounds = a_bounds;
  job.reference_bounds = b_bounds;
  job.out_reference_index = b_lists.index;
  job.out_reference_score = b_lists.score;
  job.query_sqnorms = a->rows->sqnorms ? a->rows->sqnorms + a->first : NULL;
  job.query_invalid = a->rows->invalid ? a->rows->invalid + a->first : NULL;
  const gboolean ok = knnwb_split_run_job(run, &job, a, b, error);
  if (ok) {
    knnwb_split_finish_as(run, a, b, a_lists, FALSE);
    knnwb_split_finish_as(run, b, a, &b_lists, FALSE);
    knnwb_split_best_take(run, b_best, 0, &b_lists, b, a, valid_a);
  }
  knnwb_split_lists_clear(&b_lists);
  return ok;
}
