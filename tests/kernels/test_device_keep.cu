/*
 * The keep's policy (kernels/device_keep_policy.h), host only: which kept block serves a request
 * (the smallest of its GPU that is large enough and at most a quarter larger) and which blocks go
 * when a GPU holds too many (its oldest, the other GPUs' untouched, the order kept). The GPU test
 * /kernels/cuda-knn/kept-memory runs searches on reused memory.
 */
#include <glib.h>

#include <vector>

#include "device_keep_policy.h"

using knnwb_cuda::keep_best_fit;
using knnwb_cuda::keep_evict;
using knnwb_cuda::keep_fits;
using knnwb_cuda::KeptBlock;

static constexpr size_t MiB = (size_t)1 << 20;

static void *tag(int i)
{
  return (void *)(size_t)(0x1000 * (i + 1));
}

static void test_fits(void)
{
  g_assert_true(keep_fits(100 * MiB, 100 * MiB));
  g_assert_true(keep_fits(125 * MiB, 100 * MiB));
  g_assert_false(keep_fits(126 * MiB, 100 * MiB)); /* more than a quarter larger */
  g_assert_false(keep_fits(99 * MiB, 100 * MiB));  /* too small */
  g_assert_true(keep_fits(64 << 10, 1));           /* small requests: 64 KiB of slack */
  g_assert_false(keep_fits((64 << 10) + 2, 1));
  g_assert_false(keep_fits(512 * MiB, 1024));
  g_assert_true(keep_fits(0, 0));
}

static void test_best_fit(void)
{
  const std::vector<KeptBlock> blocks = {{0, tag(0), 120 * MiB},
                                         {1, tag(1), 100 * MiB},
                                         {0, tag(2), 101 * MiB},
                                         {0, tag(3), 200 * MiB},
                                         {0, tag(4), 99 * MiB}};
  g_assert_cmpint(keep_best_fit(blocks, 0, 100 * MiB), ==, 2); /* the smallest that fits */
  g_assert_cmpint(keep_best_fit(blocks, 1, 100 * MiB), ==, 1); /* its own GPU's only */
  g_assert_cmpint(keep_best_fit(blocks, 0, 170 * MiB), ==, 3);
  g_assert_cmpint(keep_best_fit(blocks, 0, 150 * MiB), ==, -1); /* 200 MiB: too large */
  g_assert_cmpint(keep_best_fit(blocks, 2, 1), ==, -1);
  g_assert_cmpint(keep_best_fit({}, 0, 1), ==, -1);
}

static void test_evict(void)
{
  std::vector<KeptBlock> blocks = {{0, tag(0), 3 * MiB},
                                   {1, tag(1), 5 * MiB},
                                   {0, tag(2), 4 * MiB},
                                   {0, tag(3), 2 * MiB},
                                   {1, tag(4), 1 * MiB}};
  std::vector<KeptBlock> out;
  keep_evict(blocks, 0, 6 * MiB, &out); /* 9 MiB on GPU 0: its oldest go until 6 MiB stay */
  g_assert_cmpuint(out.size(), ==, 1);
  g_assert_true(out[0].p == tag(0));
  g_assert_cmpuint(blocks.size(), ==, 4);
  g_assert_true(blocks[0].p == tag(1) && blocks[1].p == tag(2) && blocks[2].p == tag(3) &&
                blocks[3].p == tag(4));
  keep_evict(blocks, 0, 6 * MiB, &out); /* within the cap: nothing */
  g_assert_cmpuint(out.size(), ==, 1);
  keep_evict(blocks, 0, 5 * MiB, &out); /* the oldest again, though the next alone would do */
  g_assert_cmpuint(out.size(), ==, 2);
  g_assert_true(out[1].p == tag(2));
  keep_evict(blocks, 1, 0, &out); /* all of GPU 1 */
  g_assert_cmpuint(out.size(), ==, 4);
  g_assert_true(out[2].p == tag(1) && out[3].p == tag(4));
  g_assert_cmpuint(blocks.size(), ==, 1);
  g_assert_true(blocks[0].p == tag(3));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/device-keep/fits", test_fits);
  g_test_add_func("/kernels/device-keep/best-fit", test_best_fit);
  g_test_add_func("/kernels/device-keep/evict", test_evict);
  return g_test_run();
}
