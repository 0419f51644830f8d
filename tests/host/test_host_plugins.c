/* The plugin loader: loading from a temporary directory, search order, shadowing, and refusals
 * (wrong ABI, failing init, not a plugin) that leave the host working. */
#include <stdio.h>
#include <knnwb/error.h>
#include "pipeline/pipeline.h"
#include "runtime/runtime.h"
#include "steps/steps.h"
#include "host_test_util.h"

static KnnwbHostRegistry *registry_with_builtin(void)
{
  KnnwbHostRegistry *registry = knnwb_host_registry_new();
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_host_registry_add_plugin(registry, knnwb_host_builtin_descriptor(), NULL,
                                               NULL, &error));
  g_assert_no_error(error);
  return registry;
}

static void copy_file(const char *from, const char *dir, const char *name)
{
  g_autofree char *contents = NULL;
  gsize length = 0;
  g_autoptr(GError) error = NULL;
  g_assert_true(g_file_get_contents(from, &contents, &length, &error));
  g_autofree char *to = g_build_filename(dir, name, NULL);
  g_assert_true(g_file_set_contents(to, contents, (gssize)length, &error));
}

static char *test_plugin(const char *name)
{
  g_autofree char *file = g_strdup_printf("test-%s." G_MODULE_SUFFIX, name);
  return g_build_filename(KNNWB_TEST_PLUGIN_ROOT, name, file, NULL);
}

/* The kNN plugin and a test plugin copied to a fresh directory load from there. */
static void test_load_from_temporary_directory(void)
{
  g_autofree char *dir = host_test_tmpdir();
  copy_file(KNNWB_KNN_PLUGIN_FILE, dir, "knnwb-knn." G_MODULE_SUFFIX);
  g_autofree char *good = test_plugin("good");
  copy_file(good, dir, "test-good." G_MODULE_SUFFIX);
  g_free(host_test_write(dir, "README.txt", "not a module: ignored"));

  g_autoptr(KnnwbHostRegistry) registry = registry_with_builtin();
  char *dirs[] = {dir, NULL};
  knnwb_host_load_plugins(registry, dirs, TRUE);
  g_assert_cmpuint(registry->refused->len, ==, 0);
  g_assert_cmpuint(registry->plugins->len, ==, 3);
  const KnnwbHostStep *step = knnwb_host_registry_lookup(registry, "knn-graph");
  g_assert_nonnull(step);
  g_assert_cmpstr(step->plugin->name, ==, "knn");
  g_assert_true(g_str_has_prefix(step->plugin->path, dir));
  g_assert_nonnull(knnwb_host_registry_lookup(registry, "knn-query"));
  step = knnwb_host_registry_lookup(registry, "test-scale");
  g_assert_nonnull(step);
  g_assert_cmpstr(step->plugin->name, ==, "test-good");
  g_assert_nonnull(knnwb_host_registry_lookup(registry, "load-matrix"));
  host_test_rmtree(dir);
}

/* A plugin name found in two directories: the first in the search path wins, quietly. */
static void test_search_order_and_shadowing(void)
{
  g_autofree char *first = host_test_tmpdir();
  g_autofree char *second = host_test_tmpdir();
  copy_file(KNNWB_KNN_PLUGIN_FILE, first, "knnwb-knn." G_MODULE_SUFFIX);
  copy_file(KNNWB_KNN_PLUGIN_FILE, second, "knnwb-knn." G_MODULE_SUFFIX);
  g_autoptr(KnnwbHostRegistry) registry = registry_with_builtin();
  char *dirs[] = {first, second, first, "/nonexistent/knnwb/plugins", NULL};
  knnwb_host_load_plugins(registry, dirs, TRUE);
  const KnnwbHostStep *step = knnwb_host_registry_lookup(registry, "knn-graph");
  g_assert_nonnull(step);
  g_assert_true(g_str_has_prefix(step->plugin->path, first));
  g_assert_cmpuint(registry->refused->len, ==, 1);
  g_assert_nonnull(strstr(registry->refused->pdata[0], "shadowed"));

  /* The search path: option, then environment, then the default directory, in that order. */
  g_setenv("KNNWB_PLUGIN_PATH", "/env/one:/env/two", TRUE);
  g_auto(GStrv) path = knnwb_host_plugin_search_path("/option/a:/option/b");
  g_assert_cmpstr(path[0], ==, "/option/a");
  g_assert_cmpstr(path[1], ==, "/option/b");
  g_assert_cmpstr(path[2], ==, "/env/one");
  g_assert_cmpstr(path[3], ==, "/env/two");
  g_assert_nonnull(path[4]);
  g_assert_null(path[5]);
  g_unsetenv("KNNWB_PLUGIN_PATH");
  host_test_rmtree(first);
  host_test_rmtree(second);
}

/* Wrong ABI, failing init and a module without descriptor are refused with clear reasons; the
 * good plugin in the same directory still loads and nothing of the refused ones is registered. */
