/* The neighbour table: label, rank, neighbour label, distance; formatted in parallel chunks. */
#include "write_internal.h"

#include <inttypes.h>
#include <stdlib.h>

typedef struct {
  double distance;
  igraph_integer_t vertex;
} KnnwbNeighborEntry;

static int knnwb_neighbor_entry_compare(const void *a, const void *b)
{
  const KnnwbNeighborEntry *x = a, *y = b;
  if (x->distance != y->distance)
    return x->distance < y->distance ? -1 : 1;
  return (x->vertex > y->vertex) - (x->vertex < y->vertex);
}

/* Row numbers (0-based, as in .knn and GML ids) come first: labels may repeat (probes sharing a
 * gene symbol), row numbers never do. Distances in the shortest round-trip form, like .knn. */
static void knnwb_neighbors_put_row(KnnwbTextChunk *out, int64_t row, const char *label,
                                    size_t rank, int64_t neighbor_row, const char *neighbor,
                                    double distance)
{
  knnwb_text_chunk_put_int(out, row);
  knnwb_text_chunk_putc(out, '\t');
  knnwb_text_chunk_put_tsv_field(out, label);
  knnwb_text_chunk_putc(out, '\t');
  knnwb_text_chunk_put_int(out, (int64_t)rank);
  knnwb_text_chunk_putc(out, '\t');
  knnwb_text_chunk_put_int(out, neighbor_row);
  knnwb_text_chunk_putc(out, '\t');
  knnwb_text_chunk_put_tsv_field(out, neighbor);
  knnwb_text_chunk_putc(out, '\t');
  knnwb_text_chunk_put_double(out, distance);
  knnwb_text_chunk_putc(out, '\n');
}

static const char knnwb_neighbors_header[] = KNNWB_FORMATS_NEIGHBOR_TABLE_HEADER;

/* ---- from a graph: each vertex's incident edges sorted by (distance, vertex) ---- */

typedef struct {
  const igraph_t *graph;
  const igraph_vector_t *weights;
  const char *const *labels;
  const igraph_inclist_t *incidence;
} KnnwbNeighborsGraph;

static void knnwb_neighbors_format_graph(void *context, size_t first, size_t last,
                                         KnnwbTextChunk *out)
{
  const KnnwbNeighborsGraph *g = context;
  GArray *entries = g_array_new(FALSE, FALSE, sizeof(KnnwbNeighborEntry));
  char scratch[2][32];
  for (size_t v = first; v < last; v++) {
    igraph_vector_int_t *incident = igraph_inclist_get(g->incidence, (igraph_integer_t)v);
    igraph_integer_t degree = igraph_vector_int_size(incident);
    g_array_set_size(entries, 0);
    for (igraph_integer_t i = 0; i < degree; i++) {
      igraph_integer_t e = VECTOR(*incident)[i];
      KnnwbNeighborEntry entry = {g->weights ? VECTOR(*g->weights)[e] : 1.0,
                                  IGRAPH_OTHER(g->graph, e, (igraph_integer_t)v)};
      g_array_append_val(entries, entry);
    }
    if (entries->len > 1) /* an isolated vertex has no entries (and no array to sort) */
      qsort(entries->data, entries->len, sizeof(KnnwbNeighborEntry), knnwb_neighbor_entry_compare);
    const char *label = knnwb_formats_vertex_label(g->labels, (int64_t)v, scratch[0]);
    for (guint r = 0; r < entries->len; r++) {
      KnnwbNeighborEntry *entry = &g_array_index(entries, KnnwbNeighborEntry, r);
      knnwb_neighbors_put_row(out, (int64_t)v, label, r + 1, (int64_t)entry->vertex,
                              knnwb_formats_vertex_label(g->labels, entry->vertex, scratch[1]),
                              entry->distance);
    }
  }
  g_array_free(entries, TRUE);
}

