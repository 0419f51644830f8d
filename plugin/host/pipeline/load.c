/* Loading a pipeline: XML (libxml2, with big line numbers), the schema (share/pipeline.xsd, built
 * into the program so validation never depends on finding a file), variables, then the semantic
 * checks. Every problem is reported as "file:line: message"; all of them, not just the first. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libxml/tree.h>
#include <knnwb/error.h>
#include "pipeline/pipeline_internal.h"
#include "runtime/runtime.h"

static void knnwb_pipeline_step_free(gpointer data)
{
  KnnwbPipelineStep *step = data;
  g_free(step->id);
  g_free(step->type_name);
  g_ptr_array_unref(step->inputs);
  g_ptr_array_unref(step->params);
  if (step->texts != NULL && step->step != NULL)
    for (guint i = 0; i < step->step->type->n_params; i++)
      g_free(step->texts[i]);
  g_free(step->texts);
  g_free(step->values);
  g_free(step->sources);
  g_free(step);
}

static void knnwb_pipeline_input_free(gpointer data)
{
  KnnwbPipelineInput *input = data;
  g_free(input->name);
  g_free(input->from);
  g_free(input);
}

static void knnwb_pipeline_param_free(gpointer data)
{
  KnnwbPipelineParam *param = data;
  g_free(param->name);
  g_free(param->raw);
  g_free(param->value);
  g_free(param);
}

static void knnwb_pipeline_variable_free(gpointer data)
{
  KnnwbPipelineVariable *variable = data;
  g_free(variable->name);
  g_free(variable->value);
  g_free(variable);
}

void knnwb_pipeline_free(KnnwbPipeline *pipeline)
{
  if (pipeline == NULL)
    return;
  g_free(pipeline->path);
  g_free(pipeline->source);
  if (pipeline->places != NULL)
    g_ptr_array_unref(pipeline->places);
  g_free(pipeline->dir);
  g_free(pipeline->name);
  g_free(pipeline->output_dir);
  g_free(pipeline->confine);
  g_ptr_array_unref(pipeline->variables);
  g_ptr_array_unref(pipeline->steps);
  g_free(pipeline->order);
  g_free(pipeline);
}

KnnwbPipeline *knnwb_pipeline_new_empty(const char *dir, const KnnwbPipelineOptions *options)
{
  KnnwbPipeline *pipeline = g_new0(KnnwbPipeline, 1);
  pipeline->dir = g_strdup(dir);
  pipeline->output_dir =
      g_canonicalize_filename(options && options->output_dir ? options->output_dir : ".", NULL);
  pipeline->confine = options && options->confine ? g_strdup(options->confine) : NULL;
  pipeline->variables = g_ptr_array_new_with_free_func(knnwb_pipeline_variable_free);
  pipeline->steps = g_ptr_array_new_with_free_func(knnwb_pipeline_step_free);
  return pipeline;
}

KnnwbPipelineStep *knnwb_pipeline_step_new(const char *id, const char *type_name, int line)
{
  KnnwbPipelineStep *step = g_new0(KnnwbPipelineStep, 1);
  step->id = g_strdup(id);
  step->type_name = g_strdup(type_name);
  step->line = line;
  step->inputs = g_ptr_array_new_with_free_func(knnwb_pipeline_input_free);
  step->params = g_ptr_array_new_with_free_func(knnwb_pipeline_param_free);
  return step;
}

void knnwb_pipeline_step_add_input(KnnwbPipelineStep *step, const char *name, const char *from,
                                   int line)
{
  KnnwbPipelineInput *input = g_new0(KnnwbPipelineInput, 1);
  input->name = g_strdup(name);
  input->from = g_strdup(from);
  input->line = line;
  g_ptr_array_add(step->inputs, input);
}

KnnwbPipelineParam *knnwb_pipeline_step_add_param(KnnwbPipelineStep *step, const char *name,
                                                  const char *raw, int line)
{
  KnnwbPipelineParam *param = g_new0(KnnwbPipelineParam, 1);
  param->name = g_strdup(name);
  param->raw = g_strdup(raw);
  param->line = line;
  g_ptr_array_add(step->params, param);
  return param;
}

/* ---------------------------------------------------------------------------------------------- */
/* Reading the document into the pipeline structure. */

static char *knnwb_pipeline_attribute(xmlNode *node, const char *name)
{
  xmlChar *value = xmlGetProp(node, (const xmlChar *)name);
  char *copy = g_strdup(value ? (const char *)value : "");
  xmlFree(value);
  return copy;
}

/* What a problem with a step's parameter is said to be about: "step 'id': parameter 'name': " in
 * a file; nothing where a command option gave the value (the place names the option). g_free. */
