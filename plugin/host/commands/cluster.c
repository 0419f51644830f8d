/*
 * `knnwb cluster INPUT --method M -o clusters.tsv`: one clustering of a matrix file without a
 * pipeline. Reads the matrix with the options of `knnwb knn`, builds what the method needs (kNN
 * lists and graph, SNN graph, exact MST), clusters, optionally compares with an annotation, and
 * writes the cluster table, its companion summary and the requested extras all or nothing.
 */
#include <knnwb/evaluation.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <glib/gstdio.h>
#include <unistd.h>
#include <knnwb/clustering.h>
#include <knnwb/community.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/graph.h>
#include "commands.h"
#include "runtime/runtime.h"
#include "options.h"

typedef enum {
  KNNWB_CLUSTER_MST_KNN,
  KNNWB_CLUSTER_COMPONENTS,
  KNNWB_CLUSTER_SINGLE_LINKAGE,
  KNNWB_CLUSTER_COMMUNITY
} KnnwbClusterKind;

/* --method: the clusterings of points, then igraph's community methods, whose values are
 * KNNWB_CLUSTER_COMMUNITY + the KnnwbCommunityMethod ("multilevel" is igraph's Louvain). */
#define KNNWB_CLUSTER_COMMUNITY_ENTRY(method, name)                                                \
  {(name), KNNWB_CLUSTER_COMMUNITY + (int)(method)},
static const KnnwbEnumName knnwb_cluster_method_names[] = {
    {"mst-knn", KNNWB_CLUSTER_MST_KNN},
    {"components", KNNWB_CLUSTER_COMPONENTS},
    {"single-linkage", KNNWB_CLUSTER_SINGLE_LINKAGE},
    KNNWB_COMMUNITY_METHOD_NAMES(KNNWB_CLUSTER_COMMUNITY_ENTRY){
        "multilevel", KNNWB_CLUSTER_COMMUNITY + KNNWB_COMMUNITY_LOUVAIN}};
static const KnnwbEnumTable knnwb_cluster_method_table =
    KNNWB_ENUM_TABLE(knnwb_cluster_method_names, 1, " or ", "--method: unknown method ",
                     " (expected ", ")", "(null)");

/* --graph: a kNN graph (KnnwbGraphMode) or the SNN graph of the kNN lists. */
#define KNNWB_CLUSTER_GRAPH_SNN (KNNWB_GRAPH_MUTUAL + 1)
static const KnnwbEnumName knnwb_cluster_graph_names[] = {
    KNNWB_GRAPH_MODE_NAMES(KNNWB_ENUM_ENTRY){"snn", KNNWB_CLUSTER_GRAPH_SNN}};
static const KnnwbEnumTable knnwb_cluster_graph_table = KNNWB_ENUM_TABLE(
    knnwb_cluster_graph_names, 0, " or ", "unknown graph mode ", ": use ", "", "(null)");

typedef struct {
  KnnwbHostInputArgs input;
  KnnwbHostKnnArgs knn;
  char *method;
  char *graph;
  char *snn_weight;
  char *similarity;
  double resolution;
  char *objective;
  gint64 seed;
  gint64 steps;
  double height;
  gint64 clusters;
  char *output;
  char *gml;
  char *graphml;
  char *newick;
  char *linkage;
  char *hierarchy;
  char *annotation;
  char *annotation_id;
  char *sample_labels;
  gboolean report;
  gboolean quiet;
  char **rest;
  /* The names above, parsed (knnwb_cluster_parse). */
  KnnwbClusterKind kind;
  KnnwbCommunityMethod community;
  int graph_kind; /* KnnwbGraphMode or KNNWB_CLUSTER_GRAPH_SNN */
  KnnwbSnnWeighting weighting;
  KnnwbSimilarity similarity_kind;
  KnnwbCommunityObjective objective_kind;
} KnnwbClusterCommand;

/* Single linkage without a cut: only the tree is wanted (--newick, --linkage), as scipy's linkage
 * and R's hclust return it; the cluster table and what needs clusters are refused. */
static gboolean knnwb_cluster_tree_only(const KnnwbClusterCommand *command)
{
  return command->kind == KNNWB_CLUSTER_SINGLE_LINKAGE && command->height < 0 &&
         command->clusters < 1;
}

/* What a run produced, for the writers and the summary. */
typedef struct {
  igraph_vector_int_t membership;
  igraph_t graph; /* what was clustered (or the tree / cluster forest), for --gml/--graphml */
  gboolean has_graph;
  igraph_vector_t distances;    /* per edge of graph */
  igraph_vector_t similarities; /* per edge of graph, when it was clustered as a weighted graph */
  gboolean has_similarities;
  igraph_matrix_t linkage;        /* single linkage */
  KnnwbMstKnnHierarchy hierarchy; /* mst-knn */
  gboolean has_hierarchy;
  double modularity;
  igraph_integer_t n_clusters;
  KnnwbHostTicker *ticker; /* the phase line after the kNN lists' progress */
  char *note;              /* e.g. what a cut by count returned and why */
  gboolean initialised;    /* membership, distances, similarities and linkage */
} KnnwbClusterResult;

/* The known classes of --annotation, one per point (-1: none), read before the clustering. */
typedef struct {
  igraph_vector_int_t classes;
  char **names;
  gboolean initialised;
  KnnwbHostAttributes attributes; /* every --annotation column, for --gml and --graphml */
} KnnwbClusterClasses;

