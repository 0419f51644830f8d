/* Distances into similarity weights, and the undirected simple form of a weighted graph. */
#include <math.h>
#include <stdlib.h>
#include <knnwb/community.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

static const KnnwbEnumName knnwb_similarity_names[] = {KNNWB_SIMILARITY_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_similarity_table = KNNWB_ENUM_TABLE(
    knnwb_similarity_names, 0, " or ", "unknown similarity ", " (expected ", ")", "(null)");

gboolean knnwb_similarity_from_string(const char *name, KnnwbSimilarity *similarity, GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_similarity_table, name, &value, error))
    return FALSE;
  *similarity = (KnnwbSimilarity)value;
  return TRUE;
}

gboolean knnwb_clustering_similarity(const igraph_vector_t *distances, KnnwbSimilarity similarity,
                                     igraph_vector_t *similarities, GError **error)
{
  igraph_integer_t m = igraph_vector_size(distances);
  double sum = 0;
  for (igraph_integer_t e = 0; e < m; e++) {
    double d = VECTOR(*distances)[e];
    if (!(d >= 0)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "edge %" IGRAPH_PRId ": distance %g cannot become a similarity (negative or NaN)",
                  e, d);
      return FALSE;
    }
    sum += d;
  }
  /* Copy first: distances and similarities may be the same vector. */
  double scale = m > 0 && sum > 0 ? sum / (double)m : 1.0;
  if (similarities != distances &&
      !knnwb_error_from_igraph(igraph_vector_update(similarities, distances), "copying weights",
                               error))
    return FALSE;
  for (igraph_integer_t e = 0; e < m; e++) {
    double d = VECTOR(*similarities)[e];
    switch (similarity) {
    case KNNWB_SIMILARITY_INVERSE:
      VECTOR(*similarities)[e] = 1.0 / (1.0 + d);
      break;
    case KNNWB_SIMILARITY_EXP:
      VECTOR(*similarities)[e] = exp(-d / scale);
      break;
    case KNNWB_SIMILARITY_UNIT:
      VECTOR(*similarities)[e] = 1.0;
      break;
    }
  }
  return TRUE;
}

typedef struct {
  int64_t low, high;
  double weight;
} KnnwbUndirectedEdge;

static int knnwb_undirected_compare(const void *a, const void *b)
{
  const KnnwbUndirectedEdge *x = a, *y = b;
  if (x->low != y->low)
    return x->low < y->low ? -1 : 1;
  if (x->high != y->high)
    return x->high < y->high ? -1 : 1;
  /* Largest similarity first: it is the one kept. */
  return x->weight > y->weight ? -1 : x->weight < y->weight ? 1 : 0;
}

gboolean knnwb_clustering_undirected(const igraph_t *graph, const igraph_vector_t *similarities,
                                     igraph_t *out, igraph_vector_t *out_weights, GError **error)
{
  igraph_integer_t m = igraph_ecount(graph);
  if (similarities && igraph_vector_size(similarities) != m) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%" IGRAPH_PRId " weights for %" IGRAPH_PRId " edges",
                igraph_vector_size(similarities), m);
    return FALSE;
  }
  KnnwbUndirectedEdge *edges = g_try_new(KnnwbUndirectedEdge, MAX(m, 1));
  if (!edges) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate %" IGRAPH_PRId " edges",
                m);
    return FALSE;
  }
  igraph_integer_t kept = 0;
  for (igraph_integer_t e = 0; e < m; e++) {
    int64_t a = IGRAPH_FROM(graph, e), b = IGRAPH_TO(graph, e);
    if (a == b)
      continue;
    edges[kept++] =
        (KnnwbUndirectedEdge){MIN(a, b), MAX(a, b), similarities ? VECTOR(*similarities)[e] : 1.0};
  }
  qsort(edges, (size_t)kept, sizeof *edges, knnwb_undirected_compare);
  igraph_integer_t unique = 0;
  for (igraph_integer_t e = 0; e < kept; e++)
    if (unique == 0 || edges[unique - 1].low != edges[e].low ||
        edges[unique - 1].high != edges[e].high)
      edges[unique++] = edges[e];
  igraph_vector_int_t list;
  igraph_error_t code = igraph_vector_int_init(&list, 2 * unique);
  if (code != IGRAPH_SUCCESS) {
    g_free(edges);
    return knnwb_error_from_igraph(code, "allocating the undirected edges", error);
  }
  code = igraph_vector_resize(out_weights, unique);
  if (code == IGRAPH_SUCCESS) {
    for (igraph_integer_t e = 0; e < unique; e++) {
      VECTOR(list)[2 * e] = edges[e].low;
      VECTOR(list)[2 * e + 1] = edges[e].high;
      VECTOR(*out_weights)[e] = edges[e].weight;
    }
    code = igraph_create(out, &list, igraph_vcount(graph), IGRAPH_UNDIRECTED);
  }
  igraph_vector_int_destroy(&list);
  g_free(edges);
  return knnwb_error_from_igraph(code, "building the undirected graph", error);
}