static char *knnwb_pipeline_about(const KnnwbPipeline *pipeline, const KnnwbPipelineStep *step,
                                  const char *name, int line)
{
  if (knnwb_pipeline_place(pipeline->places, line) != NULL)
    return g_strdup("");
  return g_strdup_printf("step '%s': parameter '%s': ", step->id, name);
}

/* A file a command named is reported by its name alone, as the command's own reads and writes
 * always did ("x.tsv: cannot open: ..."); a file's by its line and parameter. FALSE when the
 * pipeline has a file (the caller reports with knnwb_pipeline_about). */
static gboolean knnwb_pipeline_report_named(const KnnwbPipeline *pipeline,
                                            KnnwbPipelineDiagnostics *diagnostics,
                                            const char *message)
{
  if (pipeline->path != NULL)
    return FALSE;
  knnwb_pipeline_report(diagnostics, 0, "%s", message);
  return TRUE;
}

/* xmlGetLineNo() of an element past line 65535 (XML_PARSE_BIG_LINES) is taken from the text after
 * it, which may be on a later line; the text just before it ends on the element's own line. */
static int knnwb_pipeline_line(xmlNode *node)
{
  long line = xmlGetLineNo(node);
  if (node->line == 65535 && node->prev != NULL &&
      (node->prev->type == XML_TEXT_NODE || node->prev->type == XML_COMMENT_NODE)) {
    long before = xmlGetLineNo(node->prev);
    if (before > 0)
      line = before;
  }
  return line > G_MAXINT ? G_MAXINT : (int)line;
}

static gboolean knnwb_pipeline_is(xmlNode *node, const char *name)
{
  return node->type == XML_ELEMENT_NODE && xmlStrcmp(node->name, (const xmlChar *)name) == 0;
}

static void knnwb_pipeline_read_tree(KnnwbPipeline *pipeline, xmlNode *root)
{
  pipeline->name = knnwb_pipeline_attribute(root, "name");
  for (xmlNode *node = root->children; node != NULL; node = node->next) {
    if (knnwb_pipeline_is(node, "variable")) {
      KnnwbPipelineVariable *variable = g_new0(KnnwbPipelineVariable, 1);
      variable->name = knnwb_pipeline_attribute(node, "name");
      variable->value = knnwb_pipeline_attribute(node, "value");
      variable->line = knnwb_pipeline_line(node);
      g_ptr_array_add(pipeline->variables, variable);
    } else if (knnwb_pipeline_is(node, "step")) {
      g_autofree char *id = knnwb_pipeline_attribute(node, "id");
      g_autofree char *type_name = knnwb_pipeline_attribute(node, "type");
      KnnwbPipelineStep *step = knnwb_pipeline_step_new(id, type_name, knnwb_pipeline_line(node));
      for (xmlNode *child = node->children; child != NULL; child = child->next) {
        gboolean input = knnwb_pipeline_is(child, "input");
        if (!input && !knnwb_pipeline_is(child, "param"))
          continue;
        g_autofree char *name = knnwb_pipeline_attribute(child, "name");
        g_autofree char *text = knnwb_pipeline_attribute(child, input ? "step" : "value");
        if (input)
          knnwb_pipeline_step_add_input(step, name, text, knnwb_pipeline_line(child));
        else
          knnwb_pipeline_step_add_param(step, name, text, knnwb_pipeline_line(child));
      }
      g_ptr_array_add(pipeline->steps, step);
    }
  }
}

/* ---------------------------------------------------------------------------------------------- */
/* Semantic checks. */

/* base NULL: a pipeline built in code, whose paths stay as the command line gave them (and so
 * do the messages that name them). */
static char *knnwb_pipeline_resolve_path(const char *base, const char *path)
{
  if (base == NULL || g_path_is_absolute(path))
    return g_strdup(path);
  return g_build_filename(base, path, NULL);
}

/* Where a file is used: for "two steps write one file" and "an output replaces an input". */
typedef struct {
  const char *step_id;
  const char *path;
  int line;
  gboolean side; /* the side file a writer puts beside the step's output */
} KnnwbPipelineFileUse;

typedef struct {
  GHashTable *outputs; /* identity (knnwb_host_path_identity) -> KnnwbPipelineFileUse */
  GHashTable *inputs;  /* same */
} KnnwbPipelineFiles;

static void knnwb_pipeline_files_note(GHashTable *table, char *identity, const char *step_id,
                                      const char *path, int line)
{
  KnnwbPipelineFileUse *use = g_new(KnnwbPipelineFileUse, 1);
  *use = (KnnwbPipelineFileUse){step_id, path, line, FALSE};
  g_hash_table_insert(table, identity, use);
}

/* --confine: a path that leads outside the directory is refused. */
/* Whether this process writes a pipeline's outputs, and so checks them: under mpirun rank 0 alone
 * writes them (knnwb_pipeline_run_params); the other ranks need not see their folders (hosts
 * that do not share rank 0's file system). */
