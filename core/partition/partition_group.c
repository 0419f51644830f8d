/*
 * Cells into groups. k-means cuts a dense cluster of the data in two as readily as it separates
 * two clusters; the rows of a cut cluster then visit the other half almost all, and the search
 * pays for both halves' own lists, for most pairs between them again and for twice the calls.
 * Searching such cells as one group costs less (and saves calls). Which cells to join is judged
 * on a sample: for each sample row, the cells its bound would not rule out (its k-th distance
 * estimated as in the choice), and the work model of the choice, greedily, pair by pair.
 * Only the speed depends on it: the search bounds every row against every cell of a group.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/parallel.h>
#include "partition/partition_internal.h"

/* Sample rows whose visits are estimated, at most; rounds of joining, at most; and the counting
 * a round may do (pairs of groups a sample row visits, summed): rows that visit most cells mean
 * data the partition does not help, where joining is not worth its time. */
#define KNNWB_PARTITION_GROUP_ROWS ((size_t)4096)
#define KNNWB_PARTITION_JOIN_ROUNDS 64
#define KNNWB_PARTITION_JOIN_COUNTING 3e7

typedef struct {
  const KnnwbPartition *p;
  const KnnwbPartitionBlock *sample;
  const int32_t *label;          /* per sample row: its cell */
  const size_t *start, *members; /* each cell's sample rows */
  size_t e, k;
  GArray **visits; /* per evaluated row: the cells (int32_t) its bound does not rule out */
} KnnwbPartitionGroupEstimate;

static void knnwb_partition_group_rows(size_t first, size_t last, void *data)
{
  const KnnwbPartitionGroupEstimate *est = data;
  const KnnwbPartition *p = est->p;
  const KnnwbPartitionBlock *sample = est->sample;
  double *chord = g_new(double, KNNWB_PARTITION_ESTIMATE_MEMBERS);
  for (size_t u = first; u < last; u++) {
    const size_t t = (u * sample->rows) / est->e, c = (size_t)est->label[t];
    const double limit = knnwb_partition_estimate_limit(
        sample, p->metric, t, est->members + est->start[c], est->start[c + 1] - est->start[c],
        (double)(p->start[c + 1] - p->start[c]), est->k, chord);
    GArray *visits = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (size_t j = 0; j < p->m; j++) {
      double lower, upper;
      knnwb_partition_block_bounds(sample, p->metric, p->centroid_sq, t, j, &lower, &upper);
      if (j != c && lower - p->radius[j] <= limit) {
        const int32_t cell = (int32_t)j;
        g_array_append_val(visits, cell);
      }
    }
    est->visits[u] = visits;
  }
  g_free(chord);
}

/*
 * The greedy joining. Groups are named by one of their cells; per sample row, its group and the
 * other groups it visits. For groups a and b: own[a * m + b] sample rows of a visit b, both[a * m
 * + b] rows of neither visit both, visitors[a] rows visit a. Joining a and b costs |a| |b| more
 * own pairs and |b| for each outside row that visited a only (and |a| conversely); it saves the
 * pairs and rows of every visit between them, the visits of rows that visited both, and a group's
 * two calls.
 */
typedef struct {
  size_t m, e;
  double scale, call, row; /* rows a sample row stands for; the model's costs */
  double *size;            /* per group: rows (0: joined into another) */
  int32_t *group_of;       /* per cell */
  const int32_t *cell;     /* per sample row: its cell */
  GArray **visits;         /* per sample row: visited cells */
  double *own, *both, *visitors;
  size_t *seen; /* per group: the last sample row (+ 1) that counted it */
  int32_t *list;
} KnnwbPartitionJoin;

