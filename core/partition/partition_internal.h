/* core/partition/'s own pieces: the bound space and the clusters (partition_space.c,
 * partition_build.c), the choice (partition_plan.c), the search (partition.c), over ranks
 * (partition_ranks.c, partition_combine.c) and for split ranks (partition_gather.c). Read only
 * here. */
#ifndef KNNWB_PARTITION_INTERNAL_H
#define KNNWB_PARTITION_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <glib.h>
#include <knnwb/knn.h>
#include <knnwb/knn_group.h>
#include <knnwb/matrix.h>
#include "engine/engine.h"

/* Rows a lock of phase two's merges covers (KnnwbPartitionRun.stripes). */
#define KNNWB_PARTITION_STRIPE_ROWS ((size_t)16384)
/* Below this many rows the automatic choice keeps the plain search (knnwb_partition_enough_rows):
 * on GPUs, whose plain search of 262,144 rows takes well under a second, and on the CPU, whose
 * sub-searches cost little. */
#define KNNWB_PARTITION_MIN_ROWS_GPU ((size_t)262144)
#define KNNWB_PARTITION_MIN_ROWS_CPU ((size_t)40000)
/* The automatic choice partitions when the sample says at most this share of the plain search's
 * work remains (and gives up after the clusters' own lists when what remains is more than the
 * plain search's whole work). On one GPU alone the limit is a little higher: there the plain
 * search has no second GPU to gain from, while the partitioned one, whose fixed parts are on the
 * host, gains little from it. 2,000,000 x 50 overlapping clusters, knn step against the plain
 * search's: 61.6% expected, 0.77 on one H200 and 1.0 on two; 65.1% expected, 1.03 on one. */
#define KNNWB_PARTITION_SAMPLE_SHARE 0.6
#define KNNWB_PARTITION_SAMPLE_SHARE_ONE_GPU 0.63

typedef enum { KNNWB_PARTITION_AUTO, KNNWB_PARTITION_OFF, KNNWB_PARTITION_ON } KnnwbPartitionMode;

/* The automatic choice's limit on the expected share of the plain search's work, for a search on
 * the GPU (gpu) or the CPU, by MPI ranks (which add GPUs to the plain search, and must agree), on
 * `gpus` GPUs (0: not known, taken as several). O(1). */
double knnwb_partition_share_limit_of(gboolean gpu, gboolean ranks, int gpus);
/* Whether n rows are enough for the automatic choice: the GPUs' floor where options' search is
 * to run on GPUs, else the CPU's. The backend is asked only from the CPU's floor on, so that
 * smaller runs do not wait for the GPUs' count here. O(1) past that count. */
gboolean knnwb_partition_enough_rows(const KnnwbKnnOptions *options, size_t n);

/*
 * The rows split into m cells (k-means clusters), in the bound space of the metric: the rows
 * themselves for euclidean; centred (pearson family) or not (cosine) and scaled to norm 1
 * otherwise, where the chord |v - w| = sqrt(2 d) for the metric's distance d (abs-pearson: the
 * nearer of w and -w). Distances to centroids come with a rounding margin, so that lower and
 * upper bounds are bounds. The cells are searched in groups (one or more cells each: the
 * clusters of the search); a row is bounded away from a group when it is from each of its cells.
 */
typedef struct {
  KnnwbMetric metric;
  size_t n, d, m;
  size_t groups;
  size_t tried; /* cluster counts knnwb_partition_choose tried (k-means fitted) */
  int threads;
  double *centroid;    /* m x d */
  double *centroid_sq; /* m: |c|^2 */
  double *radius;      /* m: at least the distance of every member to its centroid */
  int32_t *cluster_of; /* n: each row's cell */
  /* An upper bound of each row's distance to its cell's centroid, for the rows [reach_first,
   * reach_last) this process assigned (its block in a group of ranks: nothing else reads them),
   * row i at reach[i - reach_first] (knnwb_partition_reach). */
  double *reach;
  size_t reach_first, reach_last;
  /* Where the rows come from: data's first row is row data_first (split ranks: their block's
   * first; else 0), and in a group block_start (size + 1 entries) gives each rank's block. Set
   * only for split ranks that keep to their blocks (knnwb_partition_split_run; NULL:
   * knnwb_knn_group_rows' even blocks of rows every rank holds), so it is what tells them apart,
   * the same on every rank: a rank's block may hold every row while the others hold none. */
  size_t data_first;
  size_t *block_start;
  int32_t *group_of; /* m: each cell's group */
  size_t *start;     /* groups + 1: each group's range in members */
  int64_t *members;  /* n: group by group, rows ascending within each */
} KnnwbPartition;

/* Where row i's reach is (reach_first <= i < reach_last). O(1). */
static inline double *knnwb_partition_reach(const KnnwbPartition *p, size_t i)
{
  return p->reach + (i - p->reach_first);
}

/* A block of rows in the bound space with their dot products with every centroid. */
typedef struct {
  size_t rows, cap, m, d;
  double *v;    /* cap x d */
  double *v_sq; /* cap */
  double *dot;  /* cap x m */
} KnnwbPartitionBlock;

/* The row x (d floats) in the bound space, into v; FALSE when x has no direction (a constant row
 * for the pearson family, a zero row for cosine): such rows are not partitioned. */
