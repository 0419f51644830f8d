/* Interruption (ROBUSTNESS.md), for real with a subprocess: SIGINT/SIGTERM in the middle of a
 * pipeline with several outputs, some of them already written to their temporaries before the
 * long kNN step and some due after it, stops at the next tile with 130/143 and leaves the output
 * directory exactly as it was: no output, no temporary. An existing file at an output's path is
 * left untouched. */
#include "knnwb_test_npy.h"
#include "knnwb_test_process.h"
#include "knnwb_test_time.h"
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <igraph.h>
#include <knnwb/knnwb.h>
#include "host_test_util.h"

/* The promise is "stops within a second"; the bound only tells a stopped run from one that went
 * on to its end (seconds more), generously and scaled for slower builds (knnwb_test_time.h). */
#define STOP_SECONDS knnwb_test_seconds(3.0)

/* A float32 NPY file of n x d deterministic values. */
static char *write_npy(const char *dir, size_t n, size_t d)
{
  return knnwb_test_write_npy(dir, n, d, 3);
}

/* Runs knnwb with argv, sends signal_number 300 ms after its handlers are installed and stderr
 * shows wait_for (NULL: no text to wait for; at most 3 s of waiting for it), returns the exit
 * status and the seconds from the signal to the exit. */
static int run_and_signal(char **argv, const char *wait_for, int signal_number,
                          double *seconds_to_exit)
{
  g_auto(GStrv) envp = g_get_environ();
  g_autofree char *plugin_dir = g_path_get_dirname(KNNWB_KNN_PLUGIN_FILE);
  envp = g_environ_setenv(envp, "KNNWB_PLUGIN_PATH", plugin_dir, TRUE);
  GPid pid;
  int err_fd = -1;
  g_autoptr(GError) error = NULL;
  g_assert_true(g_spawn_async_with_pipes(NULL, argv, envp,
                                         G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
                                         NULL, NULL, &pid, NULL, NULL, &err_fd, &error));
  knnwb_test_wait_for_signal_handlers(pid);
  /* Wait for the step line of the kNN step: by then the earlier writers have run. */
  g_autoptr(GString) err = g_string_new(NULL);
  gint64 deadline = g_get_monotonic_time() + 3 * G_USEC_PER_SEC;
  while (wait_for != NULL && strstr(err->str, wait_for) == NULL &&
         g_get_monotonic_time() < deadline) {
    GPollFD poll_fd = {err_fd, G_IO_IN, 0};
    if (g_poll(&poll_fd, 1, 50) > 0) {
      char buffer[256];
      ssize_t got = read(err_fd, buffer, sizeof buffer);
      if (got <= 0)
        break;
      g_string_append_len(err, buffer, got);
    }
  }
  g_usleep(300 * 1000); /* well into the search */
  gint64 signalled = g_get_monotonic_time();
  kill(pid, signal_number);
  int status = 0;
  /* Timed to the "interrupted" line (the work stopped, the temporaries removed); freeing what the
   * run holds and exiting get their own, looser bound. */
  gint64 stopped = knnwb_test_read_until_end(err_fd, err, "interrupted");
  g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
  gint64 exited = g_get_monotonic_time();
  g_test_message("stderr: %s", err->str);
  *seconds_to_exit = (double)((stopped != 0 ? stopped : exited) - signalled) / G_USEC_PER_SEC;
  g_assert_cmpint(exited - signalled, <, knnwb_test_usec(10.0));
  g_spawn_close_pid(pid);
  close(err_fd);
  g_assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static void test_pipeline_several_outputs(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = write_npy(dir, 60000, 64);
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  /* An older result at one of the output paths must survive the interrupted run. */
  g_autofree char *old = host_test_write(out_dir, "big.knn", "old result\n");

  g_autoptr(GString) xml = g_string_new(NULL);
  g_string_append_printf(
      xml,
      "<pipeline>\n"
      "  <step id=\"small\" type=\"load-knn\"><param name=\"path\" value=\"%s\"/></step>\n"
      "  <step id=\"w1\" type=\"write-graph\"><input name=\"graph\" step=\"small\"/>\n"
      "    <param name=\"path\" value=\"small.knn\"/></step>\n"
      "  <step id=\"w2\" type=\"write-graph\"><input name=\"graph\" step=\"small\"/>\n"
      "    <param name=\"path\" value=\"small.gml\"/></step>\n"
      "  <step id=\"c\" type=\"components\"><input name=\"graph\" step=\"small\"/></step>\n"
      "  <step id=\"w3\" type=\"write-labels\"><input name=\"clusters\" step=\"c\"/>\n"
      "    <param name=\"path\" value=\"small.labels.tsv\"/></step>\n"
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"%s\"/></step>\n"
      "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>\n"
      "    <param name=\"k\" value=\"5\"/><param name=\"threads\" value=\"1\"/>\n"
      "    <param name=\"memory\" value=\"2M\"/></step>\n"
      "  <step id=\"w4\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/>\n"
      "    <param name=\"path\" value=\"big.knn\"/></step>\n"
      "  <step id=\"w5\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/>\n"
      "    <param name=\"path\" value=\"big.graphml\"/></step>\n"
      "</pipeline>\n",
      KNNWB_SHARED_DATA_DIR "/cibm-sample.seed.knn", input);
  g_autofree char *pipeline = host_test_write(dir, "interrupt.xml", xml->str);
  char *argv[] = {KNNWB_HOST_PROGRAM, "run", "--output-dir", out_dir, pipeline, NULL};
  const int signals[] = {SIGINT, SIGTERM};
  for (size_t s = 0; s < G_N_ELEMENTS(signals); s++) {
    double seconds = 0;
    g_assert_cmpint(run_and_signal(argv, "knn-graph", signals[s], &seconds), ==, 128 + signals[s]);
    /* Only the older file: none of the five outputs, no temporary. */
    g_assert_cmpuint(host_test_count_files(out_dir), ==, 1);
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(old, &text, NULL, NULL));
    g_assert_cmpstr(text, ==, "old result\n");
    /* Stopping takes a tile, not the rest of the run. */
    g_assert_cmpfloat(seconds, <, STOP_SECONDS);
  }
  host_test_rmtree(dir);
}

