/*
 * Graph clustering as single-cell and co-expression users know it: shared-nearest-neighbour graphs
 * (R bluster's makeSNNGraph), community detection through igraph (Leiden, Louvain, walktrap), and
 * the comparison of a partition with known classes (adjusted Rand index, NMI, contingency table,
 * modularity).
 *
 * Distances are not weights. kNN graphs carry distances (smaller = closer); igraph's community
 * functions, Gephi, Cytoscape and R igraph read an edge `weight` as a strength (bigger = closer).
 * knnwb_clustering_similarity turns one into the other in a documented way; SNN graphs come with
 * similarity weights already.
 *
 * Conventions as in <knnwb/clustering.h>: plain igraph vectors in and out (initialised by the
 * caller, resized), GError with domain KNNWB_ERROR, memberships numbered by lowest vertex.
 */
#ifndef KNNWB_COMMUNITY_H
#define KNNWB_COMMUNITY_H

#include <glib.h>
#include <igraph.h>
#include <knnwb/knn.h>

G_BEGIN_DECLS

/* ---------------------------------------------------------------------------------------------- */
/* Shared-nearest-neighbour graphs. */

/** Edge weights of an SNN graph (bluster's `type`). Each point counts as its own 0-th neighbour. */
typedef enum {
  KNNWB_SNN_RANK,   /**< k - r/2, r the smallest rank sum (rank_u(s) + rank_v(s)) over shared s */
  KNNWB_SNN_NUMBER, /**< the number of shared points of the two (k + 1)-sets */
  KNNWB_SNN_JACCARD /**< |shared| / |union| of the two (k + 1)-sets */
} KnnwbSnnWeighting;

/* The names of KnnwbSnnWeighting (<knnwb/enum_names.h>). */
/* clang-format off */
#define KNNWB_SNN_WEIGHTING_NAMES(X)                                                               \
  X(KNNWB_SNN_RANK, "rank")                                                                        \
  X(KNNWB_SNN_NUMBER, "number")                                                                    \
  X(KNNWB_SNN_JACCARD, "jaccard")
/* clang-format on */
extern const KnnwbEnumTable knnwb_snn_weighting_table;

/** "rank", "number", "jaccard". Errors: KNNWB_ERROR_INVALID_ARGUMENT naming the choices. */
gboolean knnwb_snn_weighting_from_string(const char *name, KnnwbSnnWeighting *weighting,
                                         GError **error);

/**
 * The shared-nearest-neighbour graph of self-kNN lists, as R bluster's makeSNNGraph /
 * neighborsToSNNGraph (libscran build_snn_graph) defines it: u and v are joined when their sets
 * {u} + kNN(u) and {v} + kNN(v) intersect; every weight is at least 1e-6 (so an edge always has a
 * positive weight), with k the length of the later vertex's list. Edges (u < v) are sorted by (v,
 * u) and the graph is undirected; weights (initialised) receive the similarities. Rows with fewer
 * neighbours (n_found) use what they have.
 *
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (an index out of range), KNNWB_ERROR_NO_MEMORY,
 * KNNWB_ERROR_IGRAPH. Complexity: O(n k^2 + E) time on typical lists (each point visits the
 * holders of its k + 1 members), O(n k + E) memory plus n doubles per thread; parallel over points
 * (n_threads, 0 = all cores) with the same result for every thread count.
 */
gboolean knnwb_clustering_snn_graph(const KnnwbNeighbors *neighbors, KnnwbSnnWeighting weighting,
                                    int n_threads, igraph_t *graph, igraph_vector_t *weights,
                                    GError **error);

/**
 * The kNN lists of a directed kNN graph as knnwb_graph_from_neighbors (mode directed), a knn-graph
 * step or a directed .knn file give it: each vertex's out-edges, in edge order, are its neighbours
 * in rank order (distance, then index); k = the largest out-degree, shorter lists have n_found
 * below k (their empty slots hold index -1). *lists receives new lists (knnwb_neighbors_free).
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (undirected graph, weights missing or of the wrong length,
 * a self-loop, a negative distance, out-edges not in rank order), KNNWB_ERROR_NO_MEMORY.
 * Complexity: O(V + E) time, O(V k) memory.
 */
gboolean knnwb_clustering_lists_from_graph(const igraph_t *graph, const igraph_vector_t *distances,
                                           KnnwbNeighbors **lists, GError **error);

