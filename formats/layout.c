/* 2-D coordinates for drawing: Fruchterman-Reingold for small graphs, DrL for large ones. */
#include "formats_internal.h"

#include <math.h>
#include <string.h>

gboolean knnwb_formats_layout_from_string(const char *name, KnnwbLayout *layout, GError **error)
{
  static const char *const names[] = {"auto", "fr", "drl", "none"};
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
    if (name != NULL && g_ascii_strcasecmp(name, names[i]) == 0) {
      *layout = (KnnwbLayout)i;
      return TRUE;
    }
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "unknown layout '%s' (known: auto, fr, drl, none)", name ? name : "(null)");
  return FALSE;
}

/* Distances become attractions in [~0.9, 10]: the nearest neighbours pull hardest. Both layouts
 * need positive weights, and raw distances can be negative (the seed's r) or zero. */
static igraph_error_t knnwb_layout_attractions(const igraph_vector_t *distances,
                                               igraph_vector_t *attractions)
{
  igraph_integer_t m = igraph_vector_size(distances);
  IGRAPH_CHECK(igraph_vector_resize(attractions, m));
  if (m == 0)
    return IGRAPH_SUCCESS;
  double lo = INFINITY, hi = -INFINITY;
  for (igraph_integer_t e = 0; e < m; e++) {
    double d = VECTOR(*distances)[e];
    if (isfinite(d)) {
      lo = MIN(lo, d);
      hi = MAX(hi, d);
    }
  }
  double span = hi > lo ? hi - lo : 1.0;
  for (igraph_integer_t e = 0; e < m; e++) {
    double d = VECTOR(*distances)[e];
    double relative = isfinite(d) ? (d - lo) / span : 1.0;
    VECTOR(*attractions)[e] = 1.0 / (relative + 0.1);
  }
  return IGRAPH_SUCCESS;
}

static igraph_error_t knnwb_layout_compute(const igraph_t *graph, const igraph_vector_t *weights,
                                           gboolean use_drl, double node_size,
                                           igraph_matrix_t *coordinates)
{
  igraph_integer_t n = igraph_vcount(graph);
  igraph_vector_t attractions;
  IGRAPH_VECTOR_INIT_FINALLY(&attractions, 0);
  const igraph_vector_t *w = NULL;
  if (weights != NULL) {
    IGRAPH_CHECK(knnwb_layout_attractions(weights, &attractions));
    w = &attractions;
  }
  if (n == 0) {
    IGRAPH_CHECK(igraph_matrix_resize(coordinates, 0, 2));
  } else if (use_drl) {
    igraph_layout_drl_options_t options;
    IGRAPH_CHECK(igraph_layout_drl_options_init(&options, IGRAPH_LAYOUT_DRL_DEFAULT));
    IGRAPH_CHECK(igraph_layout_drl(graph, coordinates, /*use_seed=*/false, &options, w));
  } else {
    IGRAPH_CHECK(igraph_layout_fruchterman_reingold(graph, coordinates, /*use_seed=*/false, 500,
                                                    sqrt((double)n), IGRAPH_LAYOUT_AUTOGRID, w,
                                                    NULL, NULL, NULL, NULL));
  }
  /* Scale so that an average edge is about four node sizes: yEd then shows a readable drawing
   * at 100% zoom whatever units the layout used. */
  igraph_integer_t m = igraph_ecount(graph);
  double total = 0.0;
  igraph_integer_t counted = 0;
  for (igraph_integer_t e = 0; e < m; e++) {
    igraph_integer_t a = IGRAPH_FROM(graph, e), b = IGRAPH_TO(graph, e);
    if (a == b)
      continue;
    total += hypot(MATRIX(*coordinates, a, 0) - MATRIX(*coordinates, b, 0),
                   MATRIX(*coordinates, a, 1) - MATRIX(*coordinates, b, 1));
    counted++;
  }
  if (counted > 0 && total > 0.0) {
    double scale = 4.0 * node_size / (total / (double)counted);
    igraph_matrix_scale(coordinates, scale);
  }
  igraph_vector_destroy(&attractions);
  IGRAPH_FINALLY_CLEAN(1);
  return IGRAPH_SUCCESS;
}

gboolean knnwb_formats_layout(const igraph_t *graph, const igraph_vector_t *weights,
                              KnnwbLayout layout, igraph_integer_t fr_max_vertices,
                              unsigned long seed, double node_size, igraph_matrix_t *coordinates,
                              GError **error)
{
  if (layout == KNNWB_LAYOUT_NONE) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "layout 'none' computes nothing");
    return FALSE;
  }
  if (weights != NULL && igraph_vector_size(weights) != igraph_ecount(graph)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%" IGRAPH_PRId " weights for %" IGRAPH_PRId " edges", igraph_vector_size(weights),
                igraph_ecount(graph));
    return FALSE;
  }
  gboolean use_drl = layout == KNNWB_LAYOUT_DRL ||
                     (layout == KNNWB_LAYOUT_AUTO && igraph_vcount(graph) > fr_max_vertices);
  igraph_rng_seed(igraph_rng_default(), seed);
  igraph_error_t code = knnwb_layout_compute(graph, weights, use_drl, node_size, coordinates);
  return knnwb_error_from_igraph(
      code, use_drl ? "igraph_layout_drl" : "igraph_layout_fruchterman_reingold", error);
}

gboolean knnwb_formats_writer_coordinates(const KnnwbGraphOutput *output, const KnnwbGmlOptions *options,
                                          igraph_matrix_t *layout,
                                          const igraph_matrix_t **coordinates, GError **error)
{
  *coordinates = options->coordinates;
  if (*coordinates == NULL && options->layout != KNNWB_LAYOUT_NONE &&
      igraph_vcount(output->graph) > 0) {
    if (!knnwb_formats_layout(output->graph, output->weights, options->layout,
                              options->fr_max_vertices, options->seed, options->node_size, layout,
                              error))
      return FALSE;
    *coordinates = layout;
  }
  return TRUE;
}
