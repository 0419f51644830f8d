/* Reads back what the GML writer puts in a file (knnwb's own and yEd's GML): node ids, labels,
 * `focus`, every other scalar node key as an attribute, `graphics [ x y w h type fill outline ]`,
 * `LabelGraphics [ fontSize ]`, edges with `weight`, `distance`, `r` and `graphics [ fill width ]`.
 * GML is `key value` pairs where a value is a number, a "string" or a [ list ]. The file is read in
 * chunks (a regular file only, under a size cap, the cancel flag polled per chunk) and parsed by
 * one loop with a depth counter: nesting costs no stack, only the first four levels mean
 * anything. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>

enum { KNNWB_GML_CHUNK = 1 << 20, KNNWB_GML_WORD = 64 };

/* What a list at some depth is, as far as the drawing cares. */
typedef enum {
  KNNWB_GML_OTHER,
  KNNWB_GML_GRAPH,
  KNNWB_GML_NODE,
  KNNWB_GML_EDGE,
  KNNWB_GML_NODE_GRAPHICS,
  KNNWB_GML_EDGE_GRAPHICS,
  KNNWB_GML_LABEL_GRAPHICS
} KnnwbGmlContext;

/* One token: a key or bare word, a number, a "string", [ or ], or the end of the file. */
typedef enum {
  KNNWB_GML_WORD_TOKEN,
  KNNWB_GML_NUMBER,
  KNNWB_GML_STRING,
  KNNWB_GML_OPEN,
  KNNWB_GML_CLOSE,
  KNNWB_GML_JUNK, /* a byte no token starts with */
  KNNWB_GML_END
} KnnwbGmlTokenKind;

/* A node attribute read before its node is complete. */
typedef struct {
  char *name;
  char *text; /* NULL for a number */
  double number;
} KnnwbGmlPending;

typedef struct {
  const char *path;
  int fd;
  char *buffer;
  size_t at, filled;
  gboolean eof;
  guint64 read_bytes, max_bytes;
  size_t line;
  const volatile gint *cancel;
  GError **error;
  /* The token just read. */
  KnnwbGmlTokenKind kind;
  char word[KNNWB_GML_WORD];
  GString *text, *raw; /* a string decoded, and as read */
  double number;
  /* The item being read and the drawing it goes into. */
  KnnwbDrawing *drawing;
  KnnwbDrawingNode node;
  KnnwbDrawingEdge edge;
  double id, source, target;
  gboolean have_id;
  size_t item_line;
  GArray *pending;    /* KnnwbGmlPending */
  GHashTable *column; /* attribute name -> index + 1 in drawing->attributes */
} KnnwbGmlParser;

static gboolean knnwb_gml_fail(KnnwbGmlParser *parser, const char *what)
{
  g_set_error(parser->error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%zu: %s", parser->path,
              parser->line, what);
  return FALSE;
}

/* The next chunk of the file into the buffer; FALSE with the error set on a read error, an
 * interruption or a file past the cap; at the end of the file TRUE with eof set. */
static gboolean knnwb_gml_refill(KnnwbGmlParser *parser)
{
  if (parser->cancel != NULL && *parser->cancel) {
    g_set_error(parser->error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s: interrupted while reading",
                parser->path);
    return FALSE;
  }
  ssize_t got;
  do
    got = read(parser->fd, parser->buffer, KNNWB_GML_CHUNK);
  while (got < 0 && errno == EINTR && !(parser->cancel != NULL && *parser->cancel));
  if (got < 0) {
    g_set_error(parser->error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: %s", parser->path,
                errno == EINTR ? "interrupted while reading" : g_strerror(errno));
    return FALSE;
  }
  parser->at = 0;
  parser->filled = (size_t)got;
  parser->eof = got == 0;
  parser->read_bytes += (guint64)got;
  if (parser->read_bytes > parser->max_bytes) {
    g_set_error(parser->error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "%s: larger than %" G_GUINT64_FORMAT " bytes, the most a GML is read", parser->path,
                parser->max_bytes);
    return FALSE;
  }
  return TRUE;
}

/* The next byte without taking it: 0..255, -1 at the end, -2 after an error. */
static inline int knnwb_gml_peek(KnnwbGmlParser *parser)
{
  if (parser->at == parser->filled) {
    if (parser->eof)
      return -1;
    if (!knnwb_gml_refill(parser))
      return -2;
    if (parser->eof)
      return -1;
  }
  return (unsigned char)parser->buffer[parser->at];
}

