/* Pipelines built in code: the steps a command's options stand for, held exactly as load.c holds
 * a file's, so that the checks and the runner are the same for both. A step, parameter or input
 * has no line; its "line" is 1 + its index into the pipeline's places, the command option it came
 * from, which the reports print where a file's print "file:line". */
#include <knnwb/error.h>
#include "pipeline/pipeline_internal.h"

KnnwbPipeline *knnwb_pipeline_new(const char *source)
{
  /* Paths stay as given (dir NULL): relative to the current directory, and named in messages as
   * the command line gave them. The output directory and --confine come with the options at
   * knnwb_pipeline_prepare. */
  KnnwbPipeline *pipeline = knnwb_pipeline_new_empty(NULL, NULL);
  pipeline->source = g_strdup(source);
  pipeline->places = g_ptr_array_new_with_free_func(g_free);
  return pipeline;
}

/* The line standing for option (NULL: none) in pipeline's places. */
static int knnwb_pipeline_program_place(KnnwbPipeline *pipeline, const char *option)
{
  g_ptr_array_add(pipeline->places, g_strdup(option ? option : ""));
  return (int)MIN(pipeline->places->len, (guint)G_MAXINT);
}

void knnwb_pipeline_add_step(KnnwbPipeline *pipeline, const char *id, const char *type_name)
{
  g_return_if_fail(pipeline != NULL && pipeline->places != NULL && id != NULL && type_name != NULL);
  g_ptr_array_add(
      pipeline->steps,
      knnwb_pipeline_step_new(id, type_name, knnwb_pipeline_program_place(pipeline, NULL)));
}

void knnwb_pipeline_add_param(KnnwbPipeline *pipeline, const char *name, const char *value,
                              const char *option)
{
  g_return_if_fail(pipeline != NULL && pipeline->places != NULL && pipeline->steps->len > 0 &&
                   name != NULL && value != NULL);
  KnnwbPipelineStep *step = pipeline->steps->pdata[pipeline->steps->len - 1];
  KnnwbPipelineParam *param = knnwb_pipeline_step_add_param(
      step, name, value, knnwb_pipeline_program_place(pipeline, option));
  param->value = g_strdup(value); /* nothing to expand: no variables */
}

void knnwb_pipeline_add_input(KnnwbPipeline *pipeline, const char *name, const char *from)
{
  g_return_if_fail(pipeline != NULL && pipeline->places != NULL && pipeline->steps->len > 0 &&
                   name != NULL && from != NULL);
  KnnwbPipelineStep *step = pipeline->steps->pdata[pipeline->steps->len - 1];
  knnwb_pipeline_step_add_input(step, name, from, knnwb_pipeline_program_place(pipeline, NULL));
}

gboolean knnwb_pipeline_prepare(KnnwbPipeline *pipeline, const KnnwbHostRegistry *registry,
                                const KnnwbPipelineOptions *options, GError **error)
{
  g_return_val_if_fail(pipeline != NULL && pipeline->places != NULL && pipeline->order == NULL,
                       FALSE);
  g_free(pipeline->output_dir);
  pipeline->output_dir = options && options->output_dir
                             ? g_canonicalize_filename(options->output_dir, NULL)
                             : NULL; /* outputs as given */
  g_free(pipeline->confine);
  pipeline->confine = options && options->confine ? g_strdup(options->confine) : NULL;
  KnnwbPipelineDiagnostics diagnostics = {pipeline->source, g_string_new(NULL), 0,
                                          pipeline->places};
  knnwb_pipeline_check(pipeline, registry, &diagnostics);
  g_autofree char *messages = knnwb_pipeline_messages(&diagnostics);
  if (diagnostics.n_errors == 0)
    return TRUE;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "%s", messages);
  return FALSE;
}
