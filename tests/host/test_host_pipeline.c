/* Pipelines: every semantic error reported at its line, variables and --set, validate, dry runs,
 * the example pipelines run with their outputs checked, and failed runs leaving nothing behind;
 * pipelines built in code give a file's bytes and report as commands do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <knnwb/error.h>
#include "host_test_util.h"
#include "pipeline/pipeline_internal.h"
#include "runtime/runtime.h"
#include "steps/steps.h"

#define CIBM_SAMPLE KNNWB_SHARED_DATA_DIR "/cibm-sample.txt"
#define EXAMPLES KNNWB_SOURCE_DIR "/share/examples"

static KnnwbHostRegistry *test_registry;
static char *test_dir;

/* Writes lines (NULL-terminated; "DATA" and "OUT" are replaced by the sample's path and the test
 * directory) as pipeline.xml: line i of the array is line i + 1 of the file. */
static char *write_pipeline(const char *const *lines)
{
  g_autoptr(GString) text = g_string_new(NULL);
  for (const char *const *line = lines; *line; line++) {
    g_autofree char *a = g_strdup(*line);
    g_auto(GStrv) parts = g_strsplit(a, "DATA", -1);
    g_autofree char *b = g_strjoinv(CIBM_SAMPLE, parts);
    g_auto(GStrv) parts2 = g_strsplit(b, "OUT", -1);
    g_autofree char *c = g_strjoinv(test_dir, parts2);
    g_string_append_printf(text, "%s\n", c);
  }
  return host_test_write(test_dir, "pipeline.xml", text->str);
}

/* Loads lines and expects an error that contains "pipeline.xml:LINE: fragment". */
static void expect_error_at(const char *const *lines, GHashTable *overrides, int line,
                            const char *fragment)
{
  g_autofree char *path = write_pipeline(lines);
  KnnwbPipelineOptions options = {.overrides = overrides, .output_dir = test_dir};
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbPipeline) pipeline = knnwb_pipeline_load(path, test_registry, &options, &error);
  g_assert_null(pipeline);
  g_assert_nonnull(error);
  g_autofree char *expected =
      line > 0 ? g_strdup_printf("%s:%d: ", path, line) : g_strdup_printf("%s: ", path);
  g_test_message("expecting '%s...%s' in:\n%s", expected, fragment, error->message);
  gboolean found = FALSE;
  g_auto(GStrv) messages = g_strsplit(error->message, "\n", -1);
  for (char **m = messages; *m && !found; m++)
    found = g_str_has_prefix(*m, expected) && strstr(*m, fragment) != NULL;
  g_assert_true(found);
}

/* A valid pipeline; each test below breaks one line of a copy of it. */
static const char *const valid[] = {
    /* 1 */ "<pipeline name=\"t\">",
    /* 2 */ "  <variable name=\"k\" value=\"3\"/>",
    /* 3 */ "  <step id=\"load\" type=\"load-matrix\">",
    /* 4 */ "    <param name=\"path\" value=\"DATA\"/>",
    /* 5 */ "  </step>",
    /* 6 */ "  <step id=\"graph\" type=\"knn-graph\">",
    /* 7 */ "    <input name=\"data\" step=\"load\"/>",
    /* 8 */ "    <param name=\"k\" value=\"${k}\"/>",
    /* 9 */ "    <param name=\"metric\" value=\"pearson\"/>",
    /* 10 */ "  </step>",
    /* 11 */ "  <step id=\"write\" type=\"write-graph\">",
    /* 12 */ "    <input name=\"graph\" step=\"graph\"/>",
    /* 13 */ "    <param name=\"path\" value=\"OUT/g.knn\"/>",
    /* 14 */ "  </step>",
    /* 15 */ "</pipeline>",
    NULL};

/* valid with line (1-based) replaced; text NULL deletes the line. */
static void expect_error_with(int replaced, const char *text, int line, const char *fragment)
{
  const char *lines[G_N_ELEMENTS(valid)];
  guint n = 0;
  for (guint i = 0; valid[i]; i++)
    if ((int)i + 1 != replaced)
      lines[n++] = valid[i];
    else if (text != NULL)
      lines[n++] = text;
  lines[n] = NULL;
  expect_error_at(lines, NULL, line, fragment);
}

static void test_valid_and_plan(void)
{
  g_autofree char *path = write_pipeline(valid);
  KnnwbPipelineOptions options = {.output_dir = test_dir};
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbPipeline) pipeline = knnwb_pipeline_load(path, test_registry, &options, &error);
  g_assert_no_error(error);
  char *plan = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&plan, &size);
  knnwb_pipeline_print_plan(pipeline, out);
  fclose(out);
  g_test_message("%s", plan);
  g_assert_nonnull(strstr(plan, "1. load (load-matrix"));
  g_assert_nonnull(strstr(plan, "2. graph (knn-graph, plugin knn)"));
  g_assert_nonnull(strstr(plan, "input data <- load (matrix)"));
  g_assert_nonnull(strstr(plan, "k = 3\n"));
  g_assert_nonnull(strstr(plan, "metric = pearson\n"));
  g_assert_nonnull(strstr(plan, "graph = directed (default)"));
  g_assert_nonnull(strstr(plan, "/g.knn (written)"));
  /* load and graph run split under mpirun, the writer on rank 0. */
  g_assert_nonnull(strstr(plan, "1. load (load-matrix, plugin builtin) line 3\n"
                                "     under mpirun: every rank, rows split\n"));
  g_assert_nonnull(strstr(plan, "line 11\n     under mpirun: rank 0 alone\n"));
  free(plan);
}

