/* `knnwb cluster`: every method on two planted groups (ARI 1, hand-checked contingency table),
 * usage errors, bad annotations leave nothing behind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "host_test_util.h"

/* Two groups of five points in the plane, far apart, no tied distances. */
static const char *const TWO_GROUPS = "name\tx\ty\n"
                                      "a1\t0\t0\n"
                                      "a2\t1\t0.1\n"
                                      "b1\t20\t20\n"
                                      "a3\t0.2\t1.1\n"
                                      "a4\t1.3\t1.25\n"
                                      "b2\t21.1\t20.2\n"
                                      "a5\t0.6\t0.45\n"
                                      "b3\t20.3\t21.4\n"
                                      "b4\t21.5\t21.7\n"
                                      "b5\t20.65\t20.9\n";

/* Classes by row name, in another order, one row unknown to the data and one NA. */
static const char *const ANNOTATION = "id,group,other\n"
                                      "b1,B,x\n"
                                      "a1,A,x\n"
                                      "a2,A,x\n"
                                      "a3,A,x\n"
                                      "a4,A,x\n"
                                      "a5,\"A\",x\n"
                                      "b2,B,x\n"
                                      "b3,B,x\n"
                                      "b4,NA,x\n"
                                      "b5,B,x\n"
                                      "zz,C,x\n";

static char *read_text(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_file_get_contents(path, &text, NULL, &error);
  g_assert_no_error(error);
  return text;
}

static double summary_value(const char *summary, const char *key)
{
  g_autofree char *needle = g_strdup_printf("\n%s\t", key);
  const char *at = strstr(summary, needle);
  g_assert_nonnull(at);
  return g_ascii_strtod(at + strlen(needle), NULL);
}

static void test_every_method(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *data = host_test_write(dir, "points.tsv", TWO_GROUPS);
  g_autofree char *table = host_test_write(dir, "classes.csv", ANNOTATION);
  g_autofree char *annotation = g_strdup_printf("%s:group", table);
  const char *methods[] = {"leiden",     "louvain", "walktrap",
                           "components", "mst-knn", "single-linkage"};
  for (guint m = 0; m < G_N_ELEMENTS(methods); m++) {
    g_autofree char *out = NULL, *err = NULL;
    int status;
    if (g_str_equal(methods[m], "mst-knn"))
      status = host_test_run(dir, &out, &err, "cluster", data, "--method", methods[m], "--metric",
                             "euclidean", "-a", annotation, "--report", "-o", "c.tsv",
                             "--hierarchy", "h.tsv", "--newick", "h.nwk", NULL);
    else if (g_str_equal(methods[m], "single-linkage"))
      status = host_test_run(dir, &out, &err, "cluster", data, "--method", methods[m], "--metric",
                             "euclidean", "--clusters", "2", "-a", annotation, "--report", "-o",
                             "c.tsv", "--newick", "t.nwk", "--linkage", "l.tsv", NULL);
    else
      status = host_test_run(dir, &out, &err, "cluster", data, "--method", methods[m], "--metric",
                             "euclidean", "-k", "3", "-a", annotation, "--report", "-o", "c.tsv",
                             "--gml", "c.gml", NULL);
    if (status != 0)
      g_printerr("%s: %s", methods[m], err);
    g_assert_cmpint(status, ==, 0);
    /* --report prints the summary that is also written beside the table. */
    g_autofree char *summary = read_text(dir, "c.summary.tsv");
    g_assert_cmpstr(out, ==, summary);
    g_assert_cmpfloat(summary_value(summary, "clusters"), ==, 2);
    g_assert_cmpfloat(summary_value(summary, "ari"), ==, 1);
    g_assert_cmpfloat(summary_value(summary, "nmi"), ==, 1);
    g_assert_cmpfloat(summary_value(summary, "annotated_points"), ==, 9);
    g_autofree char *labels = read_text(dir, "c.tsv");
    g_assert_true(g_str_has_prefix(labels, "row\tlabel\tcluster\tsize\n0\ta1\t0\t5\n"));
    g_assert_nonnull(strstr(labels, "\n2\tb1\t1\t5\n"));
    /* Classes in order of first appearance among the points: A (a1), then B (b1). b4 is NA. */
    g_autofree char *contingency = read_text(dir, "c.contingency.tsv");
    g_assert_cmpstr(contingency, ==, "cluster\tA\tB\n0\t5\t0\n1\t0\t4\n");
  }
  /* MST-kNN's split hierarchy: all 10 points (k = floor(ln 10) = 2, never connected) split into
   * the two groups; group A's 1-NN graph is a star around a5 (k = 1) and stays one cluster. */
  g_autofree char *hierarchy = read_text(dir, "h.tsv");
  g_assert_true(g_str_has_prefix(hierarchy, "node\tparent\tsize\tk\tcluster\n0\tNA\t10\t2\tNA\n"
                                            "1\t0\t5\t1\t0\n2\t0\t5\t"));
  g_autofree char *split = read_text(dir, "h.nwk");
  g_assert_true(g_str_has_prefix(split, "((a1,a2,a3,a4,a5)c0_k1,(b1,b2,b3,b4,b5)c1_k"));
  g_assert_true(g_str_has_suffix(split, ")n0_k2;\n"));
  /* The dendrogram of the last run: 9 merges, the last one joins everything at the gap. */
  g_autofree char *linkage = read_text(dir, "l.tsv");
  g_auto(GStrv) rows = g_strsplit(linkage, "\n", -1);
  g_assert_cmpuint(g_strv_length(rows), ==, 11);
  g_assert_cmpstr(rows[0], ==, "cluster_a\tcluster_b\tdistance\tsize");
  g_assert_nonnull(strstr(rows[9], "\t17\t")); /* the later group root is merge 7 */
  g_assert_true(g_str_has_suffix(rows[9], "\t10"));
  g_autofree char *newick = read_text(dir, "t.nwk");
  g_assert_true(g_str_has_suffix(newick, ";\n"));
  g_assert_nonnull(strstr(newick, "a1:"));
  host_test_rmtree(dir);
}

