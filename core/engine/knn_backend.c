/* Which backend a kNN run selects its candidates with (CUDA when usable, else the CPU), and how a
 * backend's status becomes an error. */
#include <knnwb/error.h>
#include "cpu/cpu.h"
#include "engine/engine.h"
#include "tree/tree.h"

gboolean knnwb_knn_status_to_error(int status, const char *message, const char *backend,
                                   GError **error)
{
  int code = KNNWB_ERROR_FAILED;
  switch (status) {
  case KNNWB_KERNELS_OK:
    return TRUE;
  case KNNWB_KERNELS_CANCELLED:
    code = KNNWB_ERROR_CANCELLED;
    break;
  case KNNWB_KERNELS_OUT_OF_MEMORY:
    code = KNNWB_ERROR_NO_MEMORY;
    break;
  default:
    code = KNNWB_ERROR_DEVICE;
  }
  g_set_error(error, KNNWB_ERROR, code, "%s backend: %s", backend, message);
  return FALSE;
}

void knnwb_knn_gpu_share(const KnnwbKnnOptions *options, int *share, int *shares)
{
  const KnnwbKnnGroup *group = options->group;
  const gboolean ranks =
      group != NULL && group->size > 1 && group->local_size > 1 && options->n_devices <= 0;
  *share = ranks ? group->local_rank : 0;
  *shares = ranks ? group->local_size : 1;
}

int knnwb_knn_run_gpus(const KnnwbKnnOptions *options, int *ordinals, int max)
{
  if (options->n_devices > 0) {
    for (int i = 0; i < MIN(options->n_devices, max); i++)
      ordinals[i] = options->devices != NULL ? options->devices[i] : i;
    return options->n_devices;
  }
  int share = 0, shares = 1;
  knnwb_knn_gpu_share(options, &share, &shares);
  return knnwb_cuda_share_devices(share, shares, ordinals, max);
}

/* Whether CUDA's driver or the GPUs were asked to start (knnwb_knn_devices_begun). */
static gint knnwb_knn_devices_asked;

gboolean knnwb_knn_devices_narrow(int *devices, int n_devices)
{
  g_autofree char *given = g_strdup(g_getenv("CUDA_VISIBLE_DEVICES"));
  if (devices == NULL || n_devices <= 0 || !knnwb_cuda_narrow_to(devices, n_devices))
    return FALSE;
  g_debug("knnwb: the run's GPUs are all the driver shows: CUDA_VISIBLE_DEVICES=%s (was %s), "
          "now GPU 0 to %d",
          g_getenv("CUDA_VISIBLE_DEVICES"), given ? given : "unset", n_devices - 1);
  for (int i = 0; i < n_devices; i++)
    devices[i] = i;
  return TRUE;
}

void knnwb_knn_devices_start(const KnnwbKnnOptions *options)
{
  int share = 0, shares = 1;
  knnwb_knn_gpu_share(options, &share, &shares);
  if (options->backend != KNNWB_BACKEND_CPU) {
    g_atomic_int_set(&knnwb_knn_devices_asked, 1);
    knnwb_cuda_start(options->devices, options->n_devices, share, shares);
  }
}

gboolean knnwb_knn_devices_begun(void)
{
  return g_atomic_int_get(&knnwb_knn_devices_asked) != 0;
}

void knnwb_knn_gemm_start(const KnnwbKnnOptions *options, size_t n_query, size_t n_reference,
                          size_t dim)
{
  /* Only where the GPUs will score in half-precision tiles with the default budget, whose first
   * tile is then the planner's first (kernels/gemm_start.cu). */
  KnnwbScreen screen = KNNWB_SCREEN_AUTO;
  if (options->backend == KNNWB_BACKEND_CPU || options->gpu_memory_bytes != 0 ||
      !knnwb_screen_resolve(options->screen, "cuda", options->metric, options->k, &screen, NULL) ||
      screen != KNNWB_SCREEN_FP16 || !knnwb_screen_half_scores(screen))
    return;
  knnwb_knn_devices_start(options);
  int share = 0, shares = 1;
  knnwb_knn_gpu_share(options, &share, &shares);
  knnwb_cuda_gemm_start(options->devices, options->n_devices, share, shares, n_query, n_reference,
                        dim);
}

/* Below this many rows the select's own upload takes a few ms: not worth a helper thread. */
#define KNNWB_ROWS_START_MIN_ROWS ((size_t)262144)

gboolean knnwb_knn_rows_start(const KnnwbKnnOptions *options, const KnnwbPrepared *rows,
                              gboolean early)
{
  const char *mode = g_getenv("KNNWB_CUDA_ROWS_START"); /* 0: never, 1: at any size (tests) */
  if (options->backend == KNNWB_BACKEND_CPU || options->gpu_memory_bytes != 0 ||
      rows->screen != KNNWB_SCREEN_FP16 || rows->scored == NULL || g_strcmp0(mode, "0") == 0 ||
      (rows->n < KNNWB_ROWS_START_MIN_ROWS && g_strcmp0(mode, "1") != 0))
    return FALSE;
  int device = 0;
  if (early && options->n_devices == 0 && knnwb_cuda_device_count_now() < 0)
    return FALSE; /* the driver is still counting */
  if (knnwb_knn_run_gpus(options, &device, 1) != 1)
    return FALSE; /* several GPUs upload a slice each (kernels/row_upload.cu) */
  knnwb_cuda_rows_start(device, rows->scored, rows->n, rows->d, rows->screen_row_norm);
  return TRUE;
}

void knnwb_knn_rows_drop(void)
{
  knnwb_cuda_rows_start_drop();
}