static void test_unknown_step_type(void)
{
  expect_error_with(6, "  <step id=\"graph\" type=\"knn-grpah\">", 6,
                    "unknown step type 'knn-grpah'");
}

static void test_unknown_parameter(void)
{
  expect_error_with(9, "    <param name=\"metrik\" value=\"pearson\"/>", 9,
                    "unknown parameter 'metrik' for step type 'knn-graph'");
}

static void test_missing_parameter(void)
{
  expect_error_with(8, NULL, 6, "missing required parameter 'k'");
  expect_error_with(4, NULL, 3, "missing required parameter 'path'");
}

static void test_duplicate_parameter(void)
{
  expect_error_with(9, "    <param name=\"k\" value=\"4\"/>", 9,
                    "parameter 'k' is given twice (first at line 8)");
}

static void test_wrong_type_or_range(void)
{
  expect_error_with(8, "    <param name=\"k\" value=\"three\"/>", 8, "'three' is not an integer");
  expect_error_with(8, "    <param name=\"k\" value=\"0\"/>", 8, "0 is out of range");
  expect_error_with(9, "    <param name=\"metric\" value=\"chebyshev\"/>", 9,
                    "'chebyshev' is not one of pearson,abs-pearson");
  expect_error_with(9, "    <param name=\"memory\" value=\"12 parsecs\"/>", 9, "not a size");
  expect_error_with(9, "    <param name=\"drop-degenerate\" value=\"maybe\"/>", 9, "not a boolean");
}

static void test_dangling_reference(void)
{
  expect_error_with(7, "    <input name=\"data\" step=\"lod\"/>", 7,
                    "refers to step 'lod', which does not exist");
  expect_error_with(7, "    <input name=\"points\" step=\"load\"/>", 7,
                    "step type 'knn-graph' has no input 'points'");
  expect_error_with(7, NULL, 6, "missing input 'data'");
}

static void test_wrong_kind(void)
{
  expect_error_with(12, "    <input name=\"graph\" step=\"load\"/>", 12,
                    "input 'graph' needs a graph, but step 'load' (load-matrix) produces a matrix");
  expect_error_with(7, "    <input name=\"data\" step=\"write\"/>", 7,
                    "produces nothing (it only writes files)");
}

static void test_cycle(void)
{
  const char *const lines[] = {
      "<pipeline>",
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"DATA\"/></step>",
      "  <step id=\"a\" type=\"test-scale\">",
      "    <input name=\"data\" step=\"c\"/>",
      "  </step>",
      "  <step id=\"b\" type=\"test-scale\"><input name=\"data\" step=\"a\"/></step>",
      "  <step id=\"c\" type=\"test-scale\"><input name=\"data\" step=\"b\"/></step>",
      "</pipeline>",
      NULL};
  expect_error_at(lines, NULL, 3,
                  "step 'a' depends on itself through a cycle of inputs: 'a' <- "
                  "'c' <- 'b' <- 'a'");
  const char *const self[] = {"<pipeline>",
                              "  <step id=\"me\" type=\"test-scale\">",
                              "    <input name=\"data\" step=\"me\"/>",
                              "  </step>",
                              "</pipeline>",
                              NULL};
  expect_error_at(self, NULL, 2, "'me' <- 'me'");
}

static void test_output_directory(void)
{
  expect_error_with(13, "    <param name=\"path\" value=\"OUT/no/such/dir/g.knn\"/>", 13,
                    "output directory '");
  expect_error_with(13, "    <param name=\"path\" value=\"/proc/knnwb-test.knn\"/>", 13,
                    "output directory '/proc' cannot be written");
  expect_error_with(13, "    <param name=\"path\" value=\"OUT\"/>", 13, "is a directory");
  expect_error_with(4, "    <param name=\"path\" value=\"no-such-input.txt\"/>", 4, "cannot read");
}

static void test_duplicate_ids_and_outputs(void)
{
  const char *const lines[] = {
      "<pipeline>",
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"DATA\"/></step>",
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"DATA\"/></step>",
      "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>"
      "<param name=\"k\" value=\"2\"/></step>",
      "  <step id=\"w1\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/>",
      "    <param name=\"path\" value=\"OUT/same.knn\"/></step>",
      "  <step id=\"w2\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/>",
      "    <param name=\"path\" value=\"OUT/same.knn\"/></step>",
      "</pipeline>",
      NULL};
  expect_error_at(lines, NULL, 3, "step id 'load' is already used at line 2");
  expect_error_at(lines, NULL, 8, "is also written by step 'w1'");
}

