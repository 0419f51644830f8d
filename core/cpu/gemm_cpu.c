/*
 * The CPU backend's tile GEMMs, one call with the precision as a parameter.
 *
 * - FP32 through oneDNN's SGEMM when knnwb was built with it (its JIT kernels use AVX-512 wherever
 *   the CPU has it; Debian's OpenBLAS 0.3.21 runs its Haswell AVX2 kernels on AMD Zen 4/5, half the
 *   rate), otherwise OpenBLAS's cblas_sgemm. Both are float32 FMA sums: the FP32 bound holds
 *   whatever their order.
 * - BF16 through a oneDNN matmul (bf16 in, f32 out): its brgemm kernels use AVX512_BF16 (vdpbf16ps)
 *   or AMX tiles, about twice the float32 rate on the first and far more on the second. Rows are
 *   scaled by 2^s (exact; every row's norm then at most 1, see knnwb_cpu_gemm_new) and rounded to
 *   BF16 to nearest even, once per job, into zero-padded copies, so that every tile is block x
 *   block and one primitive serves the whole job; the matmul's output scale 2^-2s undoes the
 *   scaling exactly. screen.c derives the bound.
 * Debian's OpenBLAS is built without sbgemm, hence oneDNN (libdnnl-dev) for BF16.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cblas.h>
#include "cpu/cpu_internal.h"
#include "knnwb_kernels.h"
#ifdef KNNWB_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <dlfcn.h>
#endif

typedef enum {
  KNNWB_CPU_GEMM_OPENBLAS,
  KNNWB_CPU_GEMM_ONEDNN_FP32,
  KNNWB_CPU_GEMM_ONEDNN_BF16
} KnnwbCpuGemmKind;

struct KnnwbCpuGemm {
  KnnwbCpuGemmKind kind;
  const KnnwbSelectJob *job; /* its rows, given or derived (knnwb_select_job_rows) */
  size_t nq, nr, d, block_query, block_reference;
  char name[96];
#ifdef KNNWB_HAVE_ONEDNN
  uint16_t *query_bf16, *reference_bf16; /* padded to whole blocks; the same array for self */
  dnnl_engine_t engine;
  dnnl_primitive_t matmul;
  dnnl_memory_desc_t src_desc, weights_desc, dst_desc, scratch_desc;
#endif
};

struct KnnwbCpuGemmWorker {
  KnnwbCpuGemm *gemm;
  /* Derived rows: each side's block as last filled (first row, count), so that a query block
   * serves all the tiles of its row of tiles without being derived again. */
  float *rows[2];
  size_t rows_first[2], rows_count[2];
#ifdef KNNWB_HAVE_ONEDNN
  int saved_threads; /* the thread's OpenMP setting before, 0 when untouched */
  dnnl_stream_t stream;
  dnnl_memory_t src, weights, dst, scratch;
  void *scratch_bytes;
#endif
};

#ifdef KNNWB_HAVE_ONEDNN
/* The thread count of the calling thread's OpenMP regions, in the OpenMP runtime oneDNN was built
 * with (Debian's: GNU libgomp, loaded with it): looked up in the process rather than linked, so
 * that a knnwb built by clang does not bring a second runtime. Sets *saved to the previous count
 * (0 when no runtime is found, and then does nothing). */
static void knnwb_cpu_gemm_openmp_threads(int threads, int *saved)
{
  typedef void (*SetThreads)(int);
  typedef int (*GetThreads)(void);
  static gsize found = 0;
  static SetThreads set_threads;
  static GetThreads get_threads;
  if (g_once_init_enter(&found)) {
    set_threads = (SetThreads)dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    get_threads = (GetThreads)dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    g_once_init_leave(&found, 1);
  }
  if (saved != NULL)
    *saved = set_threads != NULL && get_threads != NULL ? get_threads() : 0;
  if (set_threads != NULL && threads > 0)
    set_threads(threads);
}

