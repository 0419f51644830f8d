/* Small helpers shared by the readers and writers: error messages, TSV fields, vertex labels. */
#include "formats_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

void knnwb_formats_parse_error(GError **error, const char *path, size_t line, size_t column,
                               const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  if (column > 0)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%zu:%zu: %s", path, line, column,
                message);
  else
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%zu: %s", path, line, message);
}

char *knnwb_formats_quote_field(const char *p, size_t length)
{
  GString *out = g_string_new("'");
  size_t shown = MIN(length, 40);
  for (size_t i = 0; i < shown; i++) {
    unsigned char c = (unsigned char)p[i];
    if (c == '\0')
      g_string_append(out, "\\0");
    else if (c < 0x20 || c == 0x7f)
      g_string_append_printf(out, "\\x%02x", c);
    else
      g_string_append_c(out, (char)c);
  }
  if (shown < length)
    g_string_append(out, "...");
  g_string_append_c(out, '\'');
  return g_string_free(out, FALSE);
}

void knnwb_formats_write_tsv_field(FILE *stream, const char *s)
{
  if (strpbrk(s, "\t\"\r\n") == NULL) {
    fputs(s, stream);
    return;
  }
  putc('"', stream);
  for (const char *c = s; *c != '\0'; c++) {
    if (*c == '"')
      putc('"', stream);
    putc(*c, stream);
  }
  putc('"', stream);
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
  const KnnwbGmlOptions *gml = output->gml;
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