static void knnwb_cluster_classes_clear(KnnwbClusterClasses *known)
{
  if (known->initialised)
    igraph_vector_int_destroy(&known->classes);
  g_strfreev(known->names);
  knnwb_host_attributes_clear(&known->attributes);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(KnnwbClusterClasses, knnwb_cluster_classes_clear)

/* Every file a run writes: the cluster table, its companions and the extras asked for. */
typedef enum {
  KNNWB_CLUSTER_TABLE,
  KNNWB_CLUSTER_SUMMARY,
  KNNWB_CLUSTER_CONTINGENCY,
  KNNWB_CLUSTER_GML,
  KNNWB_CLUSTER_GRAPHML,
  KNNWB_CLUSTER_LINKAGE,
  KNNWB_CLUSTER_HIERARCHY,
  KNNWB_CLUSTER_NEWICK,
  KNNWB_CLUSTER_N_TARGETS
} KnnwbClusterTarget;

/* The temporary each target is written to (NULL: not asked for); outputs owns the strings. */
typedef struct {
  GPtrArray *outputs; /* KnnwbPipelineOutput, committed at the end or discarded */
  const char *temporary[KNNWB_CLUSTER_N_TARGETS];
} KnnwbClusterOutputs;

static void knnwb_cluster_command_clear(KnnwbClusterCommand *command)
{
  knnwb_host_input_clear(&command->input);
  knnwb_host_knn_clear(&command->knn);
  g_free(command->method);
  g_free(command->graph);
  g_free(command->snn_weight);
  g_free(command->similarity);
  g_free(command->objective);
  g_free(command->output);
  g_free(command->gml);
  g_free(command->graphml);
  g_free(command->newick);
  g_free(command->linkage);
  g_free(command->hierarchy);
  g_free(command->annotation);
  g_free(command->annotation_id);
  g_free(command->sample_labels);
  g_strfreev(command->rest);
}

/* The kNN settings that the library's MST passes take besides the lists (KnnwbMstOptions and
 * KnnwbMstKnnOptions name them alike); the lists come from knnwb_cluster_lists, with all of them.
 */
#define KNNWB_CLUSTER_TAKE_KNN_SETTINGS(options, knn)                                              \
  do {                                                                                             \
    (options)->metric = (knn)->metric;                                                             \
    (options)->backend = (knn)->backend;                                                           \
    (options)->n_threads = (knn)->n_threads;                                                       \
    (options)->memory_bytes = (knn)->memory_bytes;                                                 \
    (options)->cancel = (knn)->cancel;                                                             \
  } while (0)

/* "clusters.tsv" -> "clusters<suffix>": the companion files sit beside the table. */
static char *knnwb_cluster_companion(const char *output, const char *suffix)
{
  const char *dot = strrchr(output, '.');
  const char *slash = strrchr(output, '/');
  size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - output) : strlen(output);
  return g_strdup_printf("%.*s%s", (int)stem, output, suffix);
}

/* The self kNN lists of data with k neighbours and every kNN option of the command (screen,
 * devices, budgets), with their progress line: the longest phase of every method. */
static gboolean knnwb_cluster_lists(const KnnwbMatrix *data, const KnnwbKnnOptions *knn, size_t k,
                                    gboolean quiet, KnnwbNeighbors **lists, GError **error)
{
  KnnwbHostProgress *progress = knnwb_host_progress_new("knn", quiet);
  knnwb_host_progress_set_unit(progress, "tiles");
  KnnwbKnnOptions options = *knn;
  options.k = k;
  options.progress = progress ? knnwb_host_progress_update : NULL;
  options.progress_data = progress;
  gboolean ok = knnwb_knn_self(data, &options, lists, error);
  knnwb_host_progress_finish(progress);
  return ok;
}

/* kNN lists, then the graph to cluster: directed/union/mutual with similarity weights from the
 * distances, or SNN with its own weights (clustered as they are; for the writers distance =
 * scale/w - 1, so their weight 1/(1+d) is w / scale, see knnwb_snn_weight_scale). */
static gboolean knnwb_cluster_graph(const KnnwbMatrix *data, const KnnwbKnnOptions *knn,
                                    const KnnwbClusterCommand *command, KnnwbClusterResult *result,
                                    GError **error)
{
  if (data->n_rows < 2) {
    /* One point has no neighbours: its kNN graph has no edges and it is its own cluster, as
     * mst-knn and single-linkage say (not "k = 10 but there is only one row"). */
    result->has_graph = knnwb_error_from_igraph(
        igraph_empty(&result->graph, (igraph_integer_t)data->n_rows, IGRAPH_UNDIRECTED),
        "igraph_empty", error);
    result->has_similarities = result->has_graph;
    return result->has_graph;
  }
  g_autoptr(KnnwbNeighbors) lists = NULL;
  if (!knnwb_cluster_lists(data, knn, knn->k, command->quiet, &lists, error))
    return FALSE;
  /* The graph and the clustering report no counts: a phase line (cluster_run ends it). */
  result->ticker = knnwb_host_ticker_new(command->method, command->quiet);
  if (command->graph_kind == KNNWB_CLUSTER_GRAPH_SNN) {
    const KnnwbSnnWeighting weighting = command->weighting;
    if (!knnwb_clustering_snn_graph(lists, weighting, knn->n_threads, &result->graph,
                                    &result->similarities, error))
      return FALSE;
    result->has_graph = TRUE;
    result->has_similarities = TRUE;
    igraph_integer_t m = igraph_vector_size(&result->similarities);
    if (!knnwb_error_from_igraph(igraph_vector_resize(&result->distances, m), "resize", error))
      return FALSE;
    double scale = knnwb_snn_weight_scale(weighting, lists->k);
    for (igraph_integer_t e = 0; e < m; e++)
      VECTOR(result->distances)[e] = scale / VECTOR(result->similarities)[e] - 1.0;
    return TRUE;
  }
  if (!knnwb_graph_from_neighbors(lists, (KnnwbGraphMode)command->graph_kind, &result->graph,
                                  &result->distances, error))
    return FALSE;
  result->has_graph = TRUE;
  result->has_similarities = TRUE;
  return knnwb_clustering_similarity(&result->distances, command->similarity_kind,
                                     &result->similarities, error);
}

