/* Which GPUs of a host a rank takes when its run names none (knnwb_device_share in
 * knnwb_kernels.h), and the CUDA_VISIBLE_DEVICES that shows it only those: host-only C, so that
 * the rules are tested everywhere, CI included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

char *knnwb_device_share_visible(const char *visible, int count, int share, int shares)
{
  if (shares <= 1 || share < 0 || share >= shares)
    return NULL;
  /* the entries: visible's, up to the first empty one (CUDA stops at the first it cannot use),
   * or "0" to "count - 1" */
  int n = 0;
  if (visible != NULL) {
    for (const char *at = visible; *at != '\0' && *at != ','; n++) {
      at += strcspn(at, ",");
      if (*at == ',')
        at++;
    }
  } else {
    n = count;
  }
  if (n <= 1)
    return NULL; /* one GPU or none: every rank takes it, nothing to narrow */
  int *ordinals = malloc((size_t)n * sizeof *ordinals);
  if (ordinals == NULL)
    return NULL;
  const int taken = knnwb_device_share(share, shares, n, ordinals, n);
  size_t bytes = 1;
  if (visible != NULL)
    bytes += strlen(visible);
  else
    bytes += (size_t)taken * 12;
  char *value = malloc(bytes);
  if (value == NULL) {
    free(ordinals);
    return NULL;
  }
  size_t used = 0;
  for (int t = 0; t < taken; t++) {
    if (t > 0)
      value[used++] = ',';
    if (visible == NULL) {
      used += (size_t)snprintf(value + used, bytes - used, "%d", ordinals[t]);
      continue;
    }
    const char *at = visible; /* the ordinals[t]-th entry */
    for (int e = 0; e < ordinals[t]; e++)
      at += strcspn(at, ",") + 1;
    const size_t length = strcspn(at, ",");
    memcpy(value + used, at, length);
    used += length;
  }
  value[used] = '\0';
  free(ordinals);
  return value;
}
