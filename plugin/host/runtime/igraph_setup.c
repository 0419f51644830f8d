/* igraph's process-wide settings, made once at start before any graph exists. */
#include <igraph.h>
#include "runtime/runtime.h"

/* igraph's default handler aborts the process. Ours, like igraph_error_handler_ignore, frees the
 * FINALLY stack and lets the error code travel back to the caller, which turns it into a GError
 * (knnwb_error_from_igraph); KNNWB_DEBUG_IGRAPH=1 also prints igraph's own reason. */
static void knnwb_host_igraph_error_handler(const char *reason, const char *file, int line,
                                            igraph_error_t code)
{
  (void)file;
  (void)line;
  IGRAPH_FINALLY_FREE();
  if (g_getenv("KNNWB_DEBUG_IGRAPH") != NULL)
    g_printerr("knnwb: igraph: %s (%s)\n", reason, igraph_strerror(code));
}

static void knnwb_host_igraph_warning_handler(const char *reason, const char *file, int line)
{
  (void)file;
  (void)line;
  g_printerr("knnwb: igraph warning: %s\n", reason);
}

void knnwb_host_igraph_init(void)
{
  static gboolean done;
  if (done)
    return;
  igraph_set_error_handler(knnwb_host_igraph_error_handler);
  igraph_set_warning_handler(knnwb_host_igraph_warning_handler);
  /* Must happen before any igraph_t exists: changing it later crashes igraph. */
  igraph_set_attribute_table(&igraph_cattribute_table);
  done = TRUE;
}