/**
 * The largest weight an SNN graph of k-neighbour lists can have, as a scale: k for rank (weights
 * are below k), k + 1 for number, 1 for jaccard. knnwb stores an SNN graph's edge distance as
 * scale / w - 1 (>= 0), so the writers' and the community step's similarity 1/(1+d) is w / scale.
 */
double knnwb_snn_weight_scale(KnnwbSnnWeighting weighting, size_t k);

/* ---------------------------------------------------------------------------------------------- */
/* Distances and similarity weights. */

/** How a distance d >= 0 becomes a similarity weight (bigger = closer). */
typedef enum {
  KNNWB_SIMILARITY_INVERSE, /**< 1 / (1 + d): in (0, 1], scale-free; the default */
  KNNWB_SIMILARITY_EXP,     /**< exp(-d / s), s = the mean edge distance (1 when it is 0) */
  KNNWB_SIMILARITY_UNIT     /**< 1 for every edge: the unweighted kNN graph */
} KnnwbSimilarity;

/* The names of KnnwbSimilarity (<knnwb/enum_names.h>). */
/* clang-format off */
#define KNNWB_SIMILARITY_NAMES(X)                                                                  \
  X(KNNWB_SIMILARITY_INVERSE, "inverse")                                                           \
  X(KNNWB_SIMILARITY_EXP, "exp")                                                                   \
  X(KNNWB_SIMILARITY_UNIT, "unit")
/* clang-format on */
extern const KnnwbEnumTable knnwb_similarity_table;

/** "inverse", "exp", "unit". Errors: KNNWB_ERROR_INVALID_ARGUMENT naming the choices. */
gboolean knnwb_similarity_from_string(const char *name, KnnwbSimilarity *similarity,
                                      GError **error);

/**
 * similarities (initialised, resized) = the transform of each distance. Errors:
 * KNNWB_ERROR_INVALID_ARGUMENT (a negative or NaN distance). O(E).
 */
gboolean knnwb_clustering_similarity(const igraph_vector_t *distances, KnnwbSimilarity similarity,
                                     igraph_vector_t *similarities, GError **error);

/**
 * The undirected simple graph of graph (self-loops dropped; u-v and v-u, or repeated edges, become
 * one edge keeping the largest similarity), edges sorted by (lower, higher) end. For a directed kNN
 * graph this is the union graph. out must be uninitialised; out_weights initialised.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (weights length), KNNWB_ERROR_IGRAPH. O(E log E).
 */
