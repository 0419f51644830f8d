/*
 * knnwb.cluster: the clusterings `knnwb cluster` runs, with its defaults and in its order: kNN
 * lists, then the graph the method needs (directed/union/mutual kNN graph with similarity weights,
 * or the SNN graph), then igraph's community methods or connected components; or the exact MST of
 * the points for single linkage and MST-kNN. So a Python call and the command give one partition.
 */
#include <math.h>
#include "pyknnwb.h"

typedef enum {
  PYKNNWB_MST_KNN,
  PYKNNWB_COMPONENTS,
  PYKNNWB_SINGLE_LINKAGE,
  PYKNNWB_COMMUNITY
} PyKnnwbClusterKind;

#define PYKNNWB_GRAPH_SNN (KNNWB_GRAPH_MUTUAL + 1)

typedef struct {
  KnnwbMatrix *data;
  KnnwbKnnOptions knn; /* k = the command's -k, or 0 when not given */
  PyKnnwbClusterKind kind;
  KnnwbCommunityOptions community;
  int graph_kind; /* KnnwbGraphMode or PYKNNWB_GRAPH_SNN */
  KnnwbSnnWeighting weighting;
  KnnwbSimilarity similarity;
  double height;     /* single linkage: cut at this distance when >= 0 */
  gint64 n_clusters; /* single linkage: else cut to this many clusters */
  igraph_vector_int_t membership;
  double modularity;
} PyKnnwbCluster;

static gboolean pyknnwb_cluster_lists(PyKnnwbCluster *c, size_t k, KnnwbNeighbors **lists,
                                      GError **error)
{
  KnnwbKnnOptions options = c->knn;
  options.k = k;
  return knnwb_knn_self(c->data, &options, lists, error);
}

/* The kNN or SNN graph with similarity weights, then components or communities. */
static gboolean pyknnwb_cluster_graph(PyKnnwbCluster *c, GError **error)
{
  igraph_t graph;
  igraph_vector_t distances, similarities;
  if (!knnwb_error_from_igraph(igraph_vector_init(&distances, 0), "igraph_vector_init", error))
    return FALSE;
  if (!knnwb_error_from_igraph(igraph_vector_init(&similarities, 0), "igraph_vector_init", error)) {
    igraph_vector_destroy(&distances);
    return FALSE;
  }
  gboolean ok = FALSE, has_graph = FALSE;
  KnnwbNeighbors *lists = NULL;
  if (c->data->n_rows < 2) {
    /* One point: no neighbours, its own cluster (as the command says). */
    if (!(has_graph = knnwb_error_from_igraph(
              igraph_empty(&graph, (igraph_integer_t)c->data->n_rows, IGRAPH_UNDIRECTED),
              "igraph_empty", error)))
      goto out;
  } else {
    if (!pyknnwb_cluster_lists(c, c->knn.k ? c->knn.k : 10, &lists, error))
      goto out;
    if (c->graph_kind == PYKNNWB_GRAPH_SNN)
      has_graph = knnwb_clustering_snn_graph(lists, c->weighting, c->knn.n_threads, &graph,
                                             &similarities, error);
    else
      has_graph = knnwb_graph_from_neighbors(lists, (KnnwbGraphMode)c->graph_kind, &graph,
                                             &distances, error);
    if (!has_graph)
      goto out;
    if (c->graph_kind != PYKNNWB_GRAPH_SNN &&
        !knnwb_clustering_similarity(&distances, c->similarity, &similarities, error))
      goto out;
  }
  if (c->kind == PYKNNWB_COMPONENTS) {
    if (!knnwb_clustering_components(&graph, &c->membership, NULL, NULL, error))
      goto out;
  } else if (!knnwb_clustering_community(&graph, &similarities, &c->community, &c->membership, NULL,
                                         error))
    goto out;
  ok = knnwb_clustering_modularity(&graph, &similarities, &c->membership, &c->modularity, error);
out:
  if (has_graph)
    igraph_destroy(&graph);
  knnwb_neighbors_free(lists);
  igraph_vector_destroy(&distances);
  igraph_vector_destroy(&similarities);
  return ok;
}

/* The exact MST of the points (lists of the library's default length unless k was given), cut by
 * height or by count. */
