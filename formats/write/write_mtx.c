/* Matrix Market: the kNN graph as a sparse n x n distance matrix (scipy.io.mmread, R
 * Matrix::readMM), 1-based, with the row labels in a side file. Directed graphs and neighbour
 * lists are `general` (row i holds i's neighbours); undirected graphs are `symmetric`, each edge
 * once in the lower triangle. Explicit zeros (distance 0) are written: they are edges. */
#include "write_internal.h"

#include <inttypes.h>

static void knnwb_mtx_put_entry(KnnwbTextChunk *out, int64_t row, int64_t column, double value)
{
  knnwb_text_chunk_put_int(out, row + 1);
  knnwb_text_chunk_putc(out, ' ');
  knnwb_text_chunk_put_int(out, column + 1);
  knnwb_text_chunk_putc(out, ' ');
  knnwb_text_chunk_put_double(out, value);
  knnwb_text_chunk_putc(out, '\n');
}

static void knnwb_mtx_format_edges(void *context, size_t first, size_t last, KnnwbTextChunk *out)
{
  const KnnwbEdgeList *edges = context;
  for (size_t e = first; e < last; e++) {
    igraph_integer_t a = edges->from[e * edges->stride], b = edges->to[e * edges->stride];
    if (!edges->directed && a < b) { /* symmetric: the lower triangle, row >= column */
      igraph_integer_t swap = a;
      a = b;
      b = swap;
    }
    knnwb_mtx_put_entry(out, a, b, edges->weights ? edges->weights[e] : 1.0);
  }
}

static void knnwb_mtx_format_lists(void *context, size_t first, size_t last, KnnwbTextChunk *out)
{
  const KnnwbNeighbors *nb = context;
  for (size_t i = first; i < last; i++)
    for (size_t r = 0; r < nb->k; r++) {
      int64_t j = nb->indices[i * nb->k + r];
      if (j >= 0)
        knnwb_mtx_put_entry(out, (int64_t)(nb->first_row + i), j, nb->distances[i * nb->k + r]);
    }
}

/* One label per line, row 1 first; labels are single lines already (readers reject nothing, so
 * newlines and tabs inside a label are replaced by spaces to keep line = row). */
gboolean knnwb_formats_write_mtx_labels(const char *path, size_t n, const char *const *labels,
                                        GError **error)
{
  g_autofree char *side = knnwb_formats_side_path(path, KNNWB_OUTPUT_MTX);
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(side, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  char scratch[32];
  for (size_t i = 0; i < n; i++) {
    for (const char *p = knnwb_formats_vertex_label(labels, (int64_t)i, scratch); *p; p++)
      putc(*p == '\n' || *p == '\r' || *p == '\t' ? ' ' : *p, stream);
    putc('\n', stream);
  }
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

void knnwb_formats_write_mtx_header(FILE *stream, gboolean symmetric, size_t n, size_t nnz,
                                    gboolean labelled)
{
  fprintf(stream,
          "%%%%MatrixMarket matrix coordinate real %s\n"
          "%% knnwb kNN graph: entry (i, j) = distance from row i to its neighbour j (1-based)%s\n"
          "%zu %zu %zu\n",
          symmetric ? "symmetric" : "general", labelled ? "; row labels in the .rows.txt file" : "",
          n, n, nnz);
}

static gboolean knnwb_mtx_write(const char *path, gboolean symmetric, size_t n, size_t nnz,
                                size_t n_items, size_t grain, KnnwbChunkFormatFunc format,
                                void *context, const char *const *labels,
                                const KnnwbWriteControl *control, GError **error)
{
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  knnwb_formats_write_mtx_header(stream, symmetric, n, nnz, labels != NULL);
  if (!knnwb_formats_write_chunks(stream, path, n_items, grain, format, context, control, 0,
                                  n_items, error))
    return FALSE;
  if (labels != NULL && !knnwb_formats_write_mtx_labels(path, n, labels, error))
    return FALSE;
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

gboolean knnwb_formats_write_mtx_edges(const char *path, const KnnwbEdgeList *edges,
                                       const char *const *labels, const KnnwbWriteControl *control,
                                       GError **error)
{
  return knnwb_mtx_write(path, !edges->directed, (size_t)edges->n_vertices, (size_t)edges->n_edges,
                         (size_t)edges->n_edges, 1 << 16, knnwb_mtx_format_edges, (void *)edges,
                         labels, control, error);
}

gboolean knnwb_formats_write_mtx_lists(const char *path, const KnnwbNeighbors *neighbors,
                                       const char *const *labels, const KnnwbWriteControl *control,
                                       GError **error)
{
  return knnwb_mtx_write(path, FALSE, neighbors->n_queries, knnwb_formats_count_edges(neighbors),
                         neighbors->n_queries, knnwb_formats_rows_per_chunk(neighbors->k),
                         knnwb_mtx_format_lists, (void *)neighbors, labels, control, error);
}

gboolean knnwb_formats_write_mtx_lines(FILE *stream, const KnnwbNeighbors *lists,
                                       const KnnwbWriteControl *control, GError **error)
{
  return knnwb_formats_write_chunks(stream, "(.mtx lines)", lists->n_queries,
                                    knnwb_formats_rows_per_chunk(lists->k), knnwb_mtx_format_lists,
                                    (void *)lists, control, 0, lists->n_queries, error);
}

gboolean knnwb_formats_write_mtx_edge_lines(FILE *stream, const KnnwbEdgeList *edges,
                                            const KnnwbWriteControl *control, GError **error)
{
  return knnwb_formats_write_chunks(stream, "(.mtx lines)", (size_t)edges->n_edges, 1 << 16,
                                    knnwb_mtx_format_edges, (void *)edges, control, 0,
                                    (uint64_t)edges->n_edges, error);
}
