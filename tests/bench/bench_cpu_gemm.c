/*
 * CPU GEMM ceilings (not a test): the tile the CPU backend computes, C = A B^T with A, B row-major
 * (n x d), in OpenBLAS SGEMM, oneDNN SGEMM and oneDNN's BF16 matmul (bf16 in, f32 out), on 1..T
 * threads that each run their own single-threaded GEMM (as the backend does). Best of 40 calls.
 *
 * Usage: bench_cpu_gemm [N [D [THREADS]]]   (defaults 1024 128 2)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#include <glib.h>
#include <oneapi/dnnl/dnnl.h>

#include <dlfcn.h>

extern void openblas_set_num_threads(int threads);

typedef enum { GEMM_OPENBLAS, GEMM_ONEDNN_FP32, GEMM_ONEDNN_BF16 } GemmKind;
static const char *const gemm_names[] = {"openblas sgemm", "onednn sgemm", "onednn bf16 matmul"};

typedef struct {
  GemmKind kind;
  int n, d;
  double best;
  char impl[128];
} GemmRun;

#define DNNL_CHECK(call)                                                                           \
  do {                                                                                             \
    if ((call) != dnnl_success) {                                                                  \
      fprintf(stderr, "oneDNN: %s failed\n", #call);                                               \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static gpointer gemm_thread(gpointer user)
{
  GemmRun *run = user;
  const int n = run->n, d = run->d;
  float *a = g_new(float, (size_t)n *d), *b = g_new(float, (size_t)n *d);
  float *c = g_new(float, (size_t)n *n);
  uint16_t *a16 = g_new(uint16_t, (size_t)n * d), *b16 = g_new(uint16_t, (size_t)n * d);
  GRand *rng = g_rand_new_with_seed(7);
  for (size_t i = 0; i < (size_t)n * d; i++) {
    a[i] = (float)g_rand_double_range(rng, -1, 1);
    b[i] = (float)g_rand_double_range(rng, -1, 1);
    uint32_t bits;
    memcpy(&bits, &a[i], 4);
    a16[i] = (uint16_t)(bits >> 16);
    memcpy(&bits, &b[i], 4);
    b16[i] = (uint16_t)(bits >> 16);
  }
  g_rand_free(rng);
  /* oneDNN's OpenMP runtime, one thread per caller (looked up: it comes with libdnnl). */
  void (*set_threads)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads");
  if (set_threads != NULL)
    set_threads(1);
  dnnl_engine_t engine = NULL;
  dnnl_stream_t stream = NULL;
  dnnl_primitive_t matmul = NULL;
  dnnl_memory_t memories[3] = {NULL, NULL, NULL};
  if (run->kind == GEMM_ONEDNN_BF16) {
    DNNL_CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    dnnl_memory_desc_t src, weights, dst;
    dnnl_dims_t src_dims = {n, d}, src_strides = {d, 1};
    dnnl_dims_t weights_dims = {d, n}, weights_strides = {1, d};
    dnnl_dims_t dst_dims = {n, n}, dst_strides = {n, 1};
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&src, 2, src_dims, dnnl_bf16, src_strides));
    DNNL_CHECK(
        dnnl_memory_desc_init_by_strides(&weights, 2, weights_dims, dnnl_bf16, weights_strides));
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&dst, 2, dst_dims, dnnl_f32, dst_strides));
    dnnl_matmul_desc_t desc;
    DNNL_CHECK(dnnl_matmul_desc_init(&desc, &src, &weights, NULL, &dst));
    dnnl_primitive_desc_t pd;
    DNNL_CHECK(dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL));
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    g_strlcpy(run->impl, impl, sizeof run->impl);
    DNNL_CHECK(dnnl_primitive_create(&matmul, pd));
    dnnl_primitive_desc_destroy(pd);
    DNNL_CHECK(dnnl_memory_create(&memories[0], &src, engine, a16));
    DNNL_CHECK(dnnl_memory_create(&memories[1], &weights, engine, b16));
    DNNL_CHECK(dnnl_memory_create(&memories[2], &dst, engine, c));
  }
  run->best = 1e30;
  for (int rep = 0; rep < 40; rep++) {
    gint64 start = g_get_monotonic_time();
    switch (run->kind) {
    case GEMM_OPENBLAS:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, d, 1.0f, a, d, b, d, 0.0f, c, n);
      break;
    case GEMM_ONEDNN_FP32:
      DNNL_CHECK(dnnl_sgemm('N', 'T', n, n, d, 1.0f, a, d, b, d, 0.0f, c, n));
      break;
    case GEMM_ONEDNN_BF16: {
      dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, memories[0]},
                                {DNNL_ARG_WEIGHTS, memories[1]},
                                {DNNL_ARG_DST, memories[2]}};
      DNNL_CHECK(dnnl_primitive_execute(matmul, stream, 3, args));
      DNNL_CHECK(dnnl_stream_wait(stream));
      break;
    }
    }
    double seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    run->best = seconds < run->best ? seconds : run->best;
  }
  for (int i = 0; i < 3; i++)
    if (memories[i] != NULL)
      dnnl_memory_destroy(memories[i]);
  if (matmul != NULL)
    dnnl_primitive_destroy(matmul);
  if (stream != NULL)
    dnnl_stream_destroy(stream);
  if (engine != NULL)
    dnnl_engine_destroy(engine);
  g_free(a);
  g_free(b);
  g_free(c);
  g_free(a16);
  g_free(b16);
  return NULL;
}

int main(int argc, char **argv)
{
  const int n = argc > 1 ? atoi(argv[1]) : 1024, d = argc > 2 ? atoi(argv[2]) : 128;
  const int most = argc > 3 ? atoi(argv[3]) : 2;
  if (n <= 0 || d <= 0 || most <= 0 || most > 64) {
    fprintf(stderr, "usage: bench_cpu_gemm [N [D [THREADS]]]\n");
    return 2;
  }
  openblas_set_num_threads(1);
  printf("| GEMM (%d x %d x %d, C = A B^T) | threads | ms per tile (slowest thread) | GFLOP/s "
         "per thread |\n| --- | --- | --- | --- |\n",
         n, n, d);
  for (int kind = 0; kind < 3; kind++)
    for (int threads = 1; threads <= most; threads++) {
      GemmRun runs[64];
      GThread *workers[64];
      for (int t = 0; t < threads; t++) {
        runs[t] = (GemmRun){.kind = (GemmKind)kind, .n = n, .d = d};
        workers[t] = g_thread_new("gemm", gemm_thread, &runs[t]);
      }
      double slowest = 0;
      for (int t = 0; t < threads; t++) {
        g_thread_join(workers[t]);
        slowest = runs[t].best > slowest ? runs[t].best : slowest;
      }
      printf("| %s%s%s%s | %d | %.3f | %.1f |\n", gemm_names[kind], runs[0].impl[0] ? " (" : "",
             runs[0].impl, runs[0].impl[0] ? ")" : "", threads, slowest * 1e3,
             2.0 * n * n * d / slowest / 1e9);
      fflush(stdout);
    }
  return 0;
}
