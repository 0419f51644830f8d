/* Step evaluate: a clustering against known classes (ARI, NMI, contingency table) and the
 * modularity of the graph it came from. */
#include <knnwb/evaluation.h>
#include <math.h>
#include <knnwb/atomic_file.h>
#include <knnwb/community.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include "pipeline/value.h"
#include "steps/steps_internal.h"

enum { ANNOTATION, COLUMN, PATH, CONTINGENCY, N_PARAMS };

static const KnnwbParamSpec knnwb_evaluate_params[N_PARAMS] = {
    [ANNOTATION] = {"annotation", KNNWB_PARAM_INPUT_FILE, NULL, 1, 0, NULL,
                    "TSV/CSV table with a header; its first column holds the row labels"},
    [COLUMN] = {"column", KNNWB_PARAM_STRING, NULL, 1, 0, NULL,
                "the column of known classes: a header name or a number counted from 1"},
    [PATH] = {"path", KNNWB_PARAM_OUTPUT_FILE, NULL, 1, 0, NULL,
              "the summary (key<TAB>value: clusters, modularity, ari, nmi, ...)"},
    [CONTINGENCY] = {"contingency", KNNWB_PARAM_OUTPUT_FILE, "", 1, 0, NULL,
                     "the contingency table (clusters x classes)"},
};

static const KnnwbPortSpec knnwb_evaluate_inputs[] = {
    {"clusters", KNNWB_KIND_CLUSTERING, FALSE, "the clustering"},
};

static gboolean knnwb_evaluate_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *clusters = context->inputs[0];
  const char *table = context->params[ANNOTATION].v_string;
  const char *column = context->params[COLUMN].v_string;
  igraph_integer_t n = igraph_vector_int_size(&clusters->membership);
  g_autoptr(GString) text = g_string_new(NULL);
  g_string_append_printf(text, "points\t%" IGRAPH_PRId "\nclusters\t%" IGRAPH_PRId "\n", n,
                         n > 0 ? igraph_vector_int_max(&clusters->membership) + 1 : 0);
  /* Modularity on the clustered graph, its distances read as similarities 1/(1+d). */
  double modularity = NAN;
  const KnnwbValue *graph = clusters->source_graph;
  if (graph && graph->has_graph && igraph_vcount(&graph->graph) == n) {
    igraph_vector_t weights;
    if (!knnwb_error_from_igraph(igraph_vector_init(&weights, 0), "igraph_vector_init", error))
      return FALSE;
    gboolean ok =
        knnwb_clustering_similarity(&graph->weights, KNNWB_SIMILARITY_INVERSE, &weights, error) &&
        knnwb_clustering_modularity(&graph->graph, &weights, &clusters->membership, &modularity,
                                    error);
    igraph_vector_destroy(&weights);
    if (!ok)
      return FALSE;
  }
  if (isnan(modularity))
    g_string_append(text, "modularity\tNA\n");
  else
    g_string_append_printf(text, "modularity\t%.6f\n", modularity);
  igraph_vector_int_t classes;
  if (!knnwb_error_from_igraph(igraph_vector_int_init(&classes, 0), "igraph_vector_int_init",
                               error))
    return FALSE;
  g_auto(GStrv) class_names = NULL;
  g_autofree char *spec = g_strdup_printf("%s:%s", table, column);
  gboolean ok = knnwb_formats_read_annotation(table, column, knnwb_pipeline_value_labels(clusters),
                                              (size_t)n, &classes, &class_names, NULL, error) &&
                knnwb_evaluation_append(text, spec, &clusters->membership, &classes, class_names,
                                        context->params[CONTINGENCY].v_string, error);
  igraph_vector_int_destroy(&classes);
  if (!ok)
    return FALSE;
  g_autoptr(KnnwbAtomicFile) file = knnwb_atomic_file_open(context->params[PATH].v_string, error);
  if (!file)
    return FALSE;
  fputs(text->str, knnwb_atomic_file_stream(file));
  if (!knnwb_atomic_file_commit(g_steal_pointer(&file), error))
    return FALSE;
  /* The figures also go to the log (shown unless --quiet), next to the step report. */
  g_autofree char *line = g_strdelimit(g_strdup(text->str), "\t\n", ' ');
  g_message("%s: %s", context->step_id, line);
  return TRUE;
}

const KnnwbStepType knnwb_step_evaluate = {
    "evaluate",
    "compare a clustering with known classes: ARI, NMI, contingency table, modularity",
    knnwb_evaluate_inputs,
    G_N_ELEMENTS(knnwb_evaluate_inputs),
    knnwb_evaluate_params,
    N_PARAMS,
    KNNWB_KIND_NONE,
    knnwb_evaluate_run,
    0,
    NULL,
};
