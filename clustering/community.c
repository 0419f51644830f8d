/* Leiden, Louvain and walktrap through igraph, on similarity weights; modularity of a partition. */
#include <math.h>
#include <string.h>
#include <knnwb/community.h>
#include <knnwb/error.h>
#include <knnwb/isolated.h>
#include "clustering_internal.h"

void knnwb_community_options_init(KnnwbCommunityOptions *options)
{
  options->method = KNNWB_COMMUNITY_LEIDEN;
  options->objective = KNNWB_OBJECTIVE_MODULARITY;
  options->resolution = 1.0;
  options->beta = 0.01;
  options->n_iterations = -1;
  options->seed = 42;
  options->steps = 4;
}

static const KnnwbEnumName knnwb_community_method_names[] = {
    KNNWB_COMMUNITY_METHOD_NAMES(KNNWB_ENUM_ENTRY){"multilevel", KNNWB_COMMUNITY_LOUVAIN}};
const KnnwbEnumTable knnwb_community_method_table =
    KNNWB_ENUM_TABLE(knnwb_community_method_names, 1, " or ", "unknown community method ",
                     " (expected ", ")", "(null)");
static const KnnwbEnumName knnwb_community_objective_names[] = {
    KNNWB_COMMUNITY_OBJECTIVE_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_community_objective_table = KNNWB_ENUM_TABLE(
    knnwb_community_objective_names, 0, " or ", "unknown objective ", " (expected ", ")", "(null)");

gboolean knnwb_community_method_from_string(const char *name, KnnwbCommunityMethod *method,
                                            GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_community_method_table, name, &value, error))
    return FALSE;
  *method = (KnnwbCommunityMethod)value;
  return TRUE;
}

gboolean knnwb_community_objective_from_string(const char *name, KnnwbCommunityObjective *objective,
                                               GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_community_objective_table, name, &value, error))
    return FALSE;
  *objective = (KnnwbCommunityObjective)value;
  return TRUE;
}

/* igraph numbers communities its own way; renumber by lowest vertex like every knnwb clustering. */
static void knnwb_community_renumber(igraph_vector_int_t *membership)
{
  igraph_integer_t n = igraph_vector_int_size(membership);
  igraph_integer_t *map = g_new(igraph_integer_t, MAX(n, 1));
  for (igraph_integer_t v = 0; v < n; v++)
    map[v] = -1;
  igraph_integer_t count = 0;
  for (igraph_integer_t v = 0; v < n; v++) {
    igraph_integer_t c = VECTOR(*membership)[v];
    if (map[c] < 0)
      map[c] = count++;
    VECTOR(*membership)[v] = map[c];
  }
  g_free(map);
}

/* Leiden as igraph runs it: CPM takes the resolution as it is with unit node weights; modularity
 * needs node weights = strengths and resolution / (2m) (igraph 0.10's documented conversion). */
