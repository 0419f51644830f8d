/* Neighbourhoods of focus rows: a focused breadth-first search through kNN queries (out), or a cut
 * from the whole kNN graph (in, both). */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/neighbourhood.h>
#include "neighbourhood_internal.h"

static const KnnwbEnumName knnwb_direction_names[] = {KNNWB_DIRECTION_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_direction_table = KNNWB_ENUM_TABLE(
    knnwb_direction_names, 0, " or ", "direction ", " is unknown (expected ", ")", "");

gboolean knnwb_direction_from_string(const char *name, KnnwbDirection *direction, GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_direction_table, name, &value, error))
    return FALSE;
  *direction = (KnnwbDirection)value;
  return TRUE;
}

const char *knnwb_direction_to_string(KnnwbDirection direction)
{
  const char *name = knnwb_enum_to_string(&knnwb_direction_table, (int)direction);
  return name != NULL ? name : "?";
}

/* An empty result (no vertices, an empty directed graph), or NULL with error set.
 * knnwb_neighbourhood_free destroys the graph and the weights: only a result with both made is
 * handed to it. */
static KnnwbNeighbourhood *knnwb_neighbourhood_new(GError **error)
{
  KnnwbNeighbourhood *result = g_new0(KnnwbNeighbourhood, 1);
  if (!knnwb_error_from_igraph(igraph_vector_init(&result->weights, 0), "igraph_vector_init",
                               error)) {
    g_free(result);
    return NULL;
  }
  if (!knnwb_error_from_igraph(igraph_empty(&result->graph, 0, IGRAPH_DIRECTED), "igraph_empty",
                               error)) {
    igraph_vector_destroy(&result->weights);
    g_free(result);
    return NULL;
  }
  return result;
}

void knnwb_neighbourhood_free(KnnwbNeighbourhood *neighbourhood)
{
  if (neighbourhood == NULL)
    return;
  g_free(neighbourhood->focus);
  g_free(neighbourhood->rows);
  g_free(neighbourhood->order);
  g_free(neighbourhood->members);
  igraph_destroy(&neighbourhood->graph);
  igraph_vector_destroy(&neighbourhood->weights);
  g_free(neighbourhood);
}

gboolean knnwb_neighbourhood_focus_rows(const KnnwbMatrix *data, const char *labels, int64_t **rows,
                                        size_t *n_rows, GError **error)
{
  return knnwb_neighbourhood_focus_labels((const char *const *)data->row_labels, data->n_rows,
                                          labels, rows, n_rows, error);
}

/* Probes sharing a gene symbol share a label: the focus is the first such row, and the user must
 * know that the others were not asked about. O(n). */
static void knnwb_neighbourhood_warn_repeated_focus(const char *const *row_labels, size_t n,
                                                    const char *label, size_t first)
{
  size_t count = 0, second = 0;
  for (size_t i = first; i < n; i++)
    if (row_labels[i] != NULL && strcmp(row_labels[i], label) == 0 && count++ == 1)
      second = i;
  if (count > 1)
    g_warning("focus '%s' labels %zu rows (%zu, %zu%s, counted from 0); the first, row %zu, is "
              "the focus",
              label, count, first, second, count > 2 ? ", ..." : "", first);
}

gboolean knnwb_neighbourhood_focus_labels(const char *const *row_labels, size_t n,
                                          const char *labels, int64_t **rows, size_t *n_rows,
                                          GError **error)
{
  g_auto(GStrv) wanted = g_strsplit(labels ? labels : "", ",", -1);
  g_autoptr(GArray) found = g_array_new(FALSE, FALSE, sizeof(int64_t));
  g_autoptr(GString) unknown = g_string_new(NULL);
  size_t n_unknown = 0;
  g_autoptr(GHashTable) index = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t i = n; row_labels != NULL && i-- > 0;)
    if (row_labels[i] != NULL)
      g_hash_table_insert(index, (gpointer)row_labels[i], GSIZE_TO_POINTER(i + 1));
  for (char **w = wanted; *w; w++) {
    const char *label = g_strstrip(*w);
    if (*label == '\0')
      continue;
    gpointer hit = g_hash_table_lookup(index, label);
    if (hit == NULL) {
      g_string_append_printf(unknown, "%s'%s'", n_unknown++ ? ", " : "", label);
      continue;
    }
    int64_t row = (int64_t)GPOINTER_TO_SIZE(hit) - 1;
    knnwb_neighbourhood_warn_repeated_focus(row_labels, n, label, (size_t)row);
    gboolean repeated = FALSE;
    for (guint i = 0; i < found->len; i++)
      repeated |= g_array_index(found, int64_t, i) == row;
    if (!repeated)
      g_array_append_val(found, row);
  }
  if (n_unknown > 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "focus: no row is labelled %s%s",
                unknown->str, row_labels == NULL ? " (the matrix has no row labels)" : "");
    return FALSE;
  }
  if (found->len == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "focus: no row label given (expected --focus LABEL[,LABEL...])");
    return FALSE;
  }
  *n_rows = found->len;
  *rows = (int64_t *)(void *)g_array_free(g_steal_pointer(&found), FALSE);
  return TRUE;
}