/* KNNWB_CPU_GEMM=openblas: every GEMM through OpenBLAS (tests, comparisons). */
static gboolean knnwb_cpu_gemm_forced_openblas(void)
{
  const char *choice = g_getenv("KNNWB_CPU_GEMM");
  return choice != NULL && g_ascii_strcasecmp(choice, "openblas") == 0;
}

#define KNNWB_DNNL_TRY(call, what)                                                                 \
  do {                                                                                             \
    dnnl_status_t dnnl_status_ = (call);                                                           \
    if (dnnl_status_ != dnnl_success) {                                                            \
      snprintf(message, message_size, "oneDNN: %s failed (status %d)", what, (int)dnnl_status_);   \
      goto fail;                                                                                   \
    }                                                                                              \
  } while (0)

/* The CPU's BF16 instructions, and the OS's saving of their registers (XCR0: SSE, AVX and the
 * three AVX-512 states; AMX tile data needs a per-process permission oneDNN asks for itself). */
static gboolean knnwb_cpu_gemm_cpu_has_bf16(void)
{
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid_count(1, 0, &a, &b, &c, &d) || !(c >> 27 & 1)) /* OSXSAVE */
    return FALSE;
  unsigned xcr0_low, xcr0_high;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & 0xe6) != 0xe6)
    return FALSE;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
    return FALSE;
  const unsigned leaves = a;
  const gboolean avx512f = b >> 16 & 1, amx_bf16 = d >> 22 & 1;
  gboolean avx512_bf16 = FALSE;
  if (leaves >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d))
    avx512_bf16 = a >> 5 & 1;
  return avx512f && (avx512_bf16 || amx_bf16);
#else
  return FALSE;
#endif
}

/* The BF16 matmul primitive for whole tiles of depth d. */
static gboolean knnwb_cpu_gemm_bf16_primitive(KnnwbCpuGemm *gemm, float scale, char *message,
                                              size_t message_size)
{
  const dnnl_dim_t bq = (dnnl_dim_t)gemm->block_query, br = (dnnl_dim_t)gemm->block_reference;
  const dnnl_dim_t d = (dnnl_dim_t)gemm->d;
  dnnl_dims_t src_dims = {bq, d}, src_strides = {d, 1};
  dnnl_dims_t weights_dims = {d, br}, weights_strides = {1, d}; /* reference rows, transposed */
  dnnl_dims_t dst_dims = {bq, br}, dst_strides = {br, 1};
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  gboolean ok = FALSE;
  KNNWB_DNNL_TRY(dnnl_engine_create(&gemm->engine, dnnl_cpu, 0), "engine");
  KNNWB_DNNL_TRY(
      dnnl_memory_desc_init_by_strides(&gemm->src_desc, 2, src_dims, dnnl_bf16, src_strides),
      "query rows");
  KNNWB_DNNL_TRY(dnnl_memory_desc_init_by_strides(&gemm->weights_desc, 2, weights_dims, dnnl_bf16,
                                                  weights_strides),
                 "reference rows");
  KNNWB_DNNL_TRY(
      dnnl_memory_desc_init_by_strides(&gemm->dst_desc, 2, dst_dims, dnnl_f32, dst_strides),
      "tile");
  dnnl_matmul_desc_t desc;
  KNNWB_DNNL_TRY(
      dnnl_matmul_desc_init(&desc, &gemm->src_desc, &gemm->weights_desc, NULL, &gemm->dst_desc),
      "matmul");
  KNNWB_DNNL_TRY(dnnl_primitive_attr_create(&attr), "attributes");
  /* Each thread brings its own scratchpad: one primitive runs on every worker at once. */
  KNNWB_DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user),
                 "scratchpad mode");
  KNNWB_DNNL_TRY(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale), "output scale");
  KNNWB_DNNL_TRY(dnnl_primitive_desc_create(&pd, &desc, attr, gemm->engine, NULL),
                 "matmul for BF16 rows");
  const char *impl = "?";
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  if (strstr(impl, "bf16") == NULL && strstr(impl, "amx") == NULL) {
    /* Without the instructions oneDNN emulates BF16, slower than float32. */
    snprintf(message, message_size, "oneDNN has no native BF16 matmul here (it chose %s)", impl);
    goto fail;
  }
  snprintf(gemm->name, sizeof gemm->name, "onednn bf16 %s", impl);
  const dnnl_memory_desc_t *scratch = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  gemm->scratch_desc = *scratch;
  KNNWB_DNNL_TRY(dnnl_primitive_create(&gemm->matmul, pd), "matmul primitive");
  ok = TRUE;
