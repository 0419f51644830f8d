/* Variables of a pipeline: ${name} in parameter values and in other variables' values.
 *
 * A variable's value is expanded once, on first use (memoised), so a chain of n variables costs
 * O(n) expansions. A variable met again while its own value is being expanded is a cycle, reported
 * with its path. Expanded values are capped (KNNWB_PIPELINE_VARIABLE_MAX_BYTES), so doubling
 * definitions (${a}${a} ...) cannot grow without bound, and so is the nesting depth, so a long
 * chain cannot exhaust the stack. The sum of every expanded text (variables' values and parameter
 * values) is capped too (KNNWB_PIPELINE_EXPANDED_MAX_BYTES): one large variable used in thousands
 * of parameters would otherwise make gigabytes from a small file. Each cap is checked before the
 * bytes are appended, so nothing above it is ever allocated, and the work is linear in the
 * pipeline's text plus at most the total cap. `$${` writes a literal `${`; a '$' not followed by
 * '{' is kept. The built-in ${pipeline_dir} and ${output_dir} are paths and are never expanded. */
#include <string.h>
#include "pipeline/pipeline_internal.h"

#define KNNWB_PIPELINE_VARIABLE_MAX_BYTES ((gsize)1 << 20)
#define KNNWB_PIPELINE_VARIABLE_MAX_DEPTH 64
/* As large as the pipeline file may be (xml.c): expansion cannot hold more than the text did. */
#define KNNWB_PIPELINE_EXPANDED_MAX_BYTES ((gsize)64 << 20)

typedef enum {
  KNNWB_VARIABLE_RAW,       /* value not expanded yet */
  KNNWB_VARIABLE_EXPANDING, /* on the current expansion path */
  KNNWB_VARIABLE_DONE,      /* value expanded */
  KNNWB_VARIABLE_FAILED,    /* expanding it failed and was reported */
} KnnwbVariableState;

typedef struct {
  const char *name;
  char *value; /* owned by the KnnwbPipelineVariable (or the pipeline for built-ins) */
  char **slot; /* where the expanded value is stored */
  int line;
  KnnwbVariableState state;
  gsize length; /* of the expanded value (DONE): a reference costs O(1) before it is copied */
} KnnwbVariableEntry;

typedef struct {
  GHashTable *entries; /* name -> KnnwbVariableEntry * */
  GPtrArray *path;     /* names on the current expansion path, for cycle messages */
  KnnwbPipelineDiagnostics *diagnostics;
  gsize total;           /* bytes of every expanded text kept so far */
  gboolean total_failed; /* the total cap was passed (reported once) */
} KnnwbVariableScope;

static const char *knnwb_pipeline_variable_value(KnnwbVariableScope *scope,
                                                 KnnwbVariableEntry *entry);

/* Whether length more bytes may be appended to out (of the text at line); reports the cap passed
 * (the total one only once) when not. */
static gboolean knnwb_pipeline_expand_fits(KnnwbVariableScope *scope, const GString *out,
                                           gsize length, int line, const char *what)
{
  if (length > KNNWB_PIPELINE_VARIABLE_MAX_BYTES - out->len) {
    knnwb_pipeline_report(scope->diagnostics, line,
                          "%s expands to more than %" G_GSIZE_FORMAT " MiB", what,
                          KNNWB_PIPELINE_VARIABLE_MAX_BYTES >> 20);
    return FALSE;
  }
  if (scope->total_failed)
    return FALSE;
  if (out->len + length > KNNWB_PIPELINE_EXPANDED_MAX_BYTES - scope->total) {
    knnwb_pipeline_report(scope->diagnostics, line,
                          "%s: the pipeline's variables and parameters expand to more than "
                          "%" G_GSIZE_FORMAT " MiB in all (a large variable used in many places?)",
                          what, KNNWB_PIPELINE_EXPANDED_MAX_BYTES >> 20);
    scope->total_failed = TRUE;
    return FALSE;
  }
  return TRUE;
}

/* Expands text; NULL (reported at line) on an undefined or unterminated reference, a cycle, or a
 * result above a size cap (the value's or the total). what names the text in messages. */