gboolean knnwb_clustering_undirected(const igraph_t *graph, const igraph_vector_t *similarities,
                                     igraph_t *out, igraph_vector_t *out_weights, GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* Community detection through igraph. */

typedef enum {
  KNNWB_COMMUNITY_LEIDEN,   /**< igraph_community_leiden */
  KNNWB_COMMUNITY_LOUVAIN,  /**< igraph_community_multilevel */
  KNNWB_COMMUNITY_WALKTRAP, /**< igraph_community_walktrap, cut at its maximum modularity */
} KnnwbCommunityMethod;

/** Leiden's quality function. */
typedef enum {
  KNNWB_OBJECTIVE_MODULARITY, /**< modularity with resolution gamma (1 = Newman's) */
  KNNWB_OBJECTIVE_CPM /**< constant Potts model: sum over clusters of (w_in - gamma s^2/2) */
} KnnwbCommunityObjective;

/**
 * The longest walktrap walk accepted (steps), for the library, `knnwb cluster --steps` and the
 * community step alike: walktrap's cost grows with the walk (2^31 steps on 40 rows ran for hours);
 * walks of a few steps are the method's use.
 */
#define KNNWB_COMMUNITY_MAX_STEPS 1000000

/** Options of knnwb_clustering_community; initialise with knnwb_community_options_init(). */
typedef struct {
  KnnwbCommunityMethod method;       /**< default leiden */
  KnnwbCommunityObjective objective; /**< Leiden only; default modularity */
  double resolution;                 /**< Leiden and Louvain; default 1 */
  double beta;                       /**< Leiden's randomness; default 0.01 (igraph's) */
  gint64 n_iterations;               /**< Leiden; < 0 = until stable (default -1) */
  guint64 seed;                      /**< igraph's RNG seed (Leiden, Louvain); default 42 */
  gint64 steps; /**< walktrap's random-walk length, 1 .. KNNWB_COMMUNITY_MAX_STEPS; default 4 */
} KnnwbCommunityOptions;

void knnwb_community_options_init(KnnwbCommunityOptions *options);

/* The names of KnnwbCommunityMethod and KnnwbCommunityObjective (<knnwb/enum_names.h>);
 * "multilevel" (igraph's name for Louvain) is accepted too. */
/* clang-format off */
#define KNNWB_COMMUNITY_METHOD_NAMES(X)                                                            \
  X(KNNWB_COMMUNITY_LEIDEN, "leiden")                                                              \
  X(KNNWB_COMMUNITY_LOUVAIN, "louvain")                                                            \
  X(KNNWB_COMMUNITY_WALKTRAP, "walktrap")
#define KNNWB_COMMUNITY_OBJECTIVE_NAMES(X)                                                         \
  X(KNNWB_OBJECTIVE_MODULARITY, "modularity")                                                      \
  X(KNNWB_OBJECTIVE_CPM, "cpm")
/* clang-format on */
extern const KnnwbEnumTable knnwb_community_method_table;
extern const KnnwbEnumTable knnwb_community_objective_table;

/** "leiden", "louvain", "walktrap". Errors: KNNWB_ERROR_INVALID_ARGUMENT naming the choices. */
gboolean knnwb_community_method_from_string(const char *name, KnnwbCommunityMethod *method,
                                            GError **error);
/** "modularity", "cpm". Errors: KNNWB_ERROR_INVALID_ARGUMENT naming the choices. */
gboolean knnwb_community_objective_from_string(const char *name, KnnwbCommunityObjective *objective,
                                               GError **error);

/**
 * Communities of graph with similarity weights (bigger = closer; NULL = all 1), by options->method
 * through igraph. A directed graph is first made undirected (knnwb_clustering_undirected). igraph
 * 0.10's Leiden takes the modularity objective as node weights = strengths and resolution / (2m),
 * m the total weight; this function does that conversion, so resolution means what it means in
 * Louvain, scanpy and R igraph's cluster_leiden(objective_function = "modularity"). The seed is
 * set on igraph's default RNG before the call, so results are reproducible.
 *
 * membership (initialised) receives the clusters numbered by lowest vertex; modularity (may be
 * NULL) the partition's modularity (resolution 1) on the similarity weights.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (weights length, a negative or NaN weight, resolution <= 0),
 * KNNWB_ERROR_IGRAPH, KNNWB_ERROR_NO_MEMORY. Complexity: igraph's (about O(E) per Leiden/Louvain
 * pass; walktrap O(E V^2) worst case, O(V^2 log V) typical on sparse graphs: keep it for small V).
 */
gboolean knnwb_clustering_community(const igraph_t *graph, const igraph_vector_t *similarities,
                                    const KnnwbCommunityOptions *options,
                                    igraph_vector_int_t *membership, double *modularity,
                                    GError **error);

/**
 * Modularity (resolution 1) of membership on graph taken as undirected with similarity weights
 * (NULL = all 1). Errors: KNNWB_ERROR_INVALID_ARGUMENT (lengths), KNNWB_ERROR_IGRAPH. O(V + E).
 */
gboolean knnwb_clustering_modularity(const igraph_t *graph, const igraph_vector_t *similarities,
                                     const igraph_vector_int_t *membership, double *modularity,
                                     GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* Comparing a partition with known classes. */

/**
 * Compares clusters with classes over the points whose class is >= 0 (a negative class means
 * "not annotated" and the point is left out). ari and nmi (may be NULL) receive the adjusted Rand
 * index and the normalised mutual information (igraph_compare_communities on the compared points;
 * 1 for identical partitions; NaN when fewer than 2 points are compared); contingency
 * (initialised, may be NULL) is resized to (clusters) x (classes) counts, with the cluster and
 * class ids as given (both numbered from 0); n_compared (may be NULL) receives the number of points
 * used. Errors: KNNWB_ERROR_INVALID_ARGUMENT (lengths differ, a negative cluster),
 * KNNWB_ERROR_IGRAPH. Complexity: O(n + clusters x classes).
 */
gboolean knnwb_clustering_compare(const igraph_vector_int_t *clusters,
                                  const igraph_vector_int_t *classes, double *ari, double *nmi,
                                  igraph_matrix_int_t *contingency, igraph_integer_t *n_compared,
                                  GError **error);

G_END_DECLS

#endif