static void test_variables(void)
{
  expect_error_with(8, "    <param name=\"k\" value=\"${kay}\"/>", 8,
                    "undefined variable '${kay}'");
  expect_error_with(8, "    <param name=\"k\" value=\"${k\"/>", 8, "unterminated variable");
  expect_error_with(1, "<pipeline><variable name=\"k\" value=\"1\"/>", 2,
                    "variable 'k' is defined twice");

  /* --set replaces the value everywhere it is used, and is checked like the value itself. */
  g_autoptr(GHashTable) overrides = g_hash_table_new(g_str_hash, g_str_equal);
  g_hash_table_insert(overrides, "k", "5");
  g_autofree char *path = write_pipeline(valid);
  KnnwbPipelineOptions options = {.overrides = overrides, .output_dir = test_dir};
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbPipeline) pipeline = knnwb_pipeline_load(path, test_registry, &options, &error);
  g_assert_no_error(error);
  char *plan = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&plan, &size);
  knnwb_pipeline_print_plan(pipeline, out);
  fclose(out);
  g_assert_nonnull(strstr(plan, "${k} = 5 (--set)"));
  g_assert_nonnull(strstr(plan, "k = 5\n"));
  free(plan);

  g_hash_table_insert(overrides, "k", "-2");
  expect_error_at(valid, overrides, 8, "-2 is out of range");
  g_hash_table_remove_all(overrides);
  g_hash_table_insert(overrides, "kk", "2");
  expect_error_at(valid, overrides, 0, "--set kk: the pipeline defines no variable 'kk'");
}

/* A relative input that is missing beside the pipeline but present in the current directory (as
 * `--set input=mine.tsv` typed in the data's directory): the error says where relative paths are
 * read from and how to name that file. Before, only "cannot read '<pipeline dir>/mine.tsv'". */
static void test_relative_input_hint(void)
{
  g_autofree char *here = g_get_current_dir();
  g_autofree char *elsewhere = g_build_filename(test_dir, "cwd", NULL);
  g_assert_cmpint(g_mkdir_with_parents(elsewhere, 0755), ==, 0);
  g_assert_cmpint(chdir(elsewhere), ==, 0);
  g_autofree char *mine = host_test_write(elsewhere, "mine.tsv", "id\ta\tb\nr1\t1\t2\n");
  const char *lines[G_N_ELEMENTS(valid)];
  memcpy(lines, valid, sizeof valid);
  lines[3] = "    <param name=\"path\" value=\"mine.tsv\"/>";
  expect_error_at(lines, NULL, 4,
                  "relative input paths are read from the pipeline file's directory; "
                  "for 'mine.tsv' in the current directory give its absolute path");
  /* A file that is nowhere: the plain message. */
  lines[3] = "    <param name=\"path\" value=\"nowhere.tsv\"/>";
  expect_error_at(lines, NULL, 4, "nowhere.tsv': No such file or directory");
  g_assert_cmpint(chdir(here), ==, 0);
}

static void test_schema_and_xml(void)
{
  expect_error_with(2, "  <variabel name=\"k\" value=\"3\"/>", 2, "variabel");
  expect_error_with(9, "    <param name=\"metric\" valeur=\"pearson\"/>", 9, "valeur");
  expect_error_with(11, "  <step id=\"write\">", 11, "'type' is required");
  expect_error_with(11, "  <step id=\"3write\" type=\"write-graph\">", 11, "3write");
  expect_error_with(14, "  </stap>", 14, "mismatch");
  const char *const wrong_root[] = {"<?xml version=\"1.0\"?>", "<workflow>",
                                    "  <step id=\"a\" type=\"b\"/>", "</workflow>", NULL};
  expect_error_at(wrong_root, NULL, 2, "the root element must be <pipeline>, not <workflow>");
  /* Line numbers past 65535 are right (XML_PARSE_BIG_LINES). */
  GPtrArray *lines = g_ptr_array_new();
  g_ptr_array_add(lines, "<pipeline>");
  for (int i = 0; i < 70000; i++)
    g_ptr_array_add(lines, "<!-- -->");
  g_ptr_array_add(lines, "  <step id=\"x\" type=\"no-such-type\"/>");
  g_ptr_array_add(lines, "</pipeline>");
  g_ptr_array_add(lines, NULL);
  expect_error_at((const char *const *)lines->pdata, NULL, 70002, "unknown step type");
  g_ptr_array_free(lines, TRUE);
}

/* ---------------------------------------------------------------------------------------------- */
/* Running through the program. */

static char *read_text(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_file_get_contents(path, &text, NULL, &error);
  g_assert_no_error(error);
  return text;
}

