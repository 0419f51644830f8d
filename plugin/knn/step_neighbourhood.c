/* Step neighbourhood: the focus rows' neighbours up to order r in the kNN graph (focused queries
 * for out-neighbourhoods), as a graph value, yEd GML and the ranked table. */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/neighbourhood.h>
#include "knn_plugin_internal.h"

enum { FOCUS = KNNWB_KNN_N_COMMON_PARAMS, ORDER, DIRECTION, GML, TABLE, SEED, N_PARAMS };

static const KnnwbParamSpec knnwb_neighbourhood_params[N_PARAMS] = {
    KNNWB_KNN_COMMON_PARAMS,
    [FOCUS] = {"focus", KNNWB_PARAM_STRING, NULL, 1, 0, NULL,
               "comma-separated row labels (the phenotype row, say)"},
    [ORDER] = {"order", KNNWB_PARAM_INT, "1", 1, 10, NULL, "hops from the focus"},
    [DIRECTION] = {"direction", KNNWB_PARAM_CHOICE, "out", 1, 0,
                   KNNWB_ENUM_CHOICES(KNNWB_DIRECTION_NAMES),
                   "out: the focus's k nearest (no whole graph); in/both need the whole graph"},
    [GML] = {"gml", KNNWB_PARAM_OUTPUT_FILE, "", 1, 0, NULL,
             "yEd GML of the neighbourhood (laid out, focus highlighted)"},
    [TABLE] = {"table", KNNWB_PARAM_OUTPUT_FILE, "", 1, 0, NULL,
               "ranked table: focus, rank, label, order, distance (and r)"},
    [SEED] = {"seed", KNNWB_PARAM_INT, "42", 0, 4294967295.0, NULL, "layout random seed"},
};

static const KnnwbPortSpec knnwb_neighbourhood_inputs[] = {
    {"data", KNNWB_KIND_MATRIX, FALSE, "the points (rows)"},
};

/* The neighbourhood's own points, in vertex order, so later steps see real rows and labels. */
static KnnwbMatrix *knnwb_neighbourhood_points(const KnnwbMatrix *data,
                                               const KnnwbNeighbourhood *nb, GError **error)
{
  KnnwbMatrix *points = knnwb_matrix_new(nb->n_vertices, data->n_cols, error);
  if (points == NULL)
    return NULL;
  for (size_t v = 0; v < nb->n_vertices; v++) {
    size_t row = (size_t)nb->rows[v];
    if (data->n_cols > 0)
      memcpy(points->values + v * data->n_cols, data->values + row * data->n_cols,
             data->n_cols * sizeof(float));
    const char *label = knnwb_matrix_row_label(data, row);
    g_autofree char *number = label ? NULL : g_strdup_printf("%zu", row);
    knnwb_matrix_set_row_label(points, v, label ? label : number);
  }
  for (size_t j = 0; data->col_labels != NULL && j < data->n_cols; j++)
    knnwb_matrix_set_col_label(points, j, data->col_labels[j]);
  return points;
}

/* Split rows under mpirun (the host split or scattered the matrix): rank 0 finds the focus rows in
 * every label and tells the others, the ranks search together, rank 0 gets the neighbourhood, its
 * rows and (through the labels) writes the files. */
