/*
 * Shared-nearest-neighbour graphs from exact kNN lists, with bluster's weightings.
 *
 * Why the "holders" index: a pair (u, v) shares a point s when s is in both (k + 1)-sets, so
 * for each v it suffices to visit, for every member s of v's set, the points h whose set holds s
 * (h < v: each pair once). Holders are a CSR inverse of the lists, built once; the pass over v is
 * parallel with a private score row per thread, and each thread's edges come out in v order, so
 * the concatenation is the same for every thread count.
 */
#include <math.h>
#include <string.h>
#include <knnwb/community.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

static const KnnwbEnumName knnwb_snn_weighting_names[] = {
    KNNWB_SNN_WEIGHTING_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_snn_weighting_table = KNNWB_ENUM_TABLE(
    knnwb_snn_weighting_names, 0, " or ", "unknown SNN weighting ", " (expected ", ")", "(null)");

gboolean knnwb_snn_weighting_from_string(const char *name, KnnwbSnnWeighting *weighting,
                                         GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_snn_weighting_table, name, &value, error))
    return FALSE;
  *weighting = (KnnwbSnnWeighting)value;
  return TRUE;
}

double knnwb_snn_weight_scale(KnnwbSnnWeighting weighting, size_t k)
{
  switch (weighting) {
  case KNNWB_SNN_RANK:
    return MAX(1.0, (double)k);
  case KNNWB_SNN_NUMBER:
    return (double)k + 1.0;
  case KNNWB_SNN_JACCARD:
    break;
  }
  return 1.0;
}

/* One thread's edges: grown with g_try_realloc, as their number (up to about k^2 per point)
 * comes from the input; GArray's growth aborted the process when memory ran out. */
typedef struct {
  int64_t *u, *v;
  double *w;
  size_t len, cap;
} KnnwbSnnEdges;

static gboolean knnwb_snn_edges_push(KnnwbSnnEdges *edges, int64_t u, int64_t v, double w)
{
  if (edges->len == edges->cap) {
    size_t cap = edges->cap ? edges->cap * 2 : 4096;
    if (cap > G_MAXSIZE / sizeof(int64_t))
      return FALSE;
    int64_t *grown_u = g_try_realloc(edges->u, cap * sizeof(int64_t));
    if (grown_u == NULL)
      return FALSE;
    edges->u = grown_u;
    int64_t *grown_v = g_try_realloc(edges->v, cap * sizeof(int64_t));
    if (grown_v == NULL)
      return FALSE;
    edges->v = grown_v;
    double *grown_w = g_try_realloc(edges->w, cap * sizeof(double));
    if (grown_w == NULL)
      return FALSE;
    edges->w = grown_w;
    edges->cap = cap;
  }
  edges->u[edges->len] = u;
  edges->v[edges->len] = v;
  edges->w[edges->len] = w;
  edges->len++;
  return TRUE;
}

/* Why a thread stopped. */
enum { KNNWB_SNN_OK, KNNWB_SNN_NO_SCORES, KNNWB_SNN_NO_EDGES, KNNWB_SNN_INTERRUPTED };

typedef struct {
  const KnnwbNeighbors *lists;
  KnnwbSnnWeighting weighting;
  int64_t n;
  const int64_t *holder_offset; /* n + 1 */
  const int64_t *holder;        /* who holds s in its set */
  const int32_t *holder_rank;   /* at which rank (0 = itself) */
  KnnwbSnnEdges *edges;         /* per thread */
  int *failed;                  /* per thread: KNNWB_SNN_OK or why it stopped */
} KnnwbSnnPass;

