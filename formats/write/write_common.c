/* What the writers of formats/write share: edge lists of graphs, side-file names, chunk sizes,
 * vertex labels, TSV fields in chunks and the checks of a graph output. The dispatchers
 * (write_graph.c) and every writer use these; they call nothing back. */
#include "write_internal.h"

#include <inttypes.h>
#include <string.h>

gboolean knnwb_formats_ends_with(const char *path, const char *suffix)
{
  size_t n = strlen(path), m = strlen(suffix);
  return n >= m && g_ascii_strcasecmp(path + n - m, suffix) == 0;
}

void knnwb_formats_edges_of_graph(const igraph_t *graph, const igraph_vector_t *weights,
                                  KnnwbEdgeList *edges)
{
  edges->n_vertices = igraph_vcount(graph);
  edges->n_edges = igraph_ecount(graph);
  edges->directed = igraph_is_directed(graph);
  edges->from = VECTOR(graph->from);
  edges->to = VECTOR(graph->to);
  edges->stride = 1;
  edges->weights = weights != NULL ? VECTOR(*weights) : NULL;
}

char *knnwb_formats_side_path(const char *path, KnnwbOutputFormat format)
{
  const char *extension = format == KNNWB_OUTPUT_MTX ? ".mtx" : ".npy";
  const char *suffix = format == KNNWB_OUTPUT_MTX ? ".rows.txt" : ".distances.npy";
  if (format != KNNWB_OUTPUT_MTX && format != KNNWB_OUTPUT_NPY)
    return NULL;
  size_t length = strlen(path);
  if (knnwb_formats_ends_with(path, extension))
    length -= strlen(extension);
  g_autofree char *stem = g_strndup(path, length);
  return g_strconcat(stem, suffix, NULL);
}

size_t knnwb_formats_rows_per_chunk(size_t k)
{
  return MAX((size_t)1, (size_t)KNNWB_KNN_EDGES_PER_CHUNK / MAX(k, (size_t)1));
}

size_t knnwb_formats_count_edges(const KnnwbNeighbors *neighbors)
{
  size_t total = 0;
  for (size_t i = 0; i < neighbors->n_queries; i++)
    total += (size_t)neighbors->n_found[i];
  return total;
}

void knnwb_text_chunk_put_tsv_field(KnnwbTextChunk *chunk, const char *s)
{
  if (strpbrk(s, "\t\"\r\n") == NULL) {
    knnwb_text_chunk_puts(chunk, s);
    return;
  }
  knnwb_text_chunk_putc(chunk, '"');
  for (const char *c = s; *c != '\0'; c++) {
    if (*c == '"')
      knnwb_text_chunk_putc(chunk, '"');
    knnwb_text_chunk_putc(chunk, *c);
  }
  knnwb_text_chunk_putc(chunk, '"');
}

const char *knnwb_formats_vertex_label(const char *const *labels, int64_t v, char scratch[32])
{
  if (labels != NULL && labels[v] != NULL)
    return labels[v];
  g_snprintf(scratch, 32, "%" PRId64, v);
  return scratch;
}

gboolean knnwb_formats_check_output(const KnnwbGraphOutput *output, GError **error)
{
  if (output == NULL || output->graph == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "no graph to write");
    return FALSE;
  }
  igraph_integer_t n = igraph_vcount(output->graph);
  igraph_integer_t m = igraph_ecount(output->graph);
  if (output->weights != NULL && igraph_vector_size(output->weights) != m) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%" IGRAPH_PRId " weights for %" IGRAPH_PRId " edges",
                igraph_vector_size(output->weights), m);
    return FALSE;
  }
  if (output->membership != NULL) {
    if (igraph_vector_int_size(output->membership) != n) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "membership has %" IGRAPH_PRId " entries for %" IGRAPH_PRId " vertices",
                  igraph_vector_int_size(output->membership), n);
      return FALSE;
    }
    for (igraph_integer_t v = 0; v < n; v++)
      if (VECTOR(*output->membership)[v] < 0) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                    "vertex %" IGRAPH_PRId " has a negative cluster id", v);
        return FALSE;
      }
  }
  const KnnwbDrawingOptions *gml = output->gml;
  if (gml != NULL && gml->focus != NULL)
    for (igraph_integer_t i = 0; i < igraph_vector_int_size(gml->focus); i++)
      if (VECTOR(*gml->focus)[i] < 0 || VECTOR(*gml->focus)[i] >= n) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                    "focus vertex %" IGRAPH_PRId " is not in the graph (%" IGRAPH_PRId " vertices)",
                    VECTOR(*gml->focus)[i], n);
        return FALSE;
      }
  if (gml != NULL && gml->coordinates != NULL &&
      (igraph_matrix_nrow(gml->coordinates) != n || igraph_matrix_ncol(gml->coordinates) < 2)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "coordinates must be a %" IGRAPH_PRId " x 2 matrix", n);
    return FALSE;
  }
  return TRUE;
}
