/* GML for yEd: our own streaming writer, because igraph's cannot write nested graphics blocks. */
#include "formats_internal.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* The D3/Tableau "category20" colours: distinct, readable on white, stable per cluster id. */
static const char *const knnwb_gml_palette[20] = {
    "#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B", "#E377C2",
    "#7F7F7F", "#BCBD22", "#17BECF", "#AEC7E8", "#FFBB78", "#98DF8A", "#FF9896",
    "#C5B0D5", "#C49C94", "#F7B6D2", "#C7C7C7", "#DBDB8D", "#9EDAE5"};

void knnwb_formats_gml_options_init(KnnwbGmlOptions *options)
{
  memset(options, 0, sizeof *options);
  options->layout = KNNWB_LAYOUT_AUTO;
  options->fr_max_vertices = 3000;
  options->seed = 42;
  options->node_size = 30.0;
  options->font_size = 12.0;
  options->edge_width = 1.0;
}

/* GML strings are ASCII without '"'; everything else goes as an &-entity (GML's own rule, which
 * networkx, igraph and yEd decode). Invalid UTF-8 bytes are replaced. */
static void knnwb_gml_put_string(FILE *stream, const char *text)
{
  g_autofree char *valid = g_utf8_make_valid(text, -1);
  putc('"', stream);
  for (const char *p = valid; *p != '\0'; p = g_utf8_next_char(p)) {
    gunichar c = g_utf8_get_char(p);
    if (c == '"')
      fputs("&quot;", stream);
    else if (c == '&')
      fputs("&amp;", stream);
    else if (c < 0x20 || c >= 0x7f)
      fprintf(stream, "&#%" G_GUINT32_FORMAT ";", (guint32)c);
    else
      putc((int)c, stream);
  }
  putc('"', stream);
}

/* A GML real always has a '.', so every reader types it as a real, not an integer. */
static void knnwb_gml_put_real(FILE *stream, double value)
{
  char text[48];
  if (!isfinite(value)) {
    fputs(isnan(value) ? "NAN" : (value > 0 ? "INF" : "-INF"), stream);
    return;
  }
  knnwb_formats_format_double(text, sizeof text - 2, value);
  if (strpbrk(text, ".") == NULL) {
    char *e = strpbrk(text, "eE");
    if (e != NULL) {
      memmove(e + 2, e, strlen(e) + 1);
      e[0] = '.';
      e[1] = '0';
    } else {
      strcat(text, ".0");
    }
  }
  fputs(text, stream);
}

