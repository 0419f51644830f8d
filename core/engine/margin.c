/*
 * The margin planner: how many candidates past k a first round under a half-precision screen
 * collects. The fixed margin (screen.c: k + max(20, k/4) for FP16) was measured on correlation
 * rows, where the certificate's window is 2^-9 wide in distance. Euclidean's window scales with
 * (|q| + max |r|)^2, so on rows far from their centroid (clusters) it holds far more rows: on
 * 2,000,000 x 50 rows of 50 Gaussian clusters at k = 30 every row but 273 failed its certificate
 * and was selected again with 200 candidates, in panels of 67,108 rows that each score every
 * reference row (one H200: 4.9 s first round, 10.9 s re-selection). Counting, for a few sample
 * rows, the rows inside their window tells the first round how many candidates the data needs.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/knn_group.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "engine/engine_internal.h"

/* Sample rows are scored against blocks of reference rows, every sample row per block, so that the
 * reference rows stream from memory once. Each sample row keeps its `keep` smallest distances
 * (a max-heap per thread, merged under a lock): its k-th, and every row inside its window unless
 * more than keep - 1 are (then the count saturates, above any kc the planner may take).
 * Distances from the float rows the screen scores: an estimate of the exact ones, close enough
 * to count the window's rows. Manhattan (screened in FP32 only) is not sampled.
 * The heaps end with the keep smallest distances whichever thread offered which, so the choice
 * does not depend on the thread count. */
#define KNNWB_MARGIN_BLOCK 4096
/* Reference rows scored at once against every sample row (their dots fit in L1). */
#define KNNWB_MARGIN_CHUNK 64

/* Vectors of sample rows: 4 lanes everywhere (SSE2, NEON), 8 with AVX2, 16 with AVX-512F, chosen
 * at run time (on 1,000,000 x 128 rows, one thread of an AVX-512 CPU: 0.26, 0.14 and 0.08 s). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KNNWB_MARGIN_X86 1
#endif
typedef float KnnwbMarginVec4 __attribute__((vector_size(4 * sizeof(float))));
typedef float KnnwbMarginVec8 __attribute__((vector_size(8 * sizeof(float))));
typedef float KnnwbMarginVec16 __attribute__((vector_size(16 * sizeof(float))));

typedef struct {
  const KnnwbPrepared *reference;
  size_t reference_first; /* the reference's first row in the whole run (split ranks' blocks) */
  gboolean self;
  KnnwbScoreKind kind;
  size_t keep, n_sample, n_blocks;
  const size_t *ids; /* n_sample: each sample row's number in the whole run (self: skipped) */
  const double *qn;  /* their squared norms (euclidean) */
  /* Their scored rows in groups of `width` (the last padded with zero rows), each group transposed
   * (d x width): one load gives one element of every row of a group. */
  const float *panel;
  size_t width, n_groups;
  GMutex lock;
  double *heap; /* n_sample x keep: each sample row's smallest distances, a max-heap */
  size_t *size; /* of each heap */
  const volatile gint *cancel;
  gint cancelled;    /* a thread saw the flag raised and left its blocks */
  gssize next_block; /* the first block no thread has taken (knnwb_margin_team) */
} KnnwbMarginSample;

/* One lane of W sample rows: l += their element e times b[e] (an unaligned load, folded). */
#define KNNWB_MARGIN_LANE(VEC, W, l, e)                                                            \
  do {                                                                                             \
    VEC x_;                                                                                        \
    memcpy(&x_, a + (e) * (W), sizeof x_);                                                         \
    l += x_ * b[e];                                                                                \
  } while (0)

/*
 * The dot of every sample row with reference rows rows[0, n) (stride d), into
 * dots[r * n_groups * W + s]: each sample row's dot is, bit for bit, what one pair at a time
 * computes as
 *   lane[u] += a[t + u] * b[t + u] over whole groups of eight (u < 8, t in order),
 *   sum = 0, sum += a[t] * b[t] over the rest in order, then sum += lane[0], ..., lane[7],
 * here with the eight lanes in eight vectors that each hold one lane of W sample rows (one
 * broadcast of b[t] serves W rows, and the lanes sum vector by vector without a shuffle). Float
 * operations in that order, no fused multiply-adds (-ffp-contract=off): the widths and the blocking
 * give the same distances, so the choice does not depend on the CPU either.
 */
