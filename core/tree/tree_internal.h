/* core/tree/'s own pieces: the k-d tree (tree_build.c) and its search (tree_search.c), which the
 * runs (tree_run.c) put together. Read only here. */
#ifndef KNNWB_TREE_INTERNAL_H
#define KNNWB_TREE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <glib.h>
#include <knnwb/knn.h>
#include <knnwb/matrix.h>
#include <knnwb/parallel.h>
#include "engine/engine.h"

/* Rows a leaf holds at most. */
#define KNNWB_TREE_LEAF 16

/*
 * A balanced k-d tree over n rows of d floats, laid out implicitly: node t's children are 2t + 1
 * and 2t + 2, the root (0) holds positions [0, n) of order, and a node holding [lo, hi) gives
 * [lo, mid) and [mid, hi) to its children, mid = lo + (hi - lo) / 2, split on its widest column.
 * Every leaf lies at depth `levels`; node t's box is the least and the greatest value of each
 * column over its rows (the rows' own floats, so a row's gap to a box is a gap to a row). The
 * rows' values are copied in the tree's order (points), so a leaf's rows lie together.
 */
typedef struct {
  size_t n, d; /* the rows in the tree (those not absent), their columns */
  int levels;
  size_t nodes;
  int64_t *order;              /* n: rows, node by node */
  float *points;               /* n x d: the values of the row at each position of order */
  float *box;                  /* nodes x 2d: node t's least values, then its greatest */
  int64_t *least;              /* nodes: node t's lowest row */
  const volatile gint *cancel; /* polled at every node of KNNWB_TREE_POLL_ROWS rows or more */
  gint stopped;                /* (atomic) set when the build saw it raised */
} KnnwbTree;

/* Nodes of at least this many rows poll the build's cancel flag (a few milliseconds apart). */
#define KNNWB_TREE_POLL_ROWS ((size_t)65536)

/* The child range's midpoint of a node holding [lo, hi). O(1). */
static inline size_t knnwb_tree_mid(size_t lo, size_t hi)
{
  return lo + (hi - lo) / 2;
}

/* The tree of values' n rows of d floats, those marked in absent (n flags; NULL: none) left out
 * (tree->n counts the others), built on up to threads threads (the same tree on any number).
 * FALSE when memory is short, or when *cancel (NULL: never) was raised, then tree->stopped is set
 * (tree cleared either way). Time O(n d log n). */
gboolean knnwb_tree_build(KnnwbTree *tree, const float *values, size_t n, size_t d,
                          const unsigned char *absent, int threads, const volatile gint *cancel);
void knnwb_tree_clear(KnnwbTree *tree);

/* One search of a tree (tree_search.c): the rows [first, last) of a self run (the tree's own rows,
 * searched in its order; a rank's even share, or all) or of a query matrix, their lists, progress
 * and cancel. */
typedef struct {
  const KnnwbTree *tree;
  gboolean queries; /* a query run (else a self run) */
  /* A query run's rows in the tree's space (the values, or the angular metrics' scored rows), and
   * its rows left out (absent, degenerate: n flags, or NULL) */
  const float *query_points;
  const unsigned char *query_invalid;
  KnnwbMetric metric;
  /* The pearson family, spearman and cosine: the tree holds the scored rows, and the distances
   * come from the prepared rows (knnwb_prepared_distance: exact_queries is exact_reference for a
   * self run); euclidean and manhattan compute them from the tree's points. */
  gboolean angular;
  const KnnwbPrepared *exact_queries, *exact_reference;
  size_t k;
  /* Rows in groups (NULL: none): a row's search leaves out every row of its own group (the
   * nearest row outside it, tree_outside.c), and node t, whose rows all lie in group
   * node_group[t] (-1: in several), is never opened for a row of that group. */
  const int32_t *group;
  const int32_t *node_group;
  size_t first, last;    /* the rows this process searches */
  KnnwbNeighbors *lists; /* rows [first, last); absent rows' lists emptied by the caller */
  const KnnwbKnnOptions *options;
  gsize done; /* rows searched (atomic; the caller may count the absent ones first) */
  KnnwbProgressThrottle report;
  gint cancelled; /* (atomic) */
} KnnwbTreeSearch;

/* Each row's k nearest of the tree's rows (a self run: the row itself left out) into s->lists, by
 * (distance, row), on up to threads threads; query rows flagged in s->query_invalid are skipped.
 * Sets s->cancelled when options' cancel was raised (the lists then incomplete). About O(k log n d)
 * a row on rows of low intrinsic dimension. */
void knnwb_tree_search(KnnwbTreeSearch *s, int threads);

/* The same for the tree's own rows rows[0, n_rows) (s->query_points: every row's point in the
 * tree's space, by row; s->first and s->last unused): each row's k nearest, itself and its group
 * left out, into index and distance (k a row, by (distance, row), -1 and +inf after the rows
 * found). Sets s->cancelled as knnwb_tree_search does. */
void knnwb_tree_search_rows(KnnwbTreeSearch *s, const int64_t *rows, size_t n_rows, int64_t *index,
                            double *distance, int threads);

#endif
