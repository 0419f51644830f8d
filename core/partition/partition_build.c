/*
 * The clusters of the partitioned search: k-means (k-means++ seeds, a few Lloyd rounds) on an
 * evenly spread sample of rows in the bound space, then every row to its nearest centroid, with
 * each cluster's radius (an upper bound of its members' distances). Clusters too small to give
 * their rows k neighbours are dropped and their rows go to the next nearest. Only the speed
 * depends on how good the clusters are: the bounds hold for any centroids.
 */
#include <math.h>
#include <string.h>
#include <knnwb/parallel.h>
#include "partition/partition_internal.h"

/* The sample's size in doubles at most (32 MiB: the choice must stay cheap at large d), and the
 * Lloyd rounds on it. */
#define KNNWB_PARTITION_SAMPLE_VALUES ((size_t)1 << 22)
#define KNNWB_PARTITION_LLOYD_ROUNDS 8
/* Rows per block of the assignment pass (one knnwb_partition_dots each). */
#define KNNWB_PARTITION_BLOCK_ROWS ((size_t)2048)

/* The nearest centroid of block row r (ties to the lower centroid; 0 when no score is below
 * HUGE_VAL). The lowest score first, in four lanes (a minimum is exact in any order; a branch on
 * each score mispredicted most of the time), then the first centroid that has it. */
static size_t knnwb_partition_nearest(const KnnwbPartitionBlock *block, const double *centroid_sq,
                                      size_t m, size_t r)
{
  const double *dot = block->dot + r * block->m;
  double l0 = HUGE_VAL, l1 = HUGE_VAL, l2 = HUGE_VAL, l3 = HUGE_VAL;
  size_t j = 0;
  for (; j + 4 <= m; j += 4) {
    const double s0 = centroid_sq[j] - 2.0 * dot[j], s1 = centroid_sq[j + 1] - 2.0 * dot[j + 1];
    const double s2 = centroid_sq[j + 2] - 2.0 * dot[j + 2],
                 s3 = centroid_sq[j + 3] - 2.0 * dot[j + 3];
    l0 = s0 < l0 ? s0 : l0;
    l1 = s1 < l1 ? s1 : l1;
    l2 = s2 < l2 ? s2 : l2;
    l3 = s3 < l3 ? s3 : l3;
  }
  for (; j < m; j++) {
    const double score = centroid_sq[j] - 2.0 * dot[j];
    l0 = score < l0 ? score : l0;
  }
  l0 = l1 < l0 ? l1 : l0;
  l2 = l3 < l2 ? l3 : l2;
  const double lowest = l2 < l0 ? l2 : l0;
  if (!(lowest < HUGE_VAL))
    return 0;
  for (j = 0; j < m; j++)
    if (centroid_sq[j] - 2.0 * dot[j] == lowest)
      break;
  return j;
}

static void knnwb_partition_squares(const double *centroid, size_t m, size_t d, double *sq)
{
  for (size_t c = 0; c < m; c++) {
    double s = 0.0;
    for (size_t j = 0; j < d; j++)
      s += centroid[c * d + j] * centroid[c * d + j];
    sq[c] = s;
  }
}

/* The assignment of the sample's rows (and, in the Lloyd rounds, each block's sums of its rows by
 * centroid, made while the block's rows are in cache: the means come from them). */
typedef struct {
  KnnwbPartitionBlock *sample;
  double *centroid, *centroid_sq; /* the means replace the centroids */
  size_t m;
  int32_t *label;
  double *sum;   /* NULL, or blocks x m x d: block b's sum of its rows nearest to each centroid */
  size_t *count; /* blocks x m: those rows */
} KnnwbPartitionLabel;

/* Block b's (rows [from, to)) sums, each centroid's row of them zeroed at its first row. */
static void knnwb_partition_label_sums(KnnwbPartitionLabel *l, size_t b, size_t from, size_t to)
{
  const size_t m = l->m, d = l->sample->d;
  double *sum = l->sum + b * m * d;
  size_t *count = l->count + b * m;
  memset(count, 0, m * sizeof(size_t));
  for (size_t t = from; t < to; t++) {
    const size_t c = (size_t)l->label[t];
    const double *v = l->sample->v + t * d;
    if (count[c]++ == 0)
      memset(sum + c * d, 0, d * sizeof(double));
    for (size_t j = 0; j < d; j++)
      sum[c * d + j] += v[j];
  }
}

