/*
 * MST-kNN (Inostroza-Ponta et al.), following the R package mstknnclust: for a set S, k =
 * min(floor(ln |S|), smallest k whose union kNN graph on S is connected), at least 1; keep the
 * spanning-tree edges inside S that are kNN edges; one component makes S a final cluster, more
 * components are split off and each treated the same way. A set of one (a point split off
 * alone) is a cluster of its own; the package leaves such points out of its partition.
 *
 * One driver serves both inputs through two callbacks: the kNN lists restricted to a set, and the
 * tree edges inside a set. Sets are processed one at a time; `position` maps a global index to its
 * local index in the current set (-1 outside), which makes membership tests O(1).
 */
#include <math.h>
#include <string.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include <knnwb/graph.h>
#include "clustering_internal.h"

typedef struct {
  /* out[i * kc + r]: local index of the r-th nearest member of members[i] (ties: the source's
   * rule, see knnwb_mstknn_matrix_knn and knnwb_mstknn_points_knn_part) */
  gboolean (*knn)(void *context, const int64_t *members, int64_t s, const int64_t *position,
                  int64_t kc, int64_t *out, GError **error);
  /* tree edges with both ends in the set, in local indices; *count receives their number */
  gboolean (*tree)(void *context, const int64_t *members, int64_t s, const int64_t *position,
                   int64_t *eu, int64_t *ev, double *ew, int64_t *count, GError **error);
  void *context;
  const volatile gint *cancel;
} KnnwbMstKnnSource;

void knnwb_clustering_mstknn_options_init(KnnwbMstKnnOptions *options)
{
  options->metric = KNNWB_METRIC_PEARSON;
  options->list_k = 0;
  options->neighbors = NULL;
  options->hierarchy = NULL;
  options->backend = KNNWB_BACKEND_AUTO;
  options->n_threads = 0;
  options->memory_bytes = 0;
  options->cancel = NULL;
}

static int64_t knnwb_mstknn_natural_k(int64_t s)
{
  return MAX((int64_t)1, (int64_t)floor(log((double)s)));
}

size_t knnwb_clustering_mstknn_lists_k(const KnnwbMstKnnOptions *options, size_t n)
{
  const size_t k =
      options->list_k ? options->list_k : (size_t)MAX(16, knnwb_mstknn_natural_k((int64_t)n) + 1);
  return MIN(k, n - 1);
}

static gboolean knnwb_mstknn_listed(const int64_t *lists, int64_t kc, int64_t k, int64_t u,
                                    int64_t v)
{
  for (int64_t r = 0; r < k; r++)
    if (lists[u * kc + r] == v)
      return TRUE;
  return FALSE;
}

/* One set the recursion looked at: the split hierarchy's node. */
typedef struct {
  int64_t parent; /* node index, -1 for the root */
  int64_t size;
  int64_t k;       /* the k of its kNN graph; 0 for a single point */
  int64_t cluster; /* raw cluster index when it is a final cluster, else -1 */
} KnnwbMstKnnNode;

/* The recursion's state: O(n) scratch reused by every set, the sets still to look at, and the
 * results (cluster_of[v], the kept edges, the hierarchy's nodes). */
typedef struct {
  const KnnwbMstKnnSource *source;
  int64_t *position, *parent, *lists, *eu, *ev, *order;
  double *ew;
  gboolean *keep;
  GQueue pending;       /* GArray of int64 members each, sorted */
  GQueue pending_nodes; /* their node indices in nodes */
  int64_t n_clusters;
  int64_t *cluster_of;
  GArray *kept_u, *kept_v, *kept_w, *nodes;
} KnnwbMstKnnState;

