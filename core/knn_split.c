/*
 * Split memory for a group of ranks (options->group_split): each rank holds only its block of
 * rows, the blocks travel, and each rank ends with the exact lists of its own rows.
 *
 * Self graph, R ranks, rank r owning block A_r: step 0 scores A_r against itself (a self job);
 * step s = 1 .. R/2 brings block A_{r+s} to rank r (every rank sends its block to rank r - s, one
 * exchange per prepared array, so no rank packs a second copy of its block) and scores the pair
 * (A_r, A_{r+s}) once for both sides (a two-sided job on the CPU backend; two panel jobs on other
 * backends); the candidates of the visiting rows go back to their owner in the same step. Each
 * unordered pair of blocks is scored once (for even R the pairs of step R/2 meet twice, so each of
 * the two ranks scores half: the lower rank its first half against the other block, the higher
 * rank its block against the other's second half), so the work is about n^2 d / 2 in all and
 * (R/2) m^2 d per rank.
 *
 * Query runs: the query and the reference rows are both cut into blocks; rank r's query block
 * meets every reference block in R steps (its own first).
 *
 * Exactness is core's: a candidate's exact double distance is computed while its row is present
 * (knnwb_prepared_distance, the refinement's own function, with the list's row first), each row
 * keeps the kc best candidates by (score, index) of all steps (every pair was scored once, so these
 * are the kc best of the whole job), knnwb_refine_row sorts and certifies them, and rows it cannot
 * certify are selected again with four times the candidates: those rows (a few) go to every rank,
 * each selects them against its own reference block and sends the candidates back, until all are
 * certified. The per-row preparation needs only the row; what depends on all rows (the euclidean
 * column means and scale, the manhattan scale, the largest norm the bound uses, the valid rows) is
 * reduced over the ranks first. So the lists equal one process's, byte for byte.
 *
 * Memory per rank: its block(s) and their prepared copy, one visiting block (the largest share),
 * the candidate lists of its rows (m x kc) and of one visiting block, and the backend's tiles.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <knnwb/error.h>
#include "knn_split_internal.h"

/* Bytes before each rank's block in a shared window: the chunk counter of knnwb_split_pair_chunks
 * (a cache line, so the block stays aligned). */
#define KNNWB_SPLIT_HEADER ((size_t)64)
/* The chunks of the pair met from both ends, in eighths of the cut rows: two large ones (each rank
 * takes one), then two small ones that go to whichever rank is free first. Every chunk costs its
 * job's lists of the other whole block (filled, finished, merged: 15-25 ms a chunk at 20,000
 * rows), so few chunks; the small ones leave an imbalance of at most an eighth of the pair. */
static const size_t knnwb_split_pair_eighths[] = {0, 3, 6, 7, 8};
#define KNNWB_SPLIT_PAIR_CHUNKS (G_N_ELEMENTS(knnwb_split_pair_eighths) - 1)

/* ---- One selection -----------------------------------------------------------------------------
 */

/* The rows [first, first + count) of a prepared set, numbered global + t in the whole run. */
typedef struct {
  const KnnwbPrepared *rows;
  size_t first, count;
  size_t global;
} KnnwbSplitSide;

typedef struct {
  const KnnwbKnnOptions *options;
  const KnnwbKnnGroup *group;
  KnnwbSelectFunc select;
  const char *backend;
  int threads;
  size_t kc;
  gboolean two_sided; /* the backend scores a pair for both sides in one job (the CPU's) */
  struct KnnwbSplitProgress *progress; /* rank 0's progress line, else NULL */
} KnnwbSplitRun;

/* Rank 0's progress through a pass, in thousandths of a step of the schedule: the steps' ends, and
 * within a step its jobs' own tile counts (never backwards: a step's second job starts again at 0
 * and is shown only once it passes the first). */
#define KNNWB_SPLIT_PROGRESS_UNIT 1000
typedef struct KnnwbSplitProgress {
  uint64_t step, steps, shown;
} KnnwbSplitProgress;

static size_t knnwb_split_valid(const KnnwbSplitSide *side)
{
  size_t valid = side->count;
  for (size_t t = 0; t < side->count && side->rows->invalid != NULL; t++)
    valid -= side->rows->invalid[side->first + t] != 0;
  return valid;
}

/* Candidate rows lie anywhere in a block: each loop below fetches the next candidate's exact row
 * while it computes the current one's distance (as refine.c does). */
static inline void knnwb_split_prefetch(const KnnwbPrepared *p, size_t row)
{
  const char *at = (const char *)(p->exact + row * p->d);
  for (size_t offset = 0; offset < p->d * sizeof(float); offset += 64)
    __builtin_prefetch(at + offset);
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
      if (finish->distances && c + 1 < kc && index[1] >= 0)
        knnwb_split_prefetch(finish->of->rows, finish->of->first + (size_t)index[1]);
      finish->lists->distance[t * kc + c] =
          finish->distances ? knnwb_prepared_distance(finish->rows->rows, finish->rows->first + t,
                                                      finish->of->rows, j)
                            : NAN;
      *index = (int64_t)(finish->of->global + (size_t)*index);
    }
}

static void knnwb_split_finish_as(const KnnwbSplitRun *run, const KnnwbSplitSide *rows,
                                  const KnnwbSplitSide *of, KnnwbSplitLists *lists,
                                  gboolean distances)
{
  KnnwbSplitFinish finish = {rows, of, lists, distances};
  knnwb_parallel_for(run->threads, lists->rows, 64, knnwb_split_finish_rows, &finish);
}

static void knnwb_split_finish(const KnnwbSplitRun *run, const KnnwbSplitSide *rows,
                               const KnnwbSplitSide *of, KnnwbSplitLists *lists)
{
  KnnwbSplitFinish finish = {rows, of, lists, TRUE};
  knnwb_parallel_for(run->threads, lists->rows, 64, knnwb_split_finish_rows, &finish);
}

static void knnwb_split_fill_job(const KnnwbSplitRun *run, KnnwbSelectJob *job,
                                 const KnnwbSplitSide *query, const KnnwbSplitSide *reference,
                                 size_t kc, KnnwbSplitLists *out)
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
}

/* Shows rank 0's progress: units thousandths of a step (above). */
static void knnwb_split_show(const KnnwbSplitRun *run, uint64_t units)
{
  KnnwbSplitProgress *p = run->progress;
  /* Re-selection jobs after the pass would count past its end. */
  if (p == NULL || units <= p->shown || units > p->steps * KNNWB_SPLIT_PROGRESS_UNIT)
    return;
  p->shown = units;
  run->options->progress(units, p->steps * KNNWB_SPLIT_PROGRESS_UNIT, run->options->progress_data);
}

/* A job's tiles as a share of the step it belongs to (the select's progress, called by one
 * thread at a time). */
