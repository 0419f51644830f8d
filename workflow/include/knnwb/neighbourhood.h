/* The neighbourhood of focus rows in the kNN graph, up to order r: Figure 3a of GPU-FS-kNN. */
#ifndef KNNWB_NEIGHBOURHOOD_H
#define KNNWB_NEIGHBOURHOOD_H

#include <glib.h>
#include <igraph.h>
#include <stdint.h>
#include <knnwb/formats.h>
#include <knnwb/knn.h>
#include <knnwb/formats.h>
#include <knnwb/matrix.h>

G_BEGIN_DECLS

/** Which edges of the directed kNN graph a neighbourhood follows. */
typedef enum {
  KNNWB_DIRECTION_OUT, /**< the rows among the focus's k nearest (and theirs, ...) */
  KNNWB_DIRECTION_IN,  /**< the rows that have the focus among their k nearest (whole graph) */
  KNNWB_DIRECTION_BOTH /**< either (whole graph) */
} KnnwbDirection;

/* The names of KnnwbDirection (<knnwb/enum_names.h>). */
/* clang-format off */
#define KNNWB_DIRECTION_NAMES(X)                                                                   \
  X(KNNWB_DIRECTION_OUT, "out")                                                                    \
  X(KNNWB_DIRECTION_IN, "in")                                                                      \
  X(KNNWB_DIRECTION_BOTH, "both")
/* clang-format on */
extern const KnnwbEnumTable knnwb_direction_table;

/** Parses "out", "in", "both". Errors: KNNWB_ERROR_INVALID_ARGUMENT. */
gboolean knnwb_direction_from_string(const char *name, KnnwbDirection *direction, GError **error);
const char *knnwb_direction_to_string(KnnwbDirection direction);

/** One line of the ranked table: a member of a focus's neighbourhood. */
typedef struct {
  size_t focus;    /**< index into KnnwbNeighbourhood.focus */
  size_t rank;     /**< 1 = nearest to that focus (by distance, then row) */
  int64_t row;     /**< the member's matrix row */
  int order;       /**< hops from the focus (1 .. order) */
  double distance; /**< exact distance between the focus and the member */
  double r;        /**< signed correlation (pearson, abs-pearson: Pearson r; spearman: rho); NAN
                        for the other metrics */
} KnnwbNeighbourhoodMember;

/**
 * A neighbourhood: the vertices (matrix rows, the focus rows first in the order given), each
 * vertex's order (hops from the nearest focus, 0 for a focus), the kNN edges among the vertices
 * (directed i -> j when j is among the k nearest of i; vertex ids are indices into rows), with
 * their exact distances, and the ranked table per focus.
 */
typedef struct {
  size_t n_focus;
  int64_t *focus; /**< n_focus matrix rows */
  size_t n_vertices;
  int64_t *rows;  /**< n_vertices matrix rows */
  int *order;     /**< n_vertices hop counts */
  igraph_t graph; /**< directed, n_vertices vertices */
  igraph_vector_t weights;
  size_t n_members;
  KnnwbNeighbourhoodMember *members; /**< by focus, then rank */
  size_t n_queries;     /**< rows queried against all rows (focused search), or n (whole graph) */
  gboolean whole_graph; /**< TRUE when the whole kNN graph was built */
} KnnwbNeighbourhood;

void knnwb_neighbourhood_free(KnnwbNeighbourhood *neighbourhood);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbNeighbourhood, knnwb_neighbourhood_free)

/**
 * Finds the rows labelled by a comma-separated list (each label must name exactly one row; the
 * first row wins when labels repeat, with a warning naming the others). *rows (g_free) receives
 * them in list order. O(n) per label.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT naming every unknown label.
 */
gboolean knnwb_neighbourhood_focus_rows(const KnnwbMatrix *data, const char *labels, int64_t **rows,
                                        size_t *n_rows, GError **error);
/** The same over row_labels (n labels, or NULL when the rows have none). */
gboolean knnwb_neighbourhood_focus_labels(const char *const *row_labels, size_t n,
                                          const char *labels, int64_t **rows, size_t *n_rows,
                                          GError **error);

/**
 * The neighbourhood of the focus rows up to order hops in the kNN graph of data (self excluded,
 * k = options->k, exact lists as knnwb_knn_self gives them).
 *
 * OUT never builds the whole graph: the focus rows are queried against all rows (k + 1 nearest,
 * the row itself dropped), then the new rows found, and so on, order + 1 rounds (the last round
 * finds the edges among the farthest members): about k^order query rows instead of n. IN and
 * BOTH need every row's list: they build the whole graph (knnwb_knn_self) and cut from it.
 * Either way the result equals knnwb_neighbourhood_from_lists on the whole graph's lists.
 * Errors: as knnwb_knn_query/knnwb_knn_self, KNNWB_ERROR_INVALID_ARGUMENT (order < 1, a focus
 * row out of range, k >= rows). Complexity: OUT O(q n d) with q ~ k^order query rows; IN/BOTH as
 * knnwb_knn_self; memory O(q k + n d).
 */
