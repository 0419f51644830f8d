/* Sample annotations through the knnwb program: phenotypes and classes with missing values
 * (complete cases), the input's own annotations by name, node attributes, the ranked table's
 * statistics. Results are checked against values computed here in double precision. */
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>
#include <igraph.h>
#include <knnwb/drawing.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/neighbourhood.h>
#include <knnwb/write_matrix.h>
#include "knnwb_test_matrix.h"
#include "host_test_util.h"
#ifdef KNNWB_TEST_CAIRO
#include <cairo.h>
#endif

static char *dir;

static char *path_in(const char *name)
{
  return g_build_filename(dir, name, NULL);
}

static void put(const char *name, const char *text)
{
  g_autofree char *path = path_in(name);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
}

static char *slurp(const char *name)
{
  g_autofree char *path = path_in(name);
  char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  return text;
}

/* 12 probes x 8 samples S0..S7, written as TSV and read back (the values the program reads). */
static KnnwbMatrix *write_expression(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(12, 8, 33);
  for (size_t i = 0; i < 12; i++) {
    g_autofree char *label = g_strdup_printf("g%02zu", i);
    knnwb_matrix_set_row_label(m, i, label);
  }
  for (size_t j = 0; j < 8; j++) {
    g_autofree char *label = g_strdup_printf("S%zu", j);
    knnwb_matrix_set_col_label(m, j, label);
  }
  g_autofree char *path = path_in("expr.tsv");
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_write_matrix_tsv(path, m, &error));
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  KnnwbMatrix *back = NULL;
  g_assert_true(knnwb_formats_read_matrix(path, &options, &back, NULL, &error));
  g_assert_no_error(error);
  return back;
}

/* Pearson's r in double over the samples whose phenotype is not NaN. */
static double pearson_complete(const float *x, const double *y, size_t n)
{
  double sx = 0, sy = 0, m = 0;
  for (size_t j = 0; j < n; j++)
    if (!isnan(y[j])) {
      sx += x[j];
      sy += y[j];
      m++;
    }
  const double mx = sx / m, my = sy / m;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t j = 0; j < n; j++)
    if (!isnan(y[j])) {
      sxy += (x[j] - mx) * (y[j] - my);
      sxx += (x[j] - mx) * (x[j] - mx);
      syy += (y[j] - my) * (y[j] - my);
    }
  return sxy / sqrt(sxx * syy);
}

/* The ranked table's rows: label -> column value (as text). */
static GHashTable *table_column(const char *text, const char *column)
{
  GHashTable *values = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  g_auto(GStrv) header = g_strsplit(lines[0], "\t", -1);
  int label = -1, wanted = -1;
  for (int c = 0; header[c] != NULL; c++) {
    if (strcmp(header[c], "label") == 0)
      label = c;
    if (strcmp(header[c], column) == 0)
      wanted = c;
  }
  g_assert_cmpint(label, >=, 0);
  g_assert_cmpint(wanted, >=, 0);
  for (size_t i = 1; lines[i] != NULL && lines[i][0] != '\0'; i++) {
    g_auto(GStrv) fields = g_strsplit(lines[i], "\t", -1);
    g_hash_table_insert(values, g_strdup(fields[label]), g_strdup(fields[wanted]));
  }
  return values;
}

static const double years[8] = {1.5, 2, NAN, 3, 9, NAN, 8.5, 6};