/* Rows [first, last) in blocks of KNNWB_PARTITION_BLOCK_ROWS from row 0, one call each: one
 * thread is given every row at once, and neither a block's products nor its sums may depend on
 * that. The Lloyd rounds' products go to a block of this thread's, used at once (the sample's
 * rows x m of them were written and read again each round: 10% of the
 * choice on one thread); the last assignment's stay in the sample, for the estimate. */
static void knnwb_partition_label_rows(size_t first, size_t last, void *data)
{
  KnnwbPartitionLabel *l = data;
  const size_t d = l->sample->d, rows = MIN(last - first, KNNWB_PARTITION_BLOCK_ROWS);
  double *scratch = l->sum != NULL ? g_new(double, rows * l->m) : NULL;
  for (size_t from = first; from < last; from += KNNWB_PARTITION_BLOCK_ROWS) {
    const size_t to = MIN(last, from + KNNWB_PARTITION_BLOCK_ROWS);
    KnnwbPartitionBlock view = {.rows = to - from,
                                .cap = to - from,
                                .m = l->m,
                                .d = d,
                                .v = l->sample->v + from * d,
                                .dot = scratch};
    KnnwbPartitionBlock *block = scratch != NULL ? &view : l->sample;
    const size_t offset = scratch != NULL ? from : 0; /* block row of sample row t: t - offset */
    knnwb_partition_block_dots_rows(block, l->centroid, l->m, from - offset, to - offset);
    for (size_t t = from; t < to; t++)
      l->label[t] = (int32_t)knnwb_partition_nearest(block, l->centroid_sq, l->m, t - offset);
    if (l->sum != NULL)
      knnwb_partition_label_sums(l, from / KNNWB_PARTITION_BLOCK_ROWS, from, to);
  }
  g_free(scratch);
}

/* Every sample row's nearest centroid (without l->sum, the sample's dot products become those
 * with the centroids), in blocks of rows on threads: the same labels for any number of threads.
 * (A threaded DGEMM a block cost more than it gave: k-means of 305 clusters took 1.4 s on 16
 * cores that way, 0.3 s on 2.) */
static void knnwb_partition_label(KnnwbPartitionLabel *l, int threads)
{
  knnwb_partition_squares(l->centroid, l->m, l->sample->d, l->centroid_sq);
  knnwb_parallel_for(threads, l->sample->rows, KNNWB_PARTITION_BLOCK_ROWS,
                     knnwb_partition_label_rows, l);
}

/* Centroids [first, last) become the means of their rows from the blocks' sums, added in block
 * order (centroids of no row stay). */
static void knnwb_partition_means(size_t first, size_t last, void *data)
{
  const KnnwbPartitionLabel *l = data;
  const size_t m = l->m, d = l->sample->d;
  const size_t blocks =
      (l->sample->rows + KNNWB_PARTITION_BLOCK_ROWS - 1) / KNNWB_PARTITION_BLOCK_ROWS;
  double *mean = g_new(double, d);
  for (size_t c = first; c < last; c++) {
    size_t count = 0;
    memset(mean, 0, d * sizeof(double));
    for (size_t b = 0; b < blocks; b++) {
      if (l->count[b * m + c] == 0)
        continue;
      count += l->count[b * m + c];
      const double *sum = l->sum + (b * m + c) * d;
      for (size_t j = 0; j < d; j++)
        mean[j] += sum[j];
    }
    for (size_t j = 0; count > 0 && j < d; j++)
      l->centroid[c * d + j] = mean[j] / (double)count;
  }
  g_free(mean);
}

/* Lloyd rounds on the sample (centroids of no sample row stay where they are); returns how many
 * moved the centroids. Each mean adds the sums of fixed blocks of rows in block order, so it is
 * the same for any number of threads; the blocks' sums are made on the threads that assign their
 * rows, from rows still in cache (a pass of its own over the sample was memory-bound: 2 threads no
 * faster than 1). Labels the same as the round before's give the same means, so that no later
 * round would change a bit: the rounds stop there (30 centroids on 50 blobs settled after 4). */