fail:
  if (pd != NULL)
    dnnl_primitive_desc_destroy(pd);
  if (attr != NULL)
    dnnl_primitive_attr_destroy(attr);
  return ok;
}

/* rows (n x d) times 2^s, rounded to BF16 to nearest even, into out (n x d). Finite inputs at
 * most 1 in magnitude after scaling: the rounding cannot overflow. */
static void knnwb_cpu_gemm_to_bf16(const float *rows, size_t n, size_t d, int s, uint16_t *out)
{
  const float scale = ldexpf(1.0f, s); /* a power of two: the products are exact */
  for (size_t i = 0; i < n * d; i++) {
    float x = rows[i] * scale;
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    bits += 0x7fffu + (bits >> 16 & 1u);
    out[i] = (uint16_t)(bits >> 16);
  }
}

/* Side side's n rows of job (derived ones in chunks) into out as knnwb_cpu_gemm_to_bf16 makes
 * them, zeros past n (padded x d). FALSE when out of memory. */
static gboolean knnwb_cpu_gemm_side_to_bf16(const KnnwbSelectJob *job, int side, size_t n,
                                            size_t padded, int s, uint16_t *out)
{
  const size_t d = job->dim, chunk = 4096;
  g_autofree float *scratch = NULL;
  if (knnwb_select_job_derived(job) && n > 0 &&
      (scratch = g_try_malloc(MIN(n, chunk) * MAX(d, (size_t)1) * sizeof(float))) == NULL)
    return FALSE;
  for (size_t first = 0; first < n; first += chunk) {
    const size_t count = MIN(chunk, n - first);
    knnwb_cpu_gemm_to_bf16(knnwb_select_job_rows(job, side, first, count, scratch), count, d, s,
                           out + first * d);
  }
  memset(out + n * d, 0, (padded - n) * d * sizeof(uint16_t));
  return TRUE;
}
#endif

gboolean knnwb_cpu_gemm_has_bf16(void)
{
#ifdef KNNWB_HAVE_ONEDNN
  static gsize decided = 0;
  static gboolean available = FALSE;
  if (knnwb_cpu_gemm_forced_openblas())
    return FALSE;
  if (g_once_init_enter(&decided)) {
    if (knnwb_cpu_gemm_cpu_has_bf16()) {
      /* The flags say yes; oneDNN must agree (its choice of kernel for a small BF16 matmul). */
      KnnwbCpuGemm probe = {
          .kind = KNNWB_CPU_GEMM_ONEDNN_BF16, .d = 64, .block_query = 64, .block_reference = 64};
      char message[256];
      const size_t message_size = sizeof message;
      available = knnwb_cpu_gemm_bf16_primitive(&probe, 1.0f, message, message_size);
      if (!available)
        g_debug("knnwb: no BF16 screen on this CPU: %s", message);
      if (probe.matmul != NULL)
        dnnl_primitive_destroy(probe.matmul);
      if (probe.engine != NULL)
        dnnl_engine_destroy(probe.engine);
    }
    g_once_init_leave(&decided, 1);
  }
  return available;
#else
  return FALSE;
#endif
}