/* O(n) state whose size the input decides: a failure is an error, not an abort. */
static gboolean knnwb_mstknn_state_init(KnnwbMstKnnState *state, int64_t n, GError **error)
{
  const char *what = "MST-kNN's state";
  size_t rows = (size_t)n;
  if ((state->position = knnwb_try_new_array(rows, sizeof(int64_t), what, rows, error)) == NULL ||
      (state->parent = knnwb_try_new_array(rows, sizeof(int64_t), what, rows, error)) == NULL ||
      (state->eu = knnwb_try_new_array(rows, sizeof(int64_t), what, rows, error)) == NULL ||
      (state->ev = knnwb_try_new_array(rows, sizeof(int64_t), what, rows, error)) == NULL ||
      (state->ew = knnwb_try_new_array(rows, sizeof(double), what, rows, error)) == NULL ||
      (state->keep = knnwb_try_new_array(rows, sizeof(gboolean), what, rows, error)) == NULL ||
      (state->order = knnwb_try_new_array(rows, sizeof(int64_t), what, rows, error)) == NULL)
    return FALSE;
  for (int64_t v = 0; v < n; v++)
    state->position[v] = -1;
  if (n > 0) {
    GArray *all = g_array_sized_new(FALSE, FALSE, sizeof(int64_t), (guint)n);
    for (int64_t v = 0; v < n; v++)
      g_array_append_val(all, v);
    g_queue_push_tail(&state->pending, all);
    KnnwbMstKnnNode root = {-1, n, 0, -1};
    g_array_append_val(state->nodes, root);
    g_queue_push_tail(&state->pending_nodes, GINT_TO_POINTER(0));
  }
  return TRUE;
}

static void knnwb_mstknn_state_clear(KnnwbMstKnnState *state)
{
  while (!g_queue_is_empty(&state->pending))
    g_array_unref(g_queue_pop_head(&state->pending));
  g_queue_clear(&state->pending_nodes);
  g_free(state->position);
  g_free(state->parent);
  g_free(state->lists);
  g_free(state->eu);
  g_free(state->ev);
  g_free(state->ew);
  g_free(state->keep);
  g_free(state->order);
}

/* The set's kNN lists (kc per member, into state->lists) and its tree edges (into eu, ev, ew). */
static gboolean knnwb_mstknn_set_graphs(KnnwbMstKnnState *state, const int64_t *members, int64_t s,
                                        int64_t kc, int64_t *n_tree, GError **error)
{
  const KnnwbMstKnnSource *source = state->source;
  g_free(state->lists);
  state->lists = knnwb_try_new_array((size_t)(s * kc), sizeof(int64_t), "MST-kNN's kNN lists",
                                     (size_t)s, error);
  if (state->lists == NULL)
    return FALSE;
  for (int64_t i = 0; i < s; i++)
    state->position[members[i]] = i;
  gboolean ok =
      source->knn(source->context, members, s, state->position, kc, state->lists, error) &&
      source->tree(source->context, members, s, state->position, state->eu, state->ev, state->ew,
                   n_tree, error);
  for (int64_t i = 0; i < s; i++)
    state->position[members[i]] = -1;
  return ok;
}

/* The smallest k in 1..kc whose union kNN graph on the set is connected (rank k - 1 edges added
 * at each step), capped by natural. */
static int64_t knnwb_mstknn_connected_k(KnnwbMstKnnState *state, int64_t s, int64_t kc,
                                        int64_t natural)
{
  int64_t k = kc, joins = 0;
  for (int64_t i = 0; i < s; i++)
    state->parent[i] = i;
  for (int64_t r = 0; r < kc; r++) {
    for (int64_t i = 0; i < s; i++)
      joins += knnwb_clustering_union(state->parent, i, state->lists[i * kc + r]);
    if (joins == s - 1) {
      k = r + 1;
      break;
    }
  }
  return MAX((int64_t)1, MIN(natural, k));
}

/* Marks the tree edges that are also kNN edges (either direction) and joins their ends in
 * state->parent; returns the number of components they leave. */
static int64_t knnwb_mstknn_keep_edges(KnnwbMstKnnState *state, int64_t s, int64_t kc, int64_t k,
                                       int64_t n_tree)
{
  for (int64_t i = 0; i < s; i++)
    state->parent[i] = i;
  int64_t n_parts = s;
  for (int64_t e = 0; e < n_tree; e++) {
    state->keep[e] = knnwb_mstknn_listed(state->lists, kc, k, state->eu[e], state->ev[e]) ||
                     knnwb_mstknn_listed(state->lists, kc, k, state->ev[e], state->eu[e]);
    if (state->keep[e])
      n_parts -= knnwb_clustering_union(state->parent, state->eu[e], state->ev[e]);
  }
  return n_parts;
}