static void knnwb_split_job_progress(uint64_t done, uint64_t total, void *data)
{
  const KnnwbSplitRun *run = data;
  if (total > 0)
    knnwb_split_show(run, run->progress->step * KNNWB_SPLIT_PROGRESS_UNIT +
                              MIN(done, total) * (KNNWB_SPLIT_PROGRESS_UNIT - 1) / total);
}

static gboolean knnwb_split_run_job(const KnnwbSplitRun *run, const KnnwbSelectJob *job,
                                    GError **error)
{
  char message[512] = "";
  KnnwbSelectJob shown = *job;
  if (run->progress != NULL) {
    shown.progress = knnwb_split_job_progress;
    shown.progress_data = (void *)run;
  }
  return knnwb_knn_status_to_error(run->select(&shown, message, sizeof message), message,
                                   run->backend, error);
}

/* Candidates of a's rows among b's (b NULL: a against itself, self pairs excluded) into *a_lists
 * (allocated here) and, for a pair, of b's rows among a's into b_lists (b->count empty rows, kc
 * wide, given: the window of the lists that go back to b's owner). a_bounds/b_bounds (NULL: none):
 * the rows' starting thresholds (knnwb_split_bounds), so the lists hold only pairs that beat them
 * (the rest padded with -1). a's lists come without exact distances (NaN): the caller merges them
 * and computes those of the candidates that stayed (knnwb_split_fill_distances) while b's rows
 * are present, about half of them at two ranks. */
static gboolean knnwb_split_select(const KnnwbSplitRun *run, const KnnwbSplitSide *a,
                                   const KnnwbSplitSide *b, const float *a_bounds,
                                   const float *b_bounds, KnnwbSplitLists *a_lists,
                                   KnnwbSplitLists *b_lists, GError **error)
{
  const size_t kc = run->kc;
  if (!knnwb_split_lists_init(a_lists, a->count, kc, error))
    return FALSE;
  KnnwbSelectJob job;
  if (b == NULL) {
    const size_t valid = knnwb_split_valid(a);
    if (valid < 2)
      return TRUE;
    knnwb_split_fill_job(run, &job, a, a, MIN(kc, valid - 1), a_lists);
    job.self = 1;
    if (!knnwb_split_run_job(run, &job, error))
      return FALSE;
    a_lists->kc = job.kc; /* the job's stride; knnwb_split_finish and the merge read it */
    knnwb_split_finish_as(run, a, a, a_lists, FALSE);
    return TRUE;
  }
  const size_t valid_a = knnwb_split_valid(a), valid_b = knnwb_split_valid(b);
  if (valid_a == 0 || valid_b == 0)
    return TRUE;
  if (run->two_sided) {
    /* One pass over the tiles gives both sides (the CPU backend pads short lists with -1). */
    knnwb_split_fill_job(run, &job, a, b, kc, a_lists);
    job.query_bounds = a_bounds;
    job.reference_bounds = b_bounds;
    job.out_reference_index = b_lists->index;
    job.out_reference_score = b_lists->score;
    job.query_sqnorms = a->rows->sqnorms ? a->rows->sqnorms + a->first : NULL;
    job.query_invalid = a->rows->invalid ? a->rows->invalid + a->first : NULL;
    if (!knnwb_split_run_job(run, &job, error))
      return FALSE;
  } else {
    /* Other backends select for query rows only: the pair as two panels (b's narrower lists
     * are widened into b_lists). */
    knnwb_split_fill_job(run, &job, a, b, MIN(kc, valid_b), a_lists);
    job.query_bounds = a_bounds;
    if (!knnwb_split_run_job(run, &job, error))
      return FALSE;
    a_lists->kc = job.kc;
    KnnwbSplitLists narrow;
    if (!knnwb_split_lists_init(&narrow, b->count, kc, error))
      return FALSE;
    knnwb_split_fill_job(run, &job, b, a, MIN(kc, valid_a), &narrow);
    job.query_bounds = b_bounds;
    gboolean ok = knnwb_split_run_job(run, &job, error);
    narrow.kc = job.kc;
    if (ok) {
      knnwb_split_finish(run, b, a, &narrow);
      knnwb_split_merge(b_lists, &narrow, 0, run->threads);
    }
    knnwb_split_lists_clear(&narrow);
    knnwb_split_finish_as(run, a, b, a_lists, FALSE);
    return ok;
  }
  knnwb_split_finish_as(run, a, b, a_lists, FALSE);
  knnwb_split_finish(run, b, a, b_lists);
  return TRUE;
}

/* The exact distances left NaN in rows [0, a->count) of lists (a's rows, merged) of candidates
 * among b's rows, which are present now. */
typedef struct {
  const KnnwbSplitSide *a, *b;
  KnnwbSplitLists *lists;
} KnnwbSplitFill;

static void knnwb_split_fill_rows(size_t first, size_t last, void *user)
{
  KnnwbSplitFill *fill = user;
  const size_t kc = fill->lists->kc, lowest = fill->b->global;
  for (size_t t = first; t < last; t++)
    for (size_t c = 0; c < kc; c++) {
      const int64_t index = fill->lists->index[t * kc + c];
      double *distance = &fill->lists->distance[t * kc + c];
      if (index >= 0 && (size_t)index >= lowest && (size_t)index - lowest < fill->b->count &&
          isnan(*distance)) {
        const int64_t next = c + 1 < kc ? fill->lists->index[t * kc + c + 1] : -1;
        if (next >= 0 && (size_t)next >= lowest && (size_t)next - lowest < fill->b->count)
          knnwb_split_prefetch(fill->b->rows, fill->b->first + ((size_t)next - lowest));
        *distance = knnwb_prepared_distance(fill->a->rows, fill->a->first + t, fill->b->rows,
                                            fill->b->first + ((size_t)index - lowest));
      }
    }
}

static void knnwb_split_fill_distances(const KnnwbSplitRun *run, const KnnwbSplitSide *a,
                                       const KnnwbSplitSide *b, KnnwbSplitLists *lists)
{
  KnnwbSplitFill fill = {a, b, lists};
  knnwb_parallel_for(run->threads, a->count, 64, knnwb_split_fill_rows, &fill);
}

/* ---- The run -----------------------------------------------------------------------------------
 */

/* Row-wise finite check of a block, naming the row by its number in the whole matrix. */
static gboolean knnwb_split_check_finite(const KnnwbMatrix *block, size_t first_row, GError **error)
{
  const size_t d = block->n_cols;
  for (size_t i = 0; i < block->n_rows; i++)
    for (size_t j = 0; j < d; j++) {
      const float value = block->values[i * d + j];
      if (isfinite(value))
        continue;
      const char *label = knnwb_matrix_row_label(block, i);
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                  "row %zu%s%s%s, column %zu (both counted from 0) holds %s: remove or impute "
                  "missing values first",
                  first_row + i, label ? " (" : "", label ? label : "", label ? ")" : "", j,
                  isnan(value) ? "NaN" : "an infinite value");
      return FALSE;
    }
  return TRUE;
}