static void test_example_seed_workflow(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint(host_test_run(NULL, &out, &err, "run", EXAMPLES "/seed-workflow.xml",
                                "--output-dir", dir, "--report", NULL),
                  ==, 0);
  g_test_message("%s%s", out, err);
  g_assert_nonnull(strstr(out, "graph"));
  g_assert_nonnull(strstr(out, "knn-graph"));
  g_assert_nonnull(strstr(out, "directed graph, 241 vertices, 4820 edges"));
  g_assert_nonnull(strstr(out, "total"));
  g_assert_cmpuint(host_test_count_files(dir), ==, 2);
  g_autofree char *knn = read_text(dir, "seed-workflow.knn");
  g_auto(GStrv) lines = g_strsplit(knn, "\n", -1);
  g_assert_cmpstr(lines[0], ==, "241 4820");
  g_assert_cmpuint(g_strv_length(lines), ==, 4822); /* header, 4820 edges, empty tail */
  /* 20 edges per source, in rank order (non-decreasing distance), from sources 0, 1, ... */
  for (int e = 0; e < 4820; e++) {
    int source, target;
    double weight, previous = -1;
    g_assert_cmpint(sscanf(lines[1 + e], "%d %d %lf", &source, &target, &weight), ==, 3);
    g_assert_cmpint(source, ==, e / 20);
    g_assert_cmpint(target, !=, source);
    if (e % 20 > 0)
      g_assert_cmpint(sscanf(lines[e], "%*d %*d %lf", &previous), ==, 1);
    g_assert_cmpfloat(weight, >=, previous);
  }
  g_autofree char *gml = read_text(dir, "seed-workflow.gml");
  g_assert_nonnull(strstr(gml, "graphics"));
  g_assert_nonnull(strstr(gml, "LabelGraphics"));
  g_assert_nonnull(strstr(gml, "\"YearsToRelapse\""));

  /* --set k=7 changes the graph. */
  g_clear_pointer(&out, g_free);
  g_assert_cmpint(host_test_run(NULL, &out, NULL, "run", EXAMPLES "/seed-workflow.xml",
                                "--output-dir", dir, "--set", "k=7", "--set", "out=k7", "-q", NULL),
                  ==, 0);
  g_autofree char *knn7 = read_text(dir, "k7.knn");
  g_assert_true(g_str_has_prefix(knn7, "241 1687\n"));
  host_test_rmtree(dir);
}

static void test_example_mst_knn(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *err = NULL;
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "run", EXAMPLES "/mst-knn-clusters.xml",
                                "--output-dir", dir, "-q", NULL),
                  ==, 0);
  g_autofree char *labels = read_text(dir, "mst-knn-clusters.labels.tsv");
  g_auto(GStrv) lines = g_strsplit(labels, "\n", -1);
  g_assert_cmpstr(lines[0], ==, "row\tlabel\tcluster\tsize");
  g_assert_cmpuint(g_strv_length(lines), ==, 243);
  /* Every cluster's stated size is its number of rows; probes of one module mostly agree. */
  g_autoptr(GHashTable) counts = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 1; i < 242; i++) {
    g_auto(GStrv) fields = g_strsplit(lines[i], "\t", -1);
    g_assert_cmpuint(g_strv_length(fields), ==, 4);
    g_assert_cmpint(atoi(fields[0]), ==, (int)i - 1);
    g_hash_table_insert(
        counts, g_strdup(fields[2]),
        GINT_TO_POINTER(GPOINTER_TO_INT(g_hash_table_lookup(counts, fields[2])) + 1));
  }
  for (guint i = 1; i < 242; i++) {
    g_auto(GStrv) fields = g_strsplit(lines[i], "\t", -1);
    g_assert_cmpint(GPOINTER_TO_INT(g_hash_table_lookup(counts, fields[2])), ==, atoi(fields[3]));
  }
  g_assert_cmpuint(g_hash_table_size(counts), >, 1);
  g_autofree char *gml = read_text(dir, "mst-knn-clusters.gml");
  g_assert_nonnull(strstr(gml, "cluster"));
  host_test_rmtree(dir);
}

static void test_example_dslanguages(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_assert_cmpint(host_test_run(NULL, NULL, NULL, "run", EXAMPLES "/dslanguages-mst-knn.xml",
                                "--output-dir", dir, "-q", NULL),
                  ==, 0);
  g_autofree char *labels = read_text(dir, "dslanguages.labels.tsv");
  g_auto(GStrv) lines = g_strsplit(labels, "\n", -1);
  g_assert_cmpuint(g_strv_length(lines), ==, 86);
  int sizes[84] = {0};
  int n_clusters = 0;
  for (guint i = 1; i < 85; i++) {
    g_auto(GStrv) fields = g_strsplit(lines[i], "\t", -1);
    int cluster = atoi(fields[2]);
    g_assert_cmpint(cluster, <, 84);
    sizes[cluster]++;
    n_clusters = MAX(n_clusters, cluster + 1);
  }
  /* The R package's partition: 17 clusters of these sizes. */
  int expected[] = {13, 11, 10, 8, 5, 5, 5, 5, 3, 3, 3, 3, 2, 2, 2, 2, 2};
  g_assert_cmpint(n_clusters, ==, 17);
  for (int i = 0; i < 17; i++)
    for (int j = i + 1; j < 17; j++)
      if (sizes[j] > sizes[i]) {
        int t = sizes[i];
        sizes[i] = sizes[j];
        sizes[j] = t;
      }
  for (int i = 0; i < 17; i++)
    g_assert_cmpint(sizes[i], ==, expected[i]);
  host_test_rmtree(dir);
}