gboolean knnwb_partition_space_row(KnnwbMetric metric, const float *x, size_t d, double *v);

/* The squared distances of row x to rows y[0 .. 4) (sign 1), or to their negations (sign -1), d
 * values each, into sq: each summed in column order, as one pair at a time would be (four chains
 * of additions keep the core busy). Inline, so that a constant sign costs nothing. O(d). */
static inline void knnwb_partition_sq_distances4(const double *x, const double *const y[4],
                                                 size_t d, double sign, double sq[4])
{
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  for (size_t j = 0; j < d; j++) {
    const double e0 = x[j] - sign * y[0][j], e1 = x[j] - sign * y[1][j];
    const double e2 = x[j] - sign * y[2][j], e3 = x[j] - sign * y[3][j];
    s0 += e0 * e0;
    s1 += e1 * e1;
    s2 += e2 * e2;
    s3 += e3 * e3;
  }
  sq[0] = s0;
  sq[1] = s1;
  sq[2] = s2;
  sq[3] = s3;
}

/* The chord (bound-space distance) that any pair at engine distance at most distance can have,
 * rounding of both included. */
double knnwb_partition_chord_limit(KnnwbMetric metric, double distance, size_t d);

gboolean knnwb_partition_block_init(KnnwbPartitionBlock *block, size_t cap, size_t m, size_t d);
/* Room in block->dot for m centroids a row (block->m becomes m when larger; the products are
 * then stale until the next knnwb_partition_block_dots). FALSE when memory is short. The
 * choice grows its sample's room count by count: room for the largest count at once (32 Ki rows
 * x 748 centroids, 196 MB) cost 0.1 s of page faults on a choice that stops at the first. */
gboolean knnwb_partition_block_reserve_dots(KnnwbPartitionBlock *block, size_t m);
void knnwb_partition_block_clear(KnnwbPartitionBlock *block);

/* Rows [first, last) of data (rows[t] instead when rows is not NULL) into the block, with their
 * dot products with the m centroids (knnwb_partition_block_dots). FALSE when a row has no
 * direction or a value that is not finite. */
gboolean knnwb_partition_block_fill(KnnwbPartitionBlock *block, KnnwbMetric metric,
                                    const KnnwbMatrix *data, size_t first, size_t last,
                                    const int64_t *rows, const double *centroid, size_t m);

/* dot[r * ld + j] = the sum over t of v[r d + t] centroid[j d + t], in order, for rows r < rows
 * and centroids j < m (partition_dots.c): the same bits on every CPU, width and blocking. O(rows m
 * d) time, O(min(m, 32 Ki / d) d) memory. */
void knnwb_partition_dots(const double *v, size_t rows, size_t d, const double *centroid, size_t m,
                          double *dot, size_t ld);
/* The block's dot products with the m centroids (m x d, row-major; NULL or m = 0: none). */
void knnwb_partition_block_dots(KnnwbPartitionBlock *block, const double *centroid, size_t m);
/* The same for rows [first, last) of the block only (the k-means splits rows over threads). */
void knnwb_partition_block_dots_rows(KnnwbPartitionBlock *block, const double *centroid, size_t m,
                                     size_t first, size_t last);

/* Lower and upper bounds of the chord between a row v and a centroid c from sq = |v|^2 + |c|^2
 * and dot = v.c (each as the rows' own sums make them); abs-pearson takes the nearer of c and -c.
 */
void knnwb_partition_pair_bounds(KnnwbMetric metric, size_t d, double sq, double dot, double *lower,
                                 double *upper);

/* The error margin of knnwb_partition_pair_bounds: |v|^2 + |c|^2 - 2 v.c in double errs by at most
 * about d units of roundoff times |v|^2 + |c|^2 (Cauchy-Schwarz), the rows' own rounding far less
 * than 1e-10. */
static inline double knnwb_partition_pair_margin(size_t d, double sq)
{
  return sq * (1e-10 + (4.0 * (double)d + 16.0) * (1.0 / 9007199254740992.0 /* 2^-53 */));
}

/* knnwb_partition_pair_bounds's lower bound alone, the same bits (the bounds pass's inner loop
 * needs no upper bound). */
static inline double knnwb_partition_pair_lower(KnnwbMetric metric, size_t d, double sq, double dot)
{
  const double plain = sq - 2.0 * dot;
  const double nearer = metric == KNNWB_METRIC_ABS_PEARSON ? MIN(plain, sq + 2.0 * dot) : plain;
  return sqrt(MAX(nearer - knnwb_partition_pair_margin(d, sq), 0.0));
}
/* v.c summed in order, one multiply and one add a component: the bits of knnwb_partition_dots. */
double knnwb_partition_row_dot(const double *v, const double *centroid, size_t d);
/* Cells past which the bounds pass does without its centroids' distances (m x m doubles). */
#define KNNWB_PARTITION_GAPS_MAX_CELLS ((size_t)2048)
/* Lower bounds of the distances between every two centroids (m x m, rounding included), for the
 * bounds pass's triangle test; NULL for abs-pearson (whose bound takes the nearer of c and -c),
 * one cell, more than KNNWB_PARTITION_GAPS_MAX_CELLS cells, or short memory. O(m^2 d). */