static igraph_error_t knnwb_community_leiden(const igraph_t *graph, const igraph_vector_t *weights,
                                             const KnnwbCommunityOptions *options,
                                             igraph_vector_int_t *membership)
{
  igraph_integer_t n = igraph_vcount(graph);
  igraph_vector_t node_weights;
  IGRAPH_CHECK(igraph_vector_init(&node_weights, 0));
  IGRAPH_FINALLY(igraph_vector_destroy, &node_weights);
  double resolution = options->resolution;
  const igraph_vector_t *nodes = NULL;
  if (options->objective == KNNWB_OBJECTIVE_MODULARITY) {
    IGRAPH_CHECK(
        igraph_strength(graph, &node_weights, igraph_vss_all(), IGRAPH_ALL, IGRAPH_LOOPS, weights));
    double total = weights ? igraph_vector_sum(weights) : (double)igraph_ecount(graph);
    resolution = total > 0 ? options->resolution / (2.0 * total) : options->resolution;
    nodes = &node_weights;
  }
  igraph_integer_t n_clusters = 0;
  IGRAPH_CHECK(igraph_vector_int_resize(membership, n));
  if (options->n_iterations >= 0) {
    IGRAPH_CHECK(igraph_community_leiden(graph, weights, nodes, resolution, options->beta, 0,
                                         options->n_iterations, membership, &n_clusters, NULL));
    igraph_vector_destroy(&node_weights);
    IGRAPH_FINALLY_CLEAN(1);
    return IGRAPH_SUCCESS;
  }
  /* igraph 0.10.2's "until an iteration changes nothing" (n_iterations < 0) never ends when the
   * best partition keeps every vertex alone (CPM with a resolution above every weight:
   * `--objective cpm` with the default resolution 1 and similarities below 1 hung; python-igraph
   * hangs alike). One iteration first: when it leaves every vertex alone, that is the answer;
   * otherwise the generator is seeded again and igraph's own loop runs, as before. */
  IGRAPH_CHECK(igraph_community_leiden(graph, weights, nodes, resolution, options->beta, 0, 1,
                                       membership, &n_clusters, NULL));
  if (n_clusters < n) {
    IGRAPH_CHECK(igraph_rng_seed(igraph_rng_default(), (igraph_uint_t)options->seed));
    IGRAPH_CHECK(igraph_community_leiden(graph, weights, nodes, resolution, options->beta, 0,
                                         options->n_iterations, membership, &n_clusters, NULL));
  }
  igraph_vector_destroy(&node_weights);
  IGRAPH_FINALLY_CLEAN(1);
  return IGRAPH_SUCCESS;
}

/* igraph 0.10.2's Leiden never ends (with n_iterations < 0, knnwb's default) on a graph without
 * edges, or when a vertex without edges has a positive node weight (CPM's unit weights): rows
 * kept for missing values or dropped as degenerate are such vertices (`knnwb cluster --objective
 * cpm --drop-missing` hung). They are clusters of their own (joining one would only add CPM's
 * penalty), so Leiden runs on the other vertices, renumbered, when it has to. */
static igraph_error_t knnwb_community_leiden_connected(const igraph_t *graph,
                                                       const igraph_vector_t *weights,
                                                       const KnnwbCommunityOptions *options,
                                                       igraph_vector_int_t *membership)
{
  const igraph_integer_t n = igraph_vcount(graph), m = igraph_ecount(graph);
  igraph_vector_int_t degree;
  IGRAPH_CHECK(igraph_vector_int_init(&degree, 0));
  IGRAPH_FINALLY(igraph_vector_int_destroy, &degree);
  IGRAPH_CHECK(igraph_degree(graph, &degree, igraph_vss_all(), IGRAPH_ALL, IGRAPH_LOOPS));
  igraph_integer_t kept = 0;
  for (igraph_integer_t v = 0; v < n; v++)
    kept += VECTOR(degree)[v] > 0;
  if (kept == n || (m > 0 && options->objective == KNNWB_OBJECTIVE_MODULARITY)) {
    igraph_vector_int_destroy(&degree);
    IGRAPH_FINALLY_CLEAN(1);
    return knnwb_community_leiden(graph, weights, options, membership);
  }
  /* degree becomes each vertex's number in the graph of the others (-1: a cluster of its own). */
  igraph_integer_t next = 0;
  for (igraph_integer_t v = 0; v < n; v++)
    VECTOR(degree)[v] = VECTOR(degree)[v] > 0 ? next++ : -1;
  igraph_vector_int_t edges, inner;
  IGRAPH_CHECK(igraph_vector_int_init(&edges, 2 * m));
  IGRAPH_FINALLY(igraph_vector_int_destroy, &edges);
  for (igraph_integer_t e = 0; e < m; e++) {
    VECTOR(edges)[2 * e] = VECTOR(degree)[IGRAPH_FROM(graph, e)];
    VECTOR(edges)[2 * e + 1] = VECTOR(degree)[IGRAPH_TO(graph, e)];
  }
  igraph_t connected;
  IGRAPH_CHECK(igraph_create(&connected, &edges, kept, igraph_is_directed(graph)));
  IGRAPH_FINALLY(igraph_destroy, &connected);
  IGRAPH_CHECK(igraph_vector_int_init(&inner, 0));
  IGRAPH_FINALLY(igraph_vector_int_destroy, &inner);
  igraph_integer_t clusters = 0;
  if (kept > 0) {
    IGRAPH_CHECK(knnwb_community_leiden(&connected, weights, options, &inner));
    for (igraph_integer_t v = 0; v < kept; v++)
      clusters = MAX(clusters, VECTOR(inner)[v] + 1);
  }
  IGRAPH_CHECK(igraph_vector_int_resize(membership, n));
  for (igraph_integer_t v = 0; v < n; v++)
    VECTOR(*membership)[v] = VECTOR(degree)[v] >= 0 ? VECTOR(inner)[VECTOR(degree)[v]] : clusters++;
  igraph_vector_int_destroy(&inner);
  igraph_destroy(&connected);
  igraph_vector_int_destroy(&edges);
  igraph_vector_int_destroy(&degree);
  IGRAPH_FINALLY_CLEAN(4);
  return IGRAPH_SUCCESS;
}

