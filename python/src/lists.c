/*
 * Neighbour lists from Python: knnwb_knn_self / knnwb_knn_query over the caller's float32 rows
 * (borrowed, never copied), the lists handed to NumPy without a copy, and the edges of the graph
 * the library builds from lists (knnwb_graph_edges_from_neighbors), for knnwb.graph.
 */
#include "pyknnwb.h"

typedef struct {
  KnnwbMatrix *data;
  KnnwbMatrix *reference; /* NULL: the self graph */
  KnnwbKnnOptions options;
  KnnwbNeighbors *result;
} PyKnnwbLists;

static gboolean pyknnwb_lists_run(PyKnnwbJob *job, GError **error)
{
  PyKnnwbLists *lists = job->data;
  if (lists->reference != NULL)
    return knnwb_knn_query(lists->data, lists->reference, &lists->options, &lists->result, error);
  return knnwb_knn_self(lists->data, &lists->options, &lists->result, error);
}

/* (indices, distances, backend_used) of a finished run; the arrays take the lists' buffers. */
static PyObject *pyknnwb_lists_result(KnnwbNeighbors *result)
{
  npy_intp rows = (npy_intp)result->n_queries, k = (npy_intp)result->k;
  PyObject *indices = pyknnwb_array_steal(result->indices, NPY_INT64, rows, k);
  result->indices = NULL;
  PyObject *distances = pyknnwb_array_steal(result->distances, NPY_FLOAT64, rows, k);
  result->distances = NULL;
  PyObject *tuple = NULL;
  if (indices != NULL && distances != NULL)
    tuple = Py_BuildValue("(OOs)", indices, distances, result->backend_used);
  Py_XDECREF(indices);
  Py_XDECREF(distances);
  return tuple;
}

PyObject *pyknnwb_kneighbors(PyObject *self, PyObject *args, PyObject *kwargs)
{
  (void)self;
  static char *keywords[] = {
      "data",   "k",          "reference", "metric",   "backend",         "screen", "threads",
      "memory", "gpu_memory", "devices",   "progress", "drop_degenerate", NULL};
  PyObject *data = NULL, *reference = Py_None, *threads = Py_None, *memory = Py_None;
  PyObject *gpu_memory = Py_None, *devices = Py_None, *progress = Py_None;
  Py_ssize_t k = 0;
  const char *metric = "pearson", *backend = "auto", *screen = "auto";
  int drop_degenerate = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "On|OsssOOOOOp", keywords, &data, &k, &reference,
                                   &metric, &backend, &screen, &threads, &memory, &gpu_memory,
                                   &devices, &progress, &drop_degenerate))
    return NULL;
  if (k < 1) {
    PyErr_Format(PyExc_ValueError, "k must be at least 1, not %zd", k);
    return NULL;
  }
  if (progress != Py_None && !PyCallable_Check(progress)) {
    PyErr_SetString(PyExc_TypeError, "progress must be None or a callable progress(done, total)");
    return NULL;
  }
  PyKnnwbLists lists = {0};
  g_autofree int *device_list = NULL;
  PyObject *out = NULL;
  if (!pyknnwb_knn_options(&lists.options, metric, backend, screen, threads, memory, gpu_memory,
                           devices, drop_degenerate, &device_list))
    return NULL;
  lists.options.k = (size_t)k;
  if ((lists.data = pyknnwb_matrix_borrow(data, "X")) == NULL)
    goto out;
  if (reference != Py_None &&
      (lists.reference = pyknnwb_matrix_borrow(reference, "reference")) == NULL)
    goto out;
  PyKnnwbJob job = {.run = pyknnwb_lists_run, .data = &lists};
  job.progress = progress == Py_None ? NULL : progress;
  lists.options.cancel = &job.cancel;
  /* Progress is recorded even without a callback: an interrupted call's note names the tile. */
  lists.options.progress = pyknnwb_job_progress;
  lists.options.progress_data = &job;
  if (pyknnwb_job_execute(&job))
    out = pyknnwb_lists_result(lists.result);
out:
  knnwb_neighbors_free(lists.result);
  knnwb_matrix_free(lists.data);
  knnwb_matrix_free(lists.reference);
  return out;
}

