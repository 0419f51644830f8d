/* 2-D coordinates for drawing: Fruchterman-Reingold (grid variant above 1000 vertices), DrL, UMAP
 * from the kNN distances, or an automatic choice that stays fast at every size.
 *
 * igraph's layouts call IGRAPH_ALLOW_INTERRUPTION once per iteration (FR, UMAP epochs, DrL
 * iterations); the interruption handler installed for the duration of a layout reports progress
 * from those calls and stops the layout (IGRAPH_INTERRUPTED) once the cancel flag is raised.
 * DrL and UMAP run in a child process that is killed instead (layout_child.c says why). */
#include "drawing_internal.h"

#include <math.h>
#include <string.h>

static const KnnwbEnumName knnwb_layout_names[] = {KNNWB_LAYOUT_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_layout_table =
    KNNWB_ENUM_TABLE(knnwb_layout_names, 0, ", ", "unknown layout ", " (known: ", ")", "(null)");

gboolean knnwb_drawing_layout_from_string(const char *name, KnnwbLayout *layout, GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_layout_table, name, &value, error))
    return FALSE;
  *layout = (KnnwbLayout)value;
  return TRUE;
}

const char *knnwb_drawing_layout_to_string(KnnwbLayout layout)
{
  const char *name = knnwb_enum_to_string(&knnwb_layout_table, (int)layout);
  return name != NULL ? name : "unknown";
}

KnnwbLayout knnwb_drawing_layout_choose(KnnwbLayout layout, igraph_integer_t n_vertices,
                                        igraph_integer_t fr_max_vertices)
{
  if (layout != KNNWB_LAYOUT_AUTO)
    return layout;
  /* Measured on kNN graphs of planted modules (docs/performance-files.md): FR with igraph's grid
   * variant takes about 0.09 ms per vertex (12,625 vertices, k = 10 union: 1.1 s on one core)
   * and separates the modules; UMAP costs more per vertex on such graphs, DrL far more. Past
   * fr_max_vertices even FR takes longer than the kNN itself, so nothing is laid out by
   * default (yEd and the render command then need a layout asked for by name). */
  return n_vertices <= fr_max_vertices ? KNNWB_LAYOUT_FR : KNNWB_LAYOUT_NONE;
}

/* ---- progress and cancellation through igraph's interruption handler (process-wide) ---- */

static const KnnwbWriteControl *knnwb_layout_control;
static igraph_interruption_handler_t *knnwb_layout_previous;
static uint64_t knnwb_layout_calls, knnwb_layout_expected;
static gboolean knnwb_layout_interrupted;
/* FALSE for UMAP run in this process: igraph 0.10.2 goes on after an interrupted epoch with freed
 * weights (layout_child.c), so the cancellation is reported after it ends instead. */
static gboolean knnwb_layout_may_stop;

/* Reports progress; TRUE when the layout must stop: the control's cancel flag, or, without a
 * control of our own, the process's handler (the host's signals). */
static gboolean knnwb_layout_cancel_requested(void *data)
{
  const KnnwbWriteControl *control = knnwb_layout_control;
  if (control != NULL && control->progress != NULL)
    control->progress(MIN(knnwb_layout_calls, knnwb_layout_expected), knnwb_layout_expected,
                      control->progress_data);
  if (control != NULL)
    return control->cancel != NULL && *control->cancel != 0;
  return knnwb_layout_previous != NULL && knnwb_layout_previous(data) != IGRAPH_SUCCESS;
}

static igraph_error_t knnwb_layout_interruption(void *data)
{
  knnwb_layout_calls++;
  if (!knnwb_layout_cancel_requested(data))
    return IGRAPH_SUCCESS;
  knnwb_layout_interrupted = TRUE;
  if (!knnwb_layout_may_stop)
    return IGRAPH_SUCCESS;
  /* igraph returns IGRAPH_INTERRUPTED from the iteration without freeing what the layout put on
   * the FINALLY stack; the first IGRAPH_CHECK above it would free those entries after their
   * frames are gone. Free them now, while the frames still live (our own vectors are kept off
   * that stack during the call). DrL run in this process (when no child could be started) puts
   * nothing there; its iteration loop returns and igraph_layout_drl reports success without
   * coordinates, which knnwb_layout_interrupted turns into the cancellation. */
  IGRAPH_FINALLY_FREE();
  return IGRAPH_INTERRUPTED;
}

