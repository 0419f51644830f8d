/* `knnwb run`, `knnwb validate` and `knnwb plugins`: the commands that use the step registry. */
#include <stdio.h>
#include <string.h>
#include <knnwb/error.h>
#include "commands.h"
#include "options.h"
#include "pipeline/pipeline.h"
#include "runtime/runtime.h"
#include "steps/steps.h"

typedef struct {
  char *plugin_path;
  char **set;
  char *output_dir;
  char *confine;
  int threads;
  char *memory;
  gboolean dry_run;
  gboolean report;
  gboolean quiet;
  char **rest;
} KnnwbPipelineCommand;

static void knnwb_pipeline_command_clear(KnnwbPipelineCommand *command)
{
  g_free(command->plugin_path);
  g_strfreev(command->set);
  g_free(command->output_dir);
  g_free(command->confine);
  g_free(command->memory);
  g_strfreev(command->rest);
}

/* run and validate share the options that decide what the pipeline is (variables, plugins,
 * output directory); the options about running belong to run alone, so validate refuses them. */
static GOptionContext *knnwb_pipeline_options_new(KnnwbPipelineCommand *command,
                                                  gboolean validate_only)
{
  GOptionEntry shared_entries[] = {
      {"set", 's', 0, G_OPTION_ARG_STRING_ARRAY, &command->set,
       "Override a pipeline variable (repeatable)", "NAME=VALUE"},
      {"plugin-path", 'P', 0, G_OPTION_ARG_STRING, &command->plugin_path,
       "Directories searched for plugins first (':'-separated), before KNNWB_PLUGIN_PATH and the "
       "installed ones",
       "DIRS"},
      {"output-dir", 'O', 0, G_OPTION_ARG_FILENAME, &command->output_dir,
       "Base of relative output paths (default: the current directory)", "DIR"},
      {"confine", 0, 0, G_OPTION_ARG_FILENAME, &command->confine,
       "Refuse the pipeline unless every file it reads or writes resolves (symbolic links "
       "followed) inside DIR: for pipelines from others",
       "DIR"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &command->quiet,
       validate_only ? "No \"valid\" line; only errors" : "No progress", NULL},
      /* The usage line names PIPELINE.xml once: from here, not from g_option_context_new. */
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &command->rest, NULL, "PIPELINE.xml"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  GOptionEntry run_entries[] = {{"dry-run", 'n', 0, G_OPTION_ARG_NONE, &command->dry_run,
                                 "Check the pipeline and print the plan, run nothing", NULL},
                                {"report", 'r', 0, G_OPTION_ARG_NONE, &command->report,
                                 "Print each step's time and peak memory at the end", NULL},
                                {"threads", 't', 0, G_OPTION_ARG_INT, &command->threads,
                                 "CPU threads for steps that do not set their own (default: every "
                                 "core this process may run on)",
                                 "N"},
                                {"memory", 0, 0, G_OPTION_ARG_STRING, &command->memory,
                                 "Working-memory budget for kNN tiles, e.g. 512M, 4G", "BYTES"},
                                {NULL, 0, 0, 0, NULL, NULL, NULL}};
  GOptionContext *context = g_option_context_new(NULL);
  g_option_context_set_summary(context, validate_only
                                            ? "Checks a pipeline (XML, schema and every semantic "
                                              "check) without running it."
                                            : "Runs a pipeline: its steps in dependency order. "
                                              "Outputs appear only when every step succeeded.");
  g_option_context_set_description(
      context, validate_only
                   ? "Example:\n  knnwb validate share/examples/seed-workflow.xml\n\n"
                     "Relative input paths are relative to the pipeline's directory, relative "
                     "output paths to --output-dir.\nVariables: ${name} in parameter values; "
                     "built in: ${pipeline_dir}, ${output_dir}.\nExit status: 0 valid, 1 invalid "
                     "pipeline, 2 usage error."
                   : "Example:\n  knnwb run share/examples/seed-workflow.xml --set k=10 "
                     "--output-dir out\n\n"
                     "Relative input paths are relative to the pipeline's directory, relative "
                     "output paths to --output-dir.\nVariables: ${name} in parameter values; "
                     "built in: ${pipeline_dir}, ${output_dir}.\nExit status: 0 success, 1 "
                     "invalid pipeline or failed step, 2 usage error, 130/143 interrupted.");
  g_option_context_add_main_entries(context, shared_entries, NULL);
  if (!validate_only)
    g_option_context_add_main_entries(context, run_entries, NULL);

  return context;
}

/* The command line into command and options (usage errors); overrides holds the --set values,
 * pointing into command. */
static gboolean knnwb_pipeline_parse(GOptionContext *context, int argc, char **argv,
                                     KnnwbPipelineCommand *command, GHashTable *overrides,
                                     KnnwbPipelineOptions *options, GError **error)
{
  if (!knnwb_host_options_parse(context, NULL, &argc, &argv, error))
    return FALSE;
  if (command->rest == NULL || command->rest[0] == NULL || command->rest[1] != NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "exactly one PIPELINE.xml expected");
    return FALSE;
  }
  for (char **s = command->set; s && *s; s++) {
    char *equals = strchr(*s, '=');
    if (equals == NULL || equals == *s) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "--set %s: expected NAME=VALUE",
                  *s);
      return FALSE;
    }
    *equals = '\0';
    g_hash_table_insert(overrides, *s, equals + 1);
  }
  if (!knnwb_host_threads_check(command->threads, error))
    return FALSE;
  if (command->memory != NULL) {
    guint64 bytes;
    if (!knnwb_host_parse_bytes(command->memory, &bytes, error))
      return FALSE;
    options->memory_bytes = (size_t)bytes;
  }
  options->overrides = overrides;
  options->output_dir = command->output_dir;
  options->confine = command->confine;
  options->n_threads = command->threads;
  options->quiet = command->quiet;
  options->report = command->report;
  return TRUE;
}

