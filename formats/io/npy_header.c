/* The .npy container's header, read and written in one place: the preamble (magic, version,
 * header length), the header dictionary, and the byte-order policy (write the host's order and
 * say so; read either). */
#include "io.h"

KnnwbNpyPreambleStatus knnwb_npy_preamble_parse(const unsigned char *bytes, size_t available,
                                                unsigned *major, size_t *header_start,
                                                size_t *header_length)
{
  if (available < 10 || memcmp(bytes, "\x93NUMPY", 6) != 0)
    return KNNWB_NPY_PREAMBLE_NOT_NPY;
  *major = bytes[6];
  if (*major == 1) {
    *header_length = (size_t)bytes[8] | (size_t)bytes[9] << 8;
    *header_start = 10;
    return KNNWB_NPY_PREAMBLE_OK;
  }
  if (*major != 2 && *major != 3)
    return KNNWB_NPY_PREAMBLE_VERSION;
  if (available < 12)
    return KNNWB_NPY_PREAMBLE_TRUNCATED;
  *header_length =
      (size_t)bytes[8] | (size_t)bytes[9] << 8 | (size_t)bytes[10] << 16 | (size_t)bytes[11] << 24;
  *header_start = 12;
  return KNNWB_NPY_PREAMBLE_OK;
}

