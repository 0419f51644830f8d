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

/* The first line, `vertices edges`, checked for plausibility against the file's size before
 * anything is allocated. */
static gboolean knnwb_knn_read_counts(KnnwbTextInput *input, const char *path, uint64_t *n,
                                      uint64_t *m, GError **error)
{
  const char *line;
  size_t length;
  int got;
  while ((got = knnwb_text_input_next_line(input, &line, &length, error)) > 0 &&
         knnwb_knn_is_blank(line, length))
    ;
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, path, MAX(input->line_number, 1), 0,
                                "the file is empty (a .knn file starts with `vertices edges`)");
    return FALSE;
  }
  size_t i = 0;
  knnwb_knn_skip(line, length, &i);
  size_t n_column = i + 1;
  if (!knnwb_knn_index(line, length, &i, IGRAPH_INTEGER_MAX, n)) {
    knnwb_formats_parse_error(error, path, input->line_number, n_column,
                              "expected the vertex count (the first line is `vertices edges`)");
    return FALSE;
  }
  knnwb_knn_skip(line, length, &i);
  size_t m_column = i + 1;
  if (!knnwb_knn_index(line, length, &i, IGRAPH_INTEGER_MAX / 2, m)) {
    knnwb_formats_parse_error(error, path, input->line_number, m_column,
                              "expected the edge count (the first line is `vertices edges`)");
    return FALSE;
  }
  knnwb_knn_skip(line, length, &i);
  if (i < length) {
    knnwb_formats_parse_error(error, path, input->line_number, i + 1,
                              "unexpected text after `vertices edges`");
    return FALSE;
  }
  size_t header_line = input->line_number;
  /* Absurd counts must not allocate: an edge line takes 6 bytes ("0 1 2\n"); allow 4 so that a
   * truncated file is reported as truncated rather than as too small. */
  if (input->size_bound > 0 && *m > input->size_bound / 4) {
    knnwb_formats_parse_error(
        error, path, header_line, m_column,
        "%" G_GUINT64_FORMAT " edges cannot fit in this file (%" G_GUINT64_FORMAT " bytes%s)", *m,
        (guint64)input->size_bound, input->gzip ? " at most, decompressed" : "");
    return FALSE;
  }
  /* Vertices cost memory too (igraph indexes them): at most 2^24 vertices without an edge. */
  if (*n > 2 * *m + (UINT64_C(1) << 24)) {
    knnwb_formats_parse_error(error, path, header_line, n_column,
                              "%" G_GUINT64_FORMAT " vertices for %" G_GUINT64_FORMAT
                              " edges is not plausible (more than 2^24 isolated vertices)",
                              *n, *m);
    return FALSE;
  }
  if (*m > 0 && *n == 0) {
    knnwb_formats_parse_error(error, path, header_line, n_column, "edges but no vertices");
    return FALSE;
  }
  return TRUE;
}

/* One edge line, `source target distance`, with vertices in [0, n) and a finite weight. */
static gboolean knnwb_knn_parse_edge(const KnnwbTextInput *input, const char *path,
                                     const char *line, size_t length, uint64_t n, uint64_t ends[2],
                                     double *weight, GError **error)
{
  size_t i = 0;
  for (int k = 0; k < 2; k++) {
    knnwb_knn_skip(line, length, &i);
    size_t column = i + 1;
    if (!knnwb_knn_index(line, length, &i, UINT64_MAX / 20, &ends[k]) || ends[k] >= n) {
      if (column > length)
        knnwb_formats_parse_error(error, path, input->line_number, column,
                                  "expected `source target distance`");
      else if (i < length && line[i] == '\0')
        knnwb_formats_parse_error(error, path, input->line_number, column, "NUL byte");
      else
        knnwb_formats_parse_error(error, path, input->line_number, column,
                                  "expected a vertex number in [0, %" G_GUINT64_FORMAT ")", n);
      return FALSE;
    }
  }
  knnwb_knn_skip(line, length, &i);
  size_t column = i + 1;
  const char *stop;
  KnnwbFloatStatus status = knnwb_formats_parse_double(line + i, line + length, weight, &stop);
  if (status != KNNWB_FLOAT_OK || (stop < line + length && !knnwb_knn_is_space(*stop))) {
    knnwb_formats_parse_error(error, path, input->line_number, column,
                              status == KNNWB_FLOAT_RANGE ? "the weight is out of range"
                                                          : "expected a finite weight");
    return FALSE;
  }
  i = (size_t)(stop - line);
  knnwb_knn_skip(line, length, &i);
  if (i < length) {
    knnwb_formats_parse_error(error, path, input->line_number, i + 1,
                              "unexpected text after `source target distance`");
    return FALSE;
  }
  return TRUE;
}

