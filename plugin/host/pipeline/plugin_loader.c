/* Finding and loading plugin modules: --plugin-path, then KNNWB_PLUGIN_PATH, then the installed
 * plugin directory. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <knnwb/error.h>
#include "pipeline/pipeline.h"

#ifndef KNNWB_PLUGIN_INSTALL_DIR
#error "KNNWB_PLUGIN_INSTALL_DIR must be defined by the build"
#endif

/* The installed plugin directory. When the program runs from its build tree, that is the build's
 * plugin directory; when the installed tree was moved (or installed with another --prefix), the
 * directory at the same place relative to the program; otherwise the configured one. */
static char *knnwb_host_default_plugin_dir(void)
{
  g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
  if (self != NULL) {
    g_autofree char *dir = g_path_get_dirname(self);
#if defined(KNNWB_BUILD_HOST_DIR) && defined(KNNWB_BUILD_PLUGIN_DIR)
    if (strcmp(dir, KNNWB_BUILD_HOST_DIR) == 0)
      return g_strdup(KNNWB_BUILD_PLUGIN_DIR);
#endif
#ifdef KNNWB_PLUGIN_RELATIVE_DIR
    g_autofree char *relative = g_build_filename(dir, KNNWB_PLUGIN_RELATIVE_DIR, NULL);
    if (g_file_test(relative, G_FILE_TEST_IS_DIR))
      return g_canonicalize_filename(relative, NULL);
#endif
  }
  return g_strdup(KNNWB_PLUGIN_INSTALL_DIR);
}

char **knnwb_host_plugin_search_path(const char *option_path)
{
  GPtrArray *dirs = g_ptr_array_new();
  const char *sources[] = {option_path, g_getenv("KNNWB_PLUGIN_PATH")};
  for (guint s = 0; s < G_N_ELEMENTS(sources); s++) {
    if (sources[s] == NULL)
      continue;
    g_auto(GStrv) parts = g_strsplit(sources[s], G_SEARCHPATH_SEPARATOR_S, -1);
    for (char **p = parts; *p; p++)
      if (**p != '\0')
        g_ptr_array_add(dirs, g_strdup(*p));
  }
  g_ptr_array_add(dirs, knnwb_host_default_plugin_dir());
  g_ptr_array_add(dirs, NULL);
  return (char **)g_ptr_array_free(dirs, FALSE);
}

/* shadowed: set when a plugin of the same name is already loaded (an earlier directory of the
 * search path wins; that is how a user overrides an installed plugin). */
static gboolean knnwb_host_load_plugin_file_full(KnnwbHostRegistry *registry, const char *path,
                                                 gboolean *shadowed, GError **error)
{
  g_autoptr(GError) local = NULL;
  /* LOCAL: a plugin's symbols must not satisfy another plugin's; no LAZY: a missing symbol is
   * reported now, as a refusal, instead of crashing mid-run. */
  GModule *module = g_module_open_full(path, G_MODULE_BIND_LOCAL, &local);
  if (module == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "cannot be loaded: %s", local->message);
    return FALSE;
  }
  gpointer symbol = NULL;
  if (!g_module_symbol(module, KNNWB_PLUGIN_DESCRIPTOR_SYMBOL, &symbol) || symbol == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                "exports no '%s' symbol (not a knnwb plugin; see knnwb/plugin.h)",
                KNNWB_PLUGIN_DESCRIPTOR_SYMBOL);
    g_module_close(module);
    return FALSE;
  }
  const KnnwbPluginDescriptor *descriptor = symbol;
  if (shadowed != NULL && descriptor->abi_version == KNNWB_PLUGIN_ABI_VERSION &&
      descriptor->name != NULL) {
    for (guint i = 0; i < registry->plugins->len; i++) {
      const KnnwbHostPlugin *other = registry->plugins->pdata[i];
      if (strcmp(other->name, descriptor->name) == 0) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "shadowed by plugin '%s' from %s",
                    other->name, other->path ? other->path : "the host");
        *shadowed = TRUE;
        g_module_close(module);
        return FALSE;
      }
    }
  }
  if (!knnwb_host_registry_add_plugin(registry, descriptor, path, module, error)) {
    g_module_close(module);
    return FALSE;
  }
  /* Step tables and run functions live in the module for the rest of the process. */
  g_module_make_resident(module);
  return TRUE;
}

gboolean knnwb_host_load_plugin_file(KnnwbHostRegistry *registry, const char *path, GError **error)
{
  return knnwb_host_load_plugin_file_full(registry, path, NULL, error);
}

static int knnwb_host_compare_names(const void *a, const void *b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void knnwb_host_load_plugins(KnnwbHostRegistry *registry, char *const *directories, gboolean quiet)
{
  const size_t suffix_length = strlen("." G_MODULE_SUFFIX);
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, free, NULL);
  for (char *const *dir = directories; *dir; dir++) {
    /* The same directory twice (KNNWB_PLUGIN_PATH naming the default one) is searched once. */
    char *canonical = realpath(*dir, NULL);
    if (canonical == NULL)
      continue; /* the installed directory may not exist in a build tree */
    if (!g_hash_table_add(seen, canonical))
      continue;
    g_autoptr(GDir) handle = g_dir_open(*dir, 0, NULL);
    if (handle == NULL)
      continue;
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *name;
    while ((name = g_dir_read_name(handle)) != NULL) {
      size_t length = strlen(name);
      if (length > suffix_length && strcmp(name + length - suffix_length, "." G_MODULE_SUFFIX) == 0)
        g_ptr_array_add(names, g_strdup(name));
    }
    /* Directory order is arbitrary; sorted loading makes clashes resolve the same way always. */
    if (names->len > 1) /* (an empty directory's pdata is NULL, which qsort must not get) */
      qsort(names->pdata, names->len, sizeof(gpointer), knnwb_host_compare_names);
    for (guint i = 0; i < names->len; i++) {
      g_autofree char *path = g_build_filename(*dir, names->pdata[i], NULL);
      g_autoptr(GError) error = NULL;
      gboolean shadowed = FALSE;
      if (!knnwb_host_load_plugin_file_full(registry, path, &shadowed, &error)) {
        char *message = g_strdup_printf("%s: %s", path, error->message);
        if (!quiet && !shadowed)
          g_printerr("knnwb: plugin refused: %s\n", message);
        g_ptr_array_add(registry->refused, message);
      }
    }
  }
}
