/*
 * cuBLAS and cuBLASLt loaded at run time (blas_library.h says why). Each library is looked for as
 * the loader would have for a linked knnwb: by its soname (KNNWB_CUBLAS_SONAME and
 * KNNWB_CUBLASLT_SONAME, from the build) through this library's run path, LD_LIBRARY_PATH and the
 * system's cache; then in the folder the build found it in.
 */
#include "blas_library.h"
#include "knnwb_kernels.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace knnwb_cuda
{
namespace
{

std::once_flag load_once;
BlasLibrary library;
bool usable = false;
std::string load_error; /* written once, inside load_once */

void *open_library(const char *soname, const char *path)
{
  void *handle = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr)
    handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char *why = dlerror();
    load_error = std::string("cannot load ") + soname + (why ? std::string(": ") + why : "");
  }
  return handle;
}

/* *fn = the library's function name; false, with the error, when it has none. */
template <typename Fn> bool find(void *handle, const char *name, Fn *fn)
{
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*fn == nullptr)
    load_error = std::string("the cuBLAS libraries lack ") + name;
  return *fn != nullptr;
}

void load()
{
  void *lt = open_library(KNNWB_CUBLASLT_SONAME, KNNWB_CUBLASLT_PATH);
  void *blas = lt != nullptr ? open_library(KNNWB_CUBLAS_SONAME, KNNWB_CUBLAS_PATH) : nullptr;
  if (blas == nullptr)
    return;
  BlasLibrary l = {};
  usable = find(blas, "cublasCreate_v2", &l.create) && find(blas, "cublasDestroy_v2", &l.destroy) &&
           find(blas, "cublasSetStream_v2", &l.set_stream) &&
           find(blas, "cublasSetMathMode", &l.set_math_mode) &&
           find(blas, "cublasSgemm_v2", &l.sgemm) && find(blas, "cublasGemmEx", &l.gemm_ex) &&
           find(blas, "cublasGetStatusString", &l.status_string) &&
           find(lt, "cublasLtCreate", &l.lt_create) && find(lt, "cublasLtDestroy", &l.lt_destroy) &&
           find(lt, "cublasLtGetVersion", &l.lt_version) &&
           find(lt, "cublasLtMatmulDescCreate", &l.lt_desc_create) &&
           find(lt, "cublasLtMatmulDescSetAttribute", &l.lt_desc_set) &&
           find(lt, "cublasLtMatmulDescDestroy", &l.lt_desc_destroy) &&
           find(lt, "cublasLtMatrixLayoutCreate", &l.lt_layout_create) &&
           find(lt, "cublasLtMatrixLayoutDestroy", &l.lt_layout_destroy) &&
           find(lt, "cublasLtMatmulPreferenceCreate", &l.lt_preference_create) &&
           find(lt, "cublasLtMatmulPreferenceSetAttribute", &l.lt_preference_set) &&
           find(lt, "cublasLtMatmulPreferenceDestroy", &l.lt_preference_destroy) &&
           find(lt, "cublasLtMatmulAlgoGetHeuristic", &l.lt_heuristic) &&
           find(lt, "cublasLtMatmulAlgoCheck", &l.lt_algo_check) &&
           find(lt, "cublasLtMatmul", &l.lt_matmul);
  if (usable)
    library = l;
}

} // namespace

const BlasLibrary *blas()
{
  std::call_once(load_once, load);
  return usable ? &library : nullptr;
}

const char *blas_error()
{
  return blas() != nullptr ? "" : load_error.c_str();
}

const char *blas_status_string(cublasStatus_t status)
{
  const BlasLibrary *l = blas();
  return l != nullptr ? l->status_string(status) : load_error.c_str();
}

} // namespace knnwb_cuda

extern "C" const char *knnwb_cuda_blas_missing(void)
{
  return knnwb_cuda::blas() != nullptr ? nullptr : knnwb_cuda::blas_error();
}
