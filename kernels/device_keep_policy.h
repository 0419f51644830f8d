/*
 * Which kept block serves a request, and which kept blocks go when a device holds too many: the
 * policy of device_keep.cu, host code without CUDA calls so that tests/kernels/test_device_keep.cu
 * checks it on machines without a GPU.
 */
#ifndef KNNWB_DEVICE_KEEP_POLICY_H
#define KNNWB_DEVICE_KEEP_POLICY_H

#include <stddef.h>

#include <vector>

namespace knnwb_cuda
{

/** A block of device memory on GPU `ordinal`. */
struct KeptBlock {
  int ordinal;
  void *p;
  size_t bytes;
};

/**
 * Whether a kept block of `have` bytes may serve a request of `want`: at least as large, and at
 * most a quarter (plus 64 KiB) larger, so that small requests do not take large blocks. The
 * sub-searches of a partitioned run come largest first, so a block serves the next few.
 */
inline bool keep_fits(size_t have, size_t want)
{
  return have >= want && have - want <= want / 4 + ((size_t)64 << 10);
}

/** The index of the smallest block of `ordinal` in blocks that fits `want`, or -1. O(blocks). */
inline long keep_best_fit(const std::vector<KeptBlock> &blocks, int ordinal, size_t want)
{
  long best = -1;
  for (size_t i = 0; i < blocks.size(); i++)
    if (blocks[i].ordinal == ordinal && keep_fits(blocks[i].bytes, want) &&
        (best < 0 || blocks[i].bytes < blocks[(size_t)best].bytes))
      best = (long)i;
  return best;
}

/**
 * Moves the oldest blocks of `ordinal` (blocks is oldest first) from blocks to *out until at most
 * `leave` bytes of that device stay; the others keep their order. O(blocks).
 */
inline void keep_evict(std::vector<KeptBlock> &blocks, int ordinal, size_t leave,
                       std::vector<KeptBlock> *out)
{
  size_t on_device = 0;
  for (const KeptBlock &b : blocks)
    on_device += b.ordinal == ordinal ? b.bytes : 0;
  std::vector<KeptBlock> stay;
  stay.reserve(blocks.size());
  for (const KeptBlock &b : blocks) {
    if (b.ordinal == ordinal && on_device > leave) {
      on_device -= b.bytes;
      out->push_back(b);
    } else {
      stay.push_back(b);
    }
  }
  blocks.swap(stay);
}

} // namespace knnwb_cuda

#endif