static void test_phenotype_complete_cases(void)
{
  g_autoptr(KnnwbMatrix) expr = write_expression();
  put("clinical.tsv", "sample\tYears\n"
                      "S0\t1.5\nS1\t2\nS2\tNA\nS3\t3\nS4\t9\nS5\t\nS6\t8.5\nS7\t6\n");
  g_autofree char *err = NULL;
  int status = host_test_run(dir, NULL, &err, "neighbourhood", "expr.tsv", "--phenotype",
                             "clinical.tsv:Years", "--focus", "Years", "-k", "12", "--metric",
                             "pearson", "-o", "n.gml", "--table", "n.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  g_assert_nonnull(strstr(err, "2 of the 8 samples have no value in column 'Years'"));
  g_autofree char *text = slurp("n.tsv");
  g_autoptr(GHashTable) r = table_column(text, "r");
  g_assert_cmpuint(g_hash_table_size(r), ==, 12);
  for (size_t i = 0; i < 12; i++) {
    const double want = pearson_complete(expr->values + i * 8, years, 8);
    const char *got = g_hash_table_lookup(r, expr->row_labels[i]);
    g_assert_nonnull(got);
    g_assert_cmpfloat_with_epsilon(g_ascii_strtod(got, NULL), want, 2e-6);
  }
  /* The pipeline step leaves the same samples out. */
  put("nb.xml",
      "<pipeline name=\"nb\" version=\"1\">\n"
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"expr.tsv\"/></step>\n"
      "  <step id=\"pheno\" type=\"append-phenotype\"><input name=\"data\" step=\"load\"/>\n"
      "    <param name=\"table\" value=\"clinical.tsv\"/><param name=\"column\" "
      "value=\"Years\"/></step>\n"
      "  <step id=\"nb\" type=\"neighbourhood\"><input name=\"data\" step=\"pheno\"/>\n"
      "    <param name=\"k\" value=\"12\"/><param name=\"focus\" value=\"Years\"/>\n"
      "    <param name=\"metric\" value=\"pearson\"/><param name=\"table\" value=\"p.tsv\"/>\n"
      "  </step>\n"
      "</pipeline>\n");
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "run", "nb.xml", "--quiet", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *pipeline_text = slurp("p.tsv");
  g_assert_cmpstr(pipeline_text, ==, text);
  /* --phenotype-missing error keeps the refusal, and leaves nothing behind. */
  guint before = host_test_count_files(dir);
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "neighbourhood", "expr.tsv", "--phenotype",
                         "clinical.tsv:Years", "--phenotype-missing", "error", "--focus", "Years",
                         "-k", "3", "-o", "x.gml", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "clinical.tsv:4: sample 'S2': 'NA' is missing in column 'Years'"));
  g_assert_nonnull(strstr(err, "clinical.tsv:7: sample 'S5': '' is empty in column 'Years'"));
  g_assert_cmpuint(host_test_count_files(dir), ==, before);
  /* No value at all is refused. */
  put("none.tsv",
      "sample\tYears\nS0\tNA\nS1\tNA\nS2\tNA\nS3\tNA\nS4\tNA\nS5\tNA\nS6\tNA\nS7\tNA\n");
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "neighbourhood", "expr.tsv", "--phenotype",
                         "none.tsv:Years", "--focus", "Years", "-k", "3", "-o", "x.gml", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "has no value for any of the 8 samples"));
}

/* A GEO series matrix: 8 probes x 6 samples, characteristics age (one NA) and tissue. */
static const double geo_age[6] = {50, 61, NAN, 44, 70, 58};

static KnnwbMatrix *write_geo(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(8, 6, 7);
  g_autoptr(GString) text = g_string_new("!Series_title\t\"test\"\n!Sample_title");
  for (int j = 0; j < 6; j++)
    g_string_append_printf(text, "\t\"patient %d\"", j + 1);
  g_string_append(text, "\n!Sample_geo_accession");
  for (int j = 0; j < 6; j++)
    g_string_append_printf(text, "\t\"GSM%d\"", j + 1);
  g_string_append(text, "\n!Sample_characteristics_ch1");
  for (int j = 0; j < 6; j++)
    g_string_append_printf(text, "\t\"tissue: %s\"", j % 2 ? "brain" : "liver");
  g_string_append(text, "\n!Sample_characteristics_ch1");
  for (int j = 0; j < 6; j++)
    if (isnan(geo_age[j]))
      g_string_append(text, "\t\"age: NA\"");
    else
      g_string_append_printf(text, "\t\"age: %g\"", geo_age[j]);
  g_string_append(text, "\n!series_matrix_table_begin\n\"ID_REF\"");
  for (int j = 0; j < 6; j++)
    g_string_append_printf(text, "\t\"GSM%d\"", j + 1);
  g_string_append_c(text, '\n');
  for (int i = 0; i < 8; i++) {
    g_string_append_printf(text, "\"p%d\"", i);
    for (int j = 0; j < 6; j++)
      g_string_append_printf(text, "\t%.9g", m->values[i * 6 + j]);
    g_string_append_c(text, '\n');
  }
  g_string_append(text, "!series_matrix_table_end\n");
  put("GSE1_series_matrix.txt", text->str);
  return g_steal_pointer(&m);
}