static void test_refusals(void)
{
  g_autofree char *dir = host_test_tmpdir();
  const char *names[] = {"good", "bad_abi", "failing_init", "no_descriptor"};
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autofree char *from = test_plugin(names[i]);
    g_autofree char *to = g_strdup_printf("test-%s." G_MODULE_SUFFIX, names[i]);
    copy_file(from, dir, to);
  }
  g_free(host_test_write(dir, "broken." G_MODULE_SUFFIX, "this is not an ELF file"));
  g_autoptr(KnnwbHostRegistry) registry = registry_with_builtin();
  char *dirs[] = {dir, NULL};
  knnwb_host_load_plugins(registry, dirs, TRUE);
  g_assert_cmpuint(registry->plugins->len, ==, 2); /* builtin and test-good */
  g_assert_nonnull(knnwb_host_registry_lookup(registry, "test-scale"));
  g_assert_null(knnwb_host_registry_lookup(registry, "test-half-registered"));
  g_assert_cmpuint(registry->refused->len, ==, 4);
  gboolean abi = FALSE, init = FALSE, descriptor = FALSE, elf = FALSE;
  /* The test plugin is built for this ABI + 41. */
  g_autofree char *bad_abi =
      g_strdup_printf("built for plugin ABI %d", KNNWB_PLUGIN_ABI_VERSION + 41);
  g_autofree char *this_abi = g_strdup_printf("this knnwb has ABI %d", KNNWB_PLUGIN_ABI_VERSION);
  for (guint i = 0; i < registry->refused->len; i++) {
    const char *message = registry->refused->pdata[i];
    g_test_message("refused: %s", message);
    if (strstr(message, "test-bad_abi") && strstr(message, bad_abi) && strstr(message, this_abi))
      abi = TRUE;
    if (strstr(message, "test-failing_init") && strstr(message, "no licence for the frobnicator"))
      init = TRUE;
    if (strstr(message, "test-no_descriptor") && strstr(message, "knnwb_plugin_descriptor"))
      descriptor = TRUE;
    if (strstr(message, "broken." G_MODULE_SUFFIX) && strstr(message, "cannot be loaded"))
      elf = TRUE;
  }
  g_assert_true(abi && init && descriptor && elf);

  /* The program says the same and goes on: `knnwb plugins` lists the good one and the refusals. */
  g_autofree char *out = NULL;
  g_assert_cmpint(host_test_run(NULL, &out, NULL, "plugins", "--plugin-path", dir, NULL), ==, 0);
  g_assert_nonnull(strstr(out, "plugin test-good 1.0"));
  g_assert_nonnull(strstr(out, "test-scale"));
  g_assert_nonnull(strstr(out, "plugin knn"));
  g_assert_nonnull(strstr(out, "refused:"));
  g_assert_nonnull(strstr(out, bad_abi));
  host_test_rmtree(dir);
}

/* A step name registered twice (two plugins) refuses the second plugin. */
static gboolean clash_init(KnnwbPluginRegistrar *registrar, GError **error)
{
  static const KnnwbStepType clash = {
      "load-matrix", "clash", NULL, 0, NULL, 0, KNNWB_KIND_MATRIX, (KnnwbStepRunFunc)clash_init, 0,
      NULL};
  return registrar->add_step(registrar, &clash, error);
}

static gboolean bad_default_init(KnnwbPluginRegistrar *registrar, GError **error)
{
  static const KnnwbParamSpec params[] = {{"k", KNNWB_PARAM_INT, "zero", 1, 10, NULL, "k"}};
  static const KnnwbStepType bad = {"bad-default",
                                    "bad",
                                    NULL,
                                    0,
                                    params,
                                    1,
                                    KNNWB_KIND_MATRIX,
                                    (KnnwbStepRunFunc)bad_default_init,
                                    0,
                                    NULL};
  return registrar->add_step(registrar, &bad, error);
}

static void test_registration_checks(void)
{
  g_autoptr(KnnwbHostRegistry) registry = registry_with_builtin();
  KnnwbPluginDescriptor clash = {KNNWB_PLUGIN_ABI_VERSION, "clash", "1", "", clash_init};
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_host_registry_add_plugin(registry, &clash, NULL, NULL, &error));
  g_assert_nonnull(strstr(error->message, "'load-matrix' is already registered by plugin "
                                          "'builtin'"));
  g_clear_error(&error);
  KnnwbPluginDescriptor bad = {KNNWB_PLUGIN_ABI_VERSION, "bad", "1", "", bad_default_init};
  g_assert_false(knnwb_host_registry_add_plugin(registry, &bad, NULL, NULL, &error));
  g_assert_nonnull(strstr(error->message, "'zero' is not an integer"));
  g_assert_null(knnwb_host_registry_lookup(registry, "bad-default"));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  knnwb_host_igraph_init();
  g_test_add_func("/host/plugins/temporary-directory", test_load_from_temporary_directory);
  g_test_add_func("/host/plugins/search-order", test_search_order_and_shadowing);
  g_test_add_func("/host/plugins/refusals", test_refusals);
  g_test_add_func("/host/plugins/registration-checks", test_registration_checks);
  return g_test_run();
}