static gboolean knnwb_pipeline_writes_outputs(void)
{
  const KnnwbKnnGroup *group = knnwb_host_group();
  return group == NULL || group->rank == 0;
}

static void knnwb_pipeline_check_confined(KnnwbPipeline *pipeline, KnnwbPipelineStep *step,
                                          guint index, int line,
                                          KnnwbPipelineDiagnostics *diagnostics)
{
  const KnnwbParamSpec *spec = &step->step->type->params[index];
  const char *path = step->values[index].v_string;
  g_autofree char *reason = NULL;
  if (pipeline->confine == NULL || path == NULL ||
      (spec->type == KNNWB_PARAM_INPUT_FILE && access(path, F_OK) != 0) ||
      (spec->type == KNNWB_PARAM_OUTPUT_FILE && !knnwb_pipeline_writes_outputs()))
    return; /* no --confine, a missing input (reported already), or outputs another rank writes */
  g_autofree char *absolute = NULL;
  if (!g_path_is_absolute(path)) /* as a command gave it: relative to the current directory */
    path = absolute = g_canonicalize_filename(path, NULL);
  if ((spec->type == KNNWB_PARAM_INPUT_FILE || spec->type == KNNWB_PARAM_OUTPUT_FILE) &&
      !knnwb_pipeline_confined(pipeline->confine, path, spec->type == KNNWB_PARAM_OUTPUT_FILE,
                               &reason)) {
    g_autofree char *about = knnwb_pipeline_about(pipeline, step, spec->name, line);
    if (!knnwb_pipeline_report_named(pipeline, diagnostics, reason))
      knnwb_pipeline_report(diagnostics, line, "%s%s", about, reason);
  }
}

char *knnwb_pipeline_side_file(const KnnwbPipelineStep *step, guint index, const char *path)
{
  const KnnwbStepType *type = step->step->type;
  const char *value = step->values[index].v_string;
  if (value == NULL || *value == '\0')
    return NULL;
  KnnwbOutputFormat format = KNNWB_OUTPUT_AUTO;
  for (guint i = 0; i < type->n_params; i++)
    if (strcmp(type->params[i].name, "format") == 0 && step->values[i].v_string != NULL &&
        !knnwb_formats_output_from_string(step->values[i].v_string, &format, NULL))
      format = KNNWB_OUTPUT_AUTO;
  if (format == KNNWB_OUTPUT_AUTO && !knnwb_formats_output_from_path(value, &format, NULL))
    return NULL;
  return knnwb_formats_side_path(path != NULL ? path : value, format);
}

/* An output (or its side file, side) against the outputs noted before: two steps writing one file
 * are refused; otherwise it is noted. */
static void knnwb_pipeline_note_output(KnnwbPipelineStep *step, const char *path, gboolean side,
                                       const char *about, int line, KnnwbPipelineFiles *files,
                                       KnnwbPipelineDiagnostics *diagnostics)
{
  /* Spellings differ (out.knn, ./out.knn, sub/../out.knn, links): compare the files. */
  char *identity = knnwb_host_path_identity(path);
  const KnnwbPipelineFileUse *other = g_hash_table_lookup(files->outputs, identity);
  if (other != NULL) {
    knnwb_pipeline_report(
        diagnostics, line, "%s'%s'%s is also written by step '%s' (line %d, as '%s'%s)", about,
        path, side ? " (the side file written beside this output)" : "", other->step_id,
        other->line, other->path, other->side ? ", the side file written beside its output" : "");
    g_free(identity);
  } else {
    knnwb_pipeline_files_note(files->outputs, identity, step->id, g_intern_string(path), line);
    KnnwbPipelineFileUse *use = g_hash_table_lookup(files->outputs, identity);
    use->side = side;
  }
}