static gboolean knnwb_cluster_single_linkage(const KnnwbMatrix *data, const KnnwbKnnOptions *knn,
                                             const KnnwbClusterCommand *command,
                                             KnnwbClusterResult *result, GError **error)
{
  KnnwbMstOptions mst;
  knnwb_clustering_mst_options_init(&mst);
  KNNWB_CLUSTER_TAKE_KNN_SETTINGS(&mst, knn);
  /* The lists here, as the library would make them (k = 16 unless -k), but with the command's
   * kNN options and progress line: the library's own pass showed none and ignored --screen,
   * --devices and --gpu-memory. */
  g_autoptr(KnnwbNeighbors) lists = NULL;
  const size_t n = data->n_rows;
  if (command->knn.k != -1)
    mst.k = knn->k;
  if (n > 1) {
    if (!knnwb_cluster_lists(data, knn, knnwb_clustering_mst_lists_k(&mst, n), command->quiet,
                             &lists, error))
      return FALSE;
    mst.neighbors = lists;
  }
  result->ticker = knnwb_host_ticker_new(command->method, command->quiet);
  if (!knnwb_clustering_mst_points(data, &mst, &result->graph, &result->distances, error))
    return FALSE;
  result->has_graph = TRUE;
  if (!knnwb_clustering_single_linkage(&result->graph, &result->distances, &result->linkage, error))
    return FALSE;
  if (knnwb_cluster_tree_only(command))
    return TRUE; /* the tree alone (--newick, --linkage): no cut, no clusters */
  if (command->height >= 0)
    return knnwb_clustering_cut_distance(&result->graph, &result->distances, command->height,
                                         &result->membership, &result->n_clusters, error);
  igraph_integer_t vertices = igraph_vcount(&result->graph);
  igraph_integer_t wanted = (igraph_integer_t)MIN(command->clusters, (gint64)MAX(vertices, 1));
  if (wanted < command->clusters)
    result->note =
        g_strdup_printf("asked for %" G_GINT64_FORMAT " clusters, but there %s only %" IGRAPH_PRId
                        " point%s: returned %" IGRAPH_PRId " singleton%s",
                        command->clusters, vertices == 1 ? "is" : "are", vertices,
                        KNNWB_PLURAL(vertices), wanted, KNNWB_PLURAL(wanted));
  return knnwb_clustering_cut_count(&result->graph, &result->distances, wanted, &result->membership,
                                    &result->n_clusters, error);
}

static gboolean knnwb_cluster_run(const KnnwbMatrix *data, const KnnwbKnnOptions *knn,
                                  const KnnwbClusterCommand *command, KnnwbClusterResult *result,
                                  GError **error)
{
  const KnnwbClusterKind kind = command->kind;
  result->modularity = NAN;
  switch (kind) {
  case KNNWB_CLUSTER_MST_KNN: {
    KnnwbMstKnnOptions options;
    knnwb_clustering_mstknn_options_init(&options);
    KNNWB_CLUSTER_TAKE_KNN_SETTINGS(&options, knn);
    if (command->knn.k != -1)
      options.list_k = knn->k;
    /* The lists here with the command's options and progress line (see single linkage), as
     * long as the library's default (max(16, floor(ln n) + 1)). */
    g_autoptr(KnnwbNeighbors) lists = NULL;
    const size_t n = data->n_rows;
    if (n > 1) {
      if (!knnwb_cluster_lists(data, knn, knnwb_clustering_mstknn_lists_k(&options, n),
                               command->quiet, &lists, error))
        return FALSE;
      options.neighbors = lists;
    }
    result->ticker = knnwb_host_ticker_new(command->method, command->quiet);
    if (!knnwb_mstknn_hierarchy_init(&result->hierarchy, error))
      return FALSE;
    result->has_hierarchy = TRUE;
    options.hierarchy = &result->hierarchy;
    if (!knnwb_clustering_mstknn_points(data, &options, &result->membership, &result->graph,
                                        &result->distances, error))
      return FALSE;
    result->has_graph = TRUE;
    break;
  }
  case KNNWB_CLUSTER_SINGLE_LINKAGE:
    if (!knnwb_cluster_single_linkage(data, knn, command, result, error))
      return FALSE;
    break;
  case KNNWB_CLUSTER_COMPONENTS:
  case KNNWB_CLUSTER_COMMUNITY:
    if (!knnwb_cluster_graph(data, knn, command, result, error))
      return FALSE;
    if (kind == KNNWB_CLUSTER_COMPONENTS) {
      if (!knnwb_clustering_components(&result->graph, &result->membership, NULL, NULL, error))
        return FALSE;
    } else {
      KnnwbCommunityOptions options;
      knnwb_community_options_init(&options);
      options.method = command->community;
      options.resolution = command->resolution;
      options.seed = (guint64)command->seed;
      options.steps = command->steps;
      options.objective = command->objective_kind;
      if (!knnwb_clustering_community(&result->graph, &result->similarities, &options,
                                      &result->membership, NULL, error))
        return FALSE;
    }
    if (!knnwb_clustering_modularity(&result->graph, &result->similarities, &result->membership,
                                     &result->modularity, error))
      return FALSE;
    break;
  }
  result->n_clusters = 0;
  for (igraph_integer_t v = 0; v < igraph_vector_int_size(&result->membership); v++)
    result->n_clusters = MAX(result->n_clusters, VECTOR(result->membership)[v] + 1);
  return TRUE;
}

/* The summary (key<TAB>value) and, with an annotation, the contingency table. */
static gboolean knnwb_cluster_write_summary(const char *path, const char *contingency_path,
                                            const KnnwbClusterCommand *command,
                                            const KnnwbMatrix *data, const KnnwbKnnOptions *knn,
                                            const KnnwbClusterResult *result,
                                            const igraph_vector_int_t *classes,
                                            char *const *class_names, GString *text, double seconds,
                                            GError **error)
{
  g_string_append_printf(text, "method\t%s\ninput\t%s\npoints\t%zu\n", command->method,
                         command->rest[0], data->n_rows);
  g_string_append_printf(text, "metric\t%s\n", knnwb_metric_to_string(knn->metric));
  if (command->kind == KNNWB_CLUSTER_MST_KNN || command->kind == KNNWB_CLUSTER_SINGLE_LINKAGE)
    g_string_append_printf(text, "graph\t%s\n",
                           command->kind == KNNWB_CLUSTER_MST_KNN
                               ? "exact MST and per-cluster kNN graphs (k chosen by MST-kNN)"
                               : "exact MST of the complete graph");
  else
    g_string_append_printf(text, "k\t%zu\ngraph\t%s\n", knn->k,
                           knnwb_enum_to_string(&knnwb_cluster_graph_table, command->graph_kind));
  g_string_append_printf(text, "clusters\t%" IGRAPH_PRId "\n", result->n_clusters);
  if (isnan(result->modularity))
    g_string_append(text, "modularity\tNA\n");
  else
    g_string_append_printf(text, "modularity\t%.6f\n", result->modularity);
  if (result->note)
    g_string_append_printf(text, "note\t%s\n", result->note);
  if (classes && !knnwb_evaluation_append(text, command->annotation, &result->membership, classes,
                                          class_names, contingency_path, error))
    return FALSE;
  g_string_append_printf(text, "seconds\t%.3f\n", seconds);
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(path, error);
  if (file == NULL)
    return FALSE;
  fputs(text->str, knnwb_atomic_file_stream(file));
  return knnwb_atomic_file_commit(g_steal_pointer(&file), error);
}

