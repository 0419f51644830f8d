/* Node colours from a node attribute, for `knnwb render --color-by`: categories get a palette of
 * distinguishable colours (a legend entry each, with its count), numbers a colour scale. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include "drawing_internal.h"

/* Twenty colours told apart at a glance (Tableau's and Kelly's qualitative sets), the first ten
 * the most distinct; more categories continue with the golden-angle cluster colours. */
static const guint32 knnwb_palette[] = {0x1F77B4, 0xFF7F0E, 0x2CA02C, 0xD62728, 0x9467BD,
                                        0x8C564B, 0xE377C2, 0x17BECF, 0xBCBD22, 0x7F7F7F,
                                        0xAEC7E8, 0xFFBB78, 0x98DF8A, 0xFF9896, 0xC5B0D5,
                                        0xC49C94, 0xF7B6D2, 0x9EDAE5, 0xDBDB8D, 0x393B79};

void knnwb_drawing_palette_colour(guint index, double rgb[3])
{
  guint32 c;
  if (index < G_N_ELEMENTS(knnwb_palette)) {
    c = knnwb_palette[index];
  } else {
    char hex[8];
    knnwb_drawing_cluster_colour((igraph_integer_t)index, hex);
    c = (guint32)strtoul(hex + 1, NULL, 16);
  }
  rgb[0] = ((c >> 16) & 255) / 255.0;
  rgb[1] = ((c >> 8) & 255) / 255.0;
  rgb[2] = (c & 255) / 255.0;
}

void knnwb_drawing_scale_colour(double t, double rgb[3])
{
  /* viridis at nine stops, interpolated: perceptually even, readable in grey and by most colour
   * blind readers. */
  static const double stops[9][3] = {
      {0.267, 0.005, 0.329}, {0.278, 0.175, 0.483}, {0.230, 0.322, 0.546},
      {0.173, 0.449, 0.558}, {0.128, 0.567, 0.551}, {0.153, 0.683, 0.502},
      {0.369, 0.789, 0.383}, {0.678, 0.864, 0.190}, {0.993, 0.906, 0.144}};
  t = isnan(t) ? 0.0 : CLAMP(t, 0.0, 1.0) * 8.0;
  int i = MIN((int)t, 7);
  double f = t - i;
  for (int k = 0; k < 3; k++)
    rgb[k] = stops[i][k] * (1 - f) + stops[i + 1][k] * f;
}

/* A category's value as text: the string, or the number as written ("%.15g"). */
static char *knnwb_colour_category(const KnnwbDrawingAttribute *column, guint v)
{
  const char *text = g_ptr_array_index(column->texts, v);
  if (text != NULL)
    return g_strdup(text);
  double number = g_array_index(column->numbers, double, v);
  if (isnan(number))
    return NULL;
  char buffer[G_ASCII_DTOSTR_BUF_SIZE];
  return g_strdup(g_ascii_formatd(buffer, sizeof buffer, "%.15g", number));
}

/* Whether column is read as categories: any string, the name `cluster`, or whole numbers with at
 * most 20 distinct values (a class code); otherwise a number scale. */
static gboolean knnwb_colour_is_categorical(const KnnwbDrawingAttribute *column)
{
  if (strcmp(column->name, "cluster") == 0)
    return TRUE;
  g_autoptr(GHashTable) seen = g_hash_table_new(g_double_hash, g_double_equal);
  for (guint v = 0; v < column->texts->len; v++) {
    if (g_ptr_array_index(column->texts, v) != NULL)
      return TRUE;
    double *x = &g_array_index(column->numbers, double, v);
    if (isnan(*x))
      continue;
    if (*x != floor(*x))
      return FALSE;
    g_hash_table_add(seen, x);
    if (g_hash_table_size(seen) > 20)
      return FALSE;
  }
  return TRUE;
}

typedef struct {
  char *text;
  guint count;
  double number; /* for sorting numeric codes by value */
  guint first;   /* first node with it: ties keep file order */
} KnnwbCategory;