#define KNNWB_MARGIN_DOTS(NAME, VEC, W, TARGET)                                                    \
  TARGET static void NAME(const float *panel, size_t n_groups, const float *rows, size_t n,        \
                          size_t d, float *dots)                                                   \
  {                                                                                                \
    for (size_t r = 0; r < n; r++) {                                                               \
      const float *b = rows + r * d;                                                               \
      for (size_t g = 0; g < n_groups; g++) {                                                      \
        const float *a = panel + g * d * W;                                                        \
        VEC l0 = {0}, l1 = {0}, l2 = {0}, l3 = {0}, l4 = {0}, l5 = {0}, l6 = {0}, l7 = {0};        \
        VEC sum = {0};                                                                             \
        size_t t = 0;                                                                              \
        for (; t + 8 <= d; t += 8) {                                                               \
          KNNWB_MARGIN_LANE(VEC, W, l0, t);                                                        \
          KNNWB_MARGIN_LANE(VEC, W, l1, t + 1);                                                    \
          KNNWB_MARGIN_LANE(VEC, W, l2, t + 2);                                                    \
          KNNWB_MARGIN_LANE(VEC, W, l3, t + 3);                                                    \
          KNNWB_MARGIN_LANE(VEC, W, l4, t + 4);                                                    \
          KNNWB_MARGIN_LANE(VEC, W, l5, t + 5);                                                    \
          KNNWB_MARGIN_LANE(VEC, W, l6, t + 6);                                                    \
          KNNWB_MARGIN_LANE(VEC, W, l7, t + 7);                                                    \
        }                                                                                          \
        for (; t < d; t++)                                                                         \
          KNNWB_MARGIN_LANE(VEC, W, sum, t);                                                       \
        sum += l0;                                                                                 \
        sum += l1;                                                                                 \
        sum += l2;                                                                                 \
        sum += l3;                                                                                 \
        sum += l4;                                                                                 \
        sum += l5;                                                                                 \
        sum += l6;                                                                                 \
        sum += l7;                                                                                 \
        memcpy(dots + (r * n_groups + g) * W, &sum, sizeof sum);                                   \
      }                                                                                            \
    }                                                                                              \
  }

KNNWB_MARGIN_DOTS(knnwb_margin_dots4, KnnwbMarginVec4, 4, )
#ifdef KNNWB_MARGIN_X86
KNNWB_MARGIN_DOTS(knnwb_margin_dots8, KnnwbMarginVec8, 8, __attribute__((target("avx2"))))
KNNWB_MARGIN_DOTS(knnwb_margin_dots16, KnnwbMarginVec16, 16, __attribute__((target("avx512f"))))
#endif

/* The vector width for this CPU, at most KNNWB_MARGIN_VECTOR (4 or 8) when set: tests compare the
 * kernels. */
static size_t knnwb_margin_width(void)
{
  return knnwb_vector_lanes(sizeof(float), "KNNWB_MARGIN_VECTOR");
}

/* Reference rows rows[0, n) (stride d) against every sample row of panel (n_groups groups of
 * width), into dots (n x n_groups x width). */
static void knnwb_margin_dots(const float *panel, size_t n_groups, size_t width, const float *rows,
                              size_t n, size_t d, float *dots)
{
#ifdef KNNWB_MARGIN_X86
  if (width == 16) {
    knnwb_margin_dots16(panel, n_groups, rows, n, d, dots);
    return;
  }
  if (width == 8) {
    knnwb_margin_dots8(panel, n_groups, rows, n, d, dots);
    return;
  }
#endif
  knnwb_margin_dots4(panel, n_groups, rows, n, d, dots);
}

/* The scored query rows rows[0, n_sample) in groups of width, transposed (see KnnwbMarginSample);
 * their number in *n_groups. */
static float *knnwb_margin_panel(const KnnwbPrepared *query, const size_t *rows, size_t n_sample,
                                 size_t width, size_t *n_groups)
{
  const size_t d = query->d;
  *n_groups = (n_sample + width - 1) / width;
  float *panel = g_new0(float, *n_groups *d *width);
  g_autofree float *scratch = query->scored == NULL ? g_new(float, MAX(d, (size_t)1)) : NULL;
  for (size_t s = 0; s < n_sample; s++) {
    const float *row = knnwb_prepared_scored_at(query, rows[s], 1, scratch);
    for (size_t t = 0; t < d; t++)
      panel[(s / width * d + t) * width + s % width] = row[t];
  }
  return panel;
}

