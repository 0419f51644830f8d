/* The step registry: every step type a pipeline may use, from the host itself and from plugins. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/version.h>
#include "pipeline/pipeline_internal.h"
#include "runtime/runtime.h"

static void knnwb_host_plugin_free(gpointer data)
{
  KnnwbHostPlugin *plugin = data;
  g_free(plugin->name);
  g_free(plugin->version);
  g_free(plugin->description);
  g_free(plugin->path);
  g_ptr_array_unref(plugin->steps);
  /* Modules are made resident: their step tables may be referenced until exit. */
  g_free(plugin);
}

KnnwbHostRegistry *knnwb_host_registry_new(void)
{
  KnnwbHostRegistry *registry = g_new0(KnnwbHostRegistry, 1);
  registry->plugins = g_ptr_array_new_with_free_func(knnwb_host_plugin_free);
  registry->steps = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free);
  registry->refused = g_ptr_array_new_with_free_func(g_free);
  return registry;
}

void knnwb_host_registry_free(KnnwbHostRegistry *registry)
{
  if (registry == NULL)
    return;
  g_hash_table_unref(registry->steps);
  g_ptr_array_unref(registry->plugins);
  g_ptr_array_unref(registry->refused);
  g_free(registry);
}

const KnnwbHostStep *knnwb_host_registry_lookup(const KnnwbHostRegistry *registry, const char *name)
{
  return g_hash_table_lookup(registry->steps, name);
}

static int knnwb_host_compare_strings(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char **knnwb_host_registry_step_names(const KnnwbHostRegistry *registry, guint *n)
{
  const char **names = (const char **)g_hash_table_get_keys_as_array(registry->steps, n);
  qsort(names, *n, sizeof *names, knnwb_host_compare_strings);
  return names;
}

/* ---------------------------------------------------------------------------------------------- */

static gboolean knnwb_host_choice_contains(const char *choices, const char *word)
{
  size_t length = strlen(word);
  for (const char *p = choices; *p;) {
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n == length && strncmp(p, word, n) == 0)
      return TRUE;
    if (bar == NULL)
      break;
    p = bar + 1;
  }
  return FALSE;
}

static gboolean knnwb_host_param_range(const KnnwbParamSpec *spec, double value, const char *text,
                                       GError **error)
{
  if (spec->minimum > spec->maximum)
    return TRUE;
  if (value < spec->minimum || value > spec->maximum) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "parameter '%s': %s is out of range [%.15g, %.15g]", spec->name, text,
                spec->minimum, spec->maximum);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_host_param_parse(const KnnwbParamSpec *spec, const char *text,
                                KnnwbParamValue *value, GError **error)
{
  value->v_string = text;
  switch (spec->type) {
  case KNNWB_PARAM_INT: {
    char *end = NULL;
    errno = 0;
    gint64 number = g_ascii_strtoll(text, &end, 10);
    if (*text == '\0' || g_ascii_isspace(*text) || *end != '\0') {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "parameter '%s': '%s' is not an integer", spec->name, text);
      return FALSE;
    }
    if (errno == ERANGE) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "parameter '%s': %s does not fit in 64 bits", spec->name, text);
      return FALSE;
    }
    if (!knnwb_host_param_range(spec, (double)number, text, error))
      return FALSE;
    value->v_int = number;
    value->v_double = (double)number;
    return TRUE;
  }
  case KNNWB_PARAM_DOUBLE: {
    char *end = NULL;
    double number = g_ascii_strtod(text, &end);
    if (*text == '\0' || g_ascii_isspace(*text) || *end != '\0' || !isfinite(number)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "parameter '%s': '%s' is not a finite number", spec->name, text);
      return FALSE;
    }
    if (!knnwb_host_param_range(spec, number, text, error))
      return FALSE;
    value->v_double = number;
    return TRUE;
  }
  case KNNWB_PARAM_BOOLEAN: {
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (guint i = 0; i < G_N_ELEMENTS(yes); i++) {
      if (g_ascii_strcasecmp(text, yes[i]) == 0) {
        value->v_int = 1;
        return TRUE;
      }
      if (g_ascii_strcasecmp(text, no[i]) == 0) {
        value->v_int = 0;
        return TRUE;
      }
    }
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "parameter '%s': '%s' is not a boolean (true or false)", spec->name, text);
    return FALSE;
  }
  case KNNWB_PARAM_CHOICE:
    if (!knnwb_host_choice_contains(spec->choices, text)) {
      g_autofree char *list = g_strdup(spec->choices);
      g_strdelimit(list, "|", ',');
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "parameter '%s': '%s' is not one of %s", spec->name, text, list);
      return FALSE;
    }
    return TRUE;
  case KNNWB_PARAM_BYTES: {
    guint64 bytes;
    g_autoptr(GError) local = NULL;
    if (!knnwb_host_parse_bytes(text, &bytes, &local) || bytes > G_MAXINT64) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "parameter '%s': %s",
                  spec->name, local ? local->message : "size too large");
      return FALSE;
    }
    if (!knnwb_host_param_range(spec, (double)bytes, text, error))
      return FALSE;
    value->v_int = (gint64)bytes;
    value->v_double = (double)bytes;
    return TRUE;
  }
  case KNNWB_PARAM_INPUT_FILE:
  case KNNWB_PARAM_OUTPUT_FILE:
    if (*text == '\0') {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "parameter '%s': empty file name", spec->name);
      return FALSE;
    }
    return TRUE;
  case KNNWB_PARAM_STRING:
    return TRUE;
  }
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "parameter '%s': unknown type %d",
              spec->name, (int)spec->type);
  return FALSE;
}