static int knnwb_partition_lloyd(KnnwbPartitionBlock *sample, size_t m, int threads,
                                 double *centroid, double *centroid_sq, int32_t *label)
{
  const size_t s = sample->rows,
               blocks = (s + KNNWB_PARTITION_BLOCK_ROWS - 1) / KNNWB_PARTITION_BLOCK_ROWS;
  /* (only the sums of centroids with rows in a block are written: most of a block's room stays
   * untouched when there are many centroids) */
  KnnwbPartitionLabel l = {.sample = sample,
                           .centroid = centroid,
                           .centroid_sq = centroid_sq,
                           .m = m,
                           .label = label,
                           .sum = g_new(double, blocks *m * sample->d),
                           .count = g_new(size_t, blocks * m)};
  int32_t *before = g_new(int32_t, s);
  int round = 0;
  for (; round < KNNWB_PARTITION_LLOYD_ROUNDS; round++) {
    knnwb_partition_label(&l, threads);
    if (round > 0 && memcmp(before, label, s * sizeof(int32_t)) == 0)
      break; /* the centroids and labels are the last round's */
    memcpy(before, label, s * sizeof(int32_t));
    knnwb_parallel_for(threads, m, MAX((size_t)1, m / (4 * (size_t)MAX(threads, 1))),
                       knnwb_partition_means, &l);
  }
  g_free(before);
  g_free(l.sum);
  g_free(l.count);
  l.sum = NULL;
  knnwb_partition_label(&l, threads); /* (the products into the sample this time) */
  return round;
}

size_t knnwb_partition_sample_rows(size_t n, size_t d)
{
  return MIN(n, MIN((size_t)32768, MAX((size_t)4096, KNNWB_PARTITION_SAMPLE_VALUES / MAX(d, 1))));
}

typedef struct {
  KnnwbPartitionBlock *sample;
  const KnnwbMatrix *data;
  KnnwbMetric metric;
  const int64_t *rows;
  gint failed;
} KnnwbPartitionSampleFill;

/* Sample rows [first, last) in place, through a block that views them (no dot products). */
static void knnwb_partition_sample_fill(size_t first, size_t last, void *data)
{
  KnnwbPartitionSampleFill *f = data;
  const size_t d = f->sample->d;
  KnnwbPartitionBlock view = {
      .cap = last - first, .d = d, .v = f->sample->v + first * d, .v_sq = f->sample->v_sq + first};
  if (!knnwb_partition_block_fill(&view, f->metric, f->data, first, last, f->rows, NULL, 0))
    g_atomic_int_set(&f->failed, 1);
}

gboolean knnwb_partition_sample_init(KnnwbPartitionBlock *sample, const KnnwbMatrix *data,
                                     KnnwbMetric metric, size_t s, size_t m_max, int threads)
{
  const size_t n = data->n_rows, d = data->n_cols;
  int64_t *rows = g_new(int64_t, s);
  for (size_t t = 0; t < s; t++)
    rows[t] = (int64_t)knnwb_partition_sample_at(n, s, t);
  gboolean ok = knnwb_partition_block_init(sample, s, m_max, d);
  if (ok) {
    KnnwbPartitionSampleFill f = {sample, data, metric, rows, 0};
    sample->rows = s;
    knnwb_parallel_for(threads, s, KNNWB_PARTITION_BLOCK_ROWS, knnwb_partition_sample_fill, &f);
    if (f.failed) {
      knnwb_partition_block_clear(sample);
      ok = FALSE;
    }
  }
  g_free(rows);
  return ok;
}

int knnwb_partition_kmeans(KnnwbPartitionBlock *sample, size_t m, int threads, double *centroid,
                           double *centroid_sq, int32_t *label)
{
  knnwb_partition_seed(sample, m, threads, centroid);
  return knnwb_partition_lloyd(sample, m, threads, centroid, centroid_sq, label);
}