/* Loads the pipeline, then validates, prints the plan or runs it; returns the exit status. */
static int knnwb_pipeline_execute(const KnnwbPipelineCommand *command,
                                  const KnnwbPipelineOptions *options, gboolean validate_only)
{
  g_autoptr(GError) error = NULL;
  knnwb_host_log_set_quiet(command->quiet);
  g_autoptr(KnnwbHostRegistry) registry =
      knnwb_host_registry_load(command->plugin_path, command->quiet);
  g_autoptr(KnnwbPipeline) pipeline =
      knnwb_pipeline_load(command->rest[0], registry, options, &error);
  /* Under mpirun every rank loads the file and checks its inputs on its own file system (the
   * outputs rank 0 alone, which writes them). */
  if (!knnwb_pipeline_ranks_ready(pipeline != NULL, &error)) {
    g_printerr("%s\n", error->message);
    return 1;
  }
  if (validate_only) {
    if (!command->quiet)
      printf("%s: valid\n", command->rest[0]);
    return 0;
  }
  if (command->dry_run) {
    knnwb_pipeline_print_plan(pipeline, stdout);
    return 0;
  }
  const volatile gint *cancel = knnwb_host_signals_install();
  if (knnwb_pipeline_run(pipeline, options, cancel, &error))
    return 0;
  if (knnwb_host_signals_received() == 0) {
    g_printerr("%s\n", error->message);
    return 1;
  }
  g_printerr("knnwb: %s\nknnwb: interrupted; no output written\n", error->message);
  return knnwb_host_signals_exit_status();
}

static int knnwb_pipeline_command(int argc, char **argv, gboolean validate_only)
{
  KnnwbPipelineCommand command = {0};
  g_autoptr(GOptionContext) context = knnwb_pipeline_options_new(&command, validate_only);
  g_autoptr(GHashTable) overrides = g_hash_table_new(g_str_hash, g_str_equal);
  KnnwbPipelineOptions options = {0};
  g_autoptr(GError) error = NULL;
  int status;
  if (knnwb_pipeline_parse(context, argc, argv, &command, overrides, &options, &error)) {
    status = knnwb_pipeline_execute(&command, &options, validate_only);
  } else {
    const char *name = validate_only ? "validate" : "run";
    g_printerr("knnwb %s: %s\nTry `knnwb %s --help`.\n", name, error->message, name);
    status = 2;
  }
  knnwb_pipeline_command_clear(&command);
  return status;
}

int knnwb_host_command_run(int argc, char **argv)
{
  return knnwb_pipeline_command(argc, argv, FALSE);
}

int knnwb_host_command_validate(int argc, char **argv)
{
  return knnwb_pipeline_command(argc, argv, TRUE);
}