/* The out-lists known so far: row -> slot in indices/distances (k per slot). */
typedef struct {
  size_t k;
  GHashTable *slot_of;          /* row + 1 -> slot + 1 */
  GArray *indices;              /* int64_t */
  GArray *distances;            /* double */
  GArray *n_found;              /* int32_t */
  KnnwbKnnReference *reference; /* all rows, prepared once for every round's query */
} KnnwbListStore;

static void knnwb_list_store_init(KnnwbListStore *store, size_t k)
{
  store->k = k;
  store->reference = NULL;
  store->slot_of = g_hash_table_new(g_direct_hash, g_direct_equal);
  store->indices = g_array_new(FALSE, FALSE, sizeof(int64_t));
  store->distances = g_array_new(FALSE, FALSE, sizeof(double));
  store->n_found = g_array_new(FALSE, FALSE, sizeof(int32_t));
}

static void knnwb_list_store_clear(KnnwbListStore *store)
{
  g_hash_table_destroy(store->slot_of);
  g_array_free(store->indices, TRUE);
  g_array_free(store->distances, TRUE);
  g_array_free(store->n_found, TRUE);
  knnwb_knn_reference_free(store->reference);
}

/* Where the BFS gets each row's out-list from: whole-graph lists, or the store. */
typedef struct {
  const KnnwbNeighbors *lists; /* whole graph (all rows), or NULL */
  KnnwbListStore *store;
  /* IN/BOTH: reverse lists in CSR form over all rows. */
  int64_t *reverse_start;
  int64_t *reverse;
} KnnwbListSource;

static size_t knnwb_list_get(const KnnwbListSource *source, int64_t row, const int64_t **indices,
                             const double **distances)
{
  if (source->lists != NULL) {
    size_t k = source->lists->k;
    *indices = source->lists->indices + (size_t)row * k;
    *distances = source->lists->distances + (size_t)row * k;
    return (size_t)source->lists->n_found[row];
  }
  gpointer slot = g_hash_table_lookup(source->store->slot_of, GSIZE_TO_POINTER((gsize)row + 1));
  g_assert(slot != NULL);
  size_t s = GPOINTER_TO_SIZE(slot) - 1, k = source->store->k;
  *indices = &g_array_index(source->store->indices, int64_t, s * k);
  *distances = &g_array_index(source->store->distances, double, s *k);
  return (size_t)g_array_index(source->store->n_found, int32_t, s);
}

/* Queries rows (not yet in the store) against all rows (prepared once): k + 1 nearest, the row
 * itself dropped, which is exactly the row's self-kNN list (both are sorted by distance, then
 * index). Split: each rank queries the rows it holds against its block, the group shares the
 * work, and every rank gets every list, in rank order of the rows' holders. */