double *knnwb_partition_centroid_gaps(const KnnwbPartition *p);
/* Lower and upper bounds of the chord between row r of the block and centroid j (|c_j|^2 is
 * centroid_sq); abs-pearson takes the nearer of c_j and -c_j. */
void knnwb_partition_block_bounds(const KnnwbPartitionBlock *block, KnnwbMetric metric,
                                  const double *centroid_sq, size_t r, size_t j, double *lower,
                                  double *upper);

/* The clusters (partition_build.c). The sample's size for n rows of d values (at most 32 Ki rows
 * and 32 MiB of doubles). */
size_t knnwb_partition_sample_rows(size_t n, size_t d);
/* The row that an evenly spread sample of s of n rows takes t-th (t < s): ascending in t. */
static inline size_t knnwb_partition_sample_at(size_t n, size_t s, size_t t)
{
  return (size_t)((t * (uint64_t)n) / s);
}
/* How many of that sample's rows lie below row x (x <= n): the t with t n < x s. O(1); x s stays
 * below 2^55 for n < 2^40 and s <= 32 Ki. */
static inline size_t knnwb_partition_sample_below(size_t n, size_t s, size_t x)
{
  return n == 0 ? 0 : (size_t)MIN((uint64_t)s, ((uint64_t)x * s + n - 1) / n);
}
/* An evenly spread sample of s rows in the bound space (made on threads), room for the dot
 * products with up to m_max centroids; FALSE when a row has no direction or a value that is not
 * finite, or memory is short. */
gboolean knnwb_partition_sample_init(KnnwbPartitionBlock *sample, const KnnwbMatrix *data,
                                     KnnwbMetric metric, size_t s, size_t m_max, int threads);
/* k-means on the sample (k-means++ seeds from a fixed seed, a few Lloyd rounds) on threads, with
 * OpenBLAS set to one thread by the caller: m centroids (m x d), their squared norms, each sample
 * row's nearest (label); the sample's dot products are then those with these centroids. The same
 * centroids and labels, bit for bit, for any number of threads. Returns the Lloyd rounds that
 * moved the centroids (at most 8: fewer when the labels settled). O(rounds s m d) time,
 * O(s + m d) memory besides the sample's. */
int knnwb_partition_kmeans(KnnwbPartitionBlock *sample, size_t m, int threads, double *centroid,
                           double *centroid_sq, int32_t *label);
/* m k-means++ seeds (m x d, into centroid) from a fixed seed, among an evenly spread subset of
 * the sample's rows (4 per seed, at least 4096: the seeds only start the Lloyd rounds, and a subset
 * keeps their O(subset m d) cost small), on up to threads threads (partition_seed.c): the same
 * seeds, bit for bit, for any number. */
void knnwb_partition_seed(const KnnwbPartitionBlock *sample, size_t m, int threads,
                          double *centroid);
/* Every row to its nearest of p's centroids (p->m, p->centroid, p->centroid_sq set), the radii,
 * (in a group of ranks holding every row, not NULL: each rank its block, shared; collective, and
 * the same outcome on every rank),
 * cells of at most k rows dropped and their rows moved on, members indexed with one group a cell.
 * gpus, n_gpus: the GPUs of the rows' products with many centroids (knnwb_partition_assign_gpu).
 * FALSE (p cleared) when fewer than two cells remain, a row has no direction or a value that is
 * not finite, memory is short or
 * cancel is set. */
gboolean knnwb_partition_assign_all(KnnwbPartition *p, const KnnwbMatrix *data, size_t k,
                                    const volatile gint *cancel, const KnnwbKnnGroup *group,
                                    const int *gpus, int n_gpus);
void knnwb_partition_clear(KnnwbPartition *p);
/* Groups of p's cells (partition_group.c), indexed in p->start and p->members: starting from one
 * group a cell, two groups become one while the work model (knnwb_partition_work on the backend:
 * gpu or not) says that saves work, judged on a sample of rows and the cells each would visit;
 * at least two groups stay; none with KNNWB_PARTITION_GROUPS=off (comparisons, tests). Only the
 * speed depends on it. */
void knnwb_partition_group(KnnwbPartition *p, const KnnwbMatrix *data, size_t k, gboolean gpu);
/* p's members indexed by p->group_of (p->groups groups): each group's rows ascending, on up to
 * p->threads threads (the same members on any number). O(n + threads groups). */
void knnwb_partition_index(KnnwbPartition *p);

/* The most rows a split rank holds (its block, the rows it searches and their visitors): places in
 * run->slot are 32-bit. */
#define KNNWB_PARTITION_SPLIT_MAX_HELD ((size_t)INT32_MAX)

/* The rows a split rank holds besides its block (partition_split.c): the rows of the groups it
 * searches, then their visitors, d floats each. */
typedef struct {
  float *values;
  size_t rows;
} KnnwbPartitionHeld;

/*
 * One partitioned run (partition.c, partition_search.c). Sub-searches run on `workers` threads at
 * once, one or three a GPU (devices[w]) or, for a CPU run, one worker with every thread: small
 * groups keep one GPU busy only a few milliseconds, so GPUs share groups, not tiles.
 */
