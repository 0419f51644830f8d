/* Which GPUs of a host a rank takes when its run names none (knnwb_device_share in
 * knnwb_kernels.h): host-only C, so that the rule is tested everywhere, CI included. */
#include "knnwb_kernels.h"

int knnwb_device_share(int share, int shares, int visible, int *ordinals, int max)
{
  if (visible <= 0)
    return 0;
  int first = 0, last = visible;
  if (shares > 1 && share >= 0 && share < shares) {
    if (visible >= shares) {
      /* contiguous blocks, as even as the count allows (4 GPUs, 3 ranks: 0 | 1 | 2 3) */
      first = (int)((long long)share * visible / shares);
      last = (int)((long long)(share + 1) * visible / shares);
    } else {
      /* more ranks than GPUs: round robin, so that no GPU has two ranks more than another */
      first = share % visible;
      last = first + 1;
    }
  }
  for (int i = first; i < last && i - first < max; i++)
    ordinals[i - first] = i;
  return last - first;
}