/* own, both and visitors for the groups as they are. */
static void knnwb_partition_join_count(KnnwbPartitionJoin *j)
{
  const size_t m = j->m;
  memset(j->own, 0, m * m * sizeof(double));
  memset(j->both, 0, m * m * sizeof(double));
  memset(j->visitors, 0, m * sizeof(double));
  memset(j->seen, 0, m * sizeof(size_t));
  for (size_t u = 0; u < j->e; u++) {
    const int32_t own = j->group_of[j->cell[u]];
    size_t n = 0;
    for (guint t = 0; t < j->visits[u]->len; t++) {
      const int32_t g = j->group_of[g_array_index(j->visits[u], int32_t, t)];
      if (g != own && j->seen[g] != u + 1) {
        j->seen[g] = u + 1;
        j->list[n++] = g;
      }
    }
    for (size_t a = 0; a < n; a++) {
      j->visitors[j->list[a]] += 1.0;
      j->own[(size_t)own * m + (size_t)j->list[a]] += 1.0;
      for (size_t b = 0; b < n; b++)
        if (a != b)
          j->both[(size_t)j->list[a] * m + (size_t)j->list[b]] += 1.0;
    }
  }
}

/* The work joining groups a and b adds (negative: saves), in pairs of the plain search; 0 when
 * the pairs and rows it saves do not pay for it, calls left aside: groups far apart are not
 * joined to save calls, since a sub-search's half-precision screen is scaled to its rows' spread
 * (measured: four clusters searched as one needed 3-4 times the candidates of one). */
static double knnwb_partition_join_delta(const KnnwbPartitionJoin *j, size_t a, size_t b)
{
  const size_t m = j->m;
  const double ab = j->own[a * m + b], ba = j->own[b * m + a], both = j->both[a * m + b];
  const double only_a = j->visitors[a] - ba - both, only_b = j->visitors[b] - ab - both;
  const double pairs =
      j->size[a] * j->size[b] +
      j->scale * (only_a * j->size[b] + only_b * j->size[a] - ab * j->size[b] - ba * j->size[a]);
  const double without_calls = pairs - j->scale * j->row * (ab + ba + both);
  return without_calls < 0.0 ? without_calls - 2.0 * j->call : 0.0;
}

typedef struct {
  double delta;
  int32_t a, b;
} KnnwbPartitionJoinPair;

static int knnwb_partition_join_compare(const void *x, const void *y)
{
  const KnnwbPartitionJoinPair *p = x, *q = y;
  if (p->delta != q->delta)
    return p->delta < q->delta ? -1 : 1;
  return p->a != q->a ? (p->a < q->a ? -1 : 1) : (p->b < q->b ? -1 : (p->b > q->b));
}

/* One round: every pair of groups that saves work, best first, joined while neither group was
 * joined this round (and two groups remain). Returns the joins made. */
static size_t knnwb_partition_join_round(KnnwbPartitionJoin *j, size_t *groups)
{
  const size_t m = j->m;
  knnwb_partition_join_count(j);
  GArray *pairs = g_array_new(FALSE, FALSE, sizeof(KnnwbPartitionJoinPair));
  for (size_t a = 0; a < m; a++)
    for (size_t b = a + 1; j->size[a] > 0 && b < m; b++) {
      if (j->size[b] <= 0)
        continue;
      const KnnwbPartitionJoinPair pair = {knnwb_partition_join_delta(j, a, b), (int32_t)a,
                                           (int32_t)b};
      if (pair.delta < 0.0)
        g_array_append_val(pairs, pair);
    }
  g_array_sort(pairs, knnwb_partition_join_compare);
  gboolean *joined = g_new0(gboolean, m);
  size_t made = 0;
  for (guint t = 0; t<pairs->len && * groups> 2; t++) {
    const KnnwbPartitionJoinPair *pair = &g_array_index(pairs, KnnwbPartitionJoinPair, t);
    if (joined[pair->a] || joined[pair->b])
      continue;
    joined[pair->a] = joined[pair->b] = TRUE;
    for (size_t c = 0; c < m; c++)
      if (j->group_of[c] == pair->b)
        j->group_of[c] = pair->a;
    j->size[pair->a] += j->size[pair->b];
    j->size[pair->b] = 0.0;
    (*groups)--;
    made++;
  }
  g_free(joined);
  g_array_free(pairs, TRUE);
  return made;
}

