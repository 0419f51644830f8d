/* The nearest row in another group through cells of the rows (k-means clusters with a radius each,
 * partition_build.c): the question the exact MST's Borůvka rounds ask (core/engine/knn_outside.c)
 * for the rows whose kNN lists hold only their own component. Once a round's components are whole
 * clusters, most rows ask it, and the tile search compares each with every row. Here a row visits
 * the cells nearest it first and stops at the first cell whose nearest possible member lies beyond
 * its best answer so far; a cell whose rows all share the row's group is passed over whole. Where
 * the cells tell little (rows without clusters), a pilot of a few rows says so and the tile search
 * answers the rest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "partition/partition.h"
#include "partition/partition_internal.h"

/* Rows a cell holds on average: finer cells bound more tightly, but every asking row measures its
 * distance to every centroid, and every row is assigned to one once. */
#define KNNWB_OUTSIDE_CELL_ROWS ((size_t)128)
#define KNNWB_OUTSIDE_MIN_CELLS ((size_t)16)
#define KNNWB_OUTSIDE_MAX_CELLS ((size_t)256)
/* Sample rows a cell for the k-means (the partitioned search's choice takes 32 Ki rows whatever
 * the count: 0.12 of 0.16 s at 20,000 x 50 rows in 156 cells, two cores). */
#define KNNWB_OUTSIDE_SAMPLE_PER_CELL ((size_t)16)
/* Rows the pilot answers before the rest (evenly spread over the asking rows). */
#define KNNWB_OUTSIDE_PILOT ((size_t)128)
/* The cells answer the rest when the pilot's rows compared with at most this share of the rows
 * outside their groups: a pair here, even screened in float, costs several times a tile's float
 * product (200,000 x 50 in 50 clusters, two cores: see docs/performance-clustering.md). */
#define KNNWB_OUTSIDE_PAYING_SHARE 0.10
/* Runs in a row whose pilot found the cells do not pay, after which the cells answer no more
 * (the search's later rounds would pay for a pilot each: 128 rows a third of the rows each on
 * rows without clusters). */
#define KNNWB_OUTSIDE_DECLINES 2
/* Asking rows a thread takes at a time (their bound-space rows and products with the centroids). */
#define KNNWB_OUTSIDE_BATCH ((size_t)64)

struct KnnwbPartitionOutside {
  const KnnwbPrepared *prepared;
  KnnwbPartition p;  /* the cells, in the bound space of space's metric */
  KnnwbMatrix space; /* a view of prepared->exact: the rows the bounds are made from */
  const volatile gint *cancel;
  int32_t *cell_group; /* per cell: the group of all its rows, -1 for several */
  /* The rows cell by cell (place `at` holds row p.members[at]), as the float screen reads them: a
   * row's visits read whole cells, which scattered over the matrix cost a cache miss a row (most
   * of the time on 40,000 x 50). Under euclidean and manhattan the exact rows (exact_by_cell: the
   * screen's and the double sum's); under the pearson family and cosine the rows centred and
   * scaled to length 1 in float (unit_by_cell, knnwb_outside_unit_row), and the few pairs the
   * screen lets through take prepared's rows where they lie. The other is NULL. */
  float *exact_by_cell;
  float *unit_by_cell;
  double *reach_by_cell;  /* row p.members[at]'s reach */
  int32_t *group_by_cell; /* the run's group of row p.members[at] */
  int declined;           /* runs in a row whose pilot said the cells do not pay */
};

/* The bound space's metric for an engine metric: spearman's exact rows are ranks, whose
 * distance is pearson's; manhattan is bounded by the euclidean chord (|x|_1 >= |x|_2). */
static KnnwbMetric knnwb_outside_space_metric(KnnwbMetric metric)
{
  switch (metric) {
  case KNNWB_METRIC_SPEARMAN:
    return KNNWB_METRIC_PEARSON;
  case KNNWB_METRIC_MANHATTAN:
    return KNNWB_METRIC_EUCLIDEAN;
  default:
    return metric;
  }
}

