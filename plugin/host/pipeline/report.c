/* The problems of one pipeline load, each "file:line: message" (or, for a pipeline built in
 * code, "source: option: message"), collected so that all of them
 * are reported together (the first KNNWB_PIPELINE_MAX_MESSAGES, then a count). */
#include <stdarg.h>
#include "pipeline/pipeline_internal.h"

void knnwb_pipeline_report(KnnwbPipelineDiagnostics *diagnostics, int line, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  diagnostics->n_errors++;
  /* A generated pipeline can have a problem on each of its many lines; the first ones suffice. */
  if (diagnostics->n_errors > KNNWB_PIPELINE_MAX_MESSAGES)
    return;
  if (diagnostics->messages->len > 0)
    g_string_append_c(diagnostics->messages, '\n');
  if (diagnostics->places != NULL) {
    const char *place = knnwb_pipeline_place(diagnostics->places, line);
    if (diagnostics->path != NULL)
      g_string_append_printf(diagnostics->messages, "%s: ", diagnostics->path);
    if (place != NULL)
      g_string_append_printf(diagnostics->messages, "%s: ", place);
    g_string_append(diagnostics->messages, message);
  } else if (line > 0)
    g_string_append_printf(diagnostics->messages, "%s:%d: %s", diagnostics->path, line, message);
  else
    g_string_append_printf(diagnostics->messages, "%s: %s", diagnostics->path, message);
}

const char *knnwb_pipeline_place(const GPtrArray *places, int line)
{
  if (places == NULL || line <= 0 || (guint)line > places->len)
    return NULL;
  const char *place = places->pdata[line - 1];
  return *place != '\0' ? place : NULL;
}

char *knnwb_pipeline_messages(KnnwbPipelineDiagnostics *diagnostics)
{
  if (diagnostics->n_errors > KNNWB_PIPELINE_MAX_MESSAGES)
    g_string_append_printf(diagnostics->messages, "\n%s%s... and %u more problems",
                           diagnostics->path ? diagnostics->path : "",
                           diagnostics->path ? ": " : "",
                           diagnostics->n_errors - KNNWB_PIPELINE_MAX_MESSAGES);
  return g_string_free(diagnostics->messages, FALSE);
}
