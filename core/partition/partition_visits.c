/*
 * The bounds pass of the partitioned search: after phase one, each row's k-th distance so far
 * bounds the groups it must still visit. A group is ruled out when every cell of it is: by the
 * triangle inequality on the centroids' gaps first (no product), else by the row's exact bounds to
 * the cell's centroid. The cells of each cell's neighbourhood are ordered by how little the
 * triangle test leaves them, so that a row stops at the first cell it rules out; a row it rules
 * out of every other group is not read at all (its reach, an upper bound of its distance to its
 * own centroid, comes from the assignment: the bound the row's own test would compute, bit for
 * bit, as every product is summed in one order, partition_dots.c). Only which rows are read
 * depends on that order: the visits are those of every cell's own test.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/parallel.h>
#include "partition/partition_internal.h"

/* Rows per block of the bounds pass. */
#define KNNWB_PARTITION_BOUND_ROWS ((size_t)2048)

/* Cells of other groups kept in order per cell: a row whose triangle test leaves more falls back
 * to the test of every cell. */
#define KNNWB_PARTITION_NEAR_CELLS ((size_t)64)

/* Per cell a, the cells j of other groups in increasing order of their slack gap(a, j) (1 - 1e-9) -
 * radius(j) (1 + 1e-9), at most KNNWB_PARTITION_NEAR_CELLS of them, and the slack of the first
 * one left out (HUGE_VAL when none is). */
typedef struct {
  size_t cap;
  size_t *count;  /* per cell */
  int32_t *cell;  /* m x cap */
  double *slack;  /* m x cap */
  double *beyond; /* per cell */
} KnnwbPartitionNear;

typedef struct {
  KnnwbPartitionRun *run;
  const double *gap;              /* knnwb_partition_centroid_gaps, or NULL */
  const KnnwbPartitionNear *near; /* with gap and the assignment's reaches, or NULL */
  GArray **found;                 /* per block of rows: (cluster << 40 | row) of every visit */
  gsize read;                     /* rows read */
  gint failed;
} KnnwbPartitionVisits;

/* Row i's k-th distance after phase one. */
double knnwb_partition_kth(const KnnwbPartitionRun *run, size_t i)
{
  if (run->kth == NULL)
    return run->lists->distances[knnwb_partition_list_at(run, i) * run->k + run->k - 1];
  double kth;
  memcpy(&kth, &run->kth[i - run->first], sizeof kth);
  return kth;
}

/*
 * Whether row r of the block (row x of cell a, bound by limit) is ruled out of cell j by the
 * triangle inequality alone: every member y of cell j has
 *   |x - y| >= |c_a - c_j| - |x - c_a| - |y - c_j| >= gap(a, j) - reach - radius(j),
 * reach being an upper bound of |x - c_a|. Floating error in that sum and the comparison is a few
 * units of roundoff of its terms, far inside the 1e-9 it is given. Rows and cells it rules out
 * need no product: in clustered data most of them. The same test as slack(a, j) > (1 + 1e-9)
 * (reach + limit), its terms gathered.
 */
static inline gboolean knnwb_partition_triangle_rules_out(double gap, double reach, double radius,
                                                          double limit)
{
  return gap - reach - radius - 1e-9 * (gap + reach + radius + limit) > limit;
}

static inline double knnwb_partition_slack(double gap, double radius)
{
  return gap * (1.0 - 1e-9) - radius * (1.0 + 1e-9);
}

/* Whether the row's exact bounds to cell j (product dot) leave it visiting j's group g; if so the
 * visit goes to found. */
static void knnwb_partition_visit_cell(const KnnwbPartition *p, const KnnwbPartitionBlock *block,
                                       size_t r, size_t i, size_t j, double dot, double limit,
                                       size_t *seen, GArray *found)
{
  const size_t g = (size_t)p->group_of[j];
  const double lower =
      knnwb_partition_pair_lower(p->metric, p->d, block->v_sq[r] + p->centroid_sq[j], dot);
  if (!(lower - p->radius[j] > limit)) {
    const uint64_t visit = ((uint64_t)g << 40) | (uint64_t)i;
    g_array_append_val(found, visit);
    seen[g] = i + 1;
  }
}