gboolean knnwb_neighbourhood_find(const KnnwbMatrix *data, const int64_t *focus, size_t n_focus,
                                  int order, KnnwbDirection direction,
                                  const KnnwbKnnOptions *options, KnnwbNeighbourhood **result,
                                  GError **error);

/**
 * knnwb_neighbourhood_find as one rank of a split-memory group (size > 1; collective): block holds
 * this rank's rows first_row[rank] .. first_row[rank + 1] - 1 of first_row[size] (size + 1
 * entries, every rank's), focus counts rows among all. The out-neighbourhood's queries are split
 * kNN runs (KnnwbKnnOptions.group_split) whose lists every rank gets (about k^order rows); for
 * in/both the whole graph is computed split and its lists gathered on rank 0, which walks them.
 * The members' rows then travel to rank 0 for the ranking (and, when members is not NULL, stay
 * there: *members, n_vertices x d in vertex order, without labels). Rank 0 gets the result, byte
 * for byte that of knnwb_neighbourhood_find on the whole matrix; the other ranks get *result (and
 * *members) NULL. Every
 * rank returns the same success or the same error. Errors and complexity as
 * knnwb_neighbourhood_find, the arithmetic shared; memory per rank: its block and the lists found
 * (rank 0, for in/both: every row's), rank 0 the members' rows.
 */
gboolean knnwb_neighbourhood_find_split(const KnnwbKnnGroup *group, const KnnwbMatrix *block,
                                        const size_t *first_row, const int64_t *focus,
                                        size_t n_focus, int order, KnnwbDirection direction,
                                        const KnnwbKnnOptions *options, KnnwbNeighbourhood **result,
                                        KnnwbMatrix **members, GError **error);

/**
 * The same neighbourhood cut from given self-kNN lists of data (all n rows): breadth-first from
 * the focus rows along out-edges, in-edges or both. For tests and for callers that have the
 * graph. Errors: KNNWB_ERROR_INVALID_ARGUMENT, KNNWB_ERROR_NO_MEMORY, KNNWB_ERROR_IGRAPH.
 * Complexity: O(n k) for IN/BOTH (the reverse lists), O(members k) for OUT.
 */
gboolean knnwb_neighbourhood_from_lists(const KnnwbMatrix *data, const KnnwbNeighbors *lists,
                                        const int64_t *focus, size_t n_focus, int order,
                                        KnnwbDirection direction, KnnwbMetric metric,
                                        KnnwbNeighbourhood **result, GError **error);

/**
 * Writes the ranked table: header focus, rank, label, order, distance and, for pearson,
 * abs-pearson and spearman, r, p and q (knnwb_neighbourhood_statistics; NA when data holds labels
 * only, as a split run's writer does); one line per member (labels from data, or row numbers from
 * 0). Atomic. Errors: KNNWB_ERROR_IO, KNNWB_ERROR_NO_MEMORY. Complexity: O(members), plus
 * knnwb_neighbourhood_statistics for correlations.
 */
gboolean knnwb_neighbourhood_write_table(const char *path, const KnnwbNeighbourhood *neighbourhood,
                                         const KnnwbMatrix *data, KnnwbMetric metric,
                                         GError **error);

/**
 * The two-sided p-value of a correlation r over n samples: P(|T| >= |t|), t = r sqrt((n - 2) /
 * (1 - r^2)), T Student's t with n - 2 degrees of freedom (as R's cor.test and
 * scipy.stats.pearsonr; for Spearman's rho the same t approximation as scipy.stats.spearmanr).
 * Computed in double as the regularised incomplete beta I_{1 - r^2}((n - 2)/2, 1/2), with 1 - r^2
 * taken as (1 - |r|)(1 + |r|), so p keeps its relative precision as |r| nears 1 (|r| = 1: 0).
 * NAN when n < 3 or r is not in [-1, 1]. O(1) (a continued fraction).
 */
double knnwb_correlation_p_value(double r, size_t n);

/** Benjamini-Hochberg q-values of m p-values (q[i] for p[i]; monotone, at most 1). O(m log m). */
void knnwb_benjamini_hochberg(const double *p, size_t m, double *q);

/**
 * p and q of each member of a neighbourhood found in data with a correlation metric (pearson,
 * abs-pearson: the signed Pearson r; spearman: rho): p as knnwb_correlation_p_value with n =
 * data->n_cols (the samples used), q Benjamini-Hochberg over every row that was a candidate for
 * that focus (all rows but the focus, absent rows and rows whose r is undefined: metafeature rows
 * and the phenotype row included), so q does not depend on k or the order. p[i], q[i] belong to
 * members[i] (NAN where undefined); *n_candidates (may be NULL) receives the first focus's count.
 * Errors: KNNWB_ERROR_NO_MEMORY. Complexity: O(focus x n x d) (Spearman: d log d per row), O(n)
 * memory.
 */
