// Capability flag of the select launcher: whether component groups (KnnwbSelectJob::query_group)
// are honoured. Until they are, core runs masked (exact MST) searches on the CPU backend.
#include "knnwb_kernels.h"

extern "C" int knnwb_cuda_select_supports_groups(void)
{
  return 0;
}