static inline void knnwb_gml_take(KnnwbGmlParser *parser)
{
  if (parser->buffer[parser->at++] == '\n')
    parser->line++;
}

static void knnwb_gml_decode_into(GString *out, const char *text, size_t length)
{
  g_string_truncate(out, 0);
  for (size_t i = 0; i < length; i++) {
    if (text[i] == '&') {
      const char *semicolon = memchr(text + i, ';', MIN(length - i, (size_t)16));
      if (semicolon != NULL) {
        char entity[16] = {0};
        memcpy(entity, text + i + 1, (size_t)(semicolon - text - i - 1));
        gunichar c = 0;
        if (strcmp(entity, "amp") == 0)
          c = '&';
        else if (strcmp(entity, "quot") == 0)
          c = '"';
        else if (strcmp(entity, "lt") == 0)
          c = '<';
        else if (strcmp(entity, "gt") == 0)
          c = '>';
        else if (entity[0] == '#')
          c = (gunichar)g_ascii_strtoull(entity + 1 + (entity[1] == 'x'), NULL,
                                         entity[1] == 'x' ? 16 : 10);
        if (c != 0 && g_unichar_validate(c)) {
          g_string_append_unichar(out, c);
          i = (size_t)(semicolon - text);
          continue;
        }
      }
    }
    g_string_append_c(out, text[i]);
  }
}

/* A quoted string whose opening quote was taken, &-entities decoded, into parser->text. */
static gboolean knnwb_gml_string(KnnwbGmlParser *parser)
{
  GString *raw = parser->raw;
  g_string_truncate(raw, 0);
  for (;;) {
    int c = knnwb_gml_peek(parser);
    if (c == -2)
      return FALSE;
    if (c == -1)
      return knnwb_gml_fail(parser, "a string is not closed");
    knnwb_gml_take(parser);
    if (c == '"')
      break;
    g_string_append_c(raw, (char)c);
  }
  knnwb_gml_decode_into(parser->text, raw->str, raw->len);
  parser->kind = KNNWB_GML_STRING;
  return TRUE;
}

/* Reads the next token into parser (comments and white space skipped). */
static gboolean knnwb_gml_next(KnnwbGmlParser *parser)
{
  int c;
  for (;;) {
    /* Spaces and tabs within the buffer without the byte-at-a-time calls. */
    while (parser->at < parser->filled &&
           (parser->buffer[parser->at] == ' ' || parser->buffer[parser->at] == '\t'))
      parser->at++;
    c = knnwb_gml_peek(parser);
    if (c == -2)
      return FALSE;
    if (c == '#') { /* a comment to the end of the line */
      while ((c = knnwb_gml_peek(parser)) >= 0 && c != '\n')
        knnwb_gml_take(parser);
      continue;
    }
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
      break;
    knnwb_gml_take(parser);
  }
  if (c == -1) {
    parser->kind = KNNWB_GML_END;
    return TRUE;
  }
  knnwb_gml_take(parser);
  if (c == '[' || c == ']') {
    parser->kind = c == '[' ? KNNWB_GML_OPEN : KNNWB_GML_CLOSE;
    return TRUE;
  }
  if (c == '"')
    return knnwb_gml_string(parser);
  /* A key or a number (a word of letters, digits, signs and points; at most 63 bytes kept). */
  if (!g_ascii_isalnum(c) && c != '_' && c != '-' && c != '+' && c != '.') {
    parser->kind = KNNWB_GML_JUNK;
    return TRUE;
  }
  size_t n = 0;
  parser->word[n++] = (char)c;
  while ((c = knnwb_gml_peek(parser)) >= 0 &&
         (g_ascii_isalnum(c) || c == '_' || c == '-' || c == '+' || c == '.')) {
    if (n + 1 < sizeof parser->word)
      parser->word[n++] = (char)c;
    knnwb_gml_take(parser);
  }
  if (c == -2)
    return FALSE;
  parser->word[n] = '\0';
  /* A number when strtod takes the whole word and it does not start as a key does (but for
   * inf and nan, which the writer puts for non-finite values). Whole numbers (ids, sources,
   * targets: most of a large file) are converted here, without strtod. */
  if (g_ascii_isalpha(parser->word[0])) {
    gboolean named = g_ascii_strcasecmp(parser->word, "inf") == 0 ||
                     g_ascii_strcasecmp(parser->word, "nan") == 0;
    parser->kind = named ? KNNWB_GML_NUMBER : KNNWB_GML_WORD_TOKEN;
    parser->number = named ? g_ascii_strtod(parser->word, NULL) : 0;
    return TRUE;
  }
  size_t sign = parser->word[0] == '-' || parser->word[0] == '+', digits = sign;
  gint64 whole_number = 0;
  while (digits < n && digits < 18 && g_ascii_isdigit(parser->word[digits]))
    whole_number = whole_number * 10 + (parser->word[digits++] - '0');
  if (digits == n && n > sign) {
    parser->number = parser->word[0] == '-' ? -(double)whole_number : (double)whole_number;
    parser->kind = KNNWB_GML_NUMBER;
    return TRUE;
  }
  char *stop = NULL;
  parser->number = g_ascii_strtod(parser->word, &stop);
  parser->kind = stop != parser->word && *stop == '\0' ? KNNWB_GML_NUMBER : KNNWB_GML_WORD_TOKEN;
  return TRUE;
}