gboolean knnwb_formats_write_gml(const char *path, const KnnwbGraphOutput *output, GError **error)
{
  if (!knnwb_formats_check_output(output, error))
    return FALSE;
  KnnwbGmlOptions defaults;
  knnwb_formats_gml_options_init(&defaults);
  const KnnwbGmlOptions *options = output->gml ? output->gml : &defaults;
  const igraph_t *graph = output->graph;
  igraph_integer_t n = igraph_vcount(graph);
  igraph_integer_t m = igraph_ecount(graph);
  const igraph_vector_int_t *membership = output->membership;

  igraph_matrix_t layout;
  gboolean have_layout = FALSE;
  if (igraph_matrix_init(&layout, 0, 0) != IGRAPH_SUCCESS) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "%s: out of memory", path);
    return FALSE;
  }
  const igraph_matrix_t *coordinates = NULL;
  if (!knnwb_formats_writer_coordinates(output, options, &layout, &coordinates, error)) {
    igraph_matrix_destroy(&layout);
    return FALSE;
  }
  have_layout = coordinates != NULL;

  g_autofree igraph_integer_t *cluster_size = NULL;
  if (membership != NULL) {
    igraph_integer_t clusters = n > 0 ? igraph_vector_int_max(membership) + 1 : 0;
    cluster_size = g_new0(igraph_integer_t, MAX(clusters, 1));
    for (igraph_integer_t v = 0; v < n; v++)
      cluster_size[VECTOR(*membership)[v]]++;
  }
  g_autofree gboolean *focus = g_new0(gboolean, MAX(n, 1));
  if (options->focus != NULL)
    for (igraph_integer_t i = 0; i < igraph_vector_int_size(options->focus); i++)
      focus[VECTOR(*options->focus)[i]] = TRUE;

  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL) {
    igraph_matrix_destroy(&layout);
    return FALSE;
  }
  FILE *stream = knnwb_atomic_file_stream(file);
  locale_t saved_locale = uselocale(knnwb_formats_c_locale());
  gboolean directed = igraph_is_directed(graph);
  fprintf(stream, "Creator \"knnwb\"\nVersion 1\ngraph\n[\n  directed %d\n", directed ? 1 : 0);
  char scratch[32];
  for (igraph_integer_t v = 0; v < n; v++) {
    const char *label = knnwb_formats_vertex_label(output->labels, v, scratch);
    fprintf(stream, "  node\n  [\n    id %" IGRAPH_PRId "\n    label ", v);
    knnwb_gml_put_string(stream, label);
    const char *fill = "#C0C0C0";
    if (membership != NULL) {
      igraph_integer_t c = VECTOR(*membership)[v];
      fill = knnwb_gml_palette[c % 20];
      fprintf(stream, "\n    cluster %" IGRAPH_PRId "\n    clusterSize %" IGRAPH_PRId, c,
              cluster_size[c]);
    }
    if (focus[v])
      fputs("\n    focus 1", stream);
    double size = focus[v] ? 2.0 * options->node_size : options->node_size;
    fputs("\n    graphics\n    [\n", stream);
    if (have_layout) {
      fputs("      x ", stream);
      knnwb_gml_put_real(stream, MATRIX(*coordinates, v, 0));
      fputs("\n      y ", stream);
      knnwb_gml_put_real(stream, MATRIX(*coordinates, v, 1));
      putc('\n', stream);
    }
    fputs("      w ", stream);
    knnwb_gml_put_real(stream, size);
    fputs("\n      h ", stream);
    knnwb_gml_put_real(stream, size);
    fprintf(stream,
            "\n      type \"%s\"\n      fill \"%s\"\n      outline \"%s\"\n    ]\n"
            "    LabelGraphics\n    [\n      text ",
            focus[v] ? "hexagon" : "ellipse", focus[v] ? "#FF0000" : fill,
            focus[v] ? "#000000" : "#404040");
    knnwb_gml_put_string(stream, label);
    fputs("\n      fontSize ", stream);
    fprintf(stream, "%d\n    ]\n  ]\n", (int)lround(options->font_size));
  }
  for (igraph_integer_t e = 0; e < m; e++) {
    igraph_integer_t a = IGRAPH_FROM(graph, e), b = IGRAPH_TO(graph, e);
    if (!directed && a > b) { /* smaller end first, as people write it */
      igraph_integer_t swap = a;
      a = b;
      b = swap;
    }
    fprintf(stream, "  edge\n  [\n    source %" IGRAPH_PRId "\n    target %" IGRAPH_PRId, a, b);
    if (output->weights != NULL) {
      fputs("\n    weight ", stream);
      knnwb_gml_put_real(stream, VECTOR(*output->weights)[e]);
    }
    const char *colour = "#A0A0A0";
    if (membership != NULL && VECTOR(*membership)[a] == VECTOR(*membership)[b])
      colour = knnwb_gml_palette[VECTOR(*membership)[a] % 20];
    fprintf(stream, "\n    graphics\n    [\n      fill \"%s\"\n      width ", colour);
    knnwb_gml_put_real(stream, options->edge_width);
    if (directed)
      fputs("\n      targetArrow \"standard\"", stream);
    fputs("\n    ]\n  ]\n", stream);
  }
  fputs("]\n", stream);
  uselocale(saved_locale);
  igraph_matrix_destroy(&layout);
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}