/* One row: one cluster with every method (the graph methods said "k = 10 but each row has only
 * 0 other rows ...; use k <= 0" and failed, while mst-knn and single-linkage gave one cluster). */
static void test_one_row(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *data = host_test_write(dir, "one.tsv", "name\tx\ty\tz\nr1\t1\t2\t3\n");
  const char *methods[] = {"leiden",     "louvain", "walktrap",
                           "components", "mst-knn", "single-linkage"};
  for (guint m = 0; m < G_N_ELEMENTS(methods); m++) {
    g_autofree char *out = NULL, *err = NULL;
    int status = g_str_equal(methods[m], "single-linkage")
                     ? host_test_run(dir, &out, &err, "cluster", data, "--method", methods[m],
                                     "--clusters", "1", "-q", "-o", "c.tsv", NULL)
                     : host_test_run(dir, &out, &err, "cluster", data, "--method", methods[m], "-q",
                                     "-o", "c.tsv", NULL);
    if (status != 0)
      g_printerr("%s: %s", methods[m], err);
    g_assert_cmpint(status, ==, 0);
    g_autofree char *labels = read_text(dir, "c.tsv");
    g_assert_cmpstr(labels, ==, "row\tlabel\tcluster\tsize\n0\tr1\t0\t1\n");
  }
  host_test_rmtree(dir);
}

static void test_usage_errors(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *data = host_test_write(dir, "points.tsv", TWO_GROUPS);
  struct {
    const char *args[6];
    const char *message;
  } cases[] = {
      {{"--method", "single-linkage", "--height", "1", "--clusters", "2"}, "not both"},
      {{"--method", "single-linkage", NULL}, "need a cut, --height H"},
      {{"--method", "leiden", "--newick", "t.nwk", NULL}, "--newick needs --method"},
      {{"--method", "leiden", "--hierarchy", "h.tsv", NULL}, "--hierarchy (the split table)"},
      {{"--method", "mst-knn", "--graph", "snn", NULL}, "--graph applies to"},
      {{"--method", "kmeans", NULL}, "unknown method 'kmeans'"},
      {{"--method", "leiden", "--graph", "snn", "--similarity", "exp"}, "own weights"},
      {{"--method", "leiden", "--annotation", "table-without-column:", NULL}, "TABLE:COLUMN"},
      {{"--method", "leiden", "--objective", "surprise", NULL}, "modularity or cpm"},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autofree char *err = NULL;
    const char *const *a = cases[c].args;
    int status = host_test_run(dir, NULL, &err, "cluster", data, "-o", "c.tsv", a[0], a[1], a[2],
                               a[3], a[4], a[5], NULL);
    g_assert_cmpint(status, ==, 2);
    if (!strstr(err, cases[c].message))
      g_printerr("case %u: %s", c, err);
    g_assert_nonnull(strstr(err, cases[c].message));
  }
  g_assert_cmpuint(host_test_count_files(dir), ==, 1);
  host_test_rmtree(dir);
}

