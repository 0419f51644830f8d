/*
 * The work items of the symmetric schedule (symmetric_segments, kernels/select_run.cu), host only:
 * over the shares of a job every off-diagonal tile (b, c), b < c, is in exactly one item; with one
 * GPU and one share the items are the columns, diagonal first; the tile counts add up; several
 * GPUs of one process take whole columns (piece_tiles), shares pieces of at most kPiece tiles.
 * A tile left out or computed twice would change the lists (missing pairs, or a pair twice),
 * which the GPU tests see only on two GPUs and large sizes; here every case is cheap.
 */
#include <glib.h>

#include <cstdlib>
#include <vector>

#include "select_run.h"

using knnwb_cuda::Segment;

static void check_cover(int blocks, int n_devices, int shares)
{
  std::vector<int> seen((size_t)blocks * (size_t)blocks, 0);
  uint64_t tiles_sum = 0, diagonal_tiles = 0;
  for (int share = 0; share < shares; share++) {
    uint64_t tiles = 0;
    const std::vector<Segment> items =
        knnwb_cuda::symmetric_segments(blocks, n_devices, share, shares, &tiles);
    uint64_t counted = 0;
    for (const Segment &sg : items) {
      g_assert_cmpint(sg.c, >=, 0);
      g_assert_cmpint(sg.c, <, blocks);
      g_assert_cmpint(sg.b0, >=, 0);
      g_assert_cmpint(sg.b0, <=, sg.b1);
      g_assert_cmpint(sg.b1, <=, sg.c);
      if (n_devices > 1 || shares > 1) {
        g_assert_false(sg.diagonal); /* their diagonal tiles run in the threshold phase */
        g_assert_cmpint(sg.b1, >, sg.b0);
        /* one process's GPUs: whole columns; shares: pieces of at most kPiece */
        if (shares == 1)
          g_assert_true(sg.b0 == 0 && sg.b1 == sg.c);
        else
          g_assert_cmpint(sg.b1 - sg.b0, <=, knnwb_cuda::kPiece);
      }
      for (int b = sg.b0; b < sg.b1; b++)
        seen[(size_t)b * blocks + sg.c]++;
      if (sg.diagonal) {
        seen[(size_t)sg.c * blocks + sg.c]++;
        counted++;
      }
      counted += (uint64_t)(sg.b1 - sg.b0);
    }
    /* the diagonal tiles this share owns (c % shares == share) are counted, not listed */
    uint64_t owned = 0;
    for (int c = 0; c < blocks; c++)
      owned += c % shares == share;
    if (n_devices == 1 && shares == 1)
      g_assert_cmpuint(tiles, ==, counted);
    else
      g_assert_cmpuint(tiles, ==, counted + owned);
    tiles_sum += tiles;
    diagonal_tiles += owned;
  }
  for (int c = 0; c < blocks; c++)
    for (int b = 0; b < blocks; b++) {
      const int expected = b < c || (b == c && n_devices == 1 && shares == 1) ? 1 : 0;
      g_assert_cmpint(seen[(size_t)b * blocks + c], ==, expected);
    }
  g_assert_cmpuint(diagonal_tiles, ==, (uint64_t)blocks);
  g_assert_cmpuint(tiles_sum, ==, (uint64_t)blocks * (uint64_t)(blocks + 1) / 2);
}

static void test_cover(void)
{
  const int sizes[] = {1, 2, 3, 16, 17, 33, 188};
  for (int blocks : sizes)
    for (int n_devices = 1; n_devices <= 3; n_devices++)
      for (int shares = 1; shares <= 3; shares++)
        check_cover(blocks, n_devices, shares);
}

/* One GPU, one share: column c is one item, (c, c) first, then (b, c) for every b < c, in order. */
static void test_one_gpu_columns(void)
{
  uint64_t tiles = 0;
  const std::vector<Segment> items = knnwb_cuda::symmetric_segments(9, 1, 0, 1, &tiles);
  g_assert_cmpuint(items.size(), ==, 9);
  for (int c = 0; c < 9; c++) {
    g_assert_cmpint(items[(size_t)c].c, ==, c);
    g_assert_true(items[(size_t)c].diagonal);
    g_assert_cmpint(items[(size_t)c].b0, ==, 0);
    g_assert_cmpint(items[(size_t)c].b1, ==, c);
  }
  g_assert_cmpuint(tiles, ==, 45);
}

int main(int argc, char **argv)
{
  /* the defaults are under test, not a measurement's override */
  unsetenv("KNNWB_CUDA_PIECE");
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/schedule/segments-cover", test_cover);
  g_test_add_func("/kernels/schedule/one-gpu-columns", test_one_gpu_columns);
  return g_test_run();
}