/* Every file of the run: the matrix, --labels and the annotation table; the table, its
 * companions and the extras asked for (finals, indexed by KnnwbClusterTarget), for the checks
 * every command shares. */
static KnnwbHostFiles *knnwb_cluster_files(const KnnwbClusterCommand *command, const char **finals)
{
  static const char *const roles[KNNWB_CLUSTER_N_TARGETS] = {
      [KNNWB_CLUSTER_TABLE] = "-o",
      [KNNWB_CLUSTER_SUMMARY] = "the summary of -o",
      [KNNWB_CLUSTER_CONTINGENCY] = "the contingency table of -o",
      [KNNWB_CLUSTER_GML] = "--gml",
      [KNNWB_CLUSTER_GRAPHML] = "--graphml",
      [KNNWB_CLUSTER_LINKAGE] = "--linkage",
      [KNNWB_CLUSTER_HIERARCHY] = "--hierarchy",
      [KNNWB_CLUSTER_NEWICK] = "--newick"};
  KnnwbHostFiles *files = knnwb_host_files_new();
  knnwb_host_input_files(files, command->rest[0], &command->input);
  g_autofree char *annotation_table = knnwb_host_spec_table(command->annotation);
  knnwb_host_files_side_input(files, annotation_table, "--annotation");
  for (int t = 0; t < KNNWB_CLUSTER_N_TARGETS; t++)
    knnwb_host_files_output(files, finals[t], roles[t]);
  return files;
}

/* The targets of a run (finals, indexed by KnnwbClusterTarget), their names as given. */
static void knnwb_cluster_finals(const KnnwbClusterCommand *command, char **companions,
                                 const char **finals)
{
  /* Single linkage without a cut has no table, so no companions either. */
  companions[0] = command->output ? knnwb_cluster_companion(command->output, ".summary.tsv") : NULL;
  companions[1] = command->output && command->annotation
                      ? knnwb_cluster_companion(command->output, ".contingency.tsv")
                      : NULL;
  const char *given[KNNWB_CLUSTER_N_TARGETS] = {
      [KNNWB_CLUSTER_TABLE] = command->output,        [KNNWB_CLUSTER_SUMMARY] = companions[0],
      [KNNWB_CLUSTER_CONTINGENCY] = companions[1],    [KNNWB_CLUSTER_GML] = command->gml,
      [KNNWB_CLUSTER_GRAPHML] = command->graphml,     [KNNWB_CLUSTER_LINKAGE] = command->linkage,
      [KNNWB_CLUSTER_HIERARCHY] = command->hierarchy, [KNNWB_CLUSTER_NEWICK] = command->newick};
  memcpy(finals, given, sizeof given);
}

/* The checks every command shares, on the names alone (usage errors: an empty path). */
static gboolean knnwb_cluster_check_names(const KnnwbClusterCommand *command, GError **error)
{
  char *companions[2] = {NULL, NULL};
  const char *finals[KNNWB_CLUSTER_N_TARGETS];
  knnwb_cluster_finals(command, companions, finals);
  g_autoptr(KnnwbHostFiles) files = knnwb_cluster_files(command, finals);
  gboolean ok = knnwb_host_files_check_names(files, error);
  g_free(companions[0]);
  g_free(companions[1]);
  return ok;
}

/* The targets of a run, checked before anything is read, like every command's (a long run must
 * not end with "cannot write"): each is absent or a regular file in a directory that takes files
 * (its temporary is created and removed now), none is an input of the run (the matrix, --labels,
 * the annotation table), and no two are one file (`out.tsv`, `./out.tsv`, a hard link). Under
 * mpirun only rank 0 (the writer) writes, so the other ranks check their inputs alone. */
static gboolean knnwb_cluster_outputs_prepare(const KnnwbClusterCommand *command, gboolean writer,
                                              KnnwbClusterOutputs *outputs, GError **error)
{
  char *companions[2] = {NULL, NULL};
  const char *finals[KNNWB_CLUSTER_N_TARGETS] = {NULL};
  if (writer)
    knnwb_cluster_finals(command, companions, finals);
  g_autoptr(KnnwbHostFiles) files = knnwb_cluster_files(command, finals);
  gboolean ok = knnwb_host_files_check(files, error);
  for (int t = 0; ok && t < KNNWB_CLUSTER_N_TARGETS; t++)
    if (finals[t] != NULL && (outputs->temporary[t] = knnwb_host_outputs_add(
                                  outputs->outputs, finals[t], error)) == NULL)
      ok = FALSE;
  g_free(companions[0]);
  g_free(companions[1]);
  return ok;
}