gboolean knnwb_formats_write_neighbors_tsv_control(const char *path, const igraph_t *graph,
                                                   const igraph_vector_t *weights,
                                                   const char *const *labels,
                                                   const KnnwbWriteControl *control, GError **error)
{
  if (weights != NULL && igraph_vector_size(weights) != igraph_ecount(graph)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: %" IGRAPH_PRId " weights for %" IGRAPH_PRId " edges", path,
                igraph_vector_size(weights), igraph_ecount(graph));
    return FALSE;
  }
  igraph_inclist_t incidence;
  igraph_neimode_t mode = igraph_is_directed(graph) ? IGRAPH_OUT : IGRAPH_ALL;
  if (!knnwb_error_from_igraph(igraph_inclist_init(graph, &incidence, mode, IGRAPH_LOOPS_ONCE),
                               "igraph_inclist_init", error))
    return FALSE;
  gboolean ok = FALSE;
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file != NULL) {
    FILE *stream = knnwb_atomic_file_stream(file);
    fputs(knnwb_neighbors_header, stream);
    KnnwbNeighborsGraph context = {graph, weights, labels, &incidence};
    size_t n = (size_t)igraph_vcount(graph);
    size_t mean_degree = n > 0 ? (size_t)igraph_ecount(graph) * 2 / n + 1 : 1;
    ok = knnwb_formats_write_chunks(stream, path, n, knnwb_formats_rows_per_chunk(mean_degree),
                                    knnwb_neighbors_format_graph, &context, control, 0, n, error) &&
         knnwb_atomic_file_commit(g_steal_pointer(&file), error);
  }
  igraph_inclist_destroy(&incidence);
  return ok;
}

gboolean knnwb_formats_write_neighbors_tsv(const char *path, const igraph_t *graph,
                                           const igraph_vector_t *weights,
                                           const char *const *labels, GError **error)
{
  return knnwb_formats_write_neighbors_tsv_control(path, graph, weights, labels, NULL, error);
}

/* ---- from neighbour lists ---- */

typedef struct {
  const KnnwbNeighbors *neighbors;
  const char *const *query_labels, *const *reference_labels;
} KnnwbNeighborsLists;

static void knnwb_neighbors_format_lists(void *context, size_t first, size_t last,
                                         KnnwbTextChunk *out)
{
  const KnnwbNeighborsLists *l = context;
  const KnnwbNeighbors *nb = l->neighbors;
  char scratch[2][32];
  for (size_t q = first; q < last; q++) {
    const int64_t row = (int64_t)(nb->first_row + q); /* lists of one rank's rows: not 0 */
    const char *label = knnwb_formats_vertex_label(l->query_labels, row, scratch[0]);
    for (size_t r = 0; r < nb->k; r++) {
      int64_t index = nb->indices[q * nb->k + r];
      if (index < 0)
        continue;
      knnwb_neighbors_put_row(out, row, label, r + 1, index,
                              knnwb_formats_vertex_label(l->reference_labels, index, scratch[1]),
                              nb->distances[q * nb->k + r]);
    }
  }
}

gboolean knnwb_formats_write_neighbor_lists_tsv_control(
    const char *path, const KnnwbNeighbors *neighbors, const char *const *query_labels,
    const char *const *reference_labels, const KnnwbWriteControl *control, GError **error)
{
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  fputs(knnwb_neighbors_header, stream);
  KnnwbNeighborsLists context = {neighbors, query_labels, reference_labels};
  if (!knnwb_formats_write_chunks(
          stream, path, neighbors->n_queries, knnwb_formats_rows_per_chunk(neighbors->k),
          knnwb_neighbors_format_lists, &context, control, 0, neighbors->n_queries, error))
    return FALSE;
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

gboolean knnwb_formats_write_neighbor_lists_tsv(const char *path, const KnnwbNeighbors *neighbors,
                                                const char *const *query_labels,
                                                const char *const *reference_labels, GError **error)
{
  return knnwb_formats_write_neighbor_lists_tsv_control(path, neighbors, query_labels,
                                                        reference_labels, NULL, error);
}

gboolean knnwb_formats_write_neighbor_lists_lines(FILE *stream, const KnnwbNeighbors *lists,
                                                  const char *const *query_labels,
                                                  const char *const *reference_labels,
                                                  const KnnwbWriteControl *control, GError **error)
{
  KnnwbNeighborsLists context = {lists, query_labels, reference_labels};
  return knnwb_formats_write_chunks(
      stream, "(neighbour table)", lists->n_queries, knnwb_formats_rows_per_chunk(lists->k),
      knnwb_neighbors_format_lists, &context, control, 0, lists->n_queries, error);
}
