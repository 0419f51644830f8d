/*
 * Library calls off the interpreter's thread. Python runs signal handlers only on its main thread
 * and only between bytecodes, so a long C call that merely released the GIL could not be
 * interrupted: the call runs on a thread of its own instead, and the caller waits in slices of a
 * tenth of a second, taking the GIL back briefly to run the handlers (PyErr_CheckSignals) and the
 * progress callback. A Ctrl-C sets the flag the library polls (KnnwbKnnOptions.cancel), and the
 * caller waits for the library to stop before it raises, so no thread outlives the call's data.
 */
#include "pyknnwb.h"

/* Jobs running: outside them, GLib's handler prints as usual (another GLib user's lines in this
 * process are not the library's). */
static gint pyknnwb_log_jobs;

void pyknnwb_job_progress(uint64_t done, uint64_t total, void *data)
{
  PyKnnwbJob *job = data;
  __atomic_store_n(&job->done, done, __ATOMIC_RELAXED);
  __atomic_store_n(&job->total, total, __ATOMIC_RELAXED);
}

static gpointer pyknnwb_job_thread(gpointer data)
{
  PyKnnwbJob *job = data;
  GError *error = NULL;
  gboolean ok = job->run(job, &error);
  g_mutex_lock(&job->lock);
  job->ok = ok;
  job->error = error;
  job->finished = TRUE;
  g_cond_signal(&job->finished_cond);
  g_mutex_unlock(&job->lock);
  return NULL;
}

/* Signals, warnings and progress, with the GIL held. FALSE once an exception is set (the job is
 * then told to stop; the exception stays set). */
static gboolean pyknnwb_job_poll(PyKnnwbJob *job, gint64 *reported_done, gint64 *reported_total)
{
  if (PyErr_CheckSignals() != 0 || !pyknnwb_log_flush())
    return FALSE;
  if (job->progress == NULL)
    return TRUE;
  gint64 done = (gint64)__atomic_load_n(&job->done, __ATOMIC_RELAXED);
  gint64 total = (gint64)__atomic_load_n(&job->total, __ATOMIC_RELAXED);
  if (done == *reported_done && total == *reported_total)
    return TRUE;
  *reported_done = done;
  *reported_total = total;
  PyObject *result = PyObject_CallFunction(job->progress, "LL", (long long)done, (long long)total);
  if (result == NULL)
    return FALSE;
  Py_DECREF(result);
  return TRUE;
}

/* Adds "knnwb: the call stopped early (at tile D of T)" (or that it had finished) to the
 * exception being raised, as a note (Python 3.11 and later; nothing on older versions). */
static void pyknnwb_job_note(PyKnnwbJob *job, gboolean stopped)
{
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  guint64 done = __atomic_load_n(&job->done, __ATOMIC_RELAXED);
  guint64 total = __atomic_load_n(&job->total, __ATOMIC_RELAXED);
  char *note = !stopped ? g_strdup("knnwb: the call had finished when it was interrupted")
               : total > 0
                   ? g_strdup_printf("knnwb: the call stopped early (at tile %" G_GUINT64_FORMAT
                                     " of %" G_GUINT64_FORMAT ")",
                                     done, total)
                   : g_strdup("knnwb: the call stopped early");
  if (value != NULL && PyObject_HasAttrString(value, "add_note")) {
    PyObject *result = PyObject_CallMethod(value, "add_note", "s", note);
    Py_XDECREF(result);
    PyErr_Clear();
  }
  g_free(note);
  PyErr_Restore(type, value, traceback);
}

