// Capability flag of the select launcher: whether component groups (KnnwbSelectJob::query_group)
// are honoured (the filter and the overflow merge skip pairs of one group).
#include "knnwb_kernels.h"

extern "C" int knnwb_cuda_select_supports_groups(void)
{
  return 1;
}
