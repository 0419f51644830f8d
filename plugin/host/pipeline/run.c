/* Running a checked pipeline: steps in dependency order, outputs committed only at the end.
 *
 * One run is a sequence of phases over one state (KnnwbPipelineRun): every output file proves its
 * directory takes new files, each step runs (its values made, rank 0's matrices scattered where
 * the ranks share its work, the step called, its value checked), then the outputs are committed
 * together. Under mpirun the steps flagged KNNWB_STEP_SPLIT_ROWS run on every rank with their
 * matrices split (each rank reads and holds its block of rows; the kNN steps share the work and
 * rank 0 builds the graph); every other step runs on rank 0 alone, which also writes every file.
 * The ranks meet before and after each split step and at the end, so a failure anywhere stops
 * all of them; every collective call is reached by every rank whatever failed before it. */
#include <stdio.h>
#include <string.h>
#include <knnwb/error.h>
#include "pipeline/pipeline_internal.h"
#include "pipeline/value.h"
#include "runtime/runtime.h"

typedef struct {
  double seconds;
  guint64 peak_bytes;
  char *summary;
} KnnwbPipelineStepReport;

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

/* One run's state, shared by its phases. */
typedef struct {
  KnnwbPipeline *pipeline;
  const KnnwbPipelineOptions *options;
  const volatile gint *cancel;
  guint n;                          /* steps */
  KnnwbValue **values;              /* per step index: its output, once made */
  KnnwbPipelineStepReport *reports; /* per position in run order */
  guint n_done;                     /* positions whose step ran (their reports are filled) */
  GPtrArray *outputs;               /* KnnwbPipelineOutput: every output file, rank 0 */
  gint *first_output;               /* per step index: its first output file's index in outputs */
  gboolean peak_per_step;     /* per-step peaks only when reported: the sampler costs a thread */
  const KnnwbKnnGroup *group; /* the ranks of the job; NULL when alone */
  gboolean root;              /* rank 0, or alone */
  gboolean *split;            /* per step index: runs on every rank (knnwb_pipeline_split_plan) */
  gboolean *scatter;          /* per step index: rank 0's matrices scattered first (scatter_plan) */
  /* The blocks scattered from rank 0's matrices: the steps' outputs may point at them (points). */
  GPtrArray *scattered;
  gboolean synced_failure; /* the ranks agreed on a failure: no more meetings */
  /* Focus labels are checked once their rows are read (rank 0, which holds every label). */
  int *focus_rows_of;
} KnnwbPipelineRun;

static void knnwb_pipeline_run_init(KnnwbPipelineRun *run, KnnwbPipeline *pipeline,
                                    const KnnwbPipelineOptions *options,
                                    const volatile gint *cancel)
{
  const guint n = pipeline->steps->len;
  *run = (KnnwbPipelineRun){
      .pipeline = pipeline,
      .options = options,
      .cancel = cancel,
      .n = n,
      .values = g_new0(KnnwbValue *, n ? n : 1),
      .reports = g_new0(KnnwbPipelineStepReport, n ? n : 1),
      .outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free),
      .first_output = g_new0(gint, n ? n : 1),
      .peak_per_step = options->report && knnwb_host_memory_peak() > 0,
      .group = knnwb_host_group(),
      .scattered = g_ptr_array_new_with_free_func((GDestroyNotify)knnwb_pipeline_value_free),
  };
  if (run->group != NULL && run->group->size <= 1)
    run->group = NULL;
  run->root = run->group == NULL || run->group->rank == 0;
  if (run->group != NULL) {
    run->split = knnwb_pipeline_split_plan(pipeline);
    run->scatter = knnwb_pipeline_scatter_plan(pipeline, run->split);
  }
  run->focus_rows_of = run->root ? knnwb_pipeline_focus_plan(pipeline) : NULL;
}

static void knnwb_pipeline_run_clear(KnnwbPipelineRun *run)
{
  for (guint i = 0; i < run->n; i++)
    knnwb_pipeline_value_free(run->values[i]);
  for (guint i = 0; i < run->n; i++)
    g_free(run->reports[i].summary);
  g_ptr_array_unref(run->scattered);
  g_ptr_array_unref(run->outputs);
  g_free(run->values);
  g_free(run->reports);
  g_free(run->first_output);
  g_free(run->split);
  g_free(run->scatter);
  g_free(run->focus_rows_of);
}

/* The ranks meet (knnwb_pipeline_ranks_sync); a failure they agreed on ends the meetings. */
static gboolean knnwb_pipeline_run_sync(KnnwbPipelineRun *run, gboolean ok, GError **error)
{
  if (knnwb_pipeline_ranks_sync(run->group, ok, error))
    return TRUE;
  run->synced_failure = TRUE;
  return FALSE;
}

