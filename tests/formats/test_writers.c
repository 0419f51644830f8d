/*
 * Writers: .knn round trips (bit-identical weights), the .knn reader's malformed inputs, atomic
 * replacement, the TSV tables' exact text, GML/GraphML structure (GraphML parsed by libxml2),
 * format selection, and the pieces MPI ranks assemble one file from (headers, lines of a block of
 * rows, the .npz frame with combined CRCs) against the whole-file writers.
 */
#include "formats_test_util.h"
#include "knnwb_test_graph.h"
#include <knnwb/graph.h>
#include <knnwb/write_matrix.h>

#include <glib/gstdio.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *read_text(const char *path)
{
  char *text = NULL;
  GError *error = NULL;
  g_file_get_contents(path, &text, NULL, &error);
  g_assert_no_error(error);
  return text;
}

static void assert_same_graph(const igraph_t *a, const igraph_vector_t *wa, const igraph_t *b,
                              const igraph_vector_t *wb)
{
  g_assert_cmpint(igraph_vcount(a), ==, igraph_vcount(b));
  g_assert_cmpint(igraph_ecount(a), ==, igraph_ecount(b));
  g_assert_cmpint(igraph_is_directed(a), ==, igraph_is_directed(b));
  for (igraph_integer_t e = 0; e < igraph_ecount(a); e++) {
    g_assert_cmpint(IGRAPH_FROM(a, e), ==, IGRAPH_FROM(b, e));
    g_assert_cmpint(IGRAPH_TO(a, e), ==, IGRAPH_TO(b, e));
    g_assert_true(memcmp(&VECTOR(*wa)[e], &VECTOR(*wb)[e], sizeof(double)) == 0);
  }
}

static void test_knn_round_trip(void)
{
  GRand *rand = g_rand_new_with_seed(99);
  for (int directed = 0; directed <= 1; directed++) {
    igraph_t graph, back;
    igraph_vector_t weights, back_weights;
    knnwb_test_random_graph(rand, 57, 400, directed, &graph, &weights);
    g_autofree char *path = g_build_filename(formats_test_dir(), "round.knn", NULL);
    GError *error = NULL;
    g_assert_true(knnwb_formats_write_knn(path, &graph, &weights, &error));
    g_assert_no_error(error);
    igraph_vector_init(&back_weights, 0);
    g_assert_true(knnwb_formats_read_knn(path, directed, &back, &back_weights, &error));
    g_assert_no_error(error);
    assert_same_graph(&graph, &weights, &back, &back_weights);
    g_autofree char *text = read_text(path);
    g_assert_true(g_str_has_prefix(text, "57 400\n"));
    igraph_destroy(&back);
    igraph_vector_destroy(&back_weights);
    igraph_destroy(&graph);
    igraph_vector_destroy(&weights);
  }
  g_rand_free(rand);

  /* No weights: 1 is written. An empty graph. */
  igraph_t ring, empty, back;
  igraph_ring(&ring, 4, IGRAPH_UNDIRECTED, FALSE, TRUE);
  g_autofree char *path = g_build_filename(formats_test_dir(), "ring.knn", NULL);
  g_assert_true(knnwb_formats_write_knn(path, &ring, NULL, NULL));
  g_autofree char *text = read_text(path);
  g_assert_cmpstr(text, ==, "4 4\n0 1 1\n1 2 1\n2 3 1\n0 3 1\n");
  igraph_empty(&empty, 0, IGRAPH_DIRECTED);
  g_assert_true(knnwb_formats_write_knn(path, &empty, NULL, NULL));
  igraph_vector_t weights;
  igraph_vector_init(&weights, 3);
  g_assert_true(knnwb_formats_read_knn(path, TRUE, &back, &weights, NULL));
  g_assert_cmpint(igraph_vcount(&back), ==, 0);
  g_assert_cmpint(igraph_vector_size(&weights), ==, 0);
  igraph_destroy(&back);
  igraph_destroy(&empty);
  igraph_destroy(&ring);

  /* The seed's own output file. */
  GError *error = NULL;
  g_assert_true(knnwb_formats_read_knn(KNNWB_SHARED_DATA_DIR "/cibm-sample.seed.knn", TRUE, &back,
                                       &weights, &error));
  g_assert_no_error(error);
  g_assert_cmpint(igraph_vcount(&back), ==, 10);
  g_assert_cmpint(igraph_ecount(&back), ==, 30);
  g_assert_cmpint(IGRAPH_TO(&back, 1), ==, 8);
  g_assert_cmpfloat(VECTOR(weights)[1], ==, -0.782624);
  igraph_destroy(&back);
  igraph_vector_destroy(&weights);
}

