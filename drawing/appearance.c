/* How a laid-out graph looks in yEd and in pictures: node and label sizes from the layout's
 * density, a generated palette with as many distinguishable colours as there are clusters, edge
 * widths and similarity weights from the distances. The GML and GraphML writers ask for these; the
 * render command reads the results back from the GML, so pictures show the same colours. */
#include "drawing_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void knnwb_drawing_options_init(KnnwbDrawingOptions *options)
{
  memset(options, 0, sizeof *options);
  options->layout = KNNWB_LAYOUT_AUTO;
  options->fr_max_vertices = 20000;
  options->seed = 42;
  options->node_size = 30.0;
  options->font_size = 12.0;
  options->edge_width = 1.0;
}

void knnwb_drawing_appearance_init(KnnwbAppearance *appearance, const igraph_t *graph,
                                   const igraph_vector_t *weights,
                                   const KnnwbDrawingOptions *options,
                                   const igraph_matrix_t *coordinates)
{
  memset(appearance, 0, sizeof *appearance);
  /* Nodes half the spacing wide: neighbours in a dense cluster touch at most. Our own layouts
   * are scaled so that this is exactly options->node_size; given coordinates may be denser. */
  double spacing = knnwb_drawing_layout_spacing(graph, coordinates);
  appearance->node_size = options->node_size;
  if (spacing > 0.0)
    appearance->node_size = MIN(options->node_size, 0.5 * spacing);
  appearance->font_size = MAX(1.0, options->font_size * appearance->node_size / options->node_size);
  appearance->edge_width = options->edge_width;
  appearance->distance_lo = INFINITY;
  appearance->distance_hi = -INFINITY;
  if (weights != NULL)
    for (igraph_integer_t e = 0; e < igraph_vector_size(weights); e++) {
      double d = VECTOR(*weights)[e];
      if (isfinite(d)) {
        appearance->distance_lo = MIN(appearance->distance_lo, d);
        appearance->distance_hi = MAX(appearance->distance_hi, d);
      }
    }
  /* Every knnwb metric gives distances >= 0; other sources (the seed's r) may not. */
  appearance->distance_shift = appearance->distance_lo < 0.0 ? -appearance->distance_lo : 0.0;
}

double knnwb_drawing_similarity(const KnnwbAppearance *appearance, double distance)
{
  return 1.0 / (1.0 + distance + appearance->distance_shift);
}

double knnwb_drawing_edge_width(const KnnwbAppearance *appearance, double distance)
{
  /* Nearest pairs 3x the base width, the farthest 0.5x: strong ties stand out. */
  double span = appearance->distance_hi - appearance->distance_lo;
  double relative =
      span > 0.0 && isfinite(distance) ? (distance - appearance->distance_lo) / span : 0.5;
  return appearance->edge_width * (3.0 - 2.5 * relative);
}

void knnwb_drawing_cluster_colour(igraph_integer_t cluster, char hex[8])
{
  /* Hues a golden angle apart never repeat and the first few are far apart; three lightness
   * and saturation tiers cycling with a different period separate the near hues of distant ids. */
  double hue = fmod((double)cluster * 137.50776405003785, 360.0) / 60.0;
  static const double saturation[3] = {0.75, 0.55, 0.95};
  static const double value[3] = {0.90, 0.70, 0.55};
  int tier = (int)(cluster % 3);
  double s = saturation[tier], v = value[(cluster / 3) % 3];
  double c = v * s, x = c * (1.0 - fabs(fmod(hue, 2.0) - 1.0)), m = v - c;
  double r, g, b;
  switch ((int)hue) {
  case 0:
    r = c, g = x, b = 0;
    break;
  case 1:
    r = x, g = c, b = 0;
    break;
  case 2:
    r = 0, g = c, b = x;
    break;
  case 3:
    r = 0, g = x, b = c;
    break;
  case 4:
    r = x, g = 0, b = c;
    break;
  default:
    r = c, g = 0, b = x;
    break;
  }
  g_snprintf(hex, 8, "#%02X%02X%02X", (int)lround((r + m) * 255), (int)lround((g + m) * 255),
             (int)lround((b + m) * 255));
}

gboolean knnwb_drawing_setup_init(KnnwbDrawingSetup *setup, const char *path, const igraph_t *graph,
                                  const igraph_vector_t *weights,
                                  const KnnwbDrawingOptions *options,
                                  const KnnwbWriteControl *control, GError **error)
{
  memset(setup, 0, sizeof *setup);
  knnwb_drawing_options_init(&setup->defaults);
  setup->options = options != NULL ? options : &setup->defaults;
  igraph_integer_t n = igraph_vcount(graph);
  if (setup->options->focus != NULL) {
    setup->focus = g_try_new0(gboolean, MAX(n, 1));
    if (setup->focus == NULL) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "%s: out of memory for the focus flags of %" PRId64 " vertices", path,
                  (int64_t)n);
      return FALSE;
    }
    for (igraph_integer_t i = 0; i < igraph_vector_int_size(setup->options->focus); i++)
      setup->focus[VECTOR(*setup->options->focus)[i]] = TRUE;
  }
  if (igraph_matrix_init(&setup->layout, 0, 0) != IGRAPH_SUCCESS) {
    g_clear_pointer(&setup->focus, g_free);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "%s: out of memory", path);
    return FALSE;
  }
  if (!knnwb_drawing_layout_for_options(graph, weights, setup->options, control, &setup->layout,
                                        &setup->coordinates, error)) {
    knnwb_drawing_setup_clear(setup);
    return FALSE;
  }
  knnwb_drawing_appearance_init(&setup->appearance, graph, weights, setup->options,
                                setup->coordinates);
  return TRUE;
}

void knnwb_drawing_setup_clear(KnnwbDrawingSetup *setup)
{
  igraph_matrix_destroy(&setup->layout);
  /* A second clear must not destroy the matrix again. */
  memset(&setup->layout, 0, sizeof setup->layout);
  g_clear_pointer(&setup->focus, g_free);
  setup->coordinates = NULL;
}