/* Writes every target's temporary; the caller commits them, or discards them on failure. */
static gboolean knnwb_cluster_write(const KnnwbClusterCommand *command, const KnnwbMatrix *data,
                                    const KnnwbKnnOptions *knn, const KnnwbClusterResult *result,
                                    const KnnwbClusterClasses *known, double seconds,
                                    GString *summary, const KnnwbClusterOutputs *outputs,
                                    GError **error)
{
  const char *const *temporary = outputs->temporary;
  const char *const *labels = (const char *const *)data->row_labels;
  const gboolean have_classes = known->initialised;
  char *const *class_names = known->names;
  const igraph_vector_int_t *classes = &known->classes;
  /* Single linkage without a cut writes the tree alone: no table, no summary. */
  const gboolean table = temporary[KNNWB_CLUSTER_TABLE] != NULL;
  gboolean ok = !table || knnwb_formats_write_labels_tsv(temporary[KNNWB_CLUSTER_TABLE],
                                                         &result->membership, labels, error);
  ok = ok && (!table ||
              knnwb_cluster_write_summary(
                  temporary[KNNWB_CLUSTER_SUMMARY],
                  have_classes ? temporary[KNNWB_CLUSTER_CONTINGENCY] : NULL, command, data, knn,
                  result, have_classes ? classes : NULL, class_names, summary, seconds, error));
  /* The layout of a graph output polls the run's cancel flag (and shows no progress). */
  KnnwbWriteControl control = {.cancel = knn->cancel};
  g_autofree KnnwbNodeAttribute *attributes =
      knnwb_host_attributes_nodes(&known->attributes, NULL, data->n_rows, NULL);
  for (int format = 0; ok && format < 2; format++) {
    const char *path = temporary[format == 0 ? KNNWB_CLUSTER_GML : KNNWB_CLUSTER_GRAPHML];
    if (!path)
      continue;
    KnnwbGraphOutput output = {.graph = &result->graph,
                               .weights = &result->distances,
                               .labels = labels,
                               .membership = &result->membership,
                               .control = &control,
                               .attributes = attributes,
                               .n_attributes = known->attributes.n};
    ok = knnwb_formats_write_graph(path, format == 0 ? KNNWB_OUTPUT_GML : KNNWB_OUTPUT_GRAPHML,
                                   &output, error);
  }
  if (ok && command->linkage)
    ok = knnwb_formats_write_linkage(temporary[KNNWB_CLUSTER_LINKAGE], &result->linkage, error);
  if (ok && command->hierarchy)
    ok = knnwb_formats_write_hierarchy_tsv(temporary[KNNWB_CLUSTER_HIERARCHY],
                                           &result->hierarchy.parent, &result->hierarchy.size,
                                           &result->hierarchy.k, &result->hierarchy.cluster, error);
  if (ok && command->newick) {
    /* single linkage: the dendrogram; mst-knn: the split hierarchy. */
    g_autofree char *text =
        result->has_hierarchy
            ? knnwb_mstknn_hierarchy_newick(&result->hierarchy, &result->membership, labels, error)
            : knnwb_clustering_newick(&result->linkage, igraph_vcount(&result->graph), labels,
                                      error);
    ok = text != NULL;
    g_autoptr(KnnwbAtomicFile) file =
        ok ? knnwb_atomic_file_open(temporary[KNNWB_CLUSTER_NEWICK], error) : NULL;
    ok = ok && file != NULL;
    if (ok) {
      fputs(text, knnwb_atomic_file_stream(file));
      ok = knnwb_atomic_file_commit(g_steal_pointer(&file), error);
    }
  }
  return ok;
}

/* Numbers out of their range, named as given: the walk length (the bound the library and the
 * community step share), a cut height that is not a distance (NaN compared false with everything
 * and cut at no height), and rows dropped where the exact MST needs every row. */
static gboolean knnwb_cluster_check_numbers(const KnnwbClusterCommand *command, GError **error)
{
  if (command->steps < 1 || command->steps > KNNWB_COMMUNITY_MAX_STEPS) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--steps %" G_GINT64_FORMAT ": walktrap's walk length must be 1 to %d",
                command->steps, KNNWB_COMMUNITY_MAX_STEPS);
    return FALSE;
  }
  /* -1, the default, stands for no --height. */
  if (command->height != -1 && !(isfinite(command->height) && command->height >= 0)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--height %g: a cut height must be a finite distance, 0 or more", command->height);
    return FALSE;
  }
  const gboolean exact_mst =
      command->kind == KNNWB_CLUSTER_MST_KNN || command->kind == KNNWB_CLUSTER_SINGLE_LINKAGE;
  if (exact_mst && (command->input.drop_missing || command->knn.drop_degenerate)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--method %s with %s: %s builds the exact minimum spanning tree over every row, "
                "and a dropped row has no distances to join it; remove those rows from the input "
                "instead",
                command->method,
                command->input.drop_missing ? "--drop-missing" : "--drop-degenerate",
                command->method);
    return FALSE;
  }
  return TRUE;
}

/* Option combinations that cannot work are usage errors, found before anything is read. */
static gboolean knnwb_cluster_check(const KnnwbClusterCommand *command, GError **error)
{
  const KnnwbClusterKind kind = command->kind;
  const gboolean snn = command->graph_kind == KNNWB_CLUSTER_GRAPH_SNN;
  const char *problem = NULL;
  if (!knnwb_cluster_check_numbers(command, error))
    return FALSE;
  if (command->height >= 0 && command->clusters > 0)
    problem = "--height and --clusters: give one of them, not both (a cut is either at a "
              "distance or by count)";
  else if (knnwb_cluster_tree_only(command) &&
           (command->output || command->gml || command->graphml || command->annotation ||
            command->report))
    problem = "single-linkage: the cluster table (-o), --gml, --graphml, --annotation and --report "
              "need a cut, --height H (at distance H) or --clusters N; --newick and --linkage "
              "alone write the whole tree";
  else if (kind != KNNWB_CLUSTER_SINGLE_LINKAGE && (command->height >= 0 || command->clusters > 0))
    problem = "--height and --clusters apply to --method single-linkage only";
  else if (kind != KNNWB_CLUSTER_SINGLE_LINKAGE && command->linkage)
    problem = "--linkage (the dendrogram) needs --method single-linkage";
  else if (kind != KNNWB_CLUSTER_SINGLE_LINKAGE && kind != KNNWB_CLUSTER_MST_KNN && command->newick)
    problem = "--newick needs --method single-linkage (the dendrogram) or mst-knn (the split "
              "hierarchy)";
  else if (kind != KNNWB_CLUSTER_MST_KNN && command->hierarchy)
    problem = "--hierarchy (the split table) needs --method mst-knn";
  else if ((kind == KNNWB_CLUSTER_MST_KNN || kind == KNNWB_CLUSTER_SINGLE_LINKAGE) &&
           command->graph)
    problem = "--graph applies to components, leiden, louvain and walktrap (mst-knn and "
              "single-linkage use the exact MST)";
  else if (command->graph && !snn && command->snn_weight)
    problem = "--snn-weight needs --graph snn";
  else if (snn && command->similarity)
    problem = "--similarity applies to distance graphs; SNN graphs have their own weights";
  else if (command->annotation &&
           (command->annotation[0] == '\0' ||
            (strchr(command->annotation, ':') &&
             (strrchr(command->annotation, ':')[1] == '\0' || command->annotation[0] == ':'))))
    problem = "--annotation must be TABLE:COLUMN (a file and a column name or number) or the name "
              "of a sample annotation of INPUT";
  else if (command->annotation_id && !command->annotation)
    problem = "--annotation-id names the column of row names of the --annotation table";
  else if (!(command->resolution > 0))
    problem = "--resolution must be positive";
  if (problem) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "%s", problem);
    return FALSE;
  }
  return TRUE;
}