static igraph_error_t knnwb_community_igraph(const igraph_t *graph, const igraph_vector_t *weights,
                                             const KnnwbCommunityOptions *options,
                                             igraph_vector_int_t *membership)
{
  if (options->method == KNNWB_COMMUNITY_WALKTRAP) {
    igraph_matrix_int_t merges;
    igraph_vector_t modularity;
    IGRAPH_CHECK(igraph_matrix_int_init(&merges, 0, 0));
    IGRAPH_FINALLY(igraph_matrix_int_destroy, &merges);
    IGRAPH_CHECK(igraph_vector_init(&modularity, 0));
    IGRAPH_FINALLY(igraph_vector_destroy, &modularity);
    IGRAPH_CHECK(igraph_community_walktrap(graph, weights, options->steps, &merges, &modularity,
                                           membership));
    igraph_vector_destroy(&modularity);
    igraph_matrix_int_destroy(&merges);
    IGRAPH_FINALLY_CLEAN(2);
    return IGRAPH_SUCCESS;
  }
  IGRAPH_CHECK(igraph_rng_seed(igraph_rng_default(), (igraph_uint_t)options->seed));
  if (options->method == KNNWB_COMMUNITY_LOUVAIN)
    return igraph_community_multilevel(graph, weights, options->resolution, membership, NULL, NULL);
  return knnwb_community_leiden_connected(graph, weights, options, membership);
}

/* Leiden and Louvain draw from a private generator of the default's type seeded with the seed
 * (the draws are those of the default seeded so), set as igraph's default for the call only: a
 * caller's own stream is left where it was, not reset to the seed by every call (a program that
 * drew a permutation after each clustering drew the same one every time). */
static igraph_error_t knnwb_community_private_rng(const igraph_t *graph,
                                                  const igraph_vector_t *weights,
                                                  const KnnwbCommunityOptions *options,
                                                  igraph_vector_int_t *membership)
{
  /* igraph_rng_set_default copies the structure (its type and state pointers): the caller's is
   * kept as a copy and copied back. */
  igraph_rng_t caller = *igraph_rng_default();
  igraph_rng_t rng;
  IGRAPH_CHECK(igraph_rng_init(&rng, caller.type));
  igraph_rng_set_default(&rng);
  igraph_error_t code = knnwb_community_igraph(graph, weights, options, membership);
  igraph_rng_set_default(&caller);
  igraph_rng_destroy(&rng);
  return code;
}

/* ---- community detection in a child process (knnwb/isolated.h) ----
 * igraph 0.10's walktrap polls for interruption once per merge, but its set-up (the Communities
 * constructor: an exact delta-sigma, from random walks of `steps` on both sides, for every edge)
 * never does: on a 50,000-row kNN graph here a signal took 10 to 33 s to act. Leiden and Louvain
 * on a dense SNN graph (20,000 rows, k = 60: 19 million edges) kept one waiting 11-15 s. */

