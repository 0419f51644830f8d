/* The loaded form of a pipeline, shared by the loader/checker and the runner. */
#ifndef KNNWB_PIPELINE_INTERNAL_H
#define KNNWB_PIPELINE_INTERNAL_H

#include "host.h"

typedef struct {
  char *name;
  char *value;
  int line;
  gboolean overridden;
} KnnwbPipelineVariable;

typedef struct {
  char *name; /* the input (port) name */
  char *from; /* the id of the step whose result it takes */
  int line;
} KnnwbPipelineInput;

typedef struct {
  char *name;
  char *raw;   /* as written, before ${...} substitution */
  char *value; /* after substitution */
  int line;
} KnnwbPipelineParam;

typedef struct {
  char *id;
  char *type_name;
  int line;
  GPtrArray *inputs; /* KnnwbPipelineInput * */
  GPtrArray *params; /* KnnwbPipelineParam * */
  /* Filled by the checks. */
  const KnnwbHostStep *step;
  KnnwbParamValue *values; /* type->n_params */
  char **texts;            /* type->n_params owned strings behind values[i].v_string */
  int *sources;            /* type->n_inputs step indices, -1 when not connected */
} KnnwbPipelineStep;

struct KnnwbPipeline {
  char *path; /* as given */
  char *dir;  /* absolute directory of the file: base of relative input paths */
  char *name;
  char *output_dir;     /* absolute: base of relative output paths */
  GPtrArray *variables; /* KnnwbPipelineVariable * */
  GPtrArray *steps;     /* KnnwbPipelineStep * */
  guint *order;         /* steps->len indices in run order */
};

#endif
