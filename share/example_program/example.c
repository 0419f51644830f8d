/* An igraph-based C tool using knnwb in the two supported ways:
 *   (a) linking libknnwb and calling its C API (knnwb_knn_graph), and
 *   (b) opening the kNN plugin with g_module_open and calling its entry point, which needs no
 *       knnwb library or header beyond knnwb/knn_plugin.h (only GModule and igraph).
 * Both fill an igraph_t with the exact Pearson kNN graph of the same random matrix; the program
 * checks they are identical and prints a summary.
 *
 * Build against an installed knnwb:  make   (uses pkg-config --cflags --libs knnwb)
 * Run:                                ./example [PLUGIN.so]
 * Without an argument the plugin is looked up in `pkg-config --variable=plugindir knnwb`
 * (compiled in by the Makefile as KNNWB_PLUGIN_DIR).
 */
#include <stdio.h>
#include <stdlib.h>
#include <gmodule.h>
#include <igraph.h>
#include <knnwb/knnwb.h>
#include <knnwb/knn_plugin.h>

#ifndef KNNWB_PLUGIN_DIR
#define KNNWB_PLUGIN_DIR "."
#endif

enum { N_ROWS = 200, N_COLS = 16, K = 5 };

int main(int argc, char **argv)
{
  /* A library that returns errors needs igraph not to abort on them (its default). */
  igraph_set_error_handler(igraph_error_handler_ignore);

  static float values[N_ROWS * N_COLS];
  unsigned state = 12345; /* a fixed LCG: the same matrix on every machine */
  for (int i = 0; i < N_ROWS * N_COLS; i++) {
    state = state * 1103515245u + 12345u;
    values[i] = (float)((state >> 8) % 10000) / 1000.0f;
  }

  /* (a) the C API */
  GError *error = NULL;
  KnnwbMatrix *data = knnwb_matrix_new(N_ROWS, N_COLS, &error);
  if (data == NULL) {
    fprintf(stderr, "example: %s\n", error->message);
    return 1;
  }
  for (int i = 0; i < N_ROWS * N_COLS; i++)
    data->values[i] = values[i];
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = KNNWB_METRIC_PEARSON;
  options.k = K;
  igraph_t graph_api;
  igraph_vector_t weights_api;
  if (igraph_vector_init(&weights_api, 0) != IGRAPH_SUCCESS) {
    fprintf(stderr, "example: out of memory\n");
    return 1;
  }
  if (!knnwb_knn_graph(data, &options, KNNWB_GRAPH_DIRECTED, &graph_api, &weights_api, &error)) {
    fprintf(stderr, "example: knnwb_knn_graph: %s\n", error->message);
    return 1;
  }
  knnwb_matrix_free(data);

  /* (b) the plugin's entry point */
  char *path = argc > 1 ? g_strdup(argv[1])
                        : g_build_filename(KNNWB_PLUGIN_DIR, "knnwb-knn." G_MODULE_SUFFIX, NULL);
  GModule *module = g_module_open_full(path, G_MODULE_BIND_LOCAL, &error);
  if (module == NULL) {
    fprintf(stderr, "example: %s\n", error->message);
    return 1;
  }
  KnnwbKnnPluginFillGraphFunc fill = NULL;
  if (!g_module_symbol(module, KNNWB_KNN_PLUGIN_FILL_GRAPH_SYMBOL, (gpointer *)&fill)) {
    fprintf(stderr, "example: %s: %s\n", path, g_module_error());
    return 1;
  }
  igraph_t graph_plugin;
  igraph_vector_t weights_plugin;
  if (igraph_vector_init(&weights_plugin, 0) != IGRAPH_SUCCESS) {
    fprintf(stderr, "example: out of memory\n");
    return 1;
  }
  char *message = NULL;
  if (fill(KNNWB_KNN_PLUGIN_ENTRY_VERSION, values, N_ROWS, N_COLS, "pearson", K, "directed", 0,
           &graph_plugin, &weights_plugin, &message) != IGRAPH_SUCCESS) {
    fprintf(stderr, "example: plugin: %s\n", message);
    free(message);
    return 1;
  }

  /* A bad request comes back as an error code and a message, not an abort. */
  igraph_t unused;
  if (fill(KNNWB_KNN_PLUGIN_ENTRY_VERSION, values, N_ROWS, N_COLS, "pearson", N_ROWS, "directed", 0,
           &unused, &weights_plugin, &message) == IGRAPH_SUCCESS) {
    fprintf(stderr, "example: k = n was accepted\n");
    return 1;
  }
  printf("plugin refused k = n as expected: %s\n", message);
  free(message);

  igraph_bool_t same = igraph_vcount(&graph_api) == igraph_vcount(&graph_plugin) &&
                       igraph_ecount(&graph_api) == igraph_ecount(&graph_plugin);
  for (igraph_integer_t e = 0; same && e < igraph_ecount(&graph_api); e++)
    same = IGRAPH_FROM(&graph_api, e) == IGRAPH_FROM(&graph_plugin, e) &&
           IGRAPH_TO(&graph_api, e) == IGRAPH_TO(&graph_plugin, e) &&
           VECTOR(weights_api)[e] == VECTOR(weights_plugin)[e];
  printf("library %s: %" IGRAPH_PRId " vertices, %" IGRAPH_PRId " edges; plugin %s: %s\n",
         knnwb_version(), igraph_vcount(&graph_api), igraph_ecount(&graph_api), path,
         same ? "identical graph" : "DIFFERENT graph");

  igraph_destroy(&graph_api);
  igraph_destroy(&graph_plugin);
  igraph_vector_destroy(&weights_api);
  igraph_vector_destroy(&weights_plugin);
  g_module_close(module);
  g_free(path);
  return same ? 0 : 1;
}
