/* A scipy-style linkage matrix as .npy (float64, (n - 1) x 4, C order) or TSV. */
#include "write_internal.h"

gboolean knnwb_formats_write_linkage(const char *path, const igraph_matrix_t *linkage,
                                     GError **error)
{
  igraph_integer_t rows = igraph_matrix_nrow(linkage);
  if (rows > 0 && igraph_matrix_ncol(linkage) != 4) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: a linkage matrix has 4 columns, not %" IGRAPH_PRId, path,
                igraph_matrix_ncol(linkage));
    return FALSE;
  }
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  if (g_str_has_suffix(path, ".npy")) {
    knnwb_npy_header_write(stream, "f8", (size_t)rows, 4);
    for (igraph_integer_t r = 0; r < rows; r++)
      for (int c = 0; c < 4; c++) {
        double value = MATRIX(*linkage, r, c); /* host order, as the header says */
        fwrite(&value, sizeof value, 1, stream);
      }
  } else {
    fputs("cluster_a\tcluster_b\tdistance\tsize\n", stream);
    for (igraph_integer_t r = 0; r < rows; r++)
      fprintf(stream, "%.0f\t%.0f\t%.17g\t%.0f\n", MATRIX(*linkage, r, 0), MATRIX(*linkage, r, 1),
              MATRIX(*linkage, r, 2), MATRIX(*linkage, r, 3));
  }
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