static KnnwbPartitionMode knnwb_outside_mode(void)
{
  const char *v = g_getenv("KNNWB_OUTSIDE_CELLS");
  if (v == NULL)
    return KNNWB_PARTITION_AUTO;
  if (strcmp(v, "0") == 0 || strcmp(v, "off") == 0)
    return KNNWB_PARTITION_OFF;
  if (strcmp(v, "1") == 0 || strcmp(v, "on") == 0)
    return KNNWB_PARTITION_ON;
  return KNNWB_PARTITION_AUTO; /* ("pilot": the tests' pilot alone, see knnwb_outside_pilot_only) */
}

/* KNNWB_OUTSIDE_CELLS=pilot: the cells answer the pilot's rows and the tile search every other
 * (the tests' way through both paths in one run). */
static gboolean knnwb_outside_pilot_only(void)
{
  return g_strcmp0(g_getenv("KNNWB_OUTSIDE_CELLS"), "pilot") == 0;
}

gboolean knnwb_partition_outside_applies(const KnnwbPrepared *prepared, size_t n_asking)
{
  const KnnwbPartitionMode mode = knnwb_outside_mode();
  if (mode == KNNWB_PARTITION_OFF || prepared->n_invalid > 0 || prepared->n < 2 ||
      prepared->d == 0 || prepared->exact == NULL)
    return FALSE;
  if (mode == KNNWB_PARTITION_ON || knnwb_outside_pilot_only())
    return TRUE;
  return prepared->n >= KNNWB_OUTSIDE_MIN_ROWS && n_asking >= 2 * KNNWB_OUTSIDE_MAX_CELLS;
}

/* The cells of every row: k-means on an evenly spread sample, then every row to its nearest
 * centroid (the partitioned search's steps). FALSE: memory, cancel, fewer than two cells. */
static gboolean knnwb_outside_cells(KnnwbPartitionOutside *o, int threads)
{
  const size_t n = o->prepared->n, d = o->prepared->d;
  const size_t m = MIN(MAX(n / KNNWB_OUTSIDE_CELL_ROWS, KNNWB_OUTSIDE_MIN_CELLS),
                       MIN(KNNWB_OUTSIDE_MAX_CELLS, n / 2));
  /* A sample of KNNWB_OUTSIDE_SAMPLE_PER_CELL rows a cell: the centroids only place the cells
   * (their radii come from every row), and the k-means is most of the cells' cost. */
  const size_t s = MIN(knnwb_partition_sample_rows(n, d), m * KNNWB_OUTSIDE_SAMPLE_PER_CELL);
  KnnwbPartition *p = &o->p;
  memset(p, 0, sizeof *p);
  p->metric = knnwb_outside_space_metric(o->prepared->metric);
  p->n = n;
  p->d = d;
  p->threads = threads;
  if (m < 2)
    return FALSE;
  KnnwbPartitionBlock sample;
  if (!knnwb_partition_sample_init(&sample, &o->space, p->metric, s, m, threads))
    return FALSE;
  p->centroid = g_try_new(double, m *d);
  p->centroid_sq = g_try_new(double, m);
  int32_t *label = g_try_new(int32_t, s);
  gboolean ok = p->centroid != NULL && p->centroid_sq != NULL && label != NULL;
  if (ok) {
    knnwb_partition_kmeans(&sample, m, threads, p->centroid, p->centroid_sq, label);
    p->m = m;
    /* (k = 0: only empty cells are dropped) */
    ok = knnwb_partition_assign_all(p, &o->space, 0, o->cancel, NULL, NULL, 0);
  }
  g_free(label);
  knnwb_partition_block_clear(&sample);
  if (!ok)
    knnwb_partition_clear(p);
  return ok;
}

/* Whether metric's exact distance is 1 - r (or 1 - |r|) of a normalised dot product
 * (knnwb_pair_distance): the pearson family and cosine, screened through unit rows. */