/* Row r of the block (row i of cell a, bound by limit): the groups it visits, appended to found.
 * With gap, the triangle test first; the products are the block's (dots: made for every centroid
 * at once), else made here for the cells the test leaves (the same bits). The same decision as
 * the products alone, or a valid one the triangle test makes first. */
static void knnwb_partition_visit_row(const KnnwbPartitionVisits *v,
                                      const KnnwbPartitionBlock *block, size_t r, size_t i,
                                      double limit, gboolean dots, size_t *seen, GArray *found)
{
  const KnnwbPartition *p = v->run->p;
  const size_t a = (size_t)p->cluster_of[i], own = (size_t)p->group_of[a], m = p->m, d = p->d;
  const double *x = block->v + r * d;
  double reach = 0.0;
  if (v->gap != NULL) {
    double lower;
    knnwb_partition_pair_bounds(p->metric, d, block->v_sq[r] + p->centroid_sq[a],
                                dots ? block->dot[r * block->m + a]
                                     : knnwb_partition_row_dot(x, p->centroid + a * d, d),
                                &lower, &reach);
  }
  for (size_t j = 0; j < m; j++) {
    const size_t g = (size_t)p->group_of[j];
    if (g == own || seen[g] == i + 1)
      continue;
    if (v->gap != NULL &&
        knnwb_partition_triangle_rules_out(v->gap[a * m + j], reach, p->radius[j], limit))
      continue;
    const double dot =
        dots ? block->dot[r * block->m + j] : knnwb_partition_row_dot(x, p->centroid + j * d, d);
    knnwb_partition_visit_cell(p, block, r, i, j, dot, limit, seen, found);
  }
}

/* Row r of the block (row i of cell a) whose triangle test, at the assignment's reach, leaves it
 * only cells of its near list (threshold: (1 + 1e-9) (reach + limit)): those cells' exact bounds,
 * in the list's order until the first cell the test rules out. The products are the block's
 * (dots: made for every centroid at once), else made here (the same bits). */
static void knnwb_partition_visit_near(const KnnwbPartitionVisits *v,
                                       const KnnwbPartitionBlock *block, size_t r, size_t i,
                                       double limit, double threshold, gboolean dots, size_t *seen,
                                       GArray *found)
{
  const KnnwbPartition *p = v->run->p;
  const KnnwbPartitionNear *near = v->near;
  const size_t a = (size_t)p->cluster_of[i], d = p->d;
  const double *x = block->v + r * d;
  for (size_t t = 0; t < near->count[a] && near->slack[a * near->cap + t] <= threshold; t++) {
    const size_t j = (size_t)near->cell[a * near->cap + t];
    if (seen[p->group_of[j]] == i + 1)
      continue;
    const double dot =
        dots ? block->dot[r * block->m + j] : knnwb_partition_row_dot(x, p->centroid + j * d, d);
    knnwb_partition_visit_cell(p, block, r, i, j, dot, limit, seen, found);
  }
}

typedef struct {
  double slack;
  int32_t cell;
} KnnwbPartitionSlack;

static int knnwb_partition_slack_compare(const void *x, const void *y)
{
  const KnnwbPartitionSlack *s = x, *t = y;
  if (s->slack != t->slack)
    return s->slack < t->slack ? -1 : 1;
  return (s->cell > t->cell) - (s->cell < t->cell);
}

typedef struct {
  const KnnwbPartition *p;
  const double *gap;
  KnnwbPartitionNear *near;
} KnnwbPartitionNearFill;

