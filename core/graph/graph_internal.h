/* Shared by the graph builders of one process (graph.c) and of a group's ranks (graph_group.c). */
#ifndef KNNWB_GRAPH_INTERNAL_H
#define KNNWB_GRAPH_INTERNAL_H

#include <glib.h>
#include <igraph.h>

/** One direction of a pair {lo, other}, kept in lo's bucket. */
typedef struct {
  igraph_integer_t other;
  double weight;
} KnnwbHalfEdge;

/**
 * The undirected edges of half edges bucketed by their smaller end: bucket b (half[start[b]] ..
 * half[start[b + 1] - 1]) holds the pairs {first + b, other}. Each bucket is sorted by the other
 * end (in place); a pair met twice (both lists name it) becomes one edge with the smaller weight;
 * mutual keeps only those. edges (initialised) gets first + b, other, ... in bucket order, weights
 * the weights. Errors: IGRAPH_ENOMEM. Time O(E log(bucket size)), memory 3 integers per edge.
 */
igraph_error_t knnwb_graph_merge_half_edges(KnnwbHalfEdge *half, const size_t *start,
                                            size_t n_buckets, size_t first, gboolean mutual,
                                            igraph_vector_int_t *edges, igraph_vector_t *weights);

#endif