static gboolean pyknnwb_cluster_single_linkage(PyKnnwbCluster *c, GError **error)
{
  KnnwbMstOptions mst;
  knnwb_clustering_mst_options_init(&mst);
  mst.metric = c->knn.metric;
  mst.backend = c->knn.backend;
  mst.n_threads = c->knn.n_threads;
  mst.memory_bytes = c->knn.memory_bytes;
  mst.cancel = c->knn.cancel;
  if (c->knn.k)
    mst.k = c->knn.k;
  const size_t n = c->data->n_rows;
  KnnwbNeighbors *lists = NULL;
  if (n > 1 && !pyknnwb_cluster_lists(c, knnwb_clustering_mst_lists_k(&mst, n), &lists, error))
    return FALSE;
  mst.neighbors = lists;
  igraph_t tree;
  igraph_vector_t weights;
  gboolean ok = FALSE;
  if (!knnwb_error_from_igraph(igraph_vector_init(&weights, 0), "igraph_vector_init", error)) {
    knnwb_neighbors_free(lists);
    return FALSE;
  }
  if (knnwb_clustering_mst_points(c->data, &mst, &tree, &weights, error)) {
    if (c->height >= 0)
      ok = knnwb_clustering_cut_distance(&tree, &weights, c->height, &c->membership, NULL, error);
    else
      ok = knnwb_clustering_cut_count(&tree, &weights,
                                      (igraph_integer_t)MIN(c->n_clusters, (gint64)MAX(n, 1)),
                                      &c->membership, NULL, error);
    igraph_destroy(&tree);
  }
  igraph_vector_destroy(&weights);
  knnwb_neighbors_free(lists);
  return ok;
}

static gboolean pyknnwb_cluster_mstknn(PyKnnwbCluster *c, GError **error)
{
  KnnwbMstKnnOptions options;
  knnwb_clustering_mstknn_options_init(&options);
  options.metric = c->knn.metric;
  options.backend = c->knn.backend;
  options.n_threads = c->knn.n_threads;
  options.memory_bytes = c->knn.memory_bytes;
  options.cancel = c->knn.cancel;
  if (c->knn.k)
    options.list_k = c->knn.k;
  const size_t n = c->data->n_rows;
  KnnwbNeighbors *lists = NULL;
  if (n > 1 &&
      !pyknnwb_cluster_lists(c, knnwb_clustering_mstknn_lists_k(&options, n), &lists, error))
    return FALSE;
  options.neighbors = lists;
  gboolean ok =
      knnwb_clustering_mstknn_points(c->data, &options, &c->membership, NULL, NULL, error);
  knnwb_neighbors_free(lists);
  return ok;
}

static gboolean pyknnwb_cluster_run(PyKnnwbJob *job, GError **error)
{
  PyKnnwbCluster *c = job->data;
  switch (c->kind) {
  case PYKNNWB_MST_KNN:
    return pyknnwb_cluster_mstknn(c, error);
  case PYKNNWB_SINGLE_LINKAGE:
    return pyknnwb_cluster_single_linkage(c, error);
  default:
    return pyknnwb_cluster_graph(c, error);
  }
}

/* method, graph, snn_weight, similarity and objective names into c (ValueError otherwise). */
static gboolean pyknnwb_cluster_names(PyKnnwbCluster *c, const char *method, const char *graph,
                                      const char *snn_weight, const char *similarity,
                                      const char *objective)
{
  GError *error = NULL;
  if (strcmp(method, "mst-knn") == 0)
    c->kind = PYKNNWB_MST_KNN;
  else if (strcmp(method, "components") == 0)
    c->kind = PYKNNWB_COMPONENTS;
  else if (strcmp(method, "single-linkage") == 0)
    c->kind = PYKNNWB_SINGLE_LINKAGE;
  else if (knnwb_community_method_from_string(method, &c->community.method, NULL))
    c->kind = PYKNNWB_COMMUNITY;
  else {
    PyErr_Format(PyExc_ValueError,
                 "unknown method '%s' (expected leiden, louvain, walktrap, components, "
                 "mst-knn or single-linkage)",
                 method);
    return FALSE;
  }
  KnnwbGraphMode mode = KNNWB_GRAPH_UNION;
  if (strcmp(graph, "snn") == 0)
    c->graph_kind = PYKNNWB_GRAPH_SNN;
  else if (knnwb_graph_mode_from_string(graph, &mode, &error))
    c->graph_kind = (int)mode;
  else {
    g_clear_error(&error);
    PyErr_Format(PyExc_ValueError, "unknown graph '%s' (expected directed, union, mutual or snn)",
                 graph);
    return FALSE;
  }
  if (!knnwb_snn_weighting_from_string(snn_weight, &c->weighting, &error) ||
      !knnwb_similarity_from_string(similarity, &c->similarity, &error) ||
      !knnwb_community_objective_from_string(objective, &c->community.objective, &error)) {
    pyknnwb_raise(error);
    return FALSE;
  }
  return TRUE;
}

