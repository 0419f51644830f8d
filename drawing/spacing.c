/* The spacing of drawn neighbours, from which node sizes and layout scales follow: a low quantile
 * of each vertex's shortest drawn edge, so that the dense clusters (where nodes overlap) decide,
 * not the long edges between clusters. */
#include "drawing_internal.h"

#include <math.h>
#include <stdlib.h>

static int knnwb_spacing_compare_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double knnwb_drawing_layout_spacing(const igraph_t *graph, const igraph_matrix_t *coordinates)
{
  /* Each vertex's shortest drawn edge, then a low quantile over vertices: the spacing inside the
   * dense clusters, where overlaps happen. The mean edge would be dominated by the long edges
   * between clusters. */
  igraph_integer_t n = igraph_vcount(graph), m = igraph_ecount(graph);
  if (n == 0 || coordinates == NULL)
    return 0.0;
  /* No room for the per-vertex lengths: no spacing, so the drawing keeps the layout's own scale. */
  double *shortest = g_try_new(double, n);
  if (shortest == NULL)
    return 0.0;
  for (igraph_integer_t v = 0; v < n; v++)
    shortest[v] = INFINITY;
  for (igraph_integer_t e = 0; e < m; e++) {
    igraph_integer_t a = IGRAPH_FROM(graph, e), b = IGRAPH_TO(graph, e);
    double length = hypot(MATRIX(*coordinates, a, 0) - MATRIX(*coordinates, b, 0),
                          MATRIX(*coordinates, a, 1) - MATRIX(*coordinates, b, 1));
    if (a == b || !(length > 0.0))
      continue;
    shortest[a] = MIN(shortest[a], length);
    shortest[b] = MIN(shortest[b], length);
  }
  igraph_integer_t counted = 0;
  for (igraph_integer_t v = 0; v < n; v++)
    if (isfinite(shortest[v]))
      shortest[counted++] = shortest[v];
  double spacing = 0.0;
  if (counted > 0) {
    qsort(shortest, (size_t)counted, sizeof(double), knnwb_spacing_compare_double);
    spacing = shortest[counted / 4];
  }
  g_free(shortest);
  if (spacing > 0.0)
    return spacing;
  /* No usable edge: the mean spacing of the points over their bounding box. */
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (igraph_integer_t v = 0; v < n; v++) {
    x0 = MIN(x0, MATRIX(*coordinates, v, 0));
    x1 = MAX(x1, MATRIX(*coordinates, v, 0));
    y0 = MIN(y0, MATRIX(*coordinates, v, 1));
    y1 = MAX(y1, MATRIX(*coordinates, v, 1));
  }
  double area = (x1 - x0) * (y1 - y0);
  return area > 0.0 ? sqrt(area / (double)n) : 0.0;
}
