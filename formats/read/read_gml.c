/* Reads back what the GML writer puts in a file (knnwb's own and yEd's GML): node ids, labels,
 * `focus`, `graphics [ x y w h type fill outline ]`, `LabelGraphics [ fontSize ]`, edges with
 * `graphics [ fill width ]`. A small recursive-descent parser over the whole file: GML is
 * `key value` pairs where a value is a number, a "string" or a [ list ]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>

typedef struct {
  const char *path;
  const char *p, *end;
  size_t line;
  GError **error;
} KnnwbGmlParser;

static void knnwb_gml_skip(KnnwbGmlParser *parser)
{
  while (parser->p < parser->end) {
    char c = *parser->p;
    if (c == '\n')
      parser->line++;
    if (c == '#') { /* comment to the end of the line */
      while (parser->p < parser->end && *parser->p != '\n')
        parser->p++;
      continue;
    }
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
      break;
    parser->p++;
  }
}

static gboolean knnwb_gml_fail(KnnwbGmlParser *parser, const char *what)
{
  g_set_error(parser->error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%zu: %s", parser->path,
              parser->line, what);
  return FALSE;
}

/* One value: number -> *number (is_number), string -> *text (decoded &-entities), list -> the
 * callback walks it. */
typedef struct {
  gboolean is_number, is_string, is_list;
  double number;
  char *text;
} KnnwbGmlValue;

static gboolean knnwb_gml_key(KnnwbGmlParser *parser, char *key, size_t size)
{
  knnwb_gml_skip(parser);
  size_t n = 0;
  while (parser->p < parser->end && (g_ascii_isalnum(*parser->p) || *parser->p == '_')) {
    if (n + 1 < size)
      key[n++] = *parser->p;
    parser->p++;
  }
  key[n] = '\0';
  return n > 0;
}