typedef struct {
  const igraph_t *graph;               /* as given: directed or not, maybe with repeated edges */
  const igraph_vector_t *similarities; /* per edge of graph, or NULL */
  const KnnwbCommunityOptions *options;
  gboolean modularity; /* also the partition's modularity on the simple graph */
} KnnwbCommunityJob;

/* The whole detection: the simple undirected graph the igraph functions want (Leiden and Louvain
 * refuse directed ones; a union kNN graph from knnwb already is one, but a directed one has u-v
 * and v-u), the method, and the modularity when asked. membership (initialised) gets the
 * clusters. Run in the child, or here without one. */
static igraph_error_t knnwb_community_detect(const KnnwbCommunityJob *job,
                                             igraph_vector_int_t *membership, double *modularity)
{
  igraph_t simple;
  igraph_vector_t simple_weights;
  IGRAPH_CHECK(igraph_vector_init(&simple_weights, 0));
  IGRAPH_FINALLY(igraph_vector_destroy, &simple_weights);
  gint64 simple_start = g_get_monotonic_time();
  if (!knnwb_clustering_undirected(job->graph, job->similarities, &simple, &simple_weights, NULL))
    IGRAPH_ERROR("cannot build the simple undirected graph", IGRAPH_ENOMEM);
  IGRAPH_FINALLY(igraph_destroy, &simple);
  g_debug("knnwb: simple undirected graph for community detection in %.3f s",
          (double)(g_get_monotonic_time() - simple_start) / 1e6);
  const igraph_vector_t *weights = job->similarities ? &simple_weights : NULL;
  IGRAPH_CHECK(knnwb_community_private_rng(&simple, weights, job->options, membership));
  if (job->modularity)
    IGRAPH_CHECK(igraph_modularity(&simple, membership, weights, 1.0, FALSE, modularity));
  igraph_destroy(&simple);
  igraph_vector_destroy(&simple_weights);
  IGRAPH_FINALLY_CLEAN(2);
  return IGRAPH_SUCCESS;
}

/* The child's side: the clusters as n int64, then the modularity (a double). */
static int knnwb_community_child(void *data, void *result, volatile uint64_t *progress)
{
  (void)progress;
  const KnnwbCommunityJob *job = data;
  igraph_vector_int_t membership;
  double modularity = NAN;
  igraph_error_t code = igraph_vector_int_init(&membership, 0);
  if (code == IGRAPH_SUCCESS)
    code = knnwb_community_detect(job, &membership, &modularity);
  const igraph_integer_t n = igraph_vcount(job->graph);
  int64_t *out = result;
  for (igraph_integer_t v = 0; code == IGRAPH_SUCCESS && v < n; v++)
    out[v] = VECTOR(membership)[v];
  memcpy(out + n, &modularity, sizeof modularity);
  return (int)code;
}

static igraph_interruption_handler_t *knnwb_community_handler;

/* The parent's side: the process's interruption handler (the host's signals) decides. */
static gboolean knnwb_community_poll(uint64_t progress, void *data)
{
  (void)progress, (void)data;
  return knnwb_community_handler != NULL && knnwb_community_handler(NULL) != IGRAPH_SUCCESS;
}

static gboolean knnwb_community_isolated(const KnnwbCommunityJob *job,
                                         igraph_vector_int_t *membership, double *modularity,
                                         GError **error)
{
  const igraph_integer_t n = igraph_vcount(job->graph);
  const size_t bytes = (size_t)n * sizeof(int64_t) + sizeof(double);
  knnwb_community_handler = igraph_set_interruption_handler(NULL);
  igraph_set_interruption_handler(knnwb_community_handler);
  void *result = NULL;
  int code = 0;
  gboolean started = FALSE;
  if (knnwb_isolated_run("community detection", knnwb_community_child, (void *)job, bytes,
                         knnwb_community_poll, NULL, &result, &code, &started, error)) {
    gboolean ok = knnwb_error_from_igraph(code, "community detection", error) &&
                  knnwb_error_from_igraph(igraph_vector_int_resize(membership, n),
                                          "igraph_vector_int_resize", error);
    for (igraph_integer_t v = 0; ok && v < n; v++)
      VECTOR(*membership)[v] = ((const int64_t *)result)[v];
    memcpy(modularity, (const int64_t *)result + n, sizeof *modularity);
    knnwb_isolated_release(result, bytes);
    return ok;
  }
  if (started)
    return FALSE;
  /* No child to be had: here, interruptible where igraph polls, except Leiden: igraph 0.10.2's
   * igraph_community_leiden crashes when interrupted (IGRAPH_FINALLY_FREE frees a stale entry:
   * a segmentation fault), so it runs to its end. */
  igraph_interruption_handler_t *handler = knnwb_community_handler;
  if (job->options->method == KNNWB_COMMUNITY_LEIDEN)
    igraph_set_interruption_handler(NULL);
  igraph_error_t detected = knnwb_community_detect(job, membership, modularity);
  igraph_set_interruption_handler(handler);
  return knnwb_error_from_igraph(detected, "community detection", error);
}