static gboolean knnwb_list_store_query(KnnwbListStore *store, const KnnwbNeighbourhoodRows *rows,
                                       const int64_t *wanted, size_t n_wanted,
                                       const KnnwbKnnOptions *options, size_t *n_queries,
                                       GError **error)
{
  const KnnwbMatrix *data = rows->data;
  g_autoptr(GArray) fresh = g_array_new(FALSE, FALSE, sizeof(int64_t));
  for (size_t i = 0; i < n_wanted; i++)
    if (!g_hash_table_contains(store->slot_of, GSIZE_TO_POINTER((gsize)wanted[i] + 1)))
      g_array_append_val(fresh, wanted[i]);
  if (fresh->len == 0)
    return TRUE;
  /* The order the lists come back in: fresh order, or grouped by holder (stable) when split. */
  g_autoptr(GArray) asked = g_array_new(FALSE, FALSE, sizeof(int64_t));
  size_t mine_begin = 0, mine_end = fresh->len;
  if (rows->group == NULL) {
    g_array_append_vals(asked, fresh->data, fresh->len);
  } else {
    for (int r = 0; r < rows->group->size; r++) {
      if (r == rows->group->rank)
        mine_begin = asked->len;
      for (guint i = 0; i < fresh->len; i++)
        if (knnwb_neighbourhood_rows_owner(rows, g_array_index(fresh, int64_t, i)) == r)
          g_array_append_val(asked, g_array_index(fresh, int64_t, i));
      if (r == rows->group->rank)
        mine_end = asked->len;
    }
  }
  const size_t d = data->n_cols, k = store->k;
  const size_t offset = rows->group != NULL ? rows->first[rows->group->rank] : 0;
  g_autoptr(KnnwbMatrix) query = knnwb_matrix_new(mine_end - mine_begin, d, error);
  /* Split: every rank agrees before the query's collectives, whatever failed where (a rank that
   * returned alone would leave the others waiting in them). */
  if (rows->group != NULL && !rows->group->agree(rows->group, query != NULL, error))
    return FALSE;
  if (query == NULL)
    return FALSE;
  for (size_t i = mine_begin; i < mine_end; i++) {
    const size_t at = (size_t)g_array_index(asked, int64_t, i) - offset;
    memcpy(query->values + (i - mine_begin) * d, data->values + at * d, d * sizeof(float));
    /* A focus row with missing values (kept absent, zeros) gets no list, as in the whole graph:
     * queried as it stands, its zeros would have had neighbours. */
    if (knnwb_matrix_row_is_absent(data, at))
      knnwb_matrix_set_row_absent(query, i - mine_begin);
  }
  KnnwbKnnOptions query_options = *options;
  query_options.k = k + 1;
  g_autoptr(KnnwbNeighbors) found = NULL;
  if (rows->group != NULL) {
    /* A split run prepares the blocks itself (no prepared reference in this mode). */
    query_options.group = rows->group;
    query_options.group_split = TRUE;
    query_options.group_own_rows = FALSE;
    if (!knnwb_knn_query(query, data, &query_options, &found, error))
      return FALSE;
  } else {
    /* All rows are the reference of every round: check and prepare them once. */
    if (store->reference == NULL &&
        (store->reference = knnwb_knn_reference_new(data, options, error)) == NULL)
      return FALSE;
    if (!knnwb_knn_reference_query(store->reference, query, &query_options, &found, error))
      return FALSE;
  }
  for (guint i = 0; i < asked->len; i++) {
    int64_t row = g_array_index(asked, int64_t, i);
    size_t slot = store->n_found->len;
    int32_t n = 0;
    for (size_t r = 0; r < found->k && (size_t)n < k; r++) {
      int64_t neighbour = found->indices[(size_t)i * found->k + r];
      if (neighbour < 0 || neighbour == row)
        continue;
      g_array_append_val(store->indices, neighbour);
      g_array_append_val(store->distances, found->distances[(size_t)i * found->k + r]);
      n++;
    }
    /* A degenerate row dropped by the engine has no list at all, as in the self graph. */
    for (int32_t r = n; (size_t)r < k; r++) {
      int64_t none = -1;
      double infinite = INFINITY;
      g_array_append_val(store->indices, none);
      g_array_append_val(store->distances, infinite);
    }
    g_array_append_val(store->n_found, n);
    g_hash_table_insert(store->slot_of, GSIZE_TO_POINTER((gsize)row + 1),
                        GSIZE_TO_POINTER(slot + 1));
  }
  *n_queries += fresh->len;
  return TRUE;
}

/* Reverse lists (who lists row v) of whole-graph lists, as CSR. */
static gboolean knnwb_list_source_reverse(KnnwbListSource *source, size_t n, GError **error)
{
  const KnnwbNeighbors *lists = source->lists;
  source->reverse_start = g_try_new0(int64_t, n + 1);
  size_t total = 0;
  for (size_t i = 0; i < n; i++)
    total += (size_t)lists->n_found[i];
  source->reverse = g_try_new(int64_t, MAX(total, (size_t)1));
  if (source->reverse_start == NULL || source->reverse == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate the reverse lists");
    return FALSE;
  }
  for (size_t i = 0; i < n; i++)
    for (int32_t r = 0; r < lists->n_found[i]; r++)
      source->reverse_start[lists->indices[i * lists->k + (size_t)r] + 1]++;
  for (size_t v = 0; v < n; v++)
    source->reverse_start[v + 1] += source->reverse_start[v];
  g_autofree int64_t *fill = g_new(int64_t, MAX(n, (size_t)1));
  memcpy(fill, source->reverse_start, n * sizeof(int64_t));
  /* Sources in increasing row order: deterministic traversal. */
  for (size_t i = 0; i < n; i++)
    for (int32_t r = 0; r < lists->n_found[i]; r++)
      source->reverse[fill[lists->indices[i * lists->k + (size_t)r]]++] = (int64_t)i;
  return TRUE;
}

