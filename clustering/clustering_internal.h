/* Pieces shared by the clustering files: a static-chunk thread team, union-find, numbering. */
#ifndef KNNWB_CLUSTERING_INTERNAL_H
#define KNNWB_CLUSTERING_INTERNAL_H

#include <glib.h>
#include <knnwb/parallel.h>
#include <igraph.h>
#include <stdint.h>
#include <knnwb/knn.h>

/** Appends a Newick leaf label (quoted when it holds a reserved character; index without one). */
void knnwb_clustering_newick_label(GString *text, const char *label, int64_t index);

/** Union-find over 0..n-1 with path halving and union by index (the lower root wins). */
int64_t knnwb_clustering_find(int64_t *parent, int64_t x);
/** Joins the sets of a and b; FALSE when they were already one set. */
gboolean knnwb_clustering_union(int64_t *parent, int64_t a, int64_t b);

/**
 * Numbers the sets of parent 0, 1, ... by lowest element into membership (resized to n) and
 * returns their count. Errors come from igraph (out of memory).
 */
igraph_error_t knnwb_clustering_number_sets(int64_t *parent, int64_t n,
                                            igraph_vector_int_t *membership,
                                            igraph_integer_t *n_sets);

/** Checks a weight vector against a graph: length and no NaN. */
gboolean knnwb_clustering_check_weights(const igraph_t *graph, const igraph_vector_t *weights,
                                        GError **error);

/** CPU Borůvka (boruvka_cpu.c): in_forest[e] = 1 for the forest's edges. */
gboolean knnwb_clustering_boruvka_cpu(const igraph_t *graph, const igraph_vector_t *weights,
                                      int n_threads, unsigned char *in_forest, GError **error);

/** Sorts (u, v, weight) triples by (weight, min, max) and builds an undirected graph of them. */
gboolean knnwb_clustering_tree_from_pairs(int64_t n, int64_t m, const int64_t *u, const int64_t *v,
                                          const double *w, gboolean sort, igraph_t *tree,
                                          igraph_vector_t *weights, GError **error);

/**
 * MST of the complete graph on the s points members (indices into the n x n matrix distances) as
 * the R package mstknnclust computes it: igraph's Prim on the complete graph whose vertices are the
 * members in order and whose edges are the pairs (i < j) in row order. Writes s - 1 edges in local
 * indices (eu[i], ev[i]) with weights ew[i], in Prim's order.
 */
igraph_error_t knnwb_clustering_prim_subset(const igraph_matrix_t *distances,
                                            const int64_t *members, int64_t s, int64_t *eu,
                                            int64_t *ev, double *ew);

/** Validates a distance matrix: square, finite, non-negative, symmetric. */
gboolean knnwb_clustering_check_distance_matrix(const igraph_matrix_t *distances, GError **error);
#endif