static void test_validate_and_dry_run(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint(host_test_run(NULL, &out, NULL, "validate", EXAMPLES "/seed-workflow.xml", NULL),
                  ==, 0);
  g_assert_nonnull(strstr(out, "valid"));
  g_clear_pointer(&out, g_free);
  g_assert_cmpint(host_test_run(NULL, &out, NULL, "run", "--dry-run", EXAMPLES "/seed-workflow.xml",
                                "--output-dir", dir, "--set", "k=9", NULL),
                  ==, 0);
  g_assert_nonnull(strstr(out, "2. graph (knn-graph"));
  g_assert_nonnull(strstr(out, "k = 9"));
  g_assert_cmpuint(host_test_count_files(dir), ==, 0); /* a dry run writes nothing */

  /* An invalid pipeline: exit 1, every problem as file:line: message on stderr. */
  const char *const lines[] = {
      "<pipeline>", "  <step id=\"load\" type=\"load-matrix\"/>",
      "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"nowhere\"/></step>",
      "</pipeline>", NULL};
  g_autofree char *path = write_pipeline(lines);
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "validate", path, NULL), ==, 1);
  g_autofree char *at2 =
      g_strdup_printf("%s:2: step 'load': missing required parameter 'path'", path);
  g_autofree char *at3 = g_strdup_printf("%s:3: step 'g': missing required parameter 'k'", path);
  g_autofree char *at3b = g_strdup_printf("%s:3: step 'g': input 'data' refers to step "
                                          "'nowhere'",
                                          path);
  g_assert_nonnull(strstr(err, at2));
  g_assert_nonnull(strstr(err, at3));
  g_assert_nonnull(strstr(err, at3b));
  g_clear_pointer(&err, g_free);
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "run", path, "--set", "x", NULL), ==, 2);
  g_assert_nonnull(strstr(err, "expected NAME=VALUE"));
  host_test_rmtree(dir);
}

/* A step that fails at run time: the output an earlier step wrote is not left behind, nor any
 * temporary, and the message names the failing step's line. */
static void test_failed_run_leaves_nothing(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  const char *const lines[] = {
      "<pipeline>",
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"DATA\"/></step>",
      "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>",
      "    <param name=\"k\" value=\"3\"/></step>",
      "  <step id=\"w\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/>",
      "    <param name=\"path\" value=\"first.knn\"/></step>",
      "  <step id=\"too-many\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>",
      "    <param name=\"k\" value=\"50\"/></step>",
      "  <step id=\"w2\" type=\"write-graph\"><input name=\"graph\" step=\"too-many\"/>",
      "    <param name=\"path\" value=\"second.knn\"/></step>",
      "</pipeline>",
      NULL};
  g_autofree char *path = write_pipeline(lines);
  g_autofree char *err = NULL, *out = NULL;
  g_assert_cmpint(
      host_test_run(NULL, &out, &err, "run", path, "--output-dir", out_dir, "-q", "--report", NULL),
      ==, 1);
  g_test_message("%s", err);
  g_autofree char *expected = g_strdup_printf("%s:7: step 'too-many' (knn-graph) failed:", path);
  g_assert_nonnull(strstr(err, expected));
  g_assert_nonnull(strstr(err, "k <= 9"));
  g_assert_cmpuint(host_test_count_files(out_dir), ==, 0);
  /* The report still shows what ran. */
  g_assert_nonnull(strstr(out, "files written"));
  g_assert_nonnull(strstr(out, "failed"));
  host_test_rmtree(dir);
}

/* A focus label of write-graph that names no row (a typo) stops the run as soon as the rows are
 * read, before the kNN step (hours at scale): the focus parameter's line, exit status 1, only the
 * load step in the report, nothing written and the previous output kept. Through the graph input
 * and through a clustering's graph; a correct focus still runs. */
static void test_focus_checked_early(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  g_autofree char *previous = g_build_filename(out_dir, "g.gml", NULL);
  g_assert_true(g_file_set_contents(previous, "previous\n", -1, NULL));
  const char *const via[] = {"graph\" step=\"g", "clusters\" step=\"c"};
  const char *const focus[] = {"F_3, F_12", "F_3,F_7", "F_3, F_12"};
  for (int t = 0; t < 3; t++) {
    g_autofree char *connect = g_strdup_printf("  <step id=\"w\" type=\"write-graph\"><input "
                                               "name=\"%s\"/>",
                                               via[t == 2]);
    g_autofree char *param = g_strdup_printf("    <param name=\"focus\" value=\"%s\"/>", focus[t]);
    const char *const lines[] = {
        "<pipeline>",
        "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"DATA\"/></step>",
        "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>",
        "    <param name=\"k\" value=\"3\"/></step>",
        "  <step id=\"c\" type=\"community\"><input name=\"graph\" step=\"g\"/></step>",
        connect,
        "    <param name=\"path\" value=\"g.gml\"/>",
        param,
        "  </step>",
        "</pipeline>",
        NULL};
    g_autofree char *path = write_pipeline(lines);
    g_autofree char *err = NULL, *out = NULL;
    int status = host_test_run(NULL, &out, &err, "run", path, "--output-dir", out_dir, "-q",
                               "--report", NULL);
    g_test_message("focus '%s' via %s: status %d\n%s%s", focus[t], via[t == 2], status, out, err);
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(previous, &text, NULL, NULL));
    if (t == 1) {
      g_assert_cmpint(status, ==, 0);
      g_assert_nonnull(strstr(text, "graph"));
      g_assert_true(g_file_set_contents(previous, "previous\n", -1, NULL));
      continue;
    }
    g_assert_cmpint(status, ==, 1);
    g_autofree char *expected = g_strdup_printf(
        "%s:8: step 'w' (write-graph): focus: no vertex is labelled 'F_12' (the rows of step "
        "'load' (load-matrix) have no such label",
        path);
    g_assert_nonnull(strstr(err, expected));
    /* Only the load step ran. */
    g_assert_nonnull(strstr(out, "load-matrix"));
    g_assert_null(strstr(out, "knn-graph"));
    g_assert_cmpstr(text, ==, "previous\n");
    g_assert_cmpuint(host_test_count_files(out_dir), ==, 1);
  }
  host_test_rmtree(dir);
}

