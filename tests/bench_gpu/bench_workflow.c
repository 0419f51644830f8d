/*
 * The seed's workflow at the paper's scale, stage by stage:
 *   a deterministic 876 x 295 expression matrix (planted modules, an LCG; a phenotype table that
 *   follows module 0) -> metafeatures (default all four operators: 1,533,876 rows) -> the
 *   phenotype row (table read and matched) -> its neighbourhood (pearson, k = 20, order 2, focused
 *   queries) -> GML + ranked table; and separately the whole kNN graph of the expanded matrix
 *   (knnwb_knn_self) -> the neighbour table (TSV) of every row.
 *
 *   bench_workflow [--rows 876] [--cols 295] [--ops all] [--k 20] [--order 2] [--backend cuda]
 *                  [--no-whole] [--dir DIR] [--threads N]
 *
 * Prints one line per stage (seconds) and digests of the neighbourhood and of the whole lists, so
 * a CPU run and a GPU run of the same sizes can be compared. Built with every configuration (it
 * only calls the library); on a machine without a GPU pass --backend cpu and smaller --rows.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>
#include <knnwb/knnwb.h>

static double seconds_since(gint64 start)
{
  return (double)(g_get_monotonic_time() - start) / 1e6;
}

static guint64 fnv(guint64 hash, const void *data, size_t n)
{
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++)
    hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

/* x_{t+1} = a x_t + c mod 2^64, top bits to [0, 1). */
static double lcg_uniform(guint64 *state)
{
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*state >> 11) / 9007199254740992.0;
}

static double lcg_normal(guint64 *state)
{
  double u1 = fmax(lcg_uniform(state), 1e-300), u2 = lcg_uniform(state);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * G_PI * u2);
}

/* Rows in 20 planted modules (strength 0.5-2) over a 4-group sample design, baselines 4-12. */
static KnnwbMatrix *make_expression(size_t n, size_t d, float *phenotype)
{
  enum { MODULES = 20 };
  guint64 state = 20120521;
  double *profile = g_new(double, MODULES *d);
  for (size_t m = 0; m < MODULES; m++)
    for (size_t j = 0; j < d; j++)
      profile[m * d + j] = lcg_normal(&state) + (double)((j * 4 / d + m) % 4) - 1.5;
  KnnwbMatrix *data = knnwb_matrix_new(n, d, NULL);
  for (size_t i = 0; i < n; i++) {
    size_t m = i % MODULES;
    double base = 4 + 8 * lcg_uniform(&state), strength = 0.5 + 1.5 * lcg_uniform(&state);
    for (size_t j = 0; j < d; j++)
      data->values[i * d + j] =
          (float)(base + strength * profile[m * d + j] + 0.6 * lcg_normal(&state));
    char label[32];
    g_snprintf(label, sizeof label, "P%04zu", i);
    knnwb_matrix_set_row_label(data, i, label);
  }
  for (size_t j = 0; j < d; j++) {
    char label[32];
    g_snprintf(label, sizeof label, "S%03zu", j);
    knnwb_matrix_set_col_label(data, j, label);
    phenotype[j] = (float)(5 + 2 * profile[j] + 0.3 * lcg_normal(&state));
  }
  g_free(profile);
  return data;
}

