/*
 * What the files of the knnwb Python extension share: running a library call off the interpreter's
 * thread (so Ctrl-C and progress callbacks work while the GIL is released), turning a GError into
 * a Python exception, and the argument conversions.
 */
#ifndef PYKNNWB_H
#define PYKNNWB_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL knnwb_python_ARRAY_API
#ifndef PYKNNWB_MODULE_FILE
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <knnwb/knnwb.h>

/**
 * One library call run on a thread of its own while the calling thread, GIL released, wakes every
 * tenth of a second to run Python's signal handlers (Ctrl-C sets cancel, which the library polls)
 * and the progress callback. run(job) returns FALSE with job->error set on failure.
 */
typedef struct PyKnnwbJob PyKnnwbJob;
struct PyKnnwbJob {
  gboolean (*run)(PyKnnwbJob *job, GError **error);
  void *data;           /**< the call's own arguments and results */
  PyObject *progress;   /**< a callable progress(done, total), or NULL */
  volatile gint cancel; /**< set on Ctrl-C (or when progress raised); the library polls it */
  guint64 done;         /**< latest progress, written by the library's callback (atomics) */
  guint64 total;
  /*< private >*/
  GMutex lock;
  GCond finished_cond;
  gboolean finished;
  gboolean ok;
  GError *error;
};

/** The KnnwbProgressFunc that records (done, total) in the job given as data. */
void pyknnwb_job_progress(uint64_t done, uint64_t total, void *data);

/**
 * Runs job->run on a new thread and waits with the GIL released, handling signals and progress
 * from the calling thread. Must be called with the GIL held. Returns TRUE on success; otherwise
 * a Python exception is set: KeyboardInterrupt (or whatever the signal handler raised) after a
 * Ctrl-C, the progress callback's exception, or the library's error (pyknnwb_raise).
 */
gboolean pyknnwb_job_execute(PyKnnwbJob *job);

/** Sets the Python exception for a knnwb GError (consumed): ValueError for bad arguments and
 * data, MemoryError, KeyboardInterrupt for a cancelled call, OSError for I/O, RuntimeError for
 * the rest; the message is the library's. */
void pyknnwb_raise(GError *error);

/** Sends GLib warnings and messages of the library to Python's warnings module while a job runs
 * (installed once at import). */
void pyknnwb_log_install(void);

/** Emits the warnings the library logged since the last call, from the interpreter's thread.
 * Returns FALSE when a warning filter turned one into an exception (set). */
gboolean pyknnwb_log_flush(void);

/** Parses a metric/backend/screen name into *value with table's parser; ValueError otherwise. */
gboolean pyknnwb_metric(const char *name, KnnwbMetric *metric);
gboolean pyknnwb_backend(const char *name, KnnwbBackend *backend);
gboolean pyknnwb_screen(const char *name, KnnwbScreen *screen);

/**
 * The options every search takes from Python keywords: metric, backend, screen, threads (None or
 * >= 0), memory and gpu_memory (bytes, None = default), devices (None or a sequence of ints, copied
 * into *devices, which the caller frees with g_free), drop_degenerate. ValueError/TypeError on bad
 * values.
 */
gboolean pyknnwb_knn_options(KnnwbKnnOptions *options, const char *metric, const char *backend,
                             const char *screen, PyObject *threads, PyObject *memory,
                             PyObject *gpu_memory, PyObject *devices, int drop_degenerate,
                             int **devices_out);

/** A borrowed KnnwbMatrix over a C-contiguous 2-D float32 array (no copy); NULL with TypeError or
 * ValueError when array is something else. Free with knnwb_matrix_free (the values stay the
 * array's). */
KnnwbMatrix *pyknnwb_matrix_borrow(PyObject *array, const char *what);

/** A new NumPy array taking ownership of g_malloc'd memory (freed with g_free when the array
 * goes); NULL with an exception set (data is then freed). */
PyObject *pyknnwb_array_steal(void *data, int type, npy_intp rows, npy_intp cols);

/* The module's functions (lists.c, cluster.c). */
PyObject *pyknnwb_kneighbors(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *pyknnwb_graph_edges(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *pyknnwb_cluster(PyObject *self, PyObject *args, PyObject *kwargs);

#endif