static gboolean knnwb_outside_dot_metric(KnnwbMetric metric)
{
  return metric == KNNWB_METRIC_PEARSON || metric == KNNWB_METRIC_ABS_PEARSON ||
         metric == KNNWB_METRIC_SPEARMAN || metric == KNNWB_METRIC_COSINE;
}

/* Row x (d values, its statistics mean and squares as the engine's distance takes them) centred
 * and scaled to length 1, in float: out[j] = ((double)x[j] - mean) / sqrt(squares), rounded once.
 * Where the row's squares do not bound its centred values' own (squares too small to multiply,
 * zero or not finite, or the centred values' squares summing above it), out is NaN: a screen
 * with such a row is NaN and never passes a pair over. O(d). */
static void knnwb_outside_unit_row(const float *x, size_t d, double mean, double squares,
                                   float *out)
{
  double length = 0.0;
  if (squares > 0x1p-500 && squares < INFINITY) {
    const double scale = 1.0 / sqrt(squares);
    for (size_t j = 0; j < d; j++) {
      const double z = ((double)x[j] - mean) * scale;
      out[j] = (float)z;
      length += z * z;
    }
  }
  if (!(length > 0.0 && length <= 1.0 + 0x1p-20))
    for (size_t j = 0; j < d; j++)
      out[j] = NAN;
}

/* Row i of prepared as a unit row (knnwb_outside_unit_row). */
static void knnwb_outside_unit_of(const KnnwbPrepared *p, size_t i, float *out)
{
  knnwb_outside_unit_row(p->exact + i * p->d, p->d, p->mean != NULL ? p->mean[i] : 0.0,
                         p->sum_squares != NULL ? p->sum_squares[i] : 0.0, out);
}

/* Places [first, last) of the rows by cell made from prepared's. */
static void knnwb_outside_copy_rows(size_t first, size_t last, void *data)
{
  KnnwbPartitionOutside *o = data;
  const KnnwbPrepared *p = o->prepared;
  const size_t d = p->d;
  for (size_t at = first; at < last; at++) {
    const size_t i = (size_t)o->p.members[at];
    if (o->unit_by_cell != NULL)
      knnwb_outside_unit_of(p, i, o->unit_by_cell + at * d);
    else
      memcpy(o->exact_by_cell + at * d, p->exact + i * d, d * sizeof(float));
    o->reach_by_cell[at] = *knnwb_partition_reach(&o->p, i);
  }
}

/* The rows cell by cell (exact or unit rows, as the metric's screen reads them). FALSE: memory.
 * O(n d) on threads. */
static gboolean knnwb_outside_by_cell(KnnwbPartitionOutside *o)
{
  const KnnwbPrepared *p = o->prepared;
  const size_t n = p->n;
  float *rows = g_try_new(float, n * p->d);
  if (knnwb_outside_dot_metric(p->metric))
    o->unit_by_cell = rows;
  else
    o->exact_by_cell = rows;
  o->reach_by_cell = g_try_new(double, n);
  o->group_by_cell = g_try_new(int32_t, n);
  if (rows == NULL || o->reach_by_cell == NULL || o->group_by_cell == NULL)
    return FALSE;
  knnwb_parallel_for(o->p.threads, n, 4096, knnwb_outside_copy_rows, o);
  return TRUE;
}

KnnwbPartitionOutside *knnwb_partition_outside_new(const KnnwbPrepared *prepared,
                                                   const KnnwbKnnOptions *options, GError **error)
{
  g_return_val_if_fail(prepared->n_invalid == 0, NULL);
  const gint64 start = g_get_monotonic_time();
  KnnwbPartitionOutside *o = g_new0(KnnwbPartitionOutside, 1);
  o->prepared = prepared;
  o->cancel = options->cancel;
  o->space.n_rows = prepared->n;
  o->space.n_cols = prepared->d;
  o->space.values = (float *)prepared->exact; /* (read only: the bounds' rows) */
  o->space.values_borrowed = TRUE;
  const int threads = knnwb_thread_count(options->n_threads);
  if (!knnwb_outside_cells(o, threads) || (o->cell_group = g_try_new(int32_t, o->p.m)) == NULL ||
      !knnwb_outside_by_cell(o)) {
    if (options->cancel != NULL && g_atomic_int_get(options->cancel))
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED,
                  "cancelled while making the cells of the nearest-outside search");
    knnwb_partition_outside_free(o);
    return NULL;
  }
  g_debug("knnwb: nearest outside: %zu rows in %zu cells in %.3f s", prepared->n, o->p.m,
          (double)(g_get_monotonic_time() - start) / 1e6);
  return o;
}