/* The vertex set under construction: row -> vertex id. */
typedef struct {
  GHashTable *vertex_of; /* row + 1 -> vertex + 1 */
  GArray *rows;          /* int64_t */
  GArray *order;         /* int */
} KnnwbVertexSet;

static void knnwb_vertex_add(KnnwbVertexSet *set, int64_t row, int order)
{
  if (g_hash_table_contains(set->vertex_of, GSIZE_TO_POINTER((gsize)row + 1)))
    return;
  g_hash_table_insert(set->vertex_of, GSIZE_TO_POINTER((gsize)row + 1),
                      GSIZE_TO_POINTER((gsize)set->rows->len + 1));
  g_array_append_val(set->rows, row);
  g_array_append_val(set->order, order);
}

static gint64 knnwb_vertex_of(const KnnwbVertexSet *set, int64_t row)
{
  return (gint64)GPOINTER_TO_SIZE(
             g_hash_table_lookup(set->vertex_of, GSIZE_TO_POINTER((gsize)row + 1))) -
         1;
}

typedef struct {
  double distance;
  int64_t row;
  int order;
  size_t vertex;
} KnnwbRankedRow;

static gint knnwb_ranked_compare(gconstpointer a, gconstpointer b)
{
  const KnnwbRankedRow *x = a, *y = b;
  if (x->distance != y->distance)
    return x->distance < y->distance ? -1 : 1;
  return (x->row > y->row) - (x->row < y->row);
}

/* Per focus: BFS over the neighbourhood's own edges (it holds every path of length <= order from
 * each focus), then its members ranked by exact distance to the focus. Vertex v's values are row
 * value_rows[v] of data. */
static gboolean knnwb_neighbourhood_rank(KnnwbNeighbourhood *result, const KnnwbMatrix *data,
                                         const int64_t *value_rows, int max_order,
                                         KnnwbDirection direction, KnnwbMetric metric,
                                         GError **error)
{
  const size_t n = result->n_vertices, d = data->n_cols;
  igraph_neimode_t mode = direction == KNNWB_DIRECTION_OUT  ? IGRAPH_OUT
                          : direction == KNNWB_DIRECTION_IN ? IGRAPH_IN
                                                            : IGRAPH_ALL;
  igraph_adjlist_t adjacency;
  if (!knnwb_error_from_igraph(
          igraph_adjlist_init(&result->graph, &adjacency, mode, IGRAPH_LOOPS, IGRAPH_MULTIPLE),
          "igraph_adjlist_init", error))
    return FALSE;
  g_autofree int *hops = g_new(int, MAX(n, (size_t)1));
  g_autofree igraph_integer_t *queue = g_new(igraph_integer_t, MAX(n, (size_t)1));
  g_autoptr(GArray) members = g_array_new(FALSE, FALSE, sizeof(KnnwbNeighbourhoodMember));
  g_autoptr(GArray) ranked = g_array_new(FALSE, FALSE, sizeof(KnnwbRankedRow));
  for (size_t f = 0; f < result->n_focus; f++) {
    for (size_t v = 0; v < n; v++)
      hops[v] = -1;
    size_t head = 0, tail = 0;
    hops[f] = 0; /* the focus rows are vertices 0 .. n_focus - 1 */
    queue[tail++] = (igraph_integer_t)f;
    g_array_set_size(ranked, 0);
    while (head < tail) {
      igraph_integer_t v = queue[head++];
      if (hops[v] >= max_order)
        continue;
      igraph_vector_int_t *next = igraph_adjlist_get(&adjacency, v);
      for (igraph_integer_t e = 0; e < igraph_vector_int_size(next); e++) {
        igraph_integer_t u = VECTOR(*next)[e];
        if (hops[u] >= 0)
          continue;
        hops[u] = hops[v] + 1;
        queue[tail++] = u;
      }
    }
    const float *x = data->values + (size_t)value_rows[f] * d;
    /* spearman on the ranks a reader took from the values as read, when it kept them (the
     * engine ranks those too): Pearson of the ranks. */
    const float *ranks = metric == KNNWB_METRIC_SPEARMAN ? knnwb_matrix_row_ranks(data) : NULL;
    const float *sorted_by = ranks ? ranks : data->values;
    const KnnwbMetric sort_metric = ranks ? KNNWB_METRIC_PEARSON : metric;
    for (size_t t = 1; t < tail; t++) {
      int64_t row = result->rows[queue[t]];
      const float *y = data->values + (size_t)value_rows[queue[t]] * d;
      double distance =
          knnwb_distance_exact(sort_metric, sorted_by + (size_t)value_rows[f] * d,
                               ranks ? ranks + (size_t)value_rows[queue[t]] * d : y, d);
      KnnwbRankedRow entry = {distance, row, hops[queue[t]], (size_t)queue[t]};
      g_array_append_val(ranked, entry);
    }
    g_array_sort(ranked, knnwb_ranked_compare);
    for (guint t = 0; t < ranked->len; t++) {
      const KnnwbRankedRow *entry = &g_array_index(ranked, KnnwbRankedRow, t);
      KnnwbNeighbourhoodMember member = {f, t + 1, entry->row, entry->order, entry->distance, NAN};
      const float *y = data->values + (size_t)value_rows[entry->vertex] * d;
      if (metric == KNNWB_METRIC_PEARSON || metric == KNNWB_METRIC_SPEARMAN)
        member.r = 1.0 - entry->distance;
      else if (metric == KNNWB_METRIC_ABS_PEARSON)
        member.r = 1.0 - knnwb_distance_exact(KNNWB_METRIC_PEARSON, x, y, d);
      g_array_append_val(members, member);
    }
  }
  igraph_adjlist_destroy(&adjacency);
  result->n_members = members->len;
  result->members =
      (KnnwbNeighbourhoodMember *)(void *)g_array_free(g_steal_pointer(&members), FALSE);
  return TRUE;
}