/* `knnwb knn`: same contract, an existing output kept as it was. */
static void test_knn_keeps_old_output(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = write_npy(dir, 60000, 64);
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  g_autofree char *old = host_test_write(out_dir, "big.gml", "old\n");
  char *argv[] = {KNNWB_HOST_PROGRAM, "knn", input, "-k", "5", "--threads", "1",
                  "--memory",         "2M",  "-o",  old,  NULL};
  double seconds = 0;
  g_assert_cmpint(run_and_signal(argv, NULL, SIGTERM, &seconds), ==, 143);
  g_assert_cmpuint(host_test_count_files(out_dir), ==, 1);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(old, &text, NULL, NULL));
  g_assert_cmpstr(text, ==, "old\n");
  g_assert_cmpfloat(seconds, <, STOP_SECONDS);
  host_test_rmtree(dir);
}

/* SIGINT to argv: exit 130 within a second, and out_dir holds only the older file old, unchanged
 * ("old\n"). */
static void assert_stopped_keeping_old(char **argv, const char *out_dir, const char *old)
{
  double seconds = 0;
  g_assert_cmpint(run_and_signal(argv, NULL, SIGINT, &seconds), ==, 130);
  g_assert_cmpuint(host_test_count_files(out_dir), ==, 1);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(old, &text, NULL, NULL));
  g_assert_cmpstr(text, ==, "old\n");
  g_assert_cmpfloat(seconds, <, STOP_SECONDS);
}

/* Ctrl-C while the CPU's GEMM runs (oneDNN's JIT kernels, which use the stack pointer as a general
 * register): the signal frame landed in the heap when the handler ran on a GEMM thread (glibc's
 * "corrupted size vs. prev_size" aborts in every run); signals now go to a thread of their own
 * (plugin/host/runtime/signals.c). MALLOC_CHECK_=3 makes glibc check every free. */
static void test_knn_gemm_heap_intact(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = write_npy(dir, 30000, 295);
  g_autofree char *out = g_build_filename(dir, "g.knn", NULL);
  char *argv[] = {KNNWB_HOST_PROGRAM, "knn", input, "-k", "10", "--threads", "1",
                  "--backend",        "cpu", "-q",  "-o", out,  NULL};
  g_setenv("MALLOC_CHECK_", "3", TRUE);
  for (int run = 0; run < 3; run++) {
    double seconds = 0;
    /* run_and_signal asserts a normal exit: an abort fails here */
    const int status = run_and_signal(argv, NULL, SIGINT, &seconds);
    g_test_message("run %d: status %d, %.2f s", run, status, seconds);
    g_assert_true(status == 130 || status == 0);
    g_assert_false(status == 130 && g_file_test(out, G_FILE_TEST_EXISTS));
  }
  g_unsetenv("MALLOC_CHECK_");
  host_test_rmtree(dir);
}