static int64_t knnwb_split_double_bits(double value)
{
  int64_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits; /* for value >= 0 the order of the bits is the order of the values */
}

static double knnwb_split_bits_double(int64_t bits)
{
  double value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

/*
 * The shared frame of the run (euclidean: column means and scale of the reference rows; manhattan:
 * the scale of every row): the same on every rank. Column sums are added per block, then over the
 * blocks in rank order.
 */
static gboolean knnwb_split_frame(const KnnwbKnnGroup *group, const KnnwbMatrix *query,
                                  const KnnwbMatrix *reference, size_t n_reference,
                                  KnnwbMetric metric, KnnwbPrepared *frame, GError **error)
{
  memset(frame, 0, sizeof *frame);
  const size_t d = reference->n_cols, ranks = (size_t)group->size;
  if (metric == KNNWB_METRIC_MANHATTAN) {
    int64_t exponent = MAX(knnwb_prepare_manhattan_exponent(reference),
                           query ? knnwb_prepare_manhattan_exponent(query) : 0);
    if (!group->reduce(group, &exponent, 1, KNNWB_GROUP_MAX, error))
      return FALSE;
    frame->scale_exponent = (int)exponent;
    return TRUE;
  }
  if (metric != KNNWB_METRIC_EUCLIDEAN)
    return TRUE;
  g_autofree double *sums = g_new0(double, MAX(d, (size_t)1));
  g_autofree double *all = g_new0(double, MAX(ranks * d, (size_t)1));
  for (size_t i = 0; i < reference->n_rows; i++)
    for (size_t j = 0; j < d; j++)
      sums[j] += reference->values[i * d + j];
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree size_t *bytes = g_new(size_t, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  for (size_t r = 0; r < ranks; r++) {
    send[r] = sums;
    bytes[r] = d * sizeof(double);
    receive[r] = all + r * d;
  }
  if (!group->exchange(group, send, bytes, (void *const *)receive, bytes, error))
    return FALSE;
  frame->column_mean = g_new0(double, MAX(d, (size_t)1));
  for (size_t j = 0; j < d; j++) {
    for (size_t r = 0; r < ranks; r++)
      frame->column_mean[j] += all[r * d + j];
    if (n_reference > 0)
      frame->column_mean[j] /= (double)n_reference;
  }
  double largest = 0.0;
  for (size_t i = 0; i < reference->n_rows; i++)
    for (size_t j = 0; j < d; j++)
      largest = MAX(largest, fabs((double)reference->values[i * d + j] - frame->column_mean[j]));
  int64_t bits = knnwb_split_double_bits(largest);
  if (!group->reduce(group, &bits, 1, KNNWB_GROUP_MAX, error))
    return FALSE;
  largest = knnwb_split_bits_double(bits);
  frame->scale_exponent = largest > 0.0 ? ilogb(largest) : 0;
  return TRUE;
}

/* Refines the own rows listed (rows: local numbers, NULL = all count from 0) from their
 * candidates; uncertified local rows are appended to *left. */
typedef struct {
  const KnnwbPrepared *query, *reference;
  gboolean self;
  size_t k, available, first, reference_first;
  const int64_t *rows;
  const KnnwbSplitLists *lists;
  KnnwbNeighbors *result;
  unsigned char *uncertified;
} KnnwbSplitRefine;

/* The distances left NaN (candidates of the own reference block, knnwb_split_finish_as) of list
 * t (own row i), as knnwb_refine_row would want them: those of the k best by score (the list is
 * sorted), whose largest, kth, bounds the k-th exact distance from above, then of the others whose
 * lower bound does not exceed kth. The rest become +inf: each is farther than the k-th, so it
 * could not be among the k kept, and the certificate reads the worst score and the k-th distance
 * only: the output is what computing them all would give, with about k distances a row instead of
 * kc. */
static void knnwb_split_complete_row(const KnnwbSplitRefine *refine, size_t i, size_t t)
{
  const size_t kc = refine->lists->kc, first = refine->reference_first;
  const int64_t self_index = refine->self ? (int64_t)(refine->first + i) : -1;
  const int64_t *index = refine->lists->index + t * kc;
  const float *score = refine->lists->score + t * kc;
  double *distance = refine->lists->distance + t * kc;
  double kth = -INFINITY;
  size_t seen = 0;
  for (size_t c = 0; c < kc; c++) {
    if (index[c] < 0 || index[c] == self_index)
      continue;
    const gboolean best = seen++ < refine->k;
    if (isnan(distance[c]) && (size_t)index[c] >= first &&
        (size_t)index[c] - first < refine->reference->n) {
      if (!best && knnwb_refine_lower_bound(refine->query, i, refine->reference, score[c]) > kth) {
        distance[c] = INFINITY;
        continue;
      }
      if (c + 1 < kc && index[c + 1] >= 0 && (size_t)index[c + 1] >= first &&
          (size_t)index[c + 1] - first < refine->reference->n)
        knnwb_split_prefetch(refine->reference, (size_t)index[c + 1] - first);
      distance[c] =
          knnwb_prepared_distance(refine->query, i, refine->reference, (size_t)index[c] - first);
    }
    if (best)
      kth = MAX(kth, distance[c]);
  }
}

static void knnwb_split_refine_rows(size_t first, size_t last, void *user)
{
  KnnwbSplitRefine *refine = user;
  const size_t k = refine->k, kc = refine->lists->kc;
  for (size_t t = first; t < last; t++) {
    const size_t i = refine->rows ? (size_t)refine->rows[t] : t;
    int64_t *out_index = refine->result->indices + i * k;
    double *out_distance = refine->result->distances + i * k;
    refine->uncertified[t] = 0;
    if (refine->query->invalid != NULL && refine->query->invalid[i]) {
      for (size_t r = 0; r < k; r++) {
        out_index[r] = -1;
        out_distance[r] = INFINITY;
      }
      refine->result->n_found[i] = 0;
      continue;
    }
    knnwb_split_complete_row(refine, i, t);
    gboolean ok = knnwb_refine_row(
        refine->query, i, refine->reference, refine->self ? (int64_t)(refine->first + i) : -1,
        refine->lists->index + t * kc, refine->lists->score + t * kc,
        refine->lists->distance + t * kc, kc, refine->available, k, out_index, out_distance);
    refine->result->n_found[i] = (int32_t)k;
    refine->uncertified[t] = ok ? 0 : 1;
  }
}

static void knnwb_split_refine(const KnnwbSplitRun *run, KnnwbSplitRefine *refine, size_t count,
                               GArray *left)
{
  refine->uncertified = g_malloc0(MAX(count, (size_t)1));
  knnwb_parallel_for(run->threads, count, 256, knnwb_split_refine_rows, refine);
  for (size_t t = 0; t < count; t++)
    if (refine->uncertified[t]) {
      int64_t i = refine->rows ? refine->rows[t] : (int64_t)t;
      g_array_append_val(left, i);
    }
  g_clear_pointer(&refine->uncertified, g_free);
}

/*
 * Each row's starting threshold for the next step: the kc-th best score its lists (sorted by
 * knnwb_split_merge) hold so far, +inf while they hold fewer than kc.
 *
 * Why dropping the pairs that do not beat it changes no output. Say row i holds kc candidates, the
 * worst scoring T, when a step starts, and the step's job leaves out a pair (i, j) with score
 * s >= T. The merges after it only replace candidates by better ones (by (score, index)), so the
 * worst candidate row i finally keeps, W, satisfies W <= T <= s: every pair left out scores at or
 * above the final worst kept, which is all the certificate (knnwb_refine_row: the bound on
 * everything outside the list from the worst listed score) and the re-selection assume, as for
 * the pairs a job's own cuts drop. Would (i, j) have entered the merged list? Only by beating its
 * worst by (score, index), i.e. with s < T, or s == T and a lower index than the candidate at T;
 * that tie can drop a pair one process would have kept among its kc screen candidates. The
 * candidates are a screen, not the answer: refine computes exact distances, and where the kept
 * candidates certify, the k nearest by (exact distance, index) are the same whichever of equally
 * scored pairs were kept; where they do not, the row is re-selected with more candidates, as in
 * one process. So the lists stay one process's lists, byte for byte (tested with many tied
 * scores and distances against one process and the double oracle: test_distributed_group's
 * split-thresholds-ties).
 */
static void knnwb_split_bounds(const KnnwbSplitLists *lists, float *bounds)
{
  const size_t kc = lists->kc;
  for (size_t t = 0; t < lists->rows; t++)
    bounds[t] =
        kc > 0 && lists->index[t * kc + kc - 1] >= 0 ? lists->score[t * kc + kc - 1] : INFINITY;
}

/* A debug line with the seconds since *since (then reset) and the process's CPU seconds so far:
 * where a rank's time goes (on a shared machine the CPU time is the steadier figure). */
static void knnwb_split_mark(const KnnwbKnnGroup *group, const char *what, gint64 *since)
{
  const gint64 now = g_get_monotonic_time();
  struct timespec cpu = {0};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  g_debug("knnwb: rank %d: %s %.3f s (CPU time so far %.3f s)", group->rank, what,
          (double)(now - *since) / 1e6, (double)cpu.tv_sec + (double)cpu.tv_nsec / 1e9);
  *since = now;
}

/* Rank 0 shows the job's progress in steps of the schedule: done of total steps are over (the
 * next job's tiles count towards step done). */
static void knnwb_split_progress(const KnnwbSplitRun *run, uint64_t done, uint64_t total)
{
  if (run->progress == NULL)
    return;
  run->progress->steps = total;
  run->progress->step = done;
  if (done == 0) /* a pass begins */
    run->progress->shown = 0;
  knnwb_split_show(run, done * KNNWB_SPLIT_PROGRESS_UNIT);
}

static gboolean knnwb_split_cancelled(const KnnwbSplitRun *run, GError **error)
{
  if (run->options->cancel != NULL && *run->options->cancel) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled");
    return TRUE;
  }
  return FALSE;
}

/*
 * The pair met from both ends (s = R/2, R even) when the ranks share their blocks: the lower
 * rank's rows are cut into chunks that the two ranks take from a counter in the lower rank's part
 * of the window, so a rank slowed by other work on its core takes fewer of them (as one process's
 * threads share tiles), instead of each scoring a fixed half. The lower rank scores a chunk of its
 * rows against the other block (its chunk's candidates merged into lists, the other block's rows'
 * into back), the higher rank its block against a chunk (its rows' candidates merged into lists,
 * the chunk rows' written into their window of back: every chunk once). Each job starts from the
 * rows' current kc-th best scores: lists improve chunk by chunk, and the lower rank's back lists
 * tighten the other block's bounds (any kc-th best of a subset of a row's final candidates is at
 * or above its final kc-th, all knnwb_split_bounds needs). Which rank takes which chunk varies from
 * run to run; the lists do not: each row keeps the kc best of all pairs by (score, index) whatever
 * the order, and the refinement makes them exact as for the fixed halves. Local, apart from the
 * counter. mine/other: this rank's block and the other's (whole).
 */
static gboolean knnwb_split_pair_chunks(const KnnwbSplitRun *run, const KnnwbSplitSide *mine,
                                        const KnnwbSplitSide *other, gboolean lower, int *counter,
                                        float *bounds, float *other_bounds, KnnwbSplitLists *lists,
                                        KnnwbSplitLists *back, GError **error)
{
  const size_t kc = run->kc, cut = lower ? mine->count : other->count;
  const size_t chunks = MIN(cut, (size_t)KNNWB_SPLIT_PAIR_CHUNKS);
  KnnwbSplitLists a_lists = {0}, b_lists = {0};
  /* The lower rank's room for the other block's lists of one chunk (emptied for each). */
  char *b_room =
      lower ? g_try_malloc(MAX(knnwb_split_lists_bytes(other->count, kc), (size_t)1)) : NULL;
  if (lower && b_room == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate candidate lists for %zu rows x %zu candidates", other->count, kc);
    return FALSE;
  }
  /* Tests: this rank comes late, so the other one takes every chunk. */
  const char *late = g_getenv("KNNWB_SPLIT_LATE_RANK");
  if (late != NULL && atoi(late) == run->group->rank)
    g_usleep(50000);
  gboolean ok = TRUE;
  size_t taken = 0;
  for (size_t c; ok && (c = (size_t)__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED)) < chunks;) {
    const size_t c0 = chunks == KNNWB_SPLIT_PAIR_CHUNKS ? cut * knnwb_split_pair_eighths[c] / 8
                                                        : cut * c / chunks,
                 c1 = chunks == KNNWB_SPLIT_PAIR_CHUNKS ? cut * knnwb_split_pair_eighths[c + 1] / 8
                                                        : cut * (c + 1) / chunks;
    taken++;
    if (knnwb_split_cancelled(run, error)) {
      ok = FALSE;
      break;
    }
    knnwb_split_bounds(lists, bounds);
    if (lower) {
      const KnnwbSplitSide a = {mine->rows, mine->first + c0, c1 - c0, mine->global + c0};
      ok = knnwb_split_lists_init_in(&b_lists, other->count, kc, b_room, error) &&
           knnwb_split_select(run, &a, other, bounds + c0, other_bounds, &a_lists, &b_lists, error);
      if (ok) {
        KnnwbSplitLists rows = knnwb_split_lists_window(lists, c0, c1 - c0);
        knnwb_split_merge(lists, &a_lists, c0, run->threads);
        knnwb_split_fill_distances(run, &a, other, &rows);
        knnwb_split_merge(back, &b_lists, 0, run->threads);
        for (size_t t = 0; t < other->count && kc > 0; t++)
          if (back->index[t * kc + kc - 1] >= 0)
            other_bounds[t] = MIN(other_bounds[t], back->score[t * kc + kc - 1]);
      }
    } else {
      const KnnwbSplitSide b = {other->rows, other->first + c0, c1 - c0, other->global + c0};
      KnnwbSplitLists window = knnwb_split_lists_window(back, c0, c1 - c0);
      ok = knnwb_split_select(run, mine, &b, bounds, other_bounds + c0, &a_lists, &window, error);
      if (ok) {
        knnwb_split_merge(lists, &a_lists, 0, run->threads);
        knnwb_split_fill_distances(run, mine, &b, lists);
      }
    }
    knnwb_split_lists_clear(&a_lists);
  }
  g_free(b_room);
  g_debug("knnwb: rank %d: %zu of the pair's %zu chunks taken", run->group->rank, taken, chunks);
  return ok;
}