/* Split: the members' rows (about k^order of them) come to rank 0, which ranks them. Collective
 * (every rank passes the same result->rows). */
static gboolean knnwb_neighbourhood_rank_split(const KnnwbNeighbourhoodRows *rows,
                                               KnnwbNeighbourhood *result, int order,
                                               KnnwbDirection direction, KnnwbMetric metric,
                                               GError **error)
{
  g_autoptr(KnnwbMatrix) values = NULL;
  if (!knnwb_neighbourhood_rows_gather(rows, result->rows, result->n_vertices, TRUE, &values,
                                       error))
    return FALSE;
  if (rows->group->rank != 0)
    return TRUE;
  g_autofree int64_t *identity = g_try_new(int64_t, MAX(result->n_vertices, (size_t)1));
  if (identity == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot rank %zu rows",
                result->n_vertices);
    return FALSE;
  }
  for (size_t v = 0; v < result->n_vertices; v++)
    identity[v] = (int64_t)v;
  if (!knnwb_neighbourhood_rank(result, values, identity, order, direction, metric, error))
    return FALSE;
  if (rows->members != NULL)
    *rows->members = g_steal_pointer(&values);
  return TRUE;
}

/* The shared breadth-first search: source gives out-lists (querying them on demand when it has a
 * store) and, for IN/BOTH, reverse lists. */