/* A bad annotation fails the run with file:line, and no output (not even a temporary) remains;
 * an existing table is left as it was. */
static void test_bad_annotation(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *data = host_test_write(dir, "points.tsv", TWO_GROUPS);
  g_autofree char *table = host_test_write(dir, "classes.csv", "id,group\na1,A\na1,B\n");
  g_autofree char *previous = host_test_write(dir, "c.tsv", "previous\n");
  g_autofree char *spec = g_strdup_printf("%s:group", table);
  g_autofree char *err = NULL;
  int status = host_test_run(dir, NULL, &err, "cluster", data, "--method", "louvain", "--metric",
                             "euclidean", "-k", "3", "-o", "c.tsv", "-a", spec, NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "classes.csv:3: row name 'a1' appears twice"));
  g_clear_pointer(&err, g_free);
  g_autofree char *missing = g_strdup_printf("%s:colour", table);
  status = host_test_run(dir, NULL, &err, "cluster", data, "--method", "louvain", "--metric",
                         "euclidean", "-k", "3", "-o", "c.tsv", "-a", missing, NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "classes.csv:1: no annotation column 'colour'"));
  g_assert_cmpuint(host_test_count_files(dir), ==, 3);
  g_autofree char *kept = read_text(dir, "c.tsv");
  g_assert_cmpstr(kept, ==, "previous\n");
  host_test_rmtree(dir);
}

/* The targets are checked and their temporaries made before anything is read, as in every
 * command: a target that cannot be created (a name longer than the file system takes) is reported
 * instead of the input's own error; two spellings
 * of one file, and an output that is an input (the matrix, the annotation table), are refused;
 * nothing is written and the files stay as they were. */
static void test_targets_up_front(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *data = host_test_write(dir, "points.tsv", TWO_GROUPS);
  g_autofree char *table = host_test_write(dir, "classes.csv", ANNOTATION);
  g_autofree char *annotation = g_strdup_printf("%s:group", table);
  g_autofree char *previous = host_test_write(dir, "c.tsv", "previous\n");
  g_autofree char *long_name = g_strnfill(252, 'n'); /* 256 bytes with ".nwk" */
  g_autofree char *long_target = g_strdup_printf("%s.nwk", long_name);
  struct {
    const char *input;
    const char *args[4];
    const char *message;
  } cases[] = {
      {"no-such-input.tsv", {"--method", "mst-knn", "--newick", long_target}, "File name too long"},
      {"points.tsv", {"--method", "mst-knn", "--newick", "./c.tsv"}, "are the same file"},
      {"points.tsv",
       {"--method", "mst-knn", "--hierarchy", "sub/../c.summary.tsv"},
       "are the same file"},
      {"points.tsv", {"--method", "mst-knn", "--newick", "points.tsv"}, "is the input file"},
      {"points.tsv", {"--method", "leiden", "--gml", "classes.csv"}, "is the input file"},
  };
  g_autofree char *sub = g_build_filename(dir, "sub", NULL);
  g_mkdir(sub, 0755);
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autofree char *err = NULL;
    const char *const *a = cases[c].args;
    int status =
        host_test_run(dir, NULL, &err, "cluster", cases[c].input, "--metric", "euclidean", "-k",
                      "3", "-a", annotation, "-o", "c.tsv", a[0], a[1], a[2], a[3], NULL);
    g_test_message("case %u: %s", c, err);
    g_assert_cmpint(status, ==, 1);
    g_assert_nonnull(strstr(err, cases[c].message));
    g_assert_cmpuint(host_test_count_files(dir), ==, 4);
    g_autofree char *kept = read_text(dir, "c.tsv");
    g_assert_cmpstr(kept, ==, "previous\n");
    g_autofree char *points = read_text(dir, "points.tsv");
    g_assert_cmpstr(points, ==, TWO_GROUPS);
    g_autofree char *classes = read_text(dir, "classes.csv");
    g_assert_cmpstr(classes, ==, ANNOTATION);
  }
  host_test_rmtree(dir);
}

