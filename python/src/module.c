/*
 * The knnwb._knnwb extension module: its function table, and the conversions between Python
 * values and the library's options and matrices that every function shares. The public Python API
 * (knnwb/__init__.py) checks and converts user input; these functions take it ready (C-contiguous
 * float32 rows) and never copy the rows.
 */
#define PYKNNWB_MODULE_FILE
#include "pyknnwb.h"

/* Each parser reports the library's own message ("unknown metric 'x' (expected ...)"). */
#define PYKNNWB_PARSER(name, type, parse)                                                          \
  gboolean name(const char *text, type *value)                                                     \
  {                                                                                                \
    GError *error = NULL;                                                                          \
    if (parse(text, value, &error))                                                                \
      return TRUE;                                                                                 \
    pyknnwb_raise(error);                                                                          \
    return FALSE;                                                                                  \
  }
PYKNNWB_PARSER(pyknnwb_metric, KnnwbMetric, knnwb_metric_from_string)
PYKNNWB_PARSER(pyknnwb_backend, KnnwbBackend, knnwb_backend_from_string)
PYKNNWB_PARSER(pyknnwb_screen, KnnwbScreen, knnwb_screen_from_string)

/* devices: None or a sequence of GPU ordinals, into a new int array. */
static gboolean pyknnwb_devices(PyObject *devices, int **out, int *count)
{
  *out = NULL;
  *count = 0;
  if (devices == NULL || devices == Py_None)
    return TRUE;
  PyObject *sequence =
      PySequence_Fast(devices, "devices must be None or a sequence of GPU numbers");
  if (sequence == NULL)
    return FALSE;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(sequence);
  if (n == 0 || n > 4096) {
    Py_DECREF(sequence);
    PyErr_SetString(PyExc_ValueError, "devices: give at least one GPU number (or None for all)");
    return FALSE;
  }
  int *list = g_new(int, (gsize)n);
  for (Py_ssize_t i = 0; i < n; i++) {
    long value = PyLong_AsLong(PySequence_Fast_GET_ITEM(sequence, i));
    if ((value == -1 && PyErr_Occurred()) || value < 0 || value > G_MAXINT) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "devices: %ld is not a GPU number (0, 1, ...)", value);
      g_free(list);
      Py_DECREF(sequence);
      return FALSE;
    }
    list[i] = (int)value;
  }
  Py_DECREF(sequence);
  *out = list;
  *count = (int)n;
  return TRUE;
}

/* A byte budget: None keeps *bytes (the library's default); a positive integer otherwise. */
static gboolean pyknnwb_bytes(PyObject *value, size_t *bytes, const char *what)
{
  if (value == NULL || value == Py_None)
    return TRUE;
  long long n = PyLong_AsLongLong(value);
  if (n == -1 && PyErr_Occurred())
    return FALSE;
  if (n < 1) {
    PyErr_Format(PyExc_ValueError, "%s must be None (the default) or a number of bytes, not %lld",
                 what, n);
    return FALSE;
  }
  *bytes = (size_t)MIN((unsigned long long)n, (unsigned long long)SIZE_MAX);
  return TRUE;
}

gboolean pyknnwb_knn_options(KnnwbKnnOptions *options, const char *metric, const char *backend,
                             const char *screen, PyObject *threads, PyObject *memory,
                             PyObject *gpu_memory, PyObject *devices, int drop_degenerate,
                             int **devices_out)
{
  knnwb_knn_options_init(options);
  *devices_out = NULL;
  if ((metric && !pyknnwb_metric(metric, &options->metric)) ||
      (backend && !pyknnwb_backend(backend, &options->backend)) ||
      (screen && !pyknnwb_screen(screen, &options->screen)))
    return FALSE;
  if (threads != NULL && threads != Py_None) {
    long n = PyLong_AsLong(threads);
    if (n == -1 && PyErr_Occurred())
      return FALSE;
    if (n < 0 || n > KNNWB_THREADS_MAX) {
      PyErr_Format(PyExc_ValueError, "threads must be None (every core) or 0 to %d, not %ld",
                   KNNWB_THREADS_MAX, n);
      return FALSE;
    }
    options->n_threads = (int)n;
  }
  if (!pyknnwb_bytes(memory, &options->memory_bytes, "memory") ||
      !pyknnwb_bytes(gpu_memory, &options->gpu_memory_bytes, "gpu_memory"))
    return FALSE;
  options->drop_degenerate = drop_degenerate != 0;
  if (!pyknnwb_devices(devices, devices_out, &options->n_devices))
    return FALSE;
  options->devices = *devices_out;
  return TRUE;
}