static void knnwb_partition_near_cells(size_t first, size_t last, void *data)
{
  const KnnwbPartitionNearFill *f = data;
  const KnnwbPartition *p = f->p;
  KnnwbPartitionNear *near = f->near;
  KnnwbPartitionSlack *all = g_new(KnnwbPartitionSlack, p->m);
  for (size_t a = first; a < last; a++) {
    size_t n = 0;
    for (size_t j = 0; j < p->m; j++)
      if (p->group_of[j] != p->group_of[a])
        all[n++] = (KnnwbPartitionSlack){knnwb_partition_slack(f->gap[a * p->m + j], p->radius[j]),
                                         (int32_t)j};
    qsort(all, n, sizeof *all, knnwb_partition_slack_compare);
    near->count[a] = MIN(n, near->cap);
    near->beyond[a] = n > near->cap ? all[near->cap].slack : HUGE_VAL;
    for (size_t t = 0; t < near->count[a]; t++) {
      near->cell[a * near->cap + t] = all[t].cell;
      near->slack[a * near->cap + t] = all[t].slack;
    }
  }
  g_free(all);
}

/* The near lists of p's cells (gap: knnwb_partition_centroid_gaps). O(m^2 log m) on threads. */
static void knnwb_partition_near_init(KnnwbPartitionNear *near, const KnnwbPartition *p,
                                      const double *gap)
{
  near->cap = MIN(p->m, KNNWB_PARTITION_NEAR_CELLS);
  near->count = g_new(size_t, p->m);
  near->cell = g_new(int32_t, p->m * near->cap);
  near->slack = g_new(double, p->m * near->cap);
  near->beyond = g_new(double, p->m);
  KnnwbPartitionNearFill fill = {.p = p, .gap = gap, .near = near};
  knnwb_parallel_for(p->threads, p->m, 8, knnwb_partition_near_cells, &fill);
}

static void knnwb_partition_near_clear(KnnwbPartitionNear *near)
{
  g_free(near->count);
  g_free(near->cell);
  g_free(near->slack);
  g_free(near->beyond);
}

/* How row i (bound by limit) is bounded with the near lists: 0 not read (the triangle test rules
 * it out of every other group), 1 its near list's cells, 2 every cell. *threshold: the triangle
 * test's, (1 + 1e-9) (reach + limit). */
static int knnwb_partition_row_kind(const KnnwbPartitionVisits *v, size_t i, double limit,
                                    double *threshold)
{
  const KnnwbPartition *p = v->run->p;
  const size_t a = (size_t)p->cluster_of[i];
  *threshold = (1.0 + 1e-9) * (*knnwb_partition_reach(p, i) + limit);
  if (v->near->count[a] == 0 || v->near->slack[a * v->near->cap] > *threshold)
    return 0;
  return v->near->beyond[a] > *threshold ? 1 : 2;
}

/* Whether a row of that kind takes its products from the block's, made for all m centroids at
 * once (vectors across centroids), rather than one at a time for the cells it tests (one chain of
 * d terms each). Rows of kind 2 test every cell. With few cells the block's products are cheap
 * enough for every row: 2,000,000 rows of clusters 2 apart, two threads, bounds pass with 50 cells
 * 0.46 s against 1.01 s, with 61 cells 1.10-1.69 s against 3.20-3.63 s; with 125 and 250 cells
 * the same either way, and with 304 cells (10,000,000 rows) 2-6% slower. */
static gboolean knnwb_partition_row_dots(int kind, size_t m)
{
  return kind == 2 || m <= 2 * KNNWB_PARTITION_NEAR_CELLS;
}

/* The block's order of rows[0 .. count): the rows that take the block's products (dots[t]) first,
 * each part in its order; place[t] is the block row of rows[t], block_rows the rows in block
 * order. Returns how many take the block's products. */
static size_t knnwb_partition_dots_order(const int64_t *rows, const gboolean *dots, size_t count,
                                         int64_t *block_rows, size_t *place)
{
  size_t full = 0;
  for (size_t t = 0; t < count; t++)
    full += dots[t] != FALSE;
  size_t at[2] = {0, full};
  for (size_t t = 0; t < count; t++) {
    place[t] = at[!dots[t]]++;
    block_rows[place[t]] = rows[t];
  }
  return full;
}

