/* Square distance matrices, labelled CSV/TSV (as R's write.csv writes them) or NPY (float64 or
 * float32, C or Fortran order, kept in double), and the reader that picks one by the file name. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "read_internal.h"

/* Splits one line into fields at delimiter; double-quoted fields may hold the delimiter and ""
 * for a quote. */
static GPtrArray *knnwb_formats_distance_csv_split(const char *line, char delimiter, gboolean *ok)
{
  GPtrArray *fields = g_ptr_array_new_with_free_func(g_free);
  const char *p = line;
  *ok = TRUE;
  for (;;) {
    GString *field = g_string_new(NULL);
    if (*p == '"') {
      p++;
      for (;;) {
        if (*p == '\0') {
          *ok = FALSE; /* unterminated quote */
          break;
        }
        if (*p == '"') {
          if (p[1] == '"') {
            g_string_append_c(field, '"');
            p += 2;
            continue;
          }
          p++;
          break;
        }
        g_string_append_c(field, *p++);
      }
      if (*ok && *p != delimiter && *p != '\0')
        *ok = FALSE; /* text after a closing quote */
    } else {
      while (*p != delimiter && *p != '\0')
        g_string_append_c(field, *p++);
    }
    g_ptr_array_add(fields, g_string_free(field, FALSE));
    if (!*ok || *p == '\0')
      break;
    p++; /* the delimiter */
  }
  return fields;
}

gboolean knnwb_formats_read_distance_csv(const char *path, igraph_matrix_t *distances,
                                         char ***labels, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr(GError) io_error = NULL;
  if (!g_file_get_contents(path, &text, NULL, &io_error)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s", io_error->message);
    return FALSE;
  }
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  size_t n_lines = g_strv_length(lines);
  /* Drop carriage returns and trailing empty lines. */
  for (size_t i = 0; i < n_lines; i++)
    g_strchomp(lines[i]);
  while (n_lines > 0 && lines[n_lines - 1][0] == '\0')
    n_lines--;
  if (n_lines == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:1: empty file", path);
    return FALSE;
  }
  gboolean ok;
  /* TSV when the header has a tab (labels may hold commas), else CSV. */
  char delimiter = strchr(lines[0], '\t') ? '\t' : ',';
  g_autoptr(GPtrArray) header = knnwb_formats_distance_csv_split(lines[0], delimiter, &ok);
  if (!ok) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:1: malformed quoted field", path);
    return FALSE;
  }
  size_t n = header->len - 1;
  if (n_lines - 1 != n) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s:%zu: the header names %zu column%s but there %s %zu data line%s (not square)",
                path, n_lines, n, KNNWB_PLURAL(n), n_lines - 1 == 1 ? "is" : "are", n_lines - 1,
                KNNWB_PLURAL(n_lines - 1));
    return FALSE;
  }
  igraph_error_t code = igraph_matrix_resize(distances, (igraph_integer_t)n, (igraph_integer_t)n);
  if (!knnwb_error_from_igraph(code, "allocating the distance matrix", error))
    return FALSE;
  char **row_labels = knnwb_try_new0_array(n + 1, sizeof(char *), "the row labels", n, error);
  if (row_labels == NULL)
    return FALSE;
  for (size_t i = 0; i < n; i++) {
    size_t line_number = i + 2;
    g_autoptr(GPtrArray) fields = knnwb_formats_distance_csv_split(lines[i + 1], delimiter, &ok);
    if (!ok || fields->len != n + 1) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  ok ? "%s:%zu: expected %zu fields, found %u" : "%s:%zu: malformed quoted field",
                  path, line_number, n + 1, fields->len); /* n + 1 >= 2 */
      g_strfreev(row_labels);
      return FALSE;
    }
    const char *label = g_ptr_array_index(fields, 0);
    if (strcmp(label, g_ptr_array_index(header, i + 1)) != 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s:%zu: row label \"%s\" differs from column label \"%s\"", path, line_number,
                  label, (const char *)g_ptr_array_index(header, i + 1));
      g_strfreev(row_labels);
      return FALSE;
    }
    row_labels[i] = g_strdup(label);
    for (size_t j = 0; j < n; j++) {
      const char *field = g_ptr_array_index(fields, j + 1);
      char *end = NULL;
      errno = 0;
      double value = g_ascii_strtod(field, &end);
      while (end && (*end == ' ' || *end == '\t'))
        end++;
      if (field[0] == '\0' || !end || *end != '\0' || errno == ERANGE) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                    "%s:%zu: field %zu (\"%s\") is not a number", path, line_number, j + 2, field);
        g_strfreev(row_labels);
        return FALSE;
      }
      MATRIX(*distances, i, j) = value;
    }
  }
  if (labels)
    *labels = row_labels;
  else
    g_strfreev(row_labels);
  return TRUE;
}

