/* GraphML for Cytoscape and Gephi: labels, clusters, coordinates, focus and edge weights. */
#include "formats_internal.h"

#include <math.h>
#include <string.h>

/* XML text: escape markup, drop what XML 1.0 cannot hold (most C0 controls), repair UTF-8. */
static void knnwb_graphml_put_text(FILE *stream, const char *text)
{
  g_autofree char *valid = g_utf8_make_valid(text, -1);
  for (const char *p = valid; *p != '\0'; p++) {
    unsigned char c = (unsigned char)*p;
    switch (c) {
    case '&':
      fputs("&amp;", stream);
      break;
    case '<':
      fputs("&lt;", stream);
      break;
    case '>':
      fputs("&gt;", stream);
      break;
    case '"':
      fputs("&quot;", stream);
      break;
    case '\t':
    case '\n':
    case '\r':
      fprintf(stream, "&#%d;", c);
      break;
    default:
      if (c >= 0x20)
        putc(c, stream);
      else
        putc('?', stream);
    }
  }
}

static void knnwb_graphml_put_real(FILE *stream, double value)
{
  char text[48];
  if (isnan(value))
    fputs("NaN", stream);
  else if (isinf(value))
    fputs(value > 0 ? "INF" : "-INF", stream);
  else {
    knnwb_formats_format_double(text, sizeof text, value);
    fputs(text, stream);
  }
}

gboolean knnwb_formats_write_graphml(const char *path, const KnnwbGraphOutput *output,
                                     GError **error)
{
  if (!knnwb_formats_check_output(output, error))
    return FALSE;
  KnnwbGmlOptions defaults;
  knnwb_formats_gml_options_init(&defaults);
  const KnnwbGmlOptions *options = output->gml ? output->gml : &defaults;
  const igraph_t *graph = output->graph;
  igraph_integer_t n = igraph_vcount(graph);
  igraph_integer_t m = igraph_ecount(graph);

  igraph_matrix_t layout;
  if (igraph_matrix_init(&layout, 0, 0) != IGRAPH_SUCCESS) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "%s: out of memory", path);
    return FALSE;
  }
  const igraph_matrix_t *coordinates = NULL;
  if (!knnwb_formats_writer_coordinates(output, options, &layout, &coordinates, error)) {
    igraph_matrix_destroy(&layout);
    return FALSE;
  }
  g_autofree gboolean *focus = NULL;
  if (options->focus != NULL) {
    focus = g_new0(gboolean, MAX(n, 1));
    for (igraph_integer_t i = 0; i < igraph_vector_int_size(options->focus); i++)
      focus[VECTOR(*options->focus)[i]] = TRUE;
  }

  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL) {
    igraph_matrix_destroy(&layout);
    return FALSE;
  }
  FILE *stream = knnwb_atomic_file_stream(file);
  locale_t saved_locale = uselocale(knnwb_formats_c_locale());
  fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\"\n"
        "         xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"\n"
        "         xsi:schemaLocation=\"http://graphml.graphdrawing.org/xmlns "
        "http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd\">\n"
        "  <key id=\"label\" for=\"node\" attr.name=\"label\" attr.type=\"string\"/>\n",
        stream);
  if (output->membership != NULL)
    fputs("  <key id=\"cluster\" for=\"node\" attr.name=\"cluster\" attr.type=\"long\"/>\n",
          stream);
  if (coordinates != NULL)
    fputs("  <key id=\"x\" for=\"node\" attr.name=\"x\" attr.type=\"double\"/>\n"
          "  <key id=\"y\" for=\"node\" attr.name=\"y\" attr.type=\"double\"/>\n",
          stream);
  if (focus != NULL)
    fputs("  <key id=\"focus\" for=\"node\" attr.name=\"focus\" attr.type=\"boolean\"/>\n", stream);
  if (output->weights != NULL)
    fputs("  <key id=\"weight\" for=\"edge\" attr.name=\"weight\" attr.type=\"double\"/>\n",
          stream);
  fprintf(stream, "  <graph id=\"G\" edgedefault=\"%s\">\n",
          igraph_is_directed(graph) ? "directed" : "undirected");
  char scratch[32];
  for (igraph_integer_t v = 0; v < n; v++) {
    fprintf(stream, "    <node id=\"n%" IGRAPH_PRId "\"><data key=\"label\">", v);
    knnwb_graphml_put_text(stream, knnwb_formats_vertex_label(output->labels, v, scratch));
    fputs("</data>", stream);
    if (output->membership != NULL)
      fprintf(stream, "<data key=\"cluster\">%" IGRAPH_PRId "</data>",
              VECTOR(*output->membership)[v]);
    if (coordinates != NULL) {
      fputs("<data key=\"x\">", stream);
      knnwb_graphml_put_real(stream, MATRIX(*coordinates, v, 0));
      fputs("</data><data key=\"y\">", stream);
      knnwb_graphml_put_real(stream, MATRIX(*coordinates, v, 1));
      fputs("</data>", stream);
    }
    if (focus != NULL)
      fprintf(stream, "<data key=\"focus\">%s</data>", focus[v] ? "true" : "false");
    fputs("</node>\n", stream);
  }
  gboolean directed = igraph_is_directed(graph);
  for (igraph_integer_t e = 0; e < m; e++) {
    igraph_integer_t a = IGRAPH_FROM(graph, e), b = IGRAPH_TO(graph, e);
    if (!directed && a > b) { /* smaller end first, as people write it */
      igraph_integer_t swap = a;
      a = b;
      b = swap;
    }
    fprintf(stream, "    <edge source=\"n%" IGRAPH_PRId "\" target=\"n%" IGRAPH_PRId "\">", a, b);
    if (output->weights != NULL) {
      fputs("<data key=\"weight\">", stream);
      knnwb_graphml_put_real(stream, VECTOR(*output->weights)[e]);
      fputs("</data>", stream);
    }
    fputs("</edge>\n", stream);
  }
  fputs("  </graph>\n</graphml>\n", stream);
  uselocale(saved_locale);
  igraph_matrix_destroy(&layout);
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
