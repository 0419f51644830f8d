/* Writing a neighbourhood: the ranked table (Figure 3a as data) and its graph (yEd GML, GraphML,
 * .knn, .mtx or an edge table). */
#include <math.h>
#include <knnwb/atomic_file.h>
#include <knnwb/error.h>
#include <knnwb/text_fields.h>
#include <knnwb/formats.h>
#include <knnwb/neighbourhood.h>

static const char *knnwb_neighbourhood_label(const KnnwbMatrix *data, int64_t row, char scratch[32])
{
  const char *label = knnwb_matrix_row_label(data, (size_t)row);
  if (label != NULL)
    return label;
  g_snprintf(scratch, 32, "%" G_GINT64_FORMAT, (gint64)row);
  return scratch;
}

/* The metrics whose table has r, p and q. */
static gboolean knnwb_neighbourhood_with_r(KnnwbMetric metric)
{
  return metric == KNNWB_METRIC_PEARSON || metric == KNNWB_METRIC_ABS_PEARSON ||
         metric == KNNWB_METRIC_SPEARMAN;
}

gboolean knnwb_neighbourhood_write_table(const char *path, const KnnwbNeighbourhood *neighbourhood,
                                         const KnnwbMatrix *data, KnnwbMetric metric,
                                         GError **error)
{
  const size_t n = neighbourhood->n_members;
  g_autofree double *p = g_new(double, MAX(n, (size_t)1));
  g_autofree double *q = g_new(double, MAX(n, (size_t)1));
  for (size_t i = 0; i < n; i++)
    p[i] = q[i] = NAN;
  /* A writer that holds only the labels (a split run's) has no values to test against. */
  if (knnwb_neighbourhood_with_r(metric) && data != NULL && data->n_cols > 0 &&
      data->values != NULL &&
      !knnwb_neighbourhood_statistics(neighbourhood, data, metric, p, q, NULL, error))
    return FALSE;
  return knnwb_neighbourhood_write_table_statistics(path, neighbourhood, data, metric, p, q, error);
}

gboolean knnwb_neighbourhood_write_table_statistics(const char *path,
                                                    const KnnwbNeighbourhood *neighbourhood,
                                                    const KnnwbMatrix *data, KnnwbMetric metric,
                                                    const double *p, const double *q,
                                                    GError **error)
{
  const gboolean with_r = knnwb_neighbourhood_with_r(metric);
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  FILE *stream = knnwb_atomic_file_stream(file);
  fprintf(stream, "focus\trank\tlabel\torder\tdistance%s\n", with_r ? "\tr\tp\tq" : "");
  for (size_t i = 0; i < neighbourhood->n_members; i++) {
    const KnnwbNeighbourhoodMember *member = &neighbourhood->members[i];
    char scratch[32];
    knnwb_formats_write_tsv_field(
        stream, knnwb_neighbourhood_label(data, neighbourhood->focus[member->focus], scratch));
    fprintf(stream, "\t%zu\t", member->rank);
    knnwb_formats_write_tsv_field(stream, knnwb_neighbourhood_label(data, member->row, scratch));
    /* %.9g: distances and r to float precision and beyond, readable in a spreadsheet. */
    fprintf(stream, "\t%d\t%.9g", member->order, member->distance);
    if (with_r) {
      fprintf(stream, "\t%.9g", member->r);
      /* p and q to 6 significant digits: more would be noise beside the float32 data. */
      for (int column = 0; column < 2; column++) {
        const double value = column == 0 ? (p ? p[i] : NAN) : (q ? q[i] : NAN);
        if (isnan(value))
          fputs("\tNA", stream);
        else
          fprintf(stream, "\t%.6g", value);
      }
    }
    putc('\n', stream);
  }
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

gboolean knnwb_neighbourhood_check_format(const char *path, KnnwbOutputFormat format,
                                          GError **error)
{
  if (format == KNNWB_OUTPUT_AUTO && !knnwb_formats_output_from_path(path, &format, error))
    return FALSE;
  if (format == KNNWB_OUTPUT_GML || format == KNNWB_OUTPUT_GRAPHML || format == KNNWB_OUTPUT_KNN ||
      format == KNNWB_OUTPUT_MTX || format == KNNWB_OUTPUT_NEIGHBORS_TSV)
    return TRUE;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "%s: a neighbourhood is a graph: write it as .gml (yEd, laid out), .graphml, .knn, "
              ".mtx or a .tsv edge table (the ranked table is --table)",
              path);
  return FALSE;
}

/* .knn, .mtx and the .tsv edge table number vertices: with the input's row numbers (n = the
 * input's rows, every row named), as `knnwb knn` writes them, not the neighbourhood's own. */
static gboolean knnwb_neighbourhood_write_rows(const char *path, KnnwbOutputFormat format,
                                               const KnnwbNeighbourhood *neighbourhood,
                                               const KnnwbMatrix *data, GError **error)
{
  const igraph_t *graph = &neighbourhood->graph;
  const igraph_integer_t m = igraph_ecount(graph);
  const size_t n = data->n_rows;
  igraph_vector_int_t edges;
  if (!knnwb_error_from_igraph(igraph_vector_int_init(&edges, 2 * m), "igraph_vector_int_init",
                               error))
    return FALSE;
  for (igraph_integer_t e = 0; e < m; e++) {
    VECTOR(edges)[2 * e] = neighbourhood->rows[IGRAPH_FROM(graph, e)];
    VECTOR(edges)[2 * e + 1] = neighbourhood->rows[IGRAPH_TO(graph, e)];
  }
  igraph_t rows;
  igraph_error_t code =
      igraph_create(&rows, &edges, (igraph_integer_t)n, igraph_is_directed(graph));
  igraph_vector_int_destroy(&edges);
  if (!knnwb_error_from_igraph(code, "igraph_create", error))
    return FALSE;
  g_autofree const char **labels = g_new0(const char *, MAX(n, (size_t)1));
  g_autofree char *numbers = g_new0(char, MAX(n, (size_t)1) * 32);
  for (size_t v = 0; v < n; v++)
    labels[v] = knnwb_neighbourhood_label(data, (int64_t)v, numbers + v * 32);
  KnnwbGraphOutput output = {.graph = &rows, .weights = &neighbourhood->weights, .labels = labels};
  gboolean ok = knnwb_formats_write_graph(path, format, &output, error);
  igraph_destroy(&rows);
  return ok;
}