static int knnwb_category_compare(gconstpointer a, gconstpointer b, gpointer numeric)
{
  const KnnwbCategory *x = a, *y = b;
  if (GPOINTER_TO_INT(numeric))
    return (x->number > y->number) - (x->number < y->number);
  if (x->count != y->count)
    return x->count < y->count ? 1 : -1;
  return (x->first > y->first) - (x->first < y->first);
}

static void knnwb_category_clear(gpointer data)
{
  g_free(((KnnwbCategory *)data)->text);
}

/* Categories: counted, sorted (numeric codes by value, words by count), coloured in that order. */
static void knnwb_colour_categories(const KnnwbDrawingAttribute *column, KnnwbNodeColours *out)
{
  guint n = column->texts->len;
  gboolean numeric = TRUE;
  for (guint v = 0; v < n && numeric; v++)
    numeric = g_ptr_array_index(column->texts, v) == NULL;
  g_autoptr(GHashTable) index = g_hash_table_new(g_str_hash, g_str_equal);
  g_autoptr(GArray) categories = g_array_new(FALSE, FALSE, sizeof(KnnwbCategory));
  g_array_set_clear_func(categories, knnwb_category_clear);
  g_autofree guint *of = g_new(guint, MAX(n, 1u));
  guint missing = 0;
  for (guint v = 0; v < n; v++) {
    char *text = knnwb_colour_category(column, v);
    if (text == NULL) {
      of[v] = G_MAXUINT;
      missing++;
      continue;
    }
    gpointer found;
    if (g_hash_table_lookup_extended(index, text, NULL, &found)) {
      g_free(text);
      of[v] = GPOINTER_TO_UINT(found);
      g_array_index(categories, KnnwbCategory, of[v]).count++;
      continue;
    }
    KnnwbCategory category = {text, 1, g_array_index(column->numbers, double, v), v};
    of[v] = categories->len;
    g_array_append_val(categories, category);
    g_hash_table_insert(index, text, GUINT_TO_POINTER(of[v]));
  }
  guint k = categories->len;
  g_autofree guint *rank = g_new(guint, MAX(k, 1u));
  g_autofree guint *sorted = g_new(guint, MAX(k, 1u));
  for (guint c = 0; c < k; c++)
    sorted[c] = c;
  /* Sort indices by the categories they name. */
  g_autoptr(GArray) copy = g_array_sized_new(FALSE, FALSE, sizeof(KnnwbCategory), k);
  for (guint c = 0; c < k; c++) {
    KnnwbCategory category = g_array_index(categories, KnnwbCategory, c);
    category.first = c; /* file order of first appearance, as ids increase */
    g_array_append_val(copy, category);
  }
  g_array_sort_with_data(copy, knnwb_category_compare, GINT_TO_POINTER(numeric));
  for (guint r = 0; r < k; r++)
    sorted[r] = g_array_index(copy, KnnwbCategory, r).first, rank[sorted[r]] = r;
  for (guint r = 0; r < k; r++) {
    KnnwbCategory *category = &g_array_index(categories, KnnwbCategory, sorted[r]);
    KnnwbLegendEntry entry = {g_strdup(category->text), {0, 0, 0}, category->count};
    knnwb_drawing_palette_colour(r, entry.rgb);
    g_array_append_val(out->legend, entry);
  }
  if (missing > 0) {
    KnnwbLegendEntry entry = {g_strdup("(none)"), {0.75, 0.75, 0.75}, missing};
    g_array_append_val(out->legend, entry);
  }
  out->category = g_new(guint, MAX(n, 1u));
  for (guint v = 0; v < n; v++) {
    out->category[v] = of[v] == G_MAXUINT ? out->legend->len - 1 : rank[of[v]];
    const double *rgb = of[v] == G_MAXUINT
                            ? g_array_index(out->legend, KnnwbLegendEntry, out->legend->len - 1).rgb
                            : g_array_index(out->legend, KnnwbLegendEntry, rank[of[v]]).rgb;
    memcpy(out->rgb + 3 * (size_t)v, rgb, 3 * sizeof(double));
  }
  out->categories = k;
}

/* column with its values as numbers when every string in it is a number as written ("44.5": a
 * writer that quotes every annotation value); NULL when some string is a word. */