static void knnwb_pipeline_check_file(KnnwbPipeline *pipeline, KnnwbPipelineStep *step, guint index,
                                      int line, KnnwbPipelineFiles *files,
                                      KnnwbPipelineDiagnostics *diagnostics)
{
  const KnnwbParamSpec *spec = &step->step->type->params[index];
  const char *text = step->values[index].v_string;
  if (text == NULL || *text == '\0')
    return; /* an empty name is reported by the parameter's parser */
  g_autofree char *about = knnwb_pipeline_about(pipeline, step, spec->name, line);
  if (spec->type == KNNWB_PARAM_INPUT_FILE) {
    char *path = knnwb_pipeline_resolve_path(pipeline->dir, text);
    g_autofree char *given = g_strdup(text); /* text may be the string freed next */
    g_free(step->texts[index]);
    step->texts[index] = path;
    step->values[index].v_string = path;
    g_autoptr(GError) refused = NULL;
    int failure = access(path, R_OK) != 0 ? errno : 0;
    g_autofree char *named = failure != 0
                                 ? g_strdup_printf("%s: cannot open: %s", path, g_strerror(failure))
                                 : g_strdup_printf("%s: is a directory", path);
    if ((failure != 0 || g_file_test(path, G_FILE_TEST_IS_DIR)) &&
        knnwb_pipeline_report_named(pipeline, diagnostics, named))
      return;
    if (failure != 0 && !g_path_is_absolute(given) && g_strcmp0(path, given) != 0 &&
        access(given, R_OK) == 0)
      /* `--set input=mine.tsv` from the data's directory: say why that file was not taken. */
      knnwb_pipeline_report(diagnostics, line,
                            "%scannot read '%s': %s (relative input "
                            "paths are read from the pipeline file's directory; for '%s' in the "
                            "current directory give its absolute path, such as $PWD/%s)",
                            about, path, g_strerror(failure), given, given);
    else if (failure != 0)
      knnwb_pipeline_report(diagnostics, line, "%scannot read '%s': %s", about, path,
                            g_strerror(failure));
    else if (g_file_test(path, G_FILE_TEST_IS_DIR))
      knnwb_pipeline_report(diagnostics, line, "%s'%s' is a directory", about, path);
    else if (!knnwb_host_input_check(path, FALSE, &refused))
      knnwb_pipeline_report(diagnostics, line, "%s%s", about, refused->message);
    else
      knnwb_pipeline_files_note(files->inputs, knnwb_host_path_identity(path), step->id, path,
                                line);
  } else if (spec->type == KNNWB_PARAM_OUTPUT_FILE) {
    char *path = knnwb_pipeline_resolve_path(pipeline->output_dir, text);
    g_free(step->texts[index]);
    step->texts[index] = path;
    step->values[index].v_string = path;
    /* No probe file: validation and --dry-run change nothing; `knnwb run` creates its
     * temporaries before the first step, which proves writability for real. */
    g_autoptr(GError) error = NULL;
    if (knnwb_pipeline_writes_outputs() && !knnwb_host_output_check(path, &error) &&
        !knnwb_pipeline_report_named(pipeline, diagnostics, error->message))
      knnwb_pipeline_report(diagnostics, line, "%s%s", about, error->message);
    knnwb_pipeline_note_output(step, path, FALSE, about, line, files, diagnostics);
  }
}

/* The side files writers put beside the step's outputs (known once every parameter is), against
 * every other output. lines: where each parameter was given (0: not given). */
static void knnwb_pipeline_check_side_files(KnnwbPipeline *pipeline, KnnwbPipelineStep *step,
                                            const int *lines, KnnwbPipelineFiles *files,
                                            KnnwbPipelineDiagnostics *diagnostics)
{
  const KnnwbStepType *type = step->step->type;
  for (guint index = 0; index < type->n_params; index++) {
    g_autofree char *side = type->params[index].type == KNNWB_PARAM_OUTPUT_FILE
                                ? knnwb_pipeline_side_file(step, index, NULL)
                                : NULL;
    if (side == NULL)
      continue;
    const int line = lines[index] != 0 ? lines[index] : step->line;
    g_autofree char *about = knnwb_pipeline_about(pipeline, step, type->params[index].name, line);
    knnwb_pipeline_note_output(step, side, TRUE, about, line, files, diagnostics);
  }
}

/* The step's own check of its parameter values (KnnwbStepType.check: what the run would refuse
 * from the values alone), once every value passed the host's checks. */
static void knnwb_pipeline_check_step(KnnwbPipeline *pipeline, const KnnwbPipelineStep *step,
                                      KnnwbPipelineDiagnostics *diagnostics)
{
  const KnnwbStepType *type = step->step->type;
  if (type->check == NULL)
    return;
  /* A value that could not be made (an undefined or cyclic variable, reported already) leaves
   * nothing to check. */
  for (guint i = 0; i < type->n_params; i++)
    if (step->values[i].v_string == NULL && type->params[i].type != KNNWB_PARAM_INPUT_FILE &&
        type->params[i].type != KNNWB_PARAM_OUTPUT_FILE)
      return;
  g_autoptr(GError) error = NULL;
  if (type->check(step->values, &error))
    return;
  if (!knnwb_pipeline_report_named(pipeline, diagnostics, error->message))
    knnwb_pipeline_report(diagnostics, step->line, "step '%s': %s", step->id, error->message);
}

