/* The radial layout of a neighbourhood: the focus in the centre, its direct neighbours on a ring in
 * the order of their distance to it, each further vertex outside near the vertex that brought it
 * (its nearest neighbour one hop closer to the focus), in that vertex's wedge. Unreached vertices
 * go on an outer ring. Readable where a force layout puts the focus among long crossing edges. */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include "drawing_internal.h"

/* One vertex's place in the tree the layout draws: hops from the focus, the vertex that brought
 * it, the distance of that edge, and its angle wedge. */
typedef struct {
  igraph_integer_t hops, parent;
  double distance;
  double angle, wedge;
} KnnwbRadialVertex;

/* Hops from the focus set (given, or breadth first over edges in both directions) and each
 * vertex's parent: its nearest neighbour one hop closer. */
static igraph_error_t knnwb_radial_tree(const igraph_t *graph, const igraph_vector_t *distances,
                                        const gboolean *is_focus, const int *hops,
                                        KnnwbRadialVertex *vertices)
{
  igraph_integer_t n = igraph_vcount(graph);
  igraph_vector_int_t queue, incident;
  IGRAPH_CHECK(igraph_vector_int_init(&queue, 0));
  IGRAPH_FINALLY(igraph_vector_int_destroy, &queue);
  IGRAPH_CHECK(igraph_vector_int_init(&incident, 0));
  IGRAPH_FINALLY(igraph_vector_int_destroy, &incident);
  for (igraph_integer_t v = 0; v < n; v++) {
    vertices[v] = (KnnwbRadialVertex){is_focus[v] ? 0 : -1, -1, INFINITY, 0, 0};
    if (is_focus[v])
      IGRAPH_CHECK(igraph_vector_int_push_back(&queue, v));
  }
  for (igraph_integer_t head = 0; head < igraph_vector_int_size(&queue); head++) {
    igraph_integer_t u = VECTOR(queue)[head];
    IGRAPH_CHECK(igraph_incident(graph, &incident, u, IGRAPH_ALL));
    for (igraph_integer_t i = 0; i < igraph_vector_int_size(&incident); i++) {
      igraph_integer_t e = VECTOR(incident)[i], w = IGRAPH_OTHER(graph, e, u);
      double d = distances != NULL ? VECTOR(*distances)[e] : 1.0;
      if (hops != NULL && hops[w] != vertices[u].hops + 1)
        continue; /* the caller's hops decide; only a vertex one hop closer is a parent */
      if (vertices[w].parent == -1 && (hops != NULL || vertices[w].hops == -1)) {
        vertices[w].hops = vertices[u].hops + 1;
        vertices[w].parent = u, vertices[w].distance = d;
        IGRAPH_CHECK(igraph_vector_int_push_back(&queue, w));
      } else if (vertices[w].hops == vertices[u].hops + 1 && d < vertices[w].distance) {
        vertices[w].parent = u, vertices[w].distance = d;
      }
    }
  }
  igraph_vector_int_destroy(&incident);
  igraph_vector_int_destroy(&queue);
  IGRAPH_FINALLY_CLEAN(2);
  return IGRAPH_SUCCESS;
}

/* By parent, then distance to it, then index: a ring in the order of distance. */
static gint knnwb_radial_compare(gconstpointer a, gconstpointer b, gpointer data)
{
  const KnnwbRadialVertex *vertices = data;
  igraph_integer_t x = *(const igraph_integer_t *)a, y = *(const igraph_integer_t *)b;
  const KnnwbRadialVertex *p = &vertices[x], *q = &vertices[y];
  if (p->parent != q->parent)
    return p->parent < q->parent ? -1 : 1;
  if (p->distance != q->distance)
    return p->distance < q->distance ? -1 : 1;
  return (x > y) - (x < y);
}

/* Angles and radii level by level: the first ring shares the circle evenly (nearest first, from
 * the top, clockwise); deeper vertices share their parent's wedge, on as many rings as keep them
 * a node and a half apart. */