static gboolean knnwb_neighbourhood_step_split(KnnwbStepContext *context,
                                               const KnnwbKnnOptions *options,
                                               KnnwbDirection direction, GError **error)
{
  const KnnwbParamValue *p = context->params;
  const KnnwbValue *in = context->inputs[0];
  const KnnwbKnnGroup *group = context->group;
  const gboolean root = group->rank == 0;
  const size_t ranks = (size_t)group->size;
  g_autofree int64_t *focus = NULL;
  size_t n_focus = 0;
  gboolean found =
      !root || knnwb_neighbourhood_focus_labels(in->block_labels, in->block_total,
                                                p[FOCUS].v_string, &focus, &n_focus, error);
  if (!group->agree(group, found, error))
    return FALSE;
  /* Rank 0's focus rows to every rank: sums to which the others add zeros. */
  int64_t count = (int64_t)n_focus;
  if (!group->reduce(group, &count, 1, KNNWB_GROUP_SUM, error))
    return FALSE;
  if (!root)
    focus = g_new0(int64_t, MAX((size_t)count, (size_t)1));
  n_focus = (size_t)count;
  if (!group->reduce(group, focus, n_focus, KNNWB_GROUP_SUM, error))
    return FALSE;
  g_autofree int64_t *sizes = g_new(int64_t, ranks);
  if (!knnwb_knn_group_gather_values(group, (int64_t)in->matrix->n_rows, sizes, error))
    return FALSE;
  g_autofree size_t *first_row = g_new0(size_t, ranks + 1);
  for (size_t r = 0; r < ranks; r++)
    first_row[r + 1] = first_row[r] + (size_t)sizes[r];
  g_autoptr(KnnwbNeighbourhood) nb = NULL;
  g_autoptr(KnnwbMatrix) members = NULL;
  if (!knnwb_neighbourhood_find_split(group, in->matrix, first_row, focus, n_focus,
                                      (int)p[ORDER].v_int, direction, options, &nb, &members,
                                      error))
    return FALSE;
  /* The table's p and q take every rank's rows (collective). */
  const KnnwbMetric metric = options->metric;
  g_autofree double *p_values = NULL, *q_values = NULL;
  /* Only rank 0 may be given the output: it decides for all. */
  int64_t tested = p[TABLE].v_string != NULL &&
                   (metric == KNNWB_METRIC_PEARSON || metric == KNNWB_METRIC_ABS_PEARSON ||
                    metric == KNNWB_METRIC_SPEARMAN);
  if (!group->reduce(group, &tested, 1, KNNWB_GROUP_MAX, error))
    return FALSE;
  if (tested) {
    const size_t n = root ? nb->n_members : 0;
    p_values = g_new(double, MAX(n, (size_t)1));
    q_values = g_new(double, MAX(n, (size_t)1));
    if (!knnwb_neighbourhood_statistics_split(group, in->matrix, first_row, focus, n_focus,
                                              root ? nb : NULL, metric, p_values, q_values, error))
      return FALSE;
  }
  if (!root)
    return TRUE;
  /* The writers and the points want the members' labels: a matrix of all rows, labels only. */
  g_autoptr(KnnwbMatrix) named = knnwb_matrix_new(in->block_total, 0, error);
  if (named == NULL)
    return FALSE;
  for (size_t v = 0; in->block_labels != NULL && v < nb->n_vertices; v++)
    knnwb_matrix_set_row_label(named, (size_t)nb->rows[v], in->block_labels[nb->rows[v]]);
  if (p[TABLE].v_string != NULL &&
      !knnwb_neighbourhood_write_table_statistics(p[TABLE].v_string, nb, named, options->metric,
                                                  p_values, q_values, error))
    return FALSE;
  if (p[GML].v_string != NULL &&
      !knnwb_neighbourhood_write_gml(p[GML].v_string, nb, named, (unsigned long)p[SEED].v_int,
                                     error))
    return FALSE;
  KnnwbValue *out = context->output;
  out->matrix = g_steal_pointer(&members);
  for (size_t v = 0; v < nb->n_vertices; v++) {
    const char *label = knnwb_matrix_row_label(named, (size_t)nb->rows[v]);
    g_autofree char *number = label ? NULL : g_strdup_printf("%zu", (size_t)nb->rows[v]);
    knnwb_matrix_set_row_label(out->matrix, v, label ? label : number);
  }
  for (size_t j = 0; in->matrix->col_labels != NULL && j < in->matrix->n_cols; j++)
    knnwb_matrix_set_col_label(out->matrix, j, in->matrix->col_labels[j]);
  if (!knnwb_error_from_igraph(igraph_copy(&out->graph, &nb->graph), "igraph_copy", error))
    return FALSE;
  out->has_graph = TRUE;
  return knnwb_error_from_igraph(igraph_vector_update(&out->weights, &nb->weights),
                                 "igraph_vector_update", error);
}

static gboolean knnwb_neighbourhood_step_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbParamValue *p = context->params;
  const KnnwbMatrix *data = context->inputs[0]->matrix;
  KnnwbValue *out = context->output;
  g_autoptr(GArray) devices = g_array_new(FALSE, FALSE, sizeof(int));
  KnnwbKnnOptions options;
  KnnwbDirection direction;
  if (!knnwb_knn_plugin_options(context, &options, devices, error) ||
      !knnwb_direction_from_string(p[DIRECTION].v_string, &direction, error))
    return FALSE;
  if (context->group != NULL && context->inputs[0]->block_total > 0)
    return knnwb_neighbourhood_step_split(context, &options, direction, error);
  g_autofree int64_t *focus = NULL;
  size_t n_focus = 0;
  if (!knnwb_neighbourhood_focus_rows(data, p[FOCUS].v_string, &focus, &n_focus, error))
    return FALSE;
  g_autoptr(KnnwbNeighbourhood) nb = NULL;
  if (!knnwb_neighbourhood_find(data, focus, n_focus, (int)p[ORDER].v_int, direction, &options, &nb,
                                error))
    return FALSE;
  if (p[TABLE].v_string != NULL &&
      !knnwb_neighbourhood_write_table(p[TABLE].v_string, nb, data, options.metric, error))
    return FALSE;
  if (p[GML].v_string != NULL &&
      !knnwb_neighbourhood_write_gml(p[GML].v_string, nb, data, (unsigned long)p[SEED].v_int,
                                     error))
    return FALSE;
  out->matrix = knnwb_neighbourhood_points(data, nb, error);
  if (out->matrix == NULL)
    return FALSE;
  if (!knnwb_error_from_igraph(igraph_copy(&out->graph, &nb->graph), "igraph_copy", error))
    return FALSE;
  out->has_graph = TRUE;
  return knnwb_error_from_igraph(igraph_vector_update(&out->weights, &nb->weights),
                                 "igraph_vector_update", error);
}

const KnnwbStepType knnwb_knn_step_neighbourhood = {
    "neighbourhood",
    "the focus rows' kNN neighbourhood up to order r (yEd GML and a ranked table)",
    knnwb_neighbourhood_inputs,
    G_N_ELEMENTS(knnwb_neighbourhood_inputs),
    knnwb_neighbourhood_params,
    N_PARAMS,
    KNNWB_KIND_GRAPH,
    knnwb_neighbourhood_step_run,
    KNNWB_STEP_SPLIT_ROWS,
    knnwb_knn_plugin_check,
};
