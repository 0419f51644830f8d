/*
 * Which GPUs of a host each rank takes where its run names none (kernels/device_share.c): every
 * GPU once when there are at least as many as ranks, contiguous and as even as the count allows;
 * with fewer GPUs, every rank one, no GPU two ranks more than another; the cap on what is filled.
 */
#include <stdlib.h>
#include <glib.h>
#include "knnwb_kernels.h"

/* Every rank's share of visible GPUs, checked against the rules above. */
static void check_shares(int shares, int visible)
{
  int *used = g_new0(int, (size_t)visible);
  int previous_last = -1;
  for (int r = 0; r < shares; r++) {
    int ordinals[64];
    const int n = knnwb_device_share(r, shares, visible, ordinals, 64);
    g_assert_cmpint(n, >=, 1);
    for (int i = 0; i < n; i++) {
      g_assert_cmpint(ordinals[i], >=, 0);
      g_assert_cmpint(ordinals[i], <, visible);
      if (i > 0)
        g_assert_cmpint(ordinals[i], ==, ordinals[i - 1] + 1); /* contiguous */
      used[ordinals[i]]++;
    }
    if (visible >= shares) {
      g_assert_cmpint(ordinals[0], ==, previous_last + 1); /* in order, none skipped */
      previous_last = ordinals[n - 1];
      g_assert_cmpint(n, >=, visible / shares);
      g_assert_cmpint(n, <=, (visible + shares - 1) / shares);
    } else {
      g_assert_cmpint(n, ==, 1);
    }
  }
  int least = G_MAXINT, most = 0;
  for (int g = 0; g < visible; g++) {
    least = MIN(least, used[g]);
    most = MAX(most, used[g]);
  }
  if (visible >= shares)
    g_assert_cmpint(most, ==, 1); /* every GPU taken exactly once */
  else
    g_assert_cmpint(most - least, <=, 1);
  g_assert_cmpint(least, >=, 1);
  g_free(used);
}

static void test_rules(void)
{
  for (int shares = 1; shares <= 9; shares++)
    for (int visible = 1; visible <= 9; visible++)
      check_shares(shares, visible);
}

static void test_examples(void)
{
  int o[8];
  /* one rank, or no share: every GPU */
  g_assert_cmpint(knnwb_device_share(0, 1, 4, o, 8), ==, 4);
  g_assert_cmpint(o[0], ==, 0);
  g_assert_cmpint(o[3], ==, 3);
  g_assert_cmpint(knnwb_device_share(0, 0, 2, o, 8), ==, 2);
  /* two ranks of two GPUs: one each */
  g_assert_cmpint(knnwb_device_share(1, 2, 2, o, 8), ==, 1);
  g_assert_cmpint(o[0], ==, 1);
  /* two ranks of four: 0 1 | 2 3 */
  g_assert_cmpint(knnwb_device_share(1, 2, 4, o, 8), ==, 2);
  g_assert_cmpint(o[0], ==, 2);
  g_assert_cmpint(o[1], ==, 3);
  /* three ranks of four: 0 | 1 | 2 3 */
  g_assert_cmpint(knnwb_device_share(2, 3, 4, o, 8), ==, 2);
  g_assert_cmpint(o[0], ==, 2);
  /* four ranks of two: 0 | 1 | 0 | 1; two ranks of one GPU (each sees its own): GPU 0 */
  g_assert_cmpint(knnwb_device_share(2, 4, 2, o, 8), ==, 1);
  g_assert_cmpint(o[0], ==, 0);
  g_assert_cmpint(knnwb_device_share(1, 2, 1, o, 8), ==, 1);
  g_assert_cmpint(o[0], ==, 0);
  /* no GPU: none; a share outside the ranks: every GPU */
  g_assert_cmpint(knnwb_device_share(0, 2, 0, o, 8), ==, 0);
  g_assert_cmpint(knnwb_device_share(5, 2, 3, o, 8), ==, 3);
  /* only max are filled; the count is the share's */
  o[1] = -7;
  g_assert_cmpint(knnwb_device_share(0, 1, 3, o, 1), ==, 3);
  g_assert_cmpint(o[0], ==, 0);
  g_assert_cmpint(o[1], ==, -7);
  g_assert_cmpint(knnwb_device_share(0, 1, 3, NULL, 0), ==, 3);
}