/* The first pass of a self graph: every pair of blocks once (see the top of the file). Collective.
 */
static gboolean knnwb_split_self_pass(const KnnwbSplitRun *run, const KnnwbPrepared *own,
                                      const unsigned char *own_invalid,
                                      const KnnwbSplitBlocks *blocks, KnnwbSplitLists *lists,
                                      GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  const int R = group->size, r = group->rank;
  size_t first, m;
  knnwb_split_rows_of(blocks, r, &first, &m);
  const KnnwbSplitLayout layout = knnwb_split_layout(own->metric, own->scale_exponent, own->d);
  const uint64_t steps = (uint64_t)R / 2 + 1;
  KnnwbSplitSide mine = {own, 0, m, first};
  knnwb_split_progress(run, 0, steps);
  KnnwbSplitLists a_lists = {0}, b_lists = {0};
  gint64 since = g_get_monotonic_time();
  /* Ranks that share memory (one host) publish their prepared block once, before step 0, and read
   * the others' in place: no copy per step (two at the window: in and out) and no fetch to wait
   * for; else each step fetches its block. Collective; FALSE with *error unset: not shared. */
  g_autofree void **parts = g_new0(void *, (size_t)R);
  gboolean shared = FALSE;
  if (group->share_begin != NULL && R > 1) {
    shared =
        group->share_begin(group, KNNWB_SPLIT_HEADER + knnwb_split_bytes(&layout, m), parts, error);
    if (!shared && error != NULL && *error != NULL)
      return FALSE;
    if (shared) {
      *(int *)parts[r] = 0; /* the chunk counter of the pair this rank's block is cut for */
      knnwb_split_pack(&layout, own, own_invalid, NULL, m, (char *)parts[r] + KNNWB_SPLIT_HEADER);
      if (!group->share_sync(group, error)) {
        group->share_end(group, NULL);
        return FALSE;
      }
    }
  }
  gboolean ok = knnwb_split_select(run, &mine, NULL, NULL, NULL, &a_lists, &b_lists, error);
  if (ok)
    knnwb_split_merge(lists, &a_lists, 0, run->threads);
  knnwb_split_lists_clear(&a_lists);
  knnwb_split_lists_clear(&b_lists);
  knnwb_split_mark(group, "step 0 (own block) selected and merged in", &since);
  if (!group->agree(group, ok, error)) {
    if (shared)
      group->share_end(group, NULL);
    return FALSE;
  }
  knnwb_split_mark(group, "step 0 waited for the other ranks", &since);
  knnwb_split_progress(run, 1, steps);
  const size_t largest = blocks->largest;
  const size_t visiting_bytes = MAX(knnwb_split_bytes(&layout, largest), (size_t)1);
  /* The room of a fetched block, which then takes the lists coming back (shared: these only). */
  char *visiting = shared ? NULL : g_try_malloc(visiting_bytes);
  /* The own rows' thresholds, and the visiting rows' (they travel with their block). */
  float *bounds = g_try_new(float, MAX(m, (size_t)1));
  float *visiting_bounds = g_try_new(float, MAX(largest, (size_t)1));
  ok = (shared || visiting != NULL) && bounds != NULL && visiting_bounds != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate room for a visiting block of %zu rows", largest);
  if (!group->agree(group, ok, error)) {
    if (shared)
      group->share_end(group, NULL);
    g_free(visiting);
    g_free(bounds);
    g_free(visiting_bounds);
    return FALSE;
  }
  for (int s = 1; 2 * s <= R && ok; s++) {
    const int q = (r + s) % R, p = (r - s + R) % R;
    size_t q_first, q_rows;
    knnwb_split_rows_of(blocks, q, &q_first, &q_rows);
    KnnwbPrepared view;
    knnwb_split_bounds(lists, bounds);
    if (shared)
      knnwb_split_view(&layout, own, (char *)parts[q] + KNNWB_SPLIT_HEADER, q_rows, &view);
    if ((!shared && !knnwb_split_fetch(group, &layout, own, own_invalid, p, q, q_rows, visiting,
                                       &view, error)) ||
        !knnwb_split_shift(group, p, bounds, m * sizeof(float), q, visiting_bounds,
                           q_rows * sizeof(float), error)) {
      ok = FALSE;
      break;
    }
    knnwb_split_mark(
        group, shared ? "block in shared memory, bounds fetched in" : "block fetched in", &since);
    /* The pair (mine, q's); at s = R/2 it is met from both ends, so each scores half (with shared
     * blocks: as many chunks as it takes first). */
    KnnwbSplitSide a = mine, b = {&view, 0, q_rows, q_first};
    /* KNNWB_SPLIT_CHUNKS=0 (benchmarks): the fixed halves even with shared blocks. */
    const gboolean chunked = shared && 2 * s == R && g_strcmp0(g_getenv("KNNWB_SPLIT_CHUNKS"), "0");
    if (2 * s == R && !chunked) {
      if (r < q) {
        a.count = m / 2;
      } else {
        b.first = q_rows / 2;
        b.count = q_rows - q_rows / 2;
        b.global = q_first + b.first;
      }
    }
    /* b's candidates are written straight into the lists of q's whole block, which go back to q;
     * the lists of this block's rows that p computed arrive in the visiting block's room once it
     * is no longer needed (when they fit there). */
    KnnwbSplitLists back = {0}, from_p = {0};
    ok =
        !knnwb_split_cancelled(run, error) && knnwb_split_lists_init(&back, q_rows, run->kc, error);
    if (ok && chunked) {
      const int lower = MIN(r, q);
      ok = knnwb_split_pair_chunks(run, &a, &b, r == lower, (int *)parts[lower], bounds,
                                   visiting_bounds, lists, &back, error);
    } else if (ok) {
      KnnwbSplitLists window = knnwb_split_lists_window(&back, b.first, b.count);
      ok = knnwb_split_select(run, &a, &b, bounds + a.first, visiting_bounds + b.first, &a_lists,
                              &window, error);
    }
    if (ok && !chunked) {
      knnwb_split_merge(lists, &a_lists, 0, run->threads);
      knnwb_split_fill_distances(run, &a, &b, lists);
    }
    knnwb_split_lists_clear(&a_lists);
    knnwb_split_mark(group, "pair selected and merged in", &since);
    /* The last step has read the shared blocks (every rank reaches this, failed or not): the
     * window is free for the lists that go back. */
    if (shared && 2 * (s + 1) > R) {
      shared = FALSE;
      if (!group->share_end(group, ok ? error : NULL))
        ok = FALSE;
    }
    const gboolean fits = visiting != NULL && knnwb_split_lists_bytes(m, run->kc) <= visiting_bytes;
    ok = ok && knnwb_split_lists_init_in(&from_p, m, run->kc, fits ? visiting : NULL, error);
    if (group->agree(group, ok, error)) {
      ok = knnwb_split_shift(group, q, back.buffer, knnwb_split_lists_bytes(q_rows, run->kc), p,
                             from_p.buffer, knnwb_split_lists_bytes(m, run->kc), error);
      if (ok)
        knnwb_split_merge(lists, &from_p, 0, run->threads);
    } else {
      ok = FALSE;
    }
    knnwb_split_lists_clear(&back);
    knnwb_split_lists_clear(&from_p);
    knnwb_split_mark(group, "visiting rows' candidates returned and merged in", &since);
    knnwb_split_progress(run, (uint64_t)s + 1, steps);
  }
  /* A fetch or bounds shift that failed left the loop early (transport errors: on every rank). */
  if (shared && !group->share_end(group, ok ? error : NULL))
    ok = FALSE;
  g_free(visiting);
  g_free(bounds);
  g_free(visiting_bounds);
  return ok;
}

