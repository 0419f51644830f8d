/* Square distance matrices from NPY (float64 or float32, C or Fortran order), kept in double, and
 * the reader that picks NPY or CSV/TSV by the file name. */
#include <string.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>

/* Finds 'key': value in the NPY header dict; returns a pointer just past the colon, or NULL. */
static const char *knnwb_npy_value(const char *header, const char *key)
{
  g_autofree char *quoted = g_strdup_printf("'%s'", key);
  const char *at = strstr(header, quoted);
  if (!at)
    return NULL;
  at = strchr(at + strlen(quoted), ':');
  if (!at)
    return NULL;
  at++;
  while (*at == ' ')
    at++;
  return at;
}

gboolean knnwb_clustering_read_distance_npy(const char *path, igraph_matrix_t *distances,
                                            GError **error)
{
  g_autofree char *bytes = NULL;
  gsize size = 0;
  g_autoptr(GError) io_error = NULL;
  if (!g_file_get_contents(path, &bytes, &size, &io_error)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s", io_error->message);
    return FALSE;
  }
  if (size < 10 || memcmp(bytes, "\x93NUMPY", 6) != 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: not an NPY file (no \\x93NUMPY magic)",
                path);
    return FALSE;
  }
  guint major = (guchar)bytes[6];
  gsize header_length, start;
  if (major == 1) {
    header_length = (guchar)bytes[8] | ((gsize)(guchar)bytes[9] << 8);
    start = 10;
  } else if ((major == 2 || major == 3) && size >= 12) {
    header_length = (guchar)bytes[8] | ((gsize)(guchar)bytes[9] << 8) |
                    ((gsize)(guchar)bytes[10] << 16) | ((gsize)(guchar)bytes[11] << 24);
    start = 12;
  } else {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: NPY version %u is not supported", path,
                major);
    return FALSE;
  }
  if (start + header_length > size) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: NPY header runs past the file end",
                path);
    return FALSE;
  }
  g_autofree char *header = g_strndup(bytes + start, header_length);
  const char *descr = knnwb_npy_value(header, "descr");
  const char *order = knnwb_npy_value(header, "fortran_order");
  const char *shape = knnwb_npy_value(header, "shape");
  gsize width;
  if (descr && g_str_has_prefix(descr, "'<f8'"))
    width = 8;
  else if (descr && g_str_has_prefix(descr, "'<f4'"))
    width = 4;
  else {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: NPY header: a distance matrix must be little-endian float64 or float32 "
                "('<f8' or '<f4')",
                path);
    return FALSE;
  }
  guint64 rows = 0, cols = 0;
  char *end = NULL;
  if (!order || !shape || *shape != '(' ||
      (rows = g_ascii_strtoull(shape + 1, &end, 10), *end != ',') ||
      (cols = g_ascii_strtoull(end + 1, &end, 10), *end != ')' && *end != ',')) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: NPY header: expected a 2-dimensional shape (n, n) and fortran_order", path);
    return FALSE;
  }
  if (rows != cols || rows > G_MAXINT32) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: a distance matrix is square; this one is %" G_GUINT64_FORMAT
                " x %" G_GUINT64_FORMAT,
                path, rows, cols);
    return FALSE;
  }
  gsize data = start + header_length;
  if ((size - data) / width / MAX(rows, 1) < rows) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: %" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT " values announced, the file "
                "holds fewer",
                path, rows, cols);
    return FALSE;
  }
  gboolean fortran = g_str_has_prefix(order, "True");
  igraph_error_t code =
      igraph_matrix_resize(distances, (igraph_integer_t)rows, (igraph_integer_t)rows);
  if (!knnwb_error_from_igraph(code, "allocating the distance matrix", error))
    return FALSE;
  for (guint64 i = 0; i < rows; i++)
    for (guint64 j = 0; j < rows; j++) {
      gsize at = data + (gsize)(i * rows + j) * width;
      double value;
      if (width == 8) {
        guint64 bits;
        memcpy(&bits, bytes + at, 8);
        bits = GUINT64_FROM_LE(bits);
        memcpy(&value, &bits, 8);
      } else {
        guint32 bits;
        float single;
        memcpy(&bits, bytes + at, 4);
        bits = GUINT32_FROM_LE(bits);
        memcpy(&single, &bits, 4);
        value = single;
      }
      /* Row-major i, j is element (i, j); Fortran order stores (j, i) there. */
      if (fortran)
        MATRIX(*distances, j, i) = value;
      else
        MATRIX(*distances, i, j) = value;
    }
  return TRUE;
}

gboolean knnwb_clustering_read_distance_matrix(const char *path, igraph_matrix_t *distances,
                                               char ***labels, GError **error)
{
  if (g_str_has_suffix(path, ".npy")) {
    if (labels)
      *labels = NULL;
    return knnwb_clustering_read_distance_npy(path, distances, error);
  }
  return knnwb_clustering_read_distance_csv(path, distances, labels, error);
}
