/* DrL and UMAP in a child process that the caller can kill at any moment.
 *
 * Why a process for UMAP: igraph 0.10.2's UMAP polls the interruption handler in its inner loop,
 * but the epoch loop (igraph_i_umap_optimize_layout_stochastic_gradient) ignores what
 * igraph_i_umap_apply_forces returns and goes on with the next epoch, on the weights the
 * interrupted call's FINALLY stack already freed: interrupting UMAP crashed (SIGSEGV, seen with
 * `knnwb knn --layout umap` and Ctrl-C). Its set-up (membership strengths, the a/b fit) does not
 * poll at all. Killed in a child, neither matters.
 *
 * Why a process for DrL: igraph 0.10's DrL (src/layout/drl/drl_graph.cpp, drl_layout.cpp) polls the
 * interruption handler once per iteration only, and igraph_layout_drl ignores what that poll
 * returns. Around the iterations it does long work that cannot be interrupted at all: the
 * constructor fills std::maps with every edge, and the density grid is 1000 x 1000 std::deque
 * bins (about 600 MB) built and destroyed on every call: about 1 s before the first poll and
 * 0.1 s after the last one for a 2,000-vertex graph on a loaded 2-core machine, more for larger
 * graphs and under sanitizers. A thread cannot help: Debian's igraph keeps its error, FINALLY
 * and RNG state in process globals (IGRAPH_THREAD_SAFE is 0), so DrL cannot run beside the rest
 * of the process nor be abandoned half-way. A forked child (knnwb_isolated_run, knnwb/isolated.h)
 * has its own copy of that state; it writes the coordinates into shared memory, and the parent
 * polls its cancel flag every 10 ms and kills the child (SIGKILL) when it rises: a cancellation
 * takes effect in milliseconds whatever DrL is doing. */
#include "drawing_internal.h"

#include <knnwb/isolated.h>

typedef struct {
  const igraph_t *graph;
  const igraph_vector_t *weights;
  KnnwbLayout layout;                         /* DRL or UMAP */
  const igraph_layout_drl_options_t *options; /* DRL */
  igraph_integer_t epochs;                    /* UMAP */
} KnnwbLayoutJob;

static volatile uint64_t *knnwb_layout_child_progress;

/* In the child: count iterations for the parent's progress; the parent decides about stopping. */
static igraph_error_t knnwb_layout_child_interruption(void *data)
{
  (void)data;
  (*knnwb_layout_child_progress)++;
  return IGRAPH_SUCCESS;
}

/* The child's work: the coordinates, row by row, into result (n x 2 doubles). */
static int knnwb_layout_child(void *data, void *result, volatile uint64_t *progress)
{
  const KnnwbLayoutJob *job = data;
  knnwb_layout_child_progress = progress;
  igraph_set_interruption_handler(knnwb_layout_child_interruption);
  igraph_matrix_t coordinates;
  igraph_error_t code = igraph_matrix_init(&coordinates, 0, 0);
  if (code != IGRAPH_SUCCESS)
    return (int)code;
  if (job->layout == KNNWB_LAYOUT_UMAP)
    code = igraph_layout_umap(job->graph, &coordinates, /*use_seed=*/false, job->weights,
                              /*min_dist=*/0.1, job->epochs, /*sampling_prob=*/0.3);
  else
    code =
        igraph_layout_drl(job->graph, &coordinates, /*use_seed=*/false, job->options, job->weights);
  igraph_integer_t n = igraph_vcount(job->graph);
  if (code == IGRAPH_SUCCESS &&
      (igraph_matrix_nrow(&coordinates) != n || igraph_matrix_ncol(&coordinates) != 2))
    code = IGRAPH_FAILURE;
  double *out = result;
  for (igraph_integer_t v = 0; code == IGRAPH_SUCCESS && v < n; v++) {
    out[2 * v] = MATRIX(coordinates, v, 0);
    out[2 * v + 1] = MATRIX(coordinates, v, 1);
  }
  igraph_matrix_destroy(&coordinates);
  return (int)code;
}

igraph_error_t knnwb_drawing_layout_isolated(const igraph_t *graph, const igraph_vector_t *weights,
                                             KnnwbLayout layout,
                                             const igraph_layout_drl_options_t *drl_options,
                                             igraph_integer_t umap_epochs, KnnwbDrlPoll poll,
                                             void *poll_data, igraph_matrix_t *coordinates,
                                             gboolean *isolated)
{
  KnnwbLayoutJob job = {graph, weights, layout, drl_options, umap_epochs};
  const igraph_integer_t n = igraph_vcount(graph);
  const size_t bytes = (size_t)n * 2 * sizeof(double);
  void *result = NULL;
  int child_code = 0;
  g_autoptr(GError) error = NULL;
  gboolean done = knnwb_isolated_run(
      layout == KNNWB_LAYOUT_UMAP ? "the UMAP layout" : "the DrL layout", knnwb_layout_child, &job,
      bytes, poll, poll_data, &result, &child_code, isolated, &error);
  if (!*isolated)
    return IGRAPH_SUCCESS; /* no child to be had: the caller runs the layout here */
  if (!done) {
    if (g_error_matches(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED))
      return IGRAPH_INTERRUPTED;
    IGRAPH_ERRORF("%s", IGRAPH_FAILURE, error->message); /* killed from outside, out of memory */
  }
  igraph_error_t code = (igraph_error_t)child_code;
  if (code == IGRAPH_SUCCESS)
    code = igraph_matrix_resize(coordinates, n, 2);
  const double *values = result;
  for (igraph_integer_t v = 0; code == IGRAPH_SUCCESS && v < n; v++) {
    MATRIX(*coordinates, v, 0) = values[2 * v];
    MATRIX(*coordinates, v, 1) = values[2 * v + 1];
  }
  knnwb_isolated_release(result, bytes);
  return code;
}