/* SNN graph and the Leiden CPM objective through the command. */
static void test_snn_and_cpm(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *data = host_test_write(dir, "points.tsv", TWO_GROUPS);
  g_autofree char *table = host_test_write(dir, "classes.csv", ANNOTATION);
  g_autofree char *annotation = g_strdup_printf("%s:2", table);
  const char *weights[] = {"rank", "number", "jaccard"};
  for (guint w = 0; w < G_N_ELEMENTS(weights); w++) {
    g_autofree char *out = NULL;
    int status =
        host_test_run(dir, &out, NULL, "cluster", data, "--method", "leiden", "--graph", "snn",
                      "--snn-weight", weights[w], "--metric", "euclidean", "-k", "3", "-a",
                      annotation, "--report", "-o", "c.tsv", "-q", "--gml", "s.gml", NULL);
    g_assert_cmpint(status, ==, 0);
    g_assert_cmpfloat(summary_value(out, "ari"), ==, 1);
    /* SNN edges are written with a distance >= 0 and a weight in (0, 1]. */
    g_autofree char *gml = read_text(dir, "s.gml");
    g_assert_null(strstr(gml, "distance -"));
    g_assert_nonnull(strstr(gml, "weight "));
  }
  g_autofree char *out = NULL;
  int status = host_test_run(dir, &out, NULL, "cluster", data, "--method", "leiden", "--objective",
                             "cpm", "--resolution", "0.05", "--metric", "euclidean", "-k", "3",
                             "-a", annotation, "--report", "-o", "c.tsv", "-q", NULL);
  g_assert_cmpint(status, ==, 0);
  g_assert_cmpfloat(summary_value(out, "ari"), ==, 1);
  host_test_rmtree(dir);
}

/* The same as pipeline steps: kNN graph -> SNN graph -> Leiden -> evaluate; mst-knn reusing the
 * kNN graph; single-linkage writing its dendrogram; mst-knn-distances from a TSV matrix. */
static const char *const PIPELINE =
    "<?xml version=\"1.0\"?>\n"
    "<pipeline name=\"clusters\" version=\"1\">\n"
    "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"points.tsv\"/></step>\n"
    "  <step id=\"knn\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>\n"
    "    <param name=\"k\" value=\"3\"/><param name=\"metric\" value=\"euclidean\"/>\n"
    "    <param name=\"graph\" value=\"directed\"/></step>\n"
    "  <step id=\"snn\" type=\"snn-graph\"><input name=\"knn\" step=\"knn\"/>\n"
    "    <param name=\"weighting\" value=\"jaccard\"/></step>\n"
    "  <step id=\"leiden\" type=\"community\"><input name=\"graph\" step=\"snn\"/></step>\n"
    "  <step id=\"eval\" type=\"evaluate\"><input name=\"clusters\" step=\"leiden\"/>\n"
    "    <param name=\"annotation\" value=\"classes.csv\"/><param name=\"column\" "
    "value=\"group\"/>\n"
    "    <param name=\"path\" value=\"leiden.summary.tsv\"/>\n"
    "    <param name=\"contingency\" value=\"leiden.contingency.tsv\"/></step>\n"
    "  <step id=\"mstknn\" type=\"mst-knn\"><input name=\"data\" step=\"load\"/>\n"
    "    <input name=\"knn\" step=\"knn\"/><param name=\"metric\" value=\"euclidean\"/></step>\n"
    "  <step id=\"eval2\" type=\"evaluate\"><input name=\"clusters\" step=\"mstknn\"/>\n"
    "    <param name=\"annotation\" value=\"classes.csv\"/><param name=\"column\" value=\"2\"/>\n"
    "    <param name=\"path\" value=\"mstknn.summary.tsv\"/></step>\n"
    "  <step id=\"mst\" type=\"mst\"><input name=\"data\" step=\"load\"/>\n"
    "    <param name=\"metric\" value=\"euclidean\"/></step>\n"
    "  <step id=\"cut\" type=\"single-linkage\"><input name=\"tree\" step=\"mst\"/>\n"
    "    <param name=\"clusters\" value=\"2\"/><param name=\"newick\" value=\"tree.nwk\"/>\n"
    "    <param name=\"linkage\" value=\"tree.npy\"/></step>\n"
    "  <step id=\"dist\" type=\"mst-knn-distances\"><param name=\"path\" value=\"d.tsv\"/></step>\n"
    "  <step id=\"labels\" type=\"write-labels\"><input name=\"clusters\" step=\"dist\"/>\n"
    "    <param name=\"path\" value=\"dist.labels.tsv\"/></step>\n"
    "</pipeline>\n";