/* The final commit fails half-way (the third target is a non-empty directory): the first target,
 * replaced already, gets its old contents back, the second (new) is removed, no temporary or
 * backup is left, and the directory is untouched. */
static void test_commit_rolls_back(void)
{
  g_autofree char *dir = host_test_tmpdir();
  const char *names[] = {"first.knn", "second.gml", "third.knn"};
  g_autoptr(GPtrArray) outputs = g_ptr_array_new_with_free_func(g_free);
  KnnwbPipelineOutput items[3] = {{0}}; /* no placeholder: the test writes the temporaries */
  for (int i = 0; i < 3; i++) {
    items[i].final = g_build_filename(dir, names[i], NULL);
    items[i].temporary = g_strconcat(items[i].final, ".tmp", NULL);
    g_assert_true(g_file_set_contents(items[i].temporary, "NEW\n", -1, NULL));
    g_ptr_array_add(outputs, g_memdup2(&items[i], sizeof items[i]));
  }
  g_assert_true(g_file_set_contents(items[0].final, "OLD\n", -1, NULL));
  g_mkdir(items[2].final, 0755);
  g_autofree char *inside = g_build_filename(items[2].final, "keep", NULL);
  g_assert_true(g_file_set_contents(inside, "x", -1, NULL));

  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_host_outputs_commit(outputs, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_IO);
  g_assert_nonnull(strstr(error->message, "restored"));
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(items[0].final, &text, NULL, NULL));
  g_assert_cmpstr(text, ==, "OLD\n");
  g_assert_false(g_file_test(items[1].final, G_FILE_TEST_EXISTS));
  g_assert_true(g_file_test(inside, G_FILE_TEST_EXISTS));
  g_assert_cmpuint(host_test_count_files(dir), ==, 2); /* first.knn and the directory */

  /* And the successful case replaces every target and leaves no backup. */
  g_assert_true(g_file_set_contents(items[0].temporary, "NEW\n", -1, NULL));
  g_assert_true(g_file_set_contents(items[1].temporary, "NEW\n", -1, NULL));
  g_ptr_array_set_size(outputs, 2);
  g_assert_true(knnwb_host_outputs_commit(outputs, NULL, &error));
  g_clear_pointer(&text, g_free);
  g_assert_true(g_file_get_contents(items[0].final, &text, NULL, NULL));
  g_assert_cmpstr(text, ==, "NEW\n");
  g_assert_cmpuint(host_test_count_files(dir), ==, 3);
  for (int i = 0; i < 3; i++) {
    g_free(items[i].final);
    g_free(items[i].temporary);
  }
  host_test_rmtree(dir);
}

/* Under mpirun: the kNN steps whose matrices come straight from load-matrix run split; a matrix
 * that any rank-0 step needs (b: the exact MST) is read whole, the split steps it feeds
 * (metafeatures) run on rank 0 too, and a kNN step fed by a rank-0 step gets its matrices
 * scattered from rank 0. */
static void test_split_plan(void)
{
  static const char *const lines[] = {
      "<pipeline name=\"split\">",
      "  <step id=\"a\" type=\"load-matrix\"><param name=\"path\" value=\"DATA\"/></step>",
      "  <step id=\"b\" type=\"load-matrix\"><param name=\"path\" value=\"DATA\"/></step>",
      "  <step id=\"c\" type=\"load-matrix\"><param name=\"path\" value=\"DATA\"/></step>",
      "  <step id=\"ga\" type=\"knn-graph\"><input name=\"data\" step=\"a\"/>",
      "    <param name=\"k\" value=\"3\"/></step>",
      "  <step id=\"mf\" type=\"metafeatures\"><input name=\"data\" step=\"b\"/></step>",
      "  <step id=\"gb\" type=\"knn-graph\"><input name=\"data\" step=\"mf\"/>",
      "    <param name=\"k\" value=\"3\"/></step>",
      "  <step id=\"q\" type=\"knn-query\"><input name=\"query\" step=\"c\"/>",
      "    <input name=\"reference\" step=\"b\"/><param name=\"k\" value=\"3\"/></step>",
      "  <step id=\"tree\" type=\"mst\"><input name=\"data\" step=\"b\"/></step>",
      "  <step id=\"w\" type=\"write-graph\"><input name=\"graph\" step=\"ga\"/>",
      "    <param name=\"path\" value=\"OUT/g.knn\"/></step>",
      "</pipeline>",
      NULL};
  g_autofree char *path = write_pipeline(lines);
  KnnwbPipelineOptions options = {.output_dir = test_dir};
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbPipeline) pipeline = knnwb_pipeline_load(path, test_registry, &options, &error);
  g_assert_no_error(error);
  g_autofree gboolean *split = knnwb_pipeline_split_plan(pipeline);
  g_autofree gboolean *scatter = knnwb_pipeline_scatter_plan(pipeline, split);
  /* The kNN steps fed by rank 0's matrices get them scattered instead. */
  static const char *const expected_split[] = {"a", "ga"}, *const expected_scatter[] = {"gb", "q"};
  for (guint s = 0; s < pipeline->steps->len; s++) {
    const KnnwbPipelineStep *step = pipeline->steps->pdata[s];
    gboolean expected = FALSE, expected_scattered = FALSE;
    for (guint e = 0; e < G_N_ELEMENTS(expected_split); e++)
      expected |= g_str_equal(step->id, expected_split[e]);
    for (guint e = 0; e < G_N_ELEMENTS(expected_scatter); e++)
      expected_scattered |= g_str_equal(step->id, expected_scatter[e]);
    g_test_message("%s: %s", step->id, split[s] ? "split" : scatter[s] ? "scattered" : "rank 0");
    g_assert_cmpint(split[s], ==, expected);
    g_assert_cmpint(scatter[s], ==, expected_scattered);
  }
}