/* The set is a final cluster: its members get the next cluster index, its kept edges are kept. */
static void knnwb_mstknn_accept(KnnwbMstKnnState *state, const int64_t *members, int64_t s,
                                int64_t node, int64_t n_tree)
{
  g_array_index(state->nodes, KnnwbMstKnnNode, node).cluster = state->n_clusters;
  for (int64_t i = 0; i < s; i++)
    state->cluster_of[members[i]] = state->n_clusters;
  state->n_clusters++;
  for (int64_t e = 0; e < n_tree; e++) {
    if (!state->keep[e])
      continue;
    int64_t a = members[state->eu[e]], b = members[state->ev[e]];
    g_array_append_val(state->kept_u, a);
    g_array_append_val(state->kept_v, b);
    g_array_append_val(state->kept_w, state->ew[e]);
  }
}

/* Splits the set into its components (members kept in increasing order, as the package sorts
 * them too) and queues each as a child of node. */
static void knnwb_mstknn_split(KnnwbMstKnnState *state, const int64_t *members, int64_t s,
                               int64_t node)
{
  for (int64_t i = 0; i < s; i++)
    state->order[i] = -1;
  GPtrArray *parts = g_ptr_array_new();
  for (int64_t i = 0; i < s; i++) {
    int64_t root = knnwb_clustering_find(state->parent, i);
    if (state->order[root] < 0) {
      state->order[root] = parts->len;
      g_ptr_array_add(parts, g_array_new(FALSE, FALSE, sizeof(int64_t)));
    }
    g_array_append_val(g_ptr_array_index(parts, state->order[root]), members[i]);
  }
  for (guint p = 0; p < parts->len; p++) {
    GArray *part = g_ptr_array_index(parts, p);
    KnnwbMstKnnNode child = {node, part->len, 0, -1};
    g_queue_push_tail(&state->pending_nodes, GINT_TO_POINTER(state->nodes->len));
    g_array_append_val(state->nodes, child);
    g_queue_push_tail(&state->pending, part);
  }
  g_ptr_array_free(parts, TRUE);
}

/* One set of the recursion: a single point is a cluster; otherwise its k, the kept tree edges,
 * and either a final cluster or its parts queued. */
static gboolean knnwb_mstknn_visit(KnnwbMstKnnState *state, GArray *set, int64_t node,
                                   GError **error)
{
  const int64_t *members = (const int64_t *)set->data;
  int64_t s = set->len;
  if (s == 1) {
    g_array_index(state->nodes, KnnwbMstKnnNode, node).cluster = state->n_clusters;
    state->cluster_of[members[0]] = state->n_clusters++;
    return TRUE;
  }
  int64_t natural = knnwb_mstknn_natural_k(s);
  int64_t kc = MAX((int64_t)1, MIN(natural, s - 1));
  int64_t n_tree = 0;
  if (!knnwb_mstknn_set_graphs(state, members, s, kc, &n_tree, error))
    return FALSE;
  int64_t k = knnwb_mstknn_connected_k(state, s, kc, natural);
  g_array_index(state->nodes, KnnwbMstKnnNode, node).k = k;
  if (knnwb_mstknn_keep_edges(state, s, kc, k, n_tree) == 1)
    knnwb_mstknn_accept(state, members, s, node, n_tree);
  else
    knnwb_mstknn_split(state, members, s, node);
  return TRUE;
}

/* The recursion itself, breadth first; cluster_of[v] receives a cluster index, kept edges go to
 * the arrays, the sets looked at to nodes. */
static gboolean knnwb_mstknn_drive(const KnnwbMstKnnSource *source, int64_t n, int64_t *cluster_of,
                                   GArray *kept_u, GArray *kept_v, GArray *kept_w, GArray *nodes,
                                   GError **error)
{
  KnnwbMstKnnState state = {.source = source,
                            .pending = G_QUEUE_INIT,
                            .pending_nodes = G_QUEUE_INIT,
                            .cluster_of = cluster_of,
                            .kept_u = kept_u,
                            .kept_v = kept_v,
                            .kept_w = kept_w,
                            .nodes = nodes};
  gboolean ok = knnwb_mstknn_state_init(&state, n, error);
  while (ok && !g_queue_is_empty(&state.pending)) {
    GArray *set = g_queue_pop_head(&state.pending);
    int64_t node = GPOINTER_TO_INT(g_queue_pop_head(&state.pending_nodes));
    if (source->cancel && g_atomic_int_get(source->cancel)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "MST-kNN cancelled");
      ok = FALSE;
    } else
      ok = knnwb_mstknn_visit(&state, set, node, error);
    g_array_unref(set);
  }
  knnwb_mstknn_state_clear(&state);
  return ok;
}

