/*
 * libFuzzer entry for the pipeline loader: the input is a pipeline file (memfd) handed to the
 * host's knnwb_pipeline_load, so libxml2 parsing, schema validation, variables and every semantic
 * check run on it, with the built-in steps and the kNN plugin's steps registered as in the
 * program. A pipeline that loads is printed as a plan (to /dev/null) and freed; nothing is run.
 * Any crash, leak or sanitizer report is a bug; load errors are fine.
 */
#include <knnwb/plugin.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <glib/gstdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pipeline/pipeline.h"
#include "runtime/runtime.h"
#include "steps/steps.h"

/* The kNN plugin's descriptor, compiled into this target instead of loaded as a module. */
extern const KnnwbPluginDescriptor knnwb_plugin_descriptor;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_quiet(const gchar *domain, GLogLevelFlags level, const gchar *message,
                       gpointer data)
{
  (void)domain;
  (void)level;
  (void)message;
  (void)data;
}

/* The output-directory check only probes (creates and removes a file); the directory itself goes
 * when the fuzzer exits. */
static char *output_dir;

static void fuzz_remove_output_dir(void)
{
  if (output_dir != NULL)
    g_rmdir(output_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static int fd = -1;
  static char path[64];
  static KnnwbHostRegistry *registry;
  static FILE *sink;
  if (fd < 0) {
    fd = memfd_create("knnwb-fuzz-pipeline.xml", 0);
    sink = fopen("/dev/null", "w");
    output_dir = g_dir_make_tmp("knnwb-fuzz-XXXXXX", NULL);
    if (fd < 0 || sink == NULL || output_dir == NULL)
      return 0;
    atexit(fuzz_remove_output_dir);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    knnwb_host_igraph_init();
    g_log_set_handler(NULL, G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE, fuzz_quiet, NULL);
    g_log_set_handler("knnwb", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE, fuzz_quiet, NULL);
    registry = knnwb_host_registry_new();
    if (!knnwb_host_registry_add_plugin(registry, knnwb_host_builtin_descriptor(), NULL, NULL,
                                        NULL) ||
        !knnwb_host_registry_add_plugin(registry, &knnwb_plugin_descriptor, NULL, NULL, NULL))
      __builtin_trap();
  }
  if (registry == NULL)
    return 0;
  if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size))
    return 0;

  /* One override, so the --set path is exercised too (an unknown name is an error). */
  g_autoptr(GHashTable) overrides = g_hash_table_new(g_str_hash, g_str_equal);
  if (size % 2)
    g_hash_table_insert(overrides, (gpointer) "k", (gpointer) "7");
  KnnwbPipelineOptions options = {0};
  options.overrides = overrides;
  options.output_dir = output_dir;
  options.quiet = TRUE;
  GError *error = NULL;
  KnnwbPipeline *pipeline = knnwb_pipeline_load(path, registry, &options, &error);
  if (pipeline != NULL) {
    knnwb_pipeline_print_plan(pipeline, sink);
    knnwb_pipeline_free(pipeline);
  }
  g_clear_error(&error);
  return 0;
}
