/*
 * Exact MST of the complete graph of a point set by Borůvka rounds of cross-component nearest
 * neighbours. A point's sorted kNN list answers its query while the list still holds a point of
 * another component (the first such entry is its nearest outside: lists are sorted by (distance,
 * index), which orders one point's pairs exactly as the pair order (distance, lower, higher)).
 * Components only grow, so a per-point cursor into its list only moves forward: O(n k) list work
 * in all rounds together. Points whose whole list lies inside their component are brute-forced,
 * unless their k-th distance already exceeds the component's best candidate.
 */
#include <math.h>
#include <stdlib.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

typedef struct {
  const KnnwbMatrix *data;
  KnnwbMetric metric;
  KnnwbOutsideSearch *search; /* masked nearest-outside search for the brute-force points */
  /* A point's nearest outside its component stays its answer while that point remains outside:
   * components only merge, so the outside set only shrinks. -1 = not known. */
  int64_t *outside_index;
  double *outside_distance;
  const KnnwbNeighbors *lists;
  size_t n, k;
  gboolean lists_complete; /* every list holds all n - 1 other points */
  int32_t *component;
  int32_t *cursor;
  double *candidate_distance;
  int64_t *candidate_point;
  int64_t *best; /* per component: the point holding its lightest outgoing pair, -1 if none */
  size_t n_components;
  int64_t *brute; /* points to brute-force this round */
  size_t n_brute;
  const volatile gint *cancel;
  gint cancelled;
} KnnwbMstPoints;

void knnwb_clustering_mst_options_init(KnnwbMstOptions *options)
{
  options->metric = KNNWB_METRIC_PEARSON;
  options->k = 0;
  options->neighbors = NULL;
  options->backend = KNNWB_BACKEND_AUTO;
  options->n_threads = 0;
  options->memory_bytes = 0;
  options->cancel = NULL;
}

size_t knnwb_clustering_mst_lists_k(const KnnwbMstOptions *options, size_t n)
{
  return MIN(options->k ? options->k : (size_t)16, n - 1);
}

/* (distance, lower, higher) order of the pairs held by points p and q. */
static inline gboolean knnwb_mst_points_lighter(const KnnwbMstPoints *m, int64_t p, int64_t q)
{
  double dp = m->candidate_distance[p], dq = m->candidate_distance[q];
  if (dp != dq)
    return dp < dq;
  int64_t pa = MIN(p, m->candidate_point[p]), qa = MIN(q, m->candidate_point[q]);
  if (pa != qa)
    return pa < qa;
  return MAX(p, m->candidate_point[p]) < MAX(q, m->candidate_point[q]);
}

