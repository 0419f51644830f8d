/* Step write-graph: a graph (optionally coloured by a clustering) as .knn, yEd GML, GraphML or a
 * neighbour table. */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include "pipeline/value.h"
#include "steps/steps_internal.h"

enum { PATH, FORMAT, LAYOUT, SEED, NODE_SIZE, FOCUS, N_PARAMS };

static const KnnwbParamSpec knnwb_write_graph_params[N_PARAMS] = {
    [PATH] = {"path", KNNWB_PARAM_OUTPUT_FILE, NULL, 1, 0, NULL, "the file to write"},
    [FORMAT] = {"format", KNNWB_PARAM_CHOICE, "auto", 1, 0,
                KNNWB_ENUM_CHOICES(KNNWB_OUTPUT_GRAPH_NAMES),
                "auto: from the extension (.knn .gml .graphml .labels.tsv .tsv .mtx)"},
    [LAYOUT] = {"layout", KNNWB_PARAM_CHOICE, "auto", 1, 0, KNNWB_ENUM_CHOICES(KNNWB_LAYOUT_NAMES),
                "GML/GraphML node coordinates (auto: fr up to 20,000 vertices, none above)"},
    [SEED] = {"seed", KNNWB_PARAM_INT, "42", 0, 4294967295.0, NULL, "layout random seed"},
    [NODE_SIZE] = {"node-size", KNNWB_PARAM_DOUBLE, "30", 1, 1000, NULL, "GML node size"},
    [FOCUS] = {"focus", KNNWB_PARAM_STRING, "", 1, 0, NULL,
               "comma-separated row labels to highlight (the seed's \"dummy probe\")"},
};

static const KnnwbPortSpec knnwb_write_graph_inputs[] = {
    {"graph", KNNWB_KIND_GRAPH, TRUE, "the graph (default: the clustering's own graph)"},
    {"clusters", KNNWB_KIND_CLUSTERING, TRUE, "colours the nodes by cluster"},
};

/* The vertices labelled in text (comma-separated labels, each stripped), in its order, appended
 * to focus. Errors: KNNWB_ERROR_INVALID_ARGUMENT for a label no vertex has; KNNWB_ERROR_NO_MEMORY.
 * O(labels in text x n_vertices). */
static gboolean knnwb_write_graph_focus(const char *text, const char *const *labels,
                                        igraph_integer_t n_vertices, igraph_vector_int_t *focus,
                                        GError **error)
{
  g_auto(GStrv) wanted = g_strsplit(text, ",", -1);
  for (char **w = wanted; *w; w++) {
    g_strstrip(*w);
    igraph_integer_t found = -1;
    for (igraph_integer_t v = 0; labels != NULL && v < n_vertices && found < 0; v++)
      if (labels[v] != NULL && strcmp(labels[v], *w) == 0)
        found = v;
    if (found < 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "focus: no vertex is labelled '%s'", *w);
      return FALSE;
    }
    if (!knnwb_error_from_igraph(igraph_vector_int_push_back(focus, found),
                                 "igraph_vector_int_push_back", error))
      return FALSE;
  }
  return TRUE;
}

/* The format: the parameter, else the extension (validation finds a name no writer knows before
 * any step runs; the run writes a temporary with the same extension). */
static gboolean knnwb_write_graph_check(const KnnwbParamValue *params, GError **error)
{
  KnnwbOutputFormat format;
  return knnwb_formats_output_from_string(params[FORMAT].v_string, &format, error) &&
         (format != KNNWB_OUTPUT_AUTO || params[PATH].v_string == NULL ||
          knnwb_formats_output_from_path(params[PATH].v_string, &format, error));
}

static gboolean knnwb_write_graph_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbParamValue *p = context->params;
  const KnnwbValue *graph_value = context->inputs[0];
  const KnnwbValue *clusters = context->inputs[1];
  if (graph_value == NULL && clusters != NULL)
    graph_value = clusters->has_graph ? clusters : clusters->source_graph;
  if (graph_value == NULL || !graph_value->has_graph) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "no graph to write: connect input 'graph' (or a clustering that has one)");
    return FALSE;
  }
  const igraph_t *graph = &graph_value->graph;
  if (clusters != NULL && igraph_vector_int_size(&clusters->membership) != igraph_vcount(graph)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the clustering has %" IGRAPH_PRId " point%s but the graph %" IGRAPH_PRId " vert%s",
                igraph_vector_int_size(&clusters->membership),
                KNNWB_PLURAL(igraph_vector_int_size(&clusters->membership)), igraph_vcount(graph),
                igraph_vcount(graph) == 1 ? "ex" : "ices");
    return FALSE;
  }
  KnnwbOutputFormat format;
  if (!knnwb_formats_output_from_string(p[FORMAT].v_string, &format, error))
    return FALSE;
  KnnwbDrawingOptions gml;
  knnwb_drawing_options_init(&gml);
  if (!knnwb_drawing_layout_from_string(p[LAYOUT].v_string, &gml.layout, error))
    return FALSE;
  gml.seed = (unsigned long)p[SEED].v_int;
  gml.node_size = p[NODE_SIZE].v_double;
  const char *const *labels = knnwb_pipeline_value_labels(graph_value);
  if (labels == NULL && clusters != NULL)
    labels = knnwb_pipeline_value_labels(clusters);

  igraph_vector_int_t focus;
  if (!knnwb_error_from_igraph(igraph_vector_int_init(&focus, 0), "igraph_vector_int_init", error))
    return FALSE;
  gboolean ok = TRUE;
  if (p[FOCUS].v_string != NULL && *p[FOCUS].v_string != '\0') {
    ok = knnwb_write_graph_focus(p[FOCUS].v_string, labels, igraph_vcount(graph), &focus, error);
    gml.focus = &focus;
  }
  if (ok) {
    KnnwbWriteControl control = {.n_threads = context->n_threads,
                                 .cancel = context->cancel,
                                 .progress = context->progress,
                                 .progress_data = context->progress_data};
    KnnwbGraphOutput output = {.graph = graph,
                               .weights = &graph_value->weights,
                               .labels = labels,
                               .membership = clusters ? &clusters->membership : NULL,
                               .gml = &gml,
                               .control = &control};
    ok = knnwb_formats_write_graph(p[PATH].v_string, format, &output, error);
  }
  igraph_vector_int_destroy(&focus);
  return ok;
}

const KnnwbStepType knnwb_step_write_graph = {
    "write-graph",
    "write a graph: .knn, yEd GML, GraphML, Matrix Market or a neighbour table",
    knnwb_write_graph_inputs,
    G_N_ELEMENTS(knnwb_write_graph_inputs),
    knnwb_write_graph_params,
    N_PARAMS,
    KNNWB_KIND_NONE,
    knnwb_write_graph_run,
    0,
    knnwb_write_graph_check,
};