/* Membership numbered by lowest vertex, and the cluster forest graph. */
static gboolean knnwb_mstknn_finish(int64_t n, const int64_t *cluster_of, GArray *kept_u,
                                    GArray *kept_v, GArray *kept_w, GArray *nodes,
                                    igraph_vector_int_t *membership, igraph_t *cluster_forest,
                                    igraph_vector_t *forest_weights,
                                    KnnwbMstKnnHierarchy *hierarchy, GError **error)
{
  igraph_error_t code = igraph_vector_int_resize(membership, n);
  if (!knnwb_error_from_igraph(code, "resizing membership", error))
    return FALSE;
  int64_t *renumber = knnwb_try_new_array((size_t)n, sizeof(int64_t), "MST-kNN's cluster numbers",
                                          (size_t)n, error);
  if (renumber == NULL)
    return FALSE;
  for (int64_t v = 0; v < n; v++)
    renumber[v] = -1;
  int64_t count = 0;
  for (int64_t v = 0; v < n; v++) {
    if (renumber[cluster_of[v]] < 0)
      renumber[cluster_of[v]] = count++;
    VECTOR(*membership)[v] = renumber[cluster_of[v]];
  }
  if (hierarchy) {
    igraph_integer_t m = nodes->len;
    code = igraph_vector_int_resize(&hierarchy->parent, m);
    if (code == IGRAPH_SUCCESS)
      code = igraph_vector_int_resize(&hierarchy->size, m);
    if (code == IGRAPH_SUCCESS)
      code = igraph_vector_int_resize(&hierarchy->k, m);
    if (code == IGRAPH_SUCCESS)
      code = igraph_vector_int_resize(&hierarchy->cluster, m);
    if (!knnwb_error_from_igraph(code, "resizing the hierarchy", error)) {
      g_free(renumber);
      return FALSE;
    }
    for (igraph_integer_t i = 0; i < m; i++) {
      const KnnwbMstKnnNode *node = &g_array_index(nodes, KnnwbMstKnnNode, i);
      VECTOR(hierarchy->parent)[i] = node->parent;
      VECTOR(hierarchy->size)[i] = node->size;
      VECTOR(hierarchy->k)[i] = node->k;
      VECTOR(hierarchy->cluster)[i] = node->cluster >= 0 ? renumber[node->cluster] : -1;
    }
  }
  g_free(renumber);
  if (!cluster_forest) {
    if (forest_weights) {
      code = igraph_vector_resize(forest_weights, kept_w->len);
      if (!knnwb_error_from_igraph(code, "resizing forest weights", error))
        return FALSE;
      for (guint e = 0; e < kept_w->len; e++)
        VECTOR(*forest_weights)[e] = g_array_index(kept_w, double, e);
    }
    return TRUE;
  }
  igraph_vector_t scratch;
  igraph_vector_t *target = forest_weights;
  if (!target) {
    if (!knnwb_error_from_igraph(igraph_vector_init(&scratch, 0), "igraph_vector_init", error))
      return FALSE;
    target = &scratch;
  }
  gboolean ok = knnwb_clustering_tree_from_pairs(
      n, kept_u->len, (const int64_t *)kept_u->data, (const int64_t *)kept_v->data,
      (const double *)kept_w->data, TRUE, cluster_forest, target, error);
  if (!forest_weights)
    igraph_vector_destroy(&scratch);
  return ok;
}