static KnnwbDrawingAttribute *knnwb_colour_numeric_strings(const KnnwbDrawingAttribute *column)
{
  guint n = column->texts->len, strings = 0;
  for (guint v = 0; v < n; v++) {
    const char *text = g_ptr_array_index(column->texts, v);
    if (text == NULL)
      continue;
    char *stop = NULL;
    double x = g_ascii_strtod(text, &stop);
    if (stop == text || *stop != '\0' || !isfinite(x))
      return NULL;
    strings++;
  }
  if (strings == 0)
    return NULL;
  KnnwbDrawingAttribute *numbers = knnwb_drawing_attribute_new(column->name);
  g_ptr_array_set_size(numbers->texts, (gint)n);
  g_array_set_size(numbers->numbers, n);
  for (guint v = 0; v < n; v++) {
    const char *text = g_ptr_array_index(column->texts, v);
    g_array_index(numbers->numbers, double, v) =
        text != NULL ? g_ascii_strtod(text, NULL) : g_array_index(column->numbers, double, v);
  }
  return numbers;
}

gboolean knnwb_drawing_colour_nodes(const KnnwbDrawing *drawing, const char *name,
                                    KnnwbNodeColours *out, GError **error)
{
  guint n = drawing->nodes->len;
  memset(out, 0, sizeof *out);
  out->legend = g_array_new(FALSE, FALSE, sizeof(KnnwbLegendEntry));
  out->rgb = g_new(double, 3 * (size_t)MAX(n, 1u));
  for (guint v = 0; v < n; v++)
    memcpy(out->rgb + 3 * (size_t)v, g_array_index(drawing->nodes, KnnwbDrawingNode, v).fill,
           3 * sizeof(double));
  const KnnwbDrawingAttribute *column = NULL;
  if (name != NULL && (column = knnwb_drawing_attribute(drawing, name)) == NULL) {
    GString *known = g_string_new(NULL);
    for (guint c = 0; c < drawing->attributes->len; c++)
      g_string_append_printf(
          known, "%s%s", c ? ", " : "",
          ((KnnwbDrawingAttribute *)g_ptr_array_index(drawing->attributes, c))->name);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--color-by %s: no node attribute of that name in the GML (it has: %s)", name,
                known->len ? known->str : "none");
    g_string_free(known, TRUE);
    knnwb_drawing_node_colours_clear(out);
    return FALSE;
  }
  if (column == NULL)
    return TRUE; /* the GML's own fills */
  out->name = g_strdup(column->name);
  g_autoptr(KnnwbDrawingAttribute) as_numbers = knnwb_colour_numeric_strings(column);
  if (as_numbers != NULL)
    column = as_numbers;
  if (knnwb_colour_is_categorical(column)) {
    knnwb_colour_categories(column, out);
    return TRUE;
  }
  out->numeric = TRUE;
  out->lo = INFINITY, out->hi = -INFINITY;
  for (guint v = 0; v < n; v++) {
    double x = g_array_index(column->numbers, double, v);
    if (isfinite(x))
      out->lo = MIN(out->lo, x), out->hi = MAX(out->hi, x);
  }
  if (!(out->lo <= out->hi))
    out->lo = 0, out->hi = 1;
  double span = out->hi > out->lo ? out->hi - out->lo : 1.0;
  for (guint v = 0; v < n; v++) {
    double x = g_array_index(column->numbers, double, v);
    double *rgb = out->rgb + 3 * (size_t)v;
    if (isfinite(x))
      knnwb_drawing_scale_colour((x - out->lo) / span, rgb);
    else
      rgb[0] = rgb[1] = rgb[2] = 0.75;
  }
  return TRUE;
}

void knnwb_drawing_node_colours_clear(KnnwbNodeColours *colours)
{
  if (colours->legend != NULL) {
    for (guint i = 0; i < colours->legend->len; i++)
      g_free(g_array_index(colours->legend, KnnwbLegendEntry, i).text);
    g_array_free(colours->legend, TRUE);
  }
  g_free(colours->rgb);
  g_free(colours->category);
  g_free(colours->name);
  memset(colours, 0, sizeof *colours);
}