static gboolean knnwb_neighbourhood_search(const KnnwbNeighbourhoodRows *rows,
                                           KnnwbListSource *source, const int64_t *focus,
                                           size_t n_focus, int order, KnnwbDirection direction,
                                           KnnwbMetric metric, const KnnwbKnnOptions *options,
                                           KnnwbNeighbourhood **out, GError **error)
{
  KnnwbVertexSet set = {g_hash_table_new(g_direct_hash, g_direct_equal),
                        g_array_new(FALSE, FALSE, sizeof(int64_t)),
                        g_array_new(FALSE, FALSE, sizeof(int))};
  gboolean ok = FALSE;
  gboolean met = FALSE; /* split: this rank met the others before the ranking */
  size_t n_queries = 0;
  g_autoptr(KnnwbNeighbourhood) result = knnwb_neighbourhood_new(error);
  /* Split queries: the ranks agree on it before the first query's collectives (a failure they
   * agreed on meets again below, on every rank alike). */
  if (source->store != NULL && rows->group != NULL &&
      !rows->group->agree(rows->group, result != NULL, error))
    goto out;
  if (result == NULL)
    goto out;
  for (size_t f = 0; f < n_focus; f++)
    knnwb_vertex_add(&set, focus[f], 0);
  size_t level_begin = 0;
  for (int level = 0; level <= order; level++) {
    size_t level_end = set.rows->len;
    if (source->store != NULL &&
        !knnwb_list_store_query(source->store, rows, &g_array_index(set.rows, int64_t, level_begin),
                                level_end - level_begin, options, &n_queries, error))
      goto out;
    if (level == order)
      break;
    for (size_t v = level_begin; v < level_end; v++) {
      int64_t row = g_array_index(set.rows, int64_t, v);
      if (direction != KNNWB_DIRECTION_IN) {
        const int64_t *indices;
        const double *distances;
        size_t n = knnwb_list_get(source, row, &indices, &distances);
        for (size_t r = 0; r < n; r++)
          knnwb_vertex_add(&set, indices[r], level + 1);
      }
      if (direction != KNNWB_DIRECTION_OUT)
        for (int64_t t = source->reverse_start[row]; t < source->reverse_start[row + 1]; t++)
          knnwb_vertex_add(&set, source->reverse[t], level + 1);
    }
    level_begin = level_end;
  }
  /* Edges: every vertex's out-list restricted to the vertex set, in vertex then rank order. */
  const size_t n_vertices = set.rows->len;
  igraph_vector_int_t edges;
  if (!knnwb_error_from_igraph(igraph_vector_int_init(&edges, 0), "igraph_vector_int_init", error))
    goto out;
  for (size_t v = 0; v < n_vertices; v++) {
    const int64_t *indices;
    const double *distances;
    size_t n = knnwb_list_get(source, g_array_index(set.rows, int64_t, v), &indices, &distances);
    for (size_t r = 0; r < n; r++) {
      gint64 u = knnwb_vertex_of(&set, indices[r]);
      if (u < 0)
        continue;
      if (igraph_vector_int_push_back(&edges, (igraph_integer_t)v) != IGRAPH_SUCCESS ||
          igraph_vector_int_push_back(&edges, (igraph_integer_t)u) != IGRAPH_SUCCESS ||
          igraph_vector_push_back(&result->weights, distances[r]) != IGRAPH_SUCCESS) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot store the edges");
        igraph_vector_int_destroy(&edges);
        goto out;
      }
    }
  }
  igraph_destroy(&result->graph);
  igraph_error_t code =
      igraph_create(&result->graph, &edges, (igraph_integer_t)n_vertices, IGRAPH_DIRECTED);
  igraph_vector_int_destroy(&edges);
  if (code != IGRAPH_SUCCESS) {
    /* No graph is left to destroy: the result goes without knnwb_neighbourhood_free. */
    KnnwbNeighbourhood *broken = g_steal_pointer(&result);
    igraph_vector_destroy(&broken->weights);
    g_free(broken);
    knnwb_error_from_igraph(code, "igraph_create", error);
    goto out;
  }
  result->n_focus = n_focus;
  result->focus = g_memdup2(focus, n_focus * sizeof(int64_t));
  result->n_vertices = n_vertices;
  result->rows = g_memdup2(set.rows->data, MAX(n_vertices, 1) * sizeof(int64_t));
  result->order = g_memdup2(set.order->data, MAX(n_vertices, 1) * sizeof(int));
  result->n_queries = source->store != NULL ? n_queries : rows->n_rows;
  result->whole_graph = source->store == NULL;
  if (rows->defer_rank) {
    /* The caller gathers the members' rows and ranks them (knnwb_neighbourhood_rank_split). */
  } else if (rows->group == NULL) {
    if (!knnwb_neighbourhood_rank(result, rows->data, result->rows, order, direction, metric,
                                  error))
      goto out;
  } else {
    /* Every rank reaches this point (the queries were collective): the ranks agree, so that a
     * failure of one (out of memory) does not leave the others in the gather. */
    met = TRUE;
    if (!rows->group->agree(rows->group, TRUE, error))
      goto out;
    gboolean ranked = knnwb_neighbourhood_rank_split(rows, result, order, direction, metric, error);
    if (!rows->group->agree(rows->group, ranked, error))
      goto out;
    if (rows->group->rank != 0)
      g_clear_pointer(&result, knnwb_neighbourhood_free); /* rank 0's result */
  }
  *out = g_steal_pointer(&result);
  ok = TRUE;
