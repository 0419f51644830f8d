/* Reading the seed's .knn format back into an igraph graph, strictly. */
#include "read_internal.h"

#include <math.h>
#include <string.h>

static gboolean knnwb_knn_is_space(char c)
{
  return c == ' ' || c == '\t';
}

/* A non-negative decimal integer at line[*i]; FALSE when none or beyond limit. */
static gboolean knnwb_knn_index(const char *line, size_t length, size_t *i, uint64_t limit,
                                uint64_t *value)
{
  size_t p = *i;
  uint64_t v = 0;
  if (p >= length || line[p] < '0' || line[p] > '9')
    return FALSE;
  while (p < length && line[p] >= '0' && line[p] <= '9') {
    uint64_t digit = (uint64_t)(line[p] - '0');
    if (v > (limit - digit) / 10)
      return FALSE;
    v = v * 10 + digit;
    p++;
  }
  if (p < length && !knnwb_knn_is_space(line[p]))
    return FALSE;
  *i = p;
  *value = v;
  return TRUE;
}

static void knnwb_knn_skip(const char *line, size_t length, size_t *i)
{
  while (*i < length && knnwb_knn_is_space(line[*i]))
    (*i)++;
}

static gboolean knnwb_knn_is_blank(const char *line, size_t length)
{
  size_t i = 0;
  knnwb_knn_skip(line, length, &i);
  return i == length;
}

gboolean knnwb_formats_read_knn(const char *path, igraph_bool_t directed, igraph_t *graph,
                                igraph_vector_t *weights, GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, path, error))
    return FALSE;
  gboolean ok = FALSE;
  igraph_vector_int_t edges;
  gboolean edges_initialised = FALSE;
  const char *line;
  size_t length;
  int got;
  while ((got = knnwb_text_input_next_line(&input, &line, &length, error)) > 0 &&
         knnwb_knn_is_blank(line, length))
    ;
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, path, MAX(input.line_number, 1), 0,
                                "the file is empty (a .knn file starts with `vertices edges`)");
    goto out;
  }
  size_t i = 0;
  uint64_t n = 0, m = 0;
  knnwb_knn_skip(line, length, &i);
  size_t n_column = i + 1;
  if (!knnwb_knn_index(line, length, &i, IGRAPH_INTEGER_MAX, &n)) {
    knnwb_formats_parse_error(error, path, input.line_number, n_column,
                              "expected the vertex count (the first line is `vertices edges`)");
    goto out;
  }
  knnwb_knn_skip(line, length, &i);
  size_t m_column = i + 1;
  if (!knnwb_knn_index(line, length, &i, IGRAPH_INTEGER_MAX / 2, &m)) {
    knnwb_formats_parse_error(error, path, input.line_number, m_column,
                              "expected the edge count (the first line is `vertices edges`)");
    goto out;
  }
  knnwb_knn_skip(line, length, &i);
  if (i < length) {
    knnwb_formats_parse_error(error, path, input.line_number, i + 1,
                              "unexpected text after `vertices edges`");
    goto out;
  }
  size_t header_line = input.line_number;
  /* Absurd counts must not allocate: an edge line takes 6 bytes ("0 1 2\n"); allow 4 so that a
   * truncated file is reported as truncated rather than as too small. */
  if (input.size_bound > 0 && m > input.size_bound / 4) {
    knnwb_formats_parse_error(
        error, path, header_line, m_column,
        "%" G_GUINT64_FORMAT " edges cannot fit in this file (%" G_GUINT64_FORMAT " bytes%s)", m,
        (guint64)input.size_bound, input.gzip ? " at most, decompressed" : "");
    goto out;
  }
  /* Vertices cost memory too (igraph indexes them): at most 2^24 vertices without an edge. */
  if (n > 2 * m + (UINT64_C(1) << 24)) {
    knnwb_formats_parse_error(error, path, header_line, n_column,
                              "%" G_GUINT64_FORMAT " vertices for %" G_GUINT64_FORMAT
                              " edges is not plausible (more than 2^24 isolated vertices)",
                              n, m);
    goto out;
  }
  if (m > 0 && n == 0) {
    knnwb_formats_parse_error(error, path, header_line, n_column, "edges but no vertices");
    goto out;
  }
  if (igraph_vector_int_init(&edges, (igraph_integer_t)(2 * m)) != IGRAPH_SUCCESS ||
      igraph_vector_resize(weights, (igraph_integer_t)m) != IGRAPH_SUCCESS) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%s: cannot allocate %" G_GUINT64_FORMAT " edges", path, m);
    goto out;
  }
  edges_initialised = TRUE;
  for (uint64_t e = 0; e < m; e++) {
    do
      got = knnwb_text_input_next_line(&input, &line, &length, error);
    while (got > 0 && knnwb_knn_is_blank(line, length));
    if (got < 0)
      goto out;
    if (got == 0) {
      knnwb_formats_parse_error(error, path, input.line_number, 0,
                                "the file ends after %" G_GUINT64_FORMAT " edge%s; line %zu "
                                "declares %" G_GUINT64_FORMAT " (truncated?)",
                                e, KNNWB_PLURAL(e), header_line, m);
      goto out;
    }
    i = 0;
    uint64_t ends[2];
    for (int k = 0; k < 2; k++) {
      knnwb_knn_skip(line, length, &i);
      size_t column = i + 1;
      if (!knnwb_knn_index(line, length, &i, UINT64_MAX / 20, &ends[k]) || ends[k] >= n) {
        if (column > length)
          knnwb_formats_parse_error(error, path, input.line_number, column,
                                    "expected `source target weight`");
        else if (i < length && line[i] == '\0')
          knnwb_formats_parse_error(error, path, input.line_number, column, "NUL byte");
        else
          knnwb_formats_parse_error(error, path, input.line_number, column,
                                    "expected a vertex number in [0, %" G_GUINT64_FORMAT ")", n);
        goto out;
      }
    }
    knnwb_knn_skip(line, length, &i);
    size_t column = i + 1;
    const char *stop;
    double weight;
    KnnwbFloatStatus status = knnwb_formats_parse_double(line + i, line + length, &weight, &stop);
    if (status != KNNWB_FLOAT_OK || (stop < line + length && !knnwb_knn_is_space(*stop))) {
      knnwb_formats_parse_error(error, path, input.line_number, column,
                                status == KNNWB_FLOAT_RANGE ? "the weight is out of range"
                                                            : "expected a finite weight");
      goto out;
    }
    i = (size_t)(stop - line);
    knnwb_knn_skip(line, length, &i);
    if (i < length) {
      knnwb_formats_parse_error(error, path, input.line_number, i + 1,
                                "unexpected text after `source target weight`");
      goto out;
    }
    VECTOR(edges)[2 * e] = (igraph_integer_t)ends[0];
    VECTOR(edges)[2 * e + 1] = (igraph_integer_t)ends[1];
    VECTOR(*weights)[e] = weight;
  }
  while ((got = knnwb_text_input_next_line(&input, &line, &length, error)) > 0)
    if (!knnwb_knn_is_blank(line, length)) {
      knnwb_formats_parse_error(error, path, input.line_number, 1,
                                "more edges than the %" G_GUINT64_FORMAT " that line %zu declares",
                                m, header_line);
      goto out;
    }
  if (got < 0)
    goto out;
  igraph_error_t code = igraph_create(graph, &edges, (igraph_integer_t)n, directed);
  ok = knnwb_error_from_igraph(code, "igraph_create", error);
out:
  if (edges_initialised)
    igraph_vector_int_destroy(&edges);
  knnwb_text_input_close(&input);
  return ok;
}