static gboolean knnwb_mstknn_run(const KnnwbMstKnnSource *source, int64_t n,
                                 igraph_vector_int_t *membership, igraph_t *cluster_forest,
                                 igraph_vector_t *forest_weights, KnnwbMstKnnHierarchy *hierarchy,
                                 GError **error)
{
  GArray *nodes = g_array_new(FALSE, FALSE, sizeof(KnnwbMstKnnNode));
  int64_t *cluster_of =
      knnwb_try_new_array((size_t)n, sizeof(int64_t), "MST-kNN's clusters", (size_t)n, error);
  GArray *kept_u = g_array_new(FALSE, FALSE, sizeof(int64_t));
  GArray *kept_v = g_array_new(FALSE, FALSE, sizeof(int64_t));
  GArray *kept_w = g_array_new(FALSE, FALSE, sizeof(double));
  gboolean ok = cluster_of != NULL &&
                knnwb_mstknn_drive(source, n, cluster_of, kept_u, kept_v, kept_w, nodes, error) &&
                knnwb_mstknn_finish(n, cluster_of, kept_u, kept_v, kept_w, nodes, membership,
                                    cluster_forest, forest_weights, hierarchy, error);
  g_array_unref(nodes);
  g_free(cluster_of);
  g_array_unref(kept_u);
  g_array_unref(kept_v);
  g_array_unref(kept_w);
  return ok;
}

/* ---- distance-matrix source ---- */

typedef struct {
  const igraph_matrix_t *distances;
} KnnwbMstKnnMatrix;

static gboolean knnwb_mstknn_matrix_knn(void *context, const int64_t *members, int64_t s,
                                        const int64_t *position, int64_t kc, int64_t *out,
                                        GError **error)
{
  (void)position, (void)error;
  const KnnwbMstKnnMatrix *source = context;
  double *best = g_new(double, kc);
  for (int64_t i = 0; i < s; i++) {
    int64_t filled = 0;
    /* Insertion into a short sorted list with a strict comparison, so the first candidate
     * scanned wins a tie. The package's generate.knn stably sorts the pairs (a, b), a < b, of
     * the set by distance and takes row i's from its pairs (i, b) before its pairs (a, i): tied
     * neighbours come in the order i + 1, ..., s - 1, 0, ..., i - 1, the order scanned here. */
    for (int64_t step = 1; step < s; step++) {
      int64_t j = (i + step) % s;
      double d = MATRIX(*source->distances, members[i], members[j]);
      if (filled == kc && !(d < best[kc - 1]))
        continue;
      int64_t r = filled < kc ? filled++ : kc - 1;
      while (r > 0 && d < best[r - 1]) {
        best[r] = best[r - 1];
        out[i * kc + r] = out[i * kc + r - 1];
        r--;
      }
      best[r] = d;
      out[i * kc + r] = j;
    }
  }
  g_free(best);
  return TRUE;
}

static gboolean knnwb_mstknn_matrix_tree(void *context, const int64_t *members, int64_t s,
                                         const int64_t *position, int64_t *eu, int64_t *ev,
                                         double *ew, int64_t *count, GError **error)
{
  (void)position;
  const KnnwbMstKnnMatrix *source = context;
  igraph_error_t code = knnwb_clustering_prim_subset(source->distances, members, s, eu, ev, ew);
  *count = s - 1;
  return knnwb_error_from_igraph(code, "Prim's minimum spanning tree", error);
}

gboolean knnwb_clustering_mstknn_distance_matrix(const igraph_matrix_t *distances,
                                                 const KnnwbMstKnnOptions *options,
                                                 igraph_vector_int_t *membership,
                                                 igraph_t *cluster_forest,
                                                 igraph_vector_t *forest_weights, GError **error)
{
  if (!knnwb_clustering_check_distance_matrix(distances, error))
    return FALSE;
  KnnwbMstKnnMatrix context = {distances};
  KnnwbMstKnnSource source = {knnwb_mstknn_matrix_knn, knnwb_mstknn_matrix_tree, &context,
                              options ? options->cancel : NULL};
  return knnwb_mstknn_run(&source, igraph_matrix_nrow(distances), membership, cluster_forest,
                          forest_weights, options ? options->hierarchy : NULL, error);
}

/* ---- point source: global kNN lists, one global tree ---- */