static void knnwb_pipeline_check_params(KnnwbPipeline *pipeline, KnnwbPipelineStep *step,
                                        KnnwbPipelineFiles *files,
                                        KnnwbPipelineDiagnostics *diagnostics)
{
  const KnnwbStepType *type = step->step->type;
  step->values = g_new0(KnnwbParamValue, type->n_params ? type->n_params : 1);
  step->texts = g_new0(char *, type->n_params ? type->n_params : 1);
  g_autofree int *lines = g_new0(int, type->n_params ? type->n_params : 1);
  for (guint i = 0; i < step->params->len; i++) {
    KnnwbPipelineParam *param = step->params->pdata[i];
    guint index = 0;
    while (index < type->n_params && strcmp(type->params[index].name, param->name) != 0)
      index++;
    if (index == type->n_params) {
      g_autoptr(GString) known = g_string_new(NULL);
      for (guint j = 0; j < type->n_params; j++)
        g_string_append_printf(known, "%s%s", j ? ", " : "", type->params[j].name);
      knnwb_pipeline_report(diagnostics, param->line,
                            "step '%s': unknown parameter '%s' for step type '%s' (known: %s)",
                            step->id, param->name, type->name, known->len ? known->str : "none");
      continue;
    }
    if (lines[index] != 0) {
      knnwb_pipeline_report(diagnostics, param->line,
                            "step '%s': parameter '%s' is given twice (first at line %d)", step->id,
                            param->name, lines[index]);
      continue;
    }
    lines[index] = param->line;
    if (param->value == NULL)
      continue; /* substitution failed and was reported */
    step->texts[index] = g_strdup(param->value);
    g_autoptr(GError) error = NULL;
    if (knnwb_host_param_parse(&type->params[index], step->texts[index], &step->values[index],
                               &error))
      continue;
    /* The registry names the parameter; an option's place names it for a command. */
    g_autofree char *named = g_strdup_printf("parameter '%s': ", param->name);
    if (knnwb_pipeline_place(pipeline->places, param->line) != NULL &&
        g_str_has_prefix(error->message, named))
      knnwb_pipeline_report(diagnostics, param->line, "%s", error->message + strlen(named));
    else
      knnwb_pipeline_report(diagnostics, param->line, "step '%s': %s", step->id, error->message);
  }
  for (guint index = 0; index < type->n_params; index++) {
    const KnnwbParamSpec *spec = &type->params[index];
    if (lines[index] != 0) {
      knnwb_pipeline_check_file(pipeline, step, index, lines[index], files, diagnostics);
      knnwb_pipeline_check_confined(pipeline, step, index, lines[index], diagnostics);
      continue;
    }
    if (spec->default_value == NULL) {
      knnwb_pipeline_report(diagnostics, step->line,
                            "step '%s': missing required parameter '%s' (%s)", step->id, spec->name,
                            spec->description ? spec->description : "no description");
      continue;
    }
    step->values[index].is_default = TRUE;
    if ((spec->type == KNNWB_PARAM_INPUT_FILE || spec->type == KNNWB_PARAM_OUTPUT_FILE) &&
        *spec->default_value == '\0')
      continue; /* an optional file not given: v_string stays NULL */
    step->texts[index] = g_strdup(spec->default_value);
    /* Defaults were checked at registration. */
    knnwb_host_param_parse(spec, step->texts[index], &step->values[index], NULL);
    knnwb_pipeline_check_file(pipeline, step, index, step->line, files, diagnostics);
    knnwb_pipeline_check_confined(pipeline, step, index, step->line, diagnostics);
  }
  knnwb_pipeline_check_side_files(pipeline, step, lines, files, diagnostics);
}

static void knnwb_pipeline_check_inputs(KnnwbPipeline *pipeline, KnnwbPipelineStep *step,
                                        GHashTable *ids, KnnwbPipelineDiagnostics *diagnostics)
{
  const KnnwbStepType *type = step->step->type;
  step->sources = g_new(int, type->n_inputs ? type->n_inputs : 1);
  for (guint i = 0; i < type->n_inputs; i++)
    step->sources[i] = -1;
  g_autofree int *lines = g_new0(int, type->n_inputs ? type->n_inputs : 1);
  for (guint i = 0; i < step->inputs->len; i++) {
    KnnwbPipelineInput *input = step->inputs->pdata[i];
    guint port = 0;
    while (port < type->n_inputs && strcmp(type->inputs[port].name, input->name) != 0)
      port++;
    if (port == type->n_inputs) {
      g_autoptr(GString) known = g_string_new(NULL);
      for (guint j = 0; j < type->n_inputs; j++)
        g_string_append_printf(known, "%s%s (%s)", j ? ", " : "", type->inputs[j].name,
                               knnwb_kind_to_string(type->inputs[j].kind));
      knnwb_pipeline_report(diagnostics, input->line,
                            "step '%s': step type '%s' has no input '%s' (inputs: %s)", step->id,
                            type->name, input->name, known->len ? known->str : "none");
      continue;
    }
    if (lines[port] != 0) {
      knnwb_pipeline_report(diagnostics, input->line,
                            "step '%s': input '%s' is connected twice (first at line %d)", step->id,
                            input->name, lines[port]);
      continue;
    }
    lines[port] = input->line;
    gpointer found = g_hash_table_lookup(ids, input->from);
    if (found == NULL) {
      knnwb_pipeline_report(diagnostics, input->line,
                            "step '%s': input '%s' refers to step '%s', which does not exist",
                            step->id, input->name, input->from);
      continue;
    }
    int source = GPOINTER_TO_INT(found) - 1;
    step->sources[port] = source;
    const KnnwbPipelineStep *from = pipeline->steps->pdata[source];
    if (from->step == NULL)
      continue; /* its unknown type was reported */
    KnnwbKind made = from->step->type->output;
    KnnwbKind wanted = type->inputs[port].kind;
    if (made != wanted)
      knnwb_pipeline_report(diagnostics, input->line,
                            "step '%s': input '%s' needs a %s, but step '%s' (%s) produces %s%s",
                            step->id, input->name, knnwb_kind_to_string(wanted), from->id,
                            from->type_name, made == KNNWB_KIND_NONE ? "nothing" : "a ",
                            made == KNNWB_KIND_NONE ? " (it only writes files)"
                                                    : knnwb_kind_to_string(made));
  }
  for (guint port = 0; port < type->n_inputs; port++)
    if (lines[port] == 0 && !type->inputs[port].optional)
      knnwb_pipeline_report(diagnostics, step->line,
                            "step '%s': missing input '%s' (a %s; add <input name=\"%s\" "
                            "step=\"...\"/>)",
                            step->id, type->inputs[port].name,
                            knnwb_kind_to_string(type->inputs[port].kind), type->inputs[port].name);
}