/* The names among the options (usage errors), each defaulted when not given. */
static gboolean knnwb_cluster_parse_names(KnnwbClusterCommand *command, GError **error)
{
  int method = 0, graph = KNNWB_GRAPH_UNION, weighting = KNNWB_SNN_RANK;
  int similarity = KNNWB_SIMILARITY_INVERSE, objective = KNNWB_OBJECTIVE_MODULARITY;
  if (!knnwb_enum_from_string(&knnwb_cluster_method_table, command->method, &method, error) ||
      (command->graph &&
       !knnwb_enum_from_string(&knnwb_cluster_graph_table, command->graph, &graph, error)) ||
      (command->snn_weight && !knnwb_enum_from_string(&knnwb_snn_weighting_table,
                                                      command->snn_weight, &weighting, error)) ||
      (command->similarity &&
       !knnwb_enum_from_string(&knnwb_similarity_table, command->similarity, &similarity, error)) ||
      (command->objective &&
       !knnwb_host_option_choice(&knnwb_community_objective_table, "--objective",
                                 command->objective, &objective, error)))
    return FALSE;
  command->kind = (KnnwbClusterKind)MIN(method, (int)KNNWB_CLUSTER_COMMUNITY);
  command->community = (KnnwbCommunityMethod)MAX(method - (int)KNNWB_CLUSTER_COMMUNITY, 0);
  command->graph_kind = graph;
  command->weighting = (KnnwbSnnWeighting)weighting;
  command->similarity_kind = (KnnwbSimilarity)similarity;
  command->objective_kind = (KnnwbCommunityObjective)objective;
  return TRUE;
}

/* The options of knnwb cluster, into command (its defaults set here). */
static GOptionContext *knnwb_cluster_options_new(KnnwbClusterCommand *command)
{
  *command = (KnnwbClusterCommand){
      .knn = {.k = -1}, .resolution = 1.0, .seed = 42, .steps = 4, .height = -1};
  GOptionContext *context = g_option_context_new("--method METHOD -o OUT");
  GOptionEntry entries[] = {
      {"method", 'M', 0, G_OPTION_ARG_STRING, &command->method,
       knnwb_host_help_choices(&knnwb_cluster_method_table, "", "", NULL, ""), "METHOD"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &command->output,
       "The cluster table (TSV: row, label, cluster, size); OUT.summary.tsv and, with "
       "--annotation, OUT.contingency.tsv are written beside it",
       "OUT"},
      {"graph", 'g', 0, G_OPTION_ARG_STRING, &command->graph,
       knnwb_host_help_choices(&knnwb_cluster_graph_table, "Graph to cluster (default union): ", "",
                               NULL, ""),
       "MODE"},
      {"snn-weight", 0, 0, G_OPTION_ARG_STRING, &command->snn_weight,
       knnwb_host_help_choices(&knnwb_snn_weighting_table,
                               "SNN edge weights as R bluster: ", " (default)", NULL, ""),
       "W"},
      {"similarity", 0, 0, G_OPTION_ARG_STRING, &command->similarity,
       knnwb_host_help_choices(&knnwb_similarity_table, "Distance to weight: ",
                               " (default, 1/(1+d))", NULL, "; exp is exp(-d/mean d)"),
       "S"},
      {"resolution", 0, 0, G_OPTION_ARG_DOUBLE, &command->resolution,
       "Leiden/Louvain resolution (default 1)", "R"},
      {"objective", 0, 0, G_OPTION_ARG_STRING, &command->objective,
       knnwb_host_help_choices(&knnwb_community_objective_table, "Leiden objective: ", " (default)",
                               NULL, ""),
       "OBJ"},
      {"seed", 0, 0, G_OPTION_ARG_INT64, &command->seed, "Random seed (default 42)", "N"},
      {"steps", 0, 0, G_OPTION_ARG_INT64, &command->steps,
       "Walktrap walk length, 1 to 1000000 (default 4)", "N"},
      {"height", 0, 0, G_OPTION_ARG_DOUBLE, &command->height,
       "single-linkage: cut at this distance", "H"},
      {"clusters", 0, 0, G_OPTION_ARG_INT64, &command->clusters,
       "single-linkage: cut into this many clusters", "N"},
      {"gml", 0, 0, G_OPTION_ARG_FILENAME, &command->gml,
       "Also write the clustered graph (or tree) as GML for yEd, coloured by cluster", "FILE"},
      {"graphml", 0, 0, G_OPTION_ARG_FILENAME, &command->graphml, "Also write it as GraphML",
       "FILE"},
      {"newick", 0, 0, G_OPTION_ARG_FILENAME, &command->newick,
       "single-linkage: the dendrogram as Newick (ape::read.tree, Bio.Phylo); mst-knn: the split "
       "hierarchy",
       "FILE"},
      {"hierarchy", 0, 0, G_OPTION_ARG_FILENAME, &command->hierarchy,
       "mst-knn: the split hierarchy as TSV (node, parent, size, k, cluster)", "FILE"},
      {"linkage", 0, 0, G_OPTION_ARG_FILENAME, &command->linkage,
       "single-linkage: scipy linkage matrix, .npy or TSV", "FILE"},
      {"annotation", 'a', 0, G_OPTION_ARG_STRING, &command->annotation,
       "Known classes: a table's column, rows matched by label, or a bare COLUMN of INPUT's own "
       "sample annotation (a GEO characteristic); adds ARI, NMI and a contingency table (rows "
       "without a value are left out, with a warning). Several columns (TABLE:A,B or A,B): all "
       "become node attributes of --gml/--graphml, the first is compared",
       "TABLE:COLUMN[,COLUMN]"},
      {"annotation-id", 0, 0, G_OPTION_ARG_STRING, &command->annotation_id,
       "The --annotation table's column of row names (default: its first column)", "COLUMN"},
      {"sample-labels", 0, 0, G_OPTION_ARG_STRING, &command->sample_labels,
       "Name the rows (samples) by this sample annotation of INPUT (e.g. Sample_title of a GEO "
       "series matrix read --transpose)",
       "COLUMN"},
      {"report", 'r', 0, G_OPTION_ARG_NONE, &command->report, "Print the summary to stdout", NULL},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &command->quiet, "No progress or summary line", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &command->rest, NULL, "INPUT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_option_context_set_summary(
      context,
      "Clusters the rows of INPUT (any input `knnwb knn` reads):\n"
      "  mst-knn         MST-kNN (Inostroza-Ponta et al.; the R package mstknnclust); its splits:\n"
      "                  --hierarchy, --newick\n"
      "  components      connected components of the kNN graph\n"
      "  single-linkage  cut of the exact MST (--height or --clusters); its tree: --newick,\n"
      "                  --linkage (without a cut: the tree alone, no -o)\n"
      "  leiden, louvain, walktrap  igraph's community detection on the kNN or SNN graph, with\n"
      "                  distances turned into similarity weights (--similarity)\n"
      "-k defaults to 10 (components and the graph methods); mst-knn chooses its own k.");
  g_option_context_set_description(
      context, "Example:\n"
               "  knnwb cluster expr.tsv --method leiden --graph snn -k 10 -o clusters.tsv \\\n"
               "      --gml clusters.gml --annotation samples.tsv:group --report\n\n"
               "Exit status: 0 on success, 1 when the input or the run fails, 2 on a usage error, "
               "130/143 when\ninterrupted. Outputs are written all or nothing.");
  knnwb_host_input_add_entries(context, &command->input);
  knnwb_host_knn_add_entries(context, &command->knn);
  g_option_context_add_main_entries(context, entries, NULL);
  return context;
}