static char *knnwb_pipeline_expand(KnnwbVariableScope *scope, const char *text, int line,
                                   const char *what)
{
  g_autoptr(GString) out = g_string_new(NULL);
  const char *p = text;
  while (*p) {
    if (p[0] == '$' && p[1] == '$' && p[2] == '{') {
      if (!knnwb_pipeline_expand_fits(scope, out, 2, line, what))
        return NULL;
      g_string_append(out, "${");
      p += 3;
      continue;
    }
    if (p[0] != '$' || p[1] != '{') {
      const char *next = strchr(p + 1, '$');
      gsize length = next ? (gsize)(next - p) : strlen(p);
      if (!knnwb_pipeline_expand_fits(scope, out, length, line, what))
        return NULL;
      g_string_append_len(out, p, (gssize)length);
      p += length;
    } else {
      const char *close = strchr(p + 2, '}');
      if (close == NULL) {
        knnwb_pipeline_report(scope->diagnostics, line,
                              "unterminated variable reference in %s '%s' (write $${ for a "
                              "literal ${)",
                              what, text);
        return NULL;
      }
      g_autofree char *name = g_strndup(p + 2, (gsize)(close - p - 2));
      KnnwbVariableEntry *entry = g_hash_table_lookup(scope->entries, name);
      if (entry == NULL) {
        knnwb_pipeline_report(scope->diagnostics, line,
                              "undefined variable '${%s}' in %s (define it with <variable "
                              "name=\"%s\" value=\"...\"/> or --set %s=...; write $${ for a "
                              "literal ${)",
                              name, what, name, name);
        return NULL;
      }
      const char *value = knnwb_pipeline_variable_value(scope, entry);
      if (value == NULL)
        return NULL; /* reported where the variable is defined */
      gsize length = entry->length;
      if (!knnwb_pipeline_expand_fits(scope, out, length, line, what))
        return NULL;
      g_string_append_len(out, value, (gssize)length);
      p = close + 1;
    }
  }
  scope->total += out->len;
  return g_string_free(g_steal_pointer(&out), FALSE);
}

/* The expanded value of entry, expanding it on first use; NULL when that failed (reported once). */
static const char *knnwb_pipeline_variable_value(KnnwbVariableScope *scope,
                                                 KnnwbVariableEntry *entry)
{
  switch (entry->state) {
  case KNNWB_VARIABLE_DONE:
    return *entry->slot;
  case KNNWB_VARIABLE_FAILED:
    return NULL;
  case KNNWB_VARIABLE_EXPANDING: {
    g_autoptr(GString) cycle = g_string_new(NULL);
    guint start = 0;
    while (strcmp(scope->path->pdata[start], entry->name) != 0)
      start++;
    for (guint i = start; i < scope->path->len; i++)
      g_string_append_printf(cycle, "${%s} -> ", (const char *)scope->path->pdata[i]);
    g_string_append_printf(cycle, "${%s}", entry->name);
    knnwb_pipeline_report(scope->diagnostics, entry->line,
                          "variable '%s' refers to itself through a cycle: %s", entry->name,
                          cycle->str);
    entry->state = KNNWB_VARIABLE_FAILED;
    return NULL;
  }
  case KNNWB_VARIABLE_RAW:
    break;
  }
  if (scope->path->len >= KNNWB_PIPELINE_VARIABLE_MAX_DEPTH) {
    knnwb_pipeline_report(scope->diagnostics, entry->line,
                          "variable '%s': variables refer to variables more than %d levels deep",
                          entry->name, KNNWB_PIPELINE_VARIABLE_MAX_DEPTH);
    entry->state = KNNWB_VARIABLE_FAILED;
    return NULL;
  }
  entry->state = KNNWB_VARIABLE_EXPANDING;
  g_ptr_array_add(scope->path, (gpointer)entry->name);
  g_autofree char *what = g_strdup_printf("the value of variable '%s'", entry->name);
  char *expanded = knnwb_pipeline_expand(scope, entry->value, entry->line, what);
  g_ptr_array_remove_index(scope->path, scope->path->len - 1);
  if (entry->state == KNNWB_VARIABLE_FAILED || expanded == NULL) {
    g_free(expanded);
    entry->state = KNNWB_VARIABLE_FAILED;
    return NULL;
  }
  g_free(*entry->slot);
  *entry->slot = expanded;
  entry->length = strlen(expanded);
  entry->state = KNNWB_VARIABLE_DONE;
  return expanded;
}