static void knnwb_snn_pass(int t, int n_threads, void *data)
{
  KnnwbSnnPass *pass = data;
  size_t first, last;
  knnwb_team_range((size_t)pass->n, t, n_threads, &first, &last);
  double *score = g_try_new0(double, MAX(pass->n, 1));
  int64_t *added = g_try_new(int64_t, MAX(pass->n, 1));
  if (!score || !added) {
    pass->failed[t] = KNNWB_SNN_NO_SCORES;
    g_free(score);
    g_free(added);
    return;
  }
  const KnnwbNeighbors *lists = pass->lists;
  for (size_t v = first; v < last; v++) {
    /* igraph's interruption handler (the host's signals): rows cost up to k^2 steps each, and
     * the pass took minutes at k = 100. */
    if ((v & 255) == 0 && igraph_allow_interruption(NULL) != IGRAPH_SUCCESS) {
      pass->failed[t] = KNNWB_SNN_INTERRUPTED;
      goto out;
    }
    int64_t n_added = 0;
    int64_t found = lists->n_found[v];
    for (int64_t i = 0; i <= found; i++) {
      int64_t s = i == 0 ? (int64_t)v : lists->indices[v * lists->k + (size_t)(i - 1)];
      for (int64_t a = pass->holder_offset[s]; a < pass->holder_offset[s + 1]; a++) {
        int64_t h = pass->holder[a];
        if (h >= (int64_t)v)
          continue;
        /* 0 marks "not seen yet": rank sums here are >= 1 (h != v) and counts start at 1. */
        if (pass->weighting == KNNWB_SNN_RANK) {
          double sum = (double)pass->holder_rank[a] + (double)i;
          if (score[h] == 0) {
            score[h] = sum;
            added[n_added++] = h;
          } else if (sum < score[h])
            score[h] = sum;
        } else {
          if (score[h] == 0)
            added[n_added++] = h;
          score[h] += 1;
        }
      }
    }
    /* Sorted partners make the edge order independent of the holders' visiting order. */
    for (int64_t x = 1; x < n_added; x++) {
      int64_t value = added[x], y = x;
      for (; y > 0 && added[y - 1] > value; y--)
        added[y] = added[y - 1];
      added[y] = value;
    }
    for (int64_t x = 0; x < n_added; x++) {
      int64_t h = added[x];
      double weight;
      if (pass->weighting == KNNWB_SNN_RANK)
        weight = (double)found - 0.5 * score[h];
      else if (pass->weighting == KNNWB_SNN_NUMBER)
        weight = score[h];
      else
        weight = score[h] / (2.0 * (double)(found + 1) - score[h]);
      weight = MAX(weight, 1e-6);
      score[h] = 0;
      if (!knnwb_snn_edges_push(&pass->edges[t], h, (int64_t)v, weight)) {
        pass->failed[t] = KNNWB_SNN_NO_EDGES;
        goto out;
      }
    }
  }
out:
  g_free(score);
  g_free(added);
}

/* Self-kNN lists expected: every count within k, every neighbour another row of the lists. */
static gboolean knnwb_snn_check_lists(const KnnwbNeighbors *neighbors, GError **error)
{
  int64_t n = (int64_t)neighbors->n_queries;
  size_t k = neighbors->k;
  for (int64_t v = 0; v < n; v++) {
    if (neighbors->n_found[v] < 0 || (size_t)neighbors->n_found[v] > k) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "row %" G_GINT64_FORMAT ": %d neighbours listed, at most %zu expected", (gint64)v,
                  (int)neighbors->n_found[v], k);
      return FALSE;
    }
    for (int32_t r = 0; r < neighbors->n_found[v]; r++) {
      int64_t s = neighbors->indices[(size_t)v * k + (size_t)r];
      if (s < 0 || s >= n || s == v) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                    "row %" G_GINT64_FORMAT ": neighbour %" G_GINT64_FORMAT
                    " is not another row of these lists (self-kNN lists expected)",
                    (gint64)v, (gint64)s);
        return FALSE;
      }
    }
  }
  return TRUE;
}

/* The holders of every row, grouped by row (CSR): s is held by itself (rank 0) and by every v
 * listing it (rank r + 1); offset[s] .. offset[s + 1] after filling. offset has n + 2 entries. */
static void knnwb_snn_fill_holders(const KnnwbNeighbors *neighbors, int64_t *offset,
                                   int64_t *holder, int32_t *holder_rank)
{
  int64_t n = (int64_t)neighbors->n_queries;
  size_t k = neighbors->k;
  for (int64_t v = 0; v < n; v++) {
    offset[v + 2]++;
    for (int32_t r = 0; r < neighbors->n_found[v]; r++)
      offset[neighbors->indices[(size_t)v * k + (size_t)r] + 2]++;
  }
  for (int64_t s = 0; s < n; s++)
    offset[s + 2] += offset[s + 1];
  /* offset[s + 1] is now the fill position of s; after filling, offset[s] is its start. */
  for (int64_t v = 0; v < n; v++) {
    int64_t at = offset[v + 1]++;
    holder[at] = v;
    holder_rank[at] = 0;
    for (int32_t r = 0; r < neighbors->n_found[v]; r++) {
      int64_t s = neighbors->indices[(size_t)v * k + (size_t)r];
      at = offset[s + 1]++;
      holder[at] = v;
      holder_rank[at] = r + 1;
    }
  }
}