/* The command line into command, knn and read (usage errors). */
static gboolean knnwb_cluster_parse(GOptionContext *context, int argc, char **argv,
                                    KnnwbClusterCommand *command, KnnwbKnnOptions *knn,
                                    KnnwbReadOptions *read, GError **error)
{
  if (!knnwb_host_options_parse(context, "cluster", &argc, &argv, error) ||
      !knnwb_host_one_input(command->rest, error) ||
      !knnwb_host_required(command->method != NULL, "--method METHOD", error) ||
      !knnwb_cluster_parse_names(command, error) ||
      !knnwb_host_required(command->output != NULL ||
                               (knnwb_cluster_tree_only(command) &&
                                (command->newick != NULL || command->linkage != NULL)),
                           "-o OUT", error) ||
      !knnwb_host_knn_options(&command->knn, FALSE, knn, error) ||
      !knnwb_host_input_options(&command->input, read, error) ||
      !knnwb_cluster_check(command, error) || !knnwb_cluster_check_names(command, error))
    return FALSE;
  if (command->knn.k == -1)
    knn->k = 10;
  knn->data_name = command->rest[0];
  return TRUE;
}

/* The result's vectors, empty; on failure none is left allocated. */
static igraph_error_t knnwb_cluster_result_init(KnnwbClusterResult *result)
{
  IGRAPH_CHECK(igraph_vector_int_init(&result->membership, 0));
  IGRAPH_FINALLY(igraph_vector_int_destroy, &result->membership);
  IGRAPH_CHECK(igraph_vector_init(&result->distances, 0));
  IGRAPH_FINALLY(igraph_vector_destroy, &result->distances);
  IGRAPH_CHECK(igraph_vector_init(&result->similarities, 0));
  IGRAPH_FINALLY(igraph_vector_destroy, &result->similarities);
  IGRAPH_CHECK(igraph_matrix_init(&result->linkage, 0, 0));
  IGRAPH_FINALLY_CLEAN(3);
  result->initialised = TRUE;
  return IGRAPH_SUCCESS;
}

static void knnwb_cluster_result_clear(KnnwbClusterResult *result)
{
  if (result->has_graph)
    igraph_destroy(&result->graph);
  if (result->initialised) {
    igraph_vector_int_destroy(&result->membership);
    igraph_vector_destroy(&result->distances);
    igraph_vector_destroy(&result->similarities);
    igraph_matrix_destroy(&result->linkage);
  }
  if (result->has_hierarchy)
    knnwb_mstknn_hierarchy_destroy(&result->hierarchy);
  g_free(result->note);
}

/* Reads, clusters, writes every target and commits them (the last thing: refused when a signal
 * arrived during the writes); prints the note, the report and the summary line. */
/* The matrix, --sample-labels and the annotation's classes (and attributes for --gml/--graphml),
 * read by this rank. */
