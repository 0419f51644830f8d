/* Node attributes of the GML and GraphML writers: which columns are numbers, and GML's keys. */
#include "write_internal.h"

#include <math.h>
#include <string.h>
#include <knnwb/text_fields.h>

gboolean knnwb_formats_attribute_missing(const char *value)
{
  return value == NULL || knnwb_formats_is_missing_token(value, strlen(value));
}

/* A finite number and nothing else (blanks around it allowed), in the C locale. */
static gboolean knnwb_attribute_number(const char *text, double *value)
{
  char *end = NULL;
  while (*text == ' ')
    text++;
  *value = g_ascii_strtod(text, &end);
  if (end == text)
    return FALSE;
  while (*end == ' ')
    end++;
  return *end == '\0' && isfinite(*value);
}

/* GML keys are [A-Za-z][A-Za-z0-9]*: the rest goes, the letter after it capitalised. */
static char *knnwb_attribute_gml_key(const char *name)
{
  static const char *const reserved[] = {
      "id",   "label", "cluster", "clusterSize", "focus",  "graphics", "LabelGraphics",
      "node", "edge",  "source",  "target",      "weight", "directed"};
  GString *key = g_string_new(NULL);
  gboolean upper = FALSE;
  for (const char *c = name; *c != '\0'; c++) {
    if (g_ascii_isalnum(*c)) {
      g_string_append_c(key, upper && key->len > 0 ? g_ascii_toupper(*c) : *c);
      upper = FALSE;
    } else {
      upper = TRUE;
    }
  }
  gboolean clash = key->len == 0 || g_ascii_isdigit(key->str[0]);
  for (size_t r = 0; !clash && r < G_N_ELEMENTS(reserved); r++)
    clash = strcmp(key->str, reserved[r]) == 0;
  if (clash) {
    if (key->len > 0)
      key->str[0] = g_ascii_toupper(key->str[0]);
    g_string_prepend(key, "attr");
  }
  return g_string_free(key, FALSE);
}

KnnwbAttributePlan *knnwb_formats_attributes_plan(const KnnwbGraphOutput *output)
{
  if (output->attributes == NULL || output->n_attributes == 0)
    return NULL;
  const igraph_integer_t n = igraph_vcount(output->graph);
  KnnwbAttributePlan *plan = g_new0(KnnwbAttributePlan, output->n_attributes);
  for (size_t a = 0; a < output->n_attributes; a++) {
    const KnnwbNodeAttribute *attribute = &output->attributes[a];
    plan[a].gml_key = knnwb_attribute_gml_key(attribute->name);
    /* Two columns with one key: the later gets a number. */
    for (size_t b = 0; b < a; b++)
      if (strcmp(plan[a].gml_key, plan[b].gml_key) == 0) {
        char *numbered = g_strdup_printf("%s%zu", plan[a].gml_key, a + 1);
        g_free(plan[a].gml_key);
        plan[a].gml_key = numbered;
        break;
      }
    double *numbers = g_new(double, MAX(n, 1));
    gboolean numeric = TRUE, any = FALSE;
    for (igraph_integer_t v = 0; numeric && v < n; v++) {
      const char *value = attribute->values[v];
      numbers[v] = NAN;
      if (knnwb_formats_attribute_missing(value))
        continue;
      any = TRUE;
      numeric = knnwb_attribute_number(value, &numbers[v]);
    }
    plan[a].numeric = numeric && any;
    if (plan[a].numeric)
      plan[a].numbers = numbers;
    else
      g_free(numbers);
  }
  return plan;
}

void knnwb_formats_attributes_free(KnnwbAttributePlan *plan, size_t n_attributes)
{
  for (size_t a = 0; plan != NULL && a < n_attributes; a++) {
    g_free(plan[a].gml_key);
    g_free(plan[a].numbers);
  }
  g_free(plan);
}
