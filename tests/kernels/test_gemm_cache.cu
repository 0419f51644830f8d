/*
 * The tile GEMM's choices on disk (kernels/gemm_cache.h), host only: a line's round trip, the
 * lines that are ignored, the file's path from the environment, and a store that replaces its
 * key's entry, keeps the others and leaves nothing half-written when it cannot write. The GPU side
 * (a cached algorithm checked by cuBLASLt and taken) runs in /kernels/cuda-start/gemm-choice-ahead.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <string>

#include "gemm_cache.h"

using knnwb_cuda::gemm_cache_format;
using knnwb_cuda::gemm_cache_lookup;
using knnwb_cuda::gemm_cache_model;
using knnwb_cuda::gemm_cache_parse;
using knnwb_cuda::gemm_cache_path;
using knnwb_cuda::gemm_cache_store;
using knnwb_cuda::GemmCacheEntry;
using knnwb_cuda::GemmCacheKey;

static GemmCacheEntry entry(int tile, int dpad, bool lt, uint64_t seed)
{
  GemmCacheEntry e;
  e.key.model = gemm_cache_model("NVIDIA H200", 9, 0, 132);
  e.key.cublaslt = 130100;
  e.key.driver = 13000;
  e.key.tile = tile;
  e.key.dpad = dpad;
  e.lt = lt;
  for (int i = 0; lt && i < 8; i++)
    e.algo[i] = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i;
  return e;
}

/* The entries of a directory (a temporary left behind shows here). */
static int count_entries(const char *directory)
{
  GDir *d = g_dir_open(directory, 0, NULL);
  g_assert_nonnull(d);
  int count = 0;
  while (g_dir_read_name(d) != NULL)
    count++;
  g_dir_close(d);
  return count;
}

static void assert_same(const GemmCacheEntry &a, const GemmCacheEntry &b)
{
  g_assert_true(a.key.model == b.key.model);
  g_assert_cmpint(a.key.cublaslt, ==, b.key.cublaslt);
  g_assert_cmpint(a.key.driver, ==, b.key.driver);
  g_assert_cmpint(a.key.tile, ==, b.key.tile);
  g_assert_cmpint(a.key.dpad, ==, b.key.dpad);
  g_assert_true(a.lt == b.lt);
  for (int i = 0; i < 8; i++)
    g_assert_cmpuint(a.algo[i], ==, b.algo[i]);
}

static void test_line(void)
{
  g_assert_true(gemm_cache_model("NVIDIA H200 NVL", 9, 0, 132) == "NVIDIA_H200_NVL/9.0/132");
  g_assert_true(gemm_cache_model(nullptr, 8, 6, 84) == "unnamed/8.6/84");
  for (bool lt : {true, false}) {
    const GemmCacheEntry e = entry(16384, 128, lt, 7);
    const std::string line = gemm_cache_format(e);
    g_assert_true(line.back() == '\n');
    GemmCacheEntry back;
    g_assert_true(gemm_cache_parse(line, &back));
    assert_same(e, back);
    g_assert_true(gemm_cache_parse(line.substr(0, line.size() - 1), &back));
  }
  /* what is not a line of this version is ignored */
  const std::string good = gemm_cache_format(entry(16384, 64, true, 3));
  GemmCacheEntry e;
  const char *bad[] = {
      "",
      "knnwb-gemm-2 M 1 2 16384 128 lt 0000000000000000 0000000000000000 0000000000000000 "
      "0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000",
      "knnwb-gemm-1 M 1 2 16384 128 xx 0000000000000000 0000000000000000 0000000000000000 "
      "0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000",
      "knnwb-gemm-1 M 1 2 0 128 lt 0000000000000000 0000000000000000 0000000000000000 "
      "0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000",
      "knnwb-gemm-1 M 1 2 16384 128 lt 0000000000000000 0000000000000000 0000000000000000",
      "knnwb-gemm-1 M 1 2 16384 128 lt 000000000000000g 0000000000000000 0000000000000000 "
      "0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000",
      "knnwb-gemm-1 M 1 2 16384 128 lt 00000000000000000 0000000000000000 0000000000000000 "
      "0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000",
  };
  for (const char *line : bad)
    g_assert_false(gemm_cache_parse(line, &e));
  g_assert_false(gemm_cache_parse(good.substr(0, good.size() - 1) + " extra", &e));
  g_assert_false(gemm_cache_parse(good.substr(0, 40), &e));
}

static void test_path(void)
{
  /* (the environment as it was, put back at the end) */
  g_autofree char *home = g_strdup(g_getenv("HOME")), *xdg = g_strdup(g_getenv("XDG_CACHE_HOME"));
  g_setenv("KNNWB_CUDA_GEMM_CACHE", "/somewhere/choices", TRUE);
  g_assert_true(gemm_cache_path() == "/somewhere/choices");
  g_setenv("KNNWB_CUDA_GEMM_CACHE", "0", TRUE);
  g_assert_true(gemm_cache_path().empty());
  g_unsetenv("KNNWB_CUDA_GEMM_CACHE");
  g_setenv("XDG_CACHE_HOME", "/xdg", TRUE);
  g_assert_true(gemm_cache_path() == "/xdg/knnwb/gemm-choices");
  g_setenv("XDG_CACHE_HOME", "relative", TRUE); /* not absolute: ignored, as the spec says */
  g_setenv("HOME", "/home/someone", TRUE);
  g_assert_true(gemm_cache_path() == "/home/someone/.cache/knnwb/gemm-choices");
  g_unsetenv("XDG_CACHE_HOME");
  g_unsetenv("HOME");
  g_assert_true(gemm_cache_path().empty());
  if (home != NULL)
    g_setenv("HOME", home, TRUE);
  if (xdg != NULL)
    g_setenv("XDG_CACHE_HOME", xdg, TRUE);
}