void knnwb_partition_outside_free(KnnwbPartitionOutside *o)
{
  if (o == NULL)
    return;
  knnwb_partition_clear(&o->p);
  g_free(o->cell_group);
  g_free(o->exact_by_cell);
  g_free(o->unit_by_cell);
  g_free(o->reach_by_cell);
  g_free(o->group_by_cell);
  g_free(o);
}

/* One run: the asking rows' slots t answered into out_index[t] / out_distance[t], answered[t] set
 * as each is. */
typedef struct {
  const KnnwbPartitionOutside *o;
  const int32_t *group;
  const int64_t *rows;
  const int64_t *slots; /* the slots this pass answers */
  int64_t *out_index;
  double *out_distance;
  unsigned char *answered;
  gssize compared; /* pairs compared, screened or in double (added atomically) */
  gssize budget;   /* > 0: the pass stops once its rows computed more (the pilot's) */
  gint over;       /* the budget was spent */
  gint cancelled;
  gint failed; /* memory */
} KnnwbOutsideCellsRun;

/* A cell a row may visit: the chord to its centroid and to its nearest possible member (lower
 * bounds). */
typedef struct {
  double lower;
  double to_centroid;
  int32_t cell;
} KnnwbOutsideCell;

/* The float screen of a pair under euclidean (euclidean TRUE: the sum of squares) or manhattan
 * (the sum of absolute differences), eight lanes as the engine's exact sums, inline in the cloned
 * row loop below. Whatever the order, rounding and underflow, it is at most
 * (1 + knnwb_outside_screen_slack(d)) times the exact sum, plus d * 2^-148 where products fall
 * below float's normal range, or +inf; it is never used as a distance, only to pass over a pair
 * surely farther than the best so far. O(d). */
static KNNWB_ALWAYS_INLINE float knnwb_outside_screen(gboolean euclidean, const float *x,
                                                      const float *y, size_t d)
{
  float acc[KNNWB_LANES] = {0}, tail = 0.0f;
  size_t j = 0;
  if (euclidean) {
    for (; j + KNNWB_LANES <= d; j += KNNWB_LANES)
      for (int t = 0; t < KNNWB_LANES; t++) {
        const float c = x[j + t] - y[j + t];
        acc[t] += c * c;
      }
    for (; j < d; j++)
      tail += (x[j] - y[j]) * (x[j] - y[j]);
  } else {
    for (; j + KNNWB_LANES <= d; j += KNNWB_LANES)
      for (int t = 0; t < KNNWB_LANES; t++)
        acc[t] += fabsf(x[j + t] - y[j + t]);
    for (; j < d; j++)
      tail += fabsf(x[j] - y[j]);
  }
  return knnwb_lanes_sum_float(acc) + tail;
}

/* Higham's gamma for n roundings of 2^-24, n u / (1 - n u), with 1% more; +inf from n u = 1/2 on
 * (rows of 8 million columns: no screen passes a pair over there). */
static inline double knnwb_outside_float_gamma(size_t n)
{
  const double nu = (double)n * 0x1p-24;
  return nu < 0.5 ? nu / (1.0 - nu) * 1.01 : INFINITY;
}

/* The screen's relative error bound over d columns, with room to spare: a term takes three float
 * roundings (the difference, the square, its addition; two for manhattan), the sum of d terms at
 * most d - 1 further ones in any order (Higham's gamma), 2^-24 each; the engine's double distance
 * adds (d + 4) roundings of 2^-53 each, its square and the product with the slack a few more.
 * Gamma of d + 8 roundings of 2^-24, and d + 8 of 2^-50, bounds them all. */