static const char *knnwb_param_type_name(KnnwbParamType type)
{
  switch (type) {
  case KNNWB_PARAM_INT:
    return "integer";
  case KNNWB_PARAM_DOUBLE:
    return "number";
  case KNNWB_PARAM_BOOLEAN:
    return "boolean";
  case KNNWB_PARAM_STRING:
    return "text";
  case KNNWB_PARAM_CHOICE:
    return "choice";
  case KNNWB_PARAM_BYTES:
    return "bytes";
  case KNNWB_PARAM_INPUT_FILE:
    return "input file";
  case KNNWB_PARAM_OUTPUT_FILE:
    return "output file";
  }
  return "?";
}

static void knnwb_print_step(const KnnwbStepType *type)
{
  printf("  %s -> %s: %s\n", type->name,
         type->output == KNNWB_KIND_NONE ? "files" : knnwb_kind_to_string(type->output),
         type->description ? type->description : "");
  for (guint i = 0; i < type->n_inputs; i++)
    printf("      input %-16s %s%s%s%s\n", type->inputs[i].name,
           knnwb_kind_to_string(type->inputs[i].kind), type->inputs[i].optional ? ", optional" : "",
           type->inputs[i].description ? ": " : "",
           type->inputs[i].description ? type->inputs[i].description : "");
  for (guint i = 0; i < type->n_params; i++) {
    const KnnwbParamSpec *spec = &type->params[i];
    g_autoptr(GString) detail = g_string_new(knnwb_param_type_name(spec->type));
    if (spec->type == KNNWB_PARAM_CHOICE)
      g_string_append_printf(detail, " %s", spec->choices);
    if ((spec->type == KNNWB_PARAM_INT || spec->type == KNNWB_PARAM_DOUBLE) &&
        spec->minimum <= spec->maximum)
      g_string_append_printf(detail, " [%.15g, %.15g]", spec->minimum, spec->maximum);
    if (spec->default_value == NULL)
      g_string_append(detail, ", required");
    else if (*spec->default_value == '\0')
      g_string_append(detail, ", optional");
    else
      g_string_append_printf(detail, ", default %s", spec->default_value);
    printf("      param %-16s %s%s%s\n", spec->name, detail->str, spec->description ? ": " : "",
           spec->description ? spec->description : "");
  }
}

int knnwb_host_command_plugins(int argc, char **argv)
{
  char *plugin_path = NULL;
  gboolean brief = FALSE;
  GOptionEntry entries[] = {
      {"plugin-path", 'P', 0, G_OPTION_ARG_STRING, &plugin_path,
       "Directories searched for plugins first (':'-separated)", "DIRS"},
      {"brief", 'b', 0, G_OPTION_ARG_NONE, &brief, "Plugins and step names only", NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new(NULL);
  g_option_context_set_summary(context,
                               "Lists the plugins found (search order: --plugin-path, "
                               "KNNWB_PLUGIN_PATH, the installed directory),\ntheir step types "
                               "with inputs and parameters, and the modules that were refused.");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!knnwb_host_options_parse(context, "plugins", &argc, &argv, &error)) {
    g_printerr("knnwb plugins: %s\n", error->message);
    g_free(plugin_path);
    return 2;
  }
  /* Refusals are listed below, not as warnings. */
  g_autoptr(KnnwbHostRegistry) registry = knnwb_host_registry_load(plugin_path, TRUE);
  g_auto(GStrv) directories = knnwb_host_plugin_search_path(plugin_path);
  g_free(plugin_path);
  printf("search path:\n");
  for (char **d = directories; *d; d++)
    printf("  %s\n", *d);
  for (guint p = 0; p < registry->plugins->len; p++) {
    const KnnwbHostPlugin *plugin = registry->plugins->pdata[p];
    printf("\nplugin %s %s (%s): %s\n", plugin->name, plugin->version,
           plugin->path ? plugin->path : "built in", plugin->description);
    for (guint s = 0; s < plugin->steps->len; s++) {
      const KnnwbStepType *type = plugin->steps->pdata[s];
      if (brief)
        printf("  %s\n", type->name);
      else
        knnwb_print_step(type);
    }
  }
  if (registry->refused->len > 0) {
    printf("\nrefused:\n");
    for (guint i = 0; i < registry->refused->len; i++)
      printf("  %s\n", (const char *)registry->refused->pdata[i]);
  }
  return 0;
}