static gboolean knnwb_community_check_weights(const igraph_t *graph,
                                              const igraph_vector_t *similarities, GError **error)
{
  if (!similarities)
    return TRUE;
  igraph_integer_t m = igraph_ecount(graph);
  if (igraph_vector_size(similarities) != m) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%" IGRAPH_PRId " weights for %" IGRAPH_PRId " edges",
                igraph_vector_size(similarities), m);
    return FALSE;
  }
  for (igraph_integer_t e = 0; e < m; e++)
    if (!(VECTOR(*similarities)[e] >= 0)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "edge %" IGRAPH_PRId ": similarity weight %g is negative or NaN", e,
                  VECTOR(*similarities)[e]);
      return FALSE;
    }
  return TRUE;
}

gboolean knnwb_clustering_community(const igraph_t *graph, const igraph_vector_t *similarities,
                                    const KnnwbCommunityOptions *options,
                                    igraph_vector_int_t *membership, double *modularity,
                                    GError **error)
{
  KnnwbCommunityOptions defaults;
  if (!options) {
    knnwb_community_options_init(&defaults);
    options = &defaults;
  }
  if (!(options->resolution > 0) || !isfinite(options->resolution)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "resolution must be a positive number (got %g)", options->resolution);
    return FALSE;
  }
  if (options->method == KNNWB_COMMUNITY_WALKTRAP &&
      (options->steps < 1 || options->steps > KNNWB_COMMUNITY_MAX_STEPS)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "walktrap steps must be 1 to %d (got %" G_GINT64_FORMAT ")",
                KNNWB_COMMUNITY_MAX_STEPS, options->steps);
    return FALSE;
  }
  if (!knnwb_community_check_weights(graph, similarities, error))
    return FALSE;
  /* Every method in a child that a signal kills at once, the simple graph's making included:
   * Leiden and Louvain on a dense SNN graph (50,000 rows, k = 100: 200 million edges) kept a
   * signal waiting minutes in igraph and in the edges' sort. */
  KnnwbCommunityJob job = {graph, similarities, options, modularity != NULL};
  double q = NAN;
  gboolean ok = knnwb_community_isolated(&job, membership, &q, error);
  if (ok) {
    knnwb_community_renumber(membership);
    if (modularity)
      *modularity = q;
  }
  return ok;
}

gboolean knnwb_clustering_modularity(const igraph_t *graph, const igraph_vector_t *similarities,
                                     const igraph_vector_int_t *membership, double *modularity,
                                     GError **error)
{
  if (igraph_vector_int_size(membership) != igraph_vcount(graph)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%" IGRAPH_PRId " cluster ids for %" IGRAPH_PRId " vertices",
                igraph_vector_int_size(membership), igraph_vcount(graph));
    return FALSE;
  }
  if (!knnwb_community_check_weights(graph, similarities, error))
    return FALSE;
  igraph_real_t q = NAN;
  igraph_error_t code = igraph_modularity(graph, membership, similarities, 1.0, FALSE, &q);
  *modularity = q;
  return knnwb_error_from_igraph(code, "igraph_modularity", error);
}
