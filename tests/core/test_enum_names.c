/* One table per enum: every listed name parses back to its value, aliases parse but are never
 * printed, the step choice constants and the tables list the same names, and the messages read
 * as they always did. */
#include <string.h>
#include <knnwb/drawing.h>
#include <knnwb/knnwb.h>

typedef struct {
  const KnnwbEnumTable *table;
  const char *choices; /* KNNWB_ENUM_CHOICES of the table's list macro */
  const char *unknown; /* the message for the name "x" */
} EnumCase;

static const EnumCase cases[] = {
    {&knnwb_metric_table, KNNWB_ENUM_CHOICES(KNNWB_METRIC_NAMES),
     "unknown metric 'x': use pearson, abs-pearson, spearman, euclidean, manhattan or cosine"},
    {&knnwb_backend_table, KNNWB_ENUM_CHOICES(KNNWB_BACKEND_NAMES),
     "unknown backend 'x': use auto, cpu or cuda"},
    {&knnwb_screen_table, KNNWB_ENUM_CHOICES(KNNWB_SCREEN_NAMES),
     "unknown screening precision 'x': use auto, fp32, tf32, fp16 or bf16"},
    {&knnwb_graph_mode_table, KNNWB_ENUM_CHOICES(KNNWB_GRAPH_MODE_NAMES),
     "unknown graph mode 'x': use directed, union or mutual"},
    {&knnwb_input_table, KNNWB_ENUM_CHOICES(KNNWB_INPUT_NAMES),
     "unknown input format 'x' (known: auto, cibm, csv, tsv, gct, npy, geo, h5ad, 10x)"},
    {&knnwb_output_table, KNNWB_ENUM_CHOICES(KNNWB_OUTPUT_NAMES),
     "unknown output format 'x' (known: auto, knn, gml, graphml, labels, neighbors, npy, npz, "
     "mtx, h5ad)"},
    {&knnwb_layout_table, KNNWB_ENUM_CHOICES(KNNWB_LAYOUT_NAMES),
     "unknown layout 'x' (known: auto, fr, drl, umap, none)"},
    {&knnwb_direction_table, KNNWB_ENUM_CHOICES(KNNWB_DIRECTION_NAMES),
     "direction 'x' is unknown (expected out, in or both)"},
    {&knnwb_community_method_table, KNNWB_ENUM_CHOICES(KNNWB_COMMUNITY_METHOD_NAMES),
     "unknown community method 'x' (expected leiden, louvain or walktrap)"},
    {&knnwb_snn_weighting_table, KNNWB_ENUM_CHOICES(KNNWB_SNN_WEIGHTING_NAMES),
     "unknown SNN weighting 'x' (expected rank, number or jaccard)"},
    {&knnwb_similarity_table, KNNWB_ENUM_CHOICES(KNNWB_SIMILARITY_NAMES),
     "unknown similarity 'x' (expected inverse, exp or unit)"},
    {&knnwb_metafeature_table, KNNWB_ENUM_CHOICES(KNNWB_METAFEATURE_NAMES),
     "metafeature operator 'x' is unknown (expected difference, sum, product, ratio or all, "
     "separated by commas)"},
};

static void test_round_trip(void)
{
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    const KnnwbEnumTable *table = cases[c].table;
    g_autofree char *bars = knnwb_enum_list(table, "|", "|");
    g_assert_cmpstr(bars, ==, cases[c].choices);
    for (size_t i = 0; i < table->n_names; i++) {
      int value = -1;
      g_autofree char *upper = g_ascii_strup(table->names[i].name, -1);
      g_assert_true(knnwb_enum_from_string(table, upper, &value, NULL));
      g_assert_cmpint(value, ==, table->names[i].value);
      /* An alias prints as the listed name of its value. */
      const char *printed = knnwb_enum_to_string(table, value);
      g_assert_nonnull(printed);
      if (i < table->n_listed)
        g_assert_cmpstr(printed, ==, table->names[i].name);
      else
        g_assert_nonnull(strstr(bars, printed));
    }
    g_assert_null(knnwb_enum_to_string(table, 1000));
  }
}

static void test_messages(void)
{
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autoptr(GError) error = NULL;
    int value = -1;
    g_assert_false(knnwb_enum_from_string(cases[c].table, "x", &value, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
    g_assert_cmpstr(error->message, ==, cases[c].unknown);
    g_assert_cmpint(value, ==, -1);
  }
  g_autofree char *or_list = knnwb_enum_list(&knnwb_backend_table, ", ", " or ");
  g_assert_cmpstr(or_list, ==, "auto, cpu or cuda");
}

/* The typed wrappers keep their behaviour: aliases, NULL names, printing unknown values. */
static void test_wrappers(void)
{
  KnnwbOutputFormat format = KNNWB_OUTPUT_AUTO;
  g_assert_true(knnwb_formats_output_from_string("Neighbours", &format, NULL));
  g_assert_cmpint(format, ==, KNNWB_OUTPUT_NEIGHBORS_TSV);
  g_assert_cmpstr(knnwb_formats_output_to_string(format), ==, "neighbors");
  KnnwbCommunityMethod method = KNNWB_COMMUNITY_LEIDEN;
  g_assert_true(knnwb_community_method_from_string("multilevel", &method, NULL));
  g_assert_cmpint(method, ==, KNNWB_COMMUNITY_LOUVAIN);
  KnnwbLayout layout = KNNWB_LAYOUT_AUTO;
  g_assert_true(knnwb_drawing_layout_from_string("umap", &layout, NULL));
  g_assert_cmpint(layout, ==, KNNWB_LAYOUT_UMAP);
  g_assert_cmpstr(knnwb_drawing_layout_to_string(KNNWB_LAYOUT_NONE), ==, "none");
  g_autoptr(GError) error = NULL;
  KnnwbMetric metric = KNNWB_METRIC_PEARSON;
  g_assert_false(knnwb_metric_from_string(NULL, &metric, &error));
  g_assert_nonnull(strstr(error->message, "'(null)'"));
  g_assert_cmpstr(knnwb_metric_to_string((KnnwbMetric)99), ==, "unknown");
  g_assert_cmpstr(knnwb_screen_to_string((KnnwbScreen)99), ==, "?");
  g_assert_cmpstr(knnwb_metafeatures_op_to_string(KNNWB_METAFEATURE_COUNT), ==, "?");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/core/enum-names/round-trip", test_round_trip);
  g_test_add_func("/core/enum-names/messages", test_messages);
  g_test_add_func("/core/enum-names/wrappers", test_wrappers);
  return g_test_run();
}