/* The parent's side of the layout child (layout_child.c): progress and the cancel decision. */
static gboolean knnwb_layout_drl_poll(uint64_t iterations, void *data)
{
  knnwb_layout_calls = iterations;
  if (!knnwb_layout_cancel_requested(data))
    return FALSE;
  knnwb_layout_interrupted = TRUE;
  return TRUE;
}

/* Distances become attractions in [~0.9, 10]: the nearest neighbours pull hardest. FR and DrL
 * need positive weights, and raw distances can be negative (the seed's r) or zero. */
static igraph_error_t knnwb_layout_attractions(const igraph_vector_t *distances,
                                               igraph_vector_t *attractions)
{
  igraph_integer_t m = igraph_vector_size(distances);
  IGRAPH_CHECK(igraph_vector_resize(attractions, m));
  double lo = INFINITY, hi = -INFINITY;
  for (igraph_integer_t e = 0; e < m; e++) {
    double d = VECTOR(*distances)[e];
    if (isfinite(d)) {
      lo = MIN(lo, d);
      hi = MAX(hi, d);
    }
  }
  double span = hi > lo ? hi - lo : 1.0;
  for (igraph_integer_t e = 0; e < m; e++) {
    double d = VECTOR(*distances)[e];
    double relative = isfinite(d) ? (d - lo) / span : 1.0;
    VECTOR(*attractions)[e] = 1.0 / (relative + 0.1);
  }
  return IGRAPH_SUCCESS;
}

/* UMAP wants distances >= 0 (it turns them into memberships itself). */
static igraph_error_t knnwb_layout_umap_distances(const igraph_vector_t *distances,
                                                  igraph_vector_t *out)
{
  igraph_integer_t m = igraph_vector_size(distances);
  IGRAPH_CHECK(igraph_vector_resize(out, m));
  double lo = 0.0, hi = 0.0;
  for (igraph_integer_t e = 0; e < m; e++)
    if (isfinite(VECTOR(*distances)[e])) {
      lo = MIN(lo, VECTOR(*distances)[e]);
      hi = MAX(hi, VECTOR(*distances)[e]);
    }
  for (igraph_integer_t e = 0; e < m; e++) {
    double d = VECTOR(*distances)[e];
    VECTOR(*out)[e] = isfinite(d) ? d - lo : hi - lo;
  }
  return IGRAPH_SUCCESS;
}

enum { KNNWB_FR_ITERATIONS = 500, KNNWB_UMAP_EPOCHS = 200 };

/* Runs the igraph layout. The transformed weights stay off igraph's FINALLY stack: an interrupted
 * layout empties that stack from the interruption handler. */
static igraph_error_t knnwb_layout_compute(const igraph_t *graph, const igraph_vector_t *weights,
                                           KnnwbLayout layout, igraph_matrix_t *coordinates)
{
  igraph_integer_t n = igraph_vcount(graph);
  if (n == 0)
    return igraph_matrix_resize(coordinates, 0, 2);
  igraph_vector_t transformed;
  igraph_error_t code = igraph_vector_init(&transformed, 0);
  if (code != IGRAPH_SUCCESS)
    return code;
  const igraph_vector_t *w = NULL;
  if (weights != NULL) {
    code = layout == KNNWB_LAYOUT_UMAP ? knnwb_layout_umap_distances(weights, &transformed)
                                       : knnwb_layout_attractions(weights, &transformed);
    w = &transformed;
  }
  if (code == IGRAPH_SUCCESS && layout == KNNWB_LAYOUT_UMAP) {
    knnwb_layout_expected = KNNWB_UMAP_EPOCHS;
    /* In a child process that a cancellation kills at once (layout_child.c says why). */
    gboolean isolated = FALSE;
    code = knnwb_drawing_layout_isolated(graph, w, layout, NULL, KNNWB_UMAP_EPOCHS,
                                         knnwb_layout_drl_poll, NULL, coordinates, &isolated);
    knnwb_layout_may_stop = FALSE;
    if (code == IGRAPH_SUCCESS && !isolated)
      code = igraph_layout_umap(graph, coordinates, /*use_seed=*/false, w, /*min_dist=*/0.1,
                                KNNWB_UMAP_EPOCHS, /*sampling_prob=*/0.3);
  } else if (code == IGRAPH_SUCCESS && layout == KNNWB_LAYOUT_DRL) {
    igraph_layout_drl_options_t options;
    code = igraph_layout_drl_options_init(&options, IGRAPH_LAYOUT_DRL_DEFAULT);
    knnwb_layout_expected = (uint64_t)(options.init_iterations + options.liquid_iterations +
                                       options.expansion_iterations + options.cooldown_iterations +
                                       options.crunch_iterations + options.simmer_iterations);
    /* In a child process that a cancellation kills at once (layout_child.c says why). */
    gboolean isolated = FALSE;
    if (code == IGRAPH_SUCCESS)
      code = knnwb_drawing_layout_isolated(graph, w, layout, &options, 0, knnwb_layout_drl_poll,
                                           NULL, coordinates, &isolated);
    if (code == IGRAPH_SUCCESS && !isolated)
      code = igraph_layout_drl(graph, coordinates, /*use_seed=*/false, &options, w);
  } else if (code == IGRAPH_SUCCESS) {
    knnwb_layout_expected = KNNWB_FR_ITERATIONS;
    code = igraph_layout_fruchterman_reingold(graph, coordinates, /*use_seed=*/false,
                                              KNNWB_FR_ITERATIONS, sqrt((double)n),
                                              IGRAPH_LAYOUT_AUTOGRID, w, NULL, NULL, NULL, NULL);
  }
  igraph_vector_destroy(&transformed);
  return code;
}

