/* GraphML for Cytoscape and Gephi: labels, clusters, coordinates, focus and edge weights. */
#include "write_internal.h"

#include <math.h>
#include <string.h>

static void knnwb_graphml_put_real(KnnwbTextChunk *out, double value)
{
  if (isnan(value))
    knnwb_text_chunk_puts(out, "NaN");
  else if (isinf(value))
    knnwb_text_chunk_puts(out, value > 0 ? "INF" : "-INF");
  else
    knnwb_text_chunk_put_double(out, value);
}

typedef struct {
  const KnnwbGraphOutput *output;
  const igraph_matrix_t *coordinates;
  const gboolean *focus;
  const KnnwbAppearance *appearance;
  const KnnwbAttributePlan *attributes;
} KnnwbGraphmlContext;

/* The node's annotation columns (keys a0, a1, ...); no value, no data element. */
static void knnwb_graphml_put_attributes(const KnnwbGraphmlContext *g, igraph_integer_t v,
                                         KnnwbTextChunk *out)
{
  for (size_t a = 0; g->attributes != NULL && a < g->output->n_attributes; a++) {
    const char *value = g->output->attributes[a].values[v];
    if (knnwb_formats_attribute_missing(value))
      continue;
    knnwb_text_chunk_puts(out, "<data key=\"a");
    knnwb_text_chunk_put_int(out, (int64_t)a);
    knnwb_text_chunk_puts(out, "\">");
    if (g->attributes[a].numeric)
      knnwb_graphml_put_real(out, g->attributes[a].numbers[v]);
    else
      knnwb_formats_put_xml_text(out, value);
    knnwb_text_chunk_puts(out, "</data>");
  }
}

static void knnwb_graphml_format_nodes(void *context, size_t first, size_t last,
                                       KnnwbTextChunk *out)
{
  const KnnwbGraphmlContext *g = context;
  char scratch[32];
  for (size_t i = first; i < last; i++) {
    igraph_integer_t v = (igraph_integer_t)i;
    knnwb_text_chunk_puts(out, "    <node id=\"n");
    knnwb_text_chunk_put_int(out, v);
    knnwb_text_chunk_puts(out, "\"><data key=\"label\">");
    knnwb_formats_put_xml_text(out, knnwb_formats_vertex_label(g->output->labels, v, scratch));
    knnwb_text_chunk_puts(out, "</data>");
    if (g->output->membership != NULL) {
      knnwb_text_chunk_puts(out, "<data key=\"cluster\">");
      knnwb_text_chunk_put_int(out, VECTOR(*g->output->membership)[v]);
      knnwb_text_chunk_puts(out, "</data>");
    }
    if (g->coordinates != NULL) {
      knnwb_text_chunk_puts(out, "<data key=\"x\">");
      knnwb_graphml_put_real(out, MATRIX(*g->coordinates, v, 0));
      knnwb_text_chunk_puts(out, "</data><data key=\"y\">");
      knnwb_graphml_put_real(out, MATRIX(*g->coordinates, v, 1));
      knnwb_text_chunk_puts(out, "</data>");
    }
    knnwb_graphml_put_attributes(g, v, out);
    if (g->focus != NULL)
      knnwb_text_chunk_puts(out, g->focus[v] ? "<data key=\"focus\">true</data>"
                                             : "<data key=\"focus\">false</data>");
    knnwb_text_chunk_puts(out, "</node>\n");
  }
}

static void knnwb_graphml_format_edges(void *context, size_t first, size_t last,
                                       KnnwbTextChunk *out)
{
  const KnnwbGraphmlContext *g = context;
  const igraph_t *graph = g->output->graph;
  for (size_t i = first; i < last; i++) {
    igraph_integer_t e = (igraph_integer_t)i, a, b;
    knnwb_formats_edge_ends(graph, e, &a, &b);
    knnwb_text_chunk_puts(out, "    <edge source=\"n");
    knnwb_text_chunk_put_int(out, a);
    knnwb_text_chunk_puts(out, "\" target=\"n");
    knnwb_text_chunk_put_int(out, b);
    knnwb_text_chunk_puts(out, "\">");
    if (g->output->weights != NULL) {
      double distance = VECTOR(*g->output->weights)[e];
      knnwb_text_chunk_puts(out, "<data key=\"distance\">");
      knnwb_graphml_put_real(out, distance);
      knnwb_text_chunk_puts(out, "</data><data key=\"weight\">");
      knnwb_graphml_put_real(out, knnwb_drawing_similarity(g->appearance, distance));
      knnwb_text_chunk_puts(out, "</data>");
    }
    knnwb_text_chunk_puts(out, "</edge>\n");
  }
}

gboolean knnwb_formats_write_graphml(const char *path, const KnnwbGraphOutput *output,
                                     GError **error)
{
  if (!knnwb_formats_check_output(output, error))
    return FALSE;
  const igraph_t *graph = output->graph;
  igraph_integer_t n = igraph_vcount(graph);
  igraph_integer_t m = igraph_ecount(graph);
  KnnwbDrawingSetup drawing;
  if (!knnwb_drawing_setup_init(&drawing, path, output->graph, output->weights, output->gml,
                                output->control, error))
    return FALSE;
  const igraph_matrix_t *coordinates = drawing.coordinates;
  const gboolean *focus = drawing.focus;

  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL) {
    knnwb_drawing_setup_clear(&drawing);
    return FALSE;
  }
  FILE *stream = knnwb_atomic_file_stream(file);
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
  KnnwbAttributePlan *attributes = knnwb_formats_attributes_plan(output);
  for (size_t a = 0; attributes != NULL && a < output->n_attributes; a++) {
    KnnwbTextChunk name = {0};
    knnwb_formats_put_xml_text(&name, output->attributes[a].name);
    fprintf(stream, "  <key id=\"a%zu\" for=\"node\" attr.name=\"%.*s\" attr.type=\"%s\"/>\n", a,
            (int)name.length, name.data ? name.data : "",
            attributes[a].numeric ? "double" : "string");
    g_free(name.data);
  }
  if (output->weights != NULL)
    fputs("  <key id=\"distance\" for=\"edge\" attr.name=\"distance\" attr.type=\"double\"/>\n"
          "  <key id=\"weight\" for=\"edge\" attr.name=\"weight\" attr.type=\"double\"/>\n",
          stream);
  fprintf(stream, "  <graph id=\"G\" edgedefault=\"%s\">\n",
          igraph_is_directed(graph) ? "directed" : "undirected");
  KnnwbGraphmlContext context = {output, coordinates, focus, &drawing.appearance, attributes};
  uint64_t total = (uint64_t)n + (uint64_t)m;
  gboolean ok =
      knnwb_formats_write_chunks(stream, path, (size_t)n, 16384, knnwb_graphml_format_nodes,
                                 &context, output->control, 0, total, error) &&
      knnwb_formats_write_chunks(stream, path, (size_t)m, 32768, knnwb_graphml_format_edges,
                                 &context, output->control, (uint64_t)n, total, error);
  knnwb_formats_attributes_free(attributes, output->n_attributes);
  knnwb_drawing_setup_clear(&drawing);
  if (!ok)
    return FALSE;
  fputs("  </graph>\n</graphml>\n", stream);
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