static void knnwb_gml_parse_colour(const char *text, double rgb[3])
{
  unsigned r = 0xC0, g = 0xC0, b = 0xC0;
  gboolean hex = text != NULL && text[0] == '#' && strlen(text) >= 7;
  for (int i = 1; hex && i < 7; i++)
    hex = g_ascii_isxdigit(text[i]);
  if (hex) {
    r = (unsigned)(g_ascii_xdigit_value(text[1]) * 16 + g_ascii_xdigit_value(text[2]));
    g = (unsigned)(g_ascii_xdigit_value(text[3]) * 16 + g_ascii_xdigit_value(text[4]));
    b = (unsigned)(g_ascii_xdigit_value(text[5]) * 16 + g_ascii_xdigit_value(text[6]));
  }
  rgb[0] = r / 255.0;
  rgb[1] = g / 255.0;
  rgb[2] = b / 255.0;
}

static void knnwb_gml_pending_clear(gpointer data)
{
  KnnwbGmlPending *pending = data;
  g_free(pending->name);
  g_free(pending->text);
}

/* A fresh node or edge with the writer's defaults. */
static void knnwb_gml_item_start(KnnwbGmlParser *parser, size_t line)
{
  g_clear_pointer(&parser->node.label, g_free);
  parser->node = (KnnwbDrawingNode){.w = 30, .h = 30, .font_size = 12};
  knnwb_gml_parse_colour(NULL, parser->node.fill);
  knnwb_gml_parse_colour("#404040", parser->node.outline);
  parser->edge = (KnnwbDrawingEdge){.width = 1, .weight = NAN, .distance = NAN, .r = NAN};
  knnwb_gml_parse_colour("#A0A0A0", parser->edge.colour);
  parser->id = parser->source = parser->target = -1;
  parser->have_id = FALSE;
  parser->item_line = line;
  g_array_set_size(parser->pending, 0);
}