static inline void knnwb_mst_points_offer(KnnwbMstPoints *m, int32_t c, int64_t p)
{
  int64_t current = __atomic_load_n(&m->best[c], __ATOMIC_ACQUIRE);
  while (current < 0 || knnwb_mst_points_lighter(m, p, current)) {
    if (__atomic_compare_exchange_n(&m->best[c], &current, p, TRUE, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
      return;
  }
}

/* A lower bound on the distance from a point whose whole list lies inside its component to the
 * nearest point outside it: its k-th list distance, and the nearest outside distance found in an
 * earlier round (the outside set only shrinks as components merge). The second is what prunes
 * the late rounds: there every list is exhausted, and without it every point was searched again
 * in each of them (200,000 rows in 50 clusters: 4 passes over all points, 68 s of 81). */
static inline double knnwb_mst_points_lower_bound(const KnnwbMstPoints *m, int64_t p)
{
  double bound = m->lists->distances[(size_t)p * m->k + m->k - 1];
  if (m->outside_index[p] >= 0 && m->outside_distance[p] > bound)
    bound = m->outside_distance[p];
  return bound;
}

static void knnwb_mst_points_from_lists(int t, int n_threads, void *data)
{
  KnnwbMstPoints *m = data;
  size_t first, last;
  knnwb_team_range(m->n, t, n_threads, &first, &last);
  for (size_t p = first; p < last; p++) {
    const int64_t *list = m->lists->indices + p * m->k;
    size_t found = (size_t)m->lists->n_found[p];
    int32_t c = m->component[p];
    int32_t r = m->cursor[p];
    while ((size_t)r < found && m->component[list[r]] == c)
      r++;
    m->cursor[p] = r;
    if ((size_t)r < found) {
      m->candidate_distance[p] = m->lists->distances[p * m->k + (size_t)r];
      m->candidate_point[p] = list[r];
      knnwb_mst_points_offer(m, c, (int64_t)p);
    } else {
      m->candidate_distance[p] = INFINITY;
      m->candidate_point[p] = -1;
    }
  }
}

/* Resolves the brute-force points in chunks of increasing bound, through the kNN engine's masked
 * nearest-outside search (GEMM speed, exact, certified). Between chunks the component bests
 * improve, which prunes later points whose k-th distance can no longer win. */
static gboolean knnwb_mst_points_brute_force(KnnwbMstPoints *m, size_t *searched, GError **error)
{
  /* Chunks double in size: the first small ones set component bests that prune the rest, the
   * later large ones keep the number of backend calls (each a pass over all points) logarithmic.
   * A sixteenth of the points first, so that small sets are pruned too. */
  size_t chunk = CLAMP(m->n_brute / 16, (size_t)64, (size_t)2048);
  const char *what = "the exact MST's nearest-outside queries";
  int64_t *rows = knnwb_try_new_array(m->n_brute, sizeof(int64_t), what, m->n, error);
  int64_t *index =
      rows ? knnwb_try_new_array(m->n_brute, sizeof(int64_t), what, m->n, error) : NULL;
  double *distance =
      index ? knnwb_try_new_array(m->n_brute, sizeof(double), what, m->n, error) : NULL;
  gboolean ok = distance != NULL;
  for (size_t start = 0; ok && start < m->n_brute; chunk *= 2) {
    size_t count = 0;
    for (; start < m->n_brute && count < chunk; start++) {
      int64_t p = m->brute[start];
      int32_t c = m->component[p];
      double bound = knnwb_mst_points_lower_bound(m, p);
      int64_t holder = m->best[c];
      if (holder >= 0 && m->candidate_distance[holder] < bound)
        continue; /* nothing outside p's component can beat the component's candidate */
      int64_t known = m->outside_index[p];
      if (known >= 0 && m->component[known] != c) {
        m->candidate_distance[p] = m->outside_distance[p];
        m->candidate_point[p] = known;
        knnwb_mst_points_offer(m, c, p);
        continue;
      }
      rows[count++] = p;
    }
    *searched += count;
    ok = knnwb_outside_search_run(m->search, m->component, rows, count, index, distance, error);
    for (size_t t = 0; ok && t < count; t++) {
      int64_t p = rows[t];
      m->candidate_distance[p] = distance[t];
      m->candidate_point[p] = index[t];
      m->outside_index[p] = index[t];
      m->outside_distance[p] = distance[t];
      if (index[t] >= 0)
        knnwb_mst_points_offer(m, m->component[p], p);
    }
  }
  g_free(rows);
  g_free(index);
  g_free(distance);
  return ok;
}

static void knnwb_mst_points_relabel(int t, int n_threads, void *data)
{
  KnnwbMstPoints *m = data;
  size_t first, last;
  knnwb_team_range(m->n, t, n_threads, &first, &last);
  const int32_t *label = (const int32_t *)m->brute; /* reused as the relabel table */
  for (size_t p = first; p < last; p++)
    m->component[p] = label[m->component[p]];
}

static int knnwb_mst_points_bound_compare(const void *a, const void *b, void *data)
{
  const KnnwbMstPoints *m = data;
  int64_t p = *(const int64_t *)a, q = *(const int64_t *)b;
  double dp = knnwb_mst_points_lower_bound(m, p);
  double dq = knnwb_mst_points_lower_bound(m, q);
  if (dp != dq)
    return dp < dq ? -1 : 1;
  return (p > q) - (p < q);
}

static gboolean knnwb_mst_points_run(KnnwbMstPoints *m, int n_threads, int64_t *eu, int64_t *ev,
                                     double *ew, GError **error)
{
  size_t n = m->n;
  int64_t *parent = knnwb_try_new_array(n, sizeof(int64_t), "the exact MST's components", n, error);
  int32_t *label =
      parent ? knnwb_try_new_array(n, sizeof(int32_t), "the exact MST's components", n, error)
             : NULL;
  size_t n_edges = 0;
  gboolean ok = FALSE;
  if (label == NULL)
    goto out;
  while (m->n_components > 1) {
    if (m->cancel && g_atomic_int_get(m->cancel)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "exact MST cancelled");
      goto out;
    }
    for (size_t c = 0; c < m->n_components; c++)
      m->best[c] = -1;
    knnwb_team_run(n_threads, knnwb_mst_points_from_lists, m);
    /* Points whose lists are exhausted; with complete lists there are none. */
    m->n_brute = 0;
    if (!m->lists_complete) {
      for (size_t p = 0; p < n; p++) {
        if (m->candidate_point[p] >= 0)
          continue;
        int64_t holder = m->best[m->component[p]];
        if (holder >= 0 && m->candidate_distance[holder] < knnwb_mst_points_lower_bound(m, p))
          continue;
        m->brute[m->n_brute++] = (int64_t)p;
      }
      /* Smallest bounds first: they are likeliest to win and then prune the rest. */
      g_qsort_with_data(m->brute, (gint)m->n_brute, sizeof *m->brute,
                        knnwb_mst_points_bound_compare, m);
      gint64 brute_start = g_get_monotonic_time();
      size_t searched = 0;
      if (!knnwb_mst_points_brute_force(m, &searched, error))
        goto out;
      g_debug("exact MST: %zu components, %zu points searched outside their lists (%zu lists "
              "exhausted) in %.3f s",
              m->n_components, searched, m->n_brute,
              (double)(g_get_monotonic_time() - brute_start) / 1e6);
    }
    size_t nc = m->n_components;
    for (size_t c = 0; c < nc; c++)
      parent[c] = (int64_t)c;
    for (size_t c = 0; c < nc; c++) {
      int64_t p = m->best[c];
      if (p < 0) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                    "exact MST: a component found no outside point (internal error)");
        goto out;
      }
      int64_t q = m->candidate_point[p];
      int32_t other = m->component[q];
      int64_t p_other = m->best[other];
      gboolean mutual = p_other == q && m->candidate_point[p_other] == p;
      if (mutual && (size_t)other < c)
        continue;
      /* Checked, not assumed: a distance that differed in its last bit between the two
       * directions could otherwise close a cycle of near-tied picks. */
      if (!knnwb_clustering_union(parent, (int64_t)c, other))
        continue;
      eu[n_edges] = p;
      ev[n_edges] = q;
      ew[n_edges] = m->candidate_distance[p];
      n_edges++;
    }
    int32_t count = 0;
    for (size_t c = 0; c < nc; c++)
      if (knnwb_clustering_find(parent, (int64_t)c) == (int64_t)c)
        label[c] = count++;
    for (size_t c = 0; c < nc; c++)
      label[c] = label[knnwb_clustering_find(parent, (int64_t)c)];
    /* brute is free between rounds: it carries the relabel table to the threads */
    G_STATIC_ASSERT(sizeof(int64_t) >= sizeof(int32_t));
    int32_t *table = (int32_t *)m->brute;
    for (size_t c = 0; c < nc; c++)
      table[c] = label[c];
    knnwb_team_run(n_threads, knnwb_mst_points_relabel, m);
    m->n_components = (size_t)count;
  }
  ok = n_edges == n - 1;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                "exact MST: %zu edges for %zu points (internal error)", n_edges, n);