KnnwbCpuGemm *knnwb_cpu_gemm_new(int precision, const KnnwbSelectJob *job, size_t block_query,
                                 size_t block_reference, char *message, size_t message_size)
{
  KnnwbCpuGemm *gemm = g_new0(KnnwbCpuGemm, 1);
  const size_t nq = job->n_query, nr = job->n_reference, d = job->dim;
  const double row_norm = job->screen_row_norm;
  gemm->job = job;
  gemm->nq = nq;
  gemm->nr = nr;
  gemm->d = d;
  gemm->block_query = block_query;
  gemm->block_reference = block_reference;
  gemm->kind = KNNWB_CPU_GEMM_OPENBLAS;
  g_strlcpy(gemm->name, "openblas sgemm", sizeof gemm->name);
  if (precision != KNNWB_KERNELS_SCREEN_FP32 && precision != KNNWB_KERNELS_SCREEN_BF16) {
    snprintf(message, message_size, "the CPU backend screens in FP32 or BF16 only");
    g_free(gemm);
    return NULL;
  }
  (void)row_norm;
#ifdef KNNWB_HAVE_ONEDNN
  if (precision == KNNWB_KERNELS_SCREEN_BF16) {
    if (!knnwb_cpu_gemm_has_bf16()) {
      snprintf(message, message_size, "no BF16 matmul on this CPU");
      goto fail;
    }
    /* 2^s with every scaled row's norm at most 1 (row_norm = m 2^e, m in [1/2, 1): s = -e), so
     * components below BF16's normal range (2^-126) are negligible against the bound. */
    int e = 0;
    if (row_norm > 0.0 && isfinite(row_norm))
      frexp(row_norm, &e);
    const int s = -e;
    if (2 * e > 127 || 2 * e < -126) {
      /* Rows near float's limits (a query far outside its reference's frame): the scale 2^-2s is
       * no float. FP32 errs less than the BF16 bound core certifies with, so it stands in. */
      gemm->kind = KNNWB_CPU_GEMM_ONEDNN_FP32;
      g_strlcpy(gemm->name, "onednn sgemm (rows beyond BF16's scaling)", sizeof gemm->name);
      return gemm;
    }
    gemm->kind = KNNWB_CPU_GEMM_ONEDNN_BF16;
    const size_t pq = (nq + block_query - 1) / block_query * block_query;
    const size_t pr = (nr + block_reference - 1) / block_reference * block_reference;
    gemm->query_bf16 = g_try_malloc(MAX(pq * d, (size_t)1) * sizeof(uint16_t));
    gemm->reference_bf16 = knnwb_select_job_same(job) && nq == nr
                               ? gemm->query_bf16
                               : g_try_malloc(MAX(pr * d, (size_t)1) * sizeof(uint16_t));
    if (gemm->query_bf16 == NULL || gemm->reference_bf16 == NULL) {
      snprintf(message, message_size, "cannot allocate the BF16 copies of %zu + %zu rows", nq, nr);
      goto fail;
    }
    if (!knnwb_cpu_gemm_side_to_bf16(job, 0, nq, pq, s, gemm->query_bf16) ||
        (gemm->reference_bf16 != gemm->query_bf16 &&
         !knnwb_cpu_gemm_side_to_bf16(job, 1, nr, pr, s, gemm->reference_bf16))) {
      snprintf(message, message_size, "cannot allocate the rows to convert to BF16");
      goto fail;
    }
    if (!knnwb_cpu_gemm_bf16_primitive(gemm, ldexpf(1.0f, -2 * s), message, message_size))
      goto fail;
  } else if (!knnwb_cpu_gemm_forced_openblas() && d > 0) {
    gemm->kind = KNNWB_CPU_GEMM_ONEDNN_FP32;
    g_strlcpy(gemm->name, "onednn sgemm", sizeof gemm->name);
  }
#else
  if (precision == KNNWB_KERNELS_SCREEN_BF16) {
    snprintf(message, message_size, "knnwb was built without oneDNN: no BF16 screen");
    goto fail;
  }
#endif
  return gemm;
fail:
  knnwb_cpu_gemm_free(gemm);
  return NULL;
}

void knnwb_cpu_gemm_free(KnnwbCpuGemm *gemm)
{
  if (gemm == NULL)
    return;
#ifdef KNNWB_HAVE_ONEDNN
  if (gemm->matmul != NULL)
    dnnl_primitive_destroy(gemm->matmul);
  if (gemm->engine != NULL)
    dnnl_engine_destroy(gemm->engine);
  if (gemm->reference_bf16 != gemm->query_bf16)
    g_free(gemm->reference_bf16);
  g_free(gemm->query_bf16);
#endif
  g_free(gemm);
}