KnnwbMatrix *pyknnwb_matrix_borrow(PyObject *object, const char *what)
{
  if (!PyArray_Check(object)) {
    PyErr_Format(PyExc_TypeError, "%s must be a NumPy array", what);
    return NULL;
  }
  PyArrayObject *array = (PyArrayObject *)object;
  if (PyArray_NDIM(array) != 2 || PyArray_TYPE(array) != NPY_FLOAT32 ||
      !PyArray_IS_C_CONTIGUOUS(array) || !PyArray_ISALIGNED(array) ||
      !PyArray_ISNOTSWAPPED(array)) {
    PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous 2-D float32 array (native order)",
                 what);
    return NULL;
  }
  npy_intp *shape = PyArray_DIMS(array);
  return knnwb_matrix_new_wrapped((size_t)shape[0], (size_t)shape[1], PyArray_DATA(array), NULL,
                                  NULL);
}

static void pyknnwb_capsule_free(PyObject *capsule)
{
  g_free(PyCapsule_GetPointer(capsule, "knnwb.buffer"));
}

PyObject *pyknnwb_array_steal(void *data, int type, npy_intp rows, npy_intp cols)
{
  npy_intp shape[2] = {rows, cols};
  if (data == NULL) /* no rows: g_malloc(0) gave NULL */
    return PyArray_ZEROS(2, shape, type, 0);
  PyObject *capsule = PyCapsule_New(data, "knnwb.buffer", pyknnwb_capsule_free);
  if (capsule == NULL) {
    g_free(data);
    return NULL;
  }
  PyObject *array = PyArray_SimpleNewFromData(2, shape, type, data);
  if (array == NULL) {
    Py_DECREF(capsule);
    return NULL;
  }
  if (PyArray_SetBaseObject((PyArrayObject *)array, capsule) != 0) {
    Py_DECREF(array); /* the capsule reference was stolen even on failure */
    return NULL;
  }
  return array;
}

static PyObject *pyknnwb_cuda_devices(PyObject *self, PyObject *unused)
{
  (void)self;
  (void)unused;
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.backend = KNNWB_BACKEND_AUTO;
  return PyBool_FromLong(knnwb_knn_uses_gpu(&options));
}

static PyMethodDef pyknnwb_methods[] = {
    {"kneighbors", (PyCFunction)(void (*)(void))pyknnwb_kneighbors, METH_VARARGS | METH_KEYWORDS,
     "kneighbors(data, k, reference=None, metric, backend, screen, threads, memory, devices, "
     "drop_degenerate, progress) -> (indices, distances, backend_used)"},
    {"graph_edges", (PyCFunction)(void (*)(void))pyknnwb_graph_edges, METH_VARARGS | METH_KEYWORDS,
     "graph_edges(indices, distances, mode) -> (edges m x 2 int64, distances float64)"},
    {"cluster", (PyCFunction)(void (*)(void))pyknnwb_cluster, METH_VARARGS | METH_KEYWORDS,
     "cluster(data, method, ...) -> (membership int64, modularity)"},
    {"gpu_usable", pyknnwb_cuda_devices, METH_NOARGS,
     "Whether the auto backend would compute on GPUs (built with CUDA and a GPU is usable)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef pyknnwb_module = {PyModuleDef_HEAD_INIT,
                                            "_knnwb",
                                            "The knnwb C library (use the knnwb package).",
                                            -1,
                                            pyknnwb_methods,
                                            NULL,
                                            NULL,
                                            NULL,
                                            NULL};

PyMODINIT_FUNC PyInit__knnwb(void)
{
  import_array();
  /* igraph aborts the process on an error by default; the library checks every status. */
  igraph_set_error_handler(igraph_error_handler_ignore);
  igraph_set_warning_handler(igraph_warning_handler_ignore);
  pyknnwb_log_install();
  PyObject *module = PyModule_Create(&pyknnwb_module);
  if (module == NULL)
    return NULL;
  if (PyModule_AddStringConstant(module, "version", KNNWB_VERSION_STRING) != 0) {
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