/* Reports one cycle among the steps not placed in order (each waits for another unplaced step),
 * with its path, at the line of the step where it closes. O(steps + inputs). */
static void knnwb_pipeline_report_cycle(const KnnwbPipeline *pipeline, const gboolean *placed,
                                        KnnwbPipelineDiagnostics *diagnostics)
{
  const guint n = pipeline->steps->len;
  /* Walk back from an unplaced step along unplaced sources until a step repeats: that is a
   * cycle. */
  guint first = 0;
  while (placed[first])
    first++;
  g_autofree int *seen_at = g_new(int, n);
  for (guint s = 0; s < n; s++)
    seen_at[s] = -1;
  g_autoptr(GArray) path = g_array_new(FALSE, FALSE, sizeof(guint));
  guint current = first;
  while (seen_at[current] < 0) {
    seen_at[current] = (int)path->len;
    g_array_append_val(path, current);
    const KnnwbPipelineStep *step = pipeline->steps->pdata[current];
    guint next = current;
    for (guint i = 0; i < step->step->type->n_inputs; i++)
      if (step->sources[i] >= 0 && !placed[step->sources[i]]) {
        next = (guint)step->sources[i];
        break;
      }
    current = next;
  }
  g_autoptr(GString) cycle = g_string_new(NULL);
  for (guint i = (guint)seen_at[current]; i < path->len; i++) {
    const KnnwbPipelineStep *step = pipeline->steps->pdata[g_array_index(path, guint, i)];
    g_string_append_printf(cycle, "'%s' <- ", step->id);
  }
  g_string_append_printf(cycle, "'%s'", ((KnnwbPipelineStep *)pipeline->steps->pdata[current])->id);
  const KnnwbPipelineStep *start = pipeline->steps->pdata[current];
  knnwb_pipeline_report(diagnostics, start->line,
                        "step '%s' depends on itself through a cycle of inputs: %s", start->id,
                        cycle->str);
}

/* Orders the steps so that every step comes after its sources, and among the steps ready at
 * any moment the first in document order goes first (Kahn's algorithm with a min-heap of ready
 * indices: O(n log n + inputs)). The steps of a cycle stay unplaced; one cycle is reported with its
 * path (knnwb_pipeline_report_cycle). */