out:
  /* A rank that failed before the meeting (its edges, say) still meets the others there. */
  if (!ok && !met && rows->group != NULL && !rows->defer_rank) {
    GError *local = NULL;
    rows->group->agree(rows->group, FALSE, error ? error : &local);
    g_clear_error(&local);
  }
  g_hash_table_destroy(set.vertex_of);
  g_array_free(set.rows, TRUE);
  g_array_free(set.order, TRUE);
  return ok;
}

static gboolean knnwb_neighbourhood_check(size_t n_rows, const int64_t *focus, size_t n_focus,
                                          int order, GError **error)
{
  if (order < 1) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "neighbourhood: the order must be at least 1 (got %d)", order);
    return FALSE;
  }
  if (n_focus == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "neighbourhood: no focus row");
    return FALSE;
  }
  for (size_t f = 0; f < n_focus; f++) {
    if (focus[f] < 0 || (size_t)focus[f] >= n_rows) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "neighbourhood: focus row %" G_GINT64_FORMAT " does not exist (%zu rows)",
                  (gint64)focus[f], n_rows);
      return FALSE;
    }
    for (size_t g = 0; g < f; g++)
      if (focus[g] == focus[f]) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                    "neighbourhood: focus row %" G_GINT64_FORMAT " is given twice",
                    (gint64)focus[f]);
        return FALSE;
      }
  }
  return TRUE;
}

/* The cut from whole-graph lists (all rows). */
static gboolean knnwb_neighbourhood_cut(const KnnwbNeighbourhoodRows *rows,
                                        const KnnwbNeighbors *lists, const int64_t *focus,
                                        size_t n_focus, int order, KnnwbDirection direction,
                                        KnnwbMetric metric, KnnwbNeighbourhood **result,
                                        GError **error)
{
  if (lists->n_queries != rows->n_rows) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "neighbourhood: %zu lists for %zu rows", lists->n_queries, rows->n_rows);
    return FALSE;
  }
  KnnwbListSource source = {.lists = lists};
  gboolean ok =
      direction == KNNWB_DIRECTION_OUT || knnwb_list_source_reverse(&source, rows->n_rows, error);
  ok = ok && knnwb_neighbourhood_search(rows, &source, focus, n_focus, order, direction, metric,
                                        NULL, result, error);
  g_free(source.reverse_start);
  g_free(source.reverse);
  return ok;
}

gboolean knnwb_neighbourhood_from_lists(const KnnwbMatrix *data, const KnnwbNeighbors *lists,
                                        const int64_t *focus, size_t n_focus, int order,
                                        KnnwbDirection direction, KnnwbMetric metric,
                                        KnnwbNeighbourhood **result, GError **error)
{
  if (!knnwb_neighbourhood_check(data->n_rows, focus, n_focus, order, error))
    return FALSE;
  KnnwbNeighbourhoodRows rows = {.data = data, .n_rows = data->n_rows};
  return knnwb_neighbourhood_cut(&rows, lists, focus, n_focus, order, direction, metric, result,
                                 error);
}

/* In and both over split rows: the whole graph computed split, its lists gathered on rank 0,
 * which alone walks them; the members' rows then travel to rank 0 for the ranking. Every rank
 * returns the same success (agreed); the result is rank 0's (NULL on the others). */