/* Whether this knnwb draws pictures: without cairo, render refuses and says so. */
static gboolean render_available(const char *dir)
{
  /* one node with coordinates: render reaches the drawing (or the refusal) */
  static const char probe[] = "graph\n[\n  node\n  [\n    id 0\n    graphics\n    [\n"
                              "      x 0\n      y 0\n    ]\n  ]\n]\n";
  g_autofree char *gml = host_test_write(dir, "probe.gml", probe);
  g_autofree char *png = g_build_filename(dir, "probe.png", NULL);
  char *argv[] = {KNNWB_HOST_PROGRAM, "render", gml, "-o", png, NULL};
  g_autofree char *err = NULL;
  int status = 0;
  g_assert_true(g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err,
                             &status, NULL));
  g_remove(png);
  g_remove(gml);
  return strstr(err, "without cairo") == NULL;
}

/* `knnwb render --edges all` of 160,000 edges of one colour (no clusters: one grey group) stops
 * within a second and keeps the older picture. Before, the flag was read once per colour group:
 * a signal waited for every edge (12-14 s for 200,000 edges). */
static void test_render_keeps_old_output(void)
{
  g_autofree char *dir = host_test_tmpdir();
  if (!render_available(dir)) {
    g_test_skip("this knnwb was built without cairo");
    host_test_rmtree(dir);
    return;
  }
  g_autoptr(GString) gml = g_string_new("graph\n[\n  directed 1\n");
  const int n = 4000, per_node = 40;
  guint32 state = 99;
  for (int v = 0; v < n; v++) {
    state = state * 1664525u + 1013904223u;
    double x = (double)(state >> 8) / 16777216.0 * 1000.0;
    state = state * 1664525u + 1013904223u;
    double y = (double)(state >> 8) / 16777216.0 * 1000.0;
    g_string_append_printf(gml,
                           "  node\n  [\n    id %d\n    label \"p%d\"\n    graphics\n    [\n"
                           "      x %.3f\n      y %.3f\n      w 4\n      h 4\n"
                           "      fill \"#C0C0C0\"\n    ]\n  ]\n",
                           v, v, x, y);
  }
  for (int v = 0; v < n; v++)
    for (int j = 1; j <= per_node; j++)
      g_string_append_printf(gml,
                             "  edge\n  [\n    source %d\n    target %d\n    graphics\n    [\n"
                             "      fill \"#A0A0A0\"\n    ]\n  ]\n",
                             v, (v + j * 97) % n);
  g_string_append(gml, "]\n");
  g_autofree char *input = host_test_write(dir, "many-edges.gml", gml->str);
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  g_autofree char *old = host_test_write(out_dir, "picture.png", "old\n");
  char *argv[] = {KNNWB_HOST_PROGRAM, "render", input, "--edges", "all", "-o", old, NULL};
  assert_stopped_keeping_old(argv, out_dir, old);
  host_test_rmtree(dir);
}

/* `knnwb metafeatures` writing a TSV of 180,300 pair rows x 64 (120 MB, on one thread): a signal
 * stops the write within a second and keeps the older file. Before, the TSV writer did not poll
 * the flag: the signal waited for the whole file (5.3 s here). */
static void test_metafeatures_keeps_old_output(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = write_npy(dir, 601, 64);
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  g_autofree char *old = host_test_write(out_dir, "pairs.tsv", "old\n");
  char *argv[] = {KNNWB_HOST_PROGRAM, "metafeatures", input, "--threads", "1", "-o", old, NULL};
  assert_stopped_keeping_old(argv, out_dir, old);
  host_test_rmtree(dir);
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/robustness/interrupt/pipeline-several-outputs", test_pipeline_several_outputs);
  g_test_add_func("/robustness/interrupt/knn-keeps-old-output", test_knn_keeps_old_output);
  g_test_add_func("/robustness/interrupt/render-keeps-old-output", test_render_keeps_old_output);
  g_test_add_func("/robustness/interrupt/knn-gemm-heap-intact", test_knn_gemm_heap_intact);
  g_test_add_func("/robustness/interrupt/metafeatures-keeps-old-output",
                  test_metafeatures_keeps_old_output);
  return g_test_run();
}