void knnwb_knn_devices_prepare(const KnnwbKnnOptions *options, size_t n_rows, size_t n_cols)
{
  g_return_if_fail(options != NULL);
  /* A tree run is on the CPU: no GPU to start, no GEMM to time. Up to the GPUs' column limit the
   * tree takes such rows whatever the backend; above it, whether the run is on GPUs decides, and
   * asking waits for the driver, so the GPUs start first. */
  if (n_cols > KNNWB_TREE_MAX_COLUMNS_GPU || !knnwb_tree_applies_shape(n_rows, n_cols, options))
    knnwb_knn_devices_start(options);
  if (!knnwb_tree_applies_shape(n_rows, n_cols, options))
    knnwb_knn_gemm_start(options, n_rows, n_rows, n_cols);
}

void knnwb_knn_devices_wait(void)
{
  knnwb_cuda_start_wait();
  knnwb_cuda_gemm_start_wait();
}

gboolean knnwb_knn_devices_started(void)
{
  return knnwb_cuda_started() != 0;
}

void knnwb_knn_devices_release(void)
{
  knnwb_cuda_release_begin();
}

void knnwb_knn_devices_release_wait(void)
{
  knnwb_cuda_release_wait();
}

gboolean knnwb_knn_uses_gpu(const KnnwbKnnOptions *options)
{
  if (options->backend == KNNWB_BACKEND_CPU)
    return FALSE;
  if (options->backend == KNNWB_BACKEND_CUDA)
    return TRUE;
  g_atomic_int_set(&knnwb_knn_devices_asked, 1); /* (the count starts the driver) */
  return knnwb_cuda_device_count() > 0;
}

/* Whether CUDA_VISIBLE_DEVICES hides every GPU (empty, or a first entry of -1 or no number). */
static gboolean knnwb_knn_gpus_hidden(void)
{
  const char *visible = g_getenv("CUDA_VISIBLE_DEVICES");
  return visible != NULL && !g_ascii_isdigit(visible[0]) && !g_str_has_prefix(visible, "GPU-") &&
         !g_str_has_prefix(visible, "MIG-");
}

gboolean knnwb_knn_expects_gpu(const KnnwbKnnOptions *options)
{
  if (options->backend == KNNWB_BACKEND_CPU)
    return FALSE;
  if (options->backend == KNNWB_BACKEND_CUDA)
    return TRUE;
  /* a driver still initialising was found, so it has GPUs to count, unless they are hidden (and
   * none begun: the count starts the driver) */
  g_atomic_int_set(&knnwb_knn_devices_asked, 1);
  const int now = knnwb_cuda_device_count_now();
  return now > 0 || (now < 0 && !knnwb_knn_gpus_hidden());
}

void knnwb_knn_gpus_log(const KnnwbKnnOptions *options, int devices)
{
  static gsize told = 0;
  int share = 0, shares = 1;
  knnwb_knn_gpu_share(options, &share, &shares);
  if (shares <= 1 || !g_once_init_enter(&told))
    return;
  g_once_init_leave(&told, 1);
  int *ordinals = g_new(int, devices);
  knnwb_knn_run_gpus(options, ordinals, devices);
  g_autoptr(GString) list = g_string_new(NULL);
  for (int i = 0; i < devices; i++)
    g_string_append_printf(list, i > 0 ? " %d" : "%d", ordinals[i]);
  const char *visible = g_getenv("CUDA_VISIBLE_DEVICES");
  g_debug("knnwb: rank %d of the %d of this host runs on GPU %s of the %d it sees "
          "(CUDA_VISIBLE_DEVICES=%s)",
          share, shares, list->str, knnwb_cuda_device_count(), visible ? visible : "(unset)");
  g_free(ordinals);
}

gboolean knnwb_knn_choose_backend(const KnnwbKnnOptions *options, KnnwbSelectFunc *select,
                                  char **name, GError **error)
{
  int devices = 0;
  const char *blas_missing = NULL; /* GPUs, but cuBLAS could not be loaded: why */
  if (options->backend != KNNWB_BACKEND_CPU)
    devices = knnwb_knn_run_gpus(options, NULL, 0);
  if (options->backend != KNNWB_BACKEND_CPU && devices > 0 && knnwb_cuda_device_count() > 0 &&
      (blas_missing = knnwb_cuda_blas_missing()) == NULL) {
    *select = knnwb_cuda_select;
    *name = g_strdup_printf("cuda:%d", devices);
    knnwb_knn_gpus_log(options, devices);
    return TRUE;
  }
  if (options->backend == KNNWB_BACKEND_CUDA) {
#ifdef KNNWB_HAVE_CUDA
    const char *why = blas_missing != NULL ? blas_missing : "no CUDA device is visible";
#else
    const char *why = "knnwb was built without CUDA";
#endif
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_DEVICE,
                "backend cuda: no usable GPU (%s); use the cpu or auto backend", why);
    return FALSE;
  }
#ifdef KNNWB_HAVE_CUDA
  /* Once per process: a clustering or a pipeline runs several kNN searches, and a user reading
   * the same line a dozen times looks for a dozen problems. */
  static gsize told = 0;
  if (options->backend == KNNWB_BACKEND_AUTO && g_once_init_enter(&told)) {
    if (blas_missing != NULL)
      g_message("knnwb: no usable GPU (%s), computing the kNN graph on the CPU", blas_missing);
    else
      g_message("knnwb: no usable GPU, computing the kNN graph on the CPU");
    g_once_init_leave(&told, 1);
  }
#endif
  *select = knnwb_cpu_select;
  *name = g_strdup("cpu");
  return TRUE;
}