static inline double knnwb_outside_screen_slack(size_t d)
{
  return knnwb_outside_float_gamma(d + 8) + (double)(d + 8) * 0x1p-50;
}

/* The screen's value above which a pair's engine distance is surely larger than `best` (the
 * engine's double distance of the best pair so far): pairs there are passed over, since they can
 * neither beat nor tie it. +inf while there is no best. */
static inline double knnwb_outside_screen_above(gboolean euclidean, double best, double slack,
                                                size_t d)
{
  const double underflow = (double)d * 0x1p-148; /* (products in float's subnormal range) */
  return (euclidean ? best * best : best) * (1.0 + slack) + underflow;
}

/* The float screen of a pair of unit rows (knnwb_outside_unit_row) under the pearson family and
 * cosine: their dot product in eight float lanes. It lies within knnwb_outside_dot_slack(d) of the
 * r the engine's double distance takes, or is NaN; never used as a distance. O(d). */
static KNNWB_ALWAYS_INLINE float knnwb_outside_dot(const float *x, const float *y, size_t d)
{
  float acc[KNNWB_LANES] = {0}, tail = 0.0f;
  size_t j = 0;
  for (; j + KNNWB_LANES <= d; j += KNNWB_LANES)
    for (int t = 0; t < KNNWB_LANES; t++)
      acc[t] += x[j + t] * y[j + t];
  for (; j < d; j++)
    tail += x[j] * y[j];
  return knnwb_lanes_sum_float(acc) + tail;
}

/* How far the unit rows' float dot product can lie from the engine's r, absolutely. With a_j the
 * centred values in double and q a row's squares (the sum of the a_j^2 in double, (d + 1) 2^-53
 * relative to it at most), sum |a_x a_y| <= sqrt(q_x q_y) (1 + 2^-20 checked when the unit row is
 * made). The engine's r errs by at most (2 d + 16) 2^-53 (its products, sum, square root and
 * division); the unit values by 2^-24 + 2^-51 relative each, their products and sum in float by
 * (d + 1) 2^-24 of sum |z_x z_y| <= 1 + 2^-20, so (d + 3) 2^-24 and some; values and products in
 * float's subnormal range by 2^-150 absolutely each, under d 2^-147 in all; 1 - r and the slack's
 * own subtraction round twice more. Gamma of d + 8 roundings of 2^-24, (2 d + 32) 2^-52 and
 * d 2^-147 bound them all. */
static inline double knnwb_outside_dot_slack(size_t d)
{
  return knnwb_outside_float_gamma(d + 8) + (double)(2 * d + 32) * 0x1p-52 + (double)d * 0x1p-147;
}

/* A lower bound of the engine's distance of a pair whose unit rows' float dot product is dot
 * (NaN for a NaN dot): 1 - r within the slack, r clamped to [-1, 1] as the engine clamps it, so
 * pearson's distance never above 2; abs pearson's 1 - |r|. */
static inline double knnwb_outside_dot_lower(KnnwbMetric metric, float dot, double slack)
{
  if (metric == KNNWB_METRIC_ABS_PEARSON)
    return (1.0 - fabs((double)dot)) - slack;
  const double lower = (1.0 - (double)dot) - slack;
  return lower > 2.0 ? 2.0 : lower; /* (NaN stays NaN) */
}

/* The exact distance of row i and the row at place `at` of the rows by cell: euclidean and
 * manhattan through the engine's inline sum on the exact rows by cell (knnwb_distance_lp, so the
 * same bits), the others through prepared's rows and statistics where they lie. */
static KNNWB_ALWAYS_INLINE double knnwb_outside_distance(const KnnwbPartitionOutside *o, size_t i,
                                                         size_t at)
{
  const KnnwbMetric metric = o->prepared->metric;
  const size_t d = o->prepared->d;
  if (o->exact_by_cell != NULL &&
      (metric == KNNWB_METRIC_EUCLIDEAN || metric == KNNWB_METRIC_MANHATTAN))
    return knnwb_distance_lp(metric == KNNWB_METRIC_EUCLIDEAN, o->prepared->exact + i * d,
                             o->exact_by_cell + at * d, d);
  return knnwb_prepared_distance(o->prepared, i, o->prepared, (size_t)o->p.members[at]);
}