/* The first pass of a query run: the own query block against every reference block, its own
 * first. Collective. */
static gboolean knnwb_split_query_pass(const KnnwbSplitRun *run, const KnnwbPrepared *query,
                                       size_t query_first, const KnnwbPrepared *reference,
                                       const unsigned char *reference_invalid,
                                       const KnnwbSplitBlocks *blocks, KnnwbSplitLists *lists,
                                       GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  const int R = group->size, r = group->rank;
  knnwb_split_progress(run, 0, (uint64_t)R);
  const KnnwbSplitLayout layout =
      knnwb_split_layout(reference->metric, reference->scale_exponent, reference->d);
  const size_t largest = blocks->largest;
  char *visiting = g_try_malloc(MAX(knnwb_split_bytes(&layout, largest), (size_t)1));
  gboolean ok = visiting != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate room for a visiting block of %zu rows", largest);
  float *bounds = g_try_new(float, MAX(query->n, (size_t)1));
  if (ok && bounds == NULL) {
    ok = FALSE;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the thresholds of %zu rows", query->n);
  }
  ok = group->agree(group, ok, error);
  KnnwbSplitSide mine = {query, 0, query->n, query_first};
  for (int s = 0; s < R && ok; s++) {
    const int q = (r + s) % R, p = (r - s + R) % R;
    size_t q_first, q_rows;
    knnwb_split_rows_of(blocks, q, &q_first, &q_rows);
    KnnwbPrepared view;
    const KnnwbPrepared *block = reference;
    if (s > 0) {
      if (!knnwb_split_fetch(group, &layout, reference, reference_invalid, p, q, q_rows, visiting,
                             &view, error)) {
        ok = FALSE;
        break;
      }
      block = &view;
    }
    KnnwbSplitSide b = {block, 0, q_rows, q_first};
    KnnwbSplitLists found = {0};
    const size_t valid = knnwb_split_valid(&b);
    gboolean local = !knnwb_split_cancelled(run, error) &&
                     knnwb_split_lists_init(&found, mine.count, run->kc, error);
    if (local && valid > 0 && mine.count > 0) {
      KnnwbSelectJob job;
      knnwb_split_fill_job(run, &job, &mine, &b, MIN(run->kc, valid), &found);
      if (s > 0) { /* the first step has nothing to start from */
        knnwb_split_bounds(lists, bounds);
        job.query_bounds = bounds;
      }
      local = knnwb_split_run_job(run, &job, error);
      found.kc = job.kc;
      if (local) {
        knnwb_split_finish_as(run, &mine, &b, &found, FALSE);
        knnwb_split_merge(lists, &found, 0, run->threads);
        if (s > 0) /* the own reference block's are computed by the refinement */
          knnwb_split_fill_distances(run, &mine, &b, lists);
      }
    }
    knnwb_split_lists_clear(&found);
    ok = group->agree(group, local, error);
    knnwb_split_progress(run, (uint64_t)s + 1, (uint64_t)R);
  }
  g_free(visiting);
  g_free(bounds);
  return ok;
}

