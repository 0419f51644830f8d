/*
 * Green contexts for the GEMM and selection streams (sm_split.h). The driver's entry points are
 * looked up through the runtime, so that the library does not link libcuda itself (a CPU-only
 * machine still loads it).
 */
#include "sm_split.h"

#include <cstdlib>
#include <cuda.h>

namespace knnwb_cuda
{

int sm_split_gemm_sms()
{
  static const int sms = [] {
    const char *v = getenv("KNNWB_CUDA_GEMM_SMS");
    const int x = v ? atoi(v) : 0;
    return x > 0 && x < 4096 ? x : 0;
  }();
  return sms;
}

#if CUDART_VERSION >= 12050 && CUDA_VERSION >= 12050

namespace
{

struct Driver {
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetDevResource) get_resource = nullptr;
  decltype(&cuDevSmResourceSplitByCount) split = nullptr;
  decltype(&cuDevResourceGenerateDesc) describe = nullptr;
  decltype(&cuGreenCtxCreate) create = nullptr;
  decltype(&cuGreenCtxStreamCreate) stream_create = nullptr;
  decltype(&cuGreenCtxDestroy) destroy = nullptr;
  bool ok = false;
};

template <typename F> bool entry(const char *name, F *fn)
{
  void *p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, CUDA_VERSION, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    return false;
  }
  *fn = reinterpret_cast<F>(p);
  return true;
}

const Driver &driver()
{
  static const Driver d = [] {
    Driver x;
    x.ok =
        entry("cuDeviceGet", &x.device_get) && entry("cuDeviceGetDevResource", &x.get_resource) &&
        entry("cuDevSmResourceSplitByCount", &x.split) &&
        entry("cuDevResourceGenerateDesc", &x.describe) && entry("cuGreenCtxCreate", &x.create) &&
        entry("cuGreenCtxStreamCreate", &x.stream_create) && entry("cuGreenCtxDestroy", &x.destroy);
    return x;
  }();
  return d;
}

bool make_context(const Driver &d, CUdevice dev, CUdevResource *sms, CUgreenCtx *ctx)
{
  CUdevResourceDesc desc = nullptr;
  return d.describe(&desc, sms, 1) == CUDA_SUCCESS &&
         d.create(ctx, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM) == CUDA_SUCCESS;
}

} // namespace

bool sm_split_create(int ordinal, int gemm_sms, int select_priority, SmSplit *split,
                     cudaStream_t *gemm_stream, cudaStream_t *select_stream, const char **why)
{
  const Driver &d = driver();
  *why = "the driver has no green contexts";
  if (!d.ok || gemm_sms <= 0)
    return false;
  CUdevice dev = 0;
  CUdevResource all{}, part{}, rest{};
  unsigned groups = 1;
  *why = "the device's SMs cannot be split so";
  if (d.device_get(&dev, ordinal) != CUDA_SUCCESS ||
      d.get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS ||
      d.split(&part, &groups, &all, &rest, 0, (unsigned)gemm_sms) != CUDA_SUCCESS || groups != 1 ||
      rest.sm.smCount == 0)
    return false;
  *why = "a green context or its stream was refused";
  CUgreenCtx ctx[2] = {};
  CUstream stream[2] = {};
  bool ok =
      make_context(d, dev, &part, &ctx[0]) && make_context(d, dev, &rest, &ctx[1]) &&
      d.stream_create(&stream[0], ctx[0], CU_STREAM_NON_BLOCKING, 0) == CUDA_SUCCESS &&
      d.stream_create(&stream[1], ctx[1], CU_STREAM_NON_BLOCKING, select_priority) == CUDA_SUCCESS;
  if (!ok) {
    for (CUstream s : stream)
      if (s)
        cudaStreamDestroy((cudaStream_t)s);
    for (CUgreenCtx c : ctx)
      if (c)
        d.destroy(c);
    return false;
  }
  split->context[0] = ctx[0];
  split->context[1] = ctx[1];
  split->sms[0] = (int)part.sm.smCount;
  split->sms[1] = (int)rest.sm.smCount;
  *gemm_stream = (cudaStream_t)stream[0];
  *select_stream = (cudaStream_t)stream[1];
  return true;
}

void sm_split_destroy(SmSplit *split)
{
  for (void *&c : split->context)
    if (c) {
      driver().destroy((CUgreenCtx)c);
      c = nullptr;
    }
}

#else

bool sm_split_create(int, int, int, SmSplit *, cudaStream_t *, cudaStream_t *, const char **why)
{
  *why = "built without green contexts (CUDA 12.5 or later)";
  return false;
}

void sm_split_destroy(SmSplit *)
{
}

#endif

} // namespace knnwb_cuda