/* The m edge lines into edges (2 m ends) and weights, then nothing but blank lines. */
static gboolean knnwb_knn_read_edges(KnnwbTextInput *input, const char *path, uint64_t n,
                                     uint64_t m, igraph_vector_int_t *edges,
                                     igraph_vector_t *weights, GError **error)
{
  const size_t header_line = input->line_number;
  const char *line;
  size_t length;
  int got;
  for (uint64_t e = 0; e < m; e++) {
    do
      got = knnwb_text_input_next_line(input, &line, &length, error);
    while (got > 0 && knnwb_knn_is_blank(line, length));
    if (got < 0)
      return FALSE;
    if (got == 0) {
      knnwb_formats_parse_error(error, path, input->line_number, 0,
                                "the file ends after %" G_GUINT64_FORMAT " edge%s; line %zu "
                                "declares %" G_GUINT64_FORMAT " (truncated?)",
                                e, KNNWB_PLURAL(e), header_line, m);
      return FALSE;
    }
    uint64_t ends[2];
    double weight;
    if (!knnwb_knn_parse_edge(input, path, line, length, n, ends, &weight, error))
      return FALSE;
    VECTOR(*edges)[2 * e] = (igraph_integer_t)ends[0];
    VECTOR(*edges)[2 * e + 1] = (igraph_integer_t)ends[1];
    VECTOR(*weights)[e] = weight;
  }
  while ((got = knnwb_text_input_next_line(input, &line, &length, error)) > 0)
    if (!knnwb_knn_is_blank(line, length)) {
      knnwb_formats_parse_error(error, path, input->line_number, 1,
                                "more edges than the %" G_GUINT64_FORMAT " that line %zu declares",
                                m, header_line);
      return FALSE;
    }
  return got == 0;
}

gboolean knnwb_formats_read_knn(const char *path, igraph_bool_t directed, igraph_t *graph,
                                igraph_vector_t *weights, GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, path, error))
    return FALSE;
  uint64_t n = 0, m = 0;
  if (!knnwb_knn_read_counts(&input, path, &n, &m, error)) {
    knnwb_text_input_close(&input);
    return FALSE;
  }
  igraph_vector_int_t edges;
  if (igraph_vector_int_init(&edges, (igraph_integer_t)(2 * m)) != IGRAPH_SUCCESS) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%s: cannot allocate %" G_GUINT64_FORMAT " edges", path, m);
    knnwb_text_input_close(&input);
    return FALSE;
  }
  gboolean ok = TRUE;
  if (igraph_vector_resize(weights, (igraph_integer_t)m) != IGRAPH_SUCCESS) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%s: cannot allocate %" G_GUINT64_FORMAT " edges", path, m);
    ok = FALSE;
  }
  ok = ok && knnwb_knn_read_edges(&input, path, n, m, &edges, weights, error);
  knnwb_text_input_close(&input);
  if (ok)
    ok = knnwb_error_from_igraph(igraph_create(graph, &edges, (igraph_integer_t)n, directed),
                                 "igraph_create", error);
  igraph_vector_int_destroy(&edges);
  return ok;
}
