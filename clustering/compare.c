/* A partition against known classes: ARI and NMI (igraph), contingency table. */
#include <math.h>
#include <knnwb/community.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

gboolean knnwb_clustering_compare(const igraph_vector_int_t *clusters,
                                  const igraph_vector_int_t *classes, double *ari, double *nmi,
                                  igraph_matrix_int_t *contingency, igraph_integer_t *n_compared,
                                  GError **error)
{
  igraph_integer_t n = igraph_vector_int_size(clusters);
  if (igraph_vector_int_size(classes) != n) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%" IGRAPH_PRId " classes for %" IGRAPH_PRId " points",
                igraph_vector_int_size(classes), n);
    return FALSE;
  }
  igraph_integer_t n_clusters = 0, n_classes = 0, used = 0;
  for (igraph_integer_t v = 0; v < n; v++) {
    if (VECTOR(*clusters)[v] < 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "point %" IGRAPH_PRId " has a negative cluster id", v);
      return FALSE;
    }
    n_clusters = MAX(n_clusters, VECTOR(*clusters)[v] + 1);
    if (VECTOR(*classes)[v] >= 0) {
      n_classes = MAX(n_classes, VECTOR(*classes)[v] + 1);
      used++;
    }
  }
  if (n_compared)
    *n_compared = used;
  if (contingency) {
    igraph_error_t code = igraph_matrix_int_resize(contingency, n_clusters, n_classes);
    if (!knnwb_error_from_igraph(code, "resizing the contingency table", error))
      return FALSE;
    igraph_matrix_int_null(contingency);
    for (igraph_integer_t v = 0; v < n; v++)
      if (VECTOR(*classes)[v] >= 0)
        MATRIX(*contingency, VECTOR(*clusters)[v], VECTOR(*classes)[v])++;
  }
  if (!ari && !nmi)
    return TRUE;
  if (ari)
    *ari = NAN;
  if (nmi)
    *nmi = NAN;
  if (used < 2)
    return TRUE;
  igraph_vector_int_t a, b;
  igraph_error_t code = igraph_vector_int_init(&a, used);
  if (!knnwb_error_from_igraph(code, "igraph_vector_int_init", error))
    return FALSE;
  code = igraph_vector_int_init(&b, used);
  if (!knnwb_error_from_igraph(code, "igraph_vector_int_init", error)) {
    igraph_vector_int_destroy(&a);
    return FALSE;
  }
  for (igraph_integer_t v = 0, i = 0; v < n; v++)
    if (VECTOR(*classes)[v] >= 0) {
      VECTOR(a)[i] = VECTOR(*clusters)[v];
      VECTOR(b)[i++] = VECTOR(*classes)[v];
    }
  igraph_real_t value = NAN;
  if (ari) {
    code = igraph_compare_communities(&a, &b, &value, IGRAPH_COMMCMP_ADJUSTED_RAND);
    *ari = value;
  }
  if (nmi && code == IGRAPH_SUCCESS) {
    code = igraph_compare_communities(&a, &b, &value, IGRAPH_COMMCMP_NMI);
    *nmi = value;
  }
  igraph_vector_int_destroy(&a);
  igraph_vector_int_destroy(&b);
  return knnwb_error_from_igraph(code, "igraph_compare_communities", error);
}