static void test_geo_annotations(void)
{
  g_autoptr(KnnwbMatrix) expr = write_geo();
  g_autofree char *err = NULL;
  int status =
      host_test_run(dir, NULL, &err, "neighbourhood", "GSE1_series_matrix.txt", "--phenotype",
                    "age", "--sample-labels", "Sample_title", "--focus", "age", "-k", "8",
                    "--metric", "pearson", "-o", "g.gml", "--table", "g.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  g_assert_nonnull(strstr(err, "1 of the 6 samples have no value in column 'age'"));
  g_autofree char *text = slurp("g.tsv");
  g_autoptr(GHashTable) r = table_column(text, "r");
  g_assert_cmpuint(g_hash_table_size(r), ==, 8);
  for (int i = 0; i < 8; i++) {
    g_autofree char *label = g_strdup_printf("p%d", i);
    const char *got = g_hash_table_lookup(r, label);
    g_assert_nonnull(got);
    g_assert_cmpfloat_with_epsilon(g_ascii_strtod(got, NULL),
                                   pearson_complete(expr->values + i * 6, geo_age, 6), 2e-6);
  }
  /* A name that names nothing lists what there is. */
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "neighbourhood", "GSE1_series_matrix.txt", "--phenotype",
                         "weight", "--focus", "weight", "-k", "3", "-o", "x.gml", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "no sample annotation 'weight'"));
  g_assert_nonnull(strstr(err, "'Sample_title'"));
  g_assert_nonnull(strstr(err, "'tissue'"));
  g_assert_nonnull(strstr(err, "'age'"));
  /* Classes and clusters by a characteristic, samples as rows. */
  g_autofree char *out = NULL;
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, &out, &err, "classify", "GSE1_series_matrix.txt", "--transpose",
                         "--classes", "tissue", "--folds", "loo", "-k", "1", "-o", "c.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *predictions = slurp("c.tsv");
  g_assert_nonnull(strstr(predictions, "GSM2\tbrain\t"));
  g_assert_nonnull(strstr(predictions, "GSM1\tliver\t"));
  g_clear_pointer(&err, g_free);
  status =
      host_test_run(dir, NULL, &err, "cluster", "GSE1_series_matrix.txt", "--transpose", "--method",
                    "components", "-k", "2", "--annotation", "tissue", "-o", "k.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *summary = slurp("k.summary.tsv");
  g_assert_nonnull(strstr(summary, "annotated_points\t6\nclasses\t2\n"));
  /* The rows named by their titles. */
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "cluster", "GSE1_series_matrix.txt", "--transpose",
                         "--method", "components", "-k", "2", "--sample-labels", "Sample_title",
                         "-o", "t.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *titled = slurp("t.tsv");
  g_assert_nonnull(strstr(titled, "\tpatient 1\t"));
  g_assert_null(strstr(titled, "GSM1"));
}

/* Points as rows, a Biobase-style sample sheet with comments, names in its second column. */
static void write_points(void)
{
  put("points.tsv",
      "id\tx\ty\nP0\t0\t0\nP1\t0.1\t0\nP2\t0\t0.2\nP3\t5\t5\nP4\t5.1\t5\nP5\t5\t5.3\n");
  put("sheet.tsv", "#group: the treatment arm\n#batch: processing day\n"
                   "row\tname\tgroup\n"
                   "1\tP0\ta\n2\tP1\ta\n3\tP2\tNA\n4\tP3\tb\n5\tP4\tb\n# a note\n6\tP5\tb\n");
}