/* A 2-D C-contiguous array of type, n x k (k from the first), or NULL with ValueError. */
static PyArrayObject *pyknnwb_lists_array(PyObject *object, int type, const char *what)
{
  PyArrayObject *array = (PyArrayObject *)PyArray_FROMANY(
      object, type, 2, 2, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
  if (array == NULL)
    PyErr_Format(PyExc_ValueError, "%s must be a 2-D array (rows x k)", what);
  return array;
}

/* The edges as NumPy arrays: an m x 2 int64 array and m distances. */
static PyObject *pyknnwb_edges_result(const igraph_vector_int_t *edges,
                                      const igraph_vector_t *weights)
{
  npy_intp m = (npy_intp)igraph_vector_size(weights);
  npy_intp shape[2] = {m, 2};
  PyObject *pairs = PyArray_SimpleNew(2, shape, NPY_INT64);
  PyObject *distances = PyArray_SimpleNew(1, shape, NPY_FLOAT64);
  PyObject *tuple = NULL;
  if (pairs != NULL && distances != NULL) {
    int64_t *to = PyArray_DATA((PyArrayObject *)pairs);
    for (npy_intp e = 0; e < 2 * m; e++)
      to[e] = (int64_t)VECTOR(*edges)[e];
    if (m > 0)
      memcpy(PyArray_DATA((PyArrayObject *)distances), VECTOR(*weights),
             (size_t)m * sizeof(double));
    tuple = Py_BuildValue("(OO)", pairs, distances);
  }
  Py_XDECREF(pairs);
  Py_XDECREF(distances);
  return tuple;
}

PyObject *pyknnwb_graph_edges(PyObject *self, PyObject *args, PyObject *kwargs)
{
  (void)self;
  static char *keywords[] = {"indices", "distances", "mode", NULL};
  PyObject *indices_object, *distances_object;
  const char *mode_name = "union";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|s", keywords, &indices_object,
                                   &distances_object, &mode_name))
    return NULL;
  KnnwbGraphMode mode;
  GError *error = NULL;
  if (!knnwb_graph_mode_from_string(mode_name, &mode, &error)) {
    pyknnwb_raise(error);
    return NULL;
  }
  PyArrayObject *indices = pyknnwb_lists_array(indices_object, NPY_INT64, "indices");
  PyArrayObject *distances =
      indices ? pyknnwb_lists_array(distances_object, NPY_FLOAT64, "distances") : NULL;
  PyObject *out = NULL;
  int32_t *found = NULL;
  igraph_vector_int_t edges;
  igraph_vector_t weights;
  gboolean vectors = FALSE;
  if (distances == NULL)
    goto out;
  const npy_intp n = PyArray_DIM(indices, 0), k = PyArray_DIM(indices, 1);
  if (PyArray_DIM(distances, 0) != n || PyArray_DIM(distances, 1) != k) {
    PyErr_SetString(PyExc_ValueError, "indices and distances must have the same shape");
    goto out;
  }
  const int64_t *index = PyArray_DATA(indices);
  found = g_new0(int32_t, (gsize)MAX(n, 1));
  for (npy_intp i = 0; i < n; i++)
    for (npy_intp r = 0; r < k; r++) {
      if (index[i * k + r] < -1 || index[i * k + r] >= n || index[i * k + r] == i) {
        PyErr_Format(PyExc_ValueError,
                     "indices[%zd, %zd] = %lld: not another row of %zd (-1 for no neighbour)",
                     (Py_ssize_t)i, (Py_ssize_t)r, (long long)index[i * k + r], (Py_ssize_t)n);
        goto out;
      }
      found[i] += index[i * k + r] >= 0;
    }
  KnnwbNeighbors lists = {.n_queries = (size_t)n,
                          .k = (size_t)k,
                          .indices = (int64_t *)index,
                          .distances = PyArray_DATA(distances),
                          .n_found = found};
  if (!knnwb_error_from_igraph(igraph_vector_int_init(&edges, 0), "igraph_vector_int_init",
                               &error)) {
    pyknnwb_raise(error);
    goto out;
  }
  if (!knnwb_error_from_igraph(igraph_vector_init(&weights, 0), "igraph_vector_init", &error)) {
    igraph_vector_int_destroy(&edges);
    pyknnwb_raise(error);
    goto out;
  }
  vectors = TRUE;
  if (!knnwb_graph_edges_from_neighbors(&lists, mode, &edges, &weights, &error)) {
    pyknnwb_raise(error);
    goto out;
  }
  out = pyknnwb_edges_result(&edges, &weights);
out:
  if (vectors) {
    igraph_vector_int_destroy(&edges);
    igraph_vector_destroy(&weights);
  }
  g_free(found);
  Py_XDECREF(indices);
  Py_XDECREF(distances);
  return out;
}