typedef struct {
  const KnnwbMatrix *data;
  KnnwbMetric metric;
  const KnnwbNeighbors *lists;
  KnnwbExactRows *exact; /* row statistics computed once for the in-set scans */
  /* the tree as adjacency (CSR): neighbours of v at adjacency[offset[v] .. offset[v + 1]) */
  int64_t *offset;
  int64_t *adjacency;
  double *adjacency_weight;
  int n_threads;
  /* per call */
  const int64_t *members;
  int64_t s;
  const int64_t *position;
  int64_t kc;
  int64_t *out;
} KnnwbMstKnnPoints;

static void knnwb_mstknn_points_knn_part(int t, int n_threads, void *data)
{
  KnnwbMstKnnPoints *source = data;
  size_t first, last;
  knnwb_team_range((size_t)source->s, t, n_threads, &first, &last);
  const KnnwbNeighbors *lists = source->lists;
  size_t n = source->data->n_rows;
  int64_t kc = source->kc;
  double *best = g_new(double, kc);
  for (size_t i = first; i < last; i++) {
    int64_t p = source->members[i];
    int64_t *out = source->out + i * kc;
    int64_t filled = 0;
    size_t found = (size_t)lists->n_found[p];
    for (size_t r = 0; r < found && filled < kc; r++) {
      int64_t local = source->position[lists->indices[(size_t)p * lists->k + r]];
      if (local >= 0)
        out[filled++] = local;
    }
    if (filled == kc || found >= n - 1)
      continue;
    /* The global list ran out inside the set: scan the set. Local order is global order, so the
     * (distance, index) tie rule is the same. */
    filled = 0;
    for (int64_t j = 0; j < source->s; j++) {
      if ((size_t)j == i)
        continue;
      double dist = knnwb_exact_rows_distance(source->exact, (size_t)p, (size_t)source->members[j]);
      if (filled == kc && !(dist < best[kc - 1]))
        continue;
      int64_t r = filled < kc ? filled++ : kc - 1;
      while (r > 0 && dist < best[r - 1]) {
        best[r] = best[r - 1];
        out[r] = out[r - 1];
        r--;
      }
      best[r] = dist;
      out[r] = j;
    }
  }
  g_free(best);
}

static gboolean knnwb_mstknn_points_knn(void *context, const int64_t *members, int64_t s,
                                        const int64_t *position, int64_t kc, int64_t *out,
                                        GError **error)
{
  (void)error;
  KnnwbMstKnnPoints *source = context;
  source->members = members;
  source->s = s;
  source->position = position;
  source->kc = kc;
  source->out = out;
  int threads = s > 4096 ? source->n_threads : 1;
  knnwb_team_run(threads, knnwb_mstknn_points_knn_part, source);
  return TRUE;
}

static gboolean knnwb_mstknn_points_tree(void *context, const int64_t *members, int64_t s,
                                         const int64_t *position, int64_t *eu, int64_t *ev,
                                         double *ew, int64_t *count, GError **error)
{
  (void)error;
  KnnwbMstKnnPoints *source = context;
  int64_t m = 0;
  for (int64_t i = 0; i < s; i++) {
    int64_t p = members[i];
    for (int64_t a = source->offset[p]; a < source->offset[p + 1]; a++) {
      int64_t j = position[source->adjacency[a]];
      if (j > i) {
        eu[m] = i;
        ev[m] = j;
        ew[m] = source->adjacency_weight[a];
        m++;
      }
    }
  }
  *count = m;
  return TRUE;
}