static void knnwb_radial_place(KnnwbRadialVertex *vertices, igraph_integer_t n, double size,
                               igraph_matrix_t *coordinates)
{
  g_autofree igraph_integer_t *order = g_new(igraph_integer_t, MAX(n, 1));
  igraph_integer_t deepest = 0, n_focus = 0;
  for (igraph_integer_t v = 0; v < n; v++)
    deepest = MAX(deepest, vertices[v].hops), n_focus += vertices[v].hops == 0;
  /* The focus: the centre, or a small circle for several. */
  double focus_ring = n_focus > 1 ? size * n_focus / G_PI : 0;
  for (igraph_integer_t v = 0, f = 0; v < n; v++)
    if (vertices[v].hops == 0) {
      double angle = 2 * G_PI * (double)f++ / MAX(n_focus, 1) - G_PI / 2;
      vertices[v].angle = angle, vertices[v].wedge = 2 * G_PI / MAX(n_focus, 1);
      MATRIX(*coordinates, v, 0) = focus_ring * cos(angle);
      MATRIX(*coordinates, v, 1) = focus_ring * sin(angle);
    }
  /* Ring radii first: each far enough out for its vertices 2.5 sizes apart (room for labels),
   * 4 sizes beyond the last; the first ring at least 6 sizes out and 45% of the second, so that
   * the focus's neighbours are not crowded into the centre. */
  g_autofree double *rings = g_new0(double, (gsize)deepest + 2);
  g_autofree igraph_integer_t *counts = g_new0(igraph_integer_t, (gsize)deepest + 2);
  for (igraph_integer_t v = 0; v < n; v++)
    counts[vertices[v].hops >= 1 ? vertices[v].hops : vertices[v].hops == -1 ? deepest + 1 : 0]++;
  counts[0] = 0;
  double radius = focus_ring;
  for (igraph_integer_t level = 1; level <= deepest + 1; level++) {
    if (counts[level] == 0)
      continue;
    rings[level] =
        MAX(radius + (level == 1 ? 6 : 4) * size, 2.5 * size * (double)counts[level] / (2 * G_PI));
    radius = rings[level];
  }
  if (deepest >= 2 && counts[2] > 0)
    rings[1] = MAX(rings[1], 0.45 * rings[2]);
  radius = focus_ring;
  for (igraph_integer_t level = 1; level <= deepest + 1; level++) {
    igraph_integer_t k = 0;
    for (igraph_integer_t v = 0; v < n; v++)
      if (level <= deepest ? vertices[v].hops == level : vertices[v].hops == -1)
        order[k++] = v;
    if (k == 0)
      continue;
    g_qsort_with_data(order, (gint)k, sizeof *order, knnwb_radial_compare, vertices);
    double ring = MAX(rings[level], radius + 4 * size);
    double widest = ring;
    for (igraph_integer_t i = 0; i < k;) {
      igraph_integer_t parent = vertices[order[i]].parent, j = i;
      while (j < k && vertices[order[j]].parent == parent)
        j++;
      /* Siblings i..j-1 share the parent's wedge (the whole circle for the first ring). */
      double centre = parent >= 0 ? vertices[parent].angle : -G_PI / 2 + G_PI / MAX(k, 1);
      double wedge = parent >= 0 && level > 1 ? vertices[parent].wedge : 2 * G_PI;
      if (level == 1 || parent < 0) /* one share of the whole ring each */
        wedge = 2 * G_PI * (double)(j - i) / (double)k;
      igraph_integer_t per_ring = MAX(1, (igraph_integer_t)floor(wedge * ring / (1.5 * size)));
      for (igraph_integer_t s = i; s < j; s++) {
        igraph_integer_t row = (s - i) / per_ring, slot = (s - i) % per_ring;
        igraph_integer_t in_row = MIN(per_ring, j - i - row * per_ring);
        double start = level == 1 || parent < 0 ? -G_PI / 2 + 2 * G_PI * (double)i / (double)k
                                                : centre - wedge / 2;
        double angle = start + wedge * ((double)slot + 0.5) / (double)in_row;
        double r = ring + 1.5 * size * (double)row;
        igraph_integer_t v = order[s];
        vertices[v].angle = angle;
        vertices[v].wedge = wedge / (double)MAX(in_row, 1);
        MATRIX(*coordinates, v, 0) = r * cos(angle);
        MATRIX(*coordinates, v, 1) = r * sin(angle);
        widest = MAX(widest, r);
      }
      i = j;
    }
    radius = widest;
  }
}

gboolean knnwb_drawing_layout_radial(const igraph_t *graph, const igraph_vector_t *distances,
                                     const igraph_vector_int_t *focus, const int *hops,
                                     double node_size, igraph_matrix_t *coordinates, GError **error)
{
  igraph_integer_t n = igraph_vcount(graph);
  if (distances != NULL && igraph_vector_size(distances) != igraph_ecount(graph)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "radial layout: %" IGRAPH_PRId " distances for %" IGRAPH_PRId " edges",
                igraph_vector_size(distances), igraph_ecount(graph));
    return FALSE;
  }
  g_autofree gboolean *is_focus = g_new0(gboolean, MAX(n, 1));
  for (igraph_integer_t f = 0; focus != NULL && f < igraph_vector_int_size(focus); f++) {
    igraph_integer_t v = VECTOR(*focus)[f];
    if (v < 0 || v >= n) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "radial layout: focus vertex %" IGRAPH_PRId " of %" IGRAPH_PRId, v, n);
      return FALSE;
    }
    is_focus[v] = TRUE;
  }
  if (n > 0 && (focus == NULL || igraph_vector_int_size(focus) == 0))
    is_focus[0] = TRUE; /* no focus: the first vertex stands in the centre */
  g_autofree KnnwbRadialVertex *vertices = g_new0(KnnwbRadialVertex, MAX(n, 1));
  if (!knnwb_error_from_igraph(igraph_matrix_resize(coordinates, n, 2), "igraph_matrix_resize",
                               error) ||
      !knnwb_error_from_igraph(knnwb_radial_tree(graph, distances, is_focus, hops, vertices),
                               "radial layout", error))
    return FALSE;
  knnwb_radial_place(vertices, n, node_size > 0 ? node_size : 30.0, coordinates);
  return TRUE;
}
