/* Output format names, selection by extension and the one-call writer. */
#include "write_internal.h"

#include <string.h>

/* "neighbours" is accepted too. */
static const KnnwbEnumName knnwb_output_names[] = {
    KNNWB_OUTPUT_NAMES(KNNWB_ENUM_ENTRY){"neighbours", KNNWB_OUTPUT_NEIGHBORS_TSV}};
const KnnwbEnumTable knnwb_output_table = KNNWB_ENUM_TABLE(
    knnwb_output_names, 1, ", ", "unknown output format ", " (known: ", ")", "(null)");

gboolean knnwb_formats_output_from_string(const char *name, KnnwbOutputFormat *format,
                                          GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_output_table, name, &value, error))
    return FALSE;
  *format = (KnnwbOutputFormat)value;
  return TRUE;
}

const char *knnwb_formats_output_to_string(KnnwbOutputFormat format)
{
  const char *name = knnwb_enum_to_string(&knnwb_output_table, (int)format);
  return name != NULL ? name : "unknown";
}

gboolean knnwb_formats_output_from_path(const char *path, KnnwbOutputFormat *format, GError **error)
{
  if (knnwb_formats_ends_with(path, ".knn"))
    *format = KNNWB_OUTPUT_KNN;
  else if (knnwb_formats_ends_with(path, ".gml"))
    *format = KNNWB_OUTPUT_GML;
  else if (knnwb_formats_ends_with(path, ".graphml"))
    *format = KNNWB_OUTPUT_GRAPHML;
  else if (knnwb_formats_ends_with(path, ".labels.tsv") ||
           knnwb_formats_ends_with(path, ".clusters.tsv"))
    *format = KNNWB_OUTPUT_LABELS_TSV;
  else if (knnwb_formats_ends_with(path, ".tsv"))
    *format = KNNWB_OUTPUT_NEIGHBORS_TSV;
  else if (knnwb_formats_ends_with(path, ".npy"))
    *format = KNNWB_OUTPUT_NPY;
  else if (knnwb_formats_ends_with(path, ".npz"))
    *format = KNNWB_OUTPUT_NPZ;
  else if (knnwb_formats_ends_with(path, ".mtx"))
    *format = KNNWB_OUTPUT_MTX;
  else if (knnwb_formats_ends_with(path, ".h5ad"))
    *format = KNNWB_OUTPUT_H5AD;
  else {
    g_set_error(
        error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
        "%s: cannot tell the output format from the extension (known: .knn, .gml, "
        ".graphml, .labels.tsv, .tsv, .npy, .npz, .mtx, .h5ad); name it with --output-format",
        path);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_formats_write_graph(const char *path, KnnwbOutputFormat format,
                                   const KnnwbGraphOutput *output, GError **error)
{
  if (format == KNNWB_OUTPUT_AUTO && !knnwb_formats_output_from_path(path, &format, error))
    return FALSE;
  if (!knnwb_formats_check_output(output, error))
    return FALSE;
  switch (format) {
  case KNNWB_OUTPUT_KNN:
  case KNNWB_OUTPUT_MTX: {
    KnnwbEdgeList edges;
    knnwb_formats_edges_of_graph(output->graph, output->weights, &edges);
    return knnwb_formats_write_edges(path, format, &edges, output->labels, output->control, error);
  }
  case KNNWB_OUTPUT_NPY:
  case KNNWB_OUTPUT_NPZ:
  case KNNWB_OUTPUT_H5AD:
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: .npy/.npz/.h5ad hold n x k neighbour lists, which `knnwb knn` writes; a graph "
                "goes to .knn, .mtx, .gml or .graphml",
                path);
    return FALSE;
  case KNNWB_OUTPUT_GML:
    return knnwb_formats_write_gml(path, output, error);
  case KNNWB_OUTPUT_GRAPHML:
    return knnwb_formats_write_graphml(path, output, error);
  case KNNWB_OUTPUT_LABELS_TSV:
    if (output->membership == NULL) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "%s: a cluster table needs a clustering (membership)", path);
      return FALSE;
    }
    return knnwb_formats_write_labels_tsv(path, output->membership, output->labels, error);
  case KNNWB_OUTPUT_NEIGHBORS_TSV:
    return knnwb_formats_write_neighbors_tsv_control(path, output->graph, output->weights,
                                                     output->labels, output->control, error);
  default:
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "unknown output format %d",
                (int)format);
    return FALSE;
  }
}

gboolean knnwb_formats_write_lists(const char *path, KnnwbOutputFormat format,
                                   const KnnwbNeighbors *neighbors, const char *const *labels,
                                   const KnnwbWriteControl *control, GError **error)
{
  if (format == KNNWB_OUTPUT_AUTO && !knnwb_formats_output_from_path(path, &format, error))
    return FALSE;
  switch (format) {
  case KNNWB_OUTPUT_KNN:
    return knnwb_formats_write_knn_lists(path, neighbors, control, error);
  case KNNWB_OUTPUT_MTX:
    return knnwb_formats_write_mtx_lists(path, neighbors, labels, control, error);
  case KNNWB_OUTPUT_NEIGHBORS_TSV:
    return knnwb_formats_write_neighbor_lists_tsv_control(path, neighbors, labels, labels, control,
                                                          error);
  case KNNWB_OUTPUT_NPY:
    return knnwb_formats_write_npy_lists(path, neighbors, labels, control, error);
  case KNNWB_OUTPUT_NPZ:
    return knnwb_formats_write_npz_lists(path, neighbors, labels, control, error);
  default:
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: %s output needs a graph, not neighbour lists", path,
                knnwb_formats_output_to_string(format));
    return FALSE;
  }
}

gboolean knnwb_formats_write_edges(const char *path, KnnwbOutputFormat format,
                                   const KnnwbEdgeList *edges, const char *const *labels,
                                   const KnnwbWriteControl *control, GError **error)
{
  if (format == KNNWB_OUTPUT_AUTO && !knnwb_formats_output_from_path(path, &format, error))
    return FALSE;
  if (format == KNNWB_OUTPUT_KNN)
    return knnwb_formats_write_knn_edges(path, edges, control, error);
  if (format == KNNWB_OUTPUT_MTX)
    return knnwb_formats_write_mtx_edges(path, edges, labels, control, error);
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "%s: %s output needs a graph, not an edge list", path,
              knnwb_formats_output_to_string(format));
  return FALSE;
}