/* error: local prefixed with the step's place, "file:line: step 'id' (type)[ failed]: "; for a
 * pipeline built in code, with its source ("source: "), or as it is when it has none: a command
 * says what failed as it did when it called the library itself. */
static void knnwb_pipeline_run_step_error(const KnnwbPipeline *pipeline,
                                          const KnnwbPipelineStep *step, const GError *local,
                                          gboolean failed, GError **error)
{
  if (pipeline->path == NULL)
    g_set_error(error, local->domain, local->code, "%s%s%s",
                pipeline->source ? pipeline->source : "", pipeline->source ? ": " : "",
                local->message);
  else
    g_set_error(error, local->domain, local->code, "%s:%d: step '%s' (%s)%s: %s", pipeline->path,
                step->line, step->id, step->step->type->name, failed ? " failed" : "",
                local->message);
}

/* Every output directory proves it takes new files before the first step runs, not after an hour
 * of work (root passes access() even on /proc; creating a file cannot be fooled). Rank 0. */
static gboolean knnwb_pipeline_run_add_outputs(KnnwbPipelineRun *run, GError **error)
{
  const KnnwbPipeline *pipeline = run->pipeline;
  for (guint position = 0; position < run->n; position++) {
    const KnnwbPipelineStep *step = pipeline->steps->pdata[pipeline->order[position]];
    const KnnwbStepType *type = step->step->type;
    run->first_output[pipeline->order[position]] = (gint)run->outputs->len;
    for (guint i = 0; i < type->n_params; i++) {
      const char *final = step->values[i].v_string;
      if (type->params[i].type != KNNWB_PARAM_OUTPUT_FILE || final == NULL)
        continue;
      g_autoptr(GError) local = NULL;
      const char *temporary = knnwb_host_outputs_add(run->outputs, final, &local);
      if (temporary == NULL) {
        knnwb_pipeline_run_step_error(pipeline, step, local, FALSE, error);
        return FALSE;
      }
      /* The writer puts its side file beside the temporary: committed with the rest. */
      g_autofree char *side_final = knnwb_pipeline_side_file(step, i, NULL);
      g_autofree char *side_temporary = knnwb_pipeline_side_file(step, i, temporary);
      if (side_final != NULL && side_temporary != NULL)
        knnwb_host_outputs_add_side_file(run->outputs, side_temporary, side_final);
    }
  }
  return TRUE;
}

/* The step's output value and, when rank 0's matrices are scattered for it, an empty block per
 * connected input (blocks, owned by run->scattered): made before the ranks meet, so that a
 * failure here is agreed like any other. */
static gboolean knnwb_pipeline_run_make_values(KnnwbPipelineRun *run, guint s,
                                               gboolean scatter_step, KnnwbValue **blocks,
                                               GError **error)
{
  const KnnwbPipelineStep *step = run->pipeline->steps->pdata[s];
  const KnnwbStepType *type = step->step->type;
  g_autoptr(GError) local = NULL;
  if (type->output != KNNWB_KIND_NONE &&
      (run->values[s] = knnwb_pipeline_value_new(type->output, &local)) == NULL) {
    knnwb_pipeline_run_step_error(run->pipeline, step, local, FALSE, error);
    return FALSE;
  }
  for (guint i = 0; i < type->n_inputs && scatter_step; i++) {
    if (step->sources[i] < 0)
      continue;
    if ((blocks[i] = knnwb_pipeline_value_new(KNNWB_KIND_MATRIX, &local)) == NULL) {
      knnwb_pipeline_run_step_error(run->pipeline, step, local, FALSE, error);
      return FALSE;
    }
    g_ptr_array_add(run->scattered, blocks[i]);
  }
  return TRUE;
}

/* Rank 0's matrices cut into every rank's block (into blocks), so that the kNN work is shared;
 * inputs then point at the blocks. Collective; a failure is agreed inside. */
static gboolean knnwb_pipeline_run_scatter(KnnwbPipelineRun *run, const KnnwbPipelineStep *step,
                                           const KnnwbValue **inputs, KnnwbValue **blocks,
                                           GError **error)
{
  const KnnwbStepType *type = step->step->type;
  for (guint i = 0; i < type->n_inputs; i++) {
    if (step->sources[i] < 0)
      continue;
    KnnwbValue *block = blocks[i];
    g_autoptr(GError) local = NULL;
    if (!knnwb_pipeline_scatter_rows(run->group, run->root ? inputs[i]->matrix : NULL,
                                     &block->matrix, &block->block_first, &block->block_total,
                                     &local)) {
      knnwb_pipeline_run_step_error(run->pipeline, step, local, FALSE, error);
      run->synced_failure = TRUE;
      return FALSE;
    }
    block->block_labels = run->root ? knnwb_pipeline_value_labels(inputs[i]) : NULL;
    inputs[i] = block;
  }
  return TRUE;
}

