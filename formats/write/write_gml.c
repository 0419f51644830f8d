/* GML for yEd: our own streaming writer, because igraph's cannot write nested graphics blocks.
 * Nodes and edges are formatted in parallel chunks (chunk_writer.c). */
#include "write_internal.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* A GML real always has a '.', so every reader types it as a real, not an integer. */
static void knnwb_gml_put_real(KnnwbTextChunk *out, double value)
{
  if (!isfinite(value)) {
    knnwb_text_chunk_puts(out, isnan(value) ? "NAN" : (value > 0 ? "INF" : "-INF"));
    return;
  }
  char text[48];
  knnwb_formats_format_double(text, sizeof text - 2, value);
  if (strchr(text, '.') == NULL) {
    char *e = strpbrk(text, "eE");
    if (e != NULL) {
      memmove(e + 2, e, strlen(e) + 1);
      e[0] = '.';
      e[1] = '0';
    } else {
      strcat(text, ".0");
    }
  }
  knnwb_text_chunk_puts(out, text);
}

typedef struct {
  const KnnwbGraphOutput *output;
  const KnnwbDrawingOptions *options;
  const igraph_matrix_t *coordinates;
  const igraph_integer_t *cluster_size;
  const gboolean *focus;
  const KnnwbAppearance *appearance;
  char (*colours)[8]; /* per cluster */
  const KnnwbAttributePlan *attributes;
} KnnwbGmlContext;

/* The node's annotation columns: numbers as reals, text as GML strings; no value, no key. */
static void knnwb_gml_put_attributes(const KnnwbGmlContext *g, igraph_integer_t v,
                                     KnnwbTextChunk *out)
{
  for (size_t a = 0; g->attributes != NULL && a < g->output->n_attributes; a++) {
    const KnnwbAttributePlan *plan = &g->attributes[a];
    const char *value = g->output->attributes[a].values[v];
    if (knnwb_formats_attribute_missing(value))
      continue;
    knnwb_text_chunk_puts(out, "\n    ");
    knnwb_text_chunk_puts(out, plan->gml_key);
    knnwb_text_chunk_putc(out, ' ');
    if (plan->numeric)
      knnwb_gml_put_real(out, plan->numbers[v]);
    else
      knnwb_formats_put_gml_string(out, value);
  }
}

static void knnwb_gml_format_nodes(void *context, size_t first, size_t last, KnnwbTextChunk *out)
{
  const KnnwbGmlContext *g = context;
  const igraph_vector_int_t *membership = g->output->membership;
  char scratch[32];
  for (size_t i = first; i < last; i++) {
    igraph_integer_t v = (igraph_integer_t)i;
    const char *label = knnwb_formats_vertex_label(g->output->labels, v, scratch);
    knnwb_text_chunk_puts(out, "  node\n  [\n    id ");
    knnwb_text_chunk_put_int(out, v);
    knnwb_text_chunk_puts(out, "\n    label ");
    knnwb_formats_put_gml_string(out, label);
    const char *fill = "#C0C0C0";
    if (membership != NULL) {
      igraph_integer_t c = VECTOR(*membership)[v];
      fill = g->colours[c];
      knnwb_text_chunk_puts(out, "\n    cluster ");
      knnwb_text_chunk_put_int(out, c);
      knnwb_text_chunk_puts(out, "\n    clusterSize ");
      knnwb_text_chunk_put_int(out, g->cluster_size[c]);
    }
    knnwb_gml_put_attributes(g, v, out);
    gboolean focus = g->focus != NULL && g->focus[v];
    if (focus)
      knnwb_text_chunk_puts(out, "\n    focus 1");
    double size = focus ? 2.0 * g->appearance->node_size : g->appearance->node_size;
    knnwb_text_chunk_puts(out, "\n    graphics\n    [\n");
    if (g->coordinates != NULL) {
      knnwb_text_chunk_puts(out, "      x ");
      knnwb_gml_put_real(out, MATRIX(*g->coordinates, v, 0));
      knnwb_text_chunk_puts(out, "\n      y ");
      knnwb_gml_put_real(out, MATRIX(*g->coordinates, v, 1));
      knnwb_text_chunk_putc(out, '\n');
    }
    knnwb_text_chunk_puts(out, "      w ");
    knnwb_gml_put_real(out, size);
    knnwb_text_chunk_puts(out, "\n      h ");
    knnwb_gml_put_real(out, size);
    knnwb_text_chunk_puts(out, "\n      type \"");
    knnwb_text_chunk_puts(out, focus ? "hexagon" : "ellipse");
    knnwb_text_chunk_puts(out, "\"\n      fill \"");
    knnwb_text_chunk_puts(out, focus ? "#FF0000" : fill);
    knnwb_text_chunk_puts(out, "\"\n      outline \"");
    knnwb_text_chunk_puts(out, focus ? "#000000" : "#404040");
    knnwb_text_chunk_puts(out, "\"\n    ]\n    LabelGraphics\n    [\n      text ");
    knnwb_formats_put_gml_string(out, label);
    knnwb_text_chunk_puts(out, "\n      fontSize ");
    knnwb_text_chunk_put_int(
        out, MAX(1, lround(focus ? 1.5 * g->appearance->font_size : g->appearance->font_size)));
    knnwb_text_chunk_puts(out, "\n    ]\n  ]\n");
  }
}