typedef struct {
  KnnwbPartition *p;
  const KnnwbMatrix *data;
  const volatile gint *cancel;
  size_t first; /* rows first + [from, to) of a block */
  GMutex lock;
  gint failed;
} KnnwbPartitionAssign;

/* Rows first + [from, to) to their nearest centroid, in blocks of KNNWB_PARTITION_BLOCK_ROWS (one
 * thread is given every row at once: one block of them all took n m doubles); the radii grow to
 * their upper distances. */
static void knnwb_partition_assign_rows(size_t from, size_t to, void *data)
{
  KnnwbPartitionAssign *a = data;
  KnnwbPartition *p = a->p;
  KnnwbPartitionBlock block;
  double *radius = g_try_new0(double, p->m);
  if (radius == NULL ||
      !knnwb_partition_block_init(&block, MIN(to - from, KNNWB_PARTITION_BLOCK_ROWS), p->m, p->d)) {
    g_free(radius);
    g_atomic_int_set(&a->failed, 1);
    return;
  }
  for (size_t next = from; next < to; next += KNNWB_PARTITION_BLOCK_ROWS) {
    const size_t first = a->first + next, last = a->first + MIN(to, next + block.cap);
    if (g_atomic_int_get(&a->failed) || (a->cancel != NULL && g_atomic_int_get(a->cancel)) ||
        !knnwb_partition_block_fill(&block, p->metric, a->data, first - p->data_first,
                                    last - p->data_first, NULL, p->centroid, p->m)) {
      g_atomic_int_set(&a->failed, 1);
      break;
    }
    for (size_t r = 0; r < block.rows; r++) {
      const size_t c = knnwb_partition_nearest(&block, p->centroid_sq, p->m, r);
      double lower, upper;
      knnwb_partition_block_bounds(&block, p->metric, p->centroid_sq, r, c, &lower, &upper);
      p->cluster_of[first + r] = (int32_t)c;
      *knnwb_partition_reach(p, first + r) = upper;
      radius[c] = MAX(radius[c], upper);
    }
  }
  g_mutex_lock(&a->lock);
  for (size_t c = 0; c < p->m; c++)
    p->radius[c] = MAX(p->radius[c], radius[c]);
  g_mutex_unlock(&a->lock);
  knnwb_partition_block_clear(&block);
  g_free(radius);
}

/* The ranks' blocks of cluster_of made whole on every rank, and their radii the largest (radii
 * are not negative, so their bits order as integers do). FALSE when a rank failed. */
static gboolean knnwb_partition_assign_share(KnnwbPartition *p, const KnnwbKnnGroup *group,
                                             size_t first, size_t last, gboolean ok)
{
  if (!group->agree(group, ok, NULL))
    return FALSE;
  size_t *bytes = g_new(size_t, (size_t)group->size);
  for (int r = 0; r < group->size; r++) {
    size_t from, to;
    knnwb_partition_block_of(p, group, r, &from, &to);
    bytes[r] = (to - from) * sizeof(int32_t);
  }
  int32_t *mine = g_memdup2(p->cluster_of + first, (last - first) * sizeof(int32_t));
  int64_t *radius = g_new(int64_t, p->m);
  memcpy(radius, p->radius, p->m * sizeof(int64_t));
  ok = knnwb_knn_group_gather_bytes(group, mine, bytes, p->cluster_of, NULL) &&
       group->reduce(group, radius, p->m, KNNWB_GROUP_MAX, NULL);
  memcpy(p->radius, radius, p->m * sizeof(int64_t));
  g_free(radius);
  g_free(mine);
  g_free(bytes);
  return ok;
}

/* Every row to its nearest centroid (in a group: each rank its block, p->reach_first ..
 * p->reach_last, then the cells shared); FALSE on a
 * row without direction, memory or cancel (on every rank of a group alike). */