gboolean knnwb_clustering_mstknn_points(const KnnwbMatrix *data, const KnnwbMstKnnOptions *options,
                                        igraph_vector_int_t *membership, igraph_t *cluster_forest,
                                        igraph_vector_t *forest_weights, GError **error)
{
  KnnwbMstKnnOptions defaults;
  if (!options) {
    knnwb_clustering_mstknn_options_init(&defaults);
    options = &defaults;
  }
  int64_t n = (int64_t)data->n_rows;
  if (n <= 1) {
    KnnwbMstKnnSource none = {0};
    return knnwb_mstknn_run(&none, n, membership, cluster_forest, forest_weights,
                            options->hierarchy, error);
  }
  int64_t natural = knnwb_mstknn_natural_k(n);
  const size_t list_k = knnwb_clustering_mstknn_lists_k(options, (size_t)n);

  /* Lists given by the caller (a knn-graph step, a .knn file) are used when they are these
   * points' and long enough for the first level's kNN graph; otherwise compute them. */
  g_autoptr(KnnwbNeighbors) computed = NULL;
  const KnnwbNeighbors *lists = options->neighbors;
  if (lists && (lists->n_queries != (size_t)n || lists->k < MIN((size_t)natural, (size_t)n - 1)))
    lists = NULL;
  if (!lists) {
    KnnwbKnnOptions knn;
    knnwb_knn_options_init(&knn);
    knn.metric = options->metric;
    knn.k = list_k;
    knn.backend = options->backend;
    knn.n_threads = options->n_threads;
    knn.memory_bytes = options->memory_bytes;
    knn.cancel = options->cancel;
    if (!knnwb_knn_self(data, &knn, &computed, error))
      return FALSE;
    lists = computed;
  }

  /* The exact spanning tree. */
  igraph_t tree;
  igraph_vector_t tree_weights;
  if (!knnwb_error_from_igraph(igraph_vector_init(&tree_weights, 0), "igraph_vector_init", error))
    return FALSE;
  KnnwbMstOptions mst;
  knnwb_clustering_mst_options_init(&mst);
  mst.metric = options->metric;
  mst.neighbors = lists;
  mst.n_threads = options->n_threads;
  mst.cancel = options->cancel;
  gboolean ok = knnwb_clustering_mst_points(data, &mst, &tree, &tree_weights, error);
  if (!ok) {
    igraph_vector_destroy(&tree_weights);
    return FALSE;
  }
  KnnwbMstKnnPoints context = {0};
  context.data = data;
  context.metric = options->metric;
  context.lists = lists;
  context.n_threads = knnwb_thread_count(options->n_threads);
  igraph_integer_t m = igraph_ecount(&tree);
  const char *what = "MST-kNN's tree adjacency";
  int64_t *fill = NULL;
  if ((context.offset =
           knnwb_try_new0_array((size_t)n + 1, sizeof(int64_t), what, (size_t)n, error)) == NULL ||
      (context.adjacency =
           knnwb_try_new_array((size_t)(2 * m), sizeof(int64_t), what, (size_t)n, error)) == NULL ||
      (context.adjacency_weight =
           knnwb_try_new_array((size_t)(2 * m), sizeof(double), what, (size_t)n, error)) == NULL ||
      (fill = knnwb_try_new_array((size_t)n, sizeof(int64_t), what, (size_t)n, error)) == NULL) {
    g_free(context.offset);
    g_free(context.adjacency);
    g_free(context.adjacency_weight);
    igraph_destroy(&tree);
    igraph_vector_destroy(&tree_weights);
    return FALSE;
  }
  for (igraph_integer_t e = 0; e < m; e++) {
    context.offset[IGRAPH_FROM(&tree, e) + 1]++;
    context.offset[IGRAPH_TO(&tree, e) + 1]++;
  }
  for (int64_t v = 0; v < n; v++)
    context.offset[v + 1] += context.offset[v];
  memcpy(fill, context.offset, sizeof(int64_t) * (size_t)n);
  for (igraph_integer_t e = 0; e < m; e++) {
    int64_t a = IGRAPH_FROM(&tree, e), b = IGRAPH_TO(&tree, e);
    double w = VECTOR(tree_weights)[e];
    context.adjacency[fill[a]] = b;
    context.adjacency_weight[fill[a]++] = w;
    context.adjacency[fill[b]] = a;
    context.adjacency_weight[fill[b]++] = w;
  }
  g_free(fill);
  igraph_destroy(&tree);
  igraph_vector_destroy(&tree_weights);
  KnnwbMstKnnSource source = {knnwb_mstknn_points_knn, knnwb_mstknn_points_tree, &context,
                              options->cancel};
  context.exact = knnwb_exact_rows_new(data, options->metric, context.n_threads, error);
  ok = context.exact != NULL && knnwb_mstknn_run(&source, n, membership, cluster_forest,
                                                 forest_weights, options->hierarchy, error);
  knnwb_exact_rows_free(context.exact);
  g_free(context.offset);
  g_free(context.adjacency);
  g_free(context.adjacency_weight);
  return ok;
}