int main(int argc, char **argv)
{
  gint64 rows = 876, cols = 295, k = 20, order = 2, threads = 0;
  char *ops_text = NULL, *backend_text = NULL, *dir_option = NULL;
  gboolean no_whole = FALSE;
  GOptionEntry entries[] = {
      {"rows", 0, 0, G_OPTION_ARG_INT64, &rows, "probes before the expansion (876)", "N"},
      {"cols", 0, 0, G_OPTION_ARG_INT64, &cols, "samples (295)", "D"},
      {"ops", 0, 0, G_OPTION_ARG_STRING, &ops_text, "metafeature operators (all)", "OPS"},
      {"k", 0, 0, G_OPTION_ARG_INT64, &k, "neighbours (20)", "K"},
      {"order", 0, 0, G_OPTION_ARG_INT64, &order, "neighbourhood order (2)", "R"},
      {"backend", 0, 0, G_OPTION_ARG_STRING, &backend_text, "auto, cpu or cuda (cuda)", "B"},
      {"threads", 0, 0, G_OPTION_ARG_INT64, &threads, "CPU threads (all)", "N"},
      {"no-whole", 0, 0, G_OPTION_ARG_NONE, &no_whole, "skip the whole-graph pipeline", NULL},
      {"dir", 0, 0, G_OPTION_ARG_FILENAME, &dir_option, "where outputs go (a temporary dir)",
       "DIR"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("- the seed workflow benchmark");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error) || rows < 2 || cols < 2 || k < 1 ||
      order < 1) {
    fprintf(stderr, "bench_workflow: %s\n", error ? error->message : "bad sizes");
    return 2;
  }
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = (size_t)k;
  options.n_threads = (int)threads;
  options.metric = KNNWB_METRIC_PEARSON;
  options.backend = KNNWB_BACKEND_CUDA;
  KnnwbMetafeatureOp ops[KNNWB_METAFEATURE_COUNT];
  size_t n_ops = 0;
  if ((backend_text && !knnwb_backend_from_string(backend_text, &options.backend, &error)) ||
      !knnwb_metafeatures_parse_ops(ops_text ? ops_text : "all", ops, &n_ops, &error)) {
    fprintf(stderr, "bench_workflow: %s\n", error->message);
    return 2;
  }
  g_autofree char *dir =
      dir_option ? g_strdup(dir_option) : g_dir_make_tmp("knnwb-bench-XXXXXX", NULL);
  g_autofree char *table_path = g_build_filename(dir, "clinical.tsv", NULL);
  g_autofree char *gml_path = g_build_filename(dir, "phenotype.gml", NULL);
  g_autofree char *ranked_path = g_build_filename(dir, "phenotype.tsv", NULL);
  g_autofree char *lists_path = g_build_filename(dir, "neighbours.tsv", NULL);

  printf("seed workflow benchmark: %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT
         ", metafeatures %s, pearson k=%" G_GINT64_FORMAT ", order %" G_GINT64_FORMAT
         ", backend %s, %u CPU threads\n",
         rows, cols, ops_text ? ops_text : "all", k, order, backend_text ? backend_text : "cuda",
         g_get_num_processors());
  gint64 total_start = g_get_monotonic_time();
  gint64 start = g_get_monotonic_time();
  g_autofree float *phenotype = g_new(float, (size_t)cols);
  KnnwbMatrix *data = make_expression((size_t)rows, (size_t)cols, phenotype);
  {
    /* The phenotype as the biologist has it: a sample sheet. */
    g_autoptr(GString) text = g_string_new("sample\tYearsToRelapse\n");
    for (gint64 j = (gint64)cols - 1; j >= 0; j--) /* another order than the matrix's */
      g_string_append_printf(text, "S%03" G_GINT64_FORMAT "\t%.4f\n", j, (double)phenotype[j]);
    g_file_set_contents(table_path, text->str, -1, NULL);
  }
  double t_generate = seconds_since(start);

  start = g_get_monotonic_time();
  KnnwbMetafeatureOptions mf;
  knnwb_metafeatures_options_init(&mf);
  mf.ops = ops;
  mf.n_ops = n_ops;
  mf.n_threads = (int)threads;
  KnnwbMatrix *expanded = NULL;
  if (!knnwb_metafeatures_expand(data, &mf, &expanded, &error)) {
    fprintf(stderr, "bench_workflow: %s\n", error->message);
    return 1;
  }
  knnwb_matrix_free(data);
  data = expanded;
  double t_metafeatures = seconds_since(start);

  start = g_get_monotonic_time();
  if (!knnwb_phenotype_append(&data, table_path, NULL, "YearsToRelapse", NULL, &error)) {
    fprintf(stderr, "bench_workflow: %s\n", error->message);
    return 1;
  }
  double t_phenotype = seconds_since(start);

  start = g_get_monotonic_time();
  const int64_t focus = (int64_t)data->n_rows - 1;
  g_autoptr(KnnwbNeighbourhood) nb = NULL;
  if (!knnwb_neighbourhood_find(data, &focus, 1, (int)order, KNNWB_DIRECTION_OUT, &options, &nb,
                                &error)) {
    fprintf(stderr, "bench_workflow: %s\n", error->message);
    return 1;
  }
  double t_neighbourhood = seconds_since(start);

  start = g_get_monotonic_time();
  if (!knnwb_neighbourhood_write_table(ranked_path, nb, data, options.metric, &error) ||
      !knnwb_neighbourhood_write_gml(gml_path, nb, data, 42, &error)) {
    fprintf(stderr, "bench_workflow: %s\n", error->message);
    return 1;
  }
  double t_write = seconds_since(start);
  double t_focused_total = seconds_since(total_start);
  guint64 digest = 14695981039346656037ull;
  digest = fnv(digest, nb->rows, nb->n_vertices * sizeof(int64_t));
  for (size_t i = 0; i < nb->n_members; i++)
    digest = fnv(digest, &nb->members[i].distance, sizeof(double));

  printf("%-44s %10s\n", "stage", "seconds");
  printf("%-44s %10.3f\n", "generate expression + sample sheet", t_generate);
  printf("%-44s %10.3f  (%zu x %zu)\n", "metafeatures", t_metafeatures, data->n_rows - 1,
         data->n_cols);
  printf("%-44s %10.3f\n", "phenotype row (table read + matched)", t_phenotype);
  printf("%-44s %10.3f  (%zu rows, %" IGRAPH_PRId " edges, %zu rows queried)\n",
         "neighbourhood (focused queries)", t_neighbourhood, nb->n_vertices,
         igraph_ecount(&nb->graph), nb->n_queries);
  printf("%-44s %10.3f\n", "GML (laid out) + ranked table", t_write);
  printf("%-44s %10.3f  digest %016" G_GINT64_MODIFIER "x\n", "focused pipeline, end to end",
         t_focused_total, digest);
  if (nb->n_members > 0)
    printf("nearest to the phenotype: %s (distance %.6f, r %.6f)\n",
           knnwb_matrix_row_label(data, (size_t)nb->members[0].row), nb->members[0].distance,
           nb->members[0].r);
  fflush(stdout);

  if (!no_whole) {
    start = g_get_monotonic_time();
    g_autoptr(KnnwbNeighbors) lists = NULL;
    if (!knnwb_knn_self(data, &options, &lists, &error)) {
      fprintf(stderr, "bench_workflow: %s\n", error->message);
      return 1;
    }
    double t_knn = seconds_since(start);
    start = g_get_monotonic_time();
    const char *const *labels = (const char *const *)data->row_labels;
    if (!knnwb_formats_write_neighbor_lists_tsv(lists_path, lists, labels, labels, &error)) {
      fprintf(stderr, "bench_workflow: %s\n", error->message);
      return 1;
    }
    double t_table = seconds_since(start);
    guint64 whole =
        fnv(14695981039346656037ull, lists->indices, lists->n_queries * lists->k * sizeof(int64_t));
    printf("%-44s %10.3f  (%s) digest %016" G_GINT64_MODIFIER "x\n",
           "whole kNN graph (knnwb_knn_self)", t_knn, lists->backend_used, whole);
    printf("%-44s %10.3f\n", "neighbour table (TSV, every row)", t_table);
    printf("%-44s %10.3f  (%.2fx the kNN step)\n", "whole-graph pipeline (kNN + table)",
           t_knn + t_table, (t_knn + t_table) / t_knn);
    g_unlink(lists_path);
  }
  knnwb_matrix_free(data);
  g_unlink(table_path);
  g_unlink(gml_path);
  g_unlink(ranked_path);
  if (dir_option == NULL)
    g_rmdir(dir);
  g_free(ops_text);
  g_free(backend_text);
  g_free(dir_option);
  return 0;
}