static gboolean knnwb_cluster_read(KnnwbClusterCommand *command, KnnwbKnnOptions *knn,
                                   KnnwbReadOptions *read_options, KnnwbMatrix **data,
                                   KnnwbClusterClasses *known, GError **error)
{
  read_options->rank_rows = knn->metric == KNNWB_METRIC_SPEARMAN;
  void *read_progress = knnwb_host_input_watch(read_options, knn->cancel, command->quiet);
  gboolean read = knnwb_formats_read_matrix(command->rest[0], read_options, data, NULL, error);
  knnwb_host_progress_finish(read_progress);
  if (!read)
    return FALSE;
  if (command->sample_labels != NULL &&
      !knnwb_host_sample_labels(*data, KNNWB_MATRIX_ROWS, command->sample_labels, command->rest[0],
                                error))
    return FALSE;
  /* The classes before the clustering: a table that names no row fails now, not after it. */
  if (command->annotation == NULL)
    return TRUE;
  if (!knnwb_error_from_igraph(igraph_vector_int_init(&known->classes, 0), "vector init", error))
    return FALSE;
  known->initialised = TRUE;
  g_autofree char *first = knnwb_host_annotation_first(command->annotation, *data);
  return knnwb_host_annotation_classes(first, command->annotation_id, "--annotation",
                                       "--annotation-id", *data, command->rest[0], &known->classes,
                                       &known->names, error) &&
         ((command->gml == NULL && command->graphml == NULL) ||
          knnwb_host_attributes_read(command->annotation, command->annotation_id, "--annotation-id",
                                     *data, (const char *const *)(*data)->row_labels,
                                     (*data)->n_rows, command->rest[0], &known->attributes, error));
}

/* Under mpirun every rank reads the whole input and the kNN lists are computed together (the
 * command's kNN options carry the group: collective); each rank then clusters its copy of the
 * lists and rank 0 alone writes. The ranks agree after each step that one rank may fail alone
 * (its file system, an allocation, an NPY read that checks only this rank's share of the rows for
 * NaN) before the next collective, so that no rank waits for one that returned. */
static gboolean knnwb_cluster_execute(KnnwbClusterCommand *command, KnnwbKnnOptions *knn,
                                      KnnwbReadOptions *read_options, KnnwbClusterOutputs *outputs,
                                      KnnwbClusterResult *result, GError **error)
{
  const KnnwbKnnGroup *group = knn->group != NULL && knn->group->size > 1 ? knn->group : NULL;
  const gboolean writer = group == NULL || group->rank == 0;
  gboolean ready =
      knnwb_error_from_igraph(knnwb_cluster_result_init(result), "cluster result", error) &&
      knnwb_cluster_outputs_prepare(command, writer, outputs, error);
  if (group != NULL && !group->agree(group, ready, error))
    return FALSE;
  if (!ready)
    return FALSE;
  gint64 start = g_get_monotonic_time();
  g_autoptr(KnnwbMatrix) data = NULL;
  g_auto(KnnwbClusterClasses) known = {0};
  gboolean read = knnwb_cluster_read(command, knn, read_options, &data, &known, error);
  if (group != NULL && !group->agree(group, read, error))
    return FALSE;
  if (!read)
    return FALSE;
  gint64 read_done = g_get_monotonic_time();
  if (command->knn.k == -1 && data->n_rows >= 2)
    knn->k = MIN(knn->k, data->n_rows - 1);
  gboolean clustered = knnwb_cluster_run(data, knn, command, result, error);
  knnwb_host_ticker_free(g_steal_pointer(&result->ticker));
  if (!clustered && (*error)->domain == KNNWB_ERROR && (*error)->code != KNNWB_ERROR_CANCELLED)
    g_prefix_error(error, "%s: ", command->rest[0]);
  /* The command's searches are over: its GPUs are given back while the outputs are written (main
   * waits for that before the exit). */
  knnwb_knn_devices_release();
  double seconds = (double)(g_get_monotonic_time() - read_done) / 1e6;
  g_autoptr(GString) summary = g_string_new(NULL);
  /* A clustering that failed on one rank alone (after the lists' collectives) is agreed with the
   * writes. */
  gboolean written =
      clustered && (!writer || knnwb_cluster_write(command, data, knn, result, &known, seconds,
                                                   summary, outputs, error));
  if (group != NULL && !group->agree(group, written, error))
    written = FALSE;
  if (!written || !knnwb_host_commit_agreed(group, writer, outputs->outputs, knn->cancel, error))
    return FALSE;
  if (result->note)
    g_printerr("knnwb: %s\n", result->note);
  if (command->report)
    fputs(summary->str, stdout);
  if (!command->quiet && knnwb_cluster_tree_only(command))
    g_printerr(
        "knnwb: %zu row%s, %s: the tree -> %s%s%s (read %.2f s, cluster %.2f s)\n", data->n_rows,
        KNNWB_PLURAL(data->n_rows), command->method, command->newick ? command->newick : "",
        command->newick && command->linkage ? ", " : "", command->linkage ? command->linkage : "",
        (double)(read_done - start) / 1e6, seconds);
  else if (!command->quiet)
    g_printerr("knnwb: %zu row%s, %s: %" IGRAPH_PRId " cluster%s -> %s (read %.2f s, cluster "
               "%.2f s)\n",
               data->n_rows, KNNWB_PLURAL(data->n_rows), command->method, result->n_clusters,
               KNNWB_PLURAL(result->n_clusters), command->output, (double)(read_done - start) / 1e6,
               seconds);
  return TRUE;
}

int knnwb_host_command_cluster(int argc, char **argv)
{
  KnnwbClusterCommand command;
  g_autoptr(GOptionContext) context = knnwb_cluster_options_new(&command);
  g_autoptr(GError) error = NULL;
  KnnwbKnnOptions knn;
  knnwb_knn_options_init(&knn);
  KnnwbReadOptions read_options;
  knnwb_formats_read_options_init(&read_options);
  KnnwbClusterResult result = {0};
  g_autoptr(GPtrArray) output_list = g_ptr_array_new_with_free_func(knnwb_host_output_free);
  KnnwbClusterOutputs outputs = {.outputs = output_list};
  const gboolean parsed =
      knnwb_cluster_parse(context, argc, argv, &command, &knn, &read_options, &error);
  if (parsed) {
    knn.cancel = knnwb_host_signals_install();
    knnwb_host_log_set_quiet(command.quiet);
  }
  const gboolean done =
      parsed && knnwb_cluster_execute(&command, &knn, &read_options, &outputs, &result, &error);
  const int status = knnwb_host_command_finish("cluster", parsed, done, outputs.outputs, error);
  knnwb_cluster_result_clear(&result);
  knnwb_cluster_command_clear(&command);
  return status;
}
