/* Byte sizes on the command line and in pipelines: "4G", "512M", "1.5GiB". */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include "runtime/runtime.h"

gboolean knnwb_host_parse_bytes(const char *text, guint64 *bytes, GError **error)
{
  const char *p = text;
  while (g_ascii_isspace(*p))
    p++;
  /* strtod would accept "-1", "inf", "nan" and hex: only digits and one dot are sizes. */
  if (!g_ascii_isdigit(*p) && !(*p == '.' && g_ascii_isdigit(p[1])))
    goto syntax;
  char *end = NULL;
  errno = 0;
  double number = g_ascii_strtod(p, &end);
  if (errno != 0 || end == p)
    goto syntax;
  for (const char *q = p; q < end; q++)
    if (!g_ascii_isdigit(*q) && *q != '.')
      goto syntax;
  double scale = 1;
  switch (g_ascii_toupper(*end)) {
  case 'K':
    scale = 1024.0;
    break;
  case 'M':
    scale = 1024.0 * 1024;
    break;
  case 'G':
    scale = 1024.0 * 1024 * 1024;
    break;
  case 'T':
    scale = 1024.0 * 1024 * 1024 * 1024;
    break;
  default:
    break;
  }
  if (scale != 1) {
    end++;
    if (g_ascii_toupper(*end) == 'I' && g_ascii_toupper(end[1]) == 'B')
      end += 2;
    else if (g_ascii_toupper(*end) == 'B')
      end++;
  } else if (g_ascii_toupper(*end) == 'B') {
    end++;
  }
  while (g_ascii_isspace(*end))
    end++;
  if (*end != '\0')
    goto syntax;
  double value = floor(number * scale);
  /* 2^64 is exactly representable; anything at or above it does not fit. */
  if (!(value < 18446744073709551616.0)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "size '%s' is too large", text);
    return FALSE;
  }
  *bytes = (guint64)value;
  return TRUE;

syntax:
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "'%s' is not a size (expected a number with an optional K, M, G or T suffix, "
              "e.g. 512M or 4G)",
              text);
  return FALSE;
}

char *knnwb_host_format_bytes(guint64 bytes)
{
  return g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
}
