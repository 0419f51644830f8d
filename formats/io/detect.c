/* Input format names and detection by extension, then by content; a format that contradicts the
 * content is refused with what the file looks like. */
#include "io.h"

#include <string.h>

static const KnnwbEnumName knnwb_input_names[] = {KNNWB_INPUT_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_input_table = KNNWB_ENUM_TABLE(
    knnwb_input_names, 0, ", ", "unknown input format ", " (known: ", ")", "(null)");

gboolean knnwb_formats_input_from_string(const char *name, KnnwbInputFormat *format, GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_input_table, name, &value, error))
    return FALSE;
  *format = (KnnwbInputFormat)value;
  return TRUE;
}

const char *knnwb_formats_input_to_string(KnnwbInputFormat format)
{
  const char *name = knnwb_enum_to_string(&knnwb_input_table, (int)format);
  return name != NULL ? name : "unknown";
}

static gboolean knnwb_formats_has_suffix(const char *path, size_t length, const char *suffix)
{
  size_t m = strlen(suffix);
  return length >= m && g_ascii_strncasecmp(path + length - m, suffix, m) == 0;
}

/* The format the name promises (a trailing .gz ignored), or AUTO. */
static KnnwbInputFormat knnwb_formats_input_from_name(const char *path)
{
  static const struct {
    const char *suffix;
    KnnwbInputFormat format;
  } by_extension[] = {{"_series_matrix.txt", KNNWB_INPUT_GEO},
                      {".npy", KNNWB_INPUT_NPY},
                      {".h5ad", KNNWB_INPUT_H5AD},
                      {".mtx", KNNWB_INPUT_10X},
                      {".gct", KNNWB_INPUT_GCT},
                      {".csv", KNNWB_INPUT_CSV},
                      {".tsv", KNNWB_INPUT_TSV},
                      {".tab", KNNWB_INPUT_TSV}};
  size_t length = strlen(path);
  if (knnwb_formats_has_suffix(path, length, ".gz"))
    length -= 3;
  for (size_t i = 0; i < G_N_ELEMENTS(by_extension); i++)
    if (knnwb_formats_has_suffix(path, length, by_extension[i].suffix))
      return by_extension[i].format;
  return KNNWB_INPUT_AUTO;
}

/* Whether a reader of format can make sense of content of this kind. Only a recognised signature
 * of something else is refused: plain or damaged text goes to the reader asked for, whose errors
 * point at the line and column. Archives, other compressions, graphs and web pages are refused by
 * every reader, NPY by every text reader, and anything but NPY by the NPY reader. */
static gboolean knnwb_formats_content_fits(KnnwbInputFormat format, KnnwbContentKind kind)
{
  switch (kind) {
  case KNNWB_CONTENT_EMPTY:
  case KNNWB_CONTENT_TEXT:
  case KNNWB_CONTENT_BINARY:
    return format != KNNWB_INPUT_NPY && format != KNNWB_INPUT_H5AD;
  case KNNWB_CONTENT_NPY:
    return format == KNNWB_INPUT_NPY;
  case KNNWB_CONTENT_HDF5:
    return format == KNNWB_INPUT_H5AD;
  case KNNWB_CONTENT_MTX:
    return format == KNNWB_INPUT_10X;
  case KNNWB_CONTENT_GCT:
    return format == KNNWB_INPUT_GCT;
  case KNNWB_CONTENT_CIBM:
    return format == KNNWB_INPUT_CIBM;
  case KNNWB_CONTENT_GEO:
    return format == KNNWB_INPUT_GEO;
  default:
    return FALSE;
  }
}

/* Past comment lines above a table ('#' and no tab: featureCounts' "# Program:featureCounts ..."
 * line), as the delimited reader skips them. */
static const char *knnwb_formats_skip_comment_lines(const char *text, const char *end)
{
  while (text < end && *text == '#') {
    const char *c = text;
    while (c < end && *c != '\n' && *c != '\t')
      c++;
    if (c >= end || *c == '\t')
      return text;
    text = c + 1;
  }
  return text;
}

