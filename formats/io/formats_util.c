/* Small helpers shared by the readers and writers: parse-error messages, fields quoted for
 * messages, TSV fields. */
#include "io.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

void knnwb_formats_parse_error(GError **error, const char *path, size_t line, size_t column,
                               const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  if (column > 0)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%zu:%zu: %s", path, line, column,
                message);
  else
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%zu: %s", path, line, message);
}

char *knnwb_formats_quote_field(const char *p, size_t length)
{
  GString *out = g_string_new("'");
  size_t shown = MIN(length, 40);
  for (size_t i = 0; i < shown; i++) {
    unsigned char c = (unsigned char)p[i];
    if (c == '\0')
      g_string_append(out, "\\0");
    else if (c < 0x20 || c == 0x7f)
      g_string_append_printf(out, "\\x%02x", c);
    else
      g_string_append_c(out, (char)c);
  }
  if (shown < length)
    g_string_append(out, "...");
  g_string_append_c(out, '\'');
  return g_string_free(out, FALSE);
}

void knnwb_formats_write_tsv_field(FILE *stream, const char *s)
{
  if (strpbrk(s, "\t\"\r\n") == NULL) {
    fputs(s, stream);
    return;
  }
  putc('"', stream);
  for (const char *c = s; *c != '\0'; c++) {
    if (*c == '"')
      putc('"', stream);
    putc(*c, stream);
  }
  putc('"', stream);
}