/* A scalar `key value` inside a list of the given context. */
static void knnwb_gml_scalar(KnnwbGmlParser *parser, KnnwbGmlContext context, const char *key)
{
  gboolean number = parser->kind == KNNWB_GML_NUMBER;
  const char *text = number ? NULL : parser->text->str;
  KnnwbDrawingNode *node = &parser->node;
  KnnwbDrawingEdge *edge = &parser->edge;
  if (context == KNNWB_GML_GRAPH && number && strcmp(key, "directed") == 0)
    parser->drawing->directed = parser->number != 0;
  else if (context == KNNWB_GML_NODE || context == KNNWB_GML_EDGE) {
    if (number && strcmp(key, "id") == 0)
      parser->id = parser->number, parser->have_id = TRUE;
    else if (context == KNNWB_GML_EDGE) {
      if (number && strcmp(key, "source") == 0)
        parser->source = parser->number;
      else if (number && strcmp(key, "target") == 0)
        parser->target = parser->number;
      else if (number && strcmp(key, "weight") == 0)
        edge->weight = parser->number;
      else if (number && strcmp(key, "distance") == 0)
        edge->distance = (float)parser->number;
      else if (number && strcmp(key, "r") == 0)
        edge->r = (float)parser->number;
    } else if (number && strcmp(key, "focus") == 0)
      node->focus = parser->number != 0;
    else if (strcmp(key, "label") == 0) {
      if (node->label == NULL)
        node->label = number ? g_strdup(parser->word) : g_strdup(text);
    } else {
      KnnwbGmlPending pending = {g_strdup(key), g_strdup(text), parser->number};
      g_array_append_val(parser->pending, pending);
    }
  } else if (context == KNNWB_GML_NODE_GRAPHICS && number) {
    if (strcmp(key, "x") == 0)
      node->x = parser->number, node->has_position |= 1;
    else if (strcmp(key, "y") == 0)
      node->y = parser->number, node->has_position |= 2;
    else if (strcmp(key, "w") == 0)
      node->w = parser->number;
    else if (strcmp(key, "h") == 0)
      node->h = parser->number;
  } else if (context == KNNWB_GML_NODE_GRAPHICS) {
    if (strcmp(key, "fill") == 0)
      knnwb_gml_parse_colour(text, node->fill);
    else if (strcmp(key, "outline") == 0)
      knnwb_gml_parse_colour(text, node->outline);
    else if (strcmp(key, "type") == 0)
      node->hexagon = strcmp(text, "hexagon") == 0;
  } else if (context == KNNWB_GML_EDGE_GRAPHICS) {
    if (!number && strcmp(key, "fill") == 0)
      knnwb_gml_parse_colour(text, edge->colour);
    else if (number && strcmp(key, "width") == 0)
      edge->width = parser->number;
  } else if (context == KNNWB_GML_LABEL_GRAPHICS && number && strcmp(key, "fontSize") == 0)
    node->font_size = parser->number;
}

/* A GML id (a number) as the 64-bit integer it names, truncated as GML readers do; FALSE when no
 * gint64 holds it (NaN, infinite, 1e300). */
static gboolean knnwb_gml_whole_id(double value, gint64 *id)
{
  if (!(value > -9.2e18 && value < 9.2e18))
    return FALSE;
  *id = (gint64)value;
  return TRUE;
}

/* The column of attribute name, added (missing for the nodes before) when new. */
static KnnwbDrawingAttribute *knnwb_gml_column(KnnwbGmlParser *parser, const char *name)
{
  GPtrArray *attributes = parser->drawing->attributes;
  guint index = GPOINTER_TO_UINT(g_hash_table_lookup(parser->column, name));
  if (index != 0)
    return g_ptr_array_index(attributes, index - 1);
  KnnwbDrawingAttribute *column = knnwb_drawing_attribute_new(name);
  g_ptr_array_set_size(column->texts, (gint)parser->drawing->nodes->len);
  g_array_set_size(column->numbers, parser->drawing->nodes->len);
  for (guint v = 0; v < parser->drawing->nodes->len; v++)
    g_array_index(column->numbers, double, v) = NAN;
  g_ptr_array_add(attributes, column);
  g_hash_table_insert(parser->column, column->name, GUINT_TO_POINTER(attributes->len));
  return column;
}

/* The node just closed into the drawing with its attributes (every column one value longer). */
static gboolean knnwb_gml_node_done(KnnwbGmlParser *parser, GHashTable *index)
{
  gint64 whole;
  if (!parser->have_id) {
    parser->line = parser->item_line;
    return knnwb_gml_fail(parser, "a node without an id");
  }
  if (!knnwb_gml_whole_id(parser->id, &whole)) {
    parser->line = parser->item_line;
    return knnwb_gml_fail(parser, "a node id beyond the 64-bit integers");
  }
  if (g_hash_table_contains(index, &whole)) {
    parser->line = parser->item_line;
    return knnwb_gml_fail(parser, "a second node with the same id");
  }
  gint64 *key = g_new(gint64, 1);
  *key = whole;
  g_hash_table_insert(index, key, GUINT_TO_POINTER(parser->drawing->nodes->len));
  for (guint i = 0; i < parser->pending->len; i++) {
    KnnwbGmlPending *pending = &g_array_index(parser->pending, KnnwbGmlPending, i);
    KnnwbDrawingAttribute *column = knnwb_gml_column(parser, pending->name);
    if (column->numbers->len > parser->drawing->nodes->len)
      continue; /* a key repeated in one node: the first value counts */
    g_ptr_array_add(column->texts, g_steal_pointer(&pending->text));
    g_array_append_val(column->numbers, pending->number);
    if (column->texts->pdata[column->texts->len - 1] != NULL)
      g_array_index(column->numbers, double, column->numbers->len - 1) = NAN;
  }
  g_array_append_val(parser->drawing->nodes, parser->node);
  parser->node.label = NULL; /* now the drawing's */
  guint n = parser->drawing->nodes->len;
  for (guint c = 0; c < parser->drawing->attributes->len; c++) {
    KnnwbDrawingAttribute *column = g_ptr_array_index(parser->drawing->attributes, c);
    if (column->numbers->len < n) {
      g_ptr_array_add(column->texts, NULL);
      double missing = NAN;
      g_array_append_val(column->numbers, missing);
    }
  }
  return TRUE;
}