static KnnwbInputFormat knnwb_formats_input_from_content(KnnwbContentKind kind, const char *head,
                                                         size_t length)
{
  switch (kind) {
  case KNNWB_CONTENT_NPY:
    return KNNWB_INPUT_NPY;
  case KNNWB_CONTENT_HDF5:
    return KNNWB_INPUT_H5AD;
  case KNNWB_CONTENT_MTX:
    return KNNWB_INPUT_10X;
  case KNNWB_CONTENT_GCT:
    return KNNWB_INPUT_GCT;
  case KNNWB_CONTENT_CIBM:
    return KNNWB_INPUT_CIBM;
  case KNNWB_CONTENT_GEO:
    return KNNWB_INPUT_GEO;
  case KNNWB_CONTENT_TEXT: {
    const char *text = head, *end = head + length;
    if (length >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
      text += 3;
    while (text < end && (*text == ' ' || *text == '\r' || *text == '\n' || *text == '\t'))
      text++;
    text = knnwb_formats_skip_comment_lines(text, end);
    const char *newline = memchr(text, '\n', (size_t)(end - text));
    size_t first_line = newline != NULL ? (size_t)(newline - text) : (size_t)(end - text);
    if (memchr(text, '\t', first_line) != NULL)
      return KNNWB_INPUT_TSV;
    if (memchr(text, ',', first_line) != NULL || memchr(text, ';', first_line) != NULL)
      return KNNWB_INPUT_CSV; /* ';': Excel's CSV where the comma is the decimal mark */
    return KNNWB_INPUT_AUTO;
  }
  default:
    return KNNWB_INPUT_AUTO;
  }
}

/* A first line (after a BOM and leading blank lines) with a space between two words. */
static gboolean knnwb_formats_first_line_has_space(const char *head, size_t length)
{
  const char *text = head, *end = head + length;
  if (length >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
    text += 3;
  while (text < end && g_ascii_isspace(*text))
    text++;
  text = knnwb_formats_skip_comment_lines(text, end);
  gboolean space = FALSE; /* seen since the last word */
  for (; text < end && *text != '\n' && *text != '\r'; text++) {
    if (*text == ' ')
      space = TRUE;
    else if (space && !g_ascii_isspace(*text))
      return TRUE;
  }
  return FALSE;
}

/* Carriage returns ending lines and no line feed in the head: CR-only line ends. A CR inside a
 * quoted field of an LF file does not count (the head then has an LF). */
static gboolean knnwb_formats_lines_end_with_cr(const char *head, size_t length)
{
  size_t crs = 0;
  for (size_t i = 0; i < length; i++) {
    if (head[i] == '\n')
      return FALSE;
    crs += head[i] == '\r' && i + 1 < length;
  }
  return crs > 0;
}

gboolean knnwb_formats_resolve_input(const char *path, KnnwbInputFormat requested,
                                     KnnwbInputFormat *format, GError **error)
{
  enum { KNNWB_HEAD_BYTES = 65536 };
  g_autofree char *head = g_malloc(KNNWB_HEAD_BYTES);
  size_t length = 0;
  gboolean compressed = FALSE;
  if (!knnwb_formats_read_head(path, head, KNNWB_HEAD_BYTES, &length, &compressed, error))
    return FALSE;
  const char *looks_like = NULL;
  KnnwbContentKind kind = knnwb_formats_sniff(head, length, &looks_like);
  const char *gz = compressed ? " (once decompressed)" : "";
  const gboolean text = kind == KNNWB_CONTENT_TEXT || kind == KNNWB_CONTENT_GCT ||
                        kind == KNNWB_CONTENT_CIBM || kind == KNNWB_CONTENT_GEO;
  if (text && knnwb_formats_lines_end_with_cr(head, length)) {
    /* Every reader splits lines at LF (CRLF included); one endless line would be misread. */
    knnwb_formats_parse_error(error, path, 1, 0,
                              "the lines end with a carriage return alone (classic Mac OS, as "
                              "old Excel for Mac saves CSV)%s; convert them to line feeds: tr "
                              "'\\r' '\\n' < IN > OUT",
                              gz);
    return FALSE;
  }
  KnnwbInputFormat named = knnwb_formats_input_from_name(path);
  KnnwbInputFormat chosen = requested != KNNWB_INPUT_AUTO ? requested : named;
  if (chosen != KNNWB_INPUT_AUTO) {
    if (knnwb_formats_content_fits(chosen, kind)) {
      *format = chosen;
      return TRUE;
    }
    KnnwbInputFormat fitting = knnwb_formats_input_from_content(kind, head, length);
    g_autofree char *advice = fitting == KNNWB_INPUT_AUTO ? g_strdup("")
                              : requested != KNNWB_INPUT_AUTO
                                  ? g_strdup_printf("; read it with format %s or auto",
                                                    knnwb_formats_input_to_string(fitting))
                                  : g_strdup_printf("; rename it or name the format (--format %s)",
                                                    knnwb_formats_input_to_string(fitting));
    g_autofree char *asked =
        requested != KNNWB_INPUT_AUTO
            ? g_strdup_printf("format %s was asked for", knnwb_formats_input_to_string(requested))
            : g_strdup_printf("the name says %s", knnwb_formats_input_to_string(named));
    /* NPY and HDF5 messages name no line (a binary file has none). */
    if (chosen == KNNWB_INPUT_H5AD)
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s: not an HDF5 file (no \\x89HDF signature; %s): the file%s looks like %s%s",
                  path, asked, gz, looks_like, advice);
    else if (chosen == KNNWB_INPUT_NPY)
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s: not an NPY file (no \\x93NUMPY magic; %s): the file%s looks like %s%s", path,
                  asked, gz, looks_like, advice);
    else
      knnwb_formats_parse_error(error, path, 1, 0, "%s, but the file%s looks like %s%s", asked, gz,
                                looks_like, advice);
    return FALSE;
  }
  if (kind == KNNWB_CONTENT_EMPTY) {
    knnwb_formats_parse_error(error, path, 1, 0, "the file is empty%s", gz);
    return FALSE;
  }
  *format = knnwb_formats_input_from_content(kind, head, length);
  if (*format != KNNWB_INPUT_AUTO)
    return TRUE;
  if (kind == KNNWB_CONTENT_TEXT && knnwb_formats_first_line_has_space(head, length))
    /* R's write.table() separates columns by spaces unless told otherwise; no --format reads
     * that, so say how to write it instead. */
    knnwb_formats_parse_error(error, path, 1, 0,
                              "cannot tell the format: the first line has no tab or comma but "
                              "spaces; columns separated by spaces (as R's write.table writes by "
                              "default) are not read: write the file with tabs or commas (R: "
                              "write.table(x, file, sep = \"\\t\") or write.csv(x, file)), or "
                              "convert it");
  else if (kind == KNNWB_CONTENT_TEXT)
    knnwb_formats_parse_error(error, path, 1, 0,
                              "cannot tell the format: not NPY, GCT, CIBM or a GEO series matrix, "
                              "and the first line has no tab or comma; name it with --format");
  else
    knnwb_formats_parse_error(
        error, path, 1, 0, "cannot read it as a matrix: the file%s looks like %s", gz, looks_like);
  return FALSE;
}

gboolean knnwb_formats_detect_input(const char *path, KnnwbInputFormat *format, GError **error)
{
  return knnwb_formats_resolve_input(path, KNNWB_INPUT_AUTO, format, error);
}