const char *knnwb_cpu_gemm_name(const KnnwbCpuGemm *gemm)
{
  return gemm->name;
}

/* Whether a worker fills blocks of derived rows for its tiles (BF16 converted them all up front).
 */
static gboolean knnwb_cpu_gemm_fills(const KnnwbCpuGemm *gemm)
{
  return knnwb_select_job_derived(gemm->job) && gemm->kind != KNNWB_CPU_GEMM_ONEDNN_BF16;
}

size_t knnwb_cpu_gemm_worker_bytes(const KnnwbCpuGemm *gemm)
{
  size_t bytes = gemm != NULL ? sizeof(KnnwbCpuGemmWorker) : 0;
  if (gemm != NULL && knnwb_cpu_gemm_fills(gemm))
    bytes += (gemm->block_query + gemm->block_reference) * gemm->d * sizeof(float);
#ifdef KNNWB_HAVE_ONEDNN
  if (gemm != NULL && gemm->kind == KNNWB_CPU_GEMM_ONEDNN_BF16)
    bytes += dnnl_memory_desc_get_size(&gemm->scratch_desc);
#endif
  return bytes;
}

KnnwbCpuGemmWorker *knnwb_cpu_gemm_worker_new(KnnwbCpuGemm *gemm)
{
  KnnwbCpuGemmWorker *worker = g_try_new0(KnnwbCpuGemmWorker, 1);
  if (worker == NULL)
    return NULL;
  worker->gemm = gemm;
  if (knnwb_cpu_gemm_fills(gemm)) {
    const size_t blocks[2] = {gemm->block_query, gemm->block_reference};
    for (int side = 0; side < 2; side++) {
      worker->rows[side] = g_try_malloc(MAX(blocks[side] * gemm->d, (size_t)1) * sizeof(float));
      worker->rows_count[side] = 0;
      if (worker->rows[side] == NULL) {
        knnwb_cpu_gemm_worker_free(worker);
        return NULL;
      }
    }
  }
#ifdef KNNWB_HAVE_ONEDNN
  if (gemm->kind != KNNWB_CPU_GEMM_OPENBLAS) /* this thread's oneDNN calls: one GEMM a worker */
    knnwb_cpu_gemm_openmp_threads(1, &worker->saved_threads);
  if (gemm->kind == KNNWB_CPU_GEMM_ONEDNN_BF16) {
    size_t scratch = dnnl_memory_desc_get_size(&gemm->scratch_desc);
    worker->scratch_bytes = scratch > 0 ? g_try_malloc(scratch) : NULL;
    if ((scratch > 0 && worker->scratch_bytes == NULL) ||
        dnnl_stream_create(&worker->stream, gemm->engine, dnnl_stream_default_flags) !=
            dnnl_success ||
        dnnl_memory_create(&worker->src, &gemm->src_desc, gemm->engine, DNNL_MEMORY_NONE) !=
            dnnl_success ||
        dnnl_memory_create(&worker->weights, &gemm->weights_desc, gemm->engine, DNNL_MEMORY_NONE) !=
            dnnl_success ||
        dnnl_memory_create(&worker->dst, &gemm->dst_desc, gemm->engine, DNNL_MEMORY_NONE) !=
            dnnl_success ||
        dnnl_memory_create(&worker->scratch, &gemm->scratch_desc, gemm->engine,
                           scratch > 0 ? worker->scratch_bytes : DNNL_MEMORY_NONE) !=
            dnnl_success) {
      knnwb_cpu_gemm_worker_free(worker);
      return NULL;
    }
  }
#endif
  return worker;
}