/* The seed steps built in code (source "knnwb test"), writing OUT/NAME.knn and OUT/NAME.gml. */
static KnnwbPipeline *program_seed(const char *name, const char *k, const char *focus)
{
  KnnwbPipeline *pipeline = knnwb_pipeline_new("knnwb test");
  g_autofree char *knn = g_strdup_printf("%s/%s.knn", test_dir, name);
  g_autofree char *gml = g_strdup_printf("%s/%s.gml", test_dir, name);
  knnwb_pipeline_add_step(pipeline, "load", "load-matrix");
  knnwb_pipeline_add_param(pipeline, "path", CIBM_SAMPLE, "INPUT");
  knnwb_pipeline_add_step(pipeline, "graph", "knn-graph");
  knnwb_pipeline_add_input(pipeline, "data", "load");
  knnwb_pipeline_add_param(pipeline, "k", k, "-k");
  knnwb_pipeline_add_param(pipeline, "metric", "pearson", "--metric");
  knnwb_pipeline_add_step(pipeline, "write", "write-graph");
  knnwb_pipeline_add_input(pipeline, "graph", "graph");
  knnwb_pipeline_add_param(pipeline, "path", knn, "-o");
  knnwb_pipeline_add_step(pipeline, "draw", "write-graph");
  knnwb_pipeline_add_input(pipeline, "graph", "graph");
  knnwb_pipeline_add_param(pipeline, "path", gml, "--gml");
  if (focus != NULL)
    knnwb_pipeline_add_param(pipeline, "focus", focus, "--focus");
  return pipeline;
}

/* Steps built in code give the bytes the same steps give from a pipeline file. */
static void test_program_same_as_file(void)
{
  static const char *const lines[] = {
      "<pipeline name=\"t\">",
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"DATA\"/></step>",
      "  <step id=\"graph\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>",
      "    <param name=\"k\" value=\"3\"/><param name=\"metric\" value=\"pearson\"/></step>",
      "  <step id=\"write\" type=\"write-graph\"><input name=\"graph\" step=\"graph\"/>",
      "    <param name=\"path\" value=\"OUT/file.knn\"/></step>",
      "  <step id=\"draw\" type=\"write-graph\"><input name=\"graph\" step=\"graph\"/>",
      "    <param name=\"path\" value=\"OUT/file.gml\"/></step>",
      "</pipeline>",
      NULL};
  g_autofree char *path = write_pipeline(lines);
  KnnwbPipelineOptions options = {.output_dir = test_dir, .quiet = TRUE};
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbPipeline) file = knnwb_pipeline_load(path, test_registry, &options, &error);
  g_assert_no_error(error);
  g_assert_true(knnwb_pipeline_run(file, &options, NULL, &error));
  g_assert_no_error(error);

  g_autoptr(KnnwbPipeline) program = program_seed("code", "3", NULL);
  g_assert_true(knnwb_pipeline_prepare(program, test_registry, &options, &error));
  g_assert_no_error(error);
  /* The plan of a pipeline built in code names its source and no lines. */
  char *plan = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&plan, &size);
  knnwb_pipeline_print_plan(program, out);
  fclose(out);
  g_assert_nonnull(strstr(plan, "(knnwb test): 4 steps\n"));
  g_assert_nonnull(strstr(plan, "1. load (load-matrix, plugin builtin)\n"));
  free(plan);
  options.quiet_steps = TRUE;
  g_assert_true(knnwb_pipeline_run(program, &options, NULL, &error));
  g_assert_no_error(error);

  g_autofree char *file_knn = read_text(test_dir, "file.knn");
  g_autofree char *code_knn = read_text(test_dir, "code.knn");
  g_autofree char *file_gml = read_text(test_dir, "file.gml");
  g_autofree char *code_gml = read_text(test_dir, "code.gml");
  g_assert_cmpstr(code_knn, ==, file_knn);
  g_assert_cmpstr(code_gml, ==, file_gml);
}

