/*
 * The plain C interface of the GPU Borůvka minimum spanning forest (kernels/boruvka.cu). Nothing
 * here needs CUDA headers. When knnwb is built without CUDA, kernels/boruvka_gpu_absent.c
 * provides a stand-in that reports "not built with CUDA".
 */
#ifndef KNNWB_KERNELS_BORUVKA_H
#define KNNWB_KERNELS_BORUVKA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Minimum spanning forest of an undirected multigraph on one GPU, by Borůvka with the edge order
 * (weight, edge id), so the forest is unique and equals the CPU one.
 *
 * Input (host memory): n_vertices; n_edges edges, edge e joins from[e] and to[e] (0 <= ids <
 * n_vertices; self-loops allowed and never chosen) with weight weights[e] (no NaN). Both counts
 * must be below 2^31 - 1 (device arrays are 32-bit).
 * Output (host memory): in_forest[e] = 1 for the forest's edges, 0 otherwise (n_edges bytes);
 * *n_rounds (may be NULL) = Borůvka rounds run.
 * Device memory: about 40 bytes per edge plus 16 per vertex.
 * Returns a KNNWB_KERNELS_* status (knnwb_kernels.h); on failure message (message_size bytes) names
 * the CUDA call that failed.
 */
int knnwb_cuda_boruvka_forest(int device, int64_t n_vertices, int64_t n_edges, const int64_t *from,
                              const int64_t *to, const double *weights, unsigned char *in_forest,
                              int *n_rounds, char *message, size_t message_size);

#ifdef __cplusplus
}
#endif

#endif