/*
 * Re-selects the uncertified own rows (local numbers in *left, which is replaced by those still
 * uncertified) with kc candidates: every rank's rows go to every rank, each selects them against
 * its own reference block, and the candidates come back. Collective: every rank calls it while
 * any rank has rows left, in batches whose candidate lists fit the memory budget.
 */
static gboolean knnwb_split_retry(const KnnwbSplitRun *run, const KnnwbPrepared *query,
                                  const unsigned char *query_invalid, size_t query_first,
                                  const KnnwbPrepared *reference, size_t reference_first,
                                  gboolean self, size_t k, size_t available, KnnwbNeighbors *result,
                                  GArray **left, GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  const size_t ranks = (size_t)group->size, kc = run->kc;
  const KnnwbSplitLayout layout =
      knnwb_split_layout(query->metric, query->scale_exponent, query->d);
  const size_t budget = run->options->memory_bytes ? run->options->memory_bytes : (size_t)256 << 20;
  const size_t batch =
      MAX((size_t)1, budget / (kc * (sizeof(int64_t) + sizeof(float) + sizeof(double))) / ranks);
  GArray *rows = *left;
  *left = g_array_new(FALSE, FALSE, sizeof(int64_t));
  int64_t rounds = ((int64_t)rows->len + (int64_t)batch - 1) / (int64_t)batch;
  gboolean ok = group->reduce(group, &rounds, 1, KNNWB_GROUP_MAX, error);
  g_autofree const void **send = g_new0(const void *, ranks);
  g_autofree size_t *send_bytes = g_new0(size_t, ranks);
  g_autofree void **receive = g_new0(void *, ranks);
  g_autofree size_t *receive_bytes = g_new0(size_t, ranks);
  g_autofree int64_t *counts = g_new0(int64_t, ranks);
  g_autofree int64_t *all_counts = g_new0(int64_t, ranks);
  KnnwbSplitSide own_reference = {reference, 0, reference->n, reference_first};
  for (int64_t round = 0; ok && round < rounds; round++) {
    const size_t at = MIN((size_t)round * batch, (size_t)rows->len);
    const size_t count = MIN(batch, (size_t)rows->len - at);
    const int64_t *mine = (const int64_t *)(void *)rows->data + at;
    /* Every rank learns every rank's count, then the rows. */
    for (size_t r = 0; r < ranks; r++) {
      counts[r] = (int64_t)count;
      send[r] = &counts[r];
      send_bytes[r] = sizeof(int64_t);
      receive[r] = &all_counts[r];
      receive_bytes[r] = sizeof(int64_t);
    }
    if (!(ok = group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes,
                               error)))
      break;
    char *packed = g_malloc(MAX(knnwb_split_bytes(&layout, count), (size_t)1));
    knnwb_split_pack(&layout, query, query_invalid, mine, count, packed);
    char **gathered = g_new0(char *, ranks);
    for (size_t r = 0; r < ranks; r++) {
      gathered[r] = g_malloc(MAX(knnwb_split_bytes(&layout, (size_t)all_counts[r]), (size_t)1));
      send[r] = packed;
      send_bytes[r] = knnwb_split_bytes(&layout, count);
      receive[r] = gathered[r];
      receive_bytes[r] = knnwb_split_bytes(&layout, (size_t)all_counts[r]);
    }
    ok = group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
    g_free(packed);
    /* Each rank's rows against this rank's reference block. */
    KnnwbSplitLists *found = g_new0(KnnwbSplitLists, ranks);
    const size_t valid = knnwb_split_valid(&own_reference);
    gboolean local = ok;
    for (size_t r = 0; r < ranks && local; r++) {
      KnnwbPrepared view;
      knnwb_split_view(&layout, query, gathered[r], (size_t)all_counts[r], &view);
      KnnwbSplitSide theirs = {&view, 0, view.n, 0};
      local = knnwb_split_lists_init(&found[r], view.n, kc, error);
      if (local && valid > 0 && view.n > 0) {
        KnnwbSelectJob job;
        knnwb_split_fill_job(run, &job, &theirs, &own_reference, MIN(kc, valid), &found[r]);
        local = knnwb_split_run_job(run, &job, error);
        KnnwbSplitLists narrow = found[r];
        narrow.kc = job.kc;
        if (local) {
          /* The own rows' distances are left to the refinement (which needs about k of them). */
          knnwb_split_finish_as(run, &theirs, &own_reference, &narrow, r != (size_t)group->rank);
          /* Widen in place from the back: row t's job.kc entries move to t * kc. */
          for (size_t t = view.n; t-- > 0;)
            for (size_t c = kc; c-- > 0;) {
              const gboolean kept = c < job.kc;
              const size_t from = t * job.kc + c, to = t * kc + c;
              found[r].index[to] = kept ? narrow.index[from] : -1;
              found[r].distance[to] = kept ? narrow.distance[from] : NAN;
              found[r].score[to] = kept ? narrow.score[from] : INFINITY;
            }
        }
      }
    }
    /* The candidates go back to the rows' owners. */
    KnnwbSplitLists *back = g_new0(KnnwbSplitLists, ranks);
    for (size_t r = 0; r < ranks && local; r++)
      local = knnwb_split_lists_init(&back[r], count, kc, error);
    if (ok && !group->agree(group, local, error))
      ok = FALSE;
    if (ok) {
      for (size_t r = 0; r < ranks; r++) {
        send[r] = found[r].buffer;
        send_bytes[r] = knnwb_split_lists_bytes((size_t)all_counts[r], kc);
        receive[r] = back[r].buffer;
        receive_bytes[r] = knnwb_split_lists_bytes(count, kc);
      }
      ok = group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
    }
    if (ok) {
      KnnwbSplitLists merged;
      local = knnwb_split_lists_init(&merged, count, kc, error);
      for (size_t r = 0; r < ranks && local; r++)
        knnwb_split_merge(&merged, &back[r], 0, run->threads);
      if (local) {
        KnnwbSplitRefine refine = {query,       reference,       self, k,       available,
                                   query_first, reference_first, mine, &merged, result,
                                   NULL};
        knnwb_split_refine(run, &refine, count, *left);
        knnwb_split_lists_clear(&merged);
      }
      ok = group->agree(group, local, error);
    }
    for (size_t r = 0; r < ranks; r++) {
      g_free(gathered[r]);
      knnwb_split_lists_clear(&found[r]);
      knnwb_split_lists_clear(&back[r]);
    }
    g_free(gathered);
    g_free(found);
    g_free(back);
  }
  g_array_free(rows, TRUE);
  return ok;
}