static void test_pipeline_steps(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *data = host_test_write(dir, "points.tsv", TWO_GROUPS);
  g_autofree char *table = host_test_write(dir, "classes.csv", ANNOTATION);
  /* 0, 2, 7, 12, 14 as a labelled TSV distance matrix: the package's tie rule (see the library
   * test) gives {p0,p1},{p2,p3,p4}. */
  g_autofree char *distances = host_test_write(dir, "d.tsv",
                                               "\tp0\tp1\tp2\tp3\tp4\n"
                                               "p0\t0\t2\t7\t12\t14\n"
                                               "p1\t2\t0\t5\t10\t12\n"
                                               "p2\t7\t5\t0\t5\t7\n"
                                               "p3\t12\t10\t5\t0\t2\n"
                                               "p4\t14\t12\t7\t2\t0\n");
  g_autofree char *pipeline = host_test_write(dir, "p.xml", PIPELINE);
  g_autofree char *err = NULL;
  /* A .knn file from `knnwb knn` (directed, rank order) as MST-kNN's lists, through load-knn. */
  int status = host_test_run(dir, NULL, &err, "knn", "points.tsv", "-k", "3", "--metric",
                             "euclidean", "-o", "g.knn", "-q", NULL);
  g_assert_cmpint(status, ==, 0);
  g_autofree char *from_file = host_test_write(
      dir, "fromfile.xml",
      "<?xml version=\"1.0\"?>\n<pipeline name=\"fromfile\" version=\"1\">\n"
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" "
      "value=\"points.tsv\"/></step>\n"
      "  <step id=\"knn\" type=\"load-knn\"><input name=\"points\" step=\"load\"/>\n"
      "    <param name=\"path\" value=\"g.knn\"/></step>\n"
      "  <step id=\"mstknn\" type=\"mst-knn\"><input name=\"data\" step=\"load\"/>\n"
      "    <input name=\"knn\" step=\"knn\"/><param name=\"metric\" value=\"euclidean\"/>\n"
      "    <param name=\"hierarchy\" value=\"fromfile.splits.tsv\"/></step>\n"
      "  <step id=\"labels\" type=\"write-labels\"><input name=\"clusters\" step=\"mstknn\"/>\n"
      "    <param name=\"path\" value=\"fromfile.tsv\"/></step>\n"
      "</pipeline>\n");
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "run", "fromfile.xml", NULL);
  if (status != 0)
    g_printerr("%s", err);
  g_assert_cmpint(status, ==, 0);
  g_autofree char *from_file_labels = read_text(dir, "fromfile.tsv");
  g_assert_true(g_str_has_prefix(from_file_labels, "row\tlabel\tcluster\tsize\n0\ta1\t0\t5\n"));
  g_autofree char *splits = read_text(dir, "fromfile.splits.tsv");
  g_assert_true(g_str_has_prefix(splits, "node\tparent\tsize\tk\tcluster\n0\tNA\t10\t2\tNA\n"));
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "run", "p.xml", NULL);
  if (status != 0)
    g_printerr("%s", err);
  g_assert_cmpint(status, ==, 0);
  g_autofree char *summary = read_text(dir, "leiden.summary.tsv");
  g_assert_cmpfloat(summary_value(summary, "ari"), ==, 1);
  g_assert_cmpfloat(summary_value(summary, "clusters"), ==, 2);
  g_assert_cmpfloat(summary_value(summary, "modularity"), >, 0.4);
  g_autofree char *contingency = read_text(dir, "leiden.contingency.tsv");
  g_assert_cmpstr(contingency, ==, "cluster\tA\tB\n0\t5\t0\n1\t0\t4\n");
  g_autofree char *mstknn = read_text(dir, "mstknn.summary.tsv");
  g_assert_cmpfloat(summary_value(mstknn, "ari"), ==, 1);
  g_autofree char *newick = read_text(dir, "tree.nwk");
  g_assert_nonnull(strstr(newick, "b5:"));
  g_autofree char *labels = read_text(dir, "dist.labels.tsv");
  g_assert_cmpstr(labels, ==,
                  "row\tlabel\tcluster\tsize\n0\tp0\t0\t2\n1\tp1\t0\t2\n2\tp2\t1\t3\n"
                  "3\tp3\t1\t3\n4\tp4\t1\t3\n");
  /* single-linkage given both a height and a count is refused, and nothing is written. */
  g_autoptr(GString) both = g_string_new(PIPELINE);
  g_string_replace(both, "<param name=\"clusters\" value=\"2\"/>",
                   "<param name=\"clusters\" value=\"2\"/><param name=\"height\" value=\"1\"/>", 1);
  g_autofree char *both_path = host_test_write(dir, "both.xml", both->str);
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "run", "both.xml", "--output-dir", "out", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "give height or clusters, not both"));
  g_assert_cmpuint(host_test_count_files(out_dir), ==, 0);
  host_test_rmtree(dir);
}