static void test_knn_malformed(void)
{
  static const struct {
    const char *name;
    const char *content;
    gssize length;
    int line;
    const char *needle;
  } cases[] = {
      {"empty", "", -1, 1, "empty"},
      {"header", "3\n", -1, 1, "edge count"},
      {"header-junk", "3 1 x\n0 1 1\n", -1, 1, "after `vertices edges`"},
      {"absurd", "3 99999999999\n0 1 1\n", -1, 1, "cannot fit"},
      {"truncated", "3 3\n0 1 1\n1 2 1\n", -1, 3, "ends after 2 edges"},
      {"range", "3 2\n0 1 1\n1 3 1\n", -1, 3, "vertex number in [0, 3)"},
      {"negative", "3 1\n-1 1 1\n", -1, 2, "vertex number"},
      {"weight", "3 1\n0 1 x\n", -1, 2, "finite weight"},
      {"nan", "3 1\n0 1 nan\n", -1, 2, "finite weight"},
      {"inf", "3 1\n0 1 1e999\n", -1, 2, "out of range"},
      {"missing-weight", "3 1\n0 1\n", -1, 2, "finite weight"},
      {"extra-text", "3 1\n0 1 0.5 9\n", -1, 2, "after `source target distance`"},
      {"extra-edges", "3 1\n0 1 0.5\n1 2 0.5\n", -1, 3, "more edges than the 1"},
      {"nul", "3 1\n0 1\0 0.5\n", 14, 2, "vertex number"},
      {"no-vertices", "0 1\n0 0 1\n", -1, 1, "edges but no vertices"},
      {"absurd-vertices", "644444494444410 1\n0 5 1\n", -1, 1, "not plausible"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf("bad-%s.knn", cases[i].name);
    g_autofree char *path = formats_test_write(name, cases[i].content, cases[i].length);
    igraph_t graph;
    igraph_vector_t weights;
    igraph_vector_init(&weights, 0);
    GError *error = NULL;
    g_test_message("case %s", cases[i].name);
    g_assert_false(knnwb_formats_read_knn(path, TRUE, &graph, &weights, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
    g_autofree char *prefix = g_strdup_printf("%s:%d:", path, cases[i].line);
    if (!g_str_has_prefix(error->message, prefix) ||
        strstr(error->message, cases[i].needle) == NULL) {
      g_test_message("want '%s' ... '%s', got: %s", prefix, cases[i].needle, error->message);
      g_test_fail();
    }
    g_clear_error(&error);
    igraph_vector_destroy(&weights);
  }
}

/* Which files are synced before their rename: those that replace data, then every one once the
 * process asked for it (a subprocess: the request lasts for the process). */
static void test_atomic_durable(void)
{
  if (g_test_subprocess()) {
    knnwb_atomic_file_sync_always();
    g_autofree char *fresh = g_build_filename(formats_test_dir(), "durable-fresh.txt", NULL);
    KnnwbAtomicFile *file = knnwb_atomic_file_open(fresh, NULL);
    g_assert_true(knnwb_atomic_file_durable(file));
    fputs("synced\n", knnwb_atomic_file_stream(file));
    g_assert_true(knnwb_atomic_file_commit(file, NULL));
    g_autofree char *text = read_text(fresh);
    g_assert_cmpstr(text, ==, "synced\n");
    return;
  }
  g_autofree char *fresh = g_build_filename(formats_test_dir(), "durable-new.txt", NULL);
  /* A new file: not synced, and written all the same. */
  KnnwbAtomicFile *file = knnwb_atomic_file_open(fresh, NULL);
  g_assert_false(knnwb_atomic_file_durable(file));
  fputs("first\n", knnwb_atomic_file_stream(file));
  knnwb_atomic_file_start_writeback(file);
  fputs("second\n", knnwb_atomic_file_stream(file));
  g_assert_true(knnwb_atomic_file_commit(file, NULL));
  g_autofree char *text = read_text(fresh);
  g_assert_cmpstr(text, ==, "first\nsecond\n");
  /* It now holds data: replacing it is synced. */
  file = knnwb_atomic_file_open(fresh, NULL);
  g_assert_true(knnwb_atomic_file_durable(file));
  fputs("third\n", knnwb_atomic_file_stream(file));
  knnwb_atomic_file_start_writeback(file);
  g_assert_true(knnwb_atomic_file_commit(file, NULL));
  g_free(text);
  text = read_text(fresh);
  g_assert_cmpstr(text, ==, "third\n");
  /* An empty file (the program's placeholders) holds nothing to keep; the new one takes its
   * place (by an exchange of names where the system has it) and nothing else is left. */
  g_autofree char *empty = formats_test_write("durable-empty.txt", "", 0);
  const guint entries = formats_test_count_entries(formats_test_dir());
  file = knnwb_atomic_file_open(empty, NULL);
  g_assert_false(knnwb_atomic_file_durable(file));
  fputs("into the empty file\n", knnwb_atomic_file_stream(file));
  g_assert_true(knnwb_atomic_file_commit(file, NULL));
  g_free(text);
  text = read_text(empty);
  g_assert_cmpstr(text, ==, "into the empty file\n");
  g_assert_cmpuint(formats_test_count_entries(formats_test_dir()), ==, entries);
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  /* The request lasted for that process only. */
  g_autofree char *later = g_build_filename(formats_test_dir(), "durable-later.txt", NULL);
  file = knnwb_atomic_file_open(later, NULL);
  g_assert_false(knnwb_atomic_file_durable(file));
  knnwb_atomic_file_abort(file);
}

static void test_atomic(void)
{
  const char *dir = formats_test_dir();
  g_autofree char *target = formats_test_write("atomic.txt", "old\n", -1);
  guint before = formats_test_count_entries(dir);

  /* Abandoned: the target keeps its content and no temporary file is left. */
  KnnwbAtomicFile *file = knnwb_atomic_file_open(target, NULL);
  g_assert_nonnull(file);
  fputs("new but abandoned\n", knnwb_atomic_file_stream(file));
  g_assert_cmpuint(formats_test_count_entries(dir), ==, before + 1);
  knnwb_atomic_file_abort(file);
  g_autofree char *text = read_text(target);
  g_assert_cmpstr(text, ==, "old\n");
  g_assert_cmpuint(formats_test_count_entries(dir), ==, before);

  /* Committed: replaced, with the umask's permissions rather than mkstemp's 0600. */
  file = knnwb_atomic_file_open(target, NULL);
  g_assert_cmpstr(knnwb_atomic_file_path(file), ==, target);
  fputs("new\n", knnwb_atomic_file_stream(file));
  g_assert_true(knnwb_atomic_file_commit(file, NULL));
  g_free(text);
  text = read_text(target);
  g_assert_cmpstr(text, ==, "new\n");
  g_assert_cmpuint(formats_test_count_entries(dir), ==, before);
  GStatBuf st;
  g_assert_cmpint(g_stat(target, &st), ==, 0);
  mode_t mask = umask(022);
  umask(mask);
  g_assert_cmpint(st.st_mode & 0777, ==, 0666 & ~mask);

  /* Failures: no directory, a directory as target, a device as target. */
  GError *error = NULL;
  g_assert_null(knnwb_atomic_file_open("/nonexistent-knnwb/x.knn", &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_IO);
  g_clear_error(&error);
  g_assert_null(knnwb_atomic_file_open(dir, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_IO);
  g_clear_error(&error);
  g_assert_null(knnwb_atomic_file_open("/dev/null", &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_IO);
  g_clear_error(&error);

  /* A writer that fails validation leaves nothing either. */
  igraph_t graph;
  igraph_ring(&graph, 3, IGRAPH_UNDIRECTED, FALSE, TRUE);
  igraph_vector_t weights;
  igraph_vector_init(&weights, 2); /* wrong length */
  g_assert_false(knnwb_formats_write_knn(target, &graph, &weights, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  g_free(text);
  text = read_text(target);
  g_assert_cmpstr(text, ==, "new\n");
  g_assert_cmpuint(formats_test_count_entries(dir), ==, before);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
}

/* A 4-vertex directed graph: 0 -> 1 (0.5), 0 -> 2 (0.25), 1 -> 0 (0.5), 3 -> 2 (2), 2 -> 3 (2). */
static void small_graph(igraph_bool_t directed, igraph_t *graph, igraph_vector_t *weights)
{
  igraph_vector_int_t edges;
  igraph_integer_t list[] = {0, 1, 0, 2, 1, 0, 3, 2, 2, 3};
  igraph_vector_int_init_array(&edges, list, 10);
  igraph_create(graph, &edges, 4, directed);
  igraph_vector_int_destroy(&edges);
  igraph_real_t w[] = {0.5, 0.25, 0.5, 2, 2};
  igraph_vector_init_array(weights, w, 5);
}

static void test_tables(void)
{
  igraph_t graph;
  igraph_vector_t weights;
  small_graph(TRUE, &graph, &weights);
  const char *labels[] = {"a", "tab\there", "say \"x\"", "d"};
  g_autofree char *path = g_build_filename(formats_test_dir(), "nb.tsv", NULL);
  GError *error = NULL;
  g_assert_true(knnwb_formats_write_neighbors_tsv(path, &graph, &weights, labels, &error));
  g_assert_no_error(error);
  g_autofree char *text = read_text(path);
  g_assert_cmpstr(text, ==,
                  "row\tlabel\trank\tneighbor_row\tneighbor\tdistance\n"
                  "0\ta\t1\t2\t\"say \"\"x\"\"\"\t0.25\n"
                  "0\ta\t2\t1\t\"tab\there\"\t0.5\n"
                  "1\t\"tab\there\"\t1\t0\ta\t0.5\n"
                  "2\t\"say \"\"x\"\"\"\t1\t3\td\t2\n"
                  "3\td\t1\t2\t\"say \"\"x\"\"\"\t2\n");
  /* The table reads back through the TSV reader (labels in column 0, quoted). */
  igraph_destroy(&graph);
  igraph_vector_destroy(&weights);

  small_graph(FALSE, &graph, &weights);
  g_assert_true(knnwb_formats_write_neighbors_tsv(path, &graph, &weights, NULL, &error));
  g_free(text);
  text = read_text(path);
  g_assert_cmpstr(text, ==,
                  "row\tlabel\trank\tneighbor_row\tneighbor\tdistance\n"
                  "0\t0\t1\t2\t2\t0.25\n0\t0\t2\t1\t1\t0.5\n0\t0\t3\t1\t1\t0.5\n"
                  "1\t1\t1\t0\t0\t0.5\n1\t1\t2\t0\t0\t0.5\n"
                  "2\t2\t1\t0\t0\t0.25\n2\t2\t2\t3\t3\t2\n2\t2\t3\t3\t3\t2\n"
                  "3\t3\t1\t2\t2\t2\n3\t3\t2\t2\t2\t2\n");

  igraph_vector_int_t membership;
  igraph_integer_t ids[] = {1, 0, 1, 1};
  igraph_vector_int_init_array(&membership, ids, 4);
  g_autofree char *labels_path = g_build_filename(formats_test_dir(), "x.labels.tsv", NULL);
  KnnwbGraphOutput output = {
      .graph = &graph, .weights = &weights, .labels = labels, .membership = &membership};
  g_assert_true(knnwb_formats_write_graph(labels_path, KNNWB_OUTPUT_AUTO, &output, &error));
  g_assert_no_error(error);
  g_free(text);
  text = read_text(labels_path);
  g_assert_cmpstr(
      text, ==,
      "row\tlabel\tcluster\tsize\n0\ta\t1\t3\n1\t\"tab\there\"\t0\t1\n2\t\"say \"\"x\"\"\"\t1\t3\n"
      "3\td\t1\t3\n");

  /* From neighbour lists, skipping empty slots. */
  int64_t indices[] = {1, 2, 0, -1};
  double distances[] = {0.125, 0.5, 1.0, INFINITY};
  int32_t found[] = {2, 1};
  KnnwbNeighbors neighbors = {
      .n_queries = 2, .k = 2, .indices = indices, .distances = distances, .n_found = found};
  const char *queries[] = {"q0", "q1"};
  g_assert_true(knnwb_formats_write_neighbor_lists_tsv(path, &neighbors, queries, labels, &error));
  g_free(text);
  text = read_text(path);
  g_assert_cmpstr(text, ==,
                  "row\tlabel\trank\tneighbor_row\tneighbor\tdistance\n"
                  "0\tq0\t1\t1\t\"tab\there\"\t0.125\n"
                  "0\tq0\t2\t2\t\"say \"\"x\"\"\"\t0.5\n1\tq1\t1\t0\ta\t1\n");

  VECTOR(membership)[2] = -1;
  g_assert_false(knnwb_formats_write_labels_tsv(labels_path, &membership, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  output.membership = NULL;
  g_assert_false(knnwb_formats_write_graph(labels_path, KNNWB_OUTPUT_LABELS_TSV, &output, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  igraph_vector_int_destroy(&membership);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
}

static void test_gml_and_graphml(void)
{
  igraph_t graph;
  igraph_vector_t weights;
  small_graph(FALSE, &graph, &weights);
  const char *labels[] = {"A&B", "g\xC3\xA8ne", "say \"x\"", "<d>"};
  igraph_vector_int_t membership, focus;
  igraph_integer_t ids[] = {0, 0, 1, 1}, focus_ids[] = {3};
  igraph_vector_int_init_array(&membership, ids, 4);
  igraph_vector_int_init_array(&focus, focus_ids, 1);
  KnnwbDrawingOptions gml;
  knnwb_drawing_options_init(&gml);
  gml.focus = &focus;
  KnnwbGraphOutput output = {.graph = &graph,
                             .weights = &weights,
                             .labels = labels,
                             .membership = &membership,
                             .gml = &gml};
  g_autofree char *path = g_build_filename(formats_test_dir(), "g.gml", NULL);
  GError *error = NULL;
  g_assert_true(knnwb_formats_write_graph(path, KNNWB_OUTPUT_AUTO, &output, &error));
  g_assert_no_error(error);
  g_autofree char *text = read_text(path);
  g_assert_nonnull(strstr(text, "directed 0"));
  g_assert_nonnull(strstr(text, "label \"A&amp;B\""));
  g_assert_nonnull(strstr(text, "label \"g&#232;ne\""));
  g_assert_nonnull(strstr(text, "text \"say &quot;x&quot;\""));
  g_assert_nonnull(strstr(text, "    graphics\n    [\n      x "));
  g_assert_nonnull(strstr(text, "LabelGraphics"));
  g_assert_nonnull(strstr(text, "type \"hexagon\""));
  g_assert_nonnull(strstr(text, "clusterSize 2"));
  g_assert_null(strstr(text, "targetArrow"));
  for (const char *c = text; *c; c++)
    g_assert_cmpint((unsigned char)*c, <, 0x80);

  /* Directed graphs get arrows; layout none gives no coordinates. */
  igraph_t directed;
  igraph_vector_destroy(&weights);
  small_graph(TRUE, &directed, &weights);
  gml.layout = KNNWB_LAYOUT_NONE;
  output.graph = &directed;
  g_assert_true(knnwb_formats_write_gml(path, &output, &error));
  g_free(text);
  text = read_text(path);
  g_assert_nonnull(strstr(text, "targetArrow \"standard\""));
  g_assert_null(strstr(text, "      x "));

  /* GraphML is well-formed XML with the keys and the escaped label. */
  gml.layout = KNNWB_LAYOUT_FR;
  output.graph = &graph;
  g_autofree char *graphml = g_build_filename(formats_test_dir(), "g.graphml", NULL);
  g_assert_true(knnwb_formats_write_graph(graphml, KNNWB_OUTPUT_AUTO, &output, &error));
  g_assert_no_error(error);
  xmlDocPtr doc = xmlReadFile(graphml, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR);
  g_assert_nonnull(doc);
  xmlNodePtr root = xmlDocGetRootElement(doc);
  g_assert_cmpstr((const char *)root->name, ==, "graphml");
  int nodes = 0, edges = 0, keys = 0;
  gboolean found_label = FALSE;
  for (xmlNodePtr child = root->children; child; child = child->next) {
    if (child->type != XML_ELEMENT_NODE)
      continue;
    if (strcmp((const char *)child->name, "key") == 0)
      keys++;
    if (strcmp((const char *)child->name, "graph") != 0)
      continue;
    for (xmlNodePtr item = child->children; item; item = item->next) {
      if (item->type != XML_ELEMENT_NODE)
        continue;
      if (strcmp((const char *)item->name, "node") == 0) {
        nodes++;
        xmlChar *content = xmlNodeGetContent(item->children);
        if (strcmp((const char *)content, "say \"x\"") == 0)
          found_label = TRUE;
        xmlFree(content);
      } else if (strcmp((const char *)item->name, "edge") == 0) {
        edges++;
      }
    }
  }
  xmlFreeDoc(doc);
  g_assert_cmpint(nodes, ==, 4);
  g_assert_cmpint(edges, ==, 5);
  g_assert_cmpint(keys, ==, 7); /* label cluster x y focus distance weight */
  g_assert_true(found_label);

  /* Bad arguments. */
  VECTOR(focus)[0] = 9;
  g_assert_false(knnwb_formats_write_gml(path, &output, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);

  igraph_vector_int_destroy(&focus);
  igraph_vector_int_destroy(&membership);
  igraph_vector_destroy(&weights);
  igraph_destroy(&directed);
  igraph_destroy(&graph);
}

static void test_output_names(void)
{
  static const struct {
    const char *path;
    KnnwbOutputFormat format;
  } cases[] = {{"a.knn", KNNWB_OUTPUT_KNN},
               {"a.GML", KNNWB_OUTPUT_GML},
               {"a.graphml", KNNWB_OUTPUT_GRAPHML},
               {"a.labels.tsv", KNNWB_OUTPUT_LABELS_TSV},
               {"a.clusters.tsv", KNNWB_OUTPUT_LABELS_TSV},
               {"a.tsv", KNNWB_OUTPUT_NEIGHBORS_TSV}};
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    KnnwbOutputFormat format;
    g_assert_true(knnwb_formats_output_from_path(cases[i].path, &format, NULL));
    g_assert_cmpint(format, ==, cases[i].format);
  }
  KnnwbOutputFormat format;
  GError *error = NULL;
  g_assert_false(knnwb_formats_output_from_path("a.png", &format, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  for (int f = KNNWB_OUTPUT_AUTO; f <= KNNWB_OUTPUT_NEIGHBORS_TSV; f++) {
    g_assert_true(
        knnwb_formats_output_from_string(knnwb_formats_output_to_string(f), &format, NULL));
    g_assert_cmpint(format, ==, f);
  }
  g_assert_true(knnwb_formats_output_from_string("neighbours", &format, NULL));
  g_assert_cmpint(format, ==, KNNWB_OUTPUT_NEIGHBORS_TSV);
}

/* The reference the fast formatter must match byte for byte: the shortest of %.15g/%.16g/%.17g
 * that strtod reads back as the same double. */
static void reference_double(char *buffer, size_t size, double value)
{
  for (int precision = 15; precision <= 17; precision++) {
    g_snprintf(buffer, size, "%.*g", precision, value);
    if (precision == 17 || !isfinite(value) || g_ascii_strtod(buffer, NULL) == value)
      return;
  }
}

/* .knn weights of every magnitude (random bits, decimal-looking values, powers of two and ten,
 * halfway cases) come out as the reference writes them, and written from lists with 1 or 3 threads
 * and from the graph the bytes are the same; a raised cancel flag leaves no file. */
static void test_knn_numbers_and_threads(void)
{
  enum { N = 3001, K = 29 };
  g_autoptr(GRand) rand = g_rand_new_with_seed(11);
  KnnwbNeighbors nb = {.n_queries = N, .k = K};
  nb.indices = g_new(int64_t, N * K);
  nb.distances = g_new(double, N *K);
  nb.n_found = g_new(int32_t, N);
  for (size_t i = 0; i < N; i++) {
    nb.n_found[i] = i % 97 == 5 ? 0 : K;
    for (size_t r = 0; r < K; r++) {
      size_t slot = i * K + r;
      nb.indices[slot] = nb.n_found[i] ? (int64_t)((i + r + 1) % N) : -1;
      double value;
      switch (slot % 6) {
      case 0: {
        guint64 bits = ((guint64)g_rand_int(rand) << 32) | g_rand_int(rand);
        memcpy(&value, &bits, sizeof value);
        if (!isfinite(value))
          value = 1.0;
        break;
      }
      case 1:
        value = g_rand_int_range(rand, 0, 1000000) / 1000.0;
        break;
      case 2:
        value = ldexp(1.0, g_rand_int_range(rand, -1074, 1023));
        break;
      case 3:
        value = pow(10.0, g_rand_int_range(rand, -30, 30));
        break;
      case 4:
        value = 1.0 - g_rand_double(rand) * 1e-3;
        break;
      default:
        value = g_rand_double_range(rand, -2.0, 2.0);
      }
      nb.distances[slot] = nb.n_found[i] ? value : INFINITY;
    }
  }
  GError *error = NULL;
  g_autofree char *one = g_build_filename(formats_test_dir(), "one.knn", NULL);
  g_autofree char *three = g_build_filename(formats_test_dir(), "three.knn", NULL);
  g_autofree char *graph_path = g_build_filename(formats_test_dir(), "graph.knn", NULL);
  KnnwbWriteControl control = {.n_threads = 1};
  g_assert_true(knnwb_formats_write_lists(one, KNNWB_OUTPUT_AUTO, &nb, NULL, &control, &error));
  g_assert_no_error(error);
  control.n_threads = 3;
  g_assert_true(knnwb_formats_write_lists(three, KNNWB_OUTPUT_KNN, &nb, NULL, &control, &error));
  g_assert_no_error(error);
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_assert_true(knnwb_graph_from_neighbors(&nb, KNNWB_GRAPH_DIRECTED, &graph, &weights, &error));
  g_assert_true(knnwb_formats_write_knn(graph_path, &graph, &weights, &error));
  g_assert_no_error(error);
  g_autofree char *text_one = read_text(one);
  g_autofree char *text_three = read_text(three);
  g_autofree char *text_graph = read_text(graph_path);
  g_assert_cmpstr(text_one, ==, text_three);
  g_assert_cmpstr(text_one, ==, text_graph);
  /* Every weight as the reference formats it. */
  /* Walk the lines by hand: g_strsplit is quadratic under ASan's strstr interceptor. */
  const char *line = strchr(text_one, '\n') + 1;
  size_t e = 0;
  for (size_t i = 0; i < N; i++)
    for (size_t r = 0; r < (size_t)nb.n_found[i]; r++, e++) {
      const char *end = line;
      while (*end != '\n')
        end++;
      const char *weight = end;
      while (weight[-1] != ' ')
        weight--;
      char want[40];
      reference_double(want, sizeof want, nb.distances[i * K + r]);
      if ((size_t)(end - weight) != strlen(want) || strncmp(weight, want, strlen(want)) != 0)
        g_error("weight %.17g written as %.*s, reference %s", nb.distances[i * K + r],
                (int)(end - weight), weight, want);
      line = end + 1;
    }
  g_assert_cmpuint(e, ==, (size_t)igraph_ecount(&graph));

  /* Cancelled: CANCELLED, no file, the previous one untouched. */
  gint cancel = 1;
  control.cancel = &cancel;
  guint before = formats_test_count_entries(formats_test_dir());
  g_assert_false(knnwb_formats_write_lists(one, KNNWB_OUTPUT_KNN, &nb, NULL, &control, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
  g_clear_error(&error);
  g_assert_cmpuint(formats_test_count_entries(formats_test_dir()), ==, before);
  g_autofree char *after = read_text(one);
  g_assert_cmpstr(after, ==, text_one);
  igraph_destroy(&graph);
  igraph_vector_destroy(&weights);
  g_free(nb.indices);
  g_free(nb.distances);
  g_free(nb.n_found);
}

static char *read_bytes(const char *path, gsize *length)
{
  char *bytes = NULL;
  GError *error = NULL;
  g_file_get_contents(path, &bytes, length, &error);
  g_assert_no_error(error);
  return bytes;
}

/* Rows [first, last) of lists, as one rank holds them (first_row set). */
static KnnwbNeighbors lists_block(const KnnwbNeighbors *all, size_t first, size_t last)
{
  return (KnnwbNeighbors){.n_queries = last - first,
                          .k = all->k,
                          .indices = all->indices + first * all->k,
                          .distances = all->distances + first * all->k,
                          .n_found = all->n_found + first,
                          .first_row = first};
}

/* What distributed/ writes from every rank's block: the same bytes as the one-process writers,
 * for cuts with an empty block and a one-row block. */
static void test_lists_pieces(void)
{
  enum { N = 1001, K = 7 };
  KnnwbNeighbors nb = {.n_queries = N, .k = K};
  nb.indices = g_new(int64_t, N * K);
  nb.distances = g_new(double, N *K);
  nb.n_found = g_new(int32_t, N);
  g_autoptr(GPtrArray) labels = g_ptr_array_new_with_free_func(g_free);
  for (size_t i = 0; i < N; i++) {
    nb.n_found[i] = i % 89 == 3 ? 2 : K;
    for (size_t r = 0; r < K; r++) {
      gboolean found = r < (size_t)nb.n_found[i];
      nb.indices[i * K + r] = found ? (int64_t)((i * 31 + r * 7 + 1) % N) : -1;
      nb.distances[i * K + r] = found ? (double)r / 3.0 + (double)i * 1e-3 : INFINITY;
    }
    g_ptr_array_add(labels, i % 50 == 7 ? g_strdup("tab\there") : g_strdup_printf("r%zu", i));
  }
  g_ptr_array_add(labels, NULL);
  const char *const *names = (const char *const *)labels->pdata;
  size_t edges = 0;
  for (size_t i = 0; i < N; i++)
    edges += (size_t)nb.n_found[i];
  const size_t cuts[] = {0, 0, 1, 400, 401, N};
  const size_t n_blocks = G_N_ELEMENTS(cuts) - 1;
  GError *error = NULL;
  const char *dir = formats_test_dir();
  g_autofree char *mtx = g_build_filename(dir, "pieces.mtx", NULL);
  g_autofree char *npy = g_build_filename(dir, "pieces.npy", NULL);
  g_autofree char *npz = g_build_filename(dir, "pieces.npz", NULL);
  g_autofree char *knn = g_build_filename(dir, "pieces.knn", NULL);
  g_assert_true(knnwb_formats_write_lists(mtx, KNNWB_OUTPUT_MTX, &nb, names, NULL, &error));
  g_assert_true(knnwb_formats_write_lists(npy, KNNWB_OUTPUT_NPY, &nb, NULL, NULL, &error));
  g_assert_true(knnwb_formats_write_lists(npz, KNNWB_OUTPUT_NPZ, &nb, NULL, NULL, &error));
  g_assert_true(knnwb_formats_write_lists(knn, KNNWB_OUTPUT_KNN, &nb, NULL, NULL, &error));
  g_assert_no_error(error);

  /* Text: rank 0's header, then each block's lines. */
  for (int format = 0; format < 2; format++) {
    char *text = NULL;
    size_t size = 0;
    FILE *stream = open_memstream(&text, &size);
    if (format == 0)
      knnwb_formats_write_mtx_header(stream, FALSE, N, edges, TRUE);
    else
      fprintf(stream, "%d %zu\n", N, edges);
    for (size_t b = 0; b < n_blocks; b++) {
      KnnwbNeighbors block = lists_block(&nb, cuts[b], cuts[b + 1]);
      KnnwbWriteControl control = {.n_threads = (int)b % 3 + 1};
      g_assert_true(format == 0 ? knnwb_formats_write_mtx_lines(stream, &block, &control, &error)
                                : knnwb_formats_write_knn_lines(stream, &block, &control, &error));
      g_assert_no_error(error);
    }
    fclose(stream);
    gsize length = 0;
    g_autofree char *file = read_bytes(format == 0 ? mtx : knn, &length);
    g_assert_cmpuint(size, ==, length);
    g_assert_true(memcmp(text, file, length) == 0);
    free(text);
  }
  g_autofree char *labels_path = g_build_filename(dir, "labels-only.mtx", NULL);
  g_assert_true(knnwb_formats_write_mtx_labels(labels_path, N, names, &error));
  g_assert_no_error(error);
  g_autofree char *side_one = knnwb_formats_side_path(mtx, KNNWB_OUTPUT_MTX);
  g_autofree char *side_two = knnwb_formats_side_path(labels_path, KNNWB_OUTPUT_MTX);
  g_autofree char *rows_one = read_text(side_one);
  g_autofree char *rows_two = read_text(side_two);
  g_assert_cmpstr(rows_one, ==, rows_two);
  g_assert_nonnull(strstr(rows_one, "\ntab here\n"));

  /* .npy: the header, then the rows' bytes (rank r's at first_row x k x 8). */
  const size_t bytes = (size_t)N * K * 8;
  const void *data[2] = {nb.indices, nb.distances};
  g_autofree char *npy_side = knnwb_formats_side_path(npy, KNNWB_OUTPUT_NPY);
  for (int a = 0; a < 2; a++) {
    g_autoptr(GString) header = knnwb_formats_npy_header(a == 0 ? "i8" : "f8", N, K);
    g_assert_cmpuint(header->len % 64, ==, 0);
    gsize length = 0;
    g_autofree char *file = read_bytes(a == 0 ? npy : npy_side, &length);
    g_assert_cmpuint(length, ==, header->len + bytes);
    g_assert_true(memcmp(file, header->str, header->len) == 0);
    g_assert_true(memcmp(file + header->len, data[a], bytes) == 0);
  }

  /* .npz: each block's CRC, combined in order, gives the frame of the one-process file. */
  uint32_t data_crc[2] = {0, 0};
  for (int a = 0; a < 2; a++) {
    for (size_t b = 0; b < n_blocks; b++) {
      size_t block_bytes = (cuts[b + 1] - cuts[b]) * K * 8;
      uint32_t crc = knnwb_formats_crc32(0, (const char *)data[a] + cuts[b] * K * 8, block_bytes);
      data_crc[a] = knnwb_formats_crc32_combine(data_crc[a], crc, block_bytes);
    }
    g_assert_cmpuint(data_crc[a], ==, knnwb_formats_crc32(0, data[a], bytes));
  }
  GString *parts[3] = {NULL, NULL, NULL};
  g_assert_true(knnwb_formats_npz_lists_frame(npz, N, K, data_crc, parts, &error));
  g_assert_no_error(error);
  g_autoptr(GByteArray) assembled = g_byte_array_new();
  for (int p = 0; p < 3; p++) {
    g_byte_array_append(assembled, (const guint8 *)parts[p]->str, (guint)parts[p]->len);
    if (p < 2)
      g_byte_array_append(assembled, data[p], (guint)bytes);
    g_string_free(parts[p], TRUE);
  }
  gsize length = 0;
  g_autofree char *file = read_bytes(npz, &length);
  g_assert_cmpuint(assembled->len, ==, length);
  g_assert_true(memcmp(assembled->data, file, length) == 0);
  /* A wrong CRC must show (the frame carries it). */
  data_crc[1] ^= 1;
  g_assert_true(knnwb_formats_npz_lists_frame(npz, N, K, data_crc, parts, &error));
  g_assert_false(memcmp(parts[1]->str, file + parts[0]->len + bytes, parts[1]->len) == 0 &&
                 memcmp(parts[2]->str, file + length - parts[2]->len, parts[2]->len) == 0);
  for (int p = 0; p < 3; p++)
    g_string_free(parts[p], TRUE);
  /* Past 4 GiB (no ZIP64): refused, naming the file. */
  g_assert_false(knnwb_formats_npz_lists_frame(npz, (size_t)1 << 26, 8, data_crc, parts, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull(strstr(error->message, "pieces.npz"));
  g_clear_error(&error);
  g_free(nb.indices);
  g_free(nb.distances);
  g_free(nb.n_found);
}

/* The matrix writers' reference for a float: the shortest of %.6g to %.9g that strtof reads back
 * as the same float (what the TSV writer printed with printf before it formatted floats itself). */
static void reference_float(char *buffer, size_t size, float value)
{
  for (int precision = 6; precision <= 9; precision++) {
    g_snprintf(buffer, size, "%.*g", precision, (double)value);
    if (precision == 9 || !isfinite(value) || strtof(buffer, NULL) == value)
      return;
  }
}

static gboolean raise_cancel_at_first_progress = FALSE;
static gint matrix_cancel;
static void matrix_progress(uint64_t done, uint64_t total, void *data)
{
  uint64_t *calls = data;
  (*calls)++;
  g_assert_cmpuint(done, <=, total);
  if (raise_cancel_at_first_progress)
    g_atomic_int_set(&matrix_cancel, 1);
}

/* The matrix TSV: floats of every magnitude (random bits, decimal-looking values, powers of two
 * and ten, subnormals, halfway neighbours, zeros of both signs) exactly as the reference writes
 * them, an absent row as NA, the same bytes from 1 and 3 threads; a cancel flag raised while the
 * TSV or the NPY is written stops it with CANCELLED, no file and the previous one kept. Before,
 * the writer formatted on one thread with printf (15 MB/s) and could not be interrupted:
 * `knnwb metafeatures` kept a Ctrl-C waiting for the whole file (5.3 s for 120 MB). */
static void test_matrix_tsv(void)
{
  enum { ROWS = 2003, COLS = 37 };
  g_autoptr(GRand) rand = g_rand_new_with_seed(23);
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(ROWS, COLS, NULL);
  for (size_t c = 0; c < (size_t)ROWS * COLS; c++) {
    float value;
    switch (c % 8) {
    case 0: {
      guint32 bits = g_rand_int(rand);
      memcpy(&value, &bits, sizeof value);
      if (!isfinite(value))
        value = 1.5f;
      break;
    }
    case 1:
      value = (float)(g_rand_int_range(rand, -1000000, 1000000) / 1000.0);
      break;
    case 2:
      value = ldexpf(1.0f, g_rand_int_range(rand, -149, 128));
      break;
    case 3:
      value = (float)pow(10.0, g_rand_int_range(rand, -40, 39));
      break;
    case 4:
      value = nextafterf((float)g_rand_double_range(rand, -20, 20), INFINITY);
      break;
    case 5:
      value = c % 16 == 5 ? -0.0f : 0.0f;
      break;
    case 6:
      value = (float)g_rand_double_range(rand, 1e6, 3e7); /* counts: past 2^23 */
      break;
    default:
      value = (float)g_rand_double_range(rand, -1e-3, 1e-3);
    }
    m->values[c] = value;
  }
  knnwb_matrix_set_row_absent(m, 7);
  g_autofree char *one = g_build_filename(formats_test_dir(), "m1.tsv", NULL);
  g_autofree char *three = g_build_filename(formats_test_dir(), "m3.tsv", NULL);
  GError *error = NULL;
  uint64_t calls = 0;
  KnnwbWriteControl control = {
      .n_threads = 1, .progress = matrix_progress, .progress_data = &calls};
  g_assert_true(knnwb_formats_write_matrix_run(one, m, &control, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(calls, >, 0);
  control.n_threads = 3;
  g_assert_true(knnwb_formats_write_matrix_run(three, m, &control, &error));
  g_autofree char *text = read_text(one);
  g_autofree char *text_three = read_text(three);
  g_assert_cmpstr(text, ==, text_three);
  /* Walk the lines by hand (g_strsplit is quadratic under ASan's strstr interceptor). */
  const char *line = strchr(text, '\n') + 1;
  for (size_t i = 0; i < ROWS; i++) {
    const char *field = strchr(line, '\t') + 1;
    g_autofree char *number = g_strdup_printf("%zu", i + 1);
    g_assert_cmpint(strncmp(line, number, strlen(number)), ==, 0);
    for (size_t j = 0; j < COLS; j++) {
      const char *end = field;
      while (*end != '\t' && *end != '\n')
        end++;
      char want[40];
      if (i == 7)
        g_strlcpy(want, "NA", sizeof want);
      else
        reference_float(want, sizeof want, m->values[i * COLS + j]);
      if ((size_t)(end - field) != strlen(want) || strncmp(field, want, strlen(want)) != 0)
        g_error("row %zu column %zu: %.9g written as %.*s, reference %s", i, j,
                (double)m->values[i * COLS + j], (int)(end - field), field, want);
      field = end + 1;
    }
    line = field;
  }
  g_assert_cmpint(*line, ==, '\0');

  /* A cancel flag raised during the write (at its first progress report): CANCELLED, the previous
   * file kept, no temporary left; TSV and NPY. */
  g_autofree char *npy = g_build_filename(formats_test_dir(), "m.npy", NULL);
  g_assert_true(knnwb_formats_write_matrix_run(npy, m, NULL, &error));
  g_autofree char *npy_before = NULL;
  gsize npy_length = 0;
  g_assert_true(g_file_get_contents(npy, &npy_before, &npy_length, NULL));
  /* big enough for several chunks and NPY pieces */
  g_autoptr(KnnwbMatrix) big = knnwb_matrix_new(40000, 64, NULL);
  const char *targets[] = {one, npy};
  for (size_t t = 0; t < G_N_ELEMENTS(targets); t++) {
    guint entries = formats_test_count_entries(formats_test_dir());
    g_atomic_int_set(&matrix_cancel, 0);
    raise_cancel_at_first_progress = TRUE;
    control.cancel = &matrix_cancel;
    g_assert_false(knnwb_formats_write_matrix_run(targets[t], big, &control, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
    g_clear_error(&error);
    raise_cancel_at_first_progress = FALSE;
    g_assert_cmpuint(formats_test_count_entries(formats_test_dir()), ==, entries);
  }
  g_autofree char *after = read_text(one);
  g_assert_cmpstr(after, ==, text);
  g_autofree char *npy_after = NULL;
  gsize npy_after_length = 0;
  g_assert_true(g_file_get_contents(npy, &npy_after, &npy_after_length, NULL));
  g_assert_cmpmem(npy_after, npy_after_length, npy_before, npy_length);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_add_func("/formats/knn/round-trip", test_knn_round_trip);
  g_test_add_func("/formats/knn/malformed", test_knn_malformed);
  g_test_add_func("/formats/knn/numbers-and-threads", test_knn_numbers_and_threads);
  g_test_add_func("/formats/atomic", test_atomic);
  g_test_add_func("/formats/atomic/durable", test_atomic_durable);
  g_test_add_func("/formats/tables", test_tables);
  g_test_add_func("/formats/gml-graphml", test_gml_and_graphml);
  g_test_add_func("/formats/output-names", test_output_names);
  g_test_add_func("/formats/lists/pieces", test_lists_pieces);
  g_test_add_func("/formats/matrix/tsv", test_matrix_tsv);
  return g_test_run();
}
