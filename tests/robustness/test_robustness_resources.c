/* Exhausted resources (ROBUSTNESS.md, "Hostile input and exhausted resources"): a file without line
 * breaks, an endless field and absurd thread counts end in a message or a correct result, never in
 * an abort, also under `ulimit -v` (the program runs in a child shell with the limit). */
#include <stdio.h>
#include <unistd.h>
#include "host_test_util.h"
#include "knnwb_test_process.h"

#if defined(__SANITIZE_ADDRESS__)
#define KNNWB_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KNNWB_TEST_ASAN 1
#endif
#endif

static char *test_dir;

/* Runs `sh -c "LIMITS; exec knnwb ARGS"`; returns the exit status (128 + signal when killed). */
static int run_limited(const char *limits, const char *args, char **err)
{
  g_autofree char *plugin_dir = g_path_get_dirname(KNNWB_KNN_PLUGIN_FILE);
  g_autofree char *command =
      g_strdup_printf("%s%sKNNWB_PLUGIN_PATH='%s' exec '%s' %s", limits ? limits : "",
                      limits ? "; " : "", plugin_dir, KNNWB_HOST_PROGRAM, args);
  char *argv[] = {"/bin/sh", "-c", command, NULL};
  int status = -1;
  g_assert_true(
      g_spawn_sync(test_dir, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, err, &status, NULL));
  g_test_message("%s\n  -> status %d: %s", command, status, err ? *err : "");
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#ifdef KNNWB_TEST_ASAN /* ASan reserves terabytes of shadow memory: no address-space limit there   \
                        */
#define LIMIT_3G NULL
#else
/* 3 GiB of headroom above what the program maps at start (see knnwb_test_mapped_kib). */
#define LIMIT_3G limit_3g
#endif

/* `knnwb knn /dev/zero -f csv` grew its line buffer until g_realloc aborted (SIGTRAP) under a 3 GiB
 * limit; now every text format stops at 256 MiB with the line number. */
static void test_endless_line(void)
{
  const char *formats[] = {"csv", "tsv", "cibm", "gct"};
#ifndef KNNWB_TEST_ASAN
  g_autofree char *limit_3g =
      g_strdup_printf("ulimit -v %" G_GUINT64_FORMAT, knnwb_test_mapped_kib() + 3145728);
#endif
  for (guint f = 0; f < G_N_ELEMENTS(formats); f++) {
    g_autofree char *args = g_strdup_printf("knn /dev/zero -f %s -k 2 -o out.knn", formats[f]);
    g_autofree char *err = NULL;
    g_assert_cmpint(run_limited(LIMIT_3G, args, &err), ==, 1);
    /* Where the limit leaves less than the 256 MiB cap (a GPU machine maps more at start), the
     * refusal is the failed allocation, named just as clearly. */
    g_assert_true(strstr(err, "/dev/zero:1: a line (or quoted record) longer than 256 MiB") !=
                      NULL ||
                  strstr(err, "/dev/zero:1: cannot allocate 256 MiB for a line") != NULL);
  }
  g_assert_false(g_file_test("out.knn", G_FILE_TEST_EXISTS));
}

/* A quoted field that never closes (20 MiB of a header) is refused at 16 MiB, at its line and
 * column, before it is copied. */
static void test_long_field(void)
{
  g_autofree char *path = g_build_filename(test_dir, "field.csv", NULL);
  FILE *file = fopen(path, "w");
  g_assert_nonnull(file);
  fputs("name,\"a", file);
  g_autofree char *chunk = g_malloc(1 << 20);
  memset(chunk, 'x', 1 << 20);
  for (int i = 0; i < 20; i++) {
    g_assert_cmpuint(fwrite(chunk, 1, 1 << 20, file), ==, 1 << 20);
    fputc('\n', file);
  }
  fputs("\"\nr1,1\n", file);
  g_assert_cmpint(fclose(file), ==, 0);
  g_autofree char *err = NULL;
  g_assert_cmpint(run_limited(NULL, "knn field.csv -k 1 -o out.knn", &err), ==, 1);
  g_assert_nonnull(strstr(err, "field.csv:1:6: a field longer than 16 MiB"));
  g_unlink(path);
}

/* A small random data set (6,001 rows: enough tiles for many threads) in CSV. */
static char *write_data(void)
{
  g_autoptr(GString) text = g_string_new(NULL);
  GRand *random = g_rand_new_with_seed(15);
  for (int i = 0; i < 6001; i++) {
    g_string_append_printf(text, "r%d", i);
    for (int j = 0; j < 9; j++)
      g_string_append_printf(text, ",%.4f", g_rand_double(random));
    g_string_append_c(text, '\n');
  }
  g_rand_free(random);
  return host_test_write(test_dir, "data.csv", text->str);
}

/* --threads 100000 (and 4096 under a memory limit) aborted in g_thread_new: now clamped to
 * 4 x online CPUs (at most 1024) with a warning, and threads that cannot start (here: 1 GiB stacks
 * under a 4 GiB address space) are done without; the graph is the same bytes as with one thread. */
static void test_threads(void)
{
  g_autofree char *data = write_data();
  g_autofree char *err = NULL;
  g_assert_cmpint(run_limited(NULL, "knn data.csv -k 5 --threads 1 -q -o one.knn", &err), ==, 0);
  g_autofree char *one = NULL;
  g_assert_true(g_file_get_contents("one.knn", &one, NULL, NULL));
  /* Limits are headroom above what the program maps at start (see knnwb_test_mapped_kib). */
  guint64 mapped_kib = knnwb_test_mapped_kib();
  g_autofree char *limit_2g = g_strdup_printf("ulimit -v %" G_GUINT64_FORMAT, mapped_kib + 2097152);
  /* 2 GiB thread stacks in 6 GiB of headroom: two workers start, the third cannot, and what is left
   * still holds OpenBLAS's per-thread buffers (OpenBLAS retries forever when those cannot be had,
   * so the headroom must not be so tight that they fail too). */
  g_autofree char *limit_stack =
      g_strdup_printf("ulimit -s 2097152; ulimit -v %" G_GUINT64_FORMAT, mapped_kib + 6291456);
  struct {
    const char *limits;
    const char *threads;
    const char *warning;
  } cases[] = {
      {NULL, "100000", "100000 threads asked for; using"},
      {limit_2g, "4096", "4096 threads asked for; using"},
      {limit_stack, "8", "cannot start a thread"},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
#ifdef KNNWB_TEST_ASAN
    if (cases[c].limits != NULL)
      continue;
#endif
    g_autofree char *args =
        g_strdup_printf("knn data.csv -k 5 --threads %s -q -o many.knn", cases[c].threads);
    g_clear_pointer(&err, g_free);
    g_assert_cmpint(run_limited(cases[c].limits, args, &err), ==, 0);
    /* 4096 under 2 GiB: clamped on this machine, and on a large one threads may fail to start. */
    g_assert_true(strstr(err, cases[c].warning) != NULL ||
                  (c == 1 && strstr(err, "cannot start a thread") != NULL));
    g_autofree char *many = NULL;
    g_assert_true(g_file_get_contents("many.knn", &many, NULL, NULL));
    g_assert_cmpstr(one, ==, many);
    g_unlink("many.knn");
  }
  /* Pipelines: the knn-graph step's own threads parameter (up to 4096) goes through the same
   * clamp. */
  g_autofree char *pipeline = g_strdup_printf(
      "<pipeline name=\"t\"><step id=\"l\" type=\"load-matrix\"><param name=\"path\" "
      "value=\"%s\"/></step><step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"l\"/>"
      "<param name=\"k\" value=\"5\"/><param name=\"threads\" value=\"4096\"/></step>"
      "<step id=\"w\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/><param "
      "name=\"path\" value=\"p.knn\"/></step></pipeline>",
      data);
  g_autofree char *pipeline_path = host_test_write(test_dir, "p.xml", pipeline);
  g_assert_true(g_file_test(pipeline_path, G_FILE_TEST_IS_REGULAR));
  g_clear_pointer(&err, g_free);
  g_assert_cmpint(run_limited(NULL, "run -q p.xml", &err), ==, 0);
  g_assert_nonnull(strstr(err, "4096 threads asked for; using"));
  g_autofree char *piped = NULL;
  g_assert_true(g_file_get_contents("p.knn", &piped, NULL, NULL));
  g_assert_cmpstr(one, ==, piped);
}

/* OpenBLAS starts a thread pool (one thread per core but one, each with a stack of RLIMIT_STACK
 * bytes) from its library constructor, and ends the process when a thread cannot start: on a
 * 16-core machine under a tight `ulimit -v`, knnwb died before main. The same happens on any
 * machine of two or more cores when the stacks alone exceed the room: here 4 GiB stacks under
 * 2 GiB of headroom. knnwb keeps that pool (which it never uses) from starting; its own threads
 * (the search, the writers) that cannot start are done without. Every command runs: a search to
 * GML (layout and writers too), a cluster run, a pipeline check; the graph is the same bytes as
 * without limits. A one-core machine starts no pool: the case cannot fail there. */
static void test_openblas_pool(void)
{
#ifdef KNNWB_TEST_ASAN
  g_test_skip("ASan reserves terabytes of shadow memory: no address-space limit there");
  return;
#endif
  g_autofree char *data = write_data();
  g_autofree char *err = NULL;
  g_assert_cmpint(run_limited(NULL, "knn data.csv -k 5 -q -o free.knn", &err), ==, 0);
  g_autofree char *free_run = NULL;
  g_assert_true(g_file_get_contents("free.knn", &free_run, NULL, NULL));
  g_autofree char *limits = g_strdup_printf("ulimit -s 4194304; ulimit -v %" G_GUINT64_FORMAT,
                                            knnwb_test_mapped_kib() + 2097152);
  const char *commands[] = {"knn data.csv -k 5 -o pool.knn", "knn data.csv -k 5 -o pool.gml",
                            "cluster data.csv --method leiden -k 5 -o pool.tsv"};
  for (guint c = 0; c < G_N_ELEMENTS(commands); c++) {
    g_clear_pointer(&err, g_free);
    g_assert_cmpint(run_limited(limits, commands[c], &err), ==, 0);
    g_assert_null(strstr(err, "OpenBLAS"));
  }
  g_autofree char *pool_run = NULL;
  g_assert_true(g_file_get_contents("pool.knn", &pool_run, NULL, NULL));
  g_assert_cmpstr(free_run, ==, pool_run);
  g_clear_pointer(&err, g_free);
  g_assert_cmpint(run_limited(limits, "validate /dev/null", &err), ==, 1);
  g_assert_nonnull(strstr(err, "/dev/null:1:"));
  const char *outputs[] = {"free.knn", "pool.knn", "pool.gml", "pool.tsv", "pool.summary.tsv"};
  for (guint o = 0; o < G_N_ELEMENTS(outputs); o++)
    g_unlink(outputs[o]);
}

/* A file size limit (`ulimit -f`, a batch system's quota) is a write error like a full disk: the
 * program used to die of SIGXFSZ without a word, leaving its temporary behind. Now every writer
 * says which file, the exit status is 1, the previous output stays and no temporary is left. */
static void test_file_size_limit(void)
{
  g_autofree char *data = write_data();
  const char *outputs[] = {"limited.knn", "limited.tsv", "limited.gml", "limited.npy",
                           "limited.mtx"};
  for (guint o = 0; o < G_N_ELEMENTS(outputs); o++) {
    g_autofree char *previous = host_test_write(test_dir, outputs[o], "previous\n");
    g_autofree char *args = g_strdup_printf("knn data.csv -k 5 -t 1 -q -o %s", outputs[o]);
    g_autofree char *err = NULL;
    g_assert_cmpint(run_limited("ulimit -f 16", args, &err), ==, 1);
    g_assert_nonnull(strstr(err, "File too large"));
    g_autofree char *after = NULL;
    g_assert_true(g_file_get_contents(previous, &after, NULL, NULL));
    g_assert_cmpstr(after, ==, "previous\n");
    g_unlink(previous);
  }
  g_autofree char *err = NULL;
  g_assert_cmpint(
      run_limited("ulimit -f 16", "cluster data.csv --method leiden -k 5 -q -o limited.tsv", &err),
      ==, 1);
  g_assert_nonnull(strstr(err, "File too large"));
  /* The matrix writer (metafeatures' TSV and NPY) and the pictures: the system's reason too (a
   * picture said only "cairo: error while writing to output stream"). */
  const char *more[] = {
      "metafeatures data.csv -q -o limited.tsv", "metafeatures data.csv -q -o limited.npy",
      "render drawn.gml --edges all -o limited.svg", "render drawn.gml --edges all -o limited.png"};
  g_autofree char *draw_err = NULL;
  g_assert_cmpint(run_limited(NULL, "knn data.csv -k 5 -q --layout fr -o drawn.gml", &draw_err), ==,
                  0);
  for (guint c = 0; c < G_N_ELEMENTS(more); c++) {
    g_autofree char *more_err = NULL;
    int status = run_limited("ulimit -f 16", more[c], &more_err);
    if (g_str_has_prefix(more[c], "render") && strstr(more_err, "without cairo") != NULL)
      continue;
    g_assert_cmpint(status, ==, 1);
    g_assert_nonnull(strstr(more_err, "File too large"));
    g_assert_false(g_file_test(strstr(more[c], "limited."), G_FILE_TEST_EXISTS));
  }
  g_unlink("drawn.gml");
  g_unlink(data);
  /* Every temporary is gone. */
  g_autoptr(GDir) dir = g_dir_open(test_dir, 0, NULL);
  g_assert_nonnull(dir);
  const char *name;
  while ((name = g_dir_read_name(dir)) != NULL)
    g_assert_false(g_str_has_prefix(name, ".knnwb-tmp-"));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  test_dir = host_test_tmpdir();
  g_assert_cmpint(chdir(test_dir), ==, 0);
  g_test_add_func("/robustness/resources/endless-line", test_endless_line);
  g_test_add_func("/robustness/resources/long-field", test_long_field);
  g_test_add_func("/robustness/resources/threads", test_threads);
  g_test_add_func("/robustness/resources/openblas-pool", test_openblas_pool);
  g_test_add_func("/robustness/resources/file-size-limit", test_file_size_limit);
  int status = g_test_run();
  g_assert_cmpint(chdir("/"), ==, 0);
  host_test_rmtree(test_dir);
  g_free(test_dir);
  return status;
}