/* A forest of two components cannot be cut into one cluster: the step says what it returned and
 * why. */
static void test_forest_cut_count(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *data = host_test_write(dir, "points.tsv", TWO_GROUPS);
  g_autofree char *pipeline = host_test_write(
      dir, "forest.xml",
      "<?xml version=\"1.0\"?>\n<pipeline name=\"forest\" version=\"1\">\n"
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" "
      "value=\"points.tsv\"/></step>\n"
      "  <step id=\"knn\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>\n"
      "    <param name=\"k\" value=\"2\"/><param name=\"metric\" value=\"euclidean\"/></step>\n"
      "  <step id=\"forest\" type=\"spanning-forest\"><input name=\"graph\" step=\"knn\"/></step>\n"
      "  <step id=\"cut\" type=\"single-linkage\"><input name=\"tree\" step=\"forest\"/>\n"
      "    <param name=\"clusters\" value=\"1\"/></step>\n"
      "  <step id=\"labels\" type=\"write-labels\"><input name=\"clusters\" step=\"cut\"/>\n"
      "    <param name=\"path\" value=\"cut.tsv\"/></step>\n"
      "</pipeline>\n");
  g_autofree char *err = NULL;
  int status = host_test_run(dir, NULL, &err, "run", "forest.xml", NULL);
  g_assert_cmpint(status, ==, 0);
  g_assert_nonnull(strstr(err, "asked for 1 cluster, returned 2: the tree is a forest"));
  g_autofree char *labels = read_text(dir, "cut.tsv");
  g_assert_nonnull(strstr(labels, "\n2\tb1\t1\t5\n"));
  host_test_rmtree(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/host/cluster/every-method", test_every_method);
  g_test_add_func("/host/cluster/one-row", test_one_row);
  g_test_add_func("/host/cluster/usage-errors", test_usage_errors);
  g_test_add_func("/host/cluster/bad-annotation", test_bad_annotation);
  g_test_add_func("/host/cluster/targets-up-front", test_targets_up_front);
  g_test_add_func("/host/cluster/snn-and-cpm", test_snn_and_cpm);
  g_test_add_func("/host/cluster/pipeline-steps", test_pipeline_steps);
  g_test_add_func("/host/cluster/forest-cut-count", test_forest_cut_count);
  return g_test_run();
}
