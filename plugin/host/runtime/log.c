/* How the host shows the library's log messages: "knnwb: warning: ..." and "knnwb: ..." lines
 * without GLib's timestamps and PIDs; notices are silenced by --quiet, warnings never; debug
 * messages keep GLib's default handling (G_MESSAGES_DEBUG). */
#include <stdio.h>
#include <string.h>
#include "runtime/runtime.h"

static gboolean knnwb_host_log_quiet;
static const KnnwbKnnGroup *knnwb_host_job_group;

void knnwb_host_set_group(const KnnwbKnnGroup *group)
{
  knnwb_host_job_group = group;
}

const KnnwbKnnGroup *knnwb_host_group(void)
{
  return knnwb_host_job_group;
}

gboolean knnwb_host_speaks(void)
{
  return knnwb_host_job_group == NULL || knnwb_host_job_group->rank == 0;
}

static GLogWriterOutput knnwb_host_log_write(GLogLevelFlags level, const GLogField *fields,
                                             gsize n_fields, gpointer user_data)
{
  (void)user_data;
  if (level & G_LOG_LEVEL_DEBUG)
    return g_log_writer_default(level, fields, n_fields, NULL);
  const char *message = NULL;
  for (gsize i = 0; i < n_fields; i++)
    if (strcmp(fields[i].key, "MESSAGE") == 0)
      message = fields[i].value;
  if (message == NULL)
    return G_LOG_WRITER_UNHANDLED;
  if (!knnwb_host_speaks())
    return G_LOG_WRITER_HANDLED; /* every rank runs the same steps: rank 0 says it once */
  /* Library messages often start with "knnwb: " already. */
  if (g_str_has_prefix(message, "knnwb: "))
    message += strlen("knnwb: ");
  knnwb_host_progress_clear();
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING)) {
    fprintf(stderr, "knnwb: warning: %s\n", message);
  } else if (!knnwb_host_log_quiet) {
    fprintf(stderr, "knnwb: %s\n", message);
  }
  fflush(stderr);
  return G_LOG_WRITER_HANDLED;
}

/* g_print and g_printerr (results on stdout, the pipeline's step lines on stderr): the progress
 * line goes first, so that nothing is printed onto its end. */
static void knnwb_host_print_out(const char *text)
{
  knnwb_host_progress_clear();
  fputs(text, stdout);
  fflush(stdout);
}

static void knnwb_host_print_err(const char *text)
{
  knnwb_host_progress_clear();
  fputs(text, stderr);
  fflush(stderr);
}

void knnwb_host_log_init(void)
{
  g_log_set_writer_func(knnwb_host_log_write, NULL, NULL);
  g_set_print_handler(knnwb_host_print_out);
  g_set_printerr_handler(knnwb_host_print_err);
}

void knnwb_host_log_set_quiet(gboolean quiet)
{
  knnwb_host_log_quiet = quiet;
}

void knnwb_host_print_error(const GError *error)
{
  if (knnwb_host_speaks()) {
    g_printerr("knnwb: %s\n", error->message);
  }
}
