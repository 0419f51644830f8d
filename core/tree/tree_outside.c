/* The nearest row in another group through the k-d tree of core/tree/ (tree.h): the question the
 * exact MST's Borůvka rounds ask (core/engine/knn_outside.c) for the rows whose kNN lists hold only
 * their own component. The tile search compares each such row with every row; on rows of a few
 * columns in clusters most rows of a round ask it, and the tree answers each by opening only the
 * nodes that hold a row of another group near it. */
#include <knnwb/error.h>
#include "tree/tree.h"
#include "tree/tree_internal.h"

struct KnnwbTreeOutside {
  KnnwbTree tree;
  const KnnwbPrepared *prepared;
  KnnwbKnnOptions options; /* the caller's, without progress (a round is one step of theirs) */
  const float *points;     /* every row in the tree's space, by row */
  gboolean angular;
  int threads;
  int32_t *node_group; /* nodes: the group of all of node t's rows, -1 for several */
};

gboolean knnwb_tree_outside_applies(size_t n, size_t d, const KnnwbKnnOptions *options)
{
  KnnwbKnnOptions one = *options;
  one.k = 1;
  return knnwb_tree_applies_shape(n, d, &one);
}

KnnwbTreeOutside *knnwb_tree_outside_new(const KnnwbPrepared *prepared,
                                         const KnnwbKnnOptions *options, GError **error)
{
  g_return_val_if_fail(prepared->n_invalid == 0, NULL);
  KnnwbTreeOutside *outside = g_new0(KnnwbTreeOutside, 1);
  outside->prepared = prepared;
  outside->options = *options;
  outside->options.progress = NULL;
  outside->threads = knnwb_thread_count(options->n_threads);
  outside->angular =
      prepared->metric != KNNWB_METRIC_EUCLIDEAN && prepared->metric != KNNWB_METRIC_MANHATTAN;
  /* (euclidean and manhattan: the rows as stored, whose distances the engine's are) */
  outside->points = outside->angular ? prepared->scored : prepared->exact;
  if (!knnwb_tree_build(&outside->tree, outside->points, prepared->n, prepared->d, NULL,
                        outside->threads, options->cancel)) {
    if (outside->tree.stopped)
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled while building the tree");
    else
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "cannot allocate the tree of %zu rows of %zu columns", prepared->n, prepared->d);
    knnwb_tree_outside_free(outside);
    return NULL;
  }
  outside->node_group = g_try_new(int32_t, outside->tree.nodes);
  if (outside->node_group == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the tree of %zu rows of %zu columns", prepared->n, prepared->d);
    knnwb_tree_outside_free(outside);
    return NULL;
  }
  return outside;
}

void knnwb_tree_outside_free(KnnwbTreeOutside *outside)
{
  if (outside == NULL)
    return;
  knnwb_tree_clear(&outside->tree); /* (nothing when it was not built) */
  g_free(outside->node_group);
  g_free(outside);
}

/* The group of every row of node t (positions [lo, hi), at depth), or -1, into node_group, for
 * the node and every node below it. O(hi - lo). */
static int32_t knnwb_tree_outside_groups(KnnwbTreeOutside *outside, const int32_t *group, size_t t,
                                         size_t lo, size_t hi, int depth)
{
  const KnnwbTree *tree = &outside->tree;
  int32_t shared;
  if (depth == tree->levels) {
    shared = group[tree->order[lo]];
    for (size_t p = lo + 1; p < hi && shared >= 0; p++)
      if (group[tree->order[p]] != shared)
        shared = -1;
  } else {
    const size_t mid = knnwb_tree_mid(lo, hi);
    const int32_t left = knnwb_tree_outside_groups(outside, group, 2 * t + 1, lo, mid, depth + 1);
    const int32_t right = knnwb_tree_outside_groups(outside, group, 2 * t + 2, mid, hi, depth + 1);
    shared = left == right ? left : -1;
  }
  outside->node_group[t] = shared;
  return shared;
}

gboolean knnwb_tree_outside_run(KnnwbTreeOutside *outside, const int32_t *group,
                                const int64_t *rows, size_t n_rows, int64_t *out_index,
                                double *out_distance, GError **error)
{
  knnwb_tree_outside_groups(outside, group, 0, 0, outside->tree.n, 0);
  KnnwbTreeSearch s = {.tree = &outside->tree,
                       .query_points = outside->points,
                       .metric = outside->prepared->metric,
                       .angular = outside->angular,
                       .exact_queries = outside->prepared,
                       .exact_reference = outside->prepared,
                       .k = 1,
                       .group = group,
                       .node_group = outside->node_group,
                       .options = &outside->options};
  knnwb_tree_search_rows(&s, rows, n_rows, out_index, out_distance, outside->threads);
  if (s.cancelled) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED,
                "cancelled while searching the nearest rows outside each group");
    return FALSE;
  }
  return TRUE;
}