/* Rows run->first + [from, to) (one block): the other clusters their bound cannot rule out (lower
 * bound minus the cluster's radius not beyond the chord of the row's k-th distance so far). With
 * near lists, only the rows the triangle test does not rule out of every other group are read. */
static void knnwb_partition_visit_block(size_t from, size_t to, void *data)
{
  KnnwbPartitionVisits *v = data;
  const KnnwbPartitionRun *run = v->run;
  const size_t first = run->first + from, last = run->first + to;
  const KnnwbPartition *p = run->p;
  const volatile gint *cancel = run->options->cancel;
  if (g_atomic_int_get(&v->failed) || (cancel != NULL && g_atomic_int_get(cancel))) {
    g_atomic_int_set(&v->failed, 1);
    return;
  }
  const size_t n = last - first;
  int64_t *rows = g_new(int64_t, n);
  double *limit = g_new(double, n), *threshold = g_new(double, n);
  int *kind = g_new(int, n);
  gboolean *dots = g_new(gboolean, n);
  const gboolean by_near = v->near != NULL && first >= p->reach_first && last <= p->reach_last;
  size_t count = 0;
  for (size_t i = first; i < last; i++) {
    limit[count] = knnwb_partition_chord_limit(p->metric, knnwb_partition_kth(run, i), p->d);
    kind[count] = by_near ? knnwb_partition_row_kind(v, i, limit[count], &threshold[count]) : 2;
    dots[count] = knnwb_partition_row_dots(kind[count], p->m);
    if (kind[count] > 0)
      rows[count++] = (int64_t)i;
  }
  g_atomic_pointer_add(&v->read, (gssize)count);
  /* The rows that take the block's products first (knnwb_partition_row_dots), their products
   * with every centroid made at once (vectors across centroids, partition_dots.c; row by row they
   * took 5 s of 10 M rows of overlapping clusters, 304 cells, on 32 cores); the rows that test a
   * few cells of their near lists after them, those products made row by row. The rows are
   * visited in their order, so each group's visitors stay in ascending order. */
  size_t *place = g_new(size_t, MAX(count, (size_t)1));
  int64_t *block_rows = g_new(int64_t, MAX(count, (size_t)1));
  const size_t full = knnwb_partition_dots_order(rows, dots, count, block_rows, place);
  const size_t m = v->gap == NULL || full > 0 ? p->m : 0;
  KnnwbPartitionBlock block;
  GArray *found = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  size_t *seen = g_new0(size_t, p->groups); /* the last row (+ 1) that visits each group */
  if (!knnwb_partition_block_init(&block, MAX(count, (size_t)1), m, p->d)) {
    g_atomic_int_set(&v->failed, 1);
  } else {
    /* (a split rank's rows are in their places: its block's, in order, from the first) */
    int64_t *held = block_rows;
    if (run->slot != NULL) {
      held = g_new(int64_t, MAX(count, (size_t)1));
      for (size_t t = 0; t < count; t++)
        held[t] = run->slot[block_rows[t]];
    }
    const gboolean filled =
        knnwb_partition_block_fill(&block, p->metric, run->data, 0, count, held, NULL, 0);
    if (held != block_rows)
      g_free(held);
    if (filled) {
      knnwb_partition_block_dots_rows(&block, m > 0 ? p->centroid : NULL, m, 0,
                                      v->gap == NULL ? count : full);
      for (size_t t = 0; t < count; t++) {
        const gboolean made = m > 0 && place[t] < full;
        if (kind[t] == 1)
          knnwb_partition_visit_near(v, &block, place[t], (size_t)rows[t], limit[t], threshold[t],
                                     made, seen, found);
        else
          knnwb_partition_visit_row(v, &block, place[t], (size_t)rows[t], limit[t], m > 0, seen,
                                    found);
      }
    } else {
      g_atomic_int_set(&v->failed, 1);
    }
    knnwb_partition_block_clear(&block);
  }
  g_free(seen);
  g_free(place);
  g_free(block_rows);
  g_free(dots);
  g_free(kind);
  g_free(threshold);
  g_free(limit);
  g_free(rows);
  v->found[from / KNNWB_PARTITION_BOUND_ROWS] = found;
}