static gboolean knnwb_partition_assign(KnnwbPartition *p, const KnnwbMatrix *data,
                                       const volatile gint *cancel, const KnnwbKnnGroup *group,
                                       const int *gpus, int n_gpus)
{
  const size_t first = p->reach_first, last = p->reach_last;
  const gint64 start = g_get_monotonic_time();
  KnnwbPartitionAssign a = {.p = p, .data = data, .cancel = cancel, .first = first};
  memset(p->radius, 0, p->m * sizeof(double));
  const gboolean shared_cores = group != NULL && group->local_size > 1;
  if (!knnwb_partition_assign_gpu(p, data, first, last, cancel, gpus, n_gpus, shared_cores)) {
    g_mutex_init(&a.lock);
    knnwb_parallel_for(p->threads, last - first, KNNWB_PARTITION_BLOCK_ROWS,
                       knnwb_partition_assign_rows, &a);
    g_mutex_clear(&a.lock);
    g_debug("knnwb: partition: %zu rows to their nearest of %zu centroids in %.3f s", last - first,
            p->m, (double)(g_get_monotonic_time() - start) / 1e6);
  }
  if (group != NULL)
    return knnwb_partition_assign_share(p, group, first, last, !a.failed);
  return !a.failed;
}

/* Rows per chunk of the passes over every row's cell below (on p->threads threads). */
#define KNNWB_PARTITION_CELL_ROWS ((size_t)1 << 18)

typedef struct {
  KnnwbPartition *p;
  size_t *count;           /* per cluster: its rows (added under the lock) */
  const int32_t *renumber; /* per cluster: its new number, or -1 */
  GArray *moved;           /* the rows of dropped clusters (under the lock) */
  GMutex lock;
} KnnwbPartitionCells;

static void knnwb_partition_count_cells(size_t first, size_t last, void *data)
{
  KnnwbPartitionCells *x = data;
  const KnnwbPartition *p = x->p;
  size_t *count = g_new0(size_t, p->m);
  for (size_t i = first; i < last; i++)
    count[p->cluster_of[i]]++;
  g_mutex_lock(&x->lock);
  for (size_t c = 0; c < p->m; c++)
    x->count[c] += count[c];
  g_mutex_unlock(&x->lock);
  g_free(count);
}

static void knnwb_partition_renumber_cells(size_t first, size_t last, void *data)
{
  const KnnwbPartitionCells *x = data;
  for (size_t i = first; i < last; i++)
    x->p->cluster_of[i] = x->renumber[x->p->cluster_of[i]];
}

static void knnwb_partition_find_moved(size_t first, size_t last, void *data)
{
  KnnwbPartitionCells *x = data;
  GArray *found = g_array_new(FALSE, FALSE, sizeof(int64_t));
  for (size_t i = first; i < last; i++)
    if (x->p->cluster_of[i] < 0) {
      const int64_t row = (int64_t)i;
      g_array_append_val(found, row);
    }
  g_mutex_lock(&x->lock);
  g_array_append_vals(x->moved, found->data, found->len);
  g_mutex_unlock(&x->lock);
  g_array_free(found, TRUE);
}