/* The groups of p's cells from the visits of e sample rows (cells cell[u], visits[u]). */
static void knnwb_partition_join(KnnwbPartition *p, size_t e, const int32_t *cell, GArray **visits,
                                 gboolean gpu)
{
  const size_t m = p->m;
  KnnwbPartitionJoin j = {.m = m,
                          .e = e,
                          .scale = (double)p->n / (double)e,
                          .call = knnwb_partition_work(gpu, 0.0, 1.0, 0.0),
                          .row = knnwb_partition_work(gpu, 0.0, 0.0, 1.0),
                          .size = g_new(double, m),
                          .group_of = p->group_of,
                          .cell = cell,
                          .visits = visits,
                          .own = g_new(double, m *m),
                          .both = g_new(double, m *m),
                          .visitors = g_new(double, m),
                          .seen = g_new(size_t, m),
                          .list = g_new(int32_t, m)};
  for (size_t c = 0; c < m; c++)
    j.size[c] = (double)(p->start[c + 1] - p->start[c]);
  double counting = 0.0;
  for (size_t u = 0; u < e; u++)
    counting += (double)visits[u]->len * (double)visits[u]->len;
  size_t groups = m;
  for (int round = 0;
       counting <= KNNWB_PARTITION_JOIN_COUNTING && round < KNNWB_PARTITION_JOIN_ROUNDS &&
       knnwb_partition_join_round(&j, &groups) > 0;
       round++)
    ;
  /* groups renamed 0, 1, ... in the order of their first cells */
  int32_t *name = g_new(int32_t, m);
  for (size_t c = 0; c < m; c++)
    name[c] = -1;
  p->groups = 0;
  for (size_t c = 0; c < m; c++) {
    const size_t g = (size_t)p->group_of[c];
    if (name[g] < 0)
      name[g] = (int32_t)p->groups++;
    p->group_of[c] = name[g];
  }
  g_free(name);
  g_free(j.size);
  g_free(j.own);
  g_free(j.both);
  g_free(j.visitors);
  g_free(j.seen);
  g_free(j.list);
}

typedef struct {
  KnnwbPartitionBlock *sample;
  const KnnwbPartition *p;
} KnnwbPartitionGroupDots;

/* The sample rows' products with the centroids, a range of rows at a time. */
static void knnwb_partition_group_dots(size_t first, size_t last, void *data)
{
  const KnnwbPartitionGroupDots *x = data;
  knnwb_partition_block_dots_rows(x->sample, x->p->centroid, x->p->m, first, last);
}

void knnwb_partition_group(KnnwbPartition *p, const KnnwbMatrix *data, size_t k, gboolean gpu)
{
  const size_t s = knnwb_partition_sample_rows(p->n, p->d);
  KnnwbPartitionBlock sample;
  if (p->m <= 2 || g_strcmp0(g_getenv("KNNWB_PARTITION_GROUPS"), "off") == 0 ||
      !knnwb_partition_sample_init(&sample, data, p->metric, s, p->m, p->threads))
    return;
  KnnwbPartitionGroupDots dots = {.sample = &sample, .p = p};
  knnwb_parallel_for(p->threads, s, 1024, knnwb_partition_group_dots, &dots);
  int32_t *label = g_new(int32_t, s);
  for (size_t t = 0; t < s; t++)
    label[t] = p->cluster_of[(t * (uint64_t)p->n) / s];
  size_t *start = g_new(size_t, p->m + 1), *members = g_new(size_t, s);
  knnwb_partition_sample_index(label, s, p->m, start, members);
  const size_t e = MIN(s, KNNWB_PARTITION_GROUP_ROWS);
  KnnwbPartitionGroupEstimate est = {.p = p,
                                     .sample = &sample,
                                     .label = label,
                                     .start = start,
                                     .members = members,
                                     .e = e,
                                     .k = k,
                                     .visits = g_new0(GArray *, e)};
  knnwb_parallel_for(p->threads, e, 16, knnwb_partition_group_rows, &est);
  int32_t *cell = g_new(int32_t, e);
  for (size_t u = 0; u < e; u++)
    cell[u] = label[(u * s) / e];
  knnwb_partition_join(p, e, cell, est.visits, gpu);
  knnwb_partition_index(p);
  for (size_t u = 0; u < e; u++)
    g_array_free(est.visits[u], TRUE);
  g_free(est.visits);
  g_free(cell);
  g_free(start);
  g_free(members);
  g_free(label);
  knnwb_partition_block_clear(&sample);
}