/* Rows run->first + [from, to) a block of KNNWB_PARTITION_BOUND_ROWS at a time: one thread is
 * given every row at once (as one block they took n (m + d) doubles). */
static void knnwb_partition_visit_rows(size_t from, size_t to, void *data)
{
  for (size_t next = from; next < to; next += KNNWB_PARTITION_BOUND_ROWS)
    knnwb_partition_visit_block(next, MIN(to, next + KNNWB_PARTITION_BOUND_ROWS), data);
}

/* Each group's visitors from the blocks' visits, rows ascending (run->query_start, run->queries);
 * frees them. FALSE: memory. */
static gboolean knnwb_partition_visit_index(KnnwbPartitionRun *run, GArray **found, size_t blocks,
                                            gboolean ok)
{
  const size_t groups = run->p->groups;
  size_t total = 0;
  run->query_start = g_new0(int64_t, groups + 1);
  for (size_t b = 0; b < blocks; b++)
    for (guint t = 0; found[b] != NULL && t < found[b]->len; t++) {
      run->query_start[(g_array_index(found[b], uint64_t, t) >> 40) + 1]++;
      total++;
    }
  for (size_t c = 0; c < groups; c++)
    run->query_start[c + 1] += run->query_start[c];
  run->queries = ok ? g_try_new(int64_t, MAX(total, (size_t)1)) : NULL;
  int64_t *next = g_new(int64_t, groups);
  memcpy(next, run->query_start, groups * sizeof(int64_t));
  for (size_t b = 0; b < blocks; b++) {
    for (guint t = 0; run->queries != NULL && found[b] != NULL && t < found[b]->len; t++) {
      const uint64_t visit = g_array_index(found[b], uint64_t, t);
      run->queries[next[visit >> 40]++] = (int64_t)(visit & (((uint64_t)1 << 40) - 1));
    }
    if (found[b] != NULL)
      g_array_free(found[b], TRUE);
  }
  g_free(next);
  return run->queries != NULL;
}

/* The CPU's pass (gap: knnwb_partition_centroid_gaps or NULL). */
static gboolean knnwb_partition_visits_cpu(KnnwbPartitionRun *run, const double *gap)
{
  const KnnwbPartition *p = run->p;
  const size_t rows = run->last - run->first;
  const size_t blocks = (rows + KNNWB_PARTITION_BOUND_ROWS - 1) / KNNWB_PARTITION_BOUND_ROWS;
  KnnwbPartitionNear near = {0};
  if (gap != NULL && p->reach != NULL)
    knnwb_partition_near_init(&near, p, gap);
  KnnwbPartitionVisits v = {.run = run,
                            .gap = gap,
                            .near = near.count != NULL ? &near : NULL,
                            .found = g_new0(GArray *, blocks)};
  knnwb_parallel_for(p->threads, rows, KNNWB_PARTITION_BOUND_ROWS, knnwb_partition_visit_rows, &v);
  g_debug("knnwb: partition: bounds: %zu of %zu rows read (the others ruled out of every other "
          "group by the triangle test)",
          (size_t)v.read, rows);
  if (near.count != NULL)
    knnwb_partition_near_clear(&near);
  const gboolean ok = knnwb_partition_visit_index(run, v.found, blocks, !v.failed);
  g_free(v.found);
  return ok;
}

gboolean knnwb_partition_visits(KnnwbPartitionRun *run, double *pairs)
{
  const KnnwbPartition *p = run->p;
  g_autofree double *gap = knnwb_partition_centroid_gaps(p);
  run->bounds_on_gpu = knnwb_partition_visits_gpu(run, gap);
  const gboolean ok = run->bounds_on_gpu || knnwb_partition_visits_cpu(run, gap);
  *pairs = 0.0;
  for (size_t c = 0; c < p->groups; c++)
    *pairs += (double)(run->query_start[c + 1] - run->query_start[c]) *
              (double)(p->start[c + 1] - p->start[c]);
  return ok;
}