/* Row i's nearest row outside its group, from its lower bounds to the centroids (block row r):
 * the cells by their nearest possible member, nearest first, until that lies beyond the best so
 * far (strictly, in the engine's double distance with its rounding: a pair that could tie is
 * compared). The next cell is looked for among those left (a row visits few: cheaper than sorting
 * them all). Under euclidean and manhattan a pair is first screened in float
 * (knnwb_outside_screen), under the pearson family and cosine through its unit rows
 * (knnwb_outside_dot, `unit` holds row i's), and only a pair that could beat or tie the best is
 * computed in double: the same answers, for a fraction of the double sums. Built for the vector
 * units the CPU has (KNNWB_VECTOR_CLONES: the same bits), so that the inline sums fill vector
 * registers. Returns the pairs it compared. */
KNNWB_VECTOR_CLONES
static gint64 knnwb_outside_row(const KnnwbOutsideCellsRun *run, const KnnwbPartitionBlock *block,
                                size_t r, size_t i, KnnwbOutsideCell *cells, const float *unit,
                                int64_t *out_index, double *out_distance)
{
  const KnnwbPartitionOutside *o = run->o;
  const KnnwbPartition *p = &o->p;
  const int32_t own = run->group[i];
  const size_t d = o->prepared->d;
  const KnnwbMetric metric = o->prepared->metric;
  const gboolean screened = metric == KNNWB_METRIC_EUCLIDEAN || metric == KNNWB_METRIC_MANHATTAN;
  const gboolean euclidean = metric == KNNWB_METRIC_EUCLIDEAN;
  const gboolean dotted = o->unit_by_cell != NULL;
  const double slack = dotted ? knnwb_outside_dot_slack(d) : knnwb_outside_screen_slack(d);
  const float *x = o->prepared->exact + i * d;
  size_t count = 0;
  for (size_t c = 0; c < p->m; c++) {
    if (o->cell_group[c] == own)
      continue; /* (every row of it shares the group) */
    double lower, upper;
    knnwb_partition_block_bounds(block, p->metric, p->centroid_sq, r, c, &lower, &upper);
    cells[count++] = (KnnwbOutsideCell){lower - p->radius[c], lower, (int32_t)c};
  }
  int64_t best = -1;
  double best_distance = INFINITY, limit = INFINITY, above = INFINITY;
  gint64 compared = 0;
  while (count > 0) {
    size_t next = 0;
    for (size_t t = 1; t < count; t++)
      if (cells[t].lower < cells[next].lower)
        next = t;
    const KnnwbOutsideCell cell = cells[next];
    if (cell.lower > limit)
      break;
    cells[next] = cells[--count];
    const size_t c = (size_t)cell.cell;
    for (size_t at = p->start[c]; at < p->start[c + 1]; at++) {
      if (o->group_by_cell[at] == own || cell.to_centroid - o->reach_by_cell[at] > limit)
        continue;
      compared++;
      if (screened) {
        const double screen = knnwb_outside_screen(euclidean, x, o->exact_by_cell + at * d, d);
        if (screen > above && screen < INFINITY)
          continue; /* (surely farther than the best: neither beats nor ties it) */
      } else if (dotted) {
        const float dot = knnwb_outside_dot(unit, o->unit_by_cell + at * d, d);
        if (knnwb_outside_dot_lower(metric, dot, slack) > best_distance)
          continue; /* (the same; a NaN dot is never passed over) */
      }
      const double dist = knnwb_outside_distance(o, i, at);
      const int64_t j = p->members[at];
      if (best < 0 || dist < best_distance || (dist == best_distance && j < best)) {
        best = j;
        best_distance = dist;
        limit = knnwb_partition_chord_limit(p->metric, dist, p->d);
        above = knnwb_outside_screen_above(euclidean, dist, slack, d);
      }
    }
  }
  *out_index = best;
  *out_distance = best < 0 ? INFINITY : best_distance;
  return compared;
}

