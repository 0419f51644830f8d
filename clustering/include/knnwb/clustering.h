/*
 * Clustering on kNN graphs and point sets: minimum spanning forests by Borůvka (CPU and GPU), the
 * exact MST of the complete graph of the points, MST-kNN, connected components and single linkage.
 *
 * Conventions, as in igraph's own API: graphs come in as `const igraph_t *` with a separate
 * `const igraph_vector_t *weights` (one per edge); results go out in caller-initialised igraph
 * vectors/matrices, which are resized; graphs that are outputs must be uninitialised and are
 * initialised on success only. Every function reports errors through GError (domain KNNWB_ERROR);
 * igraph failures become KNNWB_ERROR_IGRAPH. Memberships are numbered 0, 1, ... in the order of
 * each cluster's lowest vertex, so they are deterministic.
 *
 * Edge order ("weight, then edge id"): every spanning-forest function breaks weight ties by the
 * lower edge id, which makes the forest unique, so the CPU (any thread count) and the GPU return
 * the same edge set. Between points (no edge ids) ties break by the pair (lower index, higher
 * index).
 */
#ifndef KNNWB_CLUSTERING_H
#define KNNWB_CLUSTERING_H

#include <glib.h>
#include <igraph.h>
#include <knnwb/knn.h>
#include <knnwb/matrix.h>

G_BEGIN_DECLS

/* ---------------------------------------------------------------------------------------------- */
/* Minimum spanning forest of a graph (the kNN graph) by Borůvka. */

/** Options of knnwb_clustering_spanning_forest. Initialise with
 * knnwb_clustering_forest_options_init(). */
typedef struct {
  KnnwbBackend
      backend;   /**< auto (CUDA when built in and a GPU is usable), cpu, or cuda (or an error) */
  int n_threads; /**< CPU threads; 0 = all cores */
  int device;    /**< CUDA device ordinal; default 0 */
} KnnwbForestOptions;

/** Fills options with defaults: auto backend, all cores, device 0. */
void knnwb_clustering_forest_options_init(KnnwbForestOptions *options);

/**
 * Minimum spanning forest of graph taken as undirected (edge directions ignored; self-loops never
 * chosen; multi-edges allowed), by Borůvka: each round every component picks its lightest outgoing
 * edge by (weight, edge id), the picks are merged, and edges inside a component are dropped.
 *
 * forest_edges (initialised by the caller) receives the ids of the forest's edges in graph, sorted
 * increasingly: n - c of them for c components. membership (initialised, may be NULL) receives each
 * vertex's component (0-based, numbered by lowest vertex); n_components (may be NULL) receives c.
 * The result is the same for every backend and thread count. Round 1 is a vertex's lightest edge,
 * which in a directed kNN graph is usually its first neighbour.
 *
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (weights length differs from the edge count, NaN weight),
 * KNNWB_ERROR_DEVICE (backend cuda and no GPU / not built with CUDA, or a CUDA failure),
 * KNNWB_ERROR_NO_MEMORY, KNNWB_ERROR_IGRAPH.
 * Complexity: O(E log V) time in the worst case (O(E) per round, at most log2 V rounds; on kNN
 * graphs the active edge set shrinks fast), O(V + E) extra memory (about 20 bytes per edge).
 */
gboolean knnwb_clustering_spanning_forest(const igraph_t *graph, const igraph_vector_t *weights,
                                          const KnnwbForestOptions *options,
                                          igraph_vector_int_t *forest_edges,
                                          igraph_vector_int_t *membership,
                                          igraph_integer_t *n_components, GError **error);

/**
 * Builds the forest as its own undirected graph: vertices as in graph, the edges forest_edges (as
 * returned above) with their weights into forest_weights (initialised by the caller, resized).
 * forest must be uninitialised; it is initialised on success.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (edge id out of range), KNNWB_ERROR_IGRAPH. O(V + F).
 */
gboolean knnwb_clustering_forest_graph(const igraph_t *graph, const igraph_vector_t *weights,
                                       const igraph_vector_int_t *forest_edges, igraph_t *forest,
                                       igraph_vector_t *forest_weights, GError **error);

/**
 * Weakly connected components of graph (edges taken as undirected): membership (initialised by the
 * caller) receives each vertex's component numbered by lowest vertex; sizes (may be NULL) the size
 * of each component; n_components (may be NULL) their number. With k = 1 these are the clusters of
 * the GPU-FS-kNN paper's 1-NN figure.
 * Errors: KNNWB_ERROR_IGRAPH, KNNWB_ERROR_NO_MEMORY. Complexity: O(V + E) time and memory.
 */