static void knnwb_gml_format_edges(void *context, size_t first, size_t last, KnnwbTextChunk *out)
{
  const KnnwbGmlContext *g = context;
  const igraph_t *graph = g->output->graph;
  const igraph_vector_int_t *membership = g->output->membership;
  const igraph_vector_t *weights = g->output->weights;
  gboolean directed = igraph_is_directed(graph);
  for (size_t i = first; i < last; i++) {
    igraph_integer_t e = (igraph_integer_t)i, a, b;
    knnwb_formats_edge_ends(graph, e, &a, &b);
    knnwb_text_chunk_puts(out, "  edge\n  [\n    source ");
    knnwb_text_chunk_put_int(out, a);
    knnwb_text_chunk_puts(out, "\n    target ");
    knnwb_text_chunk_put_int(out, b);
    double distance = weights != NULL ? VECTOR(*weights)[e] : NAN;
    if (weights != NULL) {
      knnwb_text_chunk_puts(out, "\n    distance ");
      knnwb_gml_put_real(out, distance);
      knnwb_text_chunk_puts(out, "\n    weight ");
      knnwb_gml_put_real(out, knnwb_drawing_similarity(g->appearance, distance));
    }
    const char *colour = "#A0A0A0";
    if (membership != NULL && VECTOR(*membership)[a] == VECTOR(*membership)[b])
      colour = g->colours[VECTOR(*membership)[a]];
    knnwb_text_chunk_puts(out, "\n    graphics\n    [\n      fill \"");
    knnwb_text_chunk_puts(out, colour);
    knnwb_text_chunk_puts(out, "\"\n      width ");
    knnwb_gml_put_real(out, knnwb_drawing_edge_width(g->appearance, distance));
    if (directed)
      knnwb_text_chunk_puts(out, "\n      targetArrow \"standard\"");
    knnwb_text_chunk_puts(out, "\n    ]\n  ]\n");
  }
}

gboolean knnwb_formats_write_gml(const char *path, const KnnwbGraphOutput *output, GError **error)
{
  if (!knnwb_formats_check_output(output, error))
    return FALSE;
  const igraph_t *graph = output->graph;
  igraph_integer_t n = igraph_vcount(graph);
  igraph_integer_t m = igraph_ecount(graph);
  const igraph_vector_int_t *membership = output->membership;
  igraph_integer_t clusters =
      membership != NULL && n > 0 ? igraph_vector_int_max(membership) + 1 : 0;
  typedef char KnnwbColour[8];
  g_autofree igraph_integer_t *cluster_size = g_try_new0(igraph_integer_t, MAX(clusters, 1));
  g_autofree KnnwbColour *colours = g_try_new0(KnnwbColour, MAX(clusters, 1));
  if (cluster_size == NULL || colours == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%s: out of memory for %" PRId64 " clusters", path, (int64_t)clusters);
    return FALSE;
  }
  if (membership != NULL)
    for (igraph_integer_t v = 0; v < n; v++)
      cluster_size[VECTOR(*membership)[v]]++;
  for (igraph_integer_t c = 0; c < clusters; c++)
    knnwb_drawing_cluster_colour(c, colours[c]);

  KnnwbDrawingSetup drawing;
  if (!knnwb_drawing_setup_init(&drawing, path, output->graph, output->weights, output->gml,
                                output->control, error))
    return FALSE;
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL) {
    knnwb_drawing_setup_clear(&drawing);
    return FALSE;
  }
  FILE *stream = knnwb_atomic_file_stream(file);
  fprintf(stream, "Creator \"knnwb\"\nVersion 1\ngraph\n[\n  directed %d\n",
          igraph_is_directed(graph) ? 1 : 0);
  KnnwbAttributePlan *attributes = knnwb_formats_attributes_plan(output);
  KnnwbGmlContext context = {output,       drawing.options, drawing.coordinates,
                             cluster_size, drawing.focus,   &drawing.appearance,
                             colours,      attributes};
  uint64_t total = (uint64_t)n + (uint64_t)m;
  gboolean ok = knnwb_formats_write_chunks(stream, path, (size_t)n, 8192, knnwb_gml_format_nodes,
                                           &context, output->control, 0, total, error) &&
                knnwb_formats_write_chunks(stream, path, (size_t)m, 16384, knnwb_gml_format_edges,
                                           &context, output->control, (uint64_t)n, total, error);
  knnwb_formats_attributes_free(attributes, output->n_attributes);
  knnwb_drawing_setup_clear(&drawing);
  if (!ok)
    return FALSE;
  fputs("]\n", stream);
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