/* The step's parameter values; output files become their temporaries, which are rank 0's to
 * write (the other ranks hold none). g_free. */
static KnnwbParamValue *knnwb_pipeline_run_params(const KnnwbPipelineRun *run, guint s)
{
  const KnnwbPipelineStep *step = run->pipeline->steps->pdata[s];
  const KnnwbStepType *type = step->step->type;
  KnnwbParamValue *params = g_new0(KnnwbParamValue, type->n_params + 1);
  guint next_output = (guint)run->first_output[s];
  for (guint i = 0; i < type->n_params; i++) {
    params[i] = step->values[i];
    if (type->params[i].type == KNNWB_PARAM_OUTPUT_FILE && params[i].v_string != NULL)
      params[i].v_string =
          run->root ? ((KnnwbPipelineOutput *)run->outputs->pdata[next_output++])->temporary : NULL;
  }
  return params;
}

/* Calls the step's run function with its progress line, wall time and memory peak (the report
 * at position). FALSE with *local set (a step that fails without saying why gets a message). */
static gboolean knnwb_pipeline_run_call(KnnwbPipelineRun *run, guint position, gboolean split_step,
                                        const KnnwbValue *const *inputs,
                                        const KnnwbParamValue *params, GError **local)
{
  const guint s = run->pipeline->order[position];
  const KnnwbPipelineStep *step = run->pipeline->steps->pdata[s];
  const KnnwbStepType *type = step->step->type;
  /* quiet_steps: a command's progress lines are named by its step ids alone. */
  g_autofree char *label = run->options->quiet_steps
                               ? g_strdup(step->id)
                               : g_strdup_printf("[%u/%u] %s", position + 1, run->n, step->id);
  if (!run->options->quiet && !run->options->quiet_steps)
    g_printerr("knnwb: %s (%s)\n", label, type->name);
  KnnwbHostProgress *progress = knnwb_host_progress_new(label, run->options->quiet);
  if (split_step && run->group != NULL) /* a share of the ranks' schedule, not tiles */
    knnwb_host_progress_set_unit(progress, NULL);
  else if (g_str_equal(type->name, "load-matrix")) /* the file's bytes read */
    knnwb_host_progress_set_unit(progress, "bytes");
  KnnwbStepContext context = {
      .step_id = step->id,
      .type = type,
      .inputs = inputs,
      .params = params,
      .output = run->values[s],
      .n_threads = run->options->n_threads,
      .memory_bytes = run->options->memory_bytes,
      .cancel = run->cancel,
      .progress = progress ? knnwb_host_progress_update : NULL,
      .progress_data = progress,
      .group = split_step ? run->group : NULL, /* rank 0's own steps compute alone */
      .host_private = run->pipeline,
  };
  KnnwbHostMemorySampler *sampler = run->peak_per_step ? knnwb_host_memory_sampler_start() : NULL;
  gint64 start = g_get_monotonic_time();
  gboolean ok = type->run(&context, local);
  if (ok && *local != NULL)
    g_clear_error(local);
  if (!ok && *local == NULL)
    g_set_error(local, KNNWB_ERROR, KNNWB_ERROR_FAILED, "failed without saying why");
  run->reports[position].seconds = (double)(g_get_monotonic_time() - start) / 1e6;
  run->reports[position].peak_bytes = knnwb_host_memory_sampler_stop(sampler);
  knnwb_host_progress_finish(progress);
  return ok;
}

/* The step's line of the report; a value made on rank 0 is checked against what its type
 * promised first. Errors: knnwb_pipeline_value_check's. */
static gboolean knnwb_pipeline_run_summarise(KnnwbPipelineRun *run, guint position,
                                             gboolean split_step, GError **error)
{
  const guint s = run->pipeline->order[position];
  const KnnwbPipelineStep *step = run->pipeline->steps->pdata[s];
  KnnwbValue *value = run->values[s];
  char **summary = &run->reports[position].summary;
  if (value != NULL && split_step && value->block_total > 0) {
    *summary = g_strdup_printf("matrix %zu x %zu (rank 0's block of %zu rows)",
                               value->matrix->n_rows, value->matrix->n_cols, value->block_total);
    return TRUE;
  }
  if (value != NULL && run->root)
    return knnwb_pipeline_value_check(value, step->step->type, summary, error);
  *summary = g_strdup("files written");
  return TRUE;
}

