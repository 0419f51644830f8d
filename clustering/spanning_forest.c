/* The public spanning-forest entry: backend choice, forest edge ids, membership, forest graph. */
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "clustering_internal.h"
#include "knnwb_kernels.h"
#include "knnwb_kernels_boruvka.h"

void knnwb_clustering_forest_options_init(KnnwbForestOptions *options)
{
  options->backend = KNNWB_BACKEND_AUTO;
  options->n_threads = 0;
  options->device = 0;
}

static gboolean knnwb_clustering_boruvka_gpu(const igraph_t *graph, const igraph_vector_t *weights,
                                             int device, unsigned char *in_forest, GError **error)
{
  char message[512] = "";
  int status = knnwb_cuda_boruvka_forest(device, igraph_vcount(graph), igraph_ecount(graph),
                                         VECTOR(graph->from), VECTOR(graph->to), VECTOR(*weights),
                                         in_forest, NULL, message, sizeof message);
  if (status == KNNWB_KERNELS_OK)
    return TRUE;
  int code = status == KNNWB_KERNELS_OUT_OF_MEMORY ? KNNWB_ERROR_NO_MEMORY : KNNWB_ERROR_DEVICE;
  g_set_error(error, KNNWB_ERROR, code, "GPU Borůvka: %s", message[0] ? message : "failed");
  return FALSE;
}

gboolean knnwb_clustering_spanning_forest(const igraph_t *graph, const igraph_vector_t *weights,
                                          const KnnwbForestOptions *options,
                                          igraph_vector_int_t *forest_edges,
                                          igraph_vector_int_t *membership,
                                          igraph_integer_t *n_components, GError **error)
{
  KnnwbForestOptions defaults;
  if (!options) {
    knnwb_clustering_forest_options_init(&defaults);
    options = &defaults;
  }
  if (!knnwb_clustering_check_weights(graph, weights, error))
    return FALSE;
  G_STATIC_ASSERT(sizeof(igraph_integer_t) == sizeof(int64_t));
  int64_t n = igraph_vcount(graph);
  size_t m = (size_t)igraph_ecount(graph);

  gboolean use_gpu = FALSE;
  if (options->backend == KNNWB_BACKEND_CUDA)
    use_gpu = TRUE;
  else if (options->backend == KNNWB_BACKEND_AUTO)
    use_gpu = knnwb_cuda_device_count() > 0;

  unsigned char *in_forest = g_try_malloc(MAX(m, 1));
  int64_t *parent = g_try_new(int64_t, MAX(n, 1));
  gboolean ok = FALSE;
  if (!in_forest || !parent) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate forest flags");
    goto out;
  }
  if (use_gpu) {
    if (!knnwb_clustering_boruvka_gpu(graph, weights, options->device, in_forest, error))
      goto out;
  } else if (!knnwb_clustering_boruvka_cpu(graph, weights, options->n_threads, in_forest, error)) {
    goto out;
  }

  size_t count = 0;
  for (size_t e = 0; e < m; e++)
    count += in_forest[e];
  igraph_error_t code = igraph_vector_int_resize(forest_edges, (igraph_integer_t)count);
  if (!knnwb_error_from_igraph(code, "resizing the forest edge vector", error))
    goto out;
  for (int64_t v = 0; v < n; v++)
    parent[v] = v;
  count = 0;
  for (size_t e = 0; e < m; e++) {
    if (!in_forest[e])
      continue;
    VECTOR(*forest_edges)[count++] = (igraph_integer_t)e;
    knnwb_clustering_union(parent, IGRAPH_FROM(graph, e), IGRAPH_TO(graph, e));
  }
  if (membership || n_components) {
    igraph_vector_int_t scratch;
    igraph_vector_int_t *target = membership;
    if (!target) {
      code = igraph_vector_int_init(&scratch, 0);
      if (!knnwb_error_from_igraph(code, "allocating membership", error))
        goto out;
      target = &scratch;
    }
    code = knnwb_clustering_number_sets(parent, n, target, n_components);
    if (!membership)
      igraph_vector_int_destroy(&scratch);
    if (!knnwb_error_from_igraph(code, "numbering components", error))
      goto out;
  }
  ok = TRUE;
out:
  g_free(in_forest);
  g_free(parent);
  return ok;
}

gboolean knnwb_clustering_forest_graph(const igraph_t *graph, const igraph_vector_t *weights,
                                       const igraph_vector_int_t *forest_edges, igraph_t *forest,
                                       igraph_vector_t *forest_weights, GError **error)
{
  if (!knnwb_clustering_check_weights(graph, weights, error))
    return FALSE;
  igraph_integer_t m = igraph_ecount(graph);
  igraph_integer_t f = igraph_vector_int_size(forest_edges);
  igraph_vector_int_t edges;
  igraph_error_t code = igraph_vector_int_init(&edges, 2 * f);
  if (!knnwb_error_from_igraph(code, "allocating forest edges", error))
    return FALSE;
  code = igraph_vector_resize(forest_weights, f);
  for (igraph_integer_t i = 0; code == IGRAPH_SUCCESS && i < f; i++) {
    igraph_integer_t e = VECTOR(*forest_edges)[i];
    if (e < 0 || e >= m) {
      igraph_vector_int_destroy(&edges);
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "forest edge id %" G_GINT64_FORMAT " is out of range", (gint64)e);
      return FALSE;
    }
    VECTOR(edges)[2 * i] = IGRAPH_FROM(graph, e);
    VECTOR(edges)[2 * i + 1] = IGRAPH_TO(graph, e);
    VECTOR(*forest_weights)[i] = VECTOR(*weights)[e];
  }
  if (code == IGRAPH_SUCCESS)
    code = igraph_create(forest, &edges, igraph_vcount(graph), IGRAPH_UNDIRECTED);
  igraph_vector_int_destroy(&edges);
  return knnwb_error_from_igraph(code, "building the forest graph", error);
}