typedef struct {
  const KnnwbMatrix *data;
  const KnnwbKnnOptions *options;
  KnnwbPartition *p;
  KnnwbNeighbors *lists;
  size_t k, d;
  int workers, threads_per_worker;
  int gpus;             /* GPUs the workers share (0: a CPU run) */
  int *devices;         /* workers GPU ordinals, or NULL for a CPU run */
  int64_t *query_start; /* m + 1: each cluster's visitors in queries */
  int64_t *queries;
  /* In a group (options->group, partition_ranks.c): the rank searching each group in the phase
   * at hand (NULL alone), the rows this rank bounds, their k-th distances after phase one (row i
   * at kth[i - first], bits of non-negative doubles; NULL alone: the lists hold them), and in
   * phase two each visitor's (query_kth[t] for queries[t]; NULL alone). */
  int32_t *owner;
  /* The work model the ranks give groups out by (knnwb_partition_work): the GPU's where every
   * rank searches on GPUs, the same on every rank (knnwb_partition_ranks_assign_own). */
  gboolean owner_gpu;
  size_t first, last;
  int64_t *kth;
  double *query_kth;
  /* Split ranks (partition_split.c) hold only their block's rows (data) and those they search
   * (held): slot[i] is row i's place in data, then held, and in lists (-1: not held here), the
   * block's rows first, in order; 4 bytes a row of the whole input, so a rank holds at most
   * KNNWB_PARTITION_SPLIT_MAX_HELD rows. NULL: every row in its own place in data (one process,
   * ranks that hold every row). */
  int32_t *slot;
  /* A split rank's lists put its block's rows by the rank that searches them in phase one: row i
   * of the block (slot[i] = i - first) has its list at block_list[i - first], the rows this rank
   * searches first, then the others, each in row order; the rows held past the block keep their
   * slot. The others' lists are unset (n_found -1, read as empty) until a visit or the combining
   * writes them, so a rank touches only the lists it writes: lists in row order put every page of
   * the block's lists under phase one (a page holds 17 rows' lists at k = 30). Put back in row
   * order as the combining brings the others' records for them (partition_combine.c). NULL: lists
   * at the slots, every one set. */
  int32_t *block_list;
  size_t block_searched; /* the block's rows this rank searches in phase one */
  /* Per rank r, size + 1: the places of the rows of r's block it searches in phase one begin at
   * held_first[r] (those of phase two come after held_first[size]); NULL but for split ranks. */
  size_t *held_first;
  KnnwbPartitionHeld held;
  GMutex lock; /* the first error, the lists' counters */
  /* Phase two's merges into the lists (and reads of a row's k-th there), by stripes of
   * KNNWB_PARTITION_STRIPE_ROWS rows: rows visit several groups that several workers search. */
  GMutex *stripes;
  size_t n_stripes;
  GMutex progress_lock;
  double done, total;     /* pairs */
  double *inflight;       /* per worker: its sub-search's pairs, and their share done */
  KnnwbMarginMemo margin; /* one margin plan for every sub-search (engine.h) */
  int keep;               /* KNNWB_PARTITION_KEEP_*: what sub-searches hand to the next */
  gboolean bounds_on_gpu; /* the bounds pass ran on the GPUs (partition_visits_gpu.c) */
  GError *error;
  gint failed;
} KnnwbPartitionRun;

/* Row i's place in run->data, and in run->lists where run->block_list is NULL (a row this rank
 * holds). O(1). */
static inline size_t knnwb_partition_at(const KnnwbPartitionRun *run, size_t i)
{
  return run->slot != NULL ? (size_t)run->slot[i] : i;
}

/* Row i's place in run->lists (a row this rank holds): its slot, or for a split rank's block row
 * its block_list place. O(1). */
static inline size_t knnwb_partition_list_at(const KnnwbPartitionRun *run, size_t i)
{
  const size_t at = knnwb_partition_at(run, i);
  return run->block_list != NULL && at < run->data->n_rows ? (size_t)run->block_list[at] : at;
}

/* Row i's d values (a row this rank holds). O(1). */
static inline const float *knnwb_partition_row(const KnnwbPartitionRun *run, size_t i)
{
  const size_t at = knnwb_partition_at(run, i), rows = run->data->n_rows;
  return at < rows ? run->data->values + at * run->d : run->held.values + (at - rows) * run->d;
}

/*
 * Split ranks (partition_split.c: each holds its block of rows, run->data, and brings the rows it
 * searches from the others' blocks). Each call is collective; FALSE comes with the same error on
 * every rank (memory, the group's errors).
 */
/* The rows of the groups this rank searches in phase one (run->owner) from the blocks that hold
 * them: run->slot, run->held, and run->lists for every row held (unset: phase one writes its
 * groups' rows, knnwb_partition_ranks_empty_others the rest). O(n) besides the rows. */
gboolean knnwb_partition_split_own_rows(KnnwbPartitionRun *run, GError **error);
/* Once run->queries are the visitors of the groups this rank searches (phase two): those it does
 * not hold from their blocks, with empty lists. O(n + visitors) besides the rows. */
gboolean knnwb_partition_split_visitor_rows(KnnwbPartitionRun *run, GError **error);
/* The partitioned search of split ranks that keep to their blocks (block: this rank's rows; the
 * ranks' counts and the gathered sample as partition_gather.c made them, p picked on it): every
 * row's cell, the groups, both phases, each rank's block's lists in *result (NULL: given up, the
 * split search runs). Takes *sample: freed (and NULL) once the groups are made, so that it does
 * not stay through the search. */
