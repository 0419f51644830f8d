/*
 * Minimum spanning forest by Borůvka on the CPU. Each round works on a compact list of the edges
 * that still join two different components (endpoints stored as component labels, renumbered
 * densely every round), so rounds get cheaper as components merge. Picks use the total order
 * (weight, edge id), which makes the forest unique and so independent of threads and backend.
 */
#include <string.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

typedef struct {
  /* active edges: component labels of both ends, original id, weight */
  int32_t *cu, *cv;
  int64_t *eid;
  double *w;
  size_t n_active;
  /* per component of the current round */
  uint64_t *best_key;  /* per component: order key of its lightest outgoing weight */
  uint64_t *best_slot; /* per component: lowest active slot with that weight, UINT64_MAX if none */
  int32_t *relabel;
  size_t n_components;
  /* filled by the compaction pass */
  size_t *kept;
  const igraph_t *graph;
  const igraph_vector_t *weights;
} KnnwbBoruvka;

/* Doubles as unsigned integers in the same order (NaN excluded; -0.0 folded into +0.0), so a
 * component's lightest weight is a plain 64-bit atomic minimum on data read sequentially. */
static inline uint64_t knnwb_boruvka_order_key(double w)
{
  w += 0.0;
  uint64_t bits;
  memcpy(&bits, &w, sizeof bits);
  return (bits >> 63) ? ~bits : bits | (UINT64_C(1) << 63);
}