static void test_store(void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp("knnwb-gemm-cache-XXXXXX", &error);
  g_assert_no_error(error);
  /* the directories are made; a missing file has nothing */
  const std::string path = std::string(dir) + "/a/b/gemm-choices";
  GemmCacheEntry found;
  g_assert_false(gemm_cache_lookup(path, entry(16384, 128, true, 1).key, &found));
  g_assert_false(gemm_cache_lookup("", entry(16384, 128, true, 1).key, &found));
  g_assert_true(gemm_cache_store(path, entry(16384, 128, true, 1)));
  g_assert_true(gemm_cache_store(path, entry(16384, 64, false, 0)));
  g_assert_true(gemm_cache_lookup(path, entry(16384, 128, true, 1).key, &found));
  assert_same(entry(16384, 128, true, 1), found);
  g_assert_true(gemm_cache_lookup(path, entry(16384, 64, false, 0).key, &found));
  assert_same(entry(16384, 64, false, 0), found);
  /* another model, another library: another key */
  GemmCacheKey other = entry(16384, 128, true, 1).key;
  other.cublaslt++;
  g_assert_false(gemm_cache_lookup(path, other, &found));
  /* a new choice for a key replaces the old one: two lines, the newest first */
  g_assert_true(gemm_cache_store(path, entry(16384, 128, true, 2)));
  g_assert_true(gemm_cache_lookup(path, entry(16384, 128, true, 1).key, &found));
  assert_same(entry(16384, 128, true, 2), found);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path.c_str(), &text, NULL, NULL));
  g_assert_true(std::string(text) == gemm_cache_format(entry(16384, 128, true, 2)) +
                                         gemm_cache_format(entry(16384, 64, false, 0)));
  /* broken lines are skipped when read and dropped when stored */
  std::string broken = std::string("garbage\n") + text + "knnwb-gemm-1 half a line";
  g_assert_true(g_file_set_contents(path.c_str(), broken.c_str(), -1, NULL));
  g_assert_true(gemm_cache_lookup(path, entry(16384, 64, false, 0).key, &found));
  g_assert_true(gemm_cache_store(path, entry(8192, 320, true, 5)));
  g_clear_pointer(&text, g_free);
  g_assert_true(g_file_get_contents(path.c_str(), &text, NULL, NULL));
  g_assert_true(std::string(text) == gemm_cache_format(entry(8192, 320, true, 5)) +
                                         gemm_cache_format(entry(16384, 128, true, 2)) +
                                         gemm_cache_format(entry(16384, 64, false, 0)));
  /* a file that cannot be made (its directory is a file): false, and nothing left behind */
  const std::string blocked = std::string(dir) + "/a/b/gemm-choices/inside";
  g_assert_false(gemm_cache_store(blocked, entry(16384, 128, true, 1)));
  g_assert_cmpint(count_entries((std::string(dir) + "/a/b").c_str()), ==, 1); /* no temporary */
  g_remove(path.c_str());
  g_rmdir((std::string(dir) + "/a/b").c_str());
  g_rmdir((std::string(dir) + "/a").c_str());
  g_rmdir(dir);
}

/* Threads of one process (a GPU each) storing at once: every key ends in the file once, and no
 * temporary is left. */
static gpointer store_some(gpointer data)
{
  const std::string *path = static_cast<const std::string *>(data);
  for (int round = 0; round < 10; round++)
    for (int t = 0; t < 8; t++)
      g_assert_true(gemm_cache_store(*path, entry(1024 * (t + 1), 64, true, (uint64_t)t)));
  return NULL;
}

static void test_threads(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-gemm-cache-XXXXXX", NULL);
  g_assert_nonnull(dir);
  const std::string path = std::string(dir) + "/gemm-choices";
  GThread *threads[4];
  for (GThread *&t : threads)
    t = g_thread_new("store", store_some, (gpointer)&path);
  for (GThread *t : threads)
    g_thread_join(t);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path.c_str(), &text, NULL, NULL));
  int lines = 0;
  for (const char *c = text; *c != '\0'; c++)
    lines += *c == '\n';
  g_assert_cmpint(lines, ==, 8);
  for (int t = 0; t < 8; t++) {
    GemmCacheEntry found;
    g_assert_true(gemm_cache_lookup(path, entry(1024 * (t + 1), 64, true, 0).key, &found));
    assert_same(entry(1024 * (t + 1), 64, true, (uint64_t)t), found);
  }
  g_assert_cmpint(count_entries(dir), ==, 1);
  g_remove(path.c_str());
  g_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/gemm-cache/line", test_line);
  g_test_add_func("/kernels/gemm-cache/path", test_path);
  g_test_add_func("/kernels/gemm-cache/store", test_store);
  g_test_add_func("/kernels/gemm-cache/threads", test_threads);
  return g_test_run();
}