/* ---------------------------------------------------------------------------------------------- */

typedef struct {
  KnnwbHostRegistry *registry;
  GPtrArray *pending; /* const KnnwbStepType *, committed when init succeeds */
} KnnwbHostRegistrarState;

static gboolean knnwb_host_name_is_valid(const char *name)
{
  if (name == NULL || !g_ascii_isalpha(*name))
    return FALSE;
  for (const char *p = name; *p; p++)
    if (!g_ascii_isalnum(*p) && *p != '-' && *p != '_' && *p != '.')
      return FALSE;
  return TRUE;
}

static gboolean knnwb_host_check_step_type(const KnnwbStepType *type, GError **error)
{
  if (!knnwb_host_name_is_valid(type->name)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                "step type name '%s' is not a name (letters, digits, '-', '_', '.')",
                type->name ? type->name : "(null)");
    return FALSE;
  }
  if (type->run == NULL || (unsigned)type->output >= KNNWB_KIND_COUNT ||
      (type->n_inputs > 0 && type->inputs == NULL) ||
      (type->n_params > 0 && type->params == NULL)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                "step type '%s': malformed description (no run function, bad output kind or "
                "missing tables)",
                type->name);
    return FALSE;
  }
  for (guint i = 0; i < type->n_inputs; i++) {
    const KnnwbPortSpec *port = &type->inputs[i];
    if (!knnwb_host_name_is_valid(port->name) || port->kind == KNNWB_KIND_NONE ||
        (unsigned)port->kind >= KNNWB_KIND_COUNT) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "step type '%s': input %u is malformed",
                  type->name, i);
      return FALSE;
    }
    for (guint j = 0; j < i; j++)
      if (strcmp(type->inputs[j].name, port->name) == 0) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "step type '%s': two inputs named '%s'",
                    type->name, port->name);
        return FALSE;
      }
  }
  for (guint i = 0; i < type->n_params; i++) {
    const KnnwbParamSpec *spec = &type->params[i];
    if (!knnwb_host_name_is_valid(spec->name) || (unsigned)spec->type > KNNWB_PARAM_OUTPUT_FILE ||
        (spec->type == KNNWB_PARAM_CHOICE && (spec->choices == NULL || *spec->choices == '\0'))) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                  "step type '%s': parameter %u is malformed", type->name, i);
      return FALSE;
    }
    for (guint j = 0; j < i; j++)
      if (strcmp(type->params[j].name, spec->name) == 0) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                    "step type '%s': two parameters named '%s'", type->name, spec->name);
        return FALSE;
      }
    /* A default must pass its own checks, or every pipeline omitting it would fail late. Empty
     * defaults of file and string parameters mean "optional, not given". */
    if (spec->default_value != NULL && *spec->default_value != '\0') {
      KnnwbParamValue value = {0};
      g_autoptr(GError) local = NULL;
      if (!knnwb_host_param_parse(spec, spec->default_value, &value, &local)) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "step type '%s': default of %s",
                    type->name, local->message);
        return FALSE;
      }
    }
  }
  return TRUE;
}