static inline void knnwb_boruvka_atomic_min(uint64_t *target, uint64_t value)
{
  uint64_t current = __atomic_load_n(target, __ATOMIC_RELAXED);
  while (value < current) {
    if (__atomic_compare_exchange_n(target, &current, value, TRUE, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      return;
  }
}

static void knnwb_boruvka_load(int t, int n_threads, void *data)
{
  KnnwbBoruvka *b = data;
  size_t first, last;
  knnwb_team_range((size_t)igraph_ecount(b->graph), t, n_threads, &first, &last);
  const igraph_integer_t *from = VECTOR(b->graph->from), *to = VECTOR(b->graph->to);
  for (size_t e = first; e < last; e++) {
    b->cu[e] = (int32_t)from[e];
    b->cv[e] = (int32_t)to[e];
    b->eid[e] = (int64_t)e;
    b->w[e] = VECTOR(*b->weights)[e];
  }
}

static void knnwb_boruvka_clear_best(int t, int n_threads, void *data)
{
  KnnwbBoruvka *b = data;
  size_t first, last;
  knnwb_team_range(b->n_components, t, n_threads, &first, &last);
  for (size_t c = first; c < last; c++) {
    b->best_key[c] = UINT64_MAX;
    b->best_slot[c] = UINT64_MAX;
  }
}

/* Pass 1: each component's lightest weight. */
static void knnwb_boruvka_pick_weight(int t, int n_threads, void *data)
{
  KnnwbBoruvka *b = data;
  size_t first, last;
  knnwb_team_range(b->n_active, t, n_threads, &first, &last);
  for (size_t i = first; i < last; i++) {
    uint64_t key = knnwb_boruvka_order_key(b->w[i]);
    knnwb_boruvka_atomic_min(&b->best_key[b->cu[i]], key);
    knnwb_boruvka_atomic_min(&b->best_key[b->cv[i]], key);
  }
}

/* Pass 2: among the edges of that weight, the lowest slot. Compaction is stable, so slot order is
 * edge id order: this is the (weight, edge id) minimum. */
static void knnwb_boruvka_pick_slot(int t, int n_threads, void *data)
{
  KnnwbBoruvka *b = data;
  size_t first, last;
  knnwb_team_range(b->n_active, t, n_threads, &first, &last);
  for (size_t i = first; i < last; i++) {
    uint64_t key = knnwb_boruvka_order_key(b->w[i]);
    if (key == b->best_key[b->cu[i]])
      knnwb_boruvka_atomic_min(&b->best_slot[b->cu[i]], i);
    if (key == b->best_key[b->cv[i]])
      knnwb_boruvka_atomic_min(&b->best_slot[b->cv[i]], i);
  }
}

/* Relabels this thread's share of the active edges and keeps those still between components,
 * packed at the front of the share; the caller then closes the gaps between shares. */
static void knnwb_boruvka_compact(int t, int n_threads, void *data)
{
  KnnwbBoruvka *b = data;
  size_t first, last;
  knnwb_team_range(b->n_active, t, n_threads, &first, &last);
  size_t out = first;
  for (size_t i = first; i < last; i++) {
    int32_t a = b->relabel ? b->relabel[b->cu[i]] : b->cu[i];
    int32_t c = b->relabel ? b->relabel[b->cv[i]] : b->cv[i];
    if (a == c)
      continue;
    b->cu[out] = a;
    b->cv[out] = c;
    b->eid[out] = b->eid[i];
    b->w[out] = b->w[i];
    out++;
  }
  b->kept[t] = out - first;
}

static void knnwb_boruvka_compact_all(KnnwbBoruvka *b, int n_threads)
{
  knnwb_team_run(n_threads, knnwb_boruvka_compact, b);
  size_t out = 0;
  for (int t = 0; t < n_threads; t++) {
    size_t first, last;
    knnwb_team_range(b->n_active, t, n_threads, &first, &last);
    if (out != first && b->kept[t] > 0) {
      memmove(b->cu + out, b->cu + first, b->kept[t] * sizeof *b->cu);
      memmove(b->cv + out, b->cv + first, b->kept[t] * sizeof *b->cv);
      memmove(b->eid + out, b->eid + first, b->kept[t] * sizeof *b->eid);
      memmove(b->w + out, b->w + first, b->kept[t] * sizeof *b->w);
    }
    out += b->kept[t];
  }
  b->n_active = out;
}

gboolean knnwb_clustering_boruvka_cpu(const igraph_t *graph, const igraph_vector_t *weights,
                                      int n_threads, unsigned char *in_forest, GError **error)
{
  int64_t n = igraph_vcount(graph);
  size_t m = (size_t)igraph_ecount(graph);
  if (n >= INT32_MAX) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "Borůvka supports fewer than 2^31 - 1 vertices (got %" G_GINT64_FORMAT ")",
                (gint64)n);
    return FALSE;
  }
  n_threads = knnwb_thread_count(n_threads);
  memset(in_forest, 0, m);
  KnnwbBoruvka b = {0};
  b.graph = graph;
  b.weights = weights;
  b.n_active = m;
  b.n_components = (size_t)n;
  b.cu = g_try_new(int32_t, MAX(m, 1));
  b.cv = g_try_new(int32_t, MAX(m, 1));
  b.eid = g_try_new(int64_t, MAX(m, 1));
  b.w = g_try_new(double, MAX(m, 1));
  b.best_key = g_try_new(uint64_t, MAX(n, 1));
  b.best_slot = g_try_new(uint64_t, MAX(n, 1));
  b.relabel = NULL;
  int32_t *next_label = g_try_new(int32_t, MAX(n, 1));
  int64_t *parent = g_try_new(int64_t, MAX(n, 1));
  b.kept = g_new0(size_t, n_threads);
  gboolean ok = FALSE;
  if (!b.cu || !b.cv || !b.eid || !b.w || !b.best_key || !b.best_slot || !next_label || !parent) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate Borůvka work arrays for %zu edges", m);
    goto out;
  }
  knnwb_team_run(n_threads, knnwb_boruvka_load, &b);
  knnwb_boruvka_compact_all(&b, n_threads); /* drops self-loops */

  while (b.n_active > 0) {
    knnwb_team_run(n_threads, knnwb_boruvka_clear_best, &b);
    knnwb_team_run(n_threads, knnwb_boruvka_pick_weight, &b);
    knnwb_team_run(n_threads, knnwb_boruvka_pick_slot, &b);
    /* Every component with an active edge points at the component across its pick. With a strict
     * total order the only cycles are mutual picks of one edge, so joining along picks never
     * closes a cycle; a mutual pick is recorded once. */
    size_t nc = b.n_components;
    for (size_t c = 0; c < nc; c++)
      parent[c] = (int64_t)c;
    for (size_t c = 0; c < nc; c++) {
      uint64_t i = b.best_slot[c];
      if (i == UINT64_MAX)
        continue;
      int32_t other = b.cu[i] == (int32_t)c ? b.cv[i] : b.cu[i];
      if (b.best_slot[other] == i && (size_t)other < c)
        continue;
      if (knnwb_clustering_union(parent, (int64_t)c, other))
        in_forest[b.eid[i]] = 1;
    }
    int32_t count = 0;
    for (size_t c = 0; c < nc; c++) {
      int64_t root = knnwb_clustering_find(parent, (int64_t)c);
      if (root == (int64_t)c)
        next_label[c] = count++;
    }
    for (size_t c = 0; c < nc; c++)
      next_label[c] = next_label[knnwb_clustering_find(parent, (int64_t)c)];
    b.relabel = next_label;
    b.n_components = (size_t)count;
    knnwb_boruvka_compact_all(&b, n_threads);
  }
  ok = TRUE;
out:
  g_free(b.cu);
  g_free(b.cv);
  g_free(b.eid);
  g_free(b.w);
  g_free(b.best_key);
  g_free(b.best_slot);
  g_free(b.kept);
  g_free(next_label);
  g_free(parent);
  return ok;
}
