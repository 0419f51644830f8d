/* A scipy-style linkage matrix as .npy (float64, (n - 1) x 4, C order) or TSV. */
#include "formats_internal.h"

static void knnwb_linkage_write_npy_header(FILE *stream, igraph_integer_t rows)
{
  char dict[128];
  int length = g_snprintf(
      dict, sizeof dict,
      "{'descr': '<f8', 'fortran_order': False, 'shape': (%" IGRAPH_PRId ", 4), }", rows);
  /* NPY 1.0: magic, version, little-endian header length, then the dict padded with spaces and a
   * newline so that the data starts at a multiple of 64 bytes. */
  int total = 10 + length + 1;
  int padding = (64 - total % 64) % 64;
  int header_length = length + padding + 1;
  fwrite("\x93NUMPY\x01\x00", 1, 8, stream);
  fputc(header_length & 0xff, stream);
  fputc((header_length >> 8) & 0xff, stream);
  fwrite(dict, 1, (size_t)length, stream);
  for (int i = 0; i < padding; i++)
    fputc(' ', stream);
  fputc('\n', stream);
}

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
    knnwb_linkage_write_npy_header(stream, rows);
    for (igraph_integer_t r = 0; r < rows; r++)
      for (int c = 0; c < 4; c++) {
        double value = MATRIX(*linkage, r, c);
        guint64 bits;
        memcpy(&bits, &value, sizeof bits);
        bits = GUINT64_TO_LE(bits);
        fwrite(&bits, sizeof bits, 1, stream);
      }
  } else {
    fputs("cluster_a\tcluster_b\tdistance\tsize\n", stream);
    for (igraph_integer_t r = 0; r < rows; r++)
      fprintf(stream, "%.0f\t%.0f\t%.17g\t%.0f\n", MATRIX(*linkage, r, 0), MATRIX(*linkage, r, 1),
              MATRIX(*linkage, r, 2), MATRIX(*linkage, r, 3));
  }
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