gboolean knnwb_partition_split_run(const KnnwbMatrix *block, KnnwbMatrix **sample,
                                   const int64_t *counts, KnnwbPartition *p,
                                   const KnnwbKnnOptions *options, KnnwbPartitionMode mode,
                                   gboolean made, double expected, gint64 start,
                                   KnnwbNeighbors **result, GError **error);

/* Rows a batch of knnwb_partition_order_to puts in order before the pages it read are given back
 * (31 MB of lists at k = 30). */
#define KNNWB_PARTITION_ORDER_BATCH ((size_t)1 << 16)
/* A split rank's block lists going into row order, batch by batch (knnwb_partition_order_to). */
typedef struct {
  KnnwbNeighbors *from;    /* the lists by who searched them (run->lists) */
  KnnwbNeighbors *ordered; /* the block's lists in row order, rows [0, done) set */
  const int32_t *place;    /* block row t's list at from's place[t] */
  size_t rows, searched, batch;
  size_t done;         /* rows put in order so far */
  size_t mine, others; /* rows of each run read (and given back) so far */
} KnnwbPartitionOrder;

/* Fresh, unset lists for a split rank's block in row order (rows rows from row first) into
 * *order->ordered, none copied yet. Block row t's list lies in lists at place[t]: the `searched`
 * rows this rank searched first, then the others, each run in row order (run->block_list).
 * FALSE: memory (nothing to free). O(1). */
gboolean knnwb_partition_order_begin(KnnwbPartitionOrder *order, KnnwbNeighbors *lists,
                                     size_t first, size_t rows, const int32_t *place,
                                     size_t searched, size_t batch);
/* Block rows up to row (exclusive; at most rows) put in order: those from order->done on copied
 * from order->from (unset ones, n_found -1, stay unset: nothing is written for them), batch rows
 * at a time, and the pages each batch read in order->from given back as it goes, so the block's
 * lists are held about once; order->from keeps its size (its pages past the block untouched). A
 * later merge into a row below order->done goes to order->ordered. O((row - done) k) on
 * threads. */
void knnwb_partition_order_to(KnnwbPartitionOrder *order, size_t row, int threads);
/* Lists [from, to) of lists, both arrays, given back to the system (knnwb_memory_give_back): read
 * as zeros afterwards. O(pages). */
void knnwb_partition_lists_give_back(const KnnwbNeighbors *lists, size_t from, size_t to);
/* The unset lists of lists (n_found -1) made empty. O(rows) besides them, on threads. */
void knnwb_partition_lists_empty_unset(KnnwbNeighbors *lists, int threads);

/* Rank r's block of p's rows in group: [*first, *last) (p->block_start, else
 * knnwb_knn_group_rows). O(1). */
void knnwb_partition_block_of(const KnnwbPartition *p, const KnnwbKnnGroup *group, int r,
                              size_t *first, size_t *last);

/* The bounds pass (partition_visits.c): phase two's queries among rows [run->first, run->last),
 * each group's visitors with rows ascending (run->query_start, run->queries), from each row's k-th
 * distance after phase one; *pairs: the pairs they will score. FALSE: memory or cancel.
 * O(n m) at worst, about O(n) on clustered data. */
gboolean knnwb_partition_visits(KnnwbPartitionRun *run, double *pairs);
/* The bounds pass of rows [run->first, run->last) on the run's GPUs (partition_visits_gpu.c),
 * when it has GPUs and many cells (KNNWB_PARTITION_GPU_BOUNDS=1 or 0: always, never): the same
 * run->query_start and run->queries as the CPU's pass. FALSE (both left NULL) when it does not
 * run or fails: the CPU's pass then runs. gap: knnwb_partition_centroid_gaps or NULL. */
gboolean knnwb_partition_visits_gpu(KnnwbPartitionRun *run, const double *gap);
/* Whether a pass over the rows' products with m centroids runs on a GPU (has_gpu): the
 * environment variable knob 1 or 0 says always or never; else from
 * KNNWB_PARTITION_GPU_MIN_CELLS cells (partition_visits_gpu.c). */
#define KNNWB_PARTITION_GPU_MIN_CELLS ((size_t)129)
gboolean knnwb_partition_gpu_wanted(const char *knob, gboolean has_gpu, size_t m);
/* The same rule for the assignment (partition_assign_gpu.c), with setting the value of
 * KNNWB_PARTITION_GPU_ASSIGN (NULL: unset); ranks that share the host's cores also take the GPU
 * from any number of cells where their CPU's assignment is long: shared_work is its multiply-adds
 * a thread (rows x cells x columns / threads; 0 for a process alone), from
 * KNNWB_PARTITION_GPU_ASSIGN_SHARED_WORK. */
#define KNNWB_PARTITION_GPU_ASSIGN_SHARED_WORK 2e9
gboolean knnwb_partition_assign_gpu_wanted(const char *setting, gboolean has_gpu, size_t m,
                                           double shared_work);