/* Expects message among the lines of error's message. */
static void expect_line(const GError *error, const char *message)
{
  g_assert_nonnull(error);
  g_test_message("expecting '%s' in:\n%s", message, error->message);
  g_auto(GStrv) lines = g_strsplit(error->message, "\n", -1);
  gboolean found = FALSE;
  for (char **line = lines; *line && !found; line++)
    found = g_str_has_prefix(*line, message);
  g_assert_true(found);
}

/* Problems of a pipeline built in code read as the command's messages: its source and the option
 * that gave the value, never a file and line; every problem, as for a file. */
static void test_program_messages(void)
{
  KnnwbPipelineOptions options = {.output_dir = test_dir, .quiet = TRUE, .quiet_steps = TRUE};
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbPipeline) bad = program_seed("bad", "three", NULL);
  knnwb_pipeline_add_step(bad, "clusters", "community");
  knnwb_pipeline_add_param(bad, "resolution", "-1", "--resolution");
  knnwb_pipeline_add_step(bad, "read", "load-matrix");
  knnwb_pipeline_add_param(bad, "path", "/nonexistent/matrix.tsv", "--query");
  g_assert_false(knnwb_pipeline_prepare(bad, test_registry, &options, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  expect_line(error, "knnwb test: -k: 'three' is not an integer");
  expect_line(error, "knnwb test: --resolution: -1 ");
  expect_line(error, "knnwb test: step 'clusters': missing input 'graph'");
  expect_line(error, "knnwb test: /nonexistent/matrix.tsv: cannot open: No such file");
  g_assert_null(strstr(error->message, "line"));
  g_clear_error(&error);

  /* The runner's errors too: a focus label checked once the rows are read, and nothing written. */
  g_autoptr(KnnwbPipeline) focus = program_seed("focus", "3", "no-such-row");
  g_assert_true(knnwb_pipeline_prepare(focus, test_registry, &options, &error));
  g_assert_no_error(error);
  g_assert_false(knnwb_pipeline_run(focus, &options, NULL, &error));
  expect_line(error, "knnwb test: --focus: no vertex is labelled 'no-such-row'");
  g_autofree char *knn = g_build_filename(test_dir, "focus.knn", NULL);
  g_assert_false(g_file_test(knn, G_FILE_TEST_EXISTS));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  knnwb_host_igraph_init();
  test_dir = host_test_tmpdir();
  test_registry = knnwb_host_registry_new();
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_host_registry_add_plugin(test_registry, knnwb_host_builtin_descriptor(), NULL,
                                               NULL, &error));
  g_autofree char *knn_dir = g_path_get_dirname(KNNWB_KNN_PLUGIN_FILE);
  char *dirs[] = {knn_dir, KNNWB_TEST_PLUGIN_ROOT "/good", NULL};
  knnwb_host_load_plugins(test_registry, dirs, FALSE);
  g_assert_nonnull(knnwb_host_registry_lookup(test_registry, "knn-graph"));
  g_assert_nonnull(knnwb_host_registry_lookup(test_registry, "test-scale"));

  g_test_add_func("/host/pipeline/valid-plan", test_valid_and_plan);
  g_test_add_func("/host/pipeline/split-plan", test_split_plan);
  g_test_add_func("/host/pipeline/unknown-step-type", test_unknown_step_type);
  g_test_add_func("/host/pipeline/unknown-parameter", test_unknown_parameter);
  g_test_add_func("/host/pipeline/missing-parameter", test_missing_parameter);
  g_test_add_func("/host/pipeline/duplicate-parameter", test_duplicate_parameter);
  g_test_add_func("/host/pipeline/wrong-type-or-range", test_wrong_type_or_range);
  g_test_add_func("/host/pipeline/dangling-reference", test_dangling_reference);
  g_test_add_func("/host/pipeline/wrong-kind", test_wrong_kind);
  g_test_add_func("/host/pipeline/cycle", test_cycle);
  g_test_add_func("/host/pipeline/output-directory", test_output_directory);
  g_test_add_func("/host/pipeline/duplicates", test_duplicate_ids_and_outputs);
  g_test_add_func("/host/pipeline/variables-set", test_variables);
  g_test_add_func("/host/pipeline/schema-xml", test_schema_and_xml);
  g_test_add_func("/host/pipeline/relative-input-hint", test_relative_input_hint);
  g_test_add_func("/host/pipeline/example-seed-workflow", test_example_seed_workflow);
  g_test_add_func("/host/pipeline/example-mst-knn", test_example_mst_knn);
  g_test_add_func("/host/pipeline/example-dslanguages", test_example_dslanguages);
  g_test_add_func("/host/pipeline/validate-dry-run", test_validate_and_dry_run);
  g_test_add_func("/host/pipeline/failed-run-leaves-nothing", test_failed_run_leaves_nothing);
  g_test_add_func("/host/pipeline/commit-rolls-back", test_commit_rolls_back);
  g_test_add_func("/host/pipeline/focus-checked-early", test_focus_checked_early);
  g_test_add_func("/host/pipeline/program-same-as-file", test_program_same_as_file);
  g_test_add_func("/host/pipeline/program-messages", test_program_messages);
  int status = g_test_run();
  host_test_rmtree(test_dir);
  knnwb_host_registry_free(test_registry);
  return status;
}