/* What a list opened under key at a list of context parent is. */
static KnnwbGmlContext knnwb_gml_context(KnnwbGmlContext parent, int depth, const char *key)
{
  if (depth == 1)
    return strcmp(key, "graph") == 0 ? KNNWB_GML_GRAPH : KNNWB_GML_OTHER;
  if (parent == KNNWB_GML_GRAPH)
    return strcmp(key, "node") == 0   ? KNNWB_GML_NODE
           : strcmp(key, "edge") == 0 ? KNNWB_GML_EDGE
                                      : KNNWB_GML_OTHER;
  if (parent == KNNWB_GML_NODE)
    return strcmp(key, "graphics") == 0        ? KNNWB_GML_NODE_GRAPHICS
           : strcmp(key, "LabelGraphics") == 0 ? KNNWB_GML_LABEL_GRAPHICS
                                               : KNNWB_GML_OTHER;
  if (parent == KNNWB_GML_EDGE && strcmp(key, "graphics") == 0)
    return KNNWB_GML_EDGE_GRAPHICS;
  return KNNWB_GML_OTHER;
}

/* The whole file: `key value` pairs, lists opened and closed by a depth counter (contexts kept
 * for the first levels only: deeper lists are skipped whatever they hold). ends gets each edge's
 * source, target and line. */
static gboolean knnwb_gml_parse(KnnwbGmlParser *parser, GHashTable *index, GArray *ends,
                                gboolean *have_graph)
{
  KnnwbGmlContext contexts[5] = {KNNWB_GML_OTHER};
  guint64 depth = 0;
  char key[KNNWB_GML_WORD];
  for (;;) {
    if (!knnwb_gml_next(parser))
      return FALSE;
    KnnwbGmlContext here = depth < G_N_ELEMENTS(contexts) ? contexts[depth] : KNNWB_GML_OTHER;
    if (parser->kind == KNNWB_GML_END) {
      if (depth > 0)
        return knnwb_gml_fail(parser, "the file ends inside a list (a [ without its ])");
      return TRUE;
    }
    if (parser->kind == KNNWB_GML_CLOSE) {
      if (depth == 0)
        return knnwb_gml_fail(parser, "a ] without its [");
      if (here == KNNWB_GML_NODE && !knnwb_gml_node_done(parser, index))
        return FALSE;
      if (here == KNNWB_GML_EDGE) {
        g_array_append_val(parser->drawing->edges, parser->edge);
        double triple[3] = {parser->source, parser->target, (double)parser->item_line};
        g_array_append_vals(ends, triple, 3);
      }
      depth--;
      continue;
    }
    if (parser->kind != KNNWB_GML_WORD_TOKEN || !g_ascii_isalpha(parser->word[0]))
      return knnwb_gml_fail(parser, depth == 0 ? "expected a key" : "expected a key or ]");
    memcpy(key, parser->word, sizeof key);
    size_t key_line = parser->line;
    if (!knnwb_gml_next(parser))
      return FALSE;
    if (parser->kind == KNNWB_GML_OPEN) {
      depth++;
      if (depth < G_N_ELEMENTS(contexts)) {
        contexts[depth] = knnwb_gml_context(here, (int)depth, key);
        *have_graph |= contexts[depth] == KNNWB_GML_GRAPH;
        if (contexts[depth] == KNNWB_GML_NODE || contexts[depth] == KNNWB_GML_EDGE)
          knnwb_gml_item_start(parser, key_line);
      }
    } else if (parser->kind == KNNWB_GML_NUMBER || parser->kind == KNNWB_GML_STRING) {
      knnwb_gml_scalar(parser, here, key);
    } else {
      return knnwb_gml_fail(parser, parser->kind == KNNWB_GML_END
                                        ? "a value is missing at the end of the file"
                                        : "expected a number, a \"string\" or [");
    }
  }
}

