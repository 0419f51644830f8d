/*
 * cuBLAS and cuBLASLt loaded at run time (kernels/blas_library.h), host only: the libraries load
 * from the sonames the build recorded and every function knnwb calls resolves; the loaded
 * cuBLASLt has the major version of the headers knnwb was built with; status names come from the
 * loaded cuBLAS; and the program itself no longer lists either library among those the loader
 * maps before main. Needs no GPU (cuBLASLt's version and cuBLAS's status names ask none).
 */
#include <glib.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "blas_library.h"
#include "knnwb_kernels.h"

static void test_loads(void)
{
  const knnwb_cuda::BlasLibrary *l = knnwb_cuda::blas();
  if (l == nullptr)
    g_printerr("%s\n", knnwb_cuda::blas_error());
  g_assert_nonnull(l);
  g_assert_cmpstr(knnwb_cuda::blas_error(), ==, "");
  g_assert_null(knnwb_cuda_blas_missing()); /* what the backend's choice asks */
  /* the same table on every call, from any thread */
  g_autoptr(GThread) other = g_thread_new(
      "blas", [](gpointer) -> gpointer { return (gpointer)knnwb_cuda::blas(); }, nullptr);
  g_assert_true(g_thread_join(g_steal_pointer(&other)) == (gpointer)l);
  /* cuBLASLt's major version (its version is major * 10000 + minor * 100 + patch) that of the
   * headers: the loader found the library the build was made for */
  g_assert_cmpint((long)l->lt_version() / 10000, ==, CUBLAS_VER_MAJOR);
  /* cuBLAS's own words ("the library was not initialized" in cuBLAS 13) */
  g_assert_nonnull(
      strstr(knnwb_cuda::blas_status_string(CUBLAS_STATUS_NOT_INITIALIZED), "initialized"));
}

/* Neither library is a dependency the loader maps at start (their static initialisers cost 0.07 s
 * of every command): /proc/self/maps holds neither before the first blas(). Run first. */
static void test_not_linked(void)
{
  g_autofree char *maps = nullptr;
  g_assert_true(g_file_get_contents("/proc/self/maps", &maps, nullptr, nullptr));
  g_assert_null(strstr(maps, "libcublasLt"));
  g_assert_null(strstr(maps, "libcublas."));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, nullptr);
  g_test_add_func("/kernels/blas-library/not-linked", test_not_linked);
  g_test_add_func("/kernels/blas-library/loads", test_loads);
  return g_test_run();
}