/* Centre on the origin (yEd and the picture then open on the drawing) and scale so that drawn
 * neighbours in dense clusters are two node sizes apart: nodes of node_size then do not cover
 * each other at 100% zoom, whatever units the layout used. */
static void knnwb_layout_normalise(const igraph_t *graph, double node_size,
                                   igraph_matrix_t *coordinates)
{
  igraph_integer_t n = igraph_matrix_nrow(coordinates);
  if (n == 0)
    return;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (igraph_integer_t v = 0; v < n; v++) {
    x0 = MIN(x0, MATRIX(*coordinates, v, 0));
    x1 = MAX(x1, MATRIX(*coordinates, v, 0));
    y0 = MIN(y0, MATRIX(*coordinates, v, 1));
    y1 = MAX(y1, MATRIX(*coordinates, v, 1));
  }
  double cx = 0.5 * (x0 + x1), cy = 0.5 * (y0 + y1);
  for (igraph_integer_t v = 0; v < n; v++) {
    MATRIX(*coordinates, v, 0) -= cx;
    MATRIX(*coordinates, v, 1) -= cy;
  }
  double spacing = knnwb_drawing_layout_spacing(graph, coordinates);
  if (spacing > 0.0)
    igraph_matrix_scale(coordinates, 2.0 * node_size / spacing);
}

/* Whether graph has self-loops, repeated edges or vertices without edges: igraph 0.10.2's UMAP
 * crashes on any of these. */
static igraph_error_t knnwb_layout_umap_unsafe(const igraph_t *graph, igraph_bool_t *unsafe)
{
  igraph_bool_t loops = false, multiple = false;
  IGRAPH_CHECK(igraph_has_loop(graph, &loops));
  IGRAPH_CHECK(igraph_has_multiple(graph, &multiple));
  igraph_vector_int_t degree;
  IGRAPH_VECTOR_INT_INIT_FINALLY(&degree, 0);
  IGRAPH_CHECK(igraph_degree(graph, &degree, igraph_vss_all(), IGRAPH_ALL, true));
  igraph_integer_t isolated = 0;
  for (igraph_integer_t v = 0; v < igraph_vector_int_size(&degree); v++)
    isolated += VECTOR(degree)[v] == 0;
  igraph_vector_int_destroy(&degree);
  IGRAPH_FINALLY_CLEAN(1);
  *unsafe = loops || multiple || isolated > 0;
  return IGRAPH_SUCCESS;
}

