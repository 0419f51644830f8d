/*
 * GPU kNN benchmark (not a test): exact Pearson kNN graph of a deterministic synthetic matrix
 * (planted co-expression modules plus noise, generated on the GPU), timed three ways in one run:
 *   lib     knnwb_knn_self with the CUDA backend, host matrix to host neighbour lists
 *           (core prepare + GPU selection + exact double refinement and certification);
 *   select  knnwb_cuda_select alone on centred, normalised rows (kc = k + max(8, k/8), as core);
 *   floor   cuBLAS SGEMM alone doing n^2 d / 2 multiply-adds (the arithmetic with symmetry),
 *           measured on 8192 x 8192 tiles and scaled; and the same work as FP16 tensor-core GEMMs
 *           with float32 output (cublasGemmEx, what the FP16 screen runs): the new floor.
 * --screen sets the library's and the select's screening precision (default auto: fp16 for
 * k <= 256); the select then takes core's candidate count for it. --backend cpu runs the library
 * on the CPU backend instead (the same lists digest as the GPU's on the same n and k). --cold
 * leaves the GPUs but device 0 without a context until the first timed call, which then creates
 * them as a user's command does (device 0 has one either way: the data are generated there).
 *
 * Usage: bench_knn_gpu [--n N[,N...]] [--d D] [--k K] [--gpu-memory BYTES[G|M]] [--devices 0,1,..]
 *                      [--screen auto|fp32|tf32|fp16] [--backend cuda|cpu] [--no-lib]
 *                      [--no-select] [--no-floor] [--cold]
 */
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <thread>
#include <vector>

#include <igraph.h>
#include <knnwb/knnwb.h>
#include "knnwb_kernels.h"
#ifdef KNNWB_HAVE_MPI
#include <fcntl.h>
#include <unistd.h>
#include <knnwb/distributed.h>
#endif

#include "bench_check.h"

static double now_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__device__ __forceinline__ unsigned hash3(unsigned a, unsigned b, unsigned c)
{
  unsigned h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u ^ (c + 0x165667B1u) * 0xC2B2AE3Du;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  h *= 0x297A2D39u;
  h ^= h >> 15;
  return h;
}

__device__ __forceinline__ float uniform01(unsigned h)
{
  return (h >> 8) * (1.0f / 16777216.0f);
}

/* value = 8 + strength(row) * pattern(module(row), col) + noise; 1000 modules. */
__global__ void generate(float *out, size_t n, int d, unsigned seed)
{
  size_t total = n * (size_t)d;
  for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total;
       t += (size_t)gridDim.x * blockDim.x) {
    unsigned i = (unsigned)(t / d), j = (unsigned)(t % d);
    unsigned module = hash3(seed, i, 0xFFFFFFFFu) % 1000u;
    float strength = 2.0f * uniform01(hash3(seed, i, 0xFFFFFFFEu));
    float pattern = 2.0f * uniform01(hash3(seed + 1, module, j)) - 1.0f;
    float noise = uniform01(hash3(seed, i, 3 * j)) + uniform01(hash3(seed, i, 3 * j + 1)) +
                  uniform01(hash3(seed, i, 3 * j + 2)) - 1.5f;
    out[t] = 8.0f + strength * pattern + noise;
  }
}

/* Centred, unit-norm rows (Pearson as a dot product), statistics in double like core. */
__global__ void normalise(const float *in, float *out, size_t n, int d)
{
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const float *x = in + i * d;
  double mean = 0, ss = 0;
  for (int j = 0; j < d; j++)
    mean += x[j];
  mean /= d;
  for (int j = 0; j < d; j++)
    ss += (x[j] - mean) * (x[j] - mean);
  double inv = 1.0 / sqrt(ss);
  for (int j = 0; j < d; j++)
    out[i * d + j] = (float)((x[j] - mean) * inv);
}

