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

/* The entries a CUDA_VISIBLE_DEVICES of value visible shows: its entries up to the first empty one
 * (CUDA stops at the first it cannot use), or where visible is NULL the count GPUs "0" to
 * "count - 1". */
static int knnwb_device_entries(const char *visible, int count)
{
  if (visible == NULL)
    return count;
  int n = 0;
  for (const char *at = visible; *at != '\0' && *at != ','; n++) {
    at += strcspn(at, ",");
    if (*at == ',')
      at++;
  }
  return n;
}

char *knnwb_device_visible_of(const char *visible, int count, const int *ordinals, int n)
{
  const int entries = knnwb_device_entries(visible, count);
  if (n <= 0 || entries <= 0)
    return NULL;
  int same = n == entries; /* every entry, in order: nothing to narrow */
  for (int t = 0; t < n; t++) {
    if (ordinals[t] < 0 || ordinals[t] >= entries)
      return NULL;
    for (int u = 0; u < t; u++)
      if (ordinals[u] == ordinals[t])
        return NULL; /* CUDA refuses an entry twice */
    same = same && ordinals[t] == t;
  }
  if (same)
    return NULL;
  const size_t bytes = 1 + (visible != NULL ? strlen(visible) : (size_t)n * 12);
  char *value = malloc(bytes);
  if (value == NULL)
    return NULL;
  size_t used = 0;
  for (int t = 0; t < n; t++) {
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
  return value;
}

char *knnwb_device_share_visible(const char *visible, int count, int share, int shares)
{
  const int entries = knnwb_device_entries(visible, count);
  if (shares <= 1 || share < 0 || share >= shares || entries <= 1)
    return NULL; /* one GPU or none: every rank takes it, nothing to narrow */
  int *ordinals = malloc((size_t)entries * sizeof *ordinals);
  if (ordinals == NULL)
    return NULL;
  const int taken = knnwb_device_share(share, shares, entries, ordinals, entries);
  char *value = knnwb_device_visible_of(visible, count, ordinals, taken);
  free(ordinals);
  return value;
}