/* Slots [first, last) of run->slots, KNNWB_OUTSIDE_BATCH rows at a time. */
static void knnwb_outside_rows(size_t first, size_t last, void *data)
{
  KnnwbOutsideCellsRun *run = data;
  const KnnwbPartition *p = &run->o->p;
  KnnwbPartitionBlock block;
  int64_t rows[KNNWB_OUTSIDE_BATCH];
  KnnwbOutsideCell *cells = g_try_new(KnnwbOutsideCell, p->m);
  const KnnwbPrepared *prepared = run->o->prepared;
  float *unit = run->o->unit_by_cell != NULL ? g_try_new(float, MAX(prepared->d, 1)) : NULL;
  if (cells == NULL || (run->o->unit_by_cell != NULL && unit == NULL) ||
      !knnwb_partition_block_init(&block, MIN(last - first, KNNWB_OUTSIDE_BATCH), p->m, p->d)) {
    g_free(cells);
    g_free(unit);
    g_atomic_int_set(&run->failed, 1);
    return;
  }
  const volatile gint *cancel = run->o->cancel;
  for (size_t next = first; next < last; next += block.cap) {
    if (cancel != NULL && g_atomic_int_get(cancel)) {
      g_atomic_int_set(&run->cancelled, 1);
      break;
    }
    if (g_atomic_int_get(&run->cancelled) || g_atomic_int_get(&run->failed) ||
        g_atomic_int_get(&run->over))
      break;
    const size_t count = MIN(last - next, block.cap);
    for (size_t t = 0; t < count; t++)
      rows[t] = run->rows[run->slots[next + t]];
    /* (the rows have direction: the cells were made of them) */
    knnwb_partition_block_fill(&block, p->metric, &run->o->space, 0, count, rows, p->centroid,
                               p->m);
    for (size_t t = 0; t < count; t++) {
      if (run->budget > 0 && (gssize)g_atomic_pointer_get(&run->compared) > run->budget) {
        g_atomic_int_set(&run->over, 1);
        break;
      }
      const size_t slot = (size_t)run->slots[next + t];
      if (unit != NULL)
        knnwb_outside_unit_of(prepared, (size_t)rows[t], unit);
      const gint64 compared = knnwb_outside_row(run, &block, t, (size_t)rows[t], cells, unit,
                                                &run->out_index[slot], &run->out_distance[slot]);
      g_atomic_pointer_add(&run->compared, (gssize)compared);
      run->answered[slot] = 1;
    }
  }
  knnwb_partition_block_clear(&block);
  g_free(cells);
  g_free(unit);
}

/* Every cell's common group (or -1) under group. O(n). */
static void knnwb_outside_cell_groups(KnnwbPartitionOutside *o, const int32_t *group)
{
  const KnnwbPartition *p = &o->p;
  for (size_t c = 0; c < p->m; c++) {
    int32_t shared = p->start[c] < p->start[c + 1] ? group[p->members[p->start[c]]] : -1;
    for (size_t at = p->start[c] + 1; at < p->start[c + 1] && shared >= 0; at++)
      if (group[p->members[at]] != shared)
        shared = -1;
    o->cell_group[c] = shared;
  }
  for (size_t at = 0; at < p->n; at++)
    o->group_by_cell[at] = group[p->members[at]];
}

/* The slots not answered yet into slots, ordered by their row's cell (a counting sort: slots in
 * order within a cell): rows of one cell visit the same cells, so a thread taking them one after
 * another finds those cells' rows in its caches (200,000 x 50 rows in 256 cells read 2 MB of rows
 * a row). Returns their count. O(n_rows + m). */