void knnwb_pipeline_resolve_variables(KnnwbPipeline *pipeline, GHashTable *overrides,
                                      KnnwbPipelineDiagnostics *diagnostics)
{
  g_autoptr(GHashTable) entries = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free);
  g_autoptr(GPtrArray) path = g_ptr_array_new();
  KnnwbVariableScope scope = {entries, path, diagnostics, 0, FALSE};
  const char *built_in_names[] = {"pipeline_dir", "output_dir"};
  char **built_in_values[] = {&pipeline->dir, &pipeline->output_dir};
  for (guint i = 0; i < G_N_ELEMENTS(built_in_names); i++) {
    KnnwbVariableEntry *entry = g_new0(KnnwbVariableEntry, 1);
    entry->name = built_in_names[i];
    entry->slot = built_in_values[i];
    entry->length = *entry->slot ? strlen(*entry->slot) : 0;
    entry->state = KNNWB_VARIABLE_DONE;
    g_hash_table_insert(entries, (gpointer)entry->name, entry);
  }
  for (guint i = 0; i < pipeline->variables->len; i++) {
    KnnwbPipelineVariable *variable = pipeline->variables->pdata[i];
    if (g_hash_table_contains(entries, variable->name)) {
      knnwb_pipeline_report(
          diagnostics, variable->line, "variable '%s' is defined twice%s", variable->name,
          strcmp(variable->name, "pipeline_dir") == 0 || strcmp(variable->name, "output_dir") == 0
              ? " (it is built in)"
              : "");
      continue;
    }
    const char *override = overrides ? g_hash_table_lookup(overrides, variable->name) : NULL;
    if (override != NULL) {
      g_free(variable->value);
      variable->value = g_strdup(override);
      variable->overridden = TRUE;
    }
    KnnwbVariableEntry *entry = g_new0(KnnwbVariableEntry, 1);
    entry->name = variable->name;
    entry->value = variable->value;
    entry->slot = &variable->value;
    entry->line = variable->line;
    g_hash_table_insert(entries, variable->name, entry);
  }
  if (overrides != NULL) {
    GHashTableIter iter;
    gpointer name;
    g_hash_table_iter_init(&iter, overrides);
    while (g_hash_table_iter_next(&iter, &name, NULL)) {
      KnnwbVariableEntry *entry = g_hash_table_lookup(entries, name);
      if (entry == NULL || entry->line == 0)
        knnwb_pipeline_report(diagnostics, 0,
                              "--set %s: the pipeline defines no variable '%s' (add <variable "
                              "name=\"%s\" value=\"...\"/>)",
                              (const char *)name, (const char *)name, (const char *)name);
    }
  }
  /* Every variable is expanded, used or not, so a broken definition is reported where it is. */
  for (guint i = 0; i < pipeline->variables->len; i++) {
    KnnwbPipelineVariable *variable = pipeline->variables->pdata[i];
    KnnwbVariableEntry *entry = g_hash_table_lookup(entries, variable->name);
    if (entry != NULL && entry->slot == &variable->value)
      knnwb_pipeline_variable_value(&scope, entry);
  }
  for (guint s = 0; s < pipeline->steps->len; s++) {
    KnnwbPipelineStep *step = pipeline->steps->pdata[s];
    for (guint i = 0; i < step->params->len; i++) {
      KnnwbPipelineParam *param = step->params->pdata[i];
      g_autofree char *what = g_strdup_printf("parameter '%s' of step '%s'", param->name, step->id);
      param->value = knnwb_pipeline_expand(&scope, param->raw, param->line, what);
    }
  }
}