static void knnwb_pipeline_order(KnnwbPipeline *pipeline, KnnwbPipelineDiagnostics *diagnostics)
{
  guint n = pipeline->steps->len;
  pipeline->order = g_new0(guint, n ? n : 1);
  g_autofree gboolean *placed = g_new0(gboolean, n ? n : 1);
  g_autofree guint *waiting = g_new0(guint, n ? n : 1); /* unplaced sources, with repeats */
  g_autofree guint *first_user = g_new0(guint, n + 1);  /* CSR of the steps using each step */
  guint n_edges = 0;
  for (guint s = 0; s < n; s++) {
    const KnnwbPipelineStep *step = pipeline->steps->pdata[s];
    if (step->step == NULL)
      continue;
    for (guint i = 0; i < step->step->type->n_inputs; i++)
      if (step->sources[i] >= 0) {
        first_user[step->sources[i] + 1]++;
        waiting[s]++;
        n_edges++;
      }
  }
  for (guint s = 0; s < n; s++)
    first_user[s + 1] += first_user[s];
  g_autofree guint *users = g_new(guint, n_edges ? n_edges : 1);
  g_autofree guint *fill = g_new(guint, n + 1);
  memcpy(fill, first_user, (n + 1) * sizeof(guint));
  for (guint s = 0; s < n; s++) {
    const KnnwbPipelineStep *step = pipeline->steps->pdata[s];
    if (step->step == NULL)
      continue;
    for (guint i = 0; i < step->step->type->n_inputs; i++)
      if (step->sources[i] >= 0)
        users[fill[step->sources[i]]++] = s;
  }
  g_autofree guint *heap = g_new(guint, n ? n : 1);
  guint heap_size = 0;
  for (guint s = 0; s < n; s++)
    if (waiting[s] == 0)
      heap[heap_size++] = s; /* ascending: already a min-heap */
  guint n_placed = 0;
  while (heap_size > 0) {
    guint s = heap[0];
    heap[0] = heap[--heap_size];
    for (guint i = 0;;) { /* sift down */
      guint smallest = i, left = 2 * i + 1, right = 2 * i + 2;
      if (left < heap_size && heap[left] < heap[smallest])
        smallest = left;
      if (right < heap_size && heap[right] < heap[smallest])
        smallest = right;
      if (smallest == i)
        break;
      guint swap = heap[i];
      heap[i] = heap[smallest];
      heap[smallest] = swap;
      i = smallest;
    }
    placed[s] = TRUE;
    pipeline->order[n_placed++] = s;
    for (guint e = first_user[s]; e < first_user[s + 1]; e++) {
      guint user = users[e];
      if (--waiting[user] > 0)
        continue;
      guint i = heap_size++; /* sift up */
      heap[i] = user;
      while (i > 0 && heap[(i - 1) / 2] > heap[i]) {
        guint swap = heap[i];
        heap[i] = heap[(i - 1) / 2];
        heap[(i - 1) / 2] = swap;
        i = (i - 1) / 2;
      }
    }
  }
  if (n_placed < n)
    knnwb_pipeline_report_cycle(pipeline, placed, diagnostics);
}

void knnwb_pipeline_check(KnnwbPipeline *pipeline, const KnnwbHostRegistry *registry,
                          KnnwbPipelineDiagnostics *diagnostics)
{
  g_autoptr(GHashTable) ids = g_hash_table_new(g_str_hash, g_str_equal);
  g_autoptr(GHashTable) outputs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr(GHashTable) inputs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  KnnwbPipelineFiles files = {outputs, inputs};
  /* The pipeline file is an input of its own run (no step's: step_id NULL). */
  if (pipeline->path != NULL)
    knnwb_pipeline_files_note(inputs, knnwb_host_path_identity(pipeline->path), NULL,
                              pipeline->path, 1);
  for (guint s = 0; s < pipeline->steps->len; s++) {
    KnnwbPipelineStep *step = pipeline->steps->pdata[s];
    gpointer previous = g_hash_table_lookup(ids, step->id);
    if (previous != NULL) {
      const KnnwbPipelineStep *other = pipeline->steps->pdata[GPOINTER_TO_INT(previous) - 1];
      knnwb_pipeline_report(diagnostics, step->line, "step id '%s' is already used at line %d",
                            step->id, other->line);
    } else {
      g_hash_table_insert(ids, step->id, GINT_TO_POINTER(s + 1));
    }
    step->step = knnwb_host_registry_lookup(registry, step->type_name);
    if (step->step == NULL) {
      guint n_names;
      g_autofree const char **names = knnwb_host_registry_step_names(registry, &n_names);
      g_autofree char *known = g_strjoinv(", ", (char **)names);
      knnwb_pipeline_report(diagnostics, step->line,
                            "step '%s': unknown step type '%s' (known: %s; `knnwb plugins` lists "
                            "them with their plugins)",
                            step->id, step->type_name, n_names ? known : "none");
    }
  }
  for (guint s = 0; s < pipeline->steps->len; s++) {
    KnnwbPipelineStep *step = pipeline->steps->pdata[s];
    if (step->step == NULL)
      continue;
    const guint n_errors = diagnostics->n_errors;
    knnwb_pipeline_check_params(pipeline, step, &files, diagnostics);
    if (diagnostics->n_errors == n_errors)
      knnwb_pipeline_check_step(pipeline, step, diagnostics);
    knnwb_pipeline_check_inputs(pipeline, step, ids, diagnostics);
  }
  /* An output over an input of the same run would replace the data it was computed from (or
   * that a later step still reads). */
  GHashTableIter iter;
  gpointer key, value;
  g_hash_table_iter_init(&iter, outputs);
  while (g_hash_table_iter_next(&iter, &key, &value)) {
    const KnnwbPipelineFileUse *output = value;
    const KnnwbPipelineFileUse *input = g_hash_table_lookup(inputs, key);
    if (input != NULL && input->step_id == NULL)
      knnwb_pipeline_report(diagnostics, output->line,
                            "step '%s': output '%s' is this pipeline's own file '%s'; an output "
                            "must not replace an input of the same run",
                            output->step_id, output->path, input->path);
    else if (input != NULL)
      knnwb_pipeline_report(diagnostics, output->line,
                            "step '%s': output '%s' is the input '%s' of step '%s' (line %d); an "
                            "output must not replace an input of the same run",
                            output->step_id, output->path, input->path, input->step_id,
                            input->line);
  }
  knnwb_pipeline_order(pipeline, diagnostics);
}