static char *knnwb_gml_decode(const char *text, size_t length)
{
  GString *out = g_string_sized_new(length);
  for (size_t i = 0; i < length; i++) {
    if (text[i] == '&') {
      const char *semicolon = memchr(text + i, ';', length - i);
      if (semicolon != NULL) {
        g_autofree char *entity = g_strndup(text + i + 1, (size_t)(semicolon - text - i - 1));
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
  return g_string_free(out, FALSE);
}

static gboolean knnwb_gml_value(KnnwbGmlParser *parser, KnnwbGmlValue *value)
{
  memset(value, 0, sizeof *value);
  knnwb_gml_skip(parser);
  if (parser->p >= parser->end)
    return knnwb_gml_fail(parser, "a value is missing at the end of the file");
  char c = *parser->p;
  if (c == '[') {
    parser->p++;
    value->is_list = TRUE;
    return TRUE;
  }
  if (c == '"') {
    const char *start = ++parser->p;
    while (parser->p < parser->end && *parser->p != '"') {
      if (*parser->p == '\n')
        parser->line++;
      parser->p++;
    }
    if (parser->p >= parser->end)
      return knnwb_gml_fail(parser, "a string is not closed");
    value->text = knnwb_gml_decode(start, (size_t)(parser->p - start));
    parser->p++;
    value->is_string = TRUE;
    return TRUE;
  }
  char *stop = NULL;
  g_autofree char *copy = g_strndup(parser->p, MIN((size_t)64, (size_t)(parser->end - parser->p)));
  value->number = g_ascii_strtod(copy, &stop);
  if (stop == copy)
    return knnwb_gml_fail(parser, "expected a number, a \"string\" or [");
  parser->p += stop - copy;
  value->is_number = TRUE;
  return TRUE;
}

/* Skips the rest of a list whose '[' was read. */
static gboolean knnwb_gml_skip_list(KnnwbGmlParser *parser)
{
  char key[64];
  for (;;) {
    knnwb_gml_skip(parser);
    if (parser->p < parser->end && *parser->p == ']') {
      parser->p++;
      return TRUE;
    }
    if (!knnwb_gml_key(parser, key, sizeof key))
      return knnwb_gml_fail(parser, "expected a key or ]");
    KnnwbGmlValue value;
    if (!knnwb_gml_value(parser, &value))
      return FALSE;
    g_free(value.text);
    if (value.is_list && !knnwb_gml_skip_list(parser))
      return FALSE;
  }
}

static void knnwb_gml_parse_colour(const char *text, double rgb[3])
{
  unsigned r = 0xC0, g = 0xC0, b = 0xC0;
  if (text != NULL && text[0] == '#' && strlen(text) >= 7)
    sscanf(text + 1, "%2x%2x%2x", &r, &g, &b);
  rgb[0] = r / 255.0;
  rgb[1] = g / 255.0;
  rgb[2] = b / 255.0;
}

/* graphics [ ... ] of a node or an edge. */
static gboolean knnwb_gml_graphics(KnnwbGmlParser *parser, KnnwbDrawingNode *node,
                                   KnnwbDrawingEdge *edge)
{
  char key[64];
  for (;;) {
    knnwb_gml_skip(parser);
    if (parser->p < parser->end && *parser->p == ']') {
      parser->p++;
      return TRUE;
    }
    if (!knnwb_gml_key(parser, key, sizeof key))
      return knnwb_gml_fail(parser, "expected a key or ] in graphics");
    KnnwbGmlValue value;
    if (!knnwb_gml_value(parser, &value))
      return FALSE;
    if (value.is_list) {
      if (!knnwb_gml_skip_list(parser))
        return FALSE;
      continue;
    }
    if (node != NULL && value.is_number) {
      if (strcmp(key, "x") == 0) {
        node->x = value.number;
        node->has_position |= 1;
      } else if (strcmp(key, "y") == 0) {
        node->y = value.number;
        node->has_position |= 2;
      } else if (strcmp(key, "w") == 0)
        node->w = value.number;
      else if (strcmp(key, "h") == 0)
        node->h = value.number;
    } else if (node != NULL && value.is_string) {
      if (strcmp(key, "fill") == 0)
        knnwb_gml_parse_colour(value.text, node->fill);
      else if (strcmp(key, "outline") == 0)
        knnwb_gml_parse_colour(value.text, node->outline);
      else if (strcmp(key, "type") == 0)
        node->hexagon = strcmp(value.text, "hexagon") == 0;
    } else if (edge != NULL) {
      if (value.is_string && strcmp(key, "fill") == 0)
        knnwb_gml_parse_colour(value.text, edge->colour);
      else if (value.is_number && strcmp(key, "width") == 0)
        edge->width = value.number;
    }
    g_free(value.text);
  }
}

static gboolean knnwb_gml_item(KnnwbGmlParser *parser, gboolean is_node, KnnwbDrawing *drawing,
                               double *id_out, double *source, double *target)
{
  KnnwbDrawingNode node = {.w = 30, .h = 30, .font_size = 12};
  knnwb_gml_parse_colour(NULL, node.fill);
  knnwb_gml_parse_colour("#404040", node.outline);
  KnnwbDrawingEdge edge = {.width = 1};
  knnwb_gml_parse_colour("#A0A0A0", edge.colour);
  gboolean have_id = FALSE;
  char key[64];
  for (;;) {
    knnwb_gml_skip(parser);
    if (parser->p < parser->end && *parser->p == ']') {
      parser->p++;
      break;
    }
    if (!knnwb_gml_key(parser, key, sizeof key)) {
      g_free(node.label);
      return knnwb_gml_fail(parser, "expected a key or ]");
    }
    KnnwbGmlValue value;
    if (!knnwb_gml_value(parser, &value)) {
      g_free(node.label);
      return FALSE;
    }
    if (value.is_list) {
      gboolean ok;
      if (strcmp(key, "graphics") == 0)
        ok = knnwb_gml_graphics(parser, is_node ? &node : NULL, is_node ? NULL : &edge);
      else if (is_node && strcmp(key, "LabelGraphics") == 0) {
        /* only fontSize matters here */
        char inner[64];
        ok = TRUE;
        for (;;) {
          knnwb_gml_skip(parser);
          if (parser->p < parser->end && *parser->p == ']') {
            parser->p++;
            break;
          }
          if (!knnwb_gml_key(parser, inner, sizeof inner)) {
            ok = knnwb_gml_fail(parser, "expected a key or ] in LabelGraphics");
            break;
          }
          KnnwbGmlValue v;
          if (!(ok = knnwb_gml_value(parser, &v)))
            break;
          if (v.is_number && strcmp(inner, "fontSize") == 0)
            node.font_size = v.number;
          g_free(v.text);
          if (v.is_list && !(ok = knnwb_gml_skip_list(parser)))
            break;
        }
      } else
        ok = knnwb_gml_skip_list(parser);
      if (!ok) {
        g_free(node.label);
        return FALSE;
      }
      continue;
    }
    if (value.is_number && strcmp(key, "id") == 0) {
      *id_out = value.number;
      have_id = TRUE;
    } else if (value.is_number && strcmp(key, "source") == 0)
      *source = value.number;
    else if (value.is_number && strcmp(key, "target") == 0)
      *target = value.number;
    else if (value.is_number && strcmp(key, "focus") == 0)
      node.focus = value.number != 0;
    else if (value.is_string && strcmp(key, "label") == 0 && node.label == NULL) {
      node.label = value.text;
      value.text = NULL;
    }
    g_free(value.text);
  }
  if (is_node) {
    if (!have_id) {
      g_free(node.label);
      return knnwb_gml_fail(parser, "a node without an id");
    }
    g_array_append_val(drawing->nodes, node);
  } else {
    g_free(node.label); /* an edge's label is not drawn */
    g_array_append_val(drawing->edges, edge);
  }
  return TRUE;
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

KnnwbDrawing *knnwb_formats_read_gml(const char *path, GError **error)
{
  g_autofree char *contents = NULL;
  gsize length = 0;
  GError *local = NULL;
  if (!g_file_get_contents(path, &contents, &length, &local)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return NULL;
  }
  KnnwbGmlParser parser = {path, contents, contents + length, 1, error};
  g_autoptr(KnnwbDrawing) drawing = knnwb_drawing_new();
  g_autoptr(GHashTable) index = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  g_autoptr(GArray) ends = g_array_new(FALSE, FALSE, sizeof(double));
  gboolean have_graph = FALSE;
  char key[64];
  for (;;) {
    knnwb_gml_skip(&parser);
    if (parser.p >= parser.end)
      break;
    if (!knnwb_gml_key(&parser, key, sizeof key)) {
      knnwb_gml_fail(&parser, "expected a key");
      return NULL;
    }
    KnnwbGmlValue value;
    if (!knnwb_gml_value(&parser, &value))
      return NULL;
    g_free(value.text);
    if (!value.is_list)
      continue;
    if (strcmp(key, "graph") != 0) {
      if (!knnwb_gml_skip_list(&parser))
        return NULL;
      continue;
    }
    have_graph = TRUE;
    for (;;) {
      knnwb_gml_skip(&parser);
      if (parser.p < parser.end && *parser.p == ']') {
        parser.p++;
        break;
      }
      if (!knnwb_gml_key(&parser, key, sizeof key)) {
        knnwb_gml_fail(&parser, "expected a key or ] in graph");
        return NULL;
      }
      size_t line = parser.line;
      KnnwbGmlValue item;
      if (!knnwb_gml_value(&parser, &item))
        return NULL;
      if (item.is_number && strcmp(key, "directed") == 0)
        drawing->directed = item.number != 0;
      g_free(item.text);
      if (!item.is_list)
        continue;
      gboolean is_node = strcmp(key, "node") == 0;
      if (!is_node && strcmp(key, "edge") != 0) {
        if (!knnwb_gml_skip_list(&parser))
          return NULL;
        continue;
      }
      double id = -1, source = -1, target = -1;
      if (!knnwb_gml_item(&parser, is_node, drawing, &id, &source, &target))
        return NULL;
      if (is_node) {
        gint64 whole;
        if (!knnwb_gml_whole_id(id, &whole)) {
          parser.line = line;
          knnwb_gml_fail(&parser, "a node id beyond the 64-bit integers");
          return NULL;
        }
        gint64 *key_id = g_new(gint64, 1);
        *key_id = whole;
        if (g_hash_table_contains(index, key_id)) {
          g_free(key_id);
          parser.line = line;
          knnwb_gml_fail(&parser, "a second node with the same id");
          return NULL;
        }
        g_hash_table_insert(index, key_id, GUINT_TO_POINTER(drawing->nodes->len - 1));
      } else {
        double pair[3] = {source, target, (double)line};
        g_array_append_vals(ends, pair, 3);
      }
    }
  }
  if (!have_graph) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s: no `graph [ ... ]` in this file", path);
    return NULL;
  }
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
        return NULL;
      }
      (side ? &edge->target : &edge->source)[0] = GPOINTER_TO_UINT(found);
    }
  }
  for (guint v = 0; v < drawing->nodes->len; v++)
    if (g_array_index(drawing->nodes, KnnwbDrawingNode, v).has_position != 3) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                  "%s: node %u has no coordinates (graphics [ x y ]): write the GML with a "
                  "layout, e.g. `knnwb knn ... --layout fr`",
                  path, v);
      return NULL;
    }
  return g_steal_pointer(&drawing);
}
