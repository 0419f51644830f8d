/* core/partition/'s own pieces: the bound space and the clusters (partition_space.c,
 * partition_build.c), the choice (partition_plan.c) and the search (partition.c). Read only here.
 */
#ifndef KNNWB_PARTITION_INTERNAL_H
#define KNNWB_PARTITION_INTERNAL_H

#include <stdint.h>
#include <glib.h>
#include <knnwb/knn.h>
#include <knnwb/matrix.h>

/* Below this many rows the automatic choice keeps the plain search. */
#define KNNWB_PARTITION_MIN_ROWS ((size_t)262144)
/* The cluster size aimed at: large enough for a GPU's tiles and a few sub-searches in all. */
#define KNNWB_PARTITION_TARGET_ROWS ((size_t)65536)
/* The automatic choice partitions when the sample says at most this share of the plain search's
 * pairs remains, and gives up after the clusters' own lists when more than the second does. */
#define KNNWB_PARTITION_SAMPLE_SHARE 0.3
#define KNNWB_PARTITION_GIVE_UP_SHARE 0.6

typedef enum { KNNWB_PARTITION_AUTO, KNNWB_PARTITION_OFF, KNNWB_PARTITION_ON } KnnwbPartitionMode;

/*
 * The rows split into m clusters, in the bound space of the metric: the rows themselves for
 * euclidean; centred (pearson family) or not (cosine) and scaled to norm 1 otherwise, where the
 * chord |v - w| = sqrt(2 d) for the metric's distance d (abs-pearson: the nearer of w and -w).
 * Distances to centroids come with a rounding margin, so that lower and upper bounds are bounds.
 */
typedef struct {
  KnnwbMetric metric;
  size_t n, d, m;
  int threads;
  double *centroid;    /* m x d */
  double *centroid_sq; /* m: |c|^2 */
  double *radius;      /* m: at least the distance of every member to its centroid */
  int32_t *cluster_of; /* n */
  size_t *start;       /* m + 1: each cluster's range in members */
  int64_t *members;    /* n: cluster by cluster, rows ascending within each */
} KnnwbPartition;

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

/* The chord (bound-space distance) that any pair at engine distance at most distance can have,
 * rounding of both included. */
double knnwb_partition_chord_limit(KnnwbMetric metric, double distance, size_t d);

gboolean knnwb_partition_block_init(KnnwbPartitionBlock *block, size_t cap, size_t m, size_t d);
void knnwb_partition_block_clear(KnnwbPartitionBlock *block);

/* Rows [first, last) of data (rows[t] instead when rows is not NULL) into the block, with their
 * dot products with the m centroids (knnwb_partition_block_dots). FALSE when a row has no
 * direction. */
gboolean knnwb_partition_block_fill(KnnwbPartitionBlock *block, KnnwbMetric metric,
                                    const KnnwbMatrix *data, size_t first, size_t last,
                                    const int64_t *rows, const double *centroid, size_t m);

/* The block's dot products with the m centroids (m x d, row-major; NULL or m = 0: none). */
void knnwb_partition_block_dots(KnnwbPartitionBlock *block, const double *centroid, size_t m);

/* Lower and upper bounds of the chord between row r of the block and centroid j (|c_j|^2 is
 * centroid_sq); abs-pearson takes the nearer of c_j and -c_j. */
void knnwb_partition_block_bounds(const KnnwbPartitionBlock *block, KnnwbMetric metric,
                                  const double *centroid_sq, size_t r, size_t j, double *lower,
                                  double *upper);

/* The clusters of data (partition_build.c): k-means on a sample for about m centroids, every
 * row to its nearest, clusters of at most k rows merged away. FALSE (nothing allocated) when
 * fewer than two clusters remain, a row has no direction, memory is short or cancel is set. */
gboolean knnwb_partition_build(KnnwbPartition *p, const KnnwbMatrix *data, KnnwbMetric metric,
                               size_t m, size_t k, int threads, const volatile gint *cancel);
void knnwb_partition_clear(KnnwbPartition *p);

/* The choice (partition_plan.c). */
KnnwbPartitionMode knnwb_partition_mode(void);
/* The clusters to aim at for n rows and k neighbours (0: too few rows to split). */
size_t knnwb_partition_cluster_count(size_t n, size_t k);
/* The share of the plain search's pairs that the partitioned search is expected to score, from
 * a sample of rows (their k-th distance in their own cluster, in the bound space). */
double knnwb_partition_expected_share(const KnnwbPartition *p, const KnnwbMatrix *data, size_t k);

#endif
