/* The seed's .knn format: `vertices edges`, then `source target weight` per edge, 0-based. */
#include "formats_internal.h"

#include <inttypes.h>

/* Writes an unsigned decimal without printf (the edge loop is the hot path of big graphs). */
static void knnwb_knn_put_index(FILE *stream, int64_t value)
{
  char digits[24];
  int n = 0;
  uint64_t v = (uint64_t)value;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0)
    putc_unlocked(digits[--n], stream);
}

void knnwb_formats_write_knn_lines(FILE *stream, const KnnwbNeighbors *lists)
{
  char number[40];
  locale_t saved_locale = uselocale(knnwb_formats_c_locale());
  for (size_t q = 0; q < lists->n_queries; q++)
    for (int32_t r = 0; r < lists->n_found[q]; r++) {
      knnwb_knn_put_index(stream, (int64_t)(lists->first_row + q));
      putc_unlocked(' ', stream);
      knnwb_knn_put_index(stream, lists->indices[q * lists->k + (size_t)r]);
      putc_unlocked(' ', stream);
      knnwb_formats_format_double(number, sizeof number,
                                  lists->distances[q * lists->k + (size_t)r]);
      fputs(number, stream);
      putc_unlocked('\n', stream);
    }
  uselocale(saved_locale);
}

gboolean knnwb_formats_write_knn(const char *path, const igraph_t *graph,
                                 const igraph_vector_t *weights, GError **error)
{
  igraph_integer_t n = igraph_vcount(graph);
  igraph_integer_t m = igraph_ecount(graph);
  if (weights != NULL && igraph_vector_size(weights) != m) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: %" IGRAPH_PRId " weights for %" IGRAPH_PRId " edges", path,
                igraph_vector_size(weights), m);
    return FALSE;
  }
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  locale_t saved_locale = uselocale(knnwb_formats_c_locale());
  fprintf(stream, "%" IGRAPH_PRId " %" IGRAPH_PRId "\n", n, m);
  char number[40];
  gboolean directed = igraph_is_directed(graph);
  for (igraph_integer_t e = 0; e < m; e++) {
    igraph_integer_t from = IGRAPH_FROM(graph, e), to = IGRAPH_TO(graph, e);
    if (!directed && from > to) {
      /* igraph stores undirected edges larger end first; people read "0 1" better. */
      igraph_integer_t swap = from;
      from = to;
      to = swap;
    }
    knnwb_knn_put_index(stream, from);
    putc_unlocked(' ', stream);
    knnwb_knn_put_index(stream, to);
    putc_unlocked(' ', stream);
    if (weights != NULL) {
      knnwb_formats_format_double(number, sizeof number, VECTOR(*weights)[e]);
      fputs(number, stream);
    } else {
      putc_unlocked('1', stream);
    }
    putc_unlocked('\n', stream);
  }
  uselocale(saved_locale);
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
