/* Running a checked pipeline: steps in dependency order, outputs committed only at the end. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <knnwb/error.h>
#include "pipeline_internal.h"
#include "split_input.h"

typedef struct {
  double seconds;
  guint64 peak_bytes;
  char *summary;
} KnnwbPipelineStepReport;

static KnnwbValue *knnwb_pipeline_value_new(KnnwbKind kind)
{
  KnnwbValue *value = g_new0(KnnwbValue, 1);
  value->kind = kind;
  igraph_vector_init(&value->weights, 0);
  igraph_vector_int_init(&value->membership, 0);
  return value;
}

static void knnwb_pipeline_value_free(KnnwbValue *value)
{
  if (value == NULL)
    return;
  knnwb_matrix_free(value->matrix);
  /* A split matrix's labels (load-matrix under mpirun). */
  if (value->host_private != NULL) {
    knnwb_host_split_input_clear(value->host_private);
    g_free(value->host_private);
  }
  if (value->has_graph)
    igraph_destroy(&value->graph);
  igraph_vector_destroy(&value->weights);
  igraph_vector_int_destroy(&value->membership);
  g_free(value);
}

const char *const *knnwb_host_value_labels(const KnnwbValue *value)
{
  if (value == NULL)
    return NULL;
  if (value->points != NULL && value->points->block_total > 0)
    return value->points->block_labels;
  if (value->points != NULL && value->points->matrix != NULL)
    return (const char *const *)value->points->matrix->row_labels;
  if (value->block_total > 0)
    return value->block_labels;
  if (value->matrix != NULL)
    return (const char *const *)value->matrix->row_labels;
  if (value->source_graph != NULL)
    return knnwb_host_value_labels(value->source_graph);
  return NULL;
}

/* A step must fill what it promised; a plugin that does not is reported, not trusted. */
static gboolean knnwb_pipeline_value_check(const KnnwbValue *value, const KnnwbStepType *type,
                                           char **summary, GError **error)
{
  switch (value->kind) {
  case KNNWB_KIND_MATRIX:
    if (value->matrix == NULL)
      break;
    *summary = g_strdup_printf("matrix %zu x %zu", value->matrix->n_rows, value->matrix->n_cols);
    return TRUE;
  case KNNWB_KIND_GRAPH:
    if (!value->has_graph)
      break;
    if (igraph_vector_size(&value->weights) != igraph_ecount(&value->graph)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                  "step type '%s' returned %" IGRAPH_PRId " weights for %" IGRAPH_PRId " edges",
                  type->name, igraph_vector_size(&value->weights), igraph_ecount(&value->graph));
      return FALSE;
    }
    igraph_integer_t n_vertices = igraph_vcount(&value->graph);
    igraph_integer_t n_edges = igraph_ecount(&value->graph);
    *summary =
        g_strdup_printf("%s graph, %" IGRAPH_PRId " vert%s, %" IGRAPH_PRId " edge%s",
                        igraph_is_directed(&value->graph) ? "directed" : "undirected", n_vertices,
                        n_vertices == 1 ? "ex" : "ices", n_edges, KNNWB_PLURAL(n_edges));
    return TRUE;
  case KNNWB_KIND_CLUSTERING: {
    igraph_integer_t n = igraph_vector_int_size(&value->membership);
    igraph_integer_t clusters = n > 0 ? igraph_vector_int_max(&value->membership) + 1 : 0;
    if (n > 0 && igraph_vector_int_min(&value->membership) < 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                  "step type '%s' returned a negative cluster id", type->name);
      return FALSE;
    }
    if (value->n_clusters == 0)
      ((KnnwbValue *)value)->n_clusters = clusters;
    *summary =
        g_strdup_printf("%" IGRAPH_PRId " cluster%s of %" IGRAPH_PRId " point%s", value->n_clusters,
                        KNNWB_PLURAL(value->n_clusters), n, KNNWB_PLURAL(n));
    return TRUE;
  }
  case KNNWB_KIND_NONE:
  case KNNWB_KIND_COUNT:
    *summary = g_strdup("files");
    return TRUE;
  }
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "step type '%s' produced no %s", type->name,
              knnwb_kind_to_string(value->kind));
  return FALSE;
}