/* The first failure of the pass's threads as an error; m: the edges found. */
static gboolean knnwb_snn_pass_outcome(const KnnwbSnnPass *pass, int thread_count, size_t m,
                                       GError **error)
{
  for (int t = 0; t < thread_count; t++) {
    if (pass->failed[t] == KNNWB_SNN_INTERRUPTED) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "SNN graph interrupted");
      return FALSE;
    }
    if (pass->failed[t] == KNNWB_SNN_NO_SCORES) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "cannot allocate the SNN score rows of %" G_GINT64_FORMAT " points",
                  (gint64)pass->n);
      return FALSE;
    }
    if (pass->failed[t] == KNNWB_SNN_NO_EDGES) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "out of memory for the SNN graph's edges after %zu of them (%" G_GINT64_FORMAT
                  " points, k = %zu: up to about k^2 shared-neighbour pairs per point); lower k",
                  m, (gint64)pass->n, pass->lists->k);
      return FALSE;
    }
  }
  return TRUE;
}

/* The graph of the threads' m edges, in thread order, and their weights. */
static gboolean knnwb_snn_create(const KnnwbSnnPass *pass, int thread_count, size_t m,
                                 igraph_t *graph, igraph_vector_t *weights, GError **error)
{
  igraph_vector_int_t edges;
  igraph_error_t code = igraph_vector_int_init(&edges, (igraph_integer_t)(2 * m));
  if (!knnwb_error_from_igraph(code, "allocating the SNN edges", error))
    return FALSE;
  code = igraph_vector_resize(weights, (igraph_integer_t)m);
  if (!knnwb_error_from_igraph(code, "allocating the SNN weights", error)) {
    igraph_vector_int_destroy(&edges);
    return FALSE;
  }
  size_t e = 0;
  for (int t = 0; t < thread_count; t++)
    for (size_t x = 0; x < pass->edges[t].len; x++, e++) {
      VECTOR(edges)[2 * e] = pass->edges[t].u[x];
      VECTOR(edges)[2 * e + 1] = pass->edges[t].v[x];
      VECTOR(*weights)[e] = pass->edges[t].w[x];
    }
  gint64 create_start = g_get_monotonic_time();
  code = igraph_create(graph, &edges, (igraph_integer_t)pass->n, IGRAPH_UNDIRECTED);
  g_debug("knnwb: SNN graph of %zu edges created in %.3f s", m,
          (double)(g_get_monotonic_time() - create_start) / 1e6);
  igraph_vector_int_destroy(&edges);
  return knnwb_error_from_igraph(code, "igraph_create (SNN graph)", error);
}

gboolean knnwb_clustering_snn_graph(const KnnwbNeighbors *neighbors, KnnwbSnnWeighting weighting,
                                    int n_threads, igraph_t *graph, igraph_vector_t *weights,
                                    GError **error)
{
  if (!knnwb_snn_check_lists(neighbors, error))
    return FALSE;
  int64_t n = (int64_t)neighbors->n_queries;
  int64_t *offset = g_try_new0(int64_t, n + 2);
  size_t total = (size_t)n;
  for (int64_t v = 0; v < n; v++)
    total += (size_t)neighbors->n_found[v];
  int64_t *holder = g_try_new(int64_t, MAX(total, 1));
  int32_t *holder_rank = g_try_new(int32_t, MAX(total, 1));
  int thread_count = knnwb_thread_count(n_threads);
  if (n < 4096)
    thread_count = 1;
  KnnwbSnnPass pass = {neighbors, weighting, n, offset, holder, holder_rank, NULL, NULL};
  gboolean ok = FALSE;
  if (!offset || !holder || !holder_rank) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the SNN index of %zu entries", total);
    goto out;
  }
  knnwb_snn_fill_holders(neighbors, offset, holder, holder_rank);
  pass.edges = g_new0(KnnwbSnnEdges, thread_count);
  pass.failed = g_new0(int, thread_count);
  gint64 pass_start = g_get_monotonic_time();
  knnwb_team_run(thread_count, knnwb_snn_pass, &pass);
  g_debug("knnwb: SNN pairs %.3f s", (double)(g_get_monotonic_time() - pass_start) / 1e6);
  size_t m = 0;
  for (int t = 0; t < thread_count; t++)
    m += pass.edges[t].len;
  ok = knnwb_snn_pass_outcome(&pass, thread_count, m, error) &&
       knnwb_snn_create(&pass, thread_count, m, graph, weights, error);
out:
  for (int t = 0; pass.edges != NULL && t < thread_count; t++) {
    g_free(pass.edges[t].u);
    g_free(pass.edges[t].v);
    g_free(pass.edges[t].w);
  }
  g_free(pass.edges);
  g_free(pass.failed);
  g_free(offset);
  g_free(holder);
  g_free(holder_rank);
  return ok;
}
