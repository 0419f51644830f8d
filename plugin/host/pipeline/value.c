/* The values passed between the steps of a pipeline: made empty for a step to fill, checked
 * against what the step type promised, freed with whatever the step left in them. */
#include <knnwb/error.h>
#include "pipeline/pipeline_internal.h"
#include "pipeline/value.h"
#include "runtime/split_input.h"

/* The vectors every value carries, empty; on failure none stays allocated. */
static igraph_error_t knnwb_pipeline_value_init_vectors(KnnwbValue *value)
{
  IGRAPH_CHECK(igraph_vector_init(&value->weights, 0));
  IGRAPH_FINALLY(igraph_vector_destroy, &value->weights);
  IGRAPH_CHECK(igraph_vector_int_init(&value->membership, 0));
  IGRAPH_FINALLY_CLEAN(1);
  return IGRAPH_SUCCESS;
}

KnnwbValue *knnwb_pipeline_value_new(KnnwbKind kind, GError **error)
{
  KnnwbValue *value = g_new0(KnnwbValue, 1);
  value->kind = kind;
  if (!knnwb_error_from_igraph(knnwb_pipeline_value_init_vectors(value),
                               "allocating a step's value", error)) {
    g_free(value);
    return NULL;
  }
  return value;
}

void knnwb_pipeline_value_free(KnnwbValue *value)
{
  if (value == NULL)
    return;
  knnwb_matrix_free(value->matrix);
  /* A split matrix's labels (load-matrix under mpirun). */
  if (value->host_private != NULL) {
    knnwb_host_split_input_clear(value->host_private);
    g_free(value->host_private);
  }
  if (value->has_graph)
    igraph_destroy(&value->graph);
  igraph_vector_destroy(&value->weights);
  igraph_vector_int_destroy(&value->membership);
  g_free(value);
}

const char *const *knnwb_pipeline_value_labels(const KnnwbValue *value)
{
  if (value == NULL)
    return NULL;
  if (value->points != NULL && value->points->block_total > 0)
    return value->points->block_labels;
  if (value->points != NULL && value->points->matrix != NULL)
    return (const char *const *)value->points->matrix->row_labels;
  if (value->block_total > 0)
    return value->block_labels;
  if (value->matrix != NULL)
    return (const char *const *)value->matrix->row_labels;
  if (value->source_graph != NULL)
    return knnwb_pipeline_value_labels(value->source_graph);
  return NULL;
}

gboolean knnwb_pipeline_value_check(KnnwbValue *value, const KnnwbStepType *type, char **summary,
                                    GError **error)
{
  switch (value->kind) {
  case KNNWB_KIND_MATRIX:
    if (value->matrix == NULL)
      break;
    *summary = g_strdup_printf("matrix %zu x %zu", value->matrix->n_rows, value->matrix->n_cols);
    return TRUE;
  case KNNWB_KIND_GRAPH:
    if (!value->has_graph)
      break;
    if (igraph_vector_size(&value->weights) != igraph_ecount(&value->graph)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                  "step type '%s' returned %" IGRAPH_PRId " weights for %" IGRAPH_PRId " edges",
                  type->name, igraph_vector_size(&value->weights), igraph_ecount(&value->graph));
      return FALSE;
    }
    igraph_integer_t n_vertices = igraph_vcount(&value->graph);
    igraph_integer_t n_edges = igraph_ecount(&value->graph);
    *summary =
        g_strdup_printf("%s graph, %" IGRAPH_PRId " vert%s, %" IGRAPH_PRId " edge%s",
                        igraph_is_directed(&value->graph) ? "directed" : "undirected", n_vertices,
                        n_vertices == 1 ? "ex" : "ices", n_edges, KNNWB_PLURAL(n_edges));
    return TRUE;
  case KNNWB_KIND_CLUSTERING: {
    igraph_integer_t n = igraph_vector_int_size(&value->membership);
    igraph_integer_t clusters = n > 0 ? igraph_vector_int_max(&value->membership) + 1 : 0;
    if (n > 0 && igraph_vector_int_min(&value->membership) < 0) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                  "step type '%s' returned a negative cluster id", type->name);
      return FALSE;
    }
    if (value->n_clusters == 0)
      value->n_clusters = clusters;
    *summary =
        g_strdup_printf("%" IGRAPH_PRId " cluster%s of %" IGRAPH_PRId " point%s", value->n_clusters,
                        KNNWB_PLURAL(value->n_clusters), n, KNNWB_PLURAL(n));
    return TRUE;
  }
  case KNNWB_KIND_NONE:
  case KNNWB_KIND_COUNT:
    *summary = g_strdup("files");
    return TRUE;
  }
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "step type '%s' produced no %s", type->name,
              knnwb_kind_to_string(value->kind));
  return FALSE;
}