static gboolean knnwb_neighbourhood_cut_split(const KnnwbNeighbourhoodRows *rows,
                                              const int64_t *focus, size_t n_focus, int order,
                                              KnnwbDirection direction,
                                              const KnnwbKnnOptions *options,
                                              KnnwbNeighbourhood **result, GError **error)
{
  const KnnwbKnnGroup *group = rows->group;
  const gboolean root = group->rank == 0;
  KnnwbKnnOptions self_options = *options;
  self_options.group = group;
  self_options.group_split = TRUE;
  /* (clustered rows go together for the partitioned search where every rank has room) */
  self_options.group_split_gather = TRUE;
  self_options.group_own_rows = TRUE;
  g_autoptr(KnnwbNeighbors) own = NULL, lists = NULL;
  if (!knnwb_knn_self(rows->data, &self_options, &own, error) ||
      !knnwb_neighbors_gather_root(group, own, &lists, error))
    return FALSE;
  g_clear_pointer(&own, knnwb_neighbors_free);
  KnnwbNeighbourhoodRows deferred = *rows;
  deferred.defer_rank = TRUE;
  g_autoptr(KnnwbNeighbourhood) found = NULL;
  gboolean ok = !root || knnwb_neighbourhood_cut(&deferred, lists, focus, n_focus, order, direction,
                                                 options->metric, &found, error);
  g_clear_pointer(&lists, knnwb_neighbors_free);
  if (!group->agree(group, ok, error))
    return FALSE;
  /* The members, from rank 0 to every rank, which sends the rows it holds. */
  g_autofree int64_t *members = NULL;
  size_t n_members = root ? found->n_vertices : 0;
  int64_t *list = root ? found->rows : NULL;
  if (!knnwb_neighbourhood_rows_broadcast(group, &list, &n_members, error))
    return FALSE;
  if (!root)
    members = list;
  g_autoptr(KnnwbMatrix) values = NULL;
  ok = knnwb_neighbourhood_rows_gather(&deferred, list, n_members, TRUE, &values, error);
  if (ok && root) {
    g_autofree int64_t *identity = g_try_new(int64_t, MAX(n_members, (size_t)1));
    for (size_t v = 0; identity != NULL && v < n_members; v++)
      identity[v] = (int64_t)v;
    if (identity == NULL)
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot rank %zu rows", n_members);
    ok = identity != NULL && knnwb_neighbourhood_rank(found, values, identity, order, direction,
                                                      options->metric, error);
  }
  if (!group->agree(group, ok, error))
    return FALSE;
  if (root && rows->members != NULL)
    *rows->members = g_steal_pointer(&values);
  *result = root ? g_steal_pointer(&found) : NULL;
  return TRUE;
}

/* Both entry points: check, then the whole graph's cut (in, both) or the focused queries (out). */
static gboolean knnwb_neighbourhood_run(const KnnwbNeighbourhoodRows *rows, const int64_t *focus,
                                        size_t n_focus, int order, KnnwbDirection direction,
                                        const KnnwbKnnOptions *options, KnnwbNeighbourhood **result,
                                        GError **error)
{
  if (!knnwb_neighbourhood_check(rows->n_rows, focus, n_focus, order, error))
    return FALSE;
  if (options->k < 1 || options->k >= rows->n_rows) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "neighbourhood: k = %zu, but it must be between 1 and %zu (rows - 1)", options->k,
                rows->n_rows > 0 ? rows->n_rows - 1 : 0);
    return FALSE;
  }
  if (direction != KNNWB_DIRECTION_OUT && rows->group != NULL)
    return knnwb_neighbourhood_cut_split(rows, focus, n_focus, order, direction, options, result,
                                         error);
  if (direction != KNNWB_DIRECTION_OUT) {
    g_autoptr(KnnwbNeighbors) lists = NULL;
    if (!knnwb_knn_self(rows->data, options, &lists, error))
      return FALSE;
    return knnwb_neighbourhood_cut(rows, lists, focus, n_focus, order, direction, options->metric,
                                   result, error);
  }
  KnnwbListStore store;
  knnwb_list_store_init(&store, options->k);
  KnnwbListSource source = {.store = &store};
  gboolean ok = knnwb_neighbourhood_search(rows, &source, focus, n_focus, order, direction,
                                           options->metric, options, result, error);
  knnwb_list_store_clear(&store);
  return ok;
}

gboolean knnwb_neighbourhood_find(const KnnwbMatrix *data, const int64_t *focus, size_t n_focus,
                                  int order, KnnwbDirection direction,
                                  const KnnwbKnnOptions *options, KnnwbNeighbourhood **result,
                                  GError **error)
{
  KnnwbNeighbourhoodRows rows = {.data = data, .n_rows = data->n_rows};
  return knnwb_neighbourhood_run(&rows, focus, n_focus, order, direction, options, result, error);
}

gboolean knnwb_neighbourhood_find_split(const KnnwbKnnGroup *group, const KnnwbMatrix *block,
                                        const size_t *first_row, const int64_t *focus,
                                        size_t n_focus, int order, KnnwbDirection direction,
                                        const KnnwbKnnOptions *options, KnnwbNeighbourhood **result,
                                        KnnwbMatrix **members, GError **error)
{
  if (members != NULL)
    *members = NULL;
  KnnwbNeighbourhoodRows rows = {.data = block,
                                 .group = group,
                                 .first = first_row,
                                 .n_rows = first_row[group->size],
                                 .members = members};
  return knnwb_neighbourhood_run(&rows, focus, n_focus, order, direction, options, result, error);
}