/* Each edge's ends from GML ids to node indices; a missing node is an error naming the edge's
 * line. */
static gboolean knnwb_gml_resolve(const char *path, KnnwbDrawing *drawing, GHashTable *index,
                                  GArray *ends, GError **error)
{
  for (guint e = 0; e < drawing->edges->len; e++) {
    KnnwbDrawingEdge *edge = &g_array_index(drawing->edges, KnnwbDrawingEdge, e);
    for (int side = 0; side < 2; side++) {
      double end = g_array_index(ends, double, 3 * e + (guint)side);
      gint64 id = 0;
      gpointer found = NULL;
      if (!knnwb_gml_whole_id(end, &id) ||
          !g_hash_table_lookup_extended(index, &id, NULL, &found)) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%zu: edge %s %.17g is not a node",
                    path, (size_t)g_array_index(ends, double, 3 * e + 2),
                    side ? "target" : "source", end);
        return FALSE;
      }
      (side ? &edge->target : &edge->source)[0] = GPOINTER_TO_UINT(found);
    }
  }
  for (guint v = 0; v < drawing->nodes->len; v++)
    if (g_array_index(drawing->nodes, KnnwbDrawingNode, v).has_position != 3) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                  "%s: node %u has no coordinates (graphics [ x y ]): write the GML with a "
                  "layout, e.g. `knnwb knn ... --layout fr` (`--layout drl` for a large graph)",
                  path, v);
      return FALSE;
    }
  return TRUE;
}

/* Opens path for reading if it is a regular file of at most max_bytes; -1 with the error set. */
static int knnwb_gml_open(const char *path, guint64 max_bytes, GError **error)
{
  /* Non-blocking: a FIFO without a writer would block open() itself. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: %s", path, g_strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "%s: not a regular file (a GML is read from a file, not a pipe, device or "
                "directory)",
                path);
    close(fd);
    return -1;
  }
  if ((guint64)st.st_size > max_bytes) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "%s: %" G_GUINT64_FORMAT " bytes, more than the %" G_GUINT64_FORMAT
                " bytes a GML is read up to",
                path, (guint64)st.st_size, max_bytes);
    close(fd);
    return -1;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0)
    (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return fd;
}

KnnwbDrawing *knnwb_formats_read_gml_full(const char *path, guint64 max_bytes,
                                          const volatile gint *cancel, GError **error)
{
  if (max_bytes == 0)
    max_bytes = KNNWB_GML_MAX_BYTES;
  int fd = knnwb_gml_open(path, max_bytes, error);
  if (fd < 0)
    return NULL;
  g_autoptr(KnnwbDrawing) drawing = knnwb_drawing_new();
  g_autoptr(GHashTable) index = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  g_autoptr(GHashTable) column = g_hash_table_new(g_str_hash, g_str_equal);
  g_autoptr(GArray) ends = g_array_new(FALSE, FALSE, sizeof(double));
  g_autoptr(GArray) pending = g_array_new(FALSE, FALSE, sizeof(KnnwbGmlPending));
  g_array_set_clear_func(pending, knnwb_gml_pending_clear);
  g_autoptr(GString) text = g_string_new(NULL);
  g_autoptr(GString) raw = g_string_new(NULL);
  g_autofree char *buffer = g_malloc(KNNWB_GML_CHUNK);
  KnnwbGmlParser parser = {.path = path,
                           .fd = fd,
                           .buffer = buffer,
                           .max_bytes = max_bytes,
                           .line = 1,
                           .cancel = cancel,
                           .error = error,
                           .text = text,
                           .raw = raw,
                           .drawing = drawing,
                           .pending = pending,
                           .column = column};
  gboolean have_graph = FALSE;
  gboolean ok = knnwb_gml_parse(&parser, index, ends, &have_graph);
  g_free(parser.node.label); /* a node whose list was not closed */
  close(fd);
  if (!ok)
    return NULL;
  if (!have_graph) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: no `graph [ ... ]` in this file", path);
    return NULL;
  }
  if (!knnwb_gml_resolve(path, drawing, index, ends, error))
    return NULL;
  return g_steal_pointer(&drawing);
}

KnnwbDrawing *knnwb_formats_read_gml(const char *path, GError **error)
{
  return knnwb_formats_read_gml_full(path, 0, NULL, error);
}
