/* The neighbour table: label, rank, neighbour label, distance. */
#include "formats_internal.h"

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
 * gene symbol), row numbers never do. */
static void knnwb_neighbors_put_row(FILE *stream, int64_t row, const char *label, size_t rank,
                                    int64_t neighbor_row, const char *neighbor, double distance)
{
  fprintf(stream, "%" G_GINT64_FORMAT "\t", row);
  knnwb_formats_write_tsv_field(stream, label);
  fprintf(stream, "\t%zu\t%" G_GINT64_FORMAT "\t", rank, neighbor_row);
  knnwb_formats_write_tsv_field(stream, neighbor);
  fprintf(stream, "\t%.9g\n", distance);
}

static igraph_error_t knnwb_neighbors_write(FILE *stream, const igraph_t *graph,
                                            const igraph_vector_t *weights,
                                            const char *const *labels)
{
  igraph_inclist_t incidence;
  igraph_neimode_t mode = igraph_is_directed(graph) ? IGRAPH_OUT : IGRAPH_ALL;
  IGRAPH_CHECK(igraph_inclist_init(graph, &incidence, mode, IGRAPH_LOOPS_ONCE));
  IGRAPH_FINALLY(igraph_inclist_destroy, &incidence);
  igraph_integer_t n = igraph_vcount(graph);
  GArray *entries = g_array_new(FALSE, FALSE, sizeof(KnnwbNeighborEntry));
  char scratch[2][32];
  for (igraph_integer_t v = 0; v < n; v++) {
    igraph_vector_int_t *incident = igraph_inclist_get(&incidence, v);
    igraph_integer_t degree = igraph_vector_int_size(incident);
    g_array_set_size(entries, 0);
    for (igraph_integer_t i = 0; i < degree; i++) {
      igraph_integer_t e = VECTOR(*incident)[i];
      KnnwbNeighborEntry entry = {weights ? VECTOR(*weights)[e] : 1.0, IGRAPH_OTHER(graph, e, v)};
      g_array_append_val(entries, entry);
    }
    qsort(entries->data, entries->len, sizeof(KnnwbNeighborEntry), knnwb_neighbor_entry_compare);
    const char *label = knnwb_formats_vertex_label(labels, v, scratch[0]);
    for (guint r = 0; r < entries->len; r++) {
      KnnwbNeighborEntry *entry = &g_array_index(entries, KnnwbNeighborEntry, r);
      knnwb_neighbors_put_row(stream, (int64_t)v, label, r + 1, (int64_t)entry->vertex,
                              knnwb_formats_vertex_label(labels, entry->vertex, scratch[1]),
                              entry->distance);
    }
  }
  g_array_free(entries, TRUE);
  igraph_inclist_destroy(&incidence);
  IGRAPH_FINALLY_CLEAN(1);
  return IGRAPH_SUCCESS;
}

gboolean knnwb_formats_write_neighbors_tsv(const char *path, const igraph_t *graph,
                                           const igraph_vector_t *weights,
                                           const char *const *labels, GError **error)
{
  if (weights != NULL && igraph_vector_size(weights) != igraph_ecount(graph)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: %" IGRAPH_PRId " weights for %" IGRAPH_PRId " edges", path,
                igraph_vector_size(weights), igraph_ecount(graph));
    return FALSE;
  }
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  locale_t saved_locale = uselocale(knnwb_formats_c_locale());
  fputs(KNNWB_FORMATS_NEIGHBOR_TABLE_HEADER, stream);
  igraph_error_t code = knnwb_neighbors_write(stream, graph, weights, labels);
  uselocale(saved_locale);
  if (!knnwb_error_from_igraph(code, "igraph_inclist_init", error))
    return FALSE;
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

void knnwb_formats_write_neighbor_lists_lines(FILE *stream, const KnnwbNeighbors *neighbors,
                                              const char *const *query_labels,
                                              const char *const *reference_labels)
{
  char scratch[2][32];
  locale_t saved_locale = uselocale(knnwb_formats_c_locale());
  for (size_t q = 0; q < neighbors->n_queries; q++) {
    const int64_t row = (int64_t)(neighbors->first_row + q);
    const char *label = knnwb_formats_vertex_label(query_labels, row, scratch[0]);
    for (size_t r = 0; r < neighbors->k; r++) {
      int64_t index = neighbors->indices[q * neighbors->k + r];
      if (index < 0)
        continue;
      knnwb_neighbors_put_row(stream, row, label, r + 1, index,
                              knnwb_formats_vertex_label(reference_labels, index, scratch[1]),
                              neighbors->distances[q * neighbors->k + r]);
    }
  }
  uselocale(saved_locale);
}

gboolean knnwb_formats_write_neighbor_lists_tsv(const char *path, const KnnwbNeighbors *neighbors,
                                                const char *const *query_labels,
                                                const char *const *reference_labels, GError **error)
{
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  locale_t saved_locale = uselocale(knnwb_formats_c_locale());
  fputs(KNNWB_FORMATS_NEIGHBOR_TABLE_HEADER, stream);
  knnwb_formats_write_neighbor_lists_lines(stream, neighbors, query_labels, reference_labels);
  uselocale(saved_locale);
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