static void test_cluster_annotation(void)
{
  write_points();
  g_autofree char *err = NULL;
  int status = host_test_run(dir, NULL, &err, "cluster", "points.tsv", "--metric", "euclidean",
                             "--method", "components", "-k", "2", "--annotation", "sheet.tsv:group",
                             "--annotation-id", "name", "-o", "pc.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  g_assert_nonnull(strstr(err, "1 of the 6 rows have no value in column 'group'"));
  g_autofree char *summary = slurp("pc.summary.tsv");
  g_assert_nonnull(strstr(summary, "annotated_points\t5\nclasses\t2\nari\t1.000000\n"));
  /* A column of names that names no point is refused, as classify refuses it. */
  guint before = host_test_count_files(dir);
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "cluster", "points.tsv", "--metric", "euclidean",
                         "--method", "components", "-k", "2", "--annotation", "sheet.tsv:group",
                         "-o", "pd.tsv", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "none of the matrix's 6 rows is named in the table's column 'row'"));
  g_assert_nonnull(strstr(err, "--annotation-id"));
  g_assert_cmpuint(host_test_count_files(dir), ==, before);
  /* classify: the row of unknown class is predicted, with a warning. */
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "classify", "points.tsv", "--classes", "sheet.tsv:group",
                         "--classes-id", "name", "-k", "1", "--metric", "euclidean", "--folds",
                         "loo", "-o", "pp.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  g_assert_nonnull(strstr(err, "1 of the 6 rows have no class in column 'group'"));
  g_autofree char *predictions = slurp("pp.tsv");
  g_assert_nonnull(strstr(predictions, "P2\t\ta\t"));
}

/* The vertex labelled label in a graph read with attributes. */
static igraph_integer_t vertex_of(const igraph_t *graph, const char *label)
{
  for (igraph_integer_t v = 0; v < igraph_vcount(graph); v++)
    if (strcmp(VAS(graph, "label", v), label) == 0)
      return v;
  g_error("no vertex '%s'", label);
  return -1;
}

static void test_node_attributes(void)
{
  write_points();
  put("extra.tsv", "name\tscore\tdisease state\n"
                   "P0\t1.5\t\"x \"\"q\"\" <\xc3\xa9>\"\nP1\t2\tNA\nP2\t3\tz\nP3\tNA\tz\n"
                   "P4\t-1e3\tz\nP5\t7\tz\n");
  g_autofree char *err = NULL;
  int status =
      host_test_run(dir, NULL, &err, "knn", "points.tsv", "--metric", "euclidean", "-k", "2",
                    "--annotation", "extra.tsv:score,disease state", "-o", "a.gml", "-q", NULL);
  if (status != 0)
    g_error("%s", err);
  /* igraph reads the GML back: numbers as numbers, text unescaped, no key where no value. */
  igraph_set_attribute_table(&igraph_cattribute_table);
  igraph_set_warning_handler(igraph_warning_handler_ignore);
  g_autofree char *gml_path = path_in("a.gml");
  FILE *file = fopen(gml_path, "r");
  g_assert_nonnull(file);
  igraph_t graph;
  g_assert_cmpint(igraph_read_graph_gml(&graph, file), ==, IGRAPH_SUCCESS);
  fclose(file);
  g_assert_true(igraph_cattribute_has_attr(&graph, IGRAPH_ATTRIBUTE_VERTEX, "score"));
  g_assert_cmpfloat(VAN(&graph, "score", vertex_of(&graph, "P0")), ==, 1.5);
  g_assert_cmpfloat(VAN(&graph, "score", vertex_of(&graph, "P4")), ==, -1000);
  g_assert_true(isnan(VAN(&graph, "score", vertex_of(&graph, "P3"))));
  /* Non-ASCII as a numeric entity, as in labels (yEd decodes it; igraph keeps it verbatim). */
  g_assert_cmpstr(VAS(&graph, "diseaseState", vertex_of(&graph, "P0")), ==, "x \"q\" <&#233;>");
  g_assert_cmpstr(VAS(&graph, "diseaseState", vertex_of(&graph, "P2")), ==, "z");
  igraph_destroy(&graph);
  /* GraphML: typed keys under the columns' own names. */
  g_clear_pointer(&err, g_free);
  status =
      host_test_run(dir, NULL, &err, "knn", "points.tsv", "--metric", "euclidean", "-k", "2",
                    "--annotation", "extra.tsv:score,disease state", "-o", "a.graphml", "-q", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *graphml = slurp("a.graphml");
  g_assert_nonnull(
      strstr(graphml, "<key id=\"a0\" for=\"node\" attr.name=\"score\" attr.type=\"double\"/>"));
  g_assert_nonnull(strstr(
      graphml, "<key id=\"a1\" for=\"node\" attr.name=\"disease state\" attr.type=\"string\"/>"));
  g_assert_nonnull(strstr(graphml, "<data key=\"a1\">x &quot;q&quot; &lt;\xc3\xa9&gt;</data>"));
  /* cluster: every column on the nodes, the first compared. */
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "cluster", "points.tsv", "--metric", "euclidean",
                         "--method", "components", "-k", "2", "--annotation", "sheet.tsv:group,row",
                         "--annotation-id", "name", "--gml", "c.gml", "-o", "c.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *cluster_gml = slurp("c.gml");
  g_assert_nonnull(
      strstr(cluster_gml,
             "label \"P0\"\n    cluster 0\n    clusterSize 3\n    group \"a\"\n    row 1.0\n"));
  g_autofree char *summary = slurp("c.summary.tsv");
  g_assert_nonnull(strstr(summary, "annotated_points\t5\nclasses\t2\n"));
  /* A table that names none of the rows is refused before the search, nothing written. */
  put("others.tsv", "name\tscore\nX1\t1\nX2\t2\n");
  guint before = host_test_count_files(dir);
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "knn", "points.tsv", "--metric", "euclidean", "-k", "2",
                         "--annotation", "others.tsv:score", "-o", "none.gml", NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "none of the 6 rows is named in the table's column 'name'"));
  g_assert_cmpuint(host_test_count_files(dir), ==, before);
  /* A graph format without node attributes refuses the option. */
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, NULL, &err, "knn", "points.tsv", "-k", "2", "--annotation",
                         "extra.tsv:score", "-o", "a.knn", NULL);
  g_assert_cmpint(status, ==, 2);
  g_assert_nonnull(strstr(err, ".gml and .graphml"));
}

