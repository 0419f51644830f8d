/*
 * Writes a small known graph as GML (undirected and directed), GraphML and .knn into a directory,
 * with expected.json holding what a reader must find there; readback.py checks it with networkx
 * and python-igraph.
 */
#include <knnwb/error.h>
#include <knnwb/formats.h>

#include <glib.h>
#include <stdio.h>
#include <string.h>

static void json_string(FILE *f, const char *s)
{
  putc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      putc(*p, f);
  }
  putc('"', f);
}

static void check(gboolean ok, GError *error)
{
  if (!ok) {
    fprintf(stderr, "write_example: %s\n", error->message);
    exit(1);
  }
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 2;
  }
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_mkdir_with_parents(argv[1], 0755);
  enum { N = 15 };
  const char *labels[N] = {
      "plain", "A&B",        "say \"hi\"", "g\xC3\xA8ne", "\xE6\x97\xA5\xE6\x9C\xAC",
      "<tag>", "semi;colon", "tab\there",  "v8",          "v9",
      "v10",   "v11",        "v12",        "v13",         "dummy probe"};
  igraph_vector_int_t edges;
  igraph_vector_int_init(&edges, 0);
  for (int i = 0; i < N; i++) {
    igraph_vector_int_push_back(&edges, i);
    igraph_vector_int_push_back(&edges, (i + 1) % N);
    if (i % 3 == 0) {
      igraph_vector_int_push_back(&edges, i);
      igraph_vector_int_push_back(&edges, (i + 4) % N);
    }
  }
  igraph_integer_t m = igraph_vector_int_size(&edges) / 2;
  igraph_vector_t weights;
  igraph_vector_init(&weights, m);
  for (igraph_integer_t e = 0; e < m; e++)
    VECTOR(weights)[e] = 0.1 + 0.0137 * (double)e + 1e-12 * (double)(e * e); /* full doubles */
  igraph_vector_int_t membership, focus;
  igraph_vector_int_init(&membership, N);
  for (int i = 0; i < N; i++)
    VECTOR(membership)[i] = i / 5;
  igraph_vector_int_init(&focus, 1);
  VECTOR(focus)[0] = N - 1;

  GError *error = NULL;
  for (int directed = 0; directed <= 1; directed++) {
    igraph_t graph;
    igraph_create(&graph, &edges, N, directed);
    igraph_matrix_t coordinates;
    igraph_matrix_init(&coordinates, 0, 0);
    check(knnwb_drawing_layout(&graph, &weights, KNNWB_LAYOUT_FR, 3000, 7, 30.0, &coordinates,
                               &error),
          error);
    KnnwbDrawingOptions gml;
    knnwb_drawing_options_init(&gml);
    gml.coordinates = &coordinates;
    gml.focus = &focus;
    KnnwbGraphOutput output = {.graph = &graph,
                               .weights = &weights,
                               .labels = labels,
                               .membership = &membership,
                               .gml = &gml};
    const char *name = directed ? "directed" : "graph";
    const char *extensions[] = {".gml", ".graphml", ".knn"};
    for (int x = 0; x < 3; x++) {
      g_autofree char *file = g_strdup_printf("%s%s", name, extensions[x]);
      g_autofree char *path = g_build_filename(argv[1], file, NULL);
      check(knnwb_formats_write_graph(path, KNNWB_OUTPUT_AUTO, &output, &error), error);
    }
    if (!directed) {
      g_autofree char *path = g_build_filename(argv[1], "expected.json", NULL);
      FILE *f = fopen(path, "w");
      fprintf(f, "{\n \"labels\": [");
      for (int i = 0; i < N; i++) {
        json_string(f, labels[i]);
        fputs(i + 1 < N ? ", " : "],\n", f);
      }
      fprintf(f, " \"membership\": [");
      for (int i = 0; i < N; i++)
        fprintf(f, "%" IGRAPH_PRId "%s", VECTOR(membership)[i], i + 1 < N ? ", " : "],\n");
      fprintf(f, " \"focus\": [%d],\n \"x\": [", N - 1);
      for (int i = 0; i < N; i++)
        fprintf(f, "%.17g%s", MATRIX(coordinates, i, 0), i + 1 < N ? ", " : "],\n");
      fprintf(f, " \"y\": [");
      for (int i = 0; i < N; i++)
        fprintf(f, "%.17g%s", MATRIX(coordinates, i, 1), i + 1 < N ? ", " : "],\n");
      fprintf(f, " \"edges\": [");
      for (igraph_integer_t e = 0; e < m; e++)
        fprintf(f, "[%" IGRAPH_PRId ", %" IGRAPH_PRId ", %.17g]%s", IGRAPH_FROM(&graph, e),
                IGRAPH_TO(&graph, e), VECTOR(weights)[e], e + 1 < m ? ", " : "]\n}\n");
      fclose(f);
    }
    igraph_matrix_destroy(&coordinates);
    igraph_destroy(&graph);
  }
  igraph_vector_int_destroy(&focus);
  igraph_vector_int_destroy(&membership);
  igraph_vector_destroy(&weights);
  igraph_vector_int_destroy(&edges);
  return 0;
}
