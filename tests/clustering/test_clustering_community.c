/* SNN graphs against a brute-force pair oracle; Leiden/Louvain/walktrap against igraph called
 * directly; ARI/NMI/contingency against hand-computed tables. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "knnwb_test_time.h"
#include <igraph.h>
#include <knnwb/community.h>
#include <knnwb/error.h>
#include <knnwb/graph.h>

/* Random self-kNN lists: k distinct other rows per row, in a random order (the SNN graph only
 * needs the order, not distances). */
static KnnwbNeighbors *random_lists(size_t n, size_t k, guint32 seed)
{
  GRand *rand = g_rand_new_with_seed(seed);
  KnnwbNeighbors *lists = g_new0(KnnwbNeighbors, 1);
  lists->n_queries = n;
  lists->k = k;
  lists->indices = g_new(int64_t, n * k);
  lists->distances = g_new0(double, n *k);
  lists->n_found = g_new(int32_t, n);
  lists->backend_used = g_strdup("test");
  for (size_t i = 0; i < n; i++) {
    lists->n_found[i] = (int32_t)k;
    for (size_t r = 0; r < k; r++) {
      int64_t pick;
      gboolean again;
      do {
        pick = g_rand_int_range(rand, 0, (gint32)n);
        again = pick == (int64_t)i;
        for (size_t q = 0; q < r && !again; q++)
          again = lists->indices[i * k + q] == pick;
      } while (again);
      lists->indices[i * k + r] = pick;
    }
  }
  g_rand_free(rand);
  return lists;
}

/* igraph stores an undirected edge with its ends in its own order. */
static igraph_integer_t low_end(const igraph_t *graph, igraph_integer_t e)
{
  return MIN(IGRAPH_FROM(graph, e), IGRAPH_TO(graph, e));
}

static igraph_integer_t high_end(const igraph_t *graph, igraph_integer_t e)
{
  return MAX(IGRAPH_FROM(graph, e), IGRAPH_TO(graph, e));
}

/* Rank of s in the (k + 1)-set of u: 0 for u itself, r + 1 for its r-th neighbour, -1 outside. */
static int rank_in(const KnnwbNeighbors *lists, size_t u, int64_t s)
{
  if ((int64_t)u == s)
    return 0;
  for (size_t r = 0; r < lists->k; r++)
    if (lists->indices[u * lists->k + r] == s)
      return (int)r + 1;
  return -1;
}

/* The bluster/libscran definitions, pair by pair. */
static double oracle_weight(const KnnwbNeighbors *lists, size_t u, size_t v, KnnwbSnnWeighting w)
{
  size_t k = lists->k;
  int best = -1, shared = 0;
  for (size_t r = 0; r <= k; r++) {
    int64_t s = r == 0 ? (int64_t)u : lists->indices[u * k + r - 1];
    int rv = rank_in(lists, v, s);
    if (rv < 0)
      continue;
    shared++;
    int sum = (int)r + rv;
    if (best < 0 || sum < best)
      best = sum;
  }
  if (shared == 0)
    return 0;
  double weight;
  if (w == KNNWB_SNN_RANK)
    weight = (double)k - 0.5 * best;
  else if (w == KNNWB_SNN_NUMBER)
    weight = shared;
  else
    weight = (double)shared / (double)(2 * (k + 1) - shared);
  return MAX(weight, 1e-6);
}

static void check_snn_against_oracle(size_t n, size_t k, KnnwbSnnWeighting w, guint32 seed)
{
  KnnwbNeighbors *lists = random_lists(n, k, seed);
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_clustering_snn_graph(lists, w, 1, &graph, &weights, &error));
  g_assert_no_error(error);
  g_assert_false(igraph_is_directed(&graph));
  /* Edges are ordered by (higher, lower): walk the oracle's pairs in that order. */
  igraph_integer_t e = 0;
  for (size_t v = 0; v < n; v++)
    for (size_t u = 0; u < v; u++) {
      double expected = oracle_weight(lists, u, v, w);
      if (expected == 0)
        continue;
      g_assert_cmpint(e, <, igraph_ecount(&graph));
      g_assert_cmpint(low_end(&graph, e), ==, (igraph_integer_t)u);
      g_assert_cmpint(high_end(&graph, e), ==, (igraph_integer_t)v);
      g_assert_cmpfloat(VECTOR(weights)[e], ==, expected);
      e++;
    }
  g_assert_cmpint(e, ==, igraph_ecount(&graph));
  igraph_destroy(&graph);
  igraph_vector_destroy(&weights);
  knnwb_neighbors_free(lists);
}