out:
  g_free(parent);
  g_free(label);
  return ok;
}

gboolean knnwb_clustering_mst_points(const KnnwbMatrix *data, const KnnwbMstOptions *options,
                                     igraph_t *tree, igraph_vector_t *weights, GError **error)
{
  KnnwbMstOptions defaults;
  if (!options) {
    knnwb_clustering_mst_options_init(&defaults);
    options = &defaults;
  }
  size_t n = data->n_rows;
  if (n <= 1)
    return knnwb_clustering_tree_from_pairs((int64_t)n, 0, NULL, NULL, NULL, FALSE, tree, weights,
                                            error);
  if (n >= INT32_MAX) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "exact MST supports fewer than 2^31 - 1 points");
    return FALSE;
  }
  g_autoptr(KnnwbNeighbors) computed = NULL;
  const KnnwbNeighbors *lists = options->neighbors;
  if (!lists) {
    KnnwbKnnOptions knn;
    knnwb_knn_options_init(&knn);
    knn.metric = options->metric;
    knn.k = knnwb_clustering_mst_lists_k(options, n);
    knn.backend = options->backend;
    knn.n_threads = options->n_threads;
    knn.memory_bytes = options->memory_bytes;
    knn.cancel = options->cancel;
    if (!knnwb_knn_self(data, &knn, &computed, error))
      return FALSE;
    lists = computed;
  }
  if (lists->n_queries != n || lists->k == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the kNN lists have %zu row%s (k = %zu) but the data %zu", lists->n_queries,
                KNNWB_PLURAL(lists->n_queries), lists->k, n);
    return FALSE;
  }
  for (size_t p = 0; p < n; p++) {
    if ((size_t)lists->n_found[p] < MIN(lists->k, n - 1)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                  "row %zu has an incomplete kNN list (a degenerate row?): every point must be "
                  "in the tree",
                  p + 1);
      return FALSE;
    }
  }
  KnnwbMstPoints m = {0};
  m.data = data;
  m.metric = options->metric;
  m.lists = lists;
  m.n = n;
  m.k = lists->k;
  m.lists_complete = lists->k >= n - 1;
  m.n_components = n;
  m.cancel = options->cancel;
  /* O(n) state whose size the input decides: a failure is an error, not an abort. */
  const char *what = "the exact MST's state";
  int64_t *eu = NULL, *ev = NULL;
  double *ew = NULL;
  gboolean allocated =
      (m.component = knnwb_try_new_array(n, sizeof(int32_t), what, n, error)) != NULL &&
      (m.cursor = knnwb_try_new0_array(n, sizeof(int32_t), what, n, error)) != NULL &&
      (m.candidate_distance = knnwb_try_new_array(n, sizeof(double), what, n, error)) != NULL &&
      (m.candidate_point = knnwb_try_new_array(n, sizeof(int64_t), what, n, error)) != NULL &&
      (m.best = knnwb_try_new_array(n, sizeof(int64_t), what, n, error)) != NULL &&
      (m.brute = knnwb_try_new_array(n, sizeof(int64_t), what, n, error)) != NULL &&
      (m.outside_index = knnwb_try_new_array(n, sizeof(int64_t), what, n, error)) != NULL &&
      (m.outside_distance = knnwb_try_new_array(n, sizeof(double), what, n, error)) != NULL &&
      (eu = knnwb_try_new_array(n - 1, sizeof(int64_t), what, n, error)) != NULL &&
      (ev = knnwb_try_new_array(n - 1, sizeof(int64_t), what, n, error)) != NULL &&
      (ew = knnwb_try_new_array(n - 1, sizeof(double), what, n, error)) != NULL;
  for (size_t p = 0; allocated && p < n; p++)
    m.outside_index[p] = -1;
  for (size_t p = 0; allocated && p < n; p++)
    m.component[p] = (int32_t)p;
  int n_threads = knnwb_thread_count(options->n_threads);
  KnnwbKnnOptions search_options;
  knnwb_knn_options_init(&search_options);
  search_options.metric = options->metric;
  search_options.backend = options->backend;
  search_options.n_threads = options->n_threads;
  search_options.memory_bytes = options->memory_bytes;
  search_options.cancel = options->cancel;
  if (allocated && !m.lists_complete)
    m.search = knnwb_outside_search_new(data, &search_options, error);
  gboolean ok = allocated && (m.lists_complete || m.search != NULL) &&
                knnwb_mst_points_run(&m, n_threads, eu, ev, ew, error) &&
                knnwb_clustering_tree_from_pairs((int64_t)n, (int64_t)n - 1, eu, ev, ew, TRUE, tree,
                                                 weights, error);
  knnwb_outside_search_free(m.search);
  g_free(m.component);
  g_free(m.cursor);
  g_free(m.candidate_distance);
  g_free(m.candidate_point);
  g_free(m.best);
  g_free(m.brute);
  g_free(m.outside_index);
  g_free(m.outside_distance);
  g_free(eu);
  g_free(ev);
  g_free(ew);
  return ok;
}
