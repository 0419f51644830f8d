/* Turning neighbour lists into igraph graphs. */
#ifndef KNNWB_GRAPH_H
#define KNNWB_GRAPH_H

#include <glib.h>
#include <igraph.h>
#include <knnwb/knn.h>
#include <knnwb/knn_group.h>

G_BEGIN_DECLS

/** Which graph to build from neighbour lists. */
typedef enum {
  KNNWB_GRAPH_DIRECTED, /**< k edges i -> neighbour per vertex, in rank order */
  KNNWB_GRAPH_UNION,    /**< undirected, {i,j} when j in kNN(i) or i in kNN(j) */
  KNNWB_GRAPH_MUTUAL    /**< undirected, {i,j} when j in kNN(i) and i in kNN(j) */
} KnnwbGraphMode;

/* The names of KnnwbGraphMode (<knnwb/enum_names.h>). */
/* clang-format off */
#define KNNWB_GRAPH_MODE_NAMES(X)                                                                  \
  X(KNNWB_GRAPH_DIRECTED, "directed")                                                              \
  X(KNNWB_GRAPH_UNION, "union")                                                                    \
  X(KNNWB_GRAPH_MUTUAL, "mutual")
/* clang-format on */

extern const KnnwbEnumTable knnwb_graph_mode_table;

/** Parses "directed", "union", "mutual". */
gboolean knnwb_graph_mode_from_string(const char *name, KnnwbGraphMode *mode, GError **error);

/**
 * Builds the graph of self-kNN lists into graph (which must be uninitialised; it is initialised on
 * success and left uninitialised on failure) and weights (an initialised vector, resized to the edge
 * count; weight = distance). One vertex per row. Directed mode keeps edge order: vertex 0's edges in
 * rank order, then vertex 1's, ... Undirected modes merge duplicate pairs keeping the smaller weight
 * (both directions carry the same exact distance) and list edges sorted by (min, max) endpoint.
 * The edge vector is built once (igraph_add_edges is O(V+E) per call).
 * Errors: KNNWB_ERROR_NO_MEMORY, KNNWB_ERROR_IGRAPH. Complexity: O(n k log k) time, O(n k) memory.
 */
gboolean knnwb_graph_from_neighbors(const KnnwbNeighbors *neighbors, KnnwbGraphMode mode,
                                    igraph_t *graph, igraph_vector_t *weights, GError **error);

/**
 * The edges knnwb_graph_from_neighbors would create, without the igraph_t (for writers that need
 * only an edge list): edges (initialised, resized to 2 x edges: from, to, from, to, ...) and
 * weights, in the same order. Errors and complexity as knnwb_graph_from_neighbors, without
 * igraph's indexing (4 integers per edge less memory, and no sort).
 */
gboolean knnwb_graph_edges_from_neighbors(const KnnwbNeighbors *neighbors, KnnwbGraphMode mode,
                                          igraph_vector_int_t *edges, igraph_vector_t *weights,
                                          GError **error);

/**
 * knnwb_graph_edges_from_neighbors (UNION or MUTUAL) when a group's ranks each hold the lists of
 * their block of rows (own, from a group run with group_own_rows: rank r's rows follow rank
 * r - 1's): each rank gets the edges whose smaller end lies in its range of rows, in the
 * single-process order, so the ranks' edges in rank order are knnwb_graph_edges_from_neighbors'
 * of all lists (same vertices, order and weights). The ranges are cut so that every rank merges
 * about as many directions (a histogram of the smaller ends in at most 65,536 bins, summed over
 * the ranks), not by the blocks (rank 0 would get most); each rank sends every direction to the
 * rank whose range holds its smaller end (two all-to-alls). Collective. Errors:
 * KNNWB_ERROR_NO_MEMORY, the group's transport errors, the same on every rank (agreed).
 * Complexity: O(m k log k) time per rank of m rows; memory about 40 bytes per direction held plus
 * 512 KiB of histogram.
 */
gboolean knnwb_graph_edges_from_own_neighbors(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                              KnnwbGraphMode mode, igraph_vector_int_t *edges,
                                              igraph_vector_t *weights, GError **error);

/**
 * Convenience: knnwb_knn_self then knnwb_graph_from_neighbors.
 */
gboolean knnwb_knn_graph(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                         KnnwbGraphMode mode, igraph_t *graph, igraph_vector_t *weights,
                         GError **error);

/**
 * For callers that installed igraph's attribute handler (igraph_set_attribute_table): sets the
 * vertex attribute "name" from the row labels (when present) and the edge attribute "weight".
 * Errors: KNNWB_ERROR_IGRAPH.
 */
gboolean knnwb_graph_set_attributes(igraph_t *graph, const igraph_vector_t *weights,
                                    const KnnwbMatrix *data, GError **error);

G_END_DECLS

#endif
