/* Stand-in for the GPU Borůvka when knnwb is built without CUDA. */
#include <glib.h>
#include "knnwb_kernels.h"
#include "knnwb_kernels_boruvka.h"

int knnwb_cuda_boruvka_forest(int device, int64_t n_vertices, int64_t n_edges, const int64_t *from,
                              const int64_t *to, const double *weights, unsigned char *in_forest,
                              int *n_rounds, char *message, size_t message_size)
{
  (void)device, (void)n_vertices, (void)n_edges, (void)from, (void)to, (void)weights;
  (void)in_forest, (void)n_rounds;
  if (message && message_size > 0)
    g_strlcpy(message, "knnwb was not built with CUDA", message_size);
  return KNNWB_KERNELS_NO_DEVICE;
}