gboolean knnwb_neighbourhood_statistics(const KnnwbNeighbourhood *neighbourhood,
                                        const KnnwbMatrix *data, KnnwbMetric metric, double *p,
                                        double *q, size_t *n_candidates, GError **error);

/**
 * knnwb_neighbourhood_statistics for a neighbourhood found by knnwb_neighbourhood_find_split:
 * every rank passes its block, first_row and the focus rows (as to the search); rank 0 passes the
 * neighbourhood and gets p and q (n_members each), the others pass NULL for all three. The same
 * numbers as on the whole matrix. Collective. Errors: transport errors, KNNWB_ERROR_NO_MEMORY.
 * Memory: every rank holds n doubles per focus.
 */
gboolean knnwb_neighbourhood_statistics_split(const KnnwbKnnGroup *group, const KnnwbMatrix *block,
                                              const size_t *first_row, const int64_t *focus,
                                              size_t n_focus,
                                              const KnnwbNeighbourhood *neighbourhood,
                                              KnnwbMetric metric, double *p, double *q,
                                              GError **error);

/**
 * knnwb_neighbourhood_write_table with the members' p and q given (n_members each; NULL: NA), for
 * callers that computed them (knnwb_neighbourhood_statistics_split). Errors: KNNWB_ERROR_IO.
 */
gboolean knnwb_neighbourhood_write_table_statistics(const char *path,
                                                    const KnnwbNeighbourhood *neighbourhood,
                                                    const KnnwbMatrix *data, KnnwbMetric metric,
                                                    const double *p, const double *q,
                                                    GError **error);

/**
 * Writes the neighbourhood as yEd GML: laid out radially (knnwb_drawing_layout_radial: the focus
 * in the centre, order 1 on a ring by distance, order 2 outside near the neighbour that brought
 * it), labelled, nodes coloured by order (the GML key "cluster" holds the order), the focus rows
 * highlighted, directed kNN edges weighted by distance. seed: unused by the radial layout, kept
 * for callers. Atomic. Errors: KNNWB_ERROR_IO, KNNWB_ERROR_IGRAPH.
 */
gboolean knnwb_neighbourhood_write_gml(const char *path, const KnnwbNeighbourhood *neighbourhood,
                                       const KnnwbMatrix *data, unsigned long seed, GError **error);

/**
 * knnwb_neighbourhood_write_gml with node attributes: attributes[a].values has one entry per
 * vertex of the neighbourhood (vertex v is row neighbourhood->rows[v]), written as
 * KnnwbNodeAttribute says. Errors as knnwb_neighbourhood_write_gml.
 */
gboolean knnwb_neighbourhood_write_gml_annotated(const char *path,
                                                 const KnnwbNeighbourhood *neighbourhood,
                                                 const KnnwbMatrix *data, unsigned long seed,
                                                 const KnnwbNodeAttribute *attributes,
                                                 size_t n_attributes, GError **error);

/**
 * Whether format can hold a neighbourhood graph (knnwb_neighbourhood_write_graph): .gml, .graphml,
 * .knn, .mtx and a .tsv edge table can; the n x k lists of .npy/.npz and a cluster table cannot.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT naming path and the formats that can. O(1).
 */
gboolean knnwb_neighbourhood_check_format(const char *path, KnnwbOutputFormat format,
                                          GError **error);

/**
 * Writes the neighbourhood graph in format (KNNWB_OUTPUT_AUTO: from path's extension, see
 * knnwb_formats_output_from_path): GML as knnwb_neighbourhood_write_gml, GraphML the same graph
 * with the rows' labels; .knn, .mtx (labels beside) and the .tsv edge table (row, label, rank,
 * neighbour row, neighbour, distance) number the vertices by their input rows, with n the input's
 * rows, as `knnwb knn` writes them. Atomic. Errors: those of knnwb_neighbourhood_check_format and
 * of the writers. Complexity: O(V + E) (GML: its layout; .knn, .mtx, .tsv: O(input rows) more).
 */
gboolean knnwb_neighbourhood_write_graph(const char *path, KnnwbOutputFormat format,
                                         const KnnwbNeighbourhood *neighbourhood,
                                         const KnnwbMatrix *data, unsigned long seed,
                                         GError **error);

/**
 * knnwb_neighbourhood_write_graph with node attributes (knnwb_neighbourhood_write_gml_annotated's):
 * GML and GraphML carry them; the formats that number rows ignore them. Errors as
 * knnwb_neighbourhood_write_graph.
 */
gboolean knnwb_neighbourhood_write_graph_annotated(const char *path, KnnwbOutputFormat format,
                                                   const KnnwbNeighbourhood *neighbourhood,
                                                   const KnnwbMatrix *data, unsigned long seed,
                                                   const KnnwbNodeAttribute *attributes,
                                                   size_t n_attributes, GError **error);

G_END_DECLS

#endif
