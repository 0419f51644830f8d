/* The cluster table: label, cluster, cluster size; one line per vertex in order. */
#include "write_internal.h"

gboolean knnwb_formats_write_labels_tsv(const char *path, const igraph_vector_int_t *membership,
                                        const char *const *labels, GError **error)
{
  igraph_integer_t n = igraph_vector_int_size(membership);
  igraph_integer_t clusters = 0;
  for (igraph_integer_t v = 0; v < n; v++) {
    if (VECTOR(*membership)[v] < 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "%s: vertex %" IGRAPH_PRId " has a negative cluster id", path, v);
      return FALSE;
    }
    clusters = MAX(clusters, VECTOR(*membership)[v] + 1);
  }
  g_autofree igraph_integer_t *size = g_new0(igraph_integer_t, MAX(clusters, 1));
  for (igraph_integer_t v = 0; v < n; v++)
    size[VECTOR(*membership)[v]]++;
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  fputs("row\tlabel\tcluster\tsize\n", stream);
  char scratch[32];
  for (igraph_integer_t v = 0; v < n; v++) {
    fprintf(stream, "%" IGRAPH_PRId "\t", v);
    knnwb_formats_write_tsv_field(stream, knnwb_formats_vertex_label(labels, v, scratch));
    igraph_integer_t c = VECTOR(*membership)[v];
    fprintf(stream, "\t%" IGRAPH_PRId "\t%" IGRAPH_PRId "\n", c, size[c]);
  }
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
