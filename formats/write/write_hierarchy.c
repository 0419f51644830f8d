/* MST-kNN's split hierarchy as a TSV table. */
#include "write_internal.h"

gboolean knnwb_formats_write_hierarchy_tsv(const char *path, const igraph_vector_int_t *parent,
                                           const igraph_vector_int_t *size,
                                           const igraph_vector_int_t *k,
                                           const igraph_vector_int_t *cluster, GError **error)
{
  igraph_integer_t m = igraph_vector_int_size(parent);
  if (igraph_vector_int_size(size) != m || igraph_vector_int_size(k) != m ||
      igraph_vector_int_size(cluster) != m) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: the hierarchy's columns differ in length", path);
    return FALSE;
  }
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  fputs("node\tparent\tsize\tk\tcluster\n", stream);
  for (igraph_integer_t i = 0; i < m; i++) {
    fprintf(stream, "%" IGRAPH_PRId "\t", i);
    if (VECTOR(*parent)[i] < 0)
      fputs("NA", stream);
    else
      fprintf(stream, "%" IGRAPH_PRId, VECTOR(*parent)[i]);
    fprintf(stream, "\t%" IGRAPH_PRId "\t%" IGRAPH_PRId "\t", VECTOR(*size)[i], VECTOR(*k)[i]);
    if (VECTOR(*cluster)[i] < 0)
      fputs("NA\n", stream);
    else
      fprintf(stream, "%" IGRAPH_PRId "\n", VECTOR(*cluster)[i]);
  }
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