void knnwb_margin_score(const KnnwbPrepared *query, const size_t *rows, size_t n_sample,
                        const KnnwbPrepared *reference, size_t first, size_t n, float *dots)
{
  const size_t width = knnwb_margin_width();
  size_t n_groups;
  g_autofree float *panel = knnwb_margin_panel(query, rows, n_sample, width, &n_groups);
  g_autofree float *all = g_new(float, n *n_groups *width);
  g_autofree float *scratch =
      reference->scored == NULL ? g_new(float, MAX(n * reference->d, (size_t)1)) : NULL;
  knnwb_margin_dots(panel, n_groups, width, knnwb_prepared_scored_at(reference, first, n, scratch),
                    n, reference->d, all);
  for (size_t r = 0; r < n; r++)
    for (size_t s = 0; s < n_sample; s++)
      dots[r * n_sample + s] = all[r * n_groups * width + s];
}

/* One thread's heaps, and per sample row the bar a value must pass to be offered to a full heap:
 * +inf while the heap fills, then its largest distance; for euclidean, whose value is the squared
 * distance y before its root, that largest squared and rounded up past the rounding of the square
 * (a y at or above it has a rounded root at or above the largest, which the heap would refuse).
 * Past n_sample (the last vector's padding) the bar is -inf. */
typedef struct {
  double *heap;
  size_t *size;
  double *bar;
  size_t full; /* heaps full */
} KnnwbMarginHeaps;

typedef double KnnwbMarginVec2d __attribute__((vector_size(2 * sizeof(double))));
typedef float KnnwbMarginVec2 __attribute__((vector_size(2 * sizeof(float))));
typedef int64_t KnnwbMarginMask2 __attribute__((vector_size(2 * sizeof(int64_t))));

/* Offers dist to the max-heap of the keep smallest (size of them so far). O(log keep). */
static void knnwb_margin_offer(double *heap, size_t *size, size_t keep, double dist)
{
  size_t at;
  if (*size < keep) {
    for (at = (*size)++; at > 0 && heap[(at - 1) / 2] < dist; at = (at - 1) / 2)
      heap[at] = heap[(at - 1) / 2];
    heap[at] = dist;
    return;
  }
  if (!(dist < heap[0]))
    return;
  for (at = 0;;) { /* sift the new root down */
    size_t child = 2 * at + 1;
    if (child >= keep)
      break;
    if (child + 1 < keep && heap[child + 1] > heap[child])
      child++;
    if (!(heap[child] > dist))
      break;
    heap[at] = heap[child];
    at = child;
  }
  heap[at] = dist;
}

/* Sample row s's distance to reference row j (their dot, rn = |row j|^2 for euclidean) into its
 * heap when below the bar: the distance of the one-pair-at-a-time planner, bit for bit. */
static void knnwb_margin_take_one(const KnnwbMarginSample *m, KnnwbMarginHeaps *h, size_t s,
                                  size_t j, double dot, double rn)
{
  const size_t keep = m->keep;
  const gboolean l2 = m->kind == KNNWB_SCORE_L2;
  const double v = l2 ? MAX(0.0, (m->qn[s] + rn - 2.0 * dot) * m->reference->score_scale)
                      : 1.0 - (m->kind == KNNWB_SCORE_ABS_DOT ? fabs(dot) : dot);
  if ((!(v < h->bar[s]) && h->size[s] == keep) || (m->self && m->ids[s] == m->reference_first + j))
    return;
  const size_t before = h->size[s];
  knnwb_margin_offer(h->heap + s * keep, &h->size[s], keep, l2 ? sqrt(v) : v);
  if (h->size[s] == keep) {
    const double worst = h->heap[s * keep];
    h->full += before < keep;
    h->bar[s] = l2 ? worst * worst * (1.0 + 0x1p-50) : worst;
  }
}

/* Reference row j's dots with every sample row (padded to whole vectors) into the heaps. Once
 * every heap is full, two sample rows at a time: their values before the clamp at 0 (euclidean) or
 * as 1 - dot and 1 + dot (one of which is 1 - |dot|), computed as knnwb_margin_take_one does,
 * against their bars; the row goes on only when one is below (a few rows in a hundred). */
