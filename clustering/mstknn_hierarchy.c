/* MST-kNN's split hierarchy: storage and Newick text. */
#include <string.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

gboolean knnwb_mstknn_hierarchy_init(KnnwbMstKnnHierarchy *hierarchy, GError **error)
{
  memset(hierarchy, 0, sizeof *hierarchy);
  igraph_error_t code = igraph_vector_int_init(&hierarchy->parent, 0);
  if (code == IGRAPH_SUCCESS && (code = igraph_vector_int_init(&hierarchy->size, 0)) != 0)
    igraph_vector_int_destroy(&hierarchy->parent);
  if (code == IGRAPH_SUCCESS && (code = igraph_vector_int_init(&hierarchy->k, 0)) != 0) {
    igraph_vector_int_destroy(&hierarchy->parent);
    igraph_vector_int_destroy(&hierarchy->size);
  }
  if (code == IGRAPH_SUCCESS && (code = igraph_vector_int_init(&hierarchy->cluster, 0)) != 0) {
    igraph_vector_int_destroy(&hierarchy->parent);
    igraph_vector_int_destroy(&hierarchy->size);
    igraph_vector_int_destroy(&hierarchy->k);
  }
  return knnwb_error_from_igraph(code, "initialising the hierarchy", error);
}

void knnwb_mstknn_hierarchy_destroy(KnnwbMstKnnHierarchy *hierarchy)
{
  igraph_vector_int_destroy(&hierarchy->parent);
  igraph_vector_int_destroy(&hierarchy->size);
  igraph_vector_int_destroy(&hierarchy->k);
  igraph_vector_int_destroy(&hierarchy->cluster);
}

char *knnwb_mstknn_hierarchy_newick(const KnnwbMstKnnHierarchy *hierarchy,
                                    const igraph_vector_int_t *membership,
                                    const char *const *labels, GError **error)
{
  igraph_integer_t m = igraph_vector_int_size(&hierarchy->parent);
  igraph_integer_t n = igraph_vector_int_size(membership);
  igraph_integer_t clusters = n > 0 ? igraph_vector_int_max(membership) + 1 : 0;
  /* Children and cluster points as linked lists (first / next), so the text is built in one
   * depth-first pass without recursion (hierarchies can be deep on chained data). */
  g_autofree igraph_integer_t *first_child = g_new(igraph_integer_t, MAX(m, 1));
  g_autofree igraph_integer_t *next_sibling = g_new(igraph_integer_t, MAX(m, 1));
  g_autofree igraph_integer_t *node_of_cluster = g_new(igraph_integer_t, MAX(clusters, 1));
  g_autofree igraph_integer_t *first_point = g_new(igraph_integer_t, MAX(clusters, 1));
  g_autofree igraph_integer_t *next_point = g_new(igraph_integer_t, MAX(n, 1));
  for (igraph_integer_t c = 0; c < clusters; c++)
    node_of_cluster[c] = first_point[c] = -1;
  for (igraph_integer_t i = 0; i < m; i++)
    first_child[i] = next_sibling[i] = -1;
  gboolean valid = m > 0 || n == 0;
  for (igraph_integer_t i = m - 1; valid && i >= 0; i--) {
    igraph_integer_t parent = VECTOR(hierarchy->parent)[i], c = VECTOR(hierarchy->cluster)[i];
    valid = (i == 0) == (parent < 0) && parent < i && c < clusters;
    if (valid && parent >= 0) {
      next_sibling[i] = first_child[parent];
      first_child[parent] = i;
    }
    if (valid && c >= 0)
      node_of_cluster[c] = i;
  }
  for (igraph_integer_t v = n - 1; valid && v >= 0; v--) {
    igraph_integer_t c = VECTOR(*membership)[v];
    valid = c >= 0 && node_of_cluster[c] >= 0;
    if (valid) {
      next_point[v] = first_point[c];
      first_point[c] = v;
    }
  }
  if (!valid) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the membership does not match the MST-kNN hierarchy");
    return NULL;
  }
  GString *text = g_string_new(NULL);
  if (m == 0) {
    g_string_append(text, ";\n");
    return g_string_free(text, FALSE);
  }
  /* Iterative pre/post-order walk: node, then its children, then close it with its name. */
  igraph_integer_t node = 0;
  for (;;) {
    igraph_integer_t c = VECTOR(hierarchy->cluster)[node];
    g_string_append_c(text, '(');
    if (c >= 0) {
      for (igraph_integer_t v = first_point[c]; v >= 0; v = next_point[v]) {
        knnwb_clustering_newick_label(text, labels ? labels[v] : NULL, v);
        if (next_point[v] >= 0)
          g_string_append_c(text, ',');
      }
    } else if (first_child[node] >= 0) {
      node = first_child[node];
      continue;
    }
    /* Close node, then climb while there is no next sibling. */
    for (;;) {
      igraph_integer_t cluster = VECTOR(hierarchy->cluster)[node];
      g_string_append_printf(text, ")%c%" IGRAPH_PRId "_k%" IGRAPH_PRId, cluster >= 0 ? 'c' : 'n',
                             cluster >= 0 ? cluster : node, VECTOR(hierarchy->k)[node]);
      if (node == 0) {
        g_string_append(text, ";\n");
        return g_string_free(text, FALSE);
      }
      if (next_sibling[node] >= 0) {
        g_string_append_c(text, ',');
        node = next_sibling[node];
        break;
      }
      node = VECTOR(hierarchy->parent)[node];
    }
  }
}