/* Seconds per n^2 d / 2 multiply-adds with cuBLAS SGEMM (best of K = d and K padded to 8). */
__global__ void to_half(const float *a, __half *h, size_t count)
{
  for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < count;
       t += (size_t)gridDim.x * blockDim.x)
    h[t] = __float2half_rn(a[t]);
}

/* The FP16 floor: the same n^2 d / 2 multiply-adds as 8192^2 x d GEMMs with half inputs and
 * float32 output (the issue's definition), and *half_out_s the same with half output (what the
 * FP16 screen computes its tiles as, by default). */
static double hgemm_floor(size_t n, int d, double *half_out_s)
{
  const int T = 8192, reps = 50;
  int kpad = (d + 7) / 8 * 8;
  float *a, *c;
  __half *h;
  CHECK_CUDA(cudaMalloc(&a, (size_t)T * kpad * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&h, (size_t)T * kpad * sizeof(__half)));
  CHECK_CUDA(cudaMalloc(&c, (size_t)T * T * sizeof(float)));
  generate<<<1024, 256>>>(a, T, kpad, 98);
  to_half<<<1024, 256>>>(a, h, (size_t)T * kpad);
  CHECK_CUDA(cudaGetLastError());
  cublasHandle_t blas;
  CHECK_BLAS(cublasCreate(&blas));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  double floor_s[2];
  for (int variant = 0; variant < 2; variant++) {
    const cudaDataType out = variant == 0 ? CUDA_R_32F : CUDA_R_16F;
    const float one = variant == 0 ? 1.0f : 1.0f / 512, zero = 0;
    for (int w = 0; w < 5; w++)
      CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, kpad, &one, h, CUDA_R_16F, kpad,
                              h, CUDA_R_16F, kpad, &zero, c, out, T, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
    CHECK_CUDA(cudaEventRecord(e0));
    for (int r = 0; r < reps; r++)
      CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, kpad, &one, h, CUDA_R_16F, kpad,
                              h, CUDA_R_16F, kpad, &zero, c, out, T, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    double per = ms / 1e3 / reps;
    double macs_per_second = (double)T * T * kpad / per;
    printf("  cuBLAS FP16 GEMM (%s out) %dx%dx%d: %.3f ms, %.1f TFLOP/s\n",
           variant == 0 ? "fp32" : "fp16", T, T, kpad, per * 1e3, 2 * macs_per_second / 1e12);
    floor_s[variant] = (double)n * n * kpad / 2 / macs_per_second;
  }
  cublasDestroy(blas);
  cudaFree(a);
  cudaFree(h);
  cudaFree(c);
  *half_out_s = floor_s[1];
  return floor_s[0];
}

static double sgemm_floor(size_t n, int d)
{
  const int T = 8192, reps = 20;
  int kpad = (d + 7) / 8 * 8;
  float *a, *c;
  CHECK_CUDA(cudaMalloc(&a, (size_t)T * kpad * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&c, (size_t)T * T * sizeof(float)));
  generate<<<1024, 256>>>(a, T, kpad, 99);
  CHECK_CUDA(cudaGetLastError());
  cublasHandle_t h;
  CHECK_BLAS(cublasCreate(&h));
  CHECK_BLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  double best = 1e30;
  for (int variant = 0; variant < 2; variant++) {
    int K = variant == 0 ? d : kpad;
    const float one = 1, zero = 0;
    for (int w = 0; w < 3; w++)
      CHECK_BLAS(
          cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, T, T, K, &one, a, K, a + 0, K, &zero, c, T));
    CHECK_CUDA(cudaEventRecord(e0));
    for (int r = 0; r < reps; r++)
      CHECK_BLAS(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, T, T, K, &one, a, K, a, K, &zero, c, T));
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    double per = ms / 1e3 / reps;
    double macs_per_second = (double)T * T * K / per;
    printf("  cuBLAS SGEMM %dx%dx%d: %.3f ms, %.1f TFLOP/s\n", T, T, K, per * 1e3,
           2 * macs_per_second / 1e12);
    double floor_s = (double)n * n * d / 2 / macs_per_second;
    if (floor_s < best)
      best = floor_s;
  }
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(c);
  return best;
}