gboolean pyknnwb_job_execute(PyKnnwbJob *job)
{
  g_mutex_init(&job->lock);
  g_cond_init(&job->finished_cond);
  job->finished = FALSE;
  job->error = NULL;
  gint64 reported_done = -1, reported_total = -1;
  gboolean interrupted = FALSE;
  g_atomic_int_inc(&pyknnwb_log_jobs);
  GThread *thread = g_thread_try_new("knnwb-python", pyknnwb_job_thread, job, NULL);
  if (thread == NULL) {
    /* No thread to spare: run here, without Ctrl-C, still without the GIL. */
    PyThreadState *state = PyEval_SaveThread();
    pyknnwb_job_thread(job);
    PyEval_RestoreThread(state);
  } else {
    g_mutex_lock(&job->lock);
    while (!job->finished) {
      PyThreadState *state = PyEval_SaveThread();
      gint64 until = g_get_monotonic_time() + G_TIME_SPAN_MILLISECOND * 100;
      while (!job->finished && g_cond_wait_until(&job->finished_cond, &job->lock, until))
        ;
      gboolean finished = job->finished;
      g_mutex_unlock(&job->lock);
      PyEval_RestoreThread(state);
      if (!finished && !interrupted && !pyknnwb_job_poll(job, &reported_done, &reported_total)) {
        interrupted = TRUE; /* keep the exception; wait for the library to notice */
        g_atomic_int_set(&job->cancel, 1);
      }
      g_mutex_lock(&job->lock);
    }
    g_mutex_unlock(&job->lock);
    g_thread_join(thread);
  }
  g_atomic_int_dec_and_test(&pyknnwb_log_jobs);
  GError *error = job->error;
  gboolean ok = job->ok;
  g_mutex_clear(&job->lock);
  g_cond_clear(&job->finished_cond);
  if (interrupted) {
    /* The Python exception (KeyboardInterrupt, the callback's) says why the call stopped; a note
     * says whether the library stopped early or had finished before it noticed. */
    gboolean stopped = !ok && g_error_matches(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
    g_clear_error(&error);
    pyknnwb_job_note(job, stopped);
    return FALSE;
  }
  if (!pyknnwb_log_flush()) {
    g_clear_error(&error);
    return FALSE;
  }
  if (!ok) {
    pyknnwb_raise(error);
    return FALSE;
  }
  g_clear_error(&error);
  if (job->progress != NULL && !pyknnwb_job_poll(job, &reported_done, &reported_total)) {
    pyknnwb_job_note(job, FALSE);
    return FALSE;
  }
  return TRUE;
}

void pyknnwb_raise(GError *error)
{
  PyObject *type = PyExc_RuntimeError;
  if (error == NULL) {
    PyErr_SetString(type, "knnwb: the call failed without a message");
    return;
  }
  if (error->domain == KNNWB_ERROR) {
    switch ((KnnwbError)error->code) {
    case KNNWB_ERROR_INVALID_ARGUMENT:
    case KNNWB_ERROR_INVALID_DATA:
    case KNNWB_ERROR_PARSE:
      type = PyExc_ValueError;
      break;
    case KNNWB_ERROR_NO_MEMORY:
      type = PyExc_MemoryError;
      break;
    case KNNWB_ERROR_CANCELLED:
      type = PyExc_KeyboardInterrupt;
      break;
    case KNNWB_ERROR_IO:
      type = PyExc_OSError;
      break;
    default:
      type = PyExc_RuntimeError;
    }
  }
  PyErr_SetString(type, error->message);
  g_error_free(error);
}

/* ---------------------------------------------------------------------------------------------- */
/* GLib log lines of the library (warnings such as "rows left out", the CPU fallback notice) become
 * Python warnings, emitted on the interpreter's thread: the library logs from its own threads. */

static GMutex pyknnwb_log_lock;
static GPtrArray *pyknnwb_log_queue; /* char *, under pyknnwb_log_lock */

static void pyknnwb_log_handler(const gchar *domain, GLogLevelFlags level, const gchar *message,
                                gpointer data)
{
  (void)data;
  if ((level & (G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE)) == 0 ||
      g_atomic_int_get(&pyknnwb_log_jobs) == 0) {
    g_log_default_handler(domain, level, message, NULL);
    return;
  }
  g_mutex_lock(&pyknnwb_log_lock);
  g_ptr_array_add(pyknnwb_log_queue, g_strdup(message));
  g_mutex_unlock(&pyknnwb_log_lock);
}

void pyknnwb_log_install(void)
{
  pyknnwb_log_queue = g_ptr_array_new_with_free_func(g_free);
  const GLogLevelFlags levels = G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE;
  g_log_set_handler("knnwb", levels, pyknnwb_log_handler, NULL);
  g_log_set_handler(NULL, levels, pyknnwb_log_handler, NULL);
}

gboolean pyknnwb_log_flush(void)
{
  g_mutex_lock(&pyknnwb_log_lock);
  GPtrArray *lines = pyknnwb_log_queue;
  if (lines->len == 0) {
    g_mutex_unlock(&pyknnwb_log_lock);
    return TRUE;
  }
  pyknnwb_log_queue = g_ptr_array_new_with_free_func(g_free);
  g_mutex_unlock(&pyknnwb_log_lock);
  gboolean ok = TRUE;
  PyObject *category = PyExc_UserWarning;
  PyObject *module = PyImport_ImportModule("knnwb");
  PyObject *own = module ? PyObject_GetAttrString(module, "KnnwbWarning") : NULL;
  if (own != NULL && PyType_Check(own))
    category = own;
  PyErr_Clear();
  for (guint i = 0; ok && i < lines->len; i++)
    ok = PyErr_WarnEx(category, g_ptr_array_index(lines, i), 2) == 0;
  Py_XDECREF(own);
  Py_XDECREF(module);
  g_ptr_array_free(lines, TRUE);
  return ok;
}