gboolean knnwb_drawing_layout_run(const igraph_t *graph, const igraph_vector_t *weights,
                                  KnnwbLayout layout, igraph_integer_t fr_max_vertices,
                                  unsigned long seed, double node_size,
                                  const KnnwbWriteControl *control, igraph_matrix_t *coordinates,
                                  KnnwbLayout *used, GError **error)
{
  KnnwbLayout chosen = knnwb_drawing_layout_choose(layout, igraph_vcount(graph), fr_max_vertices);
  if (used != NULL)
    *used = chosen;
  if (chosen == KNNWB_LAYOUT_NONE) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "layout 'none' computes nothing");
    return FALSE;
  }
  if (weights != NULL && igraph_vector_size(weights) != igraph_ecount(graph)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%" IGRAPH_PRId " weights for %" IGRAPH_PRId " edges", igraph_vector_size(weights),
                igraph_ecount(graph));
    return FALSE;
  }
  if (chosen == KNNWB_LAYOUT_UMAP) {
    igraph_bool_t unsafe = false;
    if (!knnwb_error_from_igraph(knnwb_layout_umap_unsafe(graph, &unsafe),
                                 "checking the graph for the umap layout", error))
      return FALSE;
    if (unsafe) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "the umap layout needs a graph without self-loops, repeated edges or vertices "
                  "without edges (a kNN graph of rows that all have neighbours); use fr");
      return FALSE;
    }
  }
  /* A private generator of the default's type, seeded and set as igraph's default for the call
   * only (the same draws): a library caller's own stream is not reset to the seed.
   * igraph_rng_set_default copies the structure: the caller's is kept as a copy. */
  igraph_rng_t caller_rng = *igraph_rng_default();
  igraph_rng_t rng;
  if (!knnwb_error_from_igraph(igraph_rng_init(&rng, caller_rng.type), "igraph_rng_init", error))
    return FALSE;
  if (!knnwb_error_from_igraph(igraph_rng_seed(&rng, seed), "igraph_rng_seed", error)) {
    igraph_rng_destroy(&rng);
    return FALSE;
  }
  igraph_rng_set_default(&rng);
  knnwb_layout_control = control;
  knnwb_layout_calls = 0;
  knnwb_layout_expected = 1;
  knnwb_layout_interrupted = FALSE;
  knnwb_layout_may_stop = TRUE;
  knnwb_layout_previous = igraph_set_interruption_handler(knnwb_layout_interruption);
  igraph_error_t code = knnwb_layout_compute(graph, weights, chosen, coordinates);
  igraph_set_interruption_handler(knnwb_layout_previous);
  igraph_rng_set_default(&caller_rng);
  igraph_rng_destroy(&rng);
  knnwb_layout_previous = NULL;
  knnwb_layout_control = NULL;
  if (code == IGRAPH_INTERRUPTED || (code == IGRAPH_SUCCESS && knnwb_layout_interrupted)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "interrupted during the %s layout",
                knnwb_drawing_layout_to_string(chosen));
    return FALSE;
  }
  static const char *const functions[] = {"", "igraph_layout_fruchterman_reingold",
                                          "igraph_layout_drl", "", "igraph_layout_umap"};
  if (!knnwb_error_from_igraph(code, functions[chosen], error))
    return FALSE;
  knnwb_layout_normalise(graph, node_size, coordinates);
  return TRUE;
}

gboolean knnwb_drawing_layout(const igraph_t *graph, const igraph_vector_t *weights,
                              KnnwbLayout layout, igraph_integer_t fr_max_vertices,
                              unsigned long seed, double node_size, igraph_matrix_t *coordinates,
                              GError **error)
{
  return knnwb_drawing_layout_run(graph, weights, layout, fr_max_vertices, seed, node_size, NULL,
                                  coordinates, NULL, error);
}

gboolean knnwb_drawing_layout_for_options(const igraph_t *graph, const igraph_vector_t *weights,
                                          const KnnwbDrawingOptions *options,
                                          const KnnwbWriteControl *control, igraph_matrix_t *layout,
                                          const igraph_matrix_t **coordinates, GError **error)
{
  *coordinates = options->coordinates;
  if (*coordinates == NULL && igraph_vcount(graph) > 0 &&
      knnwb_drawing_layout_choose(options->layout, igraph_vcount(graph),
                                  options->fr_max_vertices) != KNNWB_LAYOUT_NONE) {
    if (!knnwb_drawing_layout_run(graph, weights, options->layout, options->fr_max_vertices,
                                  options->seed, options->node_size, control, layout, NULL, error))
      return FALSE;
    *coordinates = layout;
  }
  return TRUE;
}