static size_t parse_bytes(const char *s)
{
  char *end;
  double v = strtod(s, &end);
  if (*end == 'G' || *end == 'g')
    v *= 1 << 30;
  else if (*end == 'M' || *end == 'm')
    v *= 1 << 20;
  return (size_t)v;
}

static void progress_print(uint64_t done, uint64_t total, void *data)
{
  (void)data;
  static double last = 0;
  double t = now_seconds();
  if (t - last > 5 || done == total) {
    fprintf(stderr, "    tiles %llu / %llu\n", (unsigned long long)done, (unsigned long long)total);
    last = t;
  }
}

#ifdef KNNWB_HAVE_MPI
/* Every rank's lists (its own rows, first_row on) into all n rows of nb, on every rank, through
 * the group's all-to-all. Exits on failure. */
static void gather_lists(const KnnwbKnnGroup *group, KnnwbNeighbors *nb, size_t n)
{
  const size_t k = nb->k;
  int64_t *indices = (int64_t *)g_try_malloc(n * k * sizeof(int64_t));
  double *distances = (double *)g_try_malloc(n * k * sizeof(double));
  if (indices == NULL || distances == NULL) {
    fprintf(stderr, "cannot allocate the lists of %zu rows\n", n);
    exit(1);
  }
  std::vector<const void *> send(group->size);
  std::vector<size_t> send_bytes(group->size), receive_bytes(group->size);
  std::vector<void *> receive(group->size);
  for (int pass = 0; pass < 2; pass++) {
    const size_t size = pass == 0 ? sizeof(int64_t) : sizeof(double);
    char *all = pass == 0 ? (char *)indices : (char *)distances;
    for (int r = 0; r < group->size; r++) {
      size_t first, last;
      knnwb_knn_group_rows(n, r, group->size, &first, &last);
      send[r] = pass == 0 ? (const void *)nb->indices : (const void *)nb->distances;
      send_bytes[r] = nb->n_queries * k * size;
      receive[r] = all + first * k * size;
      receive_bytes[r] = (last - first) * k * size;
    }
    GError *error = NULL;
    if (!group->exchange(group, send.data(), send_bytes.data(), receive.data(),
                         receive_bytes.data(), &error)) {
      fprintf(stderr, "gathering the lists: %s\n", error->message);
      exit(1);
    }
  }
  g_free(nb->indices);
  g_free(nb->distances);
  nb->indices = indices;
  nb->distances = distances;
  nb->n_queries = n;
  nb->first_row = 0;
}
#endif

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
#ifdef KNNWB_HAVE_MPI
  /* Under mpirun (one GPU per rank through CUDA_VISIBLE_DEVICES): every rank generates the same
   * matrix and knnwb_knn_self shares the work; rank 0 prints the table. */
  const KnnwbKnnGroup *group = NULL;
  GError *mpi_error = NULL;
  if (!knnwb_distributed_init(&argc, &argv, &group, &mpi_error)) {
    fprintf(stderr, "%s\n", mpi_error->message);
    return 1;
  }
  if (group != NULL && group->rank != 0 && getenv("KNNWB_MPI_VERBOSE") == NULL) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0)
      dup2(null, STDOUT_FILENO);
  }
  if (group != NULL)
    printf("MPI: %d ranks\n", group->size);