static void test_snn_oracle(void)
{
  const size_t sizes[] = {1, 2, 7, 61, 200};
  for (guint s = 0; s < G_N_ELEMENTS(sizes); s++)
    for (size_t k = 1; k <= 9 && k < sizes[s]; k += 4)
      for (int w = KNNWB_SNN_RANK; w <= KNNWB_SNN_JACCARD; w++)
        check_snn_against_oracle(sizes[s], k, (KnnwbSnnWeighting)w, (guint32)(sizes[s] * 31 + k));
}

/* The SNN graph's edges (up to about k^2 per point, so the input decides how many) run out of
 * memory with an error, not an abort: GArray's growth aborted the process ("failed to allocate
 * 536870912 bytes", SIGTRAP after 56 s for 200,000 rows, k = 300, under a 4 GB limit). Here
 * 5,000 random lists of 60 (about 9 million pairs) under an address-space limit of 128 MiB above
 * what the process has. Not under AddressSanitizer, which reserves terabytes of address space. */
static void test_snn_out_of_memory(void)
{
#if defined(__SANITIZE_ADDRESS__)
  g_test_skip("AddressSanitizer and an address-space limit do not mix");
#else
  if (!g_test_subprocess()) {
    g_test_trap_subprocess(NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
    g_test_trap_assert_passed();
    return;
  }
  KnnwbNeighbors *lists = random_lists(5000, 60, 99);
  long pages = 0;
  FILE *statm = fopen("/proc/self/statm", "r");
  if (statm == NULL || fscanf(statm, "%ld", &pages) != 1) {
    g_test_skip("no /proc/self/statm");
    return;
  }
  fclose(statm);
  struct rlimit limit;
  limit.rlim_cur = limit.rlim_max =
      (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)128 << 20);
  g_assert_cmpint(setrlimit(RLIMIT_AS, &limit), ==, 0);
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_clustering_snn_graph(lists, KNNWB_SNN_RANK, 2, &graph, &weights, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
  g_assert_nonnull(strstr(error->message, "lower k"));
  igraph_vector_destroy(&weights);
  knnwb_neighbors_free(lists);
#endif
}

/* bluster's documented example shape: a hand-checked pair. Lists of 4 points, k = 2. */
static void test_snn_hand(void)
{
  /* 0: [1, 2]; 1: [0, 2]; 2: [3, 1]; 3: [2, 0] */
  int64_t idx[] = {1, 2, 0, 2, 3, 1, 2, 0};
  double dist[8] = {0};
  int32_t found[] = {2, 2, 2, 2};
  KnnwbNeighbors lists = {
      .n_queries = 4, .k = 2, .indices = idx, .distances = dist, .n_found = found};
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_clustering_snn_graph(&lists, KNNWB_SNN_RANK, 1, &graph, &weights, &error));
  /* (0,1): 0 is rank 0 in 0's set, rank 1 in 1's: sum 1 -> 2 - 0.5 = 1.5.
   * (0,2): 2 is rank 2 in 0's set and 0 in 2's: 2 -> 1; (1,2): 2 is rank 2 / 0, 1 is 0 / 2: 1.
   * (0,3): 0 rank 0 / 2 -> 1; 2 rank 2 / 1 -> 3/2; min 2 -> 1. (1,3): 2 rank 2 / 1 = 3, 0 rank 1 /
   * 2 = 3 -> 0.5. (2,3): 3 rank 1 / 0 -> 1.5. */
  const double expected[][3] = {{0, 1, 1.5}, {0, 2, 1},   {1, 2, 1},
                                {0, 3, 1},   {1, 3, 0.5}, {2, 3, 1.5}};
  g_assert_cmpint(igraph_ecount(&graph), ==, 6);
  for (int e = 0; e < 6; e++) {
    g_assert_cmpint(low_end(&graph, e), ==, (igraph_integer_t)expected[e][0]);
    g_assert_cmpint(high_end(&graph, e), ==, (igraph_integer_t)expected[e][1]);
    g_assert_cmpfloat(VECTOR(weights)[e], ==, expected[e][2]);
  }
  igraph_destroy(&graph);
  g_assert_true(knnwb_clustering_snn_graph(&lists, KNNWB_SNN_JACCARD, 1, &graph, &weights, &error));
  /* (0,1): sets {0,1,2} and {1,0,2}: 3 / 3 = 1. (1,3): {1,0,2} and {3,2,0}: 2 / 4 = 0.5. */
  g_assert_cmpfloat(VECTOR(weights)[0], ==, 1.0);
  g_assert_cmpfloat(VECTOR(weights)[4], ==, 0.5);
  igraph_destroy(&graph);
  /* A neighbour outside the rows is refused. */
  idx[3] = 9;
  g_assert_false(knnwb_clustering_snn_graph(&lists, KNNWB_SNN_RANK, 1, &graph, &weights, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  igraph_vector_destroy(&weights);
}

/* The parallel pass gives the same graph as one thread (above the parallel threshold). */
static void test_snn_threads(void)
{
  KnnwbNeighbors *lists = random_lists(6000, 6, 7);
  igraph_t one, three;
  igraph_vector_t w1, w3;
  igraph_vector_init(&w1, 0);
  igraph_vector_init(&w3, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_clustering_snn_graph(lists, KNNWB_SNN_RANK, 1, &one, &w1, &error));
  g_assert_true(knnwb_clustering_snn_graph(lists, KNNWB_SNN_RANK, 3, &three, &w3, &error));
  g_assert_cmpint(igraph_ecount(&one), ==, igraph_ecount(&three));
  for (igraph_integer_t e = 0; e < igraph_ecount(&one); e++) {
    g_assert_cmpint(IGRAPH_FROM(&one, e), ==, IGRAPH_FROM(&three, e));
    g_assert_cmpint(IGRAPH_TO(&one, e), ==, IGRAPH_TO(&three, e));
    g_assert_cmpfloat(VECTOR(w1)[e], ==, VECTOR(w3)[e]);
  }
  igraph_destroy(&one);
  igraph_destroy(&three);
  igraph_vector_destroy(&w1);
  igraph_vector_destroy(&w3);
  knnwb_neighbors_free(lists);
}

/* A planted partition: `blocks` dense blocks of `size` vertices, sparse links between them. */
static void planted_graph(int blocks, int size, igraph_t *graph, igraph_vector_t *weights)
{
  GRand *rand = g_rand_new_with_seed(11);
  igraph_vector_int_t edges;
  igraph_vector_int_init(&edges, 0);
  igraph_vector_resize(weights, 0);
  int n = blocks * size;
  for (int u = 0; u < n; u++)
    for (int v = u + 1; v < n; v++) {
      gboolean same = u / size == v / size;
      if (g_rand_double(rand) < (same ? 0.5 : 0.01)) {
        igraph_vector_int_push_back(&edges, u);
        igraph_vector_int_push_back(&edges, v);
        igraph_vector_push_back(weights, same ? 0.5 + g_rand_double(rand) : 0.3);
      }
    }
  igraph_create(graph, &edges, n, IGRAPH_UNDIRECTED);
  igraph_vector_int_destroy(&edges);
  g_rand_free(rand);
}

/* Same partition up to renumbering. */
static void assert_same_partition(const igraph_vector_int_t *a, const igraph_vector_int_t *b)
{
  igraph_real_t vi = 1;
  g_assert_cmpint(igraph_compare_communities(a, b, &vi, IGRAPH_COMMCMP_VI), ==, 0);
  g_assert_cmpfloat(vi, ==, 0);
}

static void test_methods_match_igraph(void)
{
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  planted_graph(4, 25, &graph, &weights);
  g_autoptr(GError) error = NULL;
  igraph_vector_int_t ours, theirs, truth;
  igraph_vector_int_init(&ours, 0);
  igraph_vector_int_init(&theirs, 0);
  igraph_vector_int_init(&truth, 100);
  for (int v = 0; v < 100; v++)
    VECTOR(truth)[v] = v / 25;
  KnnwbCommunityOptions options;
  double q = 0;

  /* Louvain */
  knnwb_community_options_init(&options);
  options.method = KNNWB_COMMUNITY_LOUVAIN;
  options.seed = 5;
  g_assert_true(knnwb_clustering_community(&graph, &weights, &options, &ours, &q, &error));
  igraph_rng_seed(igraph_rng_default(), 5);
  igraph_community_multilevel(&graph, &weights, 1.0, &theirs, NULL, NULL);
  assert_same_partition(&ours, &theirs);
  assert_same_partition(&ours, &truth);
  igraph_real_t q_igraph = 0;
  igraph_modularity(&graph, &theirs, &weights, 1.0, FALSE, &q_igraph);
  g_assert_cmpfloat(fabs(q - q_igraph), <, 1e-12);
  g_assert_cmpint(VECTOR(ours)[0], ==, 0); /* numbered by lowest vertex */

  /* Leiden, modularity objective, resolution 0.8: igraph with strengths and 0.8 / (2m). */
  options.method = KNNWB_COMMUNITY_LEIDEN;
  options.resolution = 0.8;
  g_assert_true(knnwb_clustering_community(&graph, &weights, &options, &ours, &q, &error));
  igraph_vector_t strength;
  igraph_vector_init(&strength, 0);
  igraph_strength(&graph, &strength, igraph_vss_all(), IGRAPH_ALL, IGRAPH_LOOPS, &weights);
  igraph_rng_seed(igraph_rng_default(), 5);
  igraph_integer_t count = 0;
  igraph_community_leiden(&graph, &weights, &strength, 0.8 / (2 * igraph_vector_sum(&weights)),
                          0.01, 0, -1, &theirs, &count, NULL);
  assert_same_partition(&ours, &theirs);
  assert_same_partition(&ours, &truth);

  /* Leiden, CPM objective: no node weights, resolution as given. */
  options.objective = KNNWB_OBJECTIVE_CPM;
  options.resolution = 0.05;
  g_assert_true(knnwb_clustering_community(&graph, &weights, &options, &ours, NULL, &error));
  igraph_rng_seed(igraph_rng_default(), 5);
  igraph_community_leiden(&graph, &weights, NULL, 0.05, 0.01, 0, -1, &theirs, &count, NULL);
  assert_same_partition(&ours, &theirs);

  /* Walktrap (deterministic). */
  options.method = KNNWB_COMMUNITY_WALKTRAP;
  g_assert_true(knnwb_clustering_community(&graph, &weights, &options, &ours, NULL, &error));
  igraph_community_walktrap(&graph, &weights, 4, NULL, NULL, &theirs);
  assert_same_partition(&ours, &theirs);
  assert_same_partition(&ours, &truth);

  /* Bad options. */
  options.resolution = 0;
  options.method = KNNWB_COMMUNITY_LEIDEN;
  g_assert_false(knnwb_clustering_community(&graph, &weights, &options, &ours, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  igraph_vector_destroy(&strength);
  igraph_vector_int_destroy(&ours);
  igraph_vector_int_destroy(&theirs);
  igraph_vector_int_destroy(&truth);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
}

/* A library caller's own igraph random stream is left where it was: Leiden and Louvain seed a
 * private generator, not igraph's default (before, every call reset the caller's stream to the
 * seed, so a program drawing after each clustering drew the same numbers every time). Their
 * results do not change (methods-match-igraph). */
static void test_caller_rng_kept(void)
{
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  planted_graph(3, 20, &graph, &weights);
  igraph_vector_int_t membership;
  igraph_vector_int_init(&membership, 0);
  const KnnwbCommunityMethod methods[] = {KNNWB_COMMUNITY_LEIDEN, KNNWB_COMMUNITY_LOUVAIN};
  for (size_t m = 0; m < G_N_ELEMENTS(methods); m++) {
    igraph_rng_seed(igraph_rng_default(), 2024);
    igraph_integer_t expected[3];
    for (int i = 0; i < 3; i++)
      expected[i] = igraph_rng_get_integer(igraph_rng_default(), 0, 1000000000);
    igraph_rng_seed(igraph_rng_default(), 2024);
    KnnwbCommunityOptions options;
    knnwb_community_options_init(&options);
    options.method = methods[m];
    for (int i = 0; i < 3; i++) {
      g_autoptr(GError) error = NULL;
      g_assert_true(
          knnwb_clustering_community(&graph, &weights, &options, &membership, NULL, &error));
      g_assert_cmpint(igraph_rng_get_integer(igraph_rng_default(), 0, 1000000000), ==, expected[i]);
    }
  }
  igraph_vector_int_destroy(&membership);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
}

static igraph_error_t always_interrupted(void *data)
{
  (void)data;
  return IGRAPH_INTERRUPTED;
}

/* A signal stops community detection at once, whatever it is doing: every method runs in a child
 * that is killed, the simple undirected graph's making (a sort of every edge) included. Before,
 * Leiden and Louvain ran here and the sort and igraph's set-up never polled: a signal waited
 * 11-15 s on a 19-million-edge SNN graph (20,000 rows, k = 60); and when Leiden itself saw the
 * interruption, igraph 0.10.2 crashed (a segmentation fault in IGRAPH_FINALLY_FREE): this test
 * crashed before. Here 3 million random directed edges and an interruption handler that always
 * says stop: CANCELLED at once (the bound, 2 s scaled for slower builds by knnwb_test_time.h,
 * only tells that from running on). */
static void test_interrupted_at_once(void)
{
  const igraph_integer_t n = 100000, m = 3000000;
  igraph_vector_int_t edges;
  igraph_vector_int_init(&edges, 2 * m);
  igraph_vector_t weights;
  igraph_vector_init(&weights, m);
  guint32 state = 7;
  for (igraph_integer_t e = 0; e < m; e++) {
    state = state * 1664525u + 1013904223u;
    VECTOR(edges)[2 * e] = (igraph_integer_t)(state % (guint32)n);
    state = state * 1664525u + 1013904223u;
    VECTOR(edges)[2 * e + 1] = (igraph_integer_t)(state % (guint32)n);
    VECTOR(weights)[e] = (double)(state >> 8) / 16777216.0;
  }
  igraph_t graph;
  g_assert_cmpint(igraph_create(&graph, &edges, n, IGRAPH_DIRECTED), ==, IGRAPH_SUCCESS);
  igraph_vector_int_destroy(&edges);
  igraph_vector_int_t membership;
  igraph_vector_int_init(&membership, 0);
  const KnnwbCommunityMethod methods[] = {KNNWB_COMMUNITY_LEIDEN, KNNWB_COMMUNITY_LOUVAIN};
  for (size_t i = 0; i < G_N_ELEMENTS(methods); i++) {
    KnnwbCommunityOptions options;
    knnwb_community_options_init(&options);
    options.method = methods[i];
    igraph_interruption_handler_t *previous = igraph_set_interruption_handler(always_interrupted);
    g_autoptr(GError) error = NULL;
    gint64 start = g_get_monotonic_time();
    gboolean ok = knnwb_clustering_community(&graph, &weights, &options, &membership, NULL, &error);
    double seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    igraph_set_interruption_handler(previous);
    g_test_message("method %d: stopped after %.3f s", (int)methods[i], seconds);
    g_assert_false(ok);
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
    g_assert_cmpfloat(seconds, <, knnwb_test_seconds(2.0));
  }
  igraph_vector_int_destroy(&membership);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
}

/* Leiden ends where igraph 0.10.2's own loop (n_iterations < 0) never did: when the best
 * partition leaves every vertex alone (CPM with a resolution above every weight, as `--objective
 * cpm` with its default resolution 1 on similarities below 1), when a vertex has no edge under CPM
 * (a row kept for missing values) and on a graph without edges. Each case in a subprocess with
 * 20 s: before, the first never returned. */
static void test_leiden_ends(void)
{
  if (!g_test_subprocess()) {
    g_test_trap_subprocess(NULL, 20 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
    g_test_trap_assert_passed();
    return;
  }
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  planted_graph(3, 10, &graph, &weights);
  for (igraph_integer_t e = 0; e < igraph_ecount(&graph); e++)
    VECTOR(weights)[e] = 0.2 + 0.1 * (double)(e % 3); /* all below the resolution 1 */
  igraph_vector_int_t membership;
  igraph_vector_int_init(&membership, 0);
  KnnwbCommunityOptions options;
  knnwb_community_options_init(&options);
  options.objective = KNNWB_OBJECTIVE_CPM;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_clustering_community(&graph, &weights, &options, &membership, NULL, &error));
  for (igraph_integer_t v = 0; v < 30; v++)
    g_assert_cmpint(VECTOR(membership)[v], ==, v); /* every vertex alone, numbered by vertex */
  igraph_destroy(&graph);

  /* A vertex without edges beside two dense blocks, CPM at 0.05: the blocks, and it alone. */
  planted_graph(2, 10, &graph, &weights);
  igraph_add_vertices(&graph, 1, NULL);
  options.resolution = 0.05;
  g_assert_true(knnwb_clustering_community(&graph, &weights, &options, &membership, NULL, &error));
  for (igraph_integer_t v = 0; v < 20; v++)
    g_assert_cmpint(VECTOR(membership)[v], ==, v / 10);
  g_assert_cmpint(VECTOR(membership)[20], ==, 2);
  igraph_destroy(&graph);

  /* No edges at all, both objectives. */
  igraph_empty(&graph, 3, IGRAPH_UNDIRECTED);
  igraph_vector_resize(&weights, 0);
  for (int objective = 0; objective < 2; objective++) {
    options.objective = objective == 0 ? KNNWB_OBJECTIVE_MODULARITY : KNNWB_OBJECTIVE_CPM;
    g_assert_true(
        knnwb_clustering_community(&graph, &weights, &options, &membership, NULL, &error));
    for (igraph_integer_t v = 0; v < 3; v++)
      g_assert_cmpint(VECTOR(membership)[v], ==, v);
  }
  igraph_destroy(&graph);
  igraph_vector_int_destroy(&membership);
  igraph_vector_destroy(&weights);
}

/* A directed graph with both u->v and v->u becomes one undirected edge with the larger weight. */
static void test_undirected(void)
{
  igraph_t graph, out;
  igraph_vector_int_t edges = {0};
  igraph_integer_t e[] = {0, 1, 1, 0, 1, 2, 2, 2};
  igraph_vector_int_view(&edges, e, 8);
  igraph_create(&graph, &edges, 3, IGRAPH_DIRECTED);
  double w[] = {0.5, 0.7, 0.2, 0.9};
  igraph_vector_t weights = {0}, out_weights;
  igraph_vector_view(&weights, w, 4);
  igraph_vector_init(&out_weights, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_clustering_undirected(&graph, &weights, &out, &out_weights, &error));
  g_assert_false(igraph_is_directed(&out));
  g_assert_cmpint(igraph_ecount(&out), ==, 2);
  g_assert_cmpfloat(VECTOR(out_weights)[0], ==, 0.7);
  g_assert_cmpfloat(VECTOR(out_weights)[1], ==, 0.2);
  igraph_destroy(&out);
  igraph_destroy(&graph);
  igraph_vector_destroy(&out_weights);
}

static void test_similarity(void)
{
  double d[] = {0, 1, 3};
  igraph_vector_t distances = {0}, out;
  igraph_vector_view(&distances, d, 3);
  igraph_vector_init(&out, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_clustering_similarity(&distances, KNNWB_SIMILARITY_INVERSE, &out, &error));
  g_assert_cmpfloat(VECTOR(out)[0], ==, 1.0);
  g_assert_cmpfloat(VECTOR(out)[1], ==, 0.5);
  g_assert_cmpfloat(VECTOR(out)[2], ==, 0.25);
  g_assert_true(knnwb_clustering_similarity(&distances, KNNWB_SIMILARITY_EXP, &out, &error));
  g_assert_cmpfloat(fabs(VECTOR(out)[2] - exp(-3.0 / (4.0 / 3.0))), <, 1e-15);
  g_assert_true(knnwb_clustering_similarity(&distances, KNNWB_SIMILARITY_UNIT, &out, &error));
  g_assert_cmpfloat(VECTOR(out)[1], ==, 1.0);
  d[1] = -1;
  g_assert_false(knnwb_clustering_similarity(&distances, KNNWB_SIMILARITY_INVERSE, &out, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  igraph_vector_destroy(&out);
}

/* NMI from its definition, for the oracle: 2 I(A;B) / (H(A) + H(B)). */
static double nmi_oracle(const int *a, const int *b, int n)
{
  double joint[8][8] = {{0}}, pa[8] = {0}, pb[8] = {0};
  for (int i = 0; i < n; i++) {
    joint[a[i]][b[i]] += 1.0 / n;
    pa[a[i]] += 1.0 / n;
    pb[b[i]] += 1.0 / n;
  }
  double ha = 0, hb = 0, mi = 0;
  for (int x = 0; x < 8; x++) {
    if (pa[x] > 0)
      ha -= pa[x] * log(pa[x]);
    if (pb[x] > 0)
      hb -= pb[x] * log(pb[x]);
    for (int y = 0; y < 8; y++)
      if (joint[x][y] > 0)
        mi += joint[x][y] * log(joint[x][y] / (pa[x] * pb[y]));
  }
  return ha + hb > 0 ? 2 * mi / (ha + hb) : 1;
}

static void test_compare(void)
{
  /* clusters 0,0,1,1,2 / classes 0,0,0,1,unknown. Compared: 4 points with contingency
   * [[2,0],[1,1],[0,0]]. ARI by hand: sum C(n_ij,2) = 1; rows (2,2): 2; columns (3,1): 3;
   * C(4,2) = 6; expected 2*3/6 = 1; max (2+3)/2 = 2.5; ARI = (1-1)/(2.5-1) = 0. */
  igraph_integer_t c[] = {0, 0, 1, 1, 2}, k[] = {0, 0, 0, 1, -1};
  igraph_vector_int_t clusters = {0}, classes = {0};
  igraph_vector_int_view(&clusters, c, 5);
  igraph_vector_int_view(&classes, k, 5);
  igraph_matrix_int_t table;
  igraph_matrix_int_init(&table, 0, 0);
  double ari = 9, nmi = 9;
  igraph_integer_t used = 0;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_clustering_compare(&clusters, &classes, &ari, &nmi, &table, &used, &error));
  g_assert_cmpint(used, ==, 4);
  g_assert_cmpint(igraph_matrix_int_nrow(&table), ==, 3);
  g_assert_cmpint(igraph_matrix_int_ncol(&table), ==, 2);
  const int expected[3][2] = {{2, 0}, {1, 1}, {0, 0}};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++)
      g_assert_cmpint(MATRIX(table, i, j), ==, expected[i][j]);
  g_assert_cmpfloat(fabs(ari), <, 1e-12);
  const int a[] = {0, 0, 1, 1}, b[] = {0, 0, 0, 1};
  g_assert_cmpfloat(fabs(nmi - nmi_oracle(a, b, 4)), <, 1e-12);

  /* A second table: clusters 0,0,0,1,1,1 / classes 0,0,1,1,1,1: n_ij = [[2,1],[0,3]];
   * sum C = 1 + 0 + 0 + 3 = 4; rows (3,3): 6; columns (2,4): 1 + 6 = 7; C(6,2) = 15;
   * expected 42/15 = 2.8; max 6.5; ARI = (4 - 2.8) / (6.5 - 2.8) = 1.2 / 3.7. */
  igraph_integer_t c2[] = {0, 0, 0, 1, 1, 1}, k2[] = {0, 0, 1, 1, 1, 1};
  igraph_vector_int_view(&clusters, c2, 6);
  igraph_vector_int_view(&classes, k2, 6);
  g_assert_true(knnwb_clustering_compare(&clusters, &classes, &ari, &nmi, NULL, NULL, &error));
  g_assert_cmpfloat(fabs(ari - 1.2 / 3.7), <, 1e-12);
  const int a2[] = {0, 0, 0, 1, 1, 1}, b2[] = {0, 0, 1, 1, 1, 1};
  g_assert_cmpfloat(fabs(nmi - nmi_oracle(a2, b2, 6)), <, 1e-12);
  /* Identical partitions: 1 and 1. */
  g_assert_true(knnwb_clustering_compare(&clusters, &clusters, &ari, &nmi, NULL, NULL, &error));
  g_assert_cmpfloat(fabs(ari - 1), <, 1e-12);
  g_assert_cmpfloat(fabs(nmi - 1), <, 1e-12);
  /* Lengths differ. */
  igraph_vector_int_view(&classes, k2, 5);
  g_assert_false(knnwb_clustering_compare(&clusters, &classes, &ari, &nmi, NULL, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  igraph_matrix_int_destroy(&table);
}

/* Lists -> directed graph -> lists is the identity; other graphs are refused. */
static void test_lists_from_graph(void)
{
  KnnwbNeighbors *lists = random_lists(53, 4, 3);
  /* Distances in rank order (ties by index are allowed: equal distances, increasing index). */
  for (size_t i = 0; i < 53; i++)
    for (size_t r = 0; r < 4; r++)
      lists->distances[i * 4 + r] = (double)(r + 1);
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_graph_from_neighbors(lists, KNNWB_GRAPH_DIRECTED, &graph, &weights, &error));
  KnnwbNeighbors *back = NULL;
  g_assert_true(knnwb_clustering_lists_from_graph(&graph, &weights, &back, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(back->n_queries, ==, 53);
  g_assert_cmpuint(back->k, ==, 4);
  g_assert_cmpmem(back->indices, 53 * 4 * sizeof(int64_t), lists->indices,
                  53 * 4 * sizeof(int64_t));
  g_assert_cmpmem(back->distances, 53 * 4 * sizeof(double), lists->distances,
                  53 * 4 * sizeof(double));
  for (size_t i = 0; i < 53; i++)
    g_assert_cmpint(back->n_found[i], ==, 4);
  knnwb_neighbors_free(back);
  /* Out of rank order. */
  VECTOR(weights)[1] = 0.5;
  g_assert_false(knnwb_clustering_lists_from_graph(&graph, &weights, &back, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  igraph_destroy(&graph);
  /* Undirected. */
  g_assert_true(knnwb_graph_from_neighbors(lists, KNNWB_GRAPH_UNION, &graph, &weights, &error));
  g_assert_false(knnwb_clustering_lists_from_graph(&graph, &weights, &back, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  igraph_destroy(&graph);
  igraph_vector_destroy(&weights);
  knnwb_neighbors_free(lists);
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/clustering/community/snn-oracle", test_snn_oracle);
  g_test_add_func("/clustering/community/snn-hand", test_snn_hand);
  g_test_add_func("/clustering/community/snn-out-of-memory", test_snn_out_of_memory);
  g_test_add_func("/clustering/community/snn-threads", test_snn_threads);
  g_test_add_func("/clustering/community/methods-match-igraph", test_methods_match_igraph);
  g_test_add_func("/clustering/community/caller-rng-kept", test_caller_rng_kept);
  g_test_add_func("/clustering/community/interrupted-at-once", test_interrupted_at_once);
  g_test_add_func("/clustering/community/leiden-ends", test_leiden_ends);
  g_test_add_func("/clustering/community/undirected", test_undirected);
  g_test_add_func("/clustering/community/similarity", test_similarity);
  g_test_add_func("/clustering/community/compare", test_compare);
  g_test_add_func("/clustering/community/lists-from-graph", test_lists_from_graph);
  return g_test_run();
}