/* The header of an NPY distance matrix (npy_header.c): the data's offset, item width and byte
 * order, its size n and order. Errors: KNNWB_ERROR_PARSE with this reader's messages. */
static gboolean knnwb_distance_npy_header(const char *path, const char *bytes, gsize size,
                                          gsize *data, gsize *width, gboolean *little, guint64 *n,
                                          gboolean *fortran, GError **error)
{
  unsigned major = 0;
  size_t start = 0, header_length = 0;
  KnnwbNpyPreambleStatus preamble = knnwb_npy_preamble_parse(
      (const unsigned char *)bytes, MIN(size, 12), &major, &start, &header_length);
  if (preamble == KNNWB_NPY_PREAMBLE_NOT_NPY) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: not an NPY file (no \\x93NUMPY magic)",
                path);
    return FALSE;
  }
  if (preamble != KNNWB_NPY_PREAMBLE_OK) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: NPY version %u is not supported", path,
                major);
    return FALSE;
  }
  if (start + header_length > size) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: NPY header runs past the file end",
                path);
    return FALSE;
  }
  KnnwbNpyHeader header;
  size_t error_at = 0;
  const char *what = NULL;
  gboolean parsed = knnwb_npy_header_parse(bytes + start, header_length, &header, &error_at, &what);
  gboolean known = FALSE;
  *little = knnwb_npy_header_little_endian(&header, &known);
  if (!header.have_descr || !known || header.kind != 'f' ||
      (header.item_size != 8 && header.item_size != 4)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: NPY header: a distance matrix must be float64 or float32 ('<f8' or '<f4', "
                "or big-endian '>f8' or '>f4')",
                path);
    return FALSE;
  }
  if (!parsed || !header.have_order || !header.have_shape || header.n_dims != 2) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: NPY header: expected a 2-dimensional shape (n, n) and fortran_order", path);
    return FALSE;
  }
  guint64 rows = header.shape[0], cols = header.shape[1];
  if (rows != cols || rows > G_MAXINT32) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: a distance matrix is square; this one is %" G_GUINT64_FORMAT
                " x %" G_GUINT64_FORMAT,
                path, rows, cols);
    return FALSE;
  }
  *data = start + header_length;
  *width = header.item_size;
  if ((size - *data) / *width / MAX(rows, 1) < rows) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s: %" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT " values announced, the file "
                "holds fewer",
                path, rows, cols);
    return FALSE;
  }
  *n = rows;
  *fortran = header.fortran_order;
  return TRUE;
}

/* One stored value as a double, in the file's byte order. */
static double knnwb_distance_npy_value(const char *at, gsize width, gboolean little)
{
  if (width == 8) {
    guint64 bits;
    memcpy(&bits, at, 8);
    bits = little ? GUINT64_FROM_LE(bits) : GUINT64_FROM_BE(bits);
    double value;
    memcpy(&value, &bits, 8);
    return value;
  }
  guint32 bits;
  float single;
  memcpy(&bits, at, 4);
  bits = little ? GUINT32_FROM_LE(bits) : GUINT32_FROM_BE(bits);
  memcpy(&single, &bits, 4);
  return single;
}

gboolean knnwb_formats_read_distance_npy(const char *path, igraph_matrix_t *distances,
                                         GError **error)
{
  g_autofree char *bytes = NULL;
  gsize size = 0;
  g_autoptr(GError) io_error = NULL;
  if (!g_file_get_contents(path, &bytes, &size, &io_error)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s", io_error->message);
    return FALSE;
  }
  gsize data = 0, width = 0;
  gboolean little = TRUE, fortran = FALSE;
  guint64 rows = 0;
  if (!knnwb_distance_npy_header(path, bytes, size, &data, &width, &little, &rows, &fortran, error))
    return FALSE;
  igraph_error_t code =
      igraph_matrix_resize(distances, (igraph_integer_t)rows, (igraph_integer_t)rows);
  if (!knnwb_error_from_igraph(code, "allocating the distance matrix", error))
    return FALSE;
  for (guint64 i = 0; i < rows; i++)
    for (guint64 j = 0; j < rows; j++) {
      double value =
          knnwb_distance_npy_value(bytes + data + (gsize)(i * rows + j) * width, width, little);
      /* Row-major i, j is element (i, j); Fortran order stores (j, i) there. */
      if (fortran)
        MATRIX(*distances, j, i) = value;
      else
        MATRIX(*distances, i, j) = value;
    }
  return TRUE;
}

gboolean knnwb_formats_read_distance_matrix(const char *path, igraph_matrix_t *distances,
                                            char ***labels, GError **error)
{
  if (g_str_has_suffix(path, ".npy")) {
    if (labels)
      *labels = NULL;
    return knnwb_formats_read_distance_npy(path, distances, error);
  }
  return knnwb_formats_read_distance_csv(path, distances, labels, error);
}