/* The KnnwbBoundSpace of a metric (kernels/knnwb_kernels.h). */
int knnwb_partition_bound_space(KnnwbMetric metric);
/* One GPU's share of a pass over rows on several GPUs at once (knnwb_partition_gpu_parts). */
typedef struct KnnwbPartitionGpuPart KnnwbPartitionGpuPart;
struct KnnwbPartitionGpuPart {
  size_t from, to;  /* rows [from, to) of the pass's */
  int device;       /* the GPU's ordinal */
  const void *pass; /* what the pass's work reads (its caller's) */
  void (*work)(KnnwbPartitionGpuPart *part);
  int status; /* KNNWB_KERNELS_OK or the failure, with message */
  char message[256];
};
/* Rows [0, rows) in n_gpus shares, share u on GPU devices[u] (devices NULL: u), each given to
 * work on a thread of its own at once (on the calling thread where a thread cannot start), then
 * joined: the per-GPU passes (partition_assign_gpu.c, partition_visits_gpu.c). FALSE with the
 * first failing share's "GPU d: message" in message. O(n_gpus) threads. */
gboolean knnwb_partition_gpu_parts(size_t rows, const int *devices, int n_gpus,
                                   void (*work)(KnnwbPartitionGpuPart *part), const void *pass,
                                   char *message, size_t message_size);
/* Rows [first, last) to their nearest centroid on the GPUs (partition_assign_gpu.c), a share each,
 * with many centroids or where ranks share the host's cores (shared_cores: a group's local_size
 * above 1), KNNWB_PARTITION_GPU_ASSIGN=1 or 0: always, never: p->cluster_of and
 * p->reach of those rows, and p->radius grown to their reaches, the CPU's values bit for bit.
 * gpus[0 .. n_gpus) are the GPUs' ordinals (gpus NULL: 0 .. n_gpus - 1; n_gpus -1: every GPU the
 * driver counts, which waits for its start; 0: none). FALSE when it does not run or fails (the
 * CPU's assignment then runs; p->radius untouched). */
gboolean knnwb_partition_assign_gpu(KnnwbPartition *p, const KnnwbMatrix *data, size_t first,
                                    size_t last, const volatile gint *cancel, const int *gpus,
                                    int n_gpus, gboolean shared_cores);
/* run->query_start and run->queries (each group's visitors, rows ascending) from the GPU's bits:
 * bit g % 64 of visits[r * words + g / 64] says that row run->first + r visits group g, for
 * r < rows. Two passes on threads. FALSE (both left NULL): memory. O(rows words + visits). */
gboolean knnwb_partition_visits_from_bits(KnnwbPartitionRun *run, const uint64_t *visits,
                                          size_t words, size_t rows);

/* What a worker's sub-searches reuse from its last one: GPU memory and cuBLAS handles
 * (knnwb_cuda_keep_begin), list arrays (knnwb_knn_result_keep_set). Both by default;
 * KNNWB_PARTITION_KEEP=0, device or host keeps none or one (comparisons). Only the speed depends
 * on it. */
#define KNNWB_PARTITION_KEEP_DEVICE 1
#define KNNWB_PARTITION_KEEP_HOST 2
int knnwb_partition_keep_wanted(void);
/** Sub-searches at once on each GPU for groups of at most largest rows of d columns: three, two
 * for groups above a million rows (KNNWB_PARTITION_GPU_WORKERS=N: N for any size), or one where
 * that many would not surely fit the user's GPU budget (0: none) or the least free memory of the
 * run's GPUs. Only the speed depends on it. O(1). */
int knnwb_partition_gpu_workers_for(size_t largest, size_t d, size_t budget, size_t least_free);

/* A sub-search of a partitioned run is about to run (begin) or has returned (end) on this thread:
 * between the two, knnwb_partition_self declines at once. The mark is the thread's own, so that
 * independent searches on other threads still partition; each worker thread sets its own. */
void knnwb_partition_sub_search_begin(void);
void knnwb_partition_sub_search_end(void);

/* Phase one: every cluster's rows among themselves, into run->lists (partition_search.c). */
gboolean knnwb_partition_own_lists(KnnwbPartitionRun *run, GError **error);
/* Phase two: every cluster against the rows of other clusters its bound cannot rule out
 * (run->query_start, run->queries), merged into their lists. */
gboolean knnwb_partition_visit_lists(KnnwbPartitionRun *run, GError **error);

/* Merges fi/fd (kf entries, sorted by (distance, row); rows through members when not NULL) into
 * the sorted list li/ld of k entries (empty slots: index -1), keeping the k best by (distance,
 * row); index and distance: room for k. The two must share no pair. */
void knnwb_partition_merge_list(int64_t *li, double *ld, size_t k, const int64_t *fi,
                                const double *fd, size_t kf, const int64_t *members, int64_t *index,
                                double *distance);

/*
 * The run over a group's ranks (partition_ranks.c); each call is collective, and FALSE comes with
 * the same error on every rank (a rank's own failures are agreed on).
 */
/* Whether every rank chose to partition with the same partition (*same); a digest of p is
 * compared, so ranks whose arithmetic differs (other CPUs) all take the search named otherwise
 * ("the plain search", or the split search of ranks that put their rows together). */
gboolean knnwb_partition_ranks_agree(const KnnwbKnnGroup *group, const KnnwbPartition *p,
                                     gboolean chosen, const char *otherwise, gboolean *same,
                                     GError **error);
/* Each of groups items to one of size ranks by work: largest first (ties: lower item) to the
 * rank where it ends soonest (ties: lower rank), counting extra[g * size + r] (NULL: none) as
 * more work of item g on rank r. The same on every rank. O(groups (log groups + size)). */