static void knnwb_margin_take(const KnnwbMarginSample *m, KnnwbMarginHeaps *h, size_t j,
                              const float *dots)
{
  const KnnwbPrepared *r = m->reference;
  if (r->invalid && r->invalid[j])
    return;
  const gboolean l2 = m->kind == KNNWB_SCORE_L2, absolute = m->kind == KNNWB_SCORE_ABS_DOT;
  const double rn = l2 ? (double)r->sqnorms[j] : 0.0;
  if (h->full == m->n_sample) {
    KnnwbMarginMask2 any = {0};
    for (size_t s = 0; s < m->n_sample; s += 2) {
      KnnwbMarginVec2 pair;
      KnnwbMarginVec2d qn, bar;
      memcpy(&pair, dots + s, sizeof pair);
      memcpy(&qn, m->qn + s, sizeof qn);
      memcpy(&bar, h->bar + s, sizeof bar);
      const KnnwbMarginVec2d dot = __builtin_convertvector(pair, KnnwbMarginVec2d);
      any |= (l2 ? (qn + rn - 2.0 * dot) * r->score_scale : 1.0 - dot) < bar;
      if (absolute)
        any |= 1.0 + dot < bar;
    }
    int64_t below[2];
    memcpy(below, &any, sizeof below);
    if ((below[0] | below[1]) == 0)
      return;
  }
  for (size_t s = 0; s < m->n_sample; s++)
    knnwb_margin_take_one(m, h, s, j, dots[s], rn);
}

/* Reference blocks taken in turns of KNNWB_MARGIN_TURN from a shared counter (a thread the busy
 * host holds back leaves its blocks to the others: with static shares the planner waited for the
 * slowest while the rows uploaded beside it), each against every sample row, then into the shared
 * heaps once per thread (merged per block of 4,096 rows under the lock, 375 merges of 32 heaps
 * took most of the planner's 0.135 s on 1,533,876 rows and 16 threads). */
#define KNNWB_MARGIN_TURN 4
static void knnwb_margin_team(int thread, int n_threads, void *user)
{
  (void)thread;
  (void)n_threads;
  KnnwbMarginSample *m = user;
  const size_t keep = m->keep, n_sample = m->n_sample, d = m->reference->d;
  g_autofree double *heap = g_new(double, n_sample *keep);
  g_autofree size_t *size = g_new0(size_t, n_sample);
  const size_t stride = m->n_groups * m->width;
  g_autofree double *bar = g_new(double, stride);
  for (size_t s = 0; s < stride; s++)
    bar[s] = s < n_sample ? INFINITY : -INFINITY;
  g_autofree float *dots = g_new(float, KNNWB_MARGIN_CHUNK *stride);
  /* a chunk of derived reference rows (a split run's packed block) */
  g_autofree float *scratch =
      m->reference->scored == NULL ? g_new(float, KNNWB_MARGIN_CHUNK *MAX(d, (size_t)1)) : NULL;
  KnnwbMarginHeaps h = {heap, size, bar, 0};
  for (;;) {
    const size_t first = (size_t)g_atomic_pointer_add(&m->next_block, KNNWB_MARGIN_TURN);
    if (first >= m->n_blocks)
      break;
    const size_t end = MIN(m->reference->n, (first + KNNWB_MARGIN_TURN) * KNNWB_MARGIN_BLOCK);
    for (size_t j0 = first * KNNWB_MARGIN_BLOCK; j0 < end; j0 += KNNWB_MARGIN_CHUNK) {
      if (j0 % KNNWB_MARGIN_BLOCK == 0 &&
          (g_atomic_int_get(&m->cancelled) ||
           (m->cancel != NULL && g_atomic_int_get(m->cancel) != 0))) {
        g_atomic_int_set(&m->cancelled, 1);
        return; /* the planner's answer is kc now: these heaps are not wanted */
      }
      const size_t n = MIN((size_t)KNNWB_MARGIN_CHUNK, end - j0);
      knnwb_margin_dots(m->panel, m->n_groups, m->width,
                        knnwb_prepared_scored_at(m->reference, j0, n, scratch), n, d, dots);
      for (size_t r = 0; r < n; r++)
        knnwb_margin_take(m, &h, j0 + r, dots + r * stride);
    }
  }
  g_mutex_lock(&m->lock);
  for (size_t s = 0; s < n_sample; s++)
    for (size_t t = 0; t < size[s]; t++)
      knnwb_margin_offer(m->heap + s * keep, &m->size[s], keep, heap[s * keep + t]);
  g_mutex_unlock(&m->lock);
}

