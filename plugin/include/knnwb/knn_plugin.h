/* The kNN plugin's entry point for other programs: open the module, fill an igraph_t.
 *
 * The kNN plugin (knnwb-knn.so, installed in `pkg-config --variable=plugindir knnwb`) registers
 * the knn-graph and knn-query pipeline steps for the knnwb host. It also exports one plain C
 * function, so that any igraph-based tool can build exact kNN graphs without linking libknnwb or
 * including any other knnwb header:
 *
 *   GModule *module = g_module_open_full(path, G_MODULE_BIND_LOCAL, &error);
 *   KnnwbKnnPluginFillGraphFunc fill;
 *   g_module_symbol(module, KNNWB_KNN_PLUGIN_FILL_GRAPH_SYMBOL, (gpointer *)&fill);
 *   igraph_t graph; igraph_vector_t weights; igraph_vector_init(&weights, 0);
 *   char *message = NULL;
 *   if (fill(KNNWB_KNN_PLUGIN_ENTRY_VERSION, values, n, d, "pearson", 20, "directed", 0,
 *            &graph, &weights, &message) != 0) { fprintf(stderr, "%s\n", message); free(message); }
 *
 * share/example_program/ does exactly this (and links libknnwb for the C API).
 */
#ifndef KNNWB_KNN_PLUGIN_H
#define KNNWB_KNN_PLUGIN_H

#include <stdint.h>
#include <igraph.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The symbol to look up with g_module_symbol() or dlsym(). */
#define KNNWB_KNN_PLUGIN_FILL_GRAPH_SYMBOL "knnwb_knn_plugin_fill_graph"

/** Version of the entry point's signature; the plugin refuses other numbers. */
#define KNNWB_KNN_PLUGIN_ENTRY_VERSION 1

/**
 * Builds the exact kNN graph of the rows of a dense row-major float32 matrix.
 *
 * entry_version: KNNWB_KNN_PLUGIN_ENTRY_VERSION. values: n_rows * n_cols floats, row i at
 * values + i * n_cols (not modified, not kept). metric: "pearson", "abs-pearson", "spearman",
 * "euclidean", "manhattan" or "cosine". k: 1 <= k <= n_rows - 1. mode: "directed" (k edges
 * i -> neighbour per vertex, in rank order), "union" or "mutual" (undirected, duplicate pairs
 * merged). n_threads: 0 = all cores.
 * graph: uninitialised; initialised on success only (n_rows vertices). weights: an initialised
 * vector, resized to the edge count, holding the exact distances.
 *
 * Returns 0 (IGRAPH_SUCCESS) on success. On failure returns a non-zero igraph error code
 * (IGRAPH_EINVAL for bad arguments or data, IGRAPH_ENOMEM, IGRAPH_FAILURE otherwise) and, when
 * error_message is not NULL, stores a message the caller frees with free().
 * The function never installs igraph handlers and never aborts.
 * Complexity: O(n^2 d) arithmetic (tiled, multi-threaded), O(n k + n d) memory.
 */
typedef int (*KnnwbKnnPluginFillGraphFunc)(int entry_version, const float *values, int64_t n_rows,
                                           int64_t n_cols, const char *metric, int64_t k,
                                           const char *mode, int n_threads, igraph_t *graph,
                                           igraph_vector_t *weights, char **error_message);

#ifdef __cplusplus
}
#endif

#endif
