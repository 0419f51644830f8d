/* Label text for the graph writers, in one place so every writer (and any rewrite of them) stays
 * well formed for every label a reader accepts: a CSV label may hold quotes, '&', '<', tabs, line
 * breaks, C0 controls, U+FFFE/U+FFFF or invalid UTF-8 bytes. And text for a terminal: the same
 * labels inside messages must not reach it as control sequences. */
#include "io.h"

#include <knnwb/text_fields.h>

#include <string.h>

/* U+FFFD as UTF-8: what stands in for a character the format cannot hold. */
static const char knnwb_escape_replacement[] = "\xEF\xBF\xBD";

/* XML 1.0 Char production: tab, LF, CR, U+0020-U+D7FF, U+E000-U+FFFD, U+10000-U+10FFFF. */
static gboolean knnwb_escape_xml_char(gunichar c)
{
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

void knnwb_formats_put_xml_text(KnnwbTextChunk *out, const char *text)
{
  g_autofree char *repaired = NULL;
  if (!g_utf8_validate(text, -1, NULL))
    text = repaired = g_utf8_make_valid(text, -1);
  const char *run = text; /* bytes copied as they are, up to p */
  const char *p = text;
  while (*p != '\0') {
    const char *next = g_utf8_next_char(p);
    gunichar c = g_utf8_get_char(p);
    const char *replacement = NULL;
    switch (c) {
    case '&':
      replacement = "&amp;";
      break;
    case '<':
      replacement = "&lt;";
      break;
    case '>':
      replacement = "&gt;";
      break;
    case '"':
      replacement = "&quot;";
      break;
    case '\t': /* as references, so attribute values keep them (a parser normalises raw ones) */
      replacement = "&#9;";
      break;
    case '\n':
      replacement = "&#10;";
      break;
    case '\r':
      replacement = "&#13;";
      break;
    default:
      if (!knnwb_escape_xml_char(c))
        replacement = knnwb_escape_replacement; /* not even a reference may name these */
    }
    if (replacement != NULL) {
      knnwb_text_chunk_append(out, run, (size_t)(p - run));
      knnwb_text_chunk_puts(out, replacement);
      run = next;
    }
    p = next;
  }
  knnwb_text_chunk_append(out, run, (size_t)(p - run));
}

void knnwb_formats_put_gml_string(KnnwbTextChunk *out, const char *text)
{
  knnwb_text_chunk_putc(out, '"');
  g_autofree char *repaired = NULL;
  if (!g_utf8_validate(text, -1, NULL))
    text = repaired = g_utf8_make_valid(text, -1);
  for (const char *p = text; *p != '\0'; p = g_utf8_next_char(p)) {
    gunichar c = g_utf8_get_char(p);
    if (c == '"')
      knnwb_text_chunk_puts(out, "&quot;");
    else if (c == '&')
      knnwb_text_chunk_puts(out, "&amp;");
    else if (c < 0x20 || c >= 0x7f) {
      char entity[16];
      g_snprintf(entity, sizeof entity, "&#%" G_GUINT32_FORMAT ";", (guint32)c);
      knnwb_text_chunk_puts(out, entity);
    } else
      knnwb_text_chunk_putc(out, (char)c);
  }
  knnwb_text_chunk_putc(out, '"');
}

/* Code points a terminal acts on instead of showing (besides C0 and DEL): C1 controls (CSI, OSC,
 * ... on terminals that read UTF-8 C1) and the bidirectional overrides and isolates that make text
 * display in another order than it is stored. */
static gboolean knnwb_escape_terminal_control(gunichar c)
{
  return (c >= 0x80 && c <= 0x9f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

void knnwb_formats_escape_terminal(GString *out, const char *text, size_t length, gboolean final,
                                   size_t *used)
{
  const char *p = text, *end = text + length, *run = text;
  while (p < end) {
    unsigned char byte = (unsigned char)*p;
    if (byte < 0x80) {
      if ((byte < 0x20 && byte != '\t' && byte != '\n') || byte == 0x7f) {
        g_string_append_len(out, run, p - run);
        g_string_append_printf(out, "\\x%02x", byte);
        run = p + 1;
      }
      p++;
      continue;
    }
    gunichar c = g_utf8_get_char_validated(p, end - p);
    if (c == (gunichar)-2 && !final)
      break; /* the rest of a character comes with the next piece */
    if (c == (gunichar)-1 || c == (gunichar)-2) {
      g_string_append_len(out, run, p - run);
      g_string_append_printf(out, "\\x%02x", byte);
      run = ++p;
      continue;
    }
    const char *next = g_utf8_next_char(p);
    if (knnwb_escape_terminal_control(c)) {
      g_string_append_len(out, run, p - run);
      g_string_append_printf(out, "\\u%04x", (unsigned)c);
      run = next;
    }
    p = next;
  }
  g_string_append_len(out, run, p - run);
  if (used != NULL)
    *used = (size_t)(p - text);
}