static gboolean knnwb_host_registrar_add_step(KnnwbPluginRegistrar *registrar,
                                              const KnnwbStepType *type, GError **error)
{
  KnnwbHostRegistrarState *state = registrar->host_private;
  if (type == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "NULL step type");
    return FALSE;
  }
  if (!knnwb_host_check_step_type(type, error))
    return FALSE;
  const KnnwbHostStep *existing = knnwb_host_registry_lookup(state->registry, type->name);
  if (existing != NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                "step type '%s' is already registered by plugin '%s'", type->name,
                existing->plugin->name);
    return FALSE;
  }
  for (guint i = 0; i < state->pending->len; i++)
    if (strcmp(((const KnnwbStepType *)state->pending->pdata[i])->name, type->name) == 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "step type '%s' registered twice",
                  type->name);
      return FALSE;
    }
  g_ptr_array_add(state->pending, (gpointer)type);
  return TRUE;
}

gboolean knnwb_host_registry_add_plugin(KnnwbHostRegistry *registry,
                                        const KnnwbPluginDescriptor *descriptor, const char *path,
                                        GModule *module, GError **error)
{
  if (descriptor->abi_version != KNNWB_PLUGIN_ABI_VERSION) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                "built for plugin ABI %u but this knnwb has ABI %u; rebuild it against knnwb %s",
                (unsigned)descriptor->abi_version, (unsigned)KNNWB_PLUGIN_ABI_VERSION,
                KNNWB_VERSION_STRING);
    return FALSE;
  }
  if (!knnwb_host_name_is_valid(descriptor->name) || descriptor->init == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                "malformed descriptor (missing name or init function)");
    return FALSE;
  }
  for (guint i = 0; i < registry->plugins->len; i++) {
    const KnnwbHostPlugin *other = registry->plugins->pdata[i];
    if (strcmp(other->name, descriptor->name) == 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                  "a plugin named '%s' is already loaded from %s", descriptor->name,
                  other->path ? other->path : "the host");
      return FALSE;
    }
  }

  KnnwbHostRegistrarState state = {registry, g_ptr_array_new()};
  KnnwbPluginRegistrar registrar = {knnwb_host_registrar_add_step, &state};
  g_autoptr(GError) local = NULL;
  if (!descriptor->init(&registrar, &local)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "its init function failed: %s",
                local ? local->message : "(no message)");
    g_ptr_array_unref(state.pending);
    return FALSE;
  }

  KnnwbHostPlugin *plugin = g_new0(KnnwbHostPlugin, 1);
  plugin->name = g_strdup(descriptor->name);
  plugin->version = g_strdup(descriptor->version ? descriptor->version : "");
  plugin->description = g_strdup(descriptor->description ? descriptor->description : "");
  plugin->path = g_strdup(path);
  plugin->module = module;
  plugin->steps = state.pending;
  g_ptr_array_add(registry->plugins, plugin);
  for (guint i = 0; i < plugin->steps->len; i++) {
    KnnwbHostStep *step = g_new0(KnnwbHostStep, 1);
    step->type = plugin->steps->pdata[i];
    step->plugin = plugin;
    g_hash_table_insert(registry->steps, (gpointer)step->type->name, step);
  }
  return TRUE;
}
