/* The seed's .knn format: `vertices edges`, then `source target distance` per edge, 0-based.
 * Formatted in parallel chunks (chunk_writer.c), from neighbour lists or from an edge list. */
#include "write_internal.h"

#include <inttypes.h>

static void knnwb_knn_format_edges(void *context, size_t first, size_t last, KnnwbTextChunk *out)
{
  const KnnwbEdgeList *edges = context;
  for (size_t e = first; e < last; e++) {
    igraph_integer_t a = edges->from[e * edges->stride], b = edges->to[e * edges->stride];
    if (!edges->directed && a > b) {
      /* igraph stores undirected edges larger end first; people read "0 1" better. */
      igraph_integer_t swap = a;
      a = b;
      b = swap;
    }
    knnwb_text_chunk_put_int(out, a);
    knnwb_text_chunk_putc(out, ' ');
    knnwb_text_chunk_put_int(out, b);
    knnwb_text_chunk_putc(out, ' ');
    if (edges->weights != NULL)
      knnwb_text_chunk_put_double(out, edges->weights[e]);
    else
      knnwb_text_chunk_putc(out, '1');
    knnwb_text_chunk_putc(out, '\n');
  }
}

static void knnwb_knn_format_lists(void *context, size_t first, size_t last, KnnwbTextChunk *out)
{
  const KnnwbNeighbors *nb = context;
  for (size_t i = first; i < last; i++)
    for (size_t r = 0; r < nb->k; r++) {
      int64_t j = nb->indices[i * nb->k + r];
      if (j < 0)
        continue;
      knnwb_text_chunk_put_int(out, (int64_t)(nb->first_row + i)); /* one rank's rows: not 0 */
      knnwb_text_chunk_putc(out, ' ');
      knnwb_text_chunk_put_int(out, j);
      knnwb_text_chunk_putc(out, ' ');
      knnwb_text_chunk_put_double(out, nb->distances[i * nb->k + r]);
      knnwb_text_chunk_putc(out, '\n');
    }
}

gboolean knnwb_formats_write_knn_edges(const char *path, const KnnwbEdgeList *edges,
                                       const KnnwbWriteControl *control, GError **error)
{
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  fprintf(stream, "%" IGRAPH_PRId " %" IGRAPH_PRId "\n", edges->n_vertices, edges->n_edges);
  if (!knnwb_formats_write_chunks(stream, path, (size_t)edges->n_edges, KNNWB_KNN_EDGES_PER_CHUNK,
                                  knnwb_knn_format_edges, (void *)edges, control, 0,
                                  (uint64_t)edges->n_edges, error))
    return FALSE;
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

gboolean knnwb_formats_write_knn_lists(const char *path, const KnnwbNeighbors *neighbors,
                                       const KnnwbWriteControl *control, GError **error)
{
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  fprintf(stream, "%zu %zu\n", neighbors->n_queries, knnwb_formats_count_edges(neighbors));
  if (!knnwb_formats_write_chunks(
          stream, path, neighbors->n_queries, knnwb_formats_rows_per_chunk(neighbors->k),
          knnwb_knn_format_lists, (void *)neighbors, control, 0, neighbors->n_queries, error))
    return FALSE;
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

gboolean knnwb_formats_write_knn(const char *path, const igraph_t *graph,
                                 const igraph_vector_t *weights, GError **error)
{
  if (weights != NULL && igraph_vector_size(weights) != igraph_ecount(graph)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: %" IGRAPH_PRId " weights for %" IGRAPH_PRId " edges", path,
                igraph_vector_size(weights), igraph_ecount(graph));
    return FALSE;
  }
  KnnwbEdgeList edges;
  knnwb_formats_edges_of_graph(graph, weights, &edges);
  return knnwb_formats_write_knn_edges(path, &edges, NULL, error);
}

gboolean knnwb_formats_write_knn_lines(FILE *stream, const KnnwbNeighbors *lists,
                                       const KnnwbWriteControl *control, GError **error)
{
  return knnwb_formats_write_chunks(stream, "(.knn lines)", lists->n_queries,
                                    knnwb_formats_rows_per_chunk(lists->k), knnwb_knn_format_lists,
                                    (void *)lists, control, 0, lists->n_queries, error);
}

gboolean knnwb_formats_write_knn_edge_lines(FILE *stream, const KnnwbEdgeList *edges,
                                            const KnnwbWriteControl *control, GError **error)
{
  return knnwb_formats_write_chunks(stream, "(.knn lines)", (size_t)edges->n_edges,
                                    KNNWB_KNN_EDGES_PER_CHUNK, knnwb_knn_format_edges,
                                    (void *)edges, control, 0, (uint64_t)edges->n_edges, error);
}