/* A GML node's keys before its graphics block. */
static char *node_keys(const char *gml, const char *label)
{
  g_autofree char *wanted = g_strdup_printf("label \"%s\"\n", label);
  const char *start = strstr(gml, wanted);
  g_assert_nonnull(start);
  const char *end = strstr(start, "graphics");
  g_assert_nonnull(end);
  return g_strndup(start, (gsize)(end - start));
}

static void test_neighbourhood_attributes(void)
{
  g_autoptr(KnnwbMatrix) expr = write_expression();
  put("genes.tsv", "probe\tsymbol\ng00\tTP53\ng01\tBRCA1\ng02\tMYC\n");
  g_autofree char *err = NULL;
  int status = host_test_run(dir, NULL, &err, "neighbourhood", "expr.tsv", "--focus", "g00", "-k",
                             "11", "--metric", "euclidean", "--annotation", "genes.tsv:symbol",
                             "-o", "s.gml", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *gml = slurp("s.gml");
  g_autofree char *g00 = node_keys(gml, "g00");
  g_autofree char *g02 = node_keys(gml, "g02");
  g_autofree char *g05 = node_keys(gml, "g05");
  g_assert_nonnull(strstr(g00, "\n    symbol \"TP53\"\n"));
  g_assert_nonnull(strstr(g02, "\n    symbol \"MYC\"\n"));
  g_assert_null(strstr(g05, "symbol"));
}

/* p of r against scipy (scipy.special.betainc(df/2, 1/2, 1 - r^2), equal to 2 t.sf(|t|, df) and
 * to scipy.stats.pearsonr's p), down to |r| a hair from 1. */
static void test_p_values(void)
{
  static const struct {
    double r;
    size_t n;
    double p;
  } cases[] = {
      {0.5, 10, 0.14111328125000006},
      {-0.3, 8, 0.47033874999999986},
      {0.99, 20, 9.159623478939136e-17},
      {0.9999999, 12, 7.874998666774827e-35},
      {-0.999999999, 50, 1.9221056365075945e-210},
      {0.05, 1000, 0.11407259555106879},
      {0.8, 3, 0.4096655293982669},
      {0.0, 5, 1.0},
  };
  for (size_t c = 0; c < G_N_ELEMENTS(cases); c++) {
    const double p = knnwb_correlation_p_value(cases[c].r, cases[c].n);
    if (!(fabs(p - cases[c].p) <= 1e-9 * cases[c].p))
      g_error("r %.10g n %zu: p %.17g, scipy %.17g", cases[c].r, cases[c].n, p, cases[c].p);
  }
  g_assert_cmpfloat(knnwb_correlation_p_value(1.0, 10), ==, 0.0);
  g_assert_true(isnan(knnwb_correlation_p_value(0.5, 2)));
  /* Benjamini-Hochberg against scipy.stats.false_discovery_control (and R's p.adjust). */
  const double p[] = {0.042, 0.001, 0.205, 0.039, 0.008, 0.06, 0.041, 0.074};
  const double want[] = {0.0672, 0.008, 0.205, 0.0672, 0.032, 0.08, 0.0672, 0.08457142857142856};
  double q[8];
  knnwb_benjamini_hochberg(p, 8, q);
  for (int i = 0; i < 8; i++)
    g_assert_cmpfloat_with_epsilon(q[i], want[i], 1e-12);
}

/* Benjamini-Hochberg by its definition, O(m^2): q_i = min over p_j >= p_i of m p_j / rank_j. */
static double bh_by_definition(const double *p, size_t m, size_t i)
{
  double best = 1.0;
  for (size_t j = 0; j < m; j++) {
    if (p[j] < p[i])
      continue;
    size_t rank = 0;
    for (size_t l = 0; l < m; l++)
      rank += p[l] < p[j] || (p[l] == p[j] && l <= j);
    best = MIN(best, p[j] * (double)m / (double)rank);
  }
  return best;
}

static void test_table_statistics(void)
{
  g_autoptr(KnnwbMatrix) expr = write_expression();
  put("clinical.tsv", "sample\tYears\n"
                      "S0\t1.5\nS1\t2\nS2\tNA\nS3\t3\nS4\t9\nS5\t\nS6\t8.5\nS7\t6\n");
  /* k = 3: the table lists 3 rows, q counts all 12 candidates. */
  g_autofree char *err = NULL;
  int status = host_test_run(dir, NULL, &err, "neighbourhood", "expr.tsv", "--phenotype",
                             "clinical.tsv:Years", "--focus", "Years", "-k", "3", "--metric",
                             "abs-pearson", "-o", "t.gml", "--table", "t.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *text = slurp("t.tsv");
  g_assert_true(g_str_has_prefix(text, "focus\trank\tlabel\torder\tdistance\tr\tp\tq\n"));
  g_autoptr(GHashTable) r_column = table_column(text, "r");
  g_autoptr(GHashTable) p_column = table_column(text, "p");
  g_autoptr(GHashTable) q_column = table_column(text, "q");
  g_assert_cmpuint(g_hash_table_size(p_column), ==, 3);
  double p_all[12];
  for (size_t i = 0; i < 12; i++)
    p_all[i] = knnwb_correlation_p_value(pearson_complete(expr->values + i * 8, years, 8), 6);
  for (size_t i = 0; i < 12; i++) {
    const char *p_text = g_hash_table_lookup(p_column, expr->row_labels[i]);
    if (p_text == NULL)
      continue;
    const double r = g_ascii_strtod(g_hash_table_lookup(r_column, expr->row_labels[i]), NULL);
    g_assert_cmpfloat_with_epsilon(r, pearson_complete(expr->values + i * 8, years, 8), 2e-6);
    g_assert_cmpfloat(fabs(g_ascii_strtod(p_text, NULL) - p_all[i]), <=, 1e-4 * p_all[i]);
    const double q = g_ascii_strtod(g_hash_table_lookup(q_column, expr->row_labels[i]), NULL);
    const double q_want = bh_by_definition(p_all, 12, i);
    g_assert_cmpfloat(fabs(q - q_want), <=, 1e-4 * q_want);
  }
  g_autofree char *help = NULL;
  status = host_test_run(dir, &help, NULL, "neighbourhood", "--help", NULL);
  g_assert_cmpint(status, ==, 0);
  g_assert_nonnull(strstr(help, "abs-pearson"));
  g_assert_nonnull(strstr(help, "Benjamini-Hochberg"));
}

static void test_classify_report(void)
{
  write_points();
  put("sheet2.tsv", "name\tgroup\nP0\ta\nP1\ta\nP2\tc\nP3\tb\nP4\tb\nP5\tb\nQ1\ta\nQ2\ta\n");
  g_autofree char *out = NULL, *err = NULL;
  int status =
      host_test_run(dir, &out, &err, "classify", "points.tsv", "--classes", "sheet2.tsv:group",
                    "-k", "1", "--metric", "euclidean", "--folds", "loo", "-o", "r.tsv", NULL);
  if (status != 0)
    g_error("%s", err);
  /* P2, alone in class c, is called a: 5 of 6; recalls 1, 1, 0; b is the largest class. */
  g_assert_nonnull(strstr(out, "accuracy\t0.8333\t(5 of 6)\n"));
  g_assert_nonnull(strstr(out, "balanced_accuracy\t0.6667\t"));
  g_assert_nonnull(strstr(out, "majority_baseline\t0.5000\t(every row called b)\n"));
  g_assert_nonnull(strstr(err, "1 class with one labelled row ('c')"));
  /* New samples whose classes the table knows are scored the same way. */
  put("query.tsv", "id\tx\ty\nQ1\t0.05\t0.05\nQ2\t5\t5.1\nQ3\t9\t9\n");
  g_clear_pointer(&out, g_free);
  g_clear_pointer(&err, g_free);
  status = host_test_run(dir, &out, &err, "classify", "points.tsv", "--classes", "sheet2.tsv:group",
                         "-k", "1", "--metric", "euclidean", "--query", "query.tsv", "-o", "q.tsv",
                         NULL);
  if (status != 0)
    g_error("%s", err);
  g_assert_nonnull(strstr(out, "accuracy\t0.5000\t(1 of 2)\n"));
  g_assert_nonnull(strstr(out, "balanced_accuracy\t0.5000\t"));
  g_assert_nonnull(strstr(out, "majority_baseline\t1.0000\t(every row called a)\n"));
  g_autofree char *predictions = slurp("q.tsv");
  g_assert_nonnull(strstr(predictions, "Q2\ta\tb\t"));
  g_assert_nonnull(strstr(predictions, "Q3\t\tb\t"));
}

#ifdef KNNWB_TEST_CAIRO
/* The pixel where the scatter's documented geometry puts value (x, y). */
static void scatter_pixel(double x, double y, double x0, double x1, double y0, double y1, int width,
                          int height, int *px, int *py)
{
  const double left = KNNWB_SCATTER_LEFT, right = width - KNNWB_SCATTER_RIGHT;
  const double top = KNNWB_SCATTER_TOP, bottom = height - KNNWB_SCATTER_BOTTOM;
  const double lo_x = x0 - 0.05 * (x1 - x0), hi_x = x1 + 0.05 * (x1 - x0);
  const double lo_y = y0 - 0.05 * (y1 - y0), hi_y = y1 + 0.05 * (y1 - y0);
  *px = (int)lround(left + (x - lo_x) / (hi_x - lo_x) * (right - left) - 0.5);
  *py = (int)lround(bottom - (y - lo_y) / (hi_y - lo_y) * (bottom - top) - 0.5);
}

static guint32 pixel_at(cairo_surface_t *image, int x, int y)
{
  const unsigned char *data = cairo_image_surface_get_data(image);
  const int stride = cairo_image_surface_get_stride(image);
  return *(const guint32 *)(const void *)(data + (size_t)y * (size_t)stride + (size_t)x * 4) &
         0xFFFFFFu;
}

/* knnwb neighbourhood --plots: each hit's PNG has a point where the (phenotype, value) pair of
 * every complete sample says, and white elsewhere in the plot; the overview is there. */
static void test_plots(void)
{
  g_autoptr(KnnwbMatrix) expr = write_expression();
  put("clinical.tsv", "sample\tYears\n"
                      "S0\t1.5\nS1\t2\nS2\tNA\nS3\t3\nS4\t9\nS5\t\nS6\t8.5\nS7\t6\n");
  g_autofree char *err = NULL;
  int status = host_test_run(dir, NULL, &err, "neighbourhood", "expr.tsv", "--phenotype",
                             "clinical.tsv:Years", "--focus", "Years", "-k", "3", "--metric",
                             "abs-pearson", "-o", "pl.gml", "--table", "pl.tsv", "--plots", "plots",
                             "--plots-top", "2", NULL);
  if (status != 0)
    g_error("%s", err);
  g_autofree char *table = slurp("pl.tsv");
  g_auto(GStrv) lines = g_strsplit(table, "\n", -1);
  for (int hit = 1; hit <= 2; hit++) {
    g_auto(GStrv) fields = g_strsplit(lines[hit], "\t", -1);
    const char *label = fields[2];
    size_t row = 0;
    while (strcmp(expr->row_labels[row], label) != 0)
      row++;
    g_autofree char *name = g_strdup_printf("%02d-%s.png", hit, label);
    g_autofree char *path = g_build_filename(dir, "plots", name, NULL);
    cairo_surface_t *image = cairo_image_surface_create_from_png(path);
    g_assert_cmpint(cairo_surface_status(image), ==, CAIRO_STATUS_SUCCESS);
    const int width = cairo_image_surface_get_width(image);
    const int height = cairo_image_surface_get_height(image);
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (size_t j = 0; j < 8; j++)
      if (!isnan(years[j])) {
        const double v = expr->values[row * 8 + j];
        x0 = MIN(x0, years[j]), x1 = MAX(x1, years[j]);
        y0 = MIN(y0, v), y1 = MAX(y1, v);
      }
    const guint32 point = (0x1Fu << 16) | (0x4Eu << 8) | 0x9Au;
    for (size_t j = 0; j < 8; j++) {
      if (isnan(years[j]))
        continue;
      int px, py;
      scatter_pixel(years[j], expr->values[row * 8 + j], x0, x1, y0, y1, width, height, &px, &py);
      if (pixel_at(image, px, py) != point)
        g_error("%s: sample %zu: pixel (%d, %d) is %06x, not the point colour", name, j, px, py,
                pixel_at(image, px, py));
    }
    /* Away from every point, inside the plot: background. */
    int white = 0;
    for (int y = KNNWB_SCATTER_TOP + 2; y < height - KNNWB_SCATTER_BOTTOM - 2; y += 7)
      for (int x = KNNWB_SCATTER_LEFT + 2; x < width - KNNWB_SCATTER_RIGHT - 2; x += 7)
        white += pixel_at(image, x, y) == 0xFFFFFFu;
    g_assert_cmpint(white, >, 1000);
    cairo_surface_destroy(image);
  }
  g_autofree char *overview = g_build_filename(dir, "plots", "overview.png", NULL);
  cairo_surface_t *image = cairo_image_surface_create_from_png(overview);
  g_assert_cmpint(cairo_surface_status(image), ==, CAIRO_STATUS_SUCCESS);
  cairo_surface_destroy(image);
  g_autofree char *third = g_build_filename(dir, "plots", "03-x.png", NULL);
  g_assert_false(g_file_test(third, G_FILE_TEST_EXISTS));
}
#endif

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  dir = host_test_tmpdir();
  g_test_add_func("/workflow/annotations/phenotype-complete-cases", test_phenotype_complete_cases);
  g_test_add_func("/workflow/annotations/geo-characteristics", test_geo_annotations);
  g_test_add_func("/workflow/annotations/cluster-annotation", test_cluster_annotation);
  g_test_add_func("/workflow/annotations/node-attributes", test_node_attributes);
  g_test_add_func("/workflow/annotations/neighbourhood-attributes", test_neighbourhood_attributes);
  g_test_add_func("/workflow/annotations/p-values", test_p_values);
  g_test_add_func("/workflow/annotations/table-statistics", test_table_statistics);
  g_test_add_func("/workflow/annotations/classify-report", test_classify_report);
#ifdef KNNWB_TEST_CAIRO
  g_test_add_func("/workflow/annotations/plots", test_plots);
#endif
  int status = g_test_run();
  host_test_rmtree(dir);
  g_free(dir);
  return status;
}
