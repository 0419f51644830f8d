/* formats/write: the per-format writers behind the dispatchers of write_graph.c, and the helpers
 * they share (write_common.c). Read by formats/write only; not installed. */
#ifndef KNNWB_FORMATS_WRITE_INTERNAL_H
#define KNNWB_FORMATS_WRITE_INTERNAL_H

#include "../io/io.h"

#include <knnwb/drawing.h>

G_BEGIN_DECLS

/* ---- shared helpers (write_common.c) ---- */

/** Edge e's ends as people write them: an undirected edge smaller end first. */
static inline void knnwb_formats_edge_ends(const igraph_t *graph, igraph_integer_t e,
                                           igraph_integer_t *from, igraph_integer_t *to)
{
  igraph_integer_t a = IGRAPH_FROM(graph, e), b = IGRAPH_TO(graph, e);
  if (!igraph_is_directed(graph) && a > b) {
    igraph_integer_t swap = a;
    a = b;
    b = swap;
  }
  *from = a;
  *to = b;
}

/** Edges per chunk of the edge-list writers (.knn, .mtx): large enough to keep the threads busy,
 * small enough for two chunks per thread in memory. */
enum { KNNWB_KNN_EDGES_PER_CHUNK = 1 << 16 };

/** Rows per chunk so that a chunk holds about 64 Ki edges of k per row. O(1). */
size_t knnwb_formats_rows_per_chunk(size_t k);
/** Edges in the lists (sum of n_found). O(n). */
size_t knnwb_formats_count_edges(const KnnwbNeighbors *neighbors);
/** TRUE when path ends with suffix, ignoring ASCII case. O(length). */
gboolean knnwb_formats_ends_with(const char *path, const char *suffix);
/** Label of vertex v: labels[v] when given and non-NULL, else its number in scratch. O(1). */
const char *knnwb_formats_vertex_label(const char *const *labels, int64_t v, char scratch[32]);
/** Checks membership/weights lengths, that membership ids are >= 0, and that the drawing
 * options' focus ids and coordinates fit the graph. Errors: KNNWB_ERROR_INVALID_ARGUMENT. O(n). */
gboolean knnwb_formats_check_output(const KnnwbGraphOutput *output, GError **error);
/** How the writers put each node attribute: its GML key, whether it is numeric (GML real,
 * GraphML double) and, for numbers, the values parsed (NaN: none). */
typedef struct {
  char *gml_key;
  gboolean numeric;
  double *numbers;
} KnnwbAttributePlan;
/** The plan of output's attributes (n_attributes entries; NULL when there are none), freed with
 * knnwb_formats_attributes_free. O(vertices x attributes). */
KnnwbAttributePlan *knnwb_formats_attributes_plan(const KnnwbGraphOutput *output);
void knnwb_formats_attributes_free(KnnwbAttributePlan *plan, size_t n_attributes);
/** Whether an attribute's text value stands for no value (NULL, empty, NA, NaN, ...). */
gboolean knnwb_formats_attribute_missing(const char *value);
/** Appends s as a TSV field, quoted like knnwb_formats_write_tsv_field. O(strlen(s)). */
void knnwb_text_chunk_put_tsv_field(KnnwbTextChunk *chunk, const char *s);

/* ---- per-format writers ---- */

/** Labels into file, one a line (an empty line for NULL), gathered into blocks of 1 MiB (one
 * fwrite each) and each block handed to the disk at once (write_npy.c). The caller checked that
 * none holds a line break. FALSE with error set when a write fails. O(total length). */
gboolean knnwb_formats_labels_put(KnnwbAtomicFile *file, const char *path,
                                  const char *const *labels, size_t n, GError **error);

/* Behind knnwb_formats_write_lists / _edges / _graph (write_graph.c). */
gboolean knnwb_formats_write_knn_edges(const char *path, const KnnwbEdgeList *edges,
                                       const KnnwbWriteControl *control, GError **error);
gboolean knnwb_formats_write_knn_lists(const char *path, const KnnwbNeighbors *neighbors,
                                       const KnnwbWriteControl *control, GError **error);
gboolean knnwb_formats_write_mtx_edges(const char *path, const KnnwbEdgeList *edges,
                                       const char *const *labels, const KnnwbWriteControl *control,
                                       GError **error);
gboolean knnwb_formats_write_mtx_lists(const char *path, const KnnwbNeighbors *neighbors,
                                       const char *const *labels, const KnnwbWriteControl *control,
                                       GError **error);
/* .npy lists: OUT (indices), OUT.distances.npy and, with labels, OUT.labels.txt (one per line, as
 * the NPY reader's side file); .npz: members indices, distances and, with labels, a 1-D '<U'
 * array `labels`. labels may be NULL. */
gboolean knnwb_formats_write_npy_lists(const char *path, const KnnwbNeighbors *neighbors,
                                       const char *const *labels, const KnnwbWriteControl *control,
                                       GError **error);
gboolean knnwb_formats_write_npz_lists(const char *path, const KnnwbNeighbors *neighbors,
                                       const char *const *labels, const KnnwbWriteControl *control,
                                       GError **error);
gboolean knnwb_formats_write_neighbors_tsv_control(const char *path, const igraph_t *graph,
                                                   const igraph_vector_t *weights,
                                                   const char *const *labels,
                                                   const KnnwbWriteControl *control,
                                                   GError **error);
gboolean knnwb_formats_write_neighbor_lists_tsv_control(
    const char *path, const KnnwbNeighbors *neighbors, const char *const *query_labels,
    const char *const *reference_labels, const KnnwbWriteControl *control, GError **error);

G_END_DECLS

#endif