static void knnwb_pipeline_print_report(const KnnwbPipeline *pipeline,
                                        const KnnwbPipelineStepReport *reports, guint n_done,
                                        gboolean peak_per_step)
{
  printf("%-4s %-20s %-16s %10s %12s  %s\n", "#", "step", "type", "seconds",
         peak_per_step ? "peak memory" : "peak so far", "result");
  double total = 0;
  for (guint position = 0; position < n_done; position++) {
    const KnnwbPipelineStep *step = pipeline->steps->pdata[pipeline->order[position]];
    g_autofree char *peak = knnwb_host_format_bytes(reports[position].peak_bytes);
    printf("%-4u %-20s %-16s %10.3f %12s  %s\n", position + 1, step->id, step->type_name,
           reports[position].seconds, peak,
           reports[position].summary ? reports[position].summary : "failed");
    total += reports[position].seconds;
  }
  printf("total %.3f s\n", total);
}

gboolean knnwb_pipeline_run(KnnwbPipeline *pipeline, const KnnwbPipelineOptions *options,
                            const volatile gint *cancel, GError **error)
{
  guint n = pipeline->steps->len;
  g_autofree KnnwbValue **values = g_new0(KnnwbValue *, n ? n : 1);
  g_autofree KnnwbPipelineStepReport *reports = g_new0(KnnwbPipelineStepReport, n ? n : 1);
  g_autoptr(GPtrArray) outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free);
  /* Per step, the temporaries of its output parameters (index into outputs, or -1). */
  g_autofree gint *first_output = g_new0(gint, n ? n : 1);
  /* Per-step peaks only when reported: the sampler costs a thread. */
  gboolean peak_per_step = options->report && knnwb_host_memory_peak() > 0;
  gboolean ok = TRUE;
  guint n_done = 0;
  /* Under mpirun the steps flagged KNNWB_STEP_SPLIT_ROWS run on every rank with their matrices
   * split (each rank reads and holds its block of rows; the kNN steps share the work and rank 0
   * builds the graph); every other step runs on rank 0 alone, which also writes every file. The
   * ranks meet before and after each split step and at the end, so a failure anywhere stops all. */
  const KnnwbKnnGroup *group = knnwb_host_group();
  if (group != NULL && group->size <= 1)
    group = NULL;
  const gboolean root = group == NULL || group->rank == 0;
  g_autofree gboolean *split = group != NULL ? knnwb_pipeline_split_plan(pipeline) : NULL;
  g_autofree gboolean *scatter =
      group != NULL ? knnwb_pipeline_scatter_plan(pipeline, split) : NULL;
  /* The blocks scattered from rank 0's matrices: the steps' outputs may point at them (points). */
  g_autoptr(GPtrArray) scattered =
      g_ptr_array_new_with_free_func((GDestroyNotify)knnwb_pipeline_value_free);
  gboolean synced_failure = FALSE; /* the ranks agreed on a failure: no more meetings */
  /* Focus labels are checked once their rows are read (rank 0, which holds every label). */
  g_autofree int *focus_rows_of = root ? knnwb_pipeline_focus_plan(pipeline) : NULL;

  /* Every output directory proves it takes new files before the first step runs, not after an
   * hour of work (root passes access() even on /proc; creating a file cannot be fooled). */
  for (guint position = 0; position < n && ok && root; position++) {
    const KnnwbPipelineStep *step = pipeline->steps->pdata[pipeline->order[position]];
    const KnnwbStepType *type = step->step->type;
    first_output[pipeline->order[position]] = (gint)outputs->len;
    for (guint i = 0; i < type->n_params && ok; i++) {
      const char *final = step->values[i].v_string;
      if (type->params[i].type != KNNWB_PARAM_OUTPUT_FILE || final == NULL)
        continue;
      g_autoptr(GError) local = NULL;
      ok = knnwb_host_outputs_add(outputs, final, &local) != NULL;
      if (!ok)
        g_set_error(error, local->domain, local->code, "%s:%d: step '%s' (%s): %s", pipeline->path,
                    step->line, step->id, type->name, local->message);
    }
  }

  if (group != NULL && !knnwb_pipeline_ranks_sync(group, ok, error)) {
    ok = FALSE;
    synced_failure = TRUE;
  }

  for (guint position = 0; position < n && ok; position++) {
    guint s = pipeline->order[position];
    KnnwbPipelineStep *step = pipeline->steps->pdata[s];
    const KnnwbStepType *type = step->step->type;
    const gboolean scatter_step = scatter != NULL && scatter[s];
    const gboolean split_step = (split != NULL && split[s]) || scatter_step;
    if (!split_step && !root)
      continue; /* rank 0's step: this rank holds none of its inputs */
    if (cancel != NULL && *cancel) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted before step '%s'",
                  step->id);
      ok = FALSE;
    }
    /* Every rank of a split step meets the others first (rank 0 may have failed alone). */
    if (split_step && !knnwb_pipeline_ranks_sync(group, ok, error)) {
      ok = FALSE;
      synced_failure = TRUE;
    }
    if (!ok)
      break;

    g_autofree const KnnwbValue **inputs = g_new0(const KnnwbValue *, type->n_inputs + 1);
    for (guint i = 0; i < type->n_inputs; i++)
      inputs[i] = step->sources[i] >= 0 ? values[step->sources[i]] : NULL;
    /* Rank 0's matrices cut into every rank's block, so that the kNN work is shared. */
    for (guint i = 0; i < type->n_inputs && scatter_step; i++) {
      if (step->sources[i] < 0)
        continue;
      KnnwbValue *block = knnwb_pipeline_value_new(KNNWB_KIND_MATRIX);
      g_ptr_array_add(scattered, block);
      g_autoptr(GError) local = NULL;
      if (!knnwb_pipeline_scatter_rows(group, root ? inputs[i]->matrix : NULL, &block->matrix,
                                       &block->block_first, &block->block_total, &local)) {
        g_set_error(error, local->domain, local->code, "%s:%d: step '%s' (%s): %s", pipeline->path,
                    step->line, step->id, type->name, local->message);
        ok = FALSE;
        synced_failure = TRUE; /* agreed inside */
        break;
      }
      block->block_labels = root ? knnwb_host_value_labels(inputs[i]) : NULL;
      inputs[i] = block;
    }
    if (!ok)
      break;
    g_autofree KnnwbParamValue *params = g_new0(KnnwbParamValue, type->n_params + 1);
    guint next_output = (guint)first_output[s];
    for (guint i = 0; i < type->n_params; i++) {
      params[i] = step->values[i];
      /* Files are rank 0's to write (the other ranks hold no temporaries). */
      if (type->params[i].type == KNNWB_PARAM_OUTPUT_FILE && params[i].v_string != NULL)
        params[i].v_string =
            root ? ((KnnwbPipelineOutput *)outputs->pdata[next_output++])->temporary : NULL;
    }
    values[s] = type->output != KNNWB_KIND_NONE ? knnwb_pipeline_value_new(type->output) : NULL;

    g_autofree char *label = g_strdup_printf("[%u/%u] %s", position + 1, n, step->id);
    if (!options->quiet)
      g_printerr("knnwb: %s (%s)\n", label, type->name);
    KnnwbHostProgress *progress = knnwb_host_progress_new(label, options->quiet);
    if (split_step && group != NULL) /* a share of the ranks' schedule, not tiles */
      knnwb_host_progress_set_unit(progress, NULL);
    else if (g_str_equal(type->name, "load-matrix")) /* the file's bytes read */
      knnwb_host_progress_set_unit(progress, "bytes");
    KnnwbStepContext context = {
        .step_id = step->id,
        .type = type,
        .inputs = inputs,
        .params = params,
        .output = values[s],
        .n_threads = options->n_threads,
        .memory_bytes = options->memory_bytes,
        .cancel = cancel,
        .progress = progress ? knnwb_host_progress_update : NULL,
        .progress_data = progress,
        .group = split_step ? group : NULL,
        .host_private = pipeline,
    };
    KnnwbHostMemorySampler *sampler = peak_per_step ? knnwb_host_memory_sampler_start() : NULL;
    gint64 start = g_get_monotonic_time();
    g_autoptr(GError) local = NULL;
    /* Rank 0's own steps compute alone: a kNN run inside must not wait for the other ranks. */
    if (group != NULL && !split_step)
      knnwb_knn_group_set_default(NULL);
    ok = type->run(&context, &local);
    if (group != NULL && !split_step)
      knnwb_knn_group_set_default(group);
    if (ok && local != NULL)
      g_clear_error(&local);
    if (!ok && local == NULL)
      g_set_error(&local, KNNWB_ERROR, KNNWB_ERROR_FAILED, "failed without saying why");
    reports[position].seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    reports[position].peak_bytes = knnwb_host_memory_sampler_stop(sampler);
    knnwb_host_progress_finish(progress);
    if (ok && values[s] != NULL && split_step && values[s]->block_total > 0)
      reports[position].summary = g_strdup_printf(
          "matrix %zu x %zu (rank 0's block of %zu rows)", values[s]->matrix->n_rows,
          values[s]->matrix->n_cols, values[s]->block_total);
    else if (ok && values[s] != NULL && root)
      ok = knnwb_pipeline_value_check(values[s], type, &reports[position].summary, &local);
    else if (ok)
      reports[position].summary = g_strdup("files written");
    n_done = position + 1;
    /* A message about a temporary names the file the user asked for. */
    knnwb_host_outputs_name_targets(outputs, local);
    if (!ok) {
      if (local->domain == KNNWB_ERROR && local->code == KNNWB_ERROR_CANCELLED)
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s:%d: step '%s' (%s): %s",
                    pipeline->path, step->line, step->id, type->name, local->message);
      else
        g_set_error(error, local->domain, local->code, "%s:%d: step '%s' (%s) failed: %s",
                    pipeline->path, step->line, step->id, type->name, local->message);
    }
    if (ok && focus_rows_of != NULL &&
        !knnwb_pipeline_focus_check(pipeline, s, values[s], focus_rows_of, error))
      ok = FALSE;
    if (split_step && !knnwb_pipeline_ranks_sync(group, ok, error)) {
      ok = FALSE;
      synced_failure = TRUE;
    }
  }
  /* The last meeting: every rank learns how rank 0's steps went. */
  if (group != NULL && !synced_failure && !knnwb_pipeline_ranks_sync(group, ok, error)) {
    ok = FALSE;
    synced_failure = TRUE;
  }

  /* The last thing, and only when no signal arrived during the last step (which may not have
   * polled the flag): an interrupted run never touches the previous outputs. In a job rank 0
   * wrote every file and puts them in place; the others learn whether that worked. */
  if (ok && root)
    ok = knnwb_host_outputs_commit(outputs, cancel, error);
  else
    knnwb_host_outputs_discard(outputs);
  if (group != NULL && !synced_failure && !knnwb_pipeline_ranks_sync(group, ok, error))
    ok = FALSE;

  if (options->report && n_done > 0)
    knnwb_pipeline_print_report(pipeline, reports, n_done, peak_per_step);
  for (guint i = 0; i < n; i++)
    knnwb_pipeline_value_free(values[i]);
  for (guint i = 0; i < n; i++)
    g_free(reports[i].summary);
  return ok;
}