static void knnwb_npy_skip_blanks(const char **p, const char *end)
{
  while (*p < end && (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r'))
    (*p)++;
}

/* A Python string literal in single or double quotes (no escapes: numpy never writes them). */
static gboolean knnwb_npy_string(const char **p, const char *end, const char **start,
                                 size_t *length)
{
  if (*p >= end || (**p != '\'' && **p != '"'))
    return FALSE;
  char quote = **p;
  const char *close = memchr(*p + 1, quote, (size_t)(end - *p - 1));
  if (close == NULL)
    return FALSE;
  *start = *p + 1;
  *length = (size_t)(close - *start);
  *p = close + 1;
  return TRUE;
}

static gboolean knnwb_npy_integer(const char **p, const char *end, size_t *value)
{
  size_t v = 0;
  const char *s = *p;
  if (s >= end || *s < '0' || *s > '9')
    return FALSE;
  while (s < end && *s >= '0' && *s <= '9') {
    if (v > (SIZE_MAX - 9) / 10)
      return FALSE;
    v = v * 10 + (size_t)(*s - '0');
    s++;
  }
  if (s < end && *s == 'L') /* Python 2 longs */
    s++;
  *p = s;
  *value = v;
  return TRUE;
}

/* 'descr': a type string such as '<f4' (byte order, kind, item size). */
static gboolean knnwb_npy_parse_descr(const char **p, const char *end, KnnwbNpyHeader *header)
{
  const char *descr;
  size_t descr_length;
  if (!knnwb_npy_string(p, end, &descr, &descr_length) || descr_length < 3)
    return FALSE;
  header->byte_order = descr[0];
  header->kind = descr[1];
  const char *size_end = descr + descr_length;
  const char *size_text = descr + 2;
  if (!knnwb_npy_integer(&size_text, size_end, &header->item_size) || size_text != size_end)
    return FALSE;
  header->have_descr = TRUE;
  return TRUE;
}

/* 'shape': a tuple of sizes; the first two are kept, all are counted. */
static gboolean knnwb_npy_parse_shape(const char **p, const char *end, KnnwbNpyHeader *header)
{
  if (*p >= end || **p != '(')
    return FALSE;
  (*p)++;
  for (;;) {
    knnwb_npy_skip_blanks(p, end);
    if (*p < end && **p == ')') {
      (*p)++;
      break;
    }
    size_t size;
    if (!knnwb_npy_integer(p, end, &size))
      return FALSE;
    if (header->n_dims < 2)
      header->shape[header->n_dims] = size;
    header->n_dims++;
    knnwb_npy_skip_blanks(p, end);
    if (*p < end && **p == ',')
      (*p)++;
    else if (*p >= end || **p != ')')
      return FALSE;
  }
  header->have_shape = TRUE;
  return TRUE;
}

/* The value of one key, at *p. */
static gboolean knnwb_npy_parse_value(const char *key, size_t key_length, const char **p,
                                      const char *end, KnnwbNpyHeader *header, const char **what)
{
  if (key_length == 5 && memcmp(key, "descr", 5) == 0) {
    *what = "'descr' must be a type string such as '<f4' (structured arrays are not supported)";
    return knnwb_npy_parse_descr(p, end, header);
  }
  if (key_length == 13 && memcmp(key, "fortran_order", 13) == 0) {
    if (end - *p >= 4 && memcmp(*p, "True", 4) == 0) {
      header->fortran_order = TRUE;
      *p += 4;
    } else if (end - *p >= 5 && memcmp(*p, "False", 5) == 0) {
      *p += 5;
    } else {
      *what = "'fortran_order' must be True or False";
      return FALSE;
    }
    header->have_order = TRUE;
    return TRUE;
  }
  if (key_length == 5 && memcmp(key, "shape", 5) == 0) {
    *what = "'shape' must be a tuple of sizes";
    return knnwb_npy_parse_shape(p, end, header);
  }
  *what = "unknown key in the header dictionary";
  return FALSE;
}

gboolean knnwb_npy_header_parse(const char *text, size_t length, KnnwbNpyHeader *header,
                                size_t *error_at, const char **what)
{
  const char *p = text, *end = text + length;
  memset(header, 0, sizeof *header);
  *what = "expected '{'";
  knnwb_npy_skip_blanks(&p, end);
  if (p >= end || *p != '{')
    goto fail;
  p++;
  for (;;) {
    knnwb_npy_skip_blanks(&p, end);
    if (p < end && *p == '}')
      break;
    const char *key;
    size_t key_length;
    *what = "expected a quoted key or '}'";
    if (!knnwb_npy_string(&p, end, &key, &key_length))
      goto fail;
    knnwb_npy_skip_blanks(&p, end);
    *what = "expected ':' after a key";
    if (p >= end || *p != ':')
      goto fail;
    p++;
    knnwb_npy_skip_blanks(&p, end);
    if (!knnwb_npy_parse_value(key, key_length, &p, end, header, what))
      goto fail;
    knnwb_npy_skip_blanks(&p, end);
    if (p < end && *p == ',') {
      p++;
      continue;
    }
    *what = "expected ',' or '}'";
    if (p >= end || *p != '}')
      goto fail;
    break;
  }
  return TRUE;
fail:
  *error_at = (size_t)(p - text);
  return FALSE;
}

gboolean knnwb_npy_header_little_endian(const KnnwbNpyHeader *header, gboolean *known)
{
  gboolean little = header->byte_order == '<' || header->byte_order == '=' ||
                    (header->byte_order == '|' && header->item_size == 1);
  *known = little || header->byte_order == '>';
  return little;
}

GString *knnwb_formats_npy_header(const char *descr, size_t rows, size_t columns)
{
  /* NPY format 1.0: magic, version, header length, then the header dict padded with spaces to a
   * multiple of 64 bytes and ended by a newline. The data that follows is in the host's order. */
  GString *header = g_string_new(NULL);
  g_string_append_len(header, "\x93NUMPY\x01\x00\x00\x00", 10);
  g_string_append_printf(header, "{'descr': '%c%s', 'fortran_order': False, 'shape': (%zu, %zu), }",
                         G_BYTE_ORDER == G_LITTLE_ENDIAN ? '<' : '>', descr, rows, columns);
  while ((header->len + 1) % 64 != 0)
    g_string_append_c(header, ' ');
  g_string_append_c(header, '\n');
  size_t length = header->len - 10;
  header->str[8] = (char)(length & 0xFF);
  header->str[9] = (char)(length >> 8);
  return header;
}

void knnwb_npy_header_write(FILE *stream, const char *descr, size_t rows, size_t columns)
{
  g_autoptr(GString) header = knnwb_formats_npy_header(descr, rows, columns);
  fwrite(header->str, 1, header->len, stream);
}