static gint knnwb_partition_row_order(gconstpointer a, gconstpointer b)
{
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Drops the centroids of clusters with at most k rows and renumbers the rest in their order: each
 * row of a dropped cluster gets -1, every other row its cluster's new number, and the kept radii
 * move with their clusters. TRUE when some were dropped. O(n / threads + m d). */
static gboolean knnwb_partition_drop_small(KnnwbPartition *p, size_t k)
{
  KnnwbPartitionCells x = {.p = p, .count = g_new0(size_t, p->m)};
  g_mutex_init(&x.lock);
  knnwb_parallel_for(p->threads, p->n, KNNWB_PARTITION_CELL_ROWS, knnwb_partition_count_cells, &x);
  int32_t *renumber = g_new(int32_t, p->m);
  size_t kept = 0;
  for (size_t c = 0; c < p->m; c++) {
    if (x.count[c] <= k) {
      renumber[c] = -1;
      continue;
    }
    memmove(p->centroid + kept * p->d, p->centroid + c * p->d, p->d * sizeof(double));
    p->centroid_sq[kept] = p->centroid_sq[c];
    p->radius[kept] = p->radius[c];
    renumber[c] = (int32_t)kept++;
  }
  const gboolean dropped = kept < p->m;
  x.renumber = renumber;
  if (dropped)
    knnwb_parallel_for(p->threads, p->n, KNNWB_PARTITION_CELL_ROWS, knnwb_partition_renumber_cells,
                       &x);
  g_mutex_clear(&x.lock);
  g_free(renumber);
  g_free(x.count);
  p->m = kept;
  return dropped;
}

/*
 * The rows of dropped clusters (cluster_of -1) to their nearest kept centroid, the radii grown to
 * them: what a full pass over the kept centroids would give, bit for bit, since every other row's
 * nearest centroid is kept (ties still go to the lower one: the order is kept) and its bounds do
 * not change. Those rows are at most k a dropped cluster: found on threads, then one thread takes
 * them all, in row order, on every rank of a group alike. FALSE on a row without direction or
 * memory.
 */
static gboolean knnwb_partition_assign_moved(KnnwbPartition *p, const KnnwbMatrix *data)
{
  KnnwbPartitionCells x = {.p = p, .moved = g_array_new(FALSE, FALSE, sizeof(int64_t))};
  g_mutex_init(&x.lock);
  knnwb_parallel_for(p->threads, p->n, KNNWB_PARTITION_CELL_ROWS, knnwb_partition_find_moved, &x);
  g_mutex_clear(&x.lock);
  GArray *moved = x.moved;
  g_array_sort(moved, knnwb_partition_row_order);
  /* (a split rank holds its block's rows alone: it takes those, and the ranks share the cells) */
  size_t kept = 0;
  for (size_t t = 0; t < moved->len; t++) {
    const int64_t row = g_array_index(moved, int64_t, t);
    if ((size_t)row >= p->data_first && (size_t)row - p->data_first < data->n_rows)
      g_array_index(moved, int64_t, kept++) = row - (int64_t)p->data_first;
  }
  g_array_set_size(moved, (guint)kept);
  KnnwbPartitionBlock block;
  gboolean ok =
      moved->len == 0 ||
      knnwb_partition_block_init(&block, MIN(moved->len, KNNWB_PARTITION_BLOCK_ROWS), p->m, p->d);
  for (size_t next = 0; ok && next < moved->len; next += KNNWB_PARTITION_BLOCK_ROWS) {
    const int64_t *rows = &g_array_index(moved, int64_t, next);
    const size_t count = MIN(moved->len - next, KNNWB_PARTITION_BLOCK_ROWS);
    ok = knnwb_partition_block_fill(&block, p->metric, data, 0, count, rows, p->centroid, p->m);
    for (size_t r = 0; ok && r < block.rows; r++) {
      const size_t c = knnwb_partition_nearest(&block, p->centroid_sq, p->m, r);
      double lower, upper;
      knnwb_partition_block_bounds(&block, p->metric, p->centroid_sq, r, c, &lower, &upper);
      const size_t i = p->data_first + (size_t)rows[r];
      p->cluster_of[i] = (int32_t)c;
      if (i >= p->reach_first && i < p->reach_last) /* (ranks holding every row: their block's) */
        *knnwb_partition_reach(p, i) = upper;
      p->radius[c] = MAX(p->radius[c], upper);
    }
  }
  if (moved->len > 0)
    knnwb_partition_block_clear(&block);
  g_array_free(moved, TRUE);
  return ok;
}

/* A counting sort by group on a team: each thread counts the groups of its static range of rows,
 * then writes its rows at its own offsets in each group (the groups of the threads before it
 * first), so that every group's rows come out ascending, as one thread would leave them. */
typedef struct {
  KnnwbPartition *p;
  size_t *count; /* per thread, per group: its rows, then its first slot */
} KnnwbPartitionIndex;

static void knnwb_partition_index_count(int t, int n_threads, void *data)
{
  const KnnwbPartitionIndex *x = data;
  const KnnwbPartition *p = x->p;
  size_t first, last, *count = x->count + (size_t)t * p->groups;
  knnwb_team_range(p->n, t, n_threads, &first, &last);
  memset(count, 0, p->groups * sizeof(size_t));
  for (size_t i = first; i < last; i++)
    count[p->group_of[p->cluster_of[i]]]++;
}

static void knnwb_partition_index_place(int t, int n_threads, void *data)
{
  const KnnwbPartitionIndex *x = data;
  KnnwbPartition *p = x->p;
  size_t first, last, *next = x->count + (size_t)t * p->groups;
  knnwb_team_range(p->n, t, n_threads, &first, &last);
  for (size_t i = first; i < last; i++)
    p->members[next[p->group_of[p->cluster_of[i]]]++] = (int64_t)i;
}

void knnwb_partition_index(KnnwbPartition *p)
{
  /* a thread per 256 Ki rows at most: below that the counts cost more than they save */
  const int threads = (int)MAX(1, MIN((size_t)MAX(p->threads, 1), p->n >> 18));
  KnnwbPartitionIndex x = {.p = p, .count = g_new(size_t, (size_t)threads * p->groups)};
  knnwb_team_run(threads, knnwb_partition_index_count, &x);
  size_t at = 0;
  for (size_t g = 0; g < p->groups; g++) {
    p->start[g] = at;
    for (int t = 0; t < threads; t++) {
      const size_t rows = x.count[(size_t)t * p->groups + g];
      x.count[(size_t)t * p->groups + g] = at;
      at += rows;
    }
  }
  p->start[p->groups] = at;
  knnwb_team_run(threads, knnwb_partition_index_place, &x);
  g_free(x.count);
}

gboolean knnwb_partition_assign_all(KnnwbPartition *p, const KnnwbMatrix *data, size_t k,
                                    const volatile gint *cancel, const KnnwbKnnGroup *group,
                                    const int *gpus, int n_gpus)
{
  p->radius = g_try_new(double, p->m);
  p->cluster_of = g_try_new(int32_t, p->n);
  p->reach_first = 0;
  p->reach_last = p->n;
  if (group != NULL)
    knnwb_partition_block_of(p, group, group->rank, &p->reach_first, &p->reach_last);
  p->reach = g_try_new(double, MAX(p->reach_last - p->reach_first, (size_t)1));
  p->start = g_try_new(size_t, p->m + 1);
  p->members = g_try_new(int64_t, p->n);
  gboolean ok = p->radius != NULL && p->cluster_of != NULL && p->reach != NULL &&
                p->start != NULL && p->members != NULL && p->m >= 2;
  if (group != NULL && !group->agree(group, ok, NULL))
    ok = FALSE;
  ok = ok && knnwb_partition_assign(p, data, cancel, group, gpus, n_gpus);
  /* Dropping small clusters moves their rows to others, whose counts only grow: once is enough. */
  if (ok && knnwb_partition_drop_small(p, k)) {
    ok = p->m >= 2 && knnwb_partition_assign_moved(p, data);
    if (group != NULL && p->block_start != NULL) /* (split ranks: each moved its block's rows) */
      ok = knnwb_partition_assign_share(p, group, p->reach_first, p->reach_last, ok);
    else if (group != NULL && !group->agree(group, ok, NULL))
      ok = FALSE;
  }
  if (ok) {
    p->group_of = g_new(int32_t, p->m);
    for (size_t c = 0; c < p->m; c++)
      p->group_of[c] = (int32_t)c;
    p->groups = p->m;
    knnwb_partition_index(p);
  } else
    knnwb_partition_clear(p);
  return ok;
}

void knnwb_partition_clear(KnnwbPartition *p)
{
  g_clear_pointer(&p->centroid, g_free);
  g_clear_pointer(&p->centroid_sq, g_free);
  g_clear_pointer(&p->radius, g_free);
  g_clear_pointer(&p->cluster_of, g_free);
  g_clear_pointer(&p->reach, g_free);
  p->reach_first = p->reach_last = 0;
  g_clear_pointer(&p->group_of, g_free);
  g_clear_pointer(&p->start, g_free);
  g_clear_pointer(&p->members, g_free);
  g_clear_pointer(&p->block_start, g_free);
  p->m = p->groups = 0;
}

void knnwb_partition_block_of(const KnnwbPartition *p, const KnnwbKnnGroup *group, int r,
                              size_t *first, size_t *last)
{
  if (p->block_start == NULL) {
    knnwb_knn_group_rows(p->n, r, group->size, first, last);
    return;
  }
  *first = p->block_start[r];
  *last = p->block_start[r + 1];
}