#endif
  std::vector<size_t> sizes;
  int d = 295;
  size_t k = 20, gpu_memory = 0;
  std::vector<int> devices;
  bool do_lib = true, do_select = true, do_floor = true, cold = false;
  KnnwbScreen screen = KNNWB_SCREEN_AUTO;
  KnnwbBackend backend = KNNWB_BACKEND_CUDA;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--n") && a + 1 < argc) {
      for (char *tok = strtok(argv[++a], ","); tok; tok = strtok(NULL, ","))
        sizes.push_back(strtoull(tok, NULL, 10));
    } else if (!strcmp(argv[a], "--d") && a + 1 < argc) {
      d = atoi(argv[++a]);
    } else if (!strcmp(argv[a], "--k") && a + 1 < argc) {
      k = strtoull(argv[++a], NULL, 10);
    } else if (!strcmp(argv[a], "--gpu-memory") && a + 1 < argc) {
      gpu_memory = parse_bytes(argv[++a]);
    } else if (!strcmp(argv[a], "--devices") && a + 1 < argc) {
      for (char *tok = strtok(argv[++a], ","); tok; tok = strtok(NULL, ","))
        devices.push_back(atoi(tok));
    } else if (!strcmp(argv[a], "--screen") && a + 1 < argc) {
      if (!knnwb_screen_from_string(argv[++a], &screen, NULL)) {
        fprintf(stderr, "unknown --screen %s\n", argv[a]);
        return 2;
      }
    } else if (!strcmp(argv[a], "--backend") && a + 1 < argc) {
      backend = !strcmp(argv[++a], "cpu") ? KNNWB_BACKEND_CPU : KNNWB_BACKEND_CUDA;
    } else if (!strcmp(argv[a], "--no-lib")) {
      do_lib = false;
    } else if (!strcmp(argv[a], "--no-select")) {
      do_select = false;
    } else if (!strcmp(argv[a], "--no-floor")) {
      do_floor = false;
    } else if (!strcmp(argv[a], "--cold")) {
      cold = true;
    } else {
      fprintf(stderr, "unknown argument %s\n", argv[a]);
      return 2;
    }
  }
  if (sizes.empty())
    sizes = {384126, 1533876};
  int n_gpus = knnwb_cuda_device_count();
  if (n_gpus == 0) {
    fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s x%d visible, using %zu; d=%d k=%zu\n", prop.name, n_gpus,
         devices.empty() ? (size_t)n_gpus : devices.size(), d, k);
  /* Every GPU used gets its context before any timing: device 0 has one anyway (the data are
   * generated there), so 1 and N GPUs are compared without N - 1 context creations on one side.
   * With --cold they are left to the first timed call, which pays them as a command does. */
  for (int g = 0; g < (cold ? 0 : devices.empty() ? n_gpus : (int)devices.size()); g++) {
    CHECK_CUDA(cudaSetDevice(devices.empty() ? g : devices[g]));
    CHECK_CUDA(cudaFree(0));
  }
  CHECK_CUDA(cudaSetDevice(0));
  if (gpu_memory)
    printf("gpu-memory budget: %.2f GiB per device\n", gpu_memory / (double)(1 << 30));
  else
    printf("gpu-memory budget: 90%% of free memory\n");

  struct Row {
    size_t n;
    double lib, select, floor_s, hfloor_s, hfloor_half_s;
  };
  std::vector<Row> table;
  for (size_t n : sizes) {
    printf("n = %zu\n", n);
    fflush(stdout);
    Row row = {n, NAN, NAN, NAN, NAN, NAN};
    float *dev_raw, *dev_norm;
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaMalloc(&dev_raw, n * d * sizeof(float)));
    generate<<<4096, 256>>>(dev_raw, n, d, 12345);
    CHECK_CUDA(cudaGetLastError());
    KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
    CHECK_CUDA(cudaMemcpy(m->values, dev_raw, n * d * sizeof(float), cudaMemcpyDeviceToHost));
    if (do_select) {
      CHECK_CUDA(cudaMalloc(&dev_norm, n * d * sizeof(float)));
      normalise<<<(unsigned)((n + 255) / 256), 256>>>(dev_raw, dev_norm, n, d);
      CHECK_CUDA(cudaGetLastError());
      float *scored = (float *)malloc(n * d * sizeof(float));
      CHECK_CUDA(cudaMemcpy(scored, dev_norm, n * d * sizeof(float), cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaFree(dev_norm));
      CHECK_CUDA(cudaFree(dev_raw));
      dev_raw = NULL;
      /* core's candidate count and precision for the screen (auto: fp16 for k <= 256) */
      const bool half = screen == KNNWB_SCREEN_FP16 || screen == KNNWB_SCREEN_TF32 ||
                        (screen == KNNWB_SCREEN_AUTO && k <= 256);
      size_t kc = half ? k + (k / 4 > 16 ? k / 4 : 16) : k + (k / 8 > 8 ? k / 8 : 8);
      KnnwbSelectJob job;
      memset(&job, 0, sizeof job);
      job.query = job.reference = scored;
      job.n_query = job.n_reference = n;
      job.dim = d;
      job.score_kind = KNNWB_SCORE_DOT;
      job.self = 1;
      job.kc = kc;
      job.screen = screen == KNNWB_SCREEN_TF32 ? KNNWB_KERNELS_SCREEN_TF32
                   : half                      ? KNNWB_KERNELS_SCREEN_FP16
                                               : KNNWB_KERNELS_SCREEN_FP32;
      job.screen_row_norm = 1.0 + 1e-6;
      /* as core asks (KNNWB_SCREEN_FLOAT_SCORES=1 keeps float32 tiles) */
      const char *float_scores = getenv("KNNWB_SCREEN_FLOAT_SCORES");
      job.screen_half_scores = job.screen == KNNWB_KERNELS_SCREEN_FP16 &&
                               !(float_scores != NULL && strcmp(float_scores, "1") == 0);
      job.memory_bytes = gpu_memory;
      job.devices = devices.empty() ? NULL : devices.data();
      job.n_devices = (int)devices.size();
      job.progress = progress_print;
      job.out_index = (int64_t *)malloc(n * kc * sizeof(int64_t));
      job.out_score = (float *)malloc(n * kc * sizeof(float));
      char message[512];
      double t0 = now_seconds();
      int status = knnwb_cuda_select(&job, message, sizeof message);
      row.select = now_seconds() - t0;
      if (status != KNNWB_KERNELS_OK) {
        fprintf(stderr, "select failed: %s\n", message);
        return 1;
      }
      /* sanity: every row's first candidate is a valid other row */
      for (size_t i = 0; i < n; i += 9973)
        if (job.out_index[i * kc] < 0 || (size_t)job.out_index[i * kc] >= n ||
            (size_t)job.out_index[i * kc] == i) {
          fprintf(stderr, "bad candidate for row %zu\n", i);
          return 1;
        }
      printf("  select alone: %.2f s\n", row.select);
      fflush(stdout);
      free(job.out_index);
      free(job.out_score);
      free(scored);
    }
    if (dev_raw)
      CHECK_CUDA(cudaFree(dev_raw));
    if (do_lib) {
      KnnwbKnnOptions options;
      knnwb_knn_options_init(&options);
      options.metric = KNNWB_METRIC_PEARSON;
      options.k = k;
      options.backend = backend;
      options.screen = screen;
      options.gpu_memory_bytes = gpu_memory;
      options.devices = devices.empty() ? NULL : devices.data();
      options.n_devices = (int)devices.size();
      KnnwbNeighbors *nb = NULL;
      GError *error = NULL;
#ifdef KNNWB_HAVE_MPI
      /* As `knnwb knn -o graph.knn` under mpirun: each rank ends with its own rows' lists (and
       * writes them in place); gathering them all for the digest is timed apart. */
      options.group = group; /* there is no default group: each run names its ranks */
      options.group_own_rows = group != NULL;
      /* Every rank starts the clock together (each generated the matrix at its own pace). */
      if (group != NULL && !group->agree(group, TRUE, NULL)) {
        fprintf(stderr, "the ranks could not meet\n");
        return 1;
      }
#endif
      double t0 = now_seconds();
      gboolean ok = knnwb_knn_self(m, &options, &nb, &error);
      row.lib = now_seconds() - t0;
      if (!ok) {
        fprintf(stderr, "knnwb_knn_self failed: %s\n", error->message);
        return 1;
      }
#ifdef KNNWB_HAVE_MPI
      if (group != NULL) {
        double t1 = now_seconds();
        gather_lists(group, nb, n);
        printf("  (each rank holds its own rows' lists; gathering all of them on every rank for "
               "the digest, not timed: %.2f s)\n",
               now_seconds() - t1);
      }
#endif
      /* FNV-1a over every index and distance bit: runs on 1 and N GPUs (or the CPU) must agree.
       * Beyond 2^27 entries (large k) one byte at a time takes half a minute: each row is hashed
       * alone, by all cores, and the row hashes are hashed in order ("row-wise"). */
      auto fnv = [](uint64_t digest, const int64_t *index, const double *distance, size_t cells) {
        for (size_t t = 0; t < cells; t++) {
          uint64_t words[2];
          memcpy(&words[0], &index[t], 8);
          memcpy(&words[1], &distance[t], 8);
          for (int w = 0; w < 2; w++)
            for (int b = 0; b < 8; b++)
              digest = (digest ^ ((words[w] >> (8 * b)) & 0xff)) * 1099511628211ull;
        }
        return digest;
      };
      const uint64_t basis = 1469598103934665603ull;
      const bool row_wise = n * k > ((size_t)1 << 27);
      uint64_t digest = basis;
      if (!row_wise) {
        digest = fnv(basis, nb->indices, nb->distances, n * k);
      } else {
        std::vector<uint64_t> rows(n);
        const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
        std::vector<std::thread> pool;
        for (unsigned t = 0; t < threads; t++)
          pool.emplace_back([&, t] {
            for (size_t i = n * t / threads; i < n * (t + 1) / threads; i++)
              rows[i] = fnv(basis, nb->indices + i * k, nb->distances + i * k, k);
          });
        for (auto &th : pool)
          th.join();
        for (size_t i = 0; i < n; i++)
          for (int b = 0; b < 8; b++)
            digest = (digest ^ ((rows[i] >> (8 * b)) & 0xff)) * 1099511628211ull;
      }
      printf("  library (%s, screen %s, %zu rows re-selected): %.2f s; row 0 nearest %lld at "
             "%.6f; lists digest %016llx%s\n",
             nb->backend_used, knnwb_screen_to_string(nb->screen_used), nb->n_reselected, row.lib,
             (long long)nb->indices[0], nb->distances[0], (unsigned long long)digest,
             row_wise ? " (row-wise)" : "");
      fflush(stdout);
      knnwb_neighbors_free(nb);
    }
    knnwb_matrix_free(m);
    if (do_floor) {
      CHECK_CUDA(cudaSetDevice(0));
      row.floor_s = sgemm_floor(n, d);
      printf("  SGEMM floor (n^2 d / 2 MACs, one GPU): %.2f s\n", row.floor_s);
      row.hfloor_s = hgemm_floor(n, d, &row.hfloor_half_s);
      printf("  FP16 GEMM floor (same MACs, one GPU): %.2f s (fp16 out: %.2f s)\n", row.hfloor_s,
             row.hfloor_half_s);
    }
    table.push_back(row);
  }
  printf("\n| n | d | k | GPUs | screen | library end to end (s) | select alone (s) | SGEMM floor "
         "1 GPU (s) | FP16 GEMM floor 1 GPU (s) | library / FP16 floor | FP16 GEMM floor, fp16 "
         "out (s) |\n");
  printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Row &r : table)
    printf("| %zu | %d | %zu | %zu | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.n, d, k,
           devices.empty() ? (size_t)n_gpus : devices.size(), knnwb_screen_to_string(screen), r.lib,
           r.select, r.floor_s, r.hfloor_s, r.lib / r.hfloor_s, r.hfloor_half_s);
#ifdef KNNWB_HAVE_MPI
  knnwb_distributed_finalize();
#endif
  return 0;
}
