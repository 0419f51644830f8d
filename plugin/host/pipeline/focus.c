/* A write-graph step's focus labels checked as soon as the rows they must name are known.
 *
 * The step itself looks the labels up when it writes, after the kNN step (hours at scale): a typo
 * in `focus` (or a pipeline run on data without that row) was reported only then. The vertices of
 * the graphs the built-in steps make are the rows of one matrix, found by following their inputs
 * back; once the step making that matrix has run, its row labels decide every focus label. */
#include <string.h>
#include <knnwb/error.h>
#include "pipeline/pipeline_internal.h"
#include "pipeline/value.h"

/* Step types whose output's vertices are exactly those of one input: the rows of a matrix input,
 * or the vertices of a graph input (followed further). Other producers (neighbourhood and
 * knn-query, whose vertices are chosen rows; a plugin's own) are not followed: their focus is
 * checked when the graph is written, as before. */
static const struct {
  const char *type;
  const char *input;
} knnwb_pipeline_focus_rules[] = {
    {"knn-graph", "data"},        {"mst", "data"},
    {"load-knn", "points"},       {"snn-graph", "knn"},
    {"spanning-forest", "graph"}, {"community", "graph"},
    {"components", "graph"},      {"single-linkage", "tree"},
};

/* The index of the matrix step whose rows are the vertices of step s's output, or -1. */
static int knnwb_pipeline_focus_rows_of(const KnnwbPipeline *pipeline, int s)
{
  /* The steps form no cycle (checked at load); the bound only guards against a mistake there. */
  for (guint depth = 0; s >= 0 && depth <= pipeline->steps->len; depth++) {
    const KnnwbPipelineStep *step = pipeline->steps->pdata[s];
    const KnnwbStepType *type = step->step->type;
    if (type->output == KNNWB_KIND_MATRIX)
      return s;
    int next = -1;
    for (guint r = 0; r < G_N_ELEMENTS(knnwb_pipeline_focus_rules) && next < 0; r++) {
      if (strcmp(type->name, knnwb_pipeline_focus_rules[r].type) != 0)
        continue;
      for (guint port = 0; port < type->n_inputs; port++)
        if (strcmp(type->inputs[port].name, knnwb_pipeline_focus_rules[r].input) == 0)
          next = step->sources[port];
      if (next < 0)
        return -1; /* not connected */
    }
    s = next;
  }
  return -1;
}

/* The index of a parameter of type by name, or -1. */
static int knnwb_pipeline_focus_param(const KnnwbStepType *type, const char *name)
{
  for (guint i = 0; i < type->n_params; i++)
    if (strcmp(type->params[i].name, name) == 0)
      return (int)i;
  return -1;
}

int *knnwb_pipeline_focus_plan(const KnnwbPipeline *pipeline)
{
  const guint n = pipeline->steps->len;
  int *rows_of = g_new(int, n ? n : 1);
  for (guint s = 0; s < n; s++) {
    rows_of[s] = -1;
    const KnnwbPipelineStep *step = pipeline->steps->pdata[s];
    const KnnwbStepType *type = step->step->type;
    if (strcmp(type->name, "write-graph") != 0)
      continue;
    int focus = knnwb_pipeline_focus_param(type, "focus");
    if (focus < 0 || step->values[focus].v_string == NULL || *step->values[focus].v_string == '\0')
      continue;
    /* As the step: its graph input, else the clustering's graph (ports 0 and 1). */
    for (guint port = 0; port < type->n_inputs; port++)
      if (step->sources[port] >= 0) {
        rows_of[s] = knnwb_pipeline_focus_rows_of(pipeline, step->sources[port]);
        break;
      }
  }
  return rows_of;
}

/* The row labels of a matrix value and their count (a split matrix's are rank 0's, of all rows). */
static const char *const *knnwb_pipeline_focus_labels(const KnnwbValue *value, size_t *n)
{
  *n = value->block_total > 0 ? value->block_total
                              : (value->matrix != NULL ? value->matrix->n_rows : 0);
  return knnwb_pipeline_value_labels(value);
}

gboolean knnwb_pipeline_focus_check(const KnnwbPipeline *pipeline, guint done,
                                    const KnnwbValue *value, const int *rows_of, GError **error)
{
  if (value == NULL || value->kind != KNNWB_KIND_MATRIX)
    return TRUE;
  size_t n_rows = 0;
  const char *const *labels = knnwb_pipeline_focus_labels(value, &n_rows);
  const KnnwbPipelineStep *source = pipeline->steps->pdata[done];
  for (guint s = 0; s < pipeline->steps->len; s++) {
    if (rows_of[s] != (int)done)
      continue;
    const KnnwbPipelineStep *step = pipeline->steps->pdata[s];
    const KnnwbStepType *type = step->step->type;
    const int focus = knnwb_pipeline_focus_param(type, "focus");
    /* Without labels of its graph's rows the step takes the clustering's, if it has one. */
    const int clusters = 1;
    if (labels == NULL && type->n_inputs > (guint)clusters && step->sources[clusters] >= 0)
      continue;
    int line = step->line;
    for (guint i = 0; i < step->params->len; i++) {
      const KnnwbPipelineParam *param = step->params->pdata[i];
      if (strcmp(param->name, "focus") == 0)
        line = param->line;
    }
    /* The same reading as the step's (write_graph.c): comma-separated, each label stripped. */
    g_auto(GStrv) wanted = g_strsplit(step->values[focus].v_string, ",", -1);
    for (char **w = wanted; *w != NULL; w++) {
      g_strstrip(*w);
      gboolean found = FALSE;
      for (size_t v = 0; labels != NULL && v < n_rows && !found; v++)
        found = labels[v] != NULL && strcmp(labels[v], *w) == 0;
      if (found)
        continue;
      /* A pipeline built in code names its source and the option that gave the focus. */
      const char *place = knnwb_pipeline_place(pipeline->places, line);
      g_autofree char *where =
          pipeline->path != NULL
              ? g_strdup_printf("%s:%d: step '%s' (%s): focus: ", pipeline->path, line, step->id,
                                type->name)
              : g_strdup_printf("%s%s%s%s", pipeline->source ? pipeline->source : "",
                                pipeline->source ? ": " : "", place ? place : "focus", ": ");
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "%sno vertex is labelled '%s' (the rows of step '%s' (%s) have %s; found "
                  "before the later steps ran)",
                  where, *w, source->id, source->type_name,
                  labels == NULL ? "no labels" : "no such label");
      return FALSE;
    }
  }
  return TRUE;
}
