/* The knnwb error domain and the igraph-to-GError bridge. */
#include <igraph.h>
#include <knnwb/error.h>

G_DEFINE_QUARK(knnwb-error-quark, knnwb_error)

gboolean knnwb_error_from_igraph(int code, const char *what, GError **error)
{
  if (code == IGRAPH_SUCCESS)
    return TRUE;
  int knnwb_code = code == IGRAPH_ENOMEM ? KNNWB_ERROR_NO_MEMORY : KNNWB_ERROR_IGRAPH;
  g_set_error(error, KNNWB_ERROR, knnwb_code, "%s failed: %s", what, igraph_strerror(code));
  return FALSE;
}