gboolean knnwb_neighbourhood_write_gml(const char *path, const KnnwbNeighbourhood *neighbourhood,
                                       const KnnwbMatrix *data, unsigned long seed, GError **error)
{
  return knnwb_neighbourhood_write_graph(path, KNNWB_OUTPUT_GML, neighbourhood, data, seed, error);
}

gboolean knnwb_neighbourhood_write_gml_annotated(const char *path,
                                                 const KnnwbNeighbourhood *neighbourhood,
                                                 const KnnwbMatrix *data, unsigned long seed,
                                                 const KnnwbNodeAttribute *attributes,
                                                 size_t n_attributes, GError **error)
{
  return knnwb_neighbourhood_write_graph_annotated(path, KNNWB_OUTPUT_GML, neighbourhood, data,
                                                   seed, attributes, n_attributes, error);
}

gboolean knnwb_neighbourhood_write_graph(const char *path, KnnwbOutputFormat format,
                                         const KnnwbNeighbourhood *neighbourhood,
                                         const KnnwbMatrix *data, unsigned long seed,
                                         GError **error)
{
  return knnwb_neighbourhood_write_graph_annotated(path, format, neighbourhood, data, seed, NULL, 0,
                                                   error);
}

gboolean knnwb_neighbourhood_write_graph_annotated(const char *path, KnnwbOutputFormat format,
                                                   const KnnwbNeighbourhood *neighbourhood,
                                                   const KnnwbMatrix *data, unsigned long seed,
                                                   const KnnwbNodeAttribute *attributes,
                                                   size_t n_attributes, GError **error)
{
  if (format == KNNWB_OUTPUT_AUTO && !knnwb_formats_output_from_path(path, &format, error))
    return FALSE;
  if (!knnwb_neighbourhood_check_format(path, format, error))
    return FALSE;
  if (format == KNNWB_OUTPUT_KNN || format == KNNWB_OUTPUT_MTX ||
      format == KNNWB_OUTPUT_NEIGHBORS_TSV)
    return knnwb_neighbourhood_write_rows(path, format, neighbourhood, data, error);
  const size_t n = neighbourhood->n_vertices;
  g_autofree const char **labels = g_new0(const char *, MAX(n, (size_t)1));
  g_autofree char *numbers = g_new0(char, MAX(n, (size_t)1) * 32);
  for (size_t v = 0; v < n; v++)
    labels[v] = knnwb_neighbourhood_label(data, neighbourhood->rows[v], numbers + v * 32);
  igraph_vector_int_t order, focus;
  if (!knnwb_error_from_igraph(igraph_vector_int_init(&order, (igraph_integer_t)n),
                               "igraph_vector_int_init", error))
    return FALSE;
  if (!knnwb_error_from_igraph(
          igraph_vector_int_init(&focus, (igraph_integer_t)neighbourhood->n_focus),
          "igraph_vector_int_init", error)) {
    igraph_vector_int_destroy(&order);
    return FALSE;
  }
  for (size_t v = 0; v < n; v++)
    VECTOR(order)[v] = neighbourhood->order[v];
  for (size_t f = 0; f < neighbourhood->n_focus; f++)
    VECTOR(focus)[f] = (igraph_integer_t)f; /* the focus rows are the first vertices */
  KnnwbDrawingOptions gml;
  knnwb_drawing_options_init(&gml);
  gml.layout = KNNWB_LAYOUT_FR;
  gml.seed = seed;
  gml.focus = &focus;
  /* Radial: the focus in the centre, order 1 on a ring by distance, order 2 outside near the
   * neighbour that brought it; the coordinates stay in the GML for yEd. */
  igraph_matrix_t radial;
  if (!knnwb_error_from_igraph(igraph_matrix_init(&radial, 0, 0), "igraph_matrix_init", error)) {
    igraph_vector_int_destroy(&order);
    igraph_vector_int_destroy(&focus);
    return FALSE;
  }
  if (!knnwb_drawing_layout_radial(&neighbourhood->graph, &neighbourhood->weights, &focus,
                                   neighbourhood->order, gml.node_size, &radial, error)) {
    igraph_matrix_destroy(&radial);
    igraph_vector_int_destroy(&order);
    igraph_vector_int_destroy(&focus);
    return FALSE;
  }
  gml.coordinates = &radial;
  /* Colour by order: focus, first neighbours and second neighbours read apart at a glance. */
  KnnwbGraphOutput output = {.graph = &neighbourhood->graph,
                             .weights = &neighbourhood->weights,
                             .labels = labels,
                             .membership = &order,
                             .gml = &gml,
                             .attributes = attributes,
                             .n_attributes = n_attributes};
  gboolean ok = knnwb_formats_write_graph(path, format, &output, error);
  igraph_matrix_destroy(&radial);
  igraph_vector_int_destroy(&order);
  igraph_vector_int_destroy(&focus);
  return ok;
}