static int knnwb_margin_compare_distance(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int knnwb_margin_compare(const void *a, const void *b)
{
  const size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

void knnwb_margin_heap_add(double *heap, size_t *size, size_t keep, const double *values,
                           size_t count)
{
  for (size_t t = 0; t < count; t++)
    knnwb_margin_offer(heap, size, keep, values[t]);
}

KnnwbMarginPlan knnwb_margin_plan(size_t k, size_t kc, size_t available, size_t max_kc)
{
  const size_t most = MIN(MIN(4 * kc, available), MAX(max_kc, kc));
  return (KnnwbMarginPlan){k, kc, most, MAX(k, MAX(most, kc) + 1)};
}

void knnwb_margin_sample_rows(size_t row0, size_t n_rows, size_t n_sample, size_t *rows)
{
  for (size_t s = 0; s < n_sample; s++)
    rows[s] = row0 + (2 * s + 1) * n_rows / (2 * n_sample); /* spread evenly */
}

gboolean knnwb_margin_wanted(KnnwbScreen screen, KnnwbMetric metric, size_t rows)
{
  const char *pilot = g_getenv("KNNWB_MARGIN_PILOT");
  if (g_strcmp0(pilot, "0") == 0 || knnwb_metric_score_kind(metric) == KNNWB_SCORE_L1)
    return FALSE;
  if (g_strcmp0(pilot, "always") == 0) /* tests: every screen, any row count */
    return rows > 0;
  return (screen == KNNWB_SCREEN_FP16 || screen == KNNWB_SCREEN_TF32) &&
         rows >= KNNWB_MARGIN_MIN_ROWS;
}

gboolean knnwb_margin_heaps(const KnnwbPrepared *samples, const size_t *rows, const size_t *ids,
                            size_t n_sample, const KnnwbPrepared *reference, size_t reference_first,
                            gboolean self, size_t keep, int threads, const volatile gint *cancel,
                            double *heap, size_t *size)
{
  memset(size, 0, n_sample * sizeof(size_t));
  if (n_sample == 0)
    return cancel == NULL || g_atomic_int_get(cancel) == 0;
  KnnwbMarginSample m = {.reference = reference,
                         .reference_first = reference_first,
                         .self = self,
                         .kind = knnwb_metric_score_kind(reference->metric),
                         .keep = keep,
                         .n_sample = n_sample,
                         .ids = ids,
                         .heap = heap,
                         .size = size,
                         .cancel = cancel};
  m.width = knnwb_margin_width();
  g_autofree float *panel = knnwb_margin_panel(samples, rows, n_sample, m.width, &m.n_groups);
  m.panel = panel;
  g_autofree double *qn = g_new0(double, m.n_groups *m.width);
  for (size_t s = 0; s < n_sample && samples->sqnorms != NULL; s++)
    qn[s] = samples->sqnorms[rows[s]];
  m.qn = qn;
  g_mutex_init(&m.lock);
  m.n_blocks = (reference->n + KNNWB_MARGIN_BLOCK - 1) / KNNWB_MARGIN_BLOCK;
  const size_t turns = (m.n_blocks + KNNWB_MARGIN_TURN - 1) / KNNWB_MARGIN_TURN;
  if (turns > 0)
    knnwb_team_run((int)MIN((size_t)knnwb_thread_count(threads), turns), knnwb_margin_team, &m);
  g_mutex_clear(&m.lock);
  return !g_atomic_int_get(&m.cancelled);
}

size_t knnwb_margin_decide(const KnnwbPrepared *query, const size_t *rows, size_t n_sample,
                           const KnnwbPrepared *reference, const KnnwbMarginPlan *plan,
                           double *heap, const size_t *size, size_t *needed)
{
  const size_t k = plan->k;
  /* Each sample row's count of rows inside its window plus one (0 without a k-th). */
  for (size_t s = 0; s < n_sample; s++) {
    double *sorted = heap + s * plan->keep;
    const size_t i = rows[s];
    needed[s] = 0;
    if (size[s] < k || (query->invalid && query->invalid[i]))
      continue;
    qsort(sorted, size[s], sizeof(double), knnwb_margin_compare_distance);
    const double limit = knnwb_refine_window_limit(query, i, reference, sorted[k - 1]);
    size_t inside = 0;
    while (inside < size[s] && sorted[inside] <= limit)
      inside++;
    needed[s] = inside + 1; /* the last candidate must lie past the window */
  }
  return knnwb_margin_rule(plan, needed, n_sample);
}

size_t knnwb_margin_rule(const KnnwbMarginPlan *plan, const size_t *needed, size_t n_sample)
{
  const size_t kc = plan->kc;
  if (n_sample == 0)
    return kc;
  g_autofree size_t *sorted = g_memdup2(needed, n_sample * sizeof(size_t));
  qsort(sorted, n_sample, sizeof(size_t), knnwb_margin_compare);
  size_t over = 0;
  for (size_t s = 0; s < n_sample; s++)
    over += sorted[s] > kc;
  if (over * 8 <= n_sample)
    return kc; /* the certify loop re-selects those few rows more cheaply */
  const size_t want = (sorted[(7 * n_sample + 7) / 8 - 1] + 7) / 8 * 8;
  return MAX(kc, MIN(want, plan->most));
}

size_t knnwb_margin_choose(const KnnwbPrepared *query, const KnnwbPrepared *reference,
                           gboolean self, size_t row0, size_t n_rows, size_t k, size_t kc,
                           size_t available, size_t max_kc, size_t n_sample, int threads,
                           const volatile gint *cancel, size_t *needed)
{
  n_sample = MIN(n_sample, n_rows);
  if (n_sample == 0 || k == 0 || knnwb_metric_score_kind(query->metric) == KNNWB_SCORE_L1)
    return kc;
  const KnnwbMarginPlan plan = knnwb_margin_plan(k, kc, available, max_kc);
  g_autofree size_t *rows = g_new(size_t, n_sample);
  g_autofree size_t *own = needed == NULL ? g_new(size_t, n_sample) : NULL;
  g_autofree double *heap = g_new(double, n_sample *plan.keep);
  g_autofree size_t *size = g_new0(size_t, n_sample);
  knnwb_margin_sample_rows(row0, n_rows, n_sample, rows);
  if (!knnwb_margin_heaps(query, rows, rows, n_sample, reference, 0, self, plan.keep, threads,
                          cancel, heap, size)) {
    if (needed != NULL)
      memset(needed, 0, n_sample * sizeof(size_t));
    return kc;
  }
  return knnwb_margin_decide(query, rows, n_sample, reference, &plan, heap, size,
                             own ? own : needed);
}

gboolean knnwb_margin_too_wide(const KnnwbPrepared *query, const KnnwbPrepared *reference,
                               gboolean self, size_t n_rows, size_t k, size_t kc, size_t available,
                               int threads, const volatile gint *cancel)
{
  const size_t n_sample = MIN((size_t)KNNWB_MARGIN_SAMPLE, n_rows);
  const size_t most = MIN(KNNWB_MARGIN_WIDE * kc, available);
  if ((query->screen != KNNWB_SCREEN_FP16 && query->screen != KNNWB_SCREEN_TF32) ||
      n_rows < KNNWB_MARGIN_MIN_ROWS || k == 0 || most <= 4 * kc ||
      knnwb_metric_score_kind(query->metric) == KNNWB_SCORE_L1)
    return FALSE;
  const KnnwbMarginPlan plan = {k, kc, most, most + 1};
  g_autofree size_t *rows = g_new(size_t, n_sample);
  g_autofree size_t *needed = g_new(size_t, n_sample);
  g_autofree double *heap = g_new(double, n_sample *plan.keep);
  g_autofree size_t *size = g_new0(size_t, n_sample);
  knnwb_margin_sample_rows(0, n_rows, n_sample, rows);
  if (!knnwb_margin_heaps(query, rows, rows, n_sample, reference, 0, self, plan.keep, threads,
                          cancel, heap, size))
    return FALSE;
  (void)knnwb_margin_decide(query, rows, n_sample, reference, &plan, heap, size, needed);
  size_t over = 0;
  for (size_t s = 0; s < n_sample; s++)
    over += needed[s] > most;
  return over * 8 > n_sample;
}

gboolean knnwb_margin_rule_group(const KnnwbKnnGroup *group, const KnnwbMarginPlan *plan,
                                 const size_t *needed, size_t count, size_t *chosen, GError **error)
{
  const size_t ranks = (size_t)group->size;
  g_autofree int64_t *counts = g_new(int64_t, ranks);
  g_autofree size_t *bytes = g_new(size_t, ranks);
  if (!knnwb_knn_group_gather_values(group, (int64_t)count, counts, error))
    return FALSE;
  size_t total = 0;
  for (size_t r = 0; r < ranks; r++) {
    bytes[r] = (size_t)counts[r] * sizeof(size_t);
    total += (size_t)counts[r];
  }
  g_autofree size_t *all = g_new(size_t, MAX(total, (size_t)1));
  if (!knnwb_knn_group_gather_bytes(group, needed, bytes, all, error))
    return FALSE;
  *chosen = knnwb_margin_rule(plan, all, total);
  return TRUE;
}