gboolean knnwb_knn_split_run(const KnnwbMatrix *query_block, const KnnwbMatrix *reference_block,
                             const KnnwbPrepared *given, const KnnwbKnnOptions *options,
                             const KnnwbKnnGroup *group, KnnwbNeighbors **result_out,
                             GError **error)
{
  const gboolean self = reference_block == NULL;
  if (self)
    reference_block = query_block;
  *result_out = NULL;
  const size_t k = options->k;
  int threads = knnwb_thread_count(options->n_threads);
  if (options->n_threads <= 0)
    threads = MAX(1, threads / MAX(1, group->local_size)); /* the host's cores are shared */
  KnnwbPrepared frame = {0}, query = {0}, reference_storage = {0};
  KnnwbPrepared *reference = self ? &query : &reference_storage;
  g_autoptr(KnnwbNeighbors) result = NULL;
  g_autofree unsigned char *reference_invalid = NULL, *query_invalid = NULL;
  g_autofree char *backend = NULL;
  KnnwbSelectFunc select = NULL;
  KnnwbSplitLists lists = {0};
  KnnwbSplitBlocks blocks = {0}, reference_blocks = {0};
  GArray *left = NULL;
  KnnwbScreen screen = KNNWB_SCREEN_FP32;
  gboolean ok = TRUE, nothing_to_do = FALSE;
  gint64 since = g_get_monotonic_time();

  /* Sizes: every rank's block, in rank order. */
  int64_t columns[4] = {(int64_t)query_block->n_cols, -(int64_t)query_block->n_cols,
                        (int64_t)reference_block->n_cols, -(int64_t)reference_block->n_cols};
  if (!knnwb_split_blocks_init(group, query_block->n_rows, &blocks, error) ||
      !knnwb_split_blocks_init(group, reference_block->n_rows, &reference_blocks, error) ||
      !group->reduce(group, columns, 4, KNNWB_GROUP_MAX, error)) {
    ok = FALSE;
    goto out;
  }
  const size_t n = blocks.n, n_reference = reference_blocks.n;
  size_t first, count, reference_first, reference_count;
  knnwb_split_rows_of(&blocks, group->rank, &first, &count);
  knnwb_split_rows_of(&reference_blocks, group->rank, &reference_first, &reference_count);
  if (given != NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "a prepared reference cannot be split over ranks");
    ok = FALSE;
  } else if (columns[0] != -columns[1] || columns[2] != -columns[3]) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the ranks' blocks have different numbers of columns");
    ok = FALSE;
  }
  ok = ok && knnwb_knn_check_sizes(n, n_reference, query_block->n_cols, reference_block->n_cols,
                                   count, self ? 0 : reference_count, self, options, error);
  ok = ok && knnwb_split_check_finite(query_block, first, error);
  ok = ok && (self || knnwb_split_check_finite(reference_block, reference_first, error));
  if (!group->agree(group, ok, error)) {
    ok = FALSE;
    goto out;
  }

  knnwb_split_mark(group, "checks", &since);
  /* The shared frame, then each block prepared in it. */
  if (!knnwb_split_frame(group, self ? NULL : query_block, reference_block, n_reference,
                         options->metric, &frame, error))
    goto out;
  const KnnwbPrepared *like =
      options->metric == KNNWB_METRIC_EUCLIDEAN || options->metric == KNNWB_METRIC_MANHATTAN
          ? &frame
          : NULL;
  ok = TRUE;
  if (!self)
    ok = knnwb_prepared_init_rows(&reference_storage, reference_block, reference_first,
                                  options->metric, options->drop_degenerate, "reference", threads,
                                  like, error);
  ok = ok && knnwb_prepared_init_rows(
                 &query, query_block, first, options->metric, options->drop_degenerate,
                 self ? (options->data_name ? options->data_name : "data") : "query", threads,
                 self ? like : reference, error);
  if (!group->agree(group, ok, error)) {
    ok = FALSE;
    goto out;
  }
  /* What the bound and the candidate counts need of every row. */
  int64_t valid = (int64_t)(reference->n - reference->n_invalid);
  int64_t norms[2] = {knnwb_split_double_bits(query.max_norm),
                      knnwb_split_double_bits(reference->max_norm)};
  if (!group->reduce(group, &valid, 1, KNNWB_GROUP_SUM, error) ||
      !group->reduce(group, norms, 2, KNNWB_GROUP_MAX, error)) {
    ok = FALSE;
    goto out;
  }
  query.max_norm = knnwb_split_bits_double(norms[0]);
  reference->max_norm = knnwb_split_bits_double(norms[1]);
  const size_t available = self ? (valid > 0 ? (size_t)valid - 1 : 0) : (size_t)valid;
  /* Flags of every row, for what travels (the prepared sets have none when no row is invalid). */
  reference_invalid = g_malloc0(MAX(reference->n, (size_t)1));
  if (reference->invalid != NULL)
    memcpy(reference_invalid, reference->invalid, reference->n);
  query_invalid = g_malloc0(MAX(query.n, (size_t)1));
  if (query.invalid != NULL)
    memcpy(query_invalid, query.invalid, query.n);
  result = knnwb_knn_result_new(first, count, k, error);
  ok = result != NULL;
  if (ok && (n == 0 || (self && valid == 0))) {
    result->backend_used = g_strdup("none");
    nothing_to_do = TRUE;
  } else if (ok && k > available) {
    g_set_error(
        error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
        "k = %zu but each row has only %zu %s row%s to choose neighbours from; use k <= %zu", k,
        available, self ? "other" : "reference", available == 1 ? "" : "s", available);
    ok = FALSE;
  } else if (ok) {
    ok = knnwb_knn_choose_backend(options, &select, &backend, error) &&
         knnwb_screen_resolve(options->screen, backend, options->metric, k, &screen, error);
  }
  if (!group->agree(group, ok, error)) {
    ok = FALSE;
    goto out;
  }
  if (nothing_to_do)
    goto gather;
  knnwb_prepared_set_screen(&query, reference, screen);
  result->backend_used = g_strdup_printf("%s x %d ranks (split)", backend, group->size);
  result->screen_used = screen;
  /* KNNWB_SPLIT_PANELS=1 (tests) gives the CPU the two-panel path of the other backends. */
  KnnwbSplitRun run = {options,
                       group,
                       select,
                       backend,
                       threads,
                       MIN(available, knnwb_screen_candidates(screen, k)),
                       select == knnwb_cpu_select && g_getenv("KNNWB_SPLIT_PANELS") == NULL,
                       NULL};
  KnnwbSplitProgress progress = {0};
  if (group->rank == 0 && options->progress != NULL)
    run.progress = &progress;

  ok = knnwb_split_lists_init(&lists, count, run.kc, error);
  if (!group->agree(group, ok, error)) {
    ok = FALSE;
    goto out;
  }
  knnwb_split_mark(group, "frame, prepare and allocation", &since);
  if (self)
    ok = knnwb_split_self_pass(&run, &query, reference_invalid, &blocks, &lists, error);
  else
    ok = knnwb_split_query_pass(&run, &query, first, reference, reference_invalid,
                                &reference_blocks, &lists, error);
  if (!ok)
    goto out;
  since = g_get_monotonic_time();
  left = g_array_new(FALSE, FALSE, sizeof(int64_t));
  KnnwbSplitRefine refine = {&query,          reference, self,   k,      available, first,
                             reference_first, NULL,      &lists, result, NULL};
  knnwb_split_refine(&run, &refine, count, left);
  knnwb_split_lists_clear(&lists);
  knnwb_split_mark(group, "refine", &since);
  /* Rows the bound cannot certify: four times the candidates, until every rank is done. */
  const size_t total = self ? available + 1 : available;
  /* The ranks finish their passes at different times: the first to finish waits here in the
   * group's sleeping poll, not in the reduction's busy one (which would take a core from the
   * others when ranks share cores). */
  if (!group->agree(group, TRUE, error)) {
    ok = FALSE;
    goto out;
  }
  for (;;) {
    int64_t pending = (int64_t)left->len;
    if (!group->reduce(group, &pending, 1, KNNWB_GROUP_SUM, error)) {
      ok = FALSE;
      goto out;
    }
    if (pending == 0)
      break;
    if (run.kc == total) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "internal error: certification failed");
      ok = FALSE;
      goto out;
    }
    run.kc = MIN(total, run.kc * 4);
    result->n_reselected += left->len;
    g_debug("knnwb: rank %d: %u row(s) re-selected with %zu candidates", group->rank, left->len,
            run.kc);
    ok = knnwb_split_retry(&run, &query, query_invalid, first, reference, reference_first, self, k,
                           available, result, &left, error);
    if (!ok)
      goto out;
  }
  {
    int64_t reselected = (int64_t)result->n_reselected;
    ok = group->reduce(group, &reselected, 1, KNNWB_GROUP_SUM, error);
    result->n_reselected = (size_t)reselected;
  }
  knnwb_split_mark(group, "re-selection", &since);
gather:
  if (ok && !options->group_own_rows) {
    KnnwbNeighbors *all =
        knnwb_knn_group_gather_blocks(group, result, blocks.n, blocks.first, blocks.count, error);
    ok = all != NULL;
    if (ok) {
      knnwb_neighbors_free(result);
      result = all;
    }
  }
out:
  knnwb_split_lists_clear(&lists);
  knnwb_split_blocks_clear(&blocks);
  knnwb_split_blocks_clear(&reference_blocks);
  if (left != NULL)
    g_array_free(left, TRUE);
  knnwb_prepared_clear(&query);
  knnwb_prepared_clear(&reference_storage);
  g_free(frame.column_mean);
  if (ok)
    *result_out = g_steal_pointer(&result);
  return ok;
}
