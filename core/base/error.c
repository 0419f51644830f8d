/* The knnwb error domain and the igraph-to-GError bridge. */
#include <igraph.h>
#include <knnwb/error.h>

G_DEFINE_QUARK(knnwb - error - quark, knnwb_error)

gboolean knnwb_error_from_igraph(int code, const char *what, GError **error)
{
  if (code == IGRAPH_SUCCESS)
    return TRUE;
  /* IGRAPH_INTERRUPTED comes from the host's interruption handler: a signal, not a failure. */
  int knnwb_code = code == IGRAPH_ENOMEM        ? KNNWB_ERROR_NO_MEMORY
                   : code == IGRAPH_INTERRUPTED ? KNNWB_ERROR_CANCELLED
                                                : KNNWB_ERROR_IGRAPH;
  if (knnwb_code == KNNWB_ERROR_CANCELLED) {
    g_set_error(error, KNNWB_ERROR, knnwb_code, "%s: interrupted", what);
    return FALSE;
  }
  g_set_error(error, KNNWB_ERROR, knnwb_code, "%s failed: %s", what, igraph_strerror(code));
  return FALSE;
}

static void *knnwb_try_array(size_t count, size_t size, gboolean zeroed, const char *what,
                             size_t rows, GError **error)
{
  size_t bytes = 0;
  void *block = NULL;
  if (knnwb_size_multiply(MAX(count, 1), size, &bytes))
    block = zeroed ? g_try_malloc0(MAX(bytes, 1)) : g_try_malloc(MAX(bytes, 1));
  if (block == NULL) {
    if (bytes == 0)
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "cannot allocate %s for %zu rows (%zu x %zu bytes overflows)", what, rows, count,
                  size);
    else
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "cannot allocate %s for %zu rows (%.1f MiB)", what, rows,
                  (double)bytes / (1024.0 * 1024.0));
  }
  return block;
}

void *knnwb_try_new_array(size_t count, size_t size, const char *what, size_t rows, GError **error)
{
  return knnwb_try_array(count, size, FALSE, what, rows, error);
}

void *knnwb_try_new0_array(size_t count, size_t size, const char *what, size_t rows, GError **error)
{
  return knnwb_try_array(count, size, TRUE, what, rows, error);
}