void knnwb_partition_ranks_assign(const double *work, const double *extra, size_t groups, int size,
                                  int32_t *owner);
/* Phase one's groups to the ranks (run->owner): see partition_ranks.c. Collective (the work
 * model is agreed). FALSE: the group's errors. */
gboolean knnwb_partition_ranks_assign_own(KnnwbPartitionRun *run, GError **error);
/* Row i's k-th distance after phase one: from run->kth in a group (a row this rank bounds), else
 * from its list. O(1). */
double knnwb_partition_kth(const KnnwbPartitionRun *run, size_t i);
/* The lists' rows of the groups other ranks search (run->owner) emptied: phase one writes only
 * this rank's, and phase two's merges and the combining read every row here. Disjoint from the
 * rows phase one writes, so it may run beside it. On up to threads threads, O(n k). */
void knnwb_partition_ranks_empty_others(KnnwbPartitionRun *run, int threads);
/* run->kth: the k-th distances of this rank's block (run->first .. run->last), each sent by the
 * rank that searched its group in phase one (run->owner) from its lists. O(n / size + groups size
 * log n) a rank, 8 bytes a row over the job. */
gboolean knnwb_partition_ranks_kth(KnnwbPartitionRun *run, GError **error);
/* After each rank found its block's visits (local_ok: it could), the job's: their pairs and count,
 * *give_up when a rank ran short of memory; otherwise run->owner becomes phase two's and each
 * rank's run->query_start and run->queries become the visitors of the groups it searches. */
gboolean knnwb_partition_ranks_visitors(KnnwbPartitionRun *run, gboolean local_ok,
                                        gboolean *give_up, double *pairs, double *visits,
                                        GError **error);
/* What one exchange between the ranks moves: send[r] (send_bytes[r]) to rank r, receive[r]
 * (receive_bytes[r]) from it. */
typedef struct {
  int size;
  char **send, **receive;
  size_t *send_bytes, *receive_bytes;
} KnnwbPartitionTransfer;
void knnwb_partition_transfer_init(KnnwbPartitionTransfer *t, int size);
/* Frees every buffer and the arrays. */
void knnwb_partition_transfer_clear(KnnwbPartitionTransfer *t);
/* The ranks agree that each allocated its sends (room; else *error says what: `what` could not
 * be allocated), then t->send goes out and t->receive is allocated and filled; the sends are
 * freed. FALSE (error set, the same on every rank) when a rank is short of memory. */
gboolean knnwb_partition_ranks_exchange(const KnnwbKnnGroup *group, KnnwbPartitionTransfer *t,
                                        gboolean room, const char *what, GError **error);
/* Bytes a rank sends in one round of what travels in bulk (partition_rounds.c), at most: the
 * shared blocks of that size are faulted in once and refilled every round. The group keeps blocks
 * up to 64 MiB a rank between calls (distributed/shared_window.c), so those of earlier exchanges
 * serve again. */
#define KNNWB_PARTITION_ROUND_BYTES ((size_t)32 << 20)
/* The rounds of one bulk exchange, the same on every rank: sizes[s * R + r] bytes of records of
 * `record` bytes go from rank s to rank r, q records of them a round at most (in order: round j
 * takes records [j q, (j + 1) q) of each pair). */
typedef struct {
  const size_t *sizes;
  size_t record, q, rounds;
  int size;
} KnnwbPartitionRounds;
/* The rounds for the sizes (the same on every rank) and the record's bytes, q agreed (the least
 * any rank asks: KNNWB_PARTITION_ROUND_BYTES, or the test hook KNNWB_PARTITION_ROUND_BYTES=N).
 * Collective; FALSE: the group's errors. O(R^2). */
gboolean knnwb_partition_rounds_plan(const KnnwbKnnGroup *group, const size_t *sizes, size_t record,
                                     KnnwbPartitionRounds *x, GError **error);
/* Records from rank s to rank r in round j (none to itself). O(1). */
size_t knnwb_partition_round_count(const KnnwbPartitionRounds *x, int s, int r, size_t j);
/* Where rank s's records for rank r lie in its round-j block, in bytes (ranks in order). O(R). */
size_t knnwb_partition_round_offset(const KnnwbPartitionRounds *x, int s, int r, size_t j);

/* Each rank's lists (its own and its visitors' pieces) to the ranks of their rows' blocks, merged
 * (partition_combine.c): *result holds this rank's block (options->group_own_rows) or every row.
 * Frees run->lists. */
gboolean knnwb_partition_ranks_combine(KnnwbPartitionRun *run, KnnwbNeighbors **result,
                                       GError **error);

/* The choice (partition_plan.c). */
/* Own-cluster sample rows compared with an evaluated row, at most (evenly spread). */
#define KNNWB_PARTITION_ESTIMATE_MEMBERS ((size_t)2048)
/* The sample rows [0, s) by cluster (label[t] < m): cluster c's rows, ascending, are
 * members[start[c] .. start[c + 1]). */
void knnwb_partition_sample_index(const int32_t *label, size_t s, size_t m, size_t *start,
                                  size_t *members);
/* The k-th chord of sample row t within its cluster, estimated from the cluster's sample rows
 * members[0 .. count) (at most KNNWB_PARTITION_ESTIMATE_MEMBERS of them, evenly spread) standing
 * for size rows; HUGE_VAL when too few. chord: room for KNNWB_PARTITION_ESTIMATE_MEMBERS. */
