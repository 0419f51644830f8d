/* The knnwb error domain and the igraph-to-GError bridge. */
#include <igraph.h>
#include <knnwb/error.h>

G_DEFINE_QUARK(knnwb-error-quark, knnwb_error)

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