static void assert_visible(const char *visible, int count, int share, int shares,
                           const char *expected)
{
  char *value = knnwb_device_share_visible(visible, count, share, shares);
  g_assert_cmpstr(value, ==, expected);
  free(value);
}

/* CUDA_VISIBLE_DEVICES narrowed to a rank's share: of the variable's entries (numbers, UUIDs, MIG
 * names alike), or of the GPUs the system counts; nothing where nothing narrows. */
static void test_visible(void)
{
  /* unset: the system's count */
  assert_visible(NULL, 2, 0, 2, "0");
  assert_visible(NULL, 2, 1, 2, "1");
  assert_visible(NULL, 4, 1, 2, "2,3");
  assert_visible(NULL, 4, 2, 3, "2,3");
  assert_visible(NULL, 2, 3, 4, "1");
  assert_visible(NULL, 12, 1, 2, "6,7,8,9,10,11");
  /* set: its entries, whatever they are */
  assert_visible("3,5", 0, 1, 2, "5");
  assert_visible("GPU-aa,GPU-bb,GPU-cc,GPU-dd", 0, 0, 2, "GPU-aa,GPU-bb");
  assert_visible("MIG-1,MIG-2", 0, 2, 3, "MIG-1");
  /* up to the first empty entry (CUDA stops at the first it cannot use) */
  assert_visible("4,6,,7", 0, 1, 2, "6");
  assert_visible("4,", 0, 1, 2, NULL);
  /* nothing to narrow: one rank, a rank out of range, one GPU or none */
  assert_visible(NULL, 4, 0, 1, NULL);
  assert_visible(NULL, 4, 2, 2, NULL);
  assert_visible(NULL, 1, 1, 2, NULL);
  assert_visible(NULL, 0, 0, 2, NULL);
  assert_visible("2", 0, 1, 2, NULL);
  assert_visible("", 0, 1, 2, NULL);
}

static void assert_named(const char *visible, int count, const int *ordinals, int n,
                         const char *expected)
{
  char *value = knnwb_device_visible_of(visible, count, ordinals, n);
  g_assert_cmpstr(value, ==, expected);
  free(value);
}

/* CUDA_VISIBLE_DEVICES narrowed to GPUs named in a list, in its order. */
static void test_visible_of(void)
{
  const int second[] = {1}, swapped[] = {1, 0}, twice[] = {0, 0}, all[] = {0, 1}, far[] = {3};
  assert_named("GPU-a,GPU-b", 0, second, 1, "GPU-b");
  assert_named("GPU-a,GPU-b", 0, swapped, 2, "GPU-b,GPU-a");
  assert_named(NULL, 4, swapped, 2, "1,0");
  assert_named(NULL, 2, second, 1, "1");
  assert_named(NULL, 2, twice, 2, NULL); /* CUDA refuses an entry twice */
  assert_named(NULL, 2, all, 2, NULL);   /* every one in order */
  assert_named(NULL, 3, all, 2, "0,1");  /* the first two of three */
  assert_named(NULL, 2, far, 1, NULL);   /* not visible */
  assert_named("5,6,,7", 0, second, 1, "6");
  assert_named(NULL, 0, second, 1, NULL); /* nothing counted */
  assert_named(NULL, 2, second, 0, NULL); /* nothing named */
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/device-share/rules", test_rules);
  g_test_add_func("/kernels/device-share/examples", test_examples);
  g_test_add_func("/kernels/device-share/visible", test_visible);
  g_test_add_func("/kernels/device-share/visible-of", test_visible_of);
  return g_test_run();
}