static size_t knnwb_outside_by_cells(const KnnwbPartitionOutside *o, const int64_t *rows,
                                     size_t n_rows, const unsigned char *answered, int64_t *slots)
{
  const KnnwbPartition *p = &o->p;
  g_autofree size_t *start = g_new0(size_t, p->m + 1);
  for (size_t t = 0; t < n_rows; t++)
    if (!answered[t])
      start[p->cluster_of[rows[t]] + 1]++;
  for (size_t c = 0; c < p->m; c++)
    start[c + 1] += start[c];
  for (size_t t = 0; t < n_rows; t++)
    if (!answered[t])
      slots[start[p->cluster_of[rows[t]]]++] = (int64_t)t;
  return start[p->m - 1];
}

/* The slots of one pass answered on threads (those answered marked). */
static void knnwb_outside_pass(KnnwbOutsideCellsRun *run, const int64_t *slots, size_t count,
                               int threads)
{
  run->slots = slots;
  knnwb_parallel_for(threads, count, KNNWB_OUTSIDE_BATCH, knnwb_outside_rows, run);
}

gboolean knnwb_partition_outside_run(KnnwbPartitionOutside *o, const int32_t *group,
                                     const int64_t *rows, size_t n_rows, const size_t *available,
                                     int64_t *out_index, double *out_distance,
                                     unsigned char *answered, GError **error)
{
  const gint64 start = g_get_monotonic_time();
  memset(answered, 0, n_rows);
  const KnnwbPartitionMode mode = knnwb_outside_mode();
  if (o->declined >= KNNWB_OUTSIDE_DECLINES && mode == KNNWB_PARTITION_AUTO &&
      !knnwb_outside_pilot_only())
    return TRUE;
  knnwb_outside_cell_groups(o, group);
  KnnwbOutsideCellsRun run = {.o = o,
                              .group = group,
                              .rows = rows,
                              .out_index = out_index,
                              .out_distance = out_distance,
                              .answered = answered};
  /* The pilot: rows spread evenly over the asking ones, stopped once its rows have compared more
   * than the paying share of theirs with the rows outside (then the cells do not pay, and the
   * pilot costs at most that); then the rest, where it pays. */
  const size_t pilot = MIN(n_rows, KNNWB_OUTSIDE_PILOT);
  g_autofree int64_t *slots = g_new(int64_t, n_rows);
  double outside = 0.0;
  for (size_t t = 0; t < pilot; t++) {
    slots[t] = (int64_t)knnwb_partition_sample_at(n_rows, pilot, t);
    outside += (double)available[slots[t]];
  }
  if (mode == KNNWB_PARTITION_AUTO && !knnwb_outside_pilot_only())
    run.budget = (gssize)(KNNWB_OUTSIDE_PAYING_SHARE * outside) + 1;
  const int threads = o->p.threads;
  knnwb_outside_pass(&run, slots, pilot, threads);
  const double share = outside > 0.0 ? (double)run.compared / outside : 0.0;
  const gboolean pays = mode == KNNWB_PARTITION_ON || (!knnwb_outside_pilot_only() && !run.over &&
                                                       share <= KNNWB_OUTSIDE_PAYING_SHARE);
  o->declined = pays ? 0 : o->declined + 1;
  if (pays && !run.cancelled && !run.failed) {
    run.budget = 0;
    const size_t rest = knnwb_outside_by_cells(o, rows, n_rows, answered, slots);
    knnwb_outside_pass(&run, slots, rest, threads);
  }
  if (run.cancelled) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED,
                "cancelled while searching the nearest rows outside each group");
    return FALSE;
  }
  if (run.failed) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the nearest-outside search's rows (%zu cells of %zu columns)",
                o->p.m, o->p.d);
    return FALSE;
  }
  size_t count = 0;
  for (size_t t = 0; t < n_rows; t++)
    count += answered[t];
  g_debug("knnwb: nearest outside: the cells answered %zu of %zu rows (the pilot's compared %s"
          "%.2f%% of the rows outside their groups; %" G_GSSIZE_FORMAT
          " pairs compared in all) in %.3f s",
          count, n_rows, run.over ? "more than " : "", 100.0 * share, run.compared,
          (double)(g_get_monotonic_time() - start) / 1e6);
  return TRUE;
}