/* The checks the command makes on the cut and the community parameters. */
static gboolean pyknnwb_cluster_check(const PyKnnwbCluster *c)
{
  const char *problem = NULL;
  if (c->kind == PYKNNWB_SINGLE_LINKAGE && c->height >= 0 && c->n_clusters > 0)
    problem = "height and n_clusters: give one of them, not both";
  else if (c->kind == PYKNNWB_SINGLE_LINKAGE && c->height < 0 && c->n_clusters < 1)
    problem = "single-linkage needs height=H (cut at distance H) or n_clusters=N";
  else if (c->kind != PYKNNWB_SINGLE_LINKAGE && (c->height >= 0 || c->n_clusters > 0))
    problem = "height and n_clusters apply to method='single-linkage' only";
  else if (!(c->community.resolution > 0))
    problem = "resolution must be positive";
  else if (c->community.steps < 1)
    problem = "steps must be at least 1";
  if (problem)
    PyErr_SetString(PyExc_ValueError, problem);
  return problem == NULL;
}

PyObject *pyknnwb_cluster(PyObject *self, PyObject *args, PyObject *kwargs)
{
  (void)self;
  static char *keywords[] = {
      "data",    "method",     "k",          "metric",     "backend",   "screen",
      "threads", "memory",     "gpu_memory", "devices",    "progress",  "drop_degenerate",
      "graph",   "snn_weight", "similarity", "resolution", "objective", "seed",
      "steps",   "height",     "n_clusters", NULL};
  PyObject *data, *threads = Py_None, *memory = Py_None, *gpu_memory = Py_None;
  PyObject *devices = Py_None, *progress = Py_None;
  const char *method = "leiden", *metric = "pearson", *backend = "auto", *screen = "auto";
  const char *graph = "union", *snn_weight = "rank", *similarity = "inverse";
  const char *objective = "modularity";
  Py_ssize_t k = 0;
  int drop_degenerate = 0;
  PyKnnwbCluster c = {.height = -1, .modularity = NAN};
  knnwb_community_options_init(&c.community);
  long long seed = 42, steps = 4, n_clusters = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Os|nsssOOOOOpsssdsLLdL", keywords, &data, &method,
                                   &k, &metric, &backend, &screen, &threads, &memory, &gpu_memory,
                                   &devices, &progress, &drop_degenerate, &graph, &snn_weight,
                                   &similarity, &c.community.resolution, &objective, &seed, &steps,
                                   &c.height, &n_clusters))
    return NULL;
  c.community.seed = (guint64)seed;
  c.community.steps = steps;
  c.n_clusters = n_clusters;
  if (k < 0) {
    PyErr_Format(PyExc_ValueError, "k must be at least 1, not %zd", k);
    return NULL;
  }
  if (progress != Py_None && !PyCallable_Check(progress)) {
    PyErr_SetString(PyExc_TypeError, "progress must be None or a callable progress(done, total)");
    return NULL;
  }
  if (!pyknnwb_cluster_names(&c, method, graph, snn_weight, similarity, objective) ||
      !pyknnwb_cluster_check(&c))
    return NULL;
  g_autofree int *device_list = NULL;
  if (!pyknnwb_knn_options(&c.knn, metric, backend, screen, threads, memory, gpu_memory, devices,
                           drop_degenerate, &device_list))
    return NULL;
  c.knn.k = (size_t)k;
  GError *error = NULL;
  if (!knnwb_error_from_igraph(igraph_vector_int_init(&c.membership, 0), "igraph_vector_int_init",
                               &error)) {
    pyknnwb_raise(error);
    return NULL;
  }
  PyObject *out = NULL;
  if ((c.data = pyknnwb_matrix_borrow(data, "X")) == NULL)
    goto out;
  PyKnnwbJob job = {.run = pyknnwb_cluster_run, .data = &c};
  job.progress = progress == Py_None ? NULL : progress;
  c.knn.cancel = &job.cancel;
  /* Progress is recorded even without a callback: an interrupted call's note names the tile. */
  c.knn.progress = pyknnwb_job_progress;
  c.knn.progress_data = &job;
  if (!pyknnwb_job_execute(&job))
    goto out;
  npy_intp n = (npy_intp)igraph_vector_int_size(&c.membership);
  PyObject *membership = PyArray_SimpleNew(1, &n, NPY_INT64);
  if (membership == NULL)
    goto out;
  for (npy_intp i = 0; i < n; i++)
    ((int64_t *)PyArray_DATA((PyArrayObject *)membership))[i] = VECTOR(c.membership)[i];
  out = Py_BuildValue("(Nd)", membership, c.modularity);
out:
  igraph_vector_int_destroy(&c.membership);
  knnwb_matrix_free(c.data);
  return out;
}
