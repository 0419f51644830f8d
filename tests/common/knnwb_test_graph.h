/* A random graph for the writer and layout tests: n vertices, m edges (loops and multi-edges
 * allowed), weights over the whole double range (negative ones too), the first a float widened to
 * double. */
#ifndef KNNWB_TEST_GRAPH_H
#define KNNWB_TEST_GRAPH_H

#include <glib.h>
#include <igraph.h>
#include <math.h>

static inline void knnwb_test_random_graph(GRand *rand, igraph_integer_t n, igraph_integer_t m,
                                           gboolean directed, igraph_t *graph,
                                           igraph_vector_t *weights)
{
  igraph_vector_int_t edges;
  igraph_vector_int_init(&edges, 2 * m);
  igraph_vector_init(weights, m);
  for (igraph_integer_t e = 0; e < m; e++) {
    VECTOR(edges)[2 * e] = g_rand_int_range(rand, 0, (gint32)n);
    VECTOR(edges)[2 * e + 1] = g_rand_int_range(rand, 0, (gint32)n);
    double scale = pow(10.0, g_rand_int_range(rand, -300, 300));
    VECTOR(*weights)[e] = (g_rand_double(rand) - 0.3) * (e % 3 == 0 ? 1.0 : scale);
  }
  VECTOR(*weights)[0] = (double)0.1f; /* a float widened to double */
  igraph_create(graph, &edges, n, directed);
  igraph_vector_int_destroy(&edges);
}

#endif