double knnwb_partition_estimate_limit(const KnnwbPartitionBlock *sample, KnnwbMetric metric,
                                      size_t t, const size_t *members, size_t count, double size,
                                      size_t k, double *chord);
KnnwbPartitionMode knnwb_partition_mode(void);
/* Work in pairs of the plain search: pairs scored plus a cost per sub-search (calls) and per row
 * searched (rows), on a GPU or on the CPU; and the plain search's own for n rows. */
double knnwb_partition_work(gboolean gpu, double pairs, double calls, double rows);
double knnwb_partition_plain_work(gboolean gpu, size_t n);
/* What a partition leaves to do: pairs scored, sub-searches (calls) and rows searched. */
typedef struct {
  double pairs, calls, rows;
} KnnwbPartitionLoad;
/* knnwb_partition_work of a load. */
double knnwb_partition_load_work(gboolean gpu, const KnnwbPartitionLoad *load);
/* The least load m clusters of n rows can leave (equal cluster sizes, no visits): no part of it
 * above the sample's estimate for any m clusters, and its work on either backend convex in m.
 * O(1). */
KnnwbPartitionLoad knnwb_partition_load_floor(size_t n, size_t m);
/* A sample's view of m clusters of n rows: its rows' labels and the centroids' squares. */
typedef struct {
  const KnnwbPartitionBlock *sample;
  const int32_t *label;
  const double *centroid_sq;
  size_t m, n, k;
  KnnwbMetric metric;
} KnnwbPartitionSampleView;
/* The load the sample estimates: cluster sizes scaled to n rows, their radii, and for a few
 * sample rows the k-th chord in their cluster (the j-th among its sample rows, j = k s / n) and
 * the rows of other clusters they would visit. O(s m + e (m + members) d) on threads. */
KnnwbPartitionLoad knnwb_partition_sample_load(const KnnwbPartitionSampleView *view, int threads);
/*
 * The clusters to search with, if any: k-means for a few cluster counts on a sample, each judged
 * by the work it would leave (pairs scored, plus what each sub-search and each row searched cost
 * on the backend: gpu or not), the cheapest kept in p (m, centroids) with *share, its work over
 * the plain search's. FALSE when no count applies (too few rows) or memory is short.
 */
gboolean knnwb_partition_choose(KnnwbPartition *p, const KnnwbMatrix *data, KnnwbMetric metric,
                                size_t k, int threads, gboolean gpu, double *share);
/* The pieces of one partitioned run that partition_gather.c shares (partition.c); otherwise names
 * the search that runs when the partition is not taken ("the plain search", "the split search"),
 * in the debug lines. The choice on sample (the sample of n rows: the data itself, or what split
 * ranks gathered of it) into p; *made: a choice was made, *chosen: it partitions (in a group, as
 * every rank says). FALSE: the group's errors. */
gboolean knnwb_partition_pick(KnnwbPartition *p, const KnnwbMatrix *sample, size_t n,
                              const KnnwbKnnOptions *options, KnnwbPartitionMode mode,
                              const char *otherwise, double *expected, gboolean *made,
                              gboolean *chosen, GError **error);
/* The partition p picked made whole on data: every row's cell, and the cells' groups (in a group
 * the ranks assign their blocks' rows and agree on the partition; split ranks, whose data is
 * their block from row p->data_first, join the cells on the gathered sample, else NULL: data's);
 * otherwise names the search that runs when it is not taken, in the debug lines. FALSE: the
 * group's errors. */
gboolean knnwb_partition_settle(KnnwbPartition *p, const KnnwbMatrix *data,
                                const KnnwbMatrix *sample, const KnnwbKnnOptions *options,
                                gboolean made, double expected, gint64 start, const char *otherwise,
                                gboolean *chosen, GError **error);
/* Both phases over the clusters of p; *lists stays NULL when the run gives up (auto mode: the
 * bounds rule out too little; memory is short). In a group every rank takes its share and the
 * same decisions. */
gboolean knnwb_partition_run(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                             KnnwbPartition *p, KnnwbPartitionMode mode, double expected,
                             const char *otherwise, KnnwbNeighbors **lists, GError **error);
/* What the partitioned search applies to, for n rows of d values, absent of them absent. O(1). */
gboolean knnwb_partition_applies_to(const KnnwbKnnOptions *options, size_t n, size_t d,
                                    size_t absent);
/* knnwb_partition_self for a split-memory run: where the partition pays, the ranks put their rows
 * together when options->group_split_gather allows, else a notice says what it would save
 * (partition_gather.c). Collective. TRUE with *result NULL: the split search runs instead. */
gboolean knnwb_partition_self_gathered(const KnnwbMatrix *block, const KnnwbKnnOptions *options,
                                       KnnwbPartitionMode mode, KnnwbNeighbors **result,
                                       GError **error);
/* The same choice for n rows of which data holds the sample (the rows a sample of all n would take,
 * in order: knnwb_partition_sample_at), as ranks that each hold a block of the rows make it. */
gboolean knnwb_partition_choose_for(KnnwbPartition *p, const KnnwbMatrix *data, size_t n,
                                    KnnwbMetric metric, size_t k, int threads, gboolean gpu,
                                    double *share);

#endif