/* ---------------------------------------------------------------------------------------------- */

KnnwbPipeline *knnwb_pipeline_load(const char *path, const KnnwbHostRegistry *registry,
                                   const KnnwbPipelineOptions *options, GError **error)
{
  if (access(path, R_OK) != 0) {
    int code = errno;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot read: %s", path, g_strerror(code));
    return NULL;
  }
  KnnwbPipelineDiagnostics diagnostics = {path, g_string_new(NULL), 0, NULL};
  g_autofree char *absolute = g_canonicalize_filename(path, NULL);
  g_autofree char *dir = g_path_get_dirname(absolute);
  g_autoptr(KnnwbPipeline) pipeline = knnwb_pipeline_new_empty(dir, options);
  pipeline->path = g_strdup(path);

  xmlDoc *document = knnwb_pipeline_read_xml(path, &diagnostics);
  if (document != NULL) {
    knnwb_pipeline_read_tree(pipeline, xmlDocGetRootElement(document));
    xmlFreeDoc(document);
    knnwb_pipeline_resolve_variables(pipeline, options ? options->overrides : NULL, &diagnostics);
    knnwb_pipeline_check(pipeline, registry, &diagnostics);
    g_autofree char *messages = knnwb_pipeline_messages(&diagnostics);
    if (diagnostics.n_errors > 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "%s", messages);
      return NULL;
    }
    return g_steal_pointer(&pipeline);
  }
  g_autofree char *messages = knnwb_pipeline_messages(&diagnostics);
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s", messages);
  return NULL;
}

/* ---------------------------------------------------------------------------------------------- */

void knnwb_pipeline_print_plan(const KnnwbPipeline *pipeline, FILE *out)
{
  guint n = pipeline->steps->len;
  fprintf(out, "pipeline '%s' (%s): %u step%s\n", pipeline->name ? pipeline->name : "",
          pipeline->path     ? pipeline->path
          : pipeline->source ? pipeline->source
                             : "built in code",
          n, n == 1 ? "" : "s");
  for (guint i = 0; i < pipeline->variables->len; i++) {
    const KnnwbPipelineVariable *variable = pipeline->variables->pdata[i];
    fprintf(out, "  ${%s} = %s%s\n", variable->name, variable->value,
            variable->overridden ? " (--set)" : "");
  }
  /* Where each step runs under mpirun (pipeline_ranks.c): the same plan as a job's. */
  g_autofree gboolean *split = knnwb_pipeline_split_plan(pipeline);
  g_autofree gboolean *scatter = knnwb_pipeline_scatter_plan(pipeline, split);
  for (guint position = 0; position < n; position++) {
    const KnnwbPipelineStep *step = pipeline->steps->pdata[pipeline->order[position]];
    const KnnwbStepType *type = step->step->type;
    fprintf(out, "%u. %s (%s, plugin %s)", position + 1, step->id, type->name,
            step->step->plugin->name);
    if (pipeline->path != NULL) /* a pipeline built in code has no lines */
      fprintf(out, " line %d", step->line);
    fputc('\n', out);
    const guint s = pipeline->order[position];
    fprintf(out, "     under mpirun: %s\n",
            split[s]     ? "every rank, rows split"
            : scatter[s] ? "every rank, rows split from rank 0's matrices"
                         : "rank 0 alone");
    for (guint i = 0; i < type->n_inputs; i++) {
      if (step->sources[i] < 0)
        continue;
      const KnnwbPipelineStep *from = pipeline->steps->pdata[step->sources[i]];
      fprintf(out, "     input %s <- %s (%s)\n", type->inputs[i].name, from->id,
              knnwb_kind_to_string(type->inputs[i].kind));
    }
    for (guint i = 0; i < type->n_params; i++) {
      const KnnwbParamValue *value = &step->values[i];
      if (type->params[i].type == KNNWB_PARAM_OUTPUT_FILE && value->v_string != NULL)
        fprintf(out, "     %s = %s (written)\n", type->params[i].name, value->v_string);
      else
        fprintf(out, "     %s = %s%s\n", type->params[i].name,
                value->v_string ? value->v_string : "(none)",
                value->is_default ? " (default)" : "");
    }
    fprintf(out, "     -> %s\n",
            type->output == KNNWB_KIND_NONE ? "files" : knnwb_kind_to_string(type->output));
  }
}