void knnwb_cpu_gemm_worker_free(KnnwbCpuGemmWorker *worker)
{
  if (worker == NULL)
    return;
  g_free(worker->rows[0]);
  g_free(worker->rows[1]);
#ifdef KNNWB_HAVE_ONEDNN
  dnnl_memory_t memories[] = {worker->src, worker->weights, worker->dst, worker->scratch};
  for (size_t i = 0; i < G_N_ELEMENTS(memories); i++)
    if (memories[i] != NULL)
      dnnl_memory_destroy(memories[i]);
  if (worker->stream != NULL)
    dnnl_stream_destroy(worker->stream);
  g_free(worker->scratch_bytes);
  if (worker->saved_threads > 0)
    knnwb_cpu_gemm_openmp_threads(worker->saved_threads, NULL);
#endif
  g_free(worker);
}

/* Rows [first, first + count) of side (0 query, 1 reference) as a tile's GEMM reads them: the
 * job's own, or derived into the worker's block for that side (kept while the same rows come
 * again). */
static const float *knnwb_cpu_gemm_rows(KnnwbCpuGemmWorker *worker, int side, size_t first,
                                        size_t count)
{
  const KnnwbSelectJob *job = worker->gemm->job;
  if (!knnwb_cpu_gemm_fills(worker->gemm))
    return knnwb_select_job_rows(job, side, first, count, NULL);
  if (worker->rows_count[side] != count || worker->rows_first[side] != first) {
    (void)knnwb_select_job_rows(job, side, first, count, worker->rows[side]);
    worker->rows_first[side] = first;
    worker->rows_count[side] = count;
  }
  return worker->rows[side];
}

gboolean knnwb_cpu_gemm_tile(KnnwbCpuGemmWorker *worker, size_t q0, size_t bq, size_t r0, size_t br,
                             float *out, char *message, size_t message_size)
{
  const KnnwbCpuGemm *gemm = worker->gemm;
  const size_t d = gemm->d, ld = gemm->block_reference;
  if (d == 0) {
    for (size_t a = 0; a < bq; a++)
      memset(out + a * ld, 0, br * sizeof(float));
    return TRUE;
  }
  switch (gemm->kind) {
  case KNNWB_CPU_GEMM_OPENBLAS:
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)br, (int)d, 1.0f,
                knnwb_cpu_gemm_rows(worker, 0, q0, bq), (int)d,
                knnwb_cpu_gemm_rows(worker, 1, r0, br), (int)d, 0.0f, out, (int)ld);
    return TRUE;
#ifdef KNNWB_HAVE_ONEDNN
  case KNNWB_CPU_GEMM_ONEDNN_FP32:
    KNNWB_DNNL_TRY(dnnl_sgemm('N', 'T', (dnnl_dim_t)bq, (dnnl_dim_t)br, (dnnl_dim_t)d, 1.0f,
                              knnwb_cpu_gemm_rows(worker, 0, q0, bq), (dnnl_dim_t)d,
                              knnwb_cpu_gemm_rows(worker, 1, r0, br), (dnnl_dim_t)d, 0.0f, out,
                              (dnnl_dim_t)ld),
                   "sgemm");
    return TRUE;
  case KNNWB_CPU_GEMM_ONEDNN_BF16: {
    KNNWB_DNNL_TRY(dnnl_memory_set_data_handle(worker->src, gemm->query_bf16 + q0 * d), "rows");
    KNNWB_DNNL_TRY(dnnl_memory_set_data_handle(worker->weights, gemm->reference_bf16 + r0 * d),
                   "rows");
    KNNWB_DNNL_TRY(dnnl_memory_set_data_handle(worker->dst, out), "tile");
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, worker->src},
                              {DNNL_ARG_WEIGHTS, worker->weights},
                              {DNNL_ARG_DST, worker->dst},
                              {DNNL_ARG_SCRATCHPAD, worker->scratch}};
    KNNWB_DNNL_TRY(dnnl_primitive_execute(gemm->matmul, worker->stream, 4, args), "matmul");
    KNNWB_DNNL_TRY(dnnl_stream_wait(worker->stream), "matmul");
    return TRUE;
  }
  fail:
    return FALSE;
#endif
  default:
    snprintf(message, message_size, "unknown CPU GEMM");
    return FALSE;
  }
}