/* Runs the step at position where it belongs: on every rank when split, else on rank 0 (the
 * other ranks return at once). FALSE with error set when it failed, here or on another rank, or
 * a signal arrived before it. */
static gboolean knnwb_pipeline_run_step(KnnwbPipelineRun *run, guint position, GError **error)
{
  const KnnwbPipeline *pipeline = run->pipeline;
  const guint s = pipeline->order[position];
  const KnnwbPipelineStep *step = pipeline->steps->pdata[s];
  const KnnwbStepType *type = step->step->type;
  const gboolean scatter_step = run->scatter != NULL && run->scatter[s];
  const gboolean split_step = (run->split != NULL && run->split[s]) || scatter_step;
  if (!split_step && !run->root)
    return TRUE; /* rank 0's step: this rank holds none of its inputs */
  gboolean ok = TRUE;
  if (run->cancel != NULL && *run->cancel) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted before step '%s'",
                step->id);
    ok = FALSE;
  }
  g_autofree KnnwbValue **blocks = g_new0(KnnwbValue *, type->n_inputs + 1);
  ok = ok && knnwb_pipeline_run_make_values(run, s, scatter_step, blocks, error);
  /* Every rank of a split step meets the others first (rank 0 may have failed alone). */
  if (split_step && !knnwb_pipeline_run_sync(run, ok, error))
    ok = FALSE;
  if (!ok)
    return FALSE;

  g_autofree const KnnwbValue **inputs = g_new0(const KnnwbValue *, type->n_inputs + 1);
  for (guint i = 0; i < type->n_inputs; i++)
    inputs[i] = step->sources[i] >= 0 ? run->values[step->sources[i]] : NULL;
  if (scatter_step && !knnwb_pipeline_run_scatter(run, step, inputs, blocks, error))
    return FALSE;
  g_autofree KnnwbParamValue *params = knnwb_pipeline_run_params(run, s);
  g_autoptr(GError) local = NULL;
  ok = knnwb_pipeline_run_call(run, position, split_step, inputs, params, &local) &&
       knnwb_pipeline_run_summarise(run, position, split_step, &local);
  run->n_done = position + 1;
  /* A message about a temporary names the file the user asked for. */
  knnwb_host_outputs_name_targets(run->outputs, local);
  if (!ok)
    knnwb_pipeline_run_step_error(
        pipeline, step, local, !g_error_matches(local, KNNWB_ERROR, KNNWB_ERROR_CANCELLED), error);
  if (ok && run->focus_rows_of != NULL &&
      !knnwb_pipeline_focus_check(pipeline, s, run->values[s], run->focus_rows_of, error))
    ok = FALSE;
  if (split_step && !knnwb_pipeline_run_sync(run, ok, error))
    ok = FALSE;
  return ok;
}

/* The end of a run: the last meetings and the commit. */
static gboolean knnwb_pipeline_run_finish(KnnwbPipelineRun *run, gboolean ok, GError **error)
{
  /* The last meeting: every rank learns how rank 0's steps went. */
  if (run->group != NULL && !run->synced_failure && !knnwb_pipeline_run_sync(run, ok, error))
    ok = FALSE;
  /* The last thing, and only when no signal arrived during the last step (which may not have
   * polled the flag): an interrupted run never touches the previous outputs. In a job rank 0
   * wrote every file and puts them in place; the others learn whether that worked. */
  if (ok && run->root)
    ok = knnwb_host_outputs_commit(run->outputs, run->cancel, error);
  else
    knnwb_host_outputs_discard(run->outputs);
  if (run->group != NULL && !run->synced_failure &&
      !knnwb_pipeline_ranks_sync(run->group, ok, error))
    ok = FALSE;
  return ok;
}

gboolean knnwb_pipeline_run(KnnwbPipeline *pipeline, const KnnwbPipelineOptions *options,
                            const volatile gint *cancel, GError **error)
{
  KnnwbPipelineRun run;
  knnwb_pipeline_run_init(&run, pipeline, options, cancel);
  gboolean ok = !run.root || knnwb_pipeline_run_add_outputs(&run, error);
  if (run.group != NULL && !knnwb_pipeline_run_sync(&run, ok, error))
    ok = FALSE;
  for (guint position = 0; position < run.n && ok; position++)
    ok = knnwb_pipeline_run_step(&run, position, error);
  ok = knnwb_pipeline_run_finish(&run, ok, error);
  if (options->report && run.n_done > 0)
    knnwb_pipeline_print_report(pipeline, run.reports, run.n_done, run.peak_per_step);
  knnwb_pipeline_run_clear(&run);
  return ok;
}