gboolean knnwb_clustering_components(const igraph_t *graph, igraph_vector_int_t *membership,
                                     igraph_vector_int_t *sizes, igraph_integer_t *n_components,
                                     GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* Exact minimum spanning tree of the complete graph of a point set. */

/** Options of knnwb_clustering_mst_points. Initialise with knnwb_clustering_mst_options_init(). */
typedef struct {
  KnnwbMetric metric;              /**< default pearson */
  size_t k;                        /**< length of the kNN lists that answer most queries; 0 = auto
                                        (min(16, n - 1)). Larger k: fewer brute-force passes, more memory */
  const KnnwbNeighbors *neighbors; /**< optional self-kNN lists of exactly these points and this
                                        metric (knnwb_knn_self), reused instead of recomputed;
                                        then k is ignored */
  KnnwbBackend backend;        /**< backend of the kNN lists (brute-force passes run on the CPU) */
  int n_threads;               /**< CPU threads; 0 = all cores */
  size_t memory_bytes;         /**< kNN tile budget; 0 = the engine's default */
  const volatile gint *cancel; /**< optional: stop with KNNWB_ERROR_CANCELLED once *cancel != 0 */
} KnnwbMstOptions;

/** Fills options with defaults: pearson, k auto, no precomputed lists, auto backend, all cores. */
void knnwb_clustering_mst_options_init(KnnwbMstOptions *options);

/**
 * The length of the kNN lists knnwb_clustering_mst_points computes for n >= 2 points when
 * options->neighbors is NULL: options->k, or 16, at most n - 1. For callers that compute the lists
 * themselves (with options of their own, such as a progress callback) and pass them in. O(1).
 */
size_t knnwb_clustering_mst_lists_k(const KnnwbMstOptions *options, size_t n);

/**
 * The exact minimum spanning tree of the complete graph on the rows of data under options->metric,
 * by Borůvka rounds of cross-component nearest neighbours: a point whose sorted kNN list holds a
 * point of another component takes the first such entry; a point without one is resolved by a
 * brute-force pass over the points of other components, unless its k-th distance already exceeds
 * its component's best candidate (then it cannot win). Ties break by (distance, lower index,
 * higher index), so the tree is unique and independent of thread count and backend.
 *
 * tree must be uninitialised: on success it is an undirected graph with n vertices and n - 1 edges
 * (none when n <= 1), edges sorted by (weight, endpoints); weights (initialised) receives the exact
 * distances (double).
 *
 * Errors: those of knnwb_knn_self (degenerate rows are an error: every point must be in the tree),
 * KNNWB_ERROR_INVALID_ARGUMENT (neighbors do not match data), KNNWB_ERROR_CANCELLED,
 * KNNWB_ERROR_NO_MEMORY, KNNWB_ERROR_IGRAPH.
 * Complexity: the kNN lists (O(n^2 d) arithmetic, GPU-capable) plus O(n k log n) list scans plus
 * O(b n d) for the b brute-forced points (small on clustered data, up to n in the worst case);
 * O(n k) memory.
 */
gboolean knnwb_clustering_mst_points(const KnnwbMatrix *data, const KnnwbMstOptions *options,
                                     igraph_t *tree, igraph_vector_t *weights, GError **error);

/**
 * The exact minimum spanning tree of a precomputed symmetric n x n distance matrix (diagonal
 * ignored), computed as the R package mstknnclust does: igraph's Prim on the complete graph whose
 * edges are the pairs (i < j) in row order. With tied distances the tree depends on that order and
 * on Prim's heap, so this is what reproduces the package. tree must be uninitialised; it gets n
 * vertices and n - 1 edges in the order Prim adds them; weights (initialised) their distances.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (not square, NaN, negative or asymmetric entries),
 * KNNWB_ERROR_IGRAPH. Complexity: O(n^2 log n) time, O(n^2) memory (the complete graph).
 */
gboolean knnwb_clustering_mst_distance_matrix(const igraph_matrix_t *distances, igraph_t *tree,
                                              igraph_vector_t *weights, GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* MST-kNN (Inostroza-Ponta et al.; reference implementation: the R package mstknnclust). */

/**
 * MST-kNN's split hierarchy: one node per set the recursion looked at, in the order it looked at
 * them (node 0 = all points; children after their parent). parent[i] is the node it was split
 * from (-1 for the root), size[i] its number of points, k[i] the k of its kNN graph (0 for a
 * single point), cluster[i] the final cluster it became (as in the membership), or -1 when it was
 * split. Initialise with knnwb_mstknn_hierarchy_init, free with knnwb_mstknn_hierarchy_destroy.
 */
typedef struct {
  igraph_vector_int_t parent;
  igraph_vector_int_t size;
  igraph_vector_int_t k;
  igraph_vector_int_t cluster;
} KnnwbMstKnnHierarchy;

/** Errors: KNNWB_ERROR_IGRAPH (out of memory). */
gboolean knnwb_mstknn_hierarchy_init(KnnwbMstKnnHierarchy *hierarchy, GError **error);
void knnwb_mstknn_hierarchy_destroy(KnnwbMstKnnHierarchy *hierarchy);

/**
 * The hierarchy as Newick: internal nodes are the sets that split, named n<node>_k<k>; final
 * clusters are named c<cluster>_k<k> and hold their points as leaves (labels[i], quoted when
 * needed, or the 0-based index when labels is NULL). No branch lengths (the levels are splits,
 * not heights). One line ending in ";". Returns a new string (g_free); NULL with error
 * KNNWB_ERROR_INVALID_ARGUMENT when membership does not match the hierarchy.
 */
char *knnwb_mstknn_hierarchy_newick(const KnnwbMstKnnHierarchy *hierarchy,
                                    const igraph_vector_int_t *membership,
                                    const char *const *labels, GError **error);

/** Options of MST-kNN. Initialise with knnwb_clustering_mstknn_options_init(). */
typedef struct {
  KnnwbMetric metric;              /**< points only; default pearson */
  size_t list_k;                   /**< length of the global kNN lists (answer MST queries and the
                                        per-component kNN graphs); 0 = auto (max(16, floor(ln n) + 1)) */
  const KnnwbNeighbors *neighbors; /**< optional self-kNN lists of exactly these points and this
                                        metric (from knnwb_knn_self, a knn-graph step or a .knn
                                        file), used instead of computing new ones when they hold
                                        at least min(floor(ln n), n - 1) neighbours per point
                                        (shorter lists are ignored and new ones computed; callers
                                        that want to know test the length themselves); list_k is
                                        then ignored */
  KnnwbBackend backend;            /**< backend of the kNN lists */
  int n_threads;                   /**< CPU threads; 0 = all cores */
  size_t memory_bytes;             /**< kNN tile budget; 0 = default */
  const volatile gint *cancel;     /**< optional cancellation flag */
  KnnwbMstKnnHierarchy *hierarchy; /**< optional output: the split hierarchy (initialised by the
                                        caller; filled on success). Both variants. */
} KnnwbMstKnnOptions;

/** Fills options with defaults: pearson, automatic k, no lists given, auto backend, all cores. */
void knnwb_clustering_mstknn_options_init(KnnwbMstKnnOptions *options);

/**
 * The length of the kNN lists knnwb_clustering_mstknn_points computes for n >= 2 points when it
 * has no usable lists: options->list_k, or max(16, floor(ln n) + 1), at most n - 1. For callers
 * that compute the lists themselves and pass them in. O(1).
 */
size_t knnwb_clustering_mstknn_lists_k(const KnnwbMstKnnOptions *options, size_t n);

/**
 * MST-kNN of the rows of data. With T the exact minimum spanning tree and for a set S of points
 * (first S = all): k = min(floor(ln |S|), smallest k whose kNN graph on S is connected), at least
 * 1; G = the undirected union kNN graph of S (neighbours only from S, ties to the lower index,
 * as every knnwb kNN list; the distance-matrix variant below follows the R package instead);
 * keep the edges of T inside S that are also in G; take connected components. One component: S is a
 * final cluster; otherwise recurse into each component (|S| = 1: a cluster of its own, where
 * the R package would leave the point out; |S| = 2: one cluster).
 *
 * membership (initialised) receives each row's cluster (numbered by lowest row); cluster_forest
 * (uninitialised; may be NULL) receives the cluster forest: n vertices and, for every final
 * cluster, the kept tree edges inside it (the two points' edge for a pair); forest_weights
 * (initialised; may be NULL) their distances. Errors: those of knnwb_knn_self and
 * knnwb_clustering_mst_points, KNNWB_ERROR_IGRAPH. Complexity: the tree plus one kNN computation,
 * O(n log n) list work per recursion level; points whose global list lacks enough neighbours inside
 * their component are brute-forced in it.
 */
gboolean knnwb_clustering_mstknn_points(const KnnwbMatrix *data, const KnnwbMstKnnOptions *options,
                                        igraph_vector_int_t *membership, igraph_t *cluster_forest,
                                        igraph_vector_t *forest_weights, GError **error);

/**
 * MST-kNN of a precomputed n x n distance matrix (see knnwb_clustering_mstknn_points). Follows the
 * R package mstknnclust exactly: the tree of each component is recomputed by Prim from its lowest
 * vertex on its own sub-matrix (igraph's Prim, as the package), and row i of a set of s members
 * lists tied neighbours in the order i + 1, ..., s - 1, 0, ..., i - 1 (local indices, members in
 * increasing order): the package's generate.knn stably sorts the pairs a < b by distance and takes
 * row i's pairs (i, b) before its pairs (a, i). So ties are resolved the package's way: with
 * d(0,1) = d(0,2) = d(1,3) = 1, d(0,3) = d(1,2) = 2, d(2,3) = 3 it gives one cluster, where
 * "higher index first" gives {0, 2}, {1, 3} and the points variant's lower-index rule may differ
 * too. An object that ends up alone (split off as a set of one) is a cluster of its own here;
 * the package leaves it out of its partition, so knnwb's clusters of size 1 are exactly the
 * objects the package drops, and its other clusters are the package's. options may be NULL (only
 * cancel is used). On share/data/dslanguages.csv it gives 17 clusters of sizes
 * 13,11,10,8,5,5,5,5,3,3,3,3,2,2,2,2,2, the package's partition.
 * Errors: as knnwb_clustering_mst_distance_matrix, KNNWB_ERROR_CANCELLED.
 * Complexity: O(n^2 log n) per recursion level, O(n^2) memory.
 */
gboolean knnwb_clustering_mstknn_distance_matrix(const igraph_matrix_t *distances,
                                                 const KnnwbMstKnnOptions *options,
                                                 igraph_vector_int_t *membership,
                                                 igraph_t *cluster_forest,
                                                 igraph_vector_t *forest_weights, GError **error);

/* ---------------------------------------------------------------------------------------------- */
/* Single linkage from a minimum spanning tree or forest. */

/**
 * The single-linkage dendrogram of a minimum spanning tree/forest (tree: n vertices; weights: one
 * per edge, e.g. from knnwb_clustering_mst_points or knnwb_clustering_spanning_forest +
 * knnwb_clustering_forest_graph) as a scipy-style linkage matrix: linkage (initialised) is resized
 * to (n - c) x 4 for c components, row i = (a, b, distance, size): clusters a < b merge at distance
 * into cluster n + i of size points; clusters 0..n-1 are the points. Merges are in order of
 * (weight, edge id). For a spanning tree (c = 1) this is exactly scipy.cluster.hierarchy's format;
 * a forest lacks the c - 1 merges at infinite distance.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (weights length, a cycle: tree is not a forest),
 * KNNWB_ERROR_IGRAPH. Complexity: O(n log n).
 */
gboolean knnwb_clustering_single_linkage(const igraph_t *tree, const igraph_vector_t *weights,
                                         igraph_matrix_t *linkage, GError **error);

/**
 * Flat single-linkage clusters at a distance: two points share a cluster when a path of tree edges
 * of weight <= height joins them (scipy fcluster criterion "distance"). membership (initialised)
 * is numbered by lowest vertex; n_clusters (may be NULL) receives the count.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (weights length, NaN height). Complexity: O(n α(n)).
 */
gboolean knnwb_clustering_cut_distance(const igraph_t *tree, const igraph_vector_t *weights,
                                       double height, igraph_vector_int_t *membership,
                                       igraph_integer_t *n_clusters, GError **error);

/**
 * Flat single-linkage clusters by count: the tree's lightest edges by (weight, edge id) are joined
 * until n_clusters clusters remain (or the forest's c components, when c > n_clusters: the count
 * actually reached goes to n_clusters_out, may be NULL). membership is numbered by lowest vertex.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (n_clusters < 1 or > n, weights length).
 * Complexity: O(n log n).
 */
gboolean knnwb_clustering_cut_count(const igraph_t *tree, const igraph_vector_t *weights,
                                    igraph_integer_t n_clusters, igraph_vector_int_t *membership,
                                    igraph_integer_t *n_clusters_out, GError **error);

/**
 * Newick text of a linkage matrix (from knnwb_clustering_single_linkage) for n points: branch
 * lengths are height differences (the tree is ultrametric); leaves are named labels[i] (quoted when
 * needed) or, when labels is NULL, by their 0-based index. A forest gives one tree per line. Meant
 * for small n (the text is O(n) but viewers are not). Returns a newly allocated string (g_free).
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (linkage not a valid merge table for n points).
 */
char *knnwb_clustering_newick(const igraph_matrix_t *linkage, igraph_integer_t n,
                              const char *const *labels, GError **error);

G_END_DECLS

#endif
