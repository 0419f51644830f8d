/* The `knnwb` program's command line: help, version, `knnwb knn` on good and bad input, exit
 * statuses, file:line messages and no output left behind by a failed run. */
#include "knnwb_test_npy.h"
#include "knnwb_test_process.h"
#include "knnwb_test_time.h"
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <igraph.h>
#include <knnwb/device_list.h>
#include <knnwb/formats.h>
#include <knnwb/knnwb.h>
#include "runtime/runtime.h"
#include "host_test_util.h"

#define CIBM_SAMPLE KNNWB_SHARED_DATA_DIR "/cibm-sample.txt"

/* Each command's usage line names its arguments once, as README shows them (`knnwb render --help`
 * said `GRAPH.gml GRAPH.gml -o OUT`: GLib adds the remaining-arguments entry's name itself). */
static void test_usage_lines(void)
{
  const char *usage[][2] = {
      {"knn", " INPUT -k K -o OUT\n"},
      {"cluster", " INPUT --method METHOD -o OUT\n"},
      {"metafeatures", " INPUT -o OUT\n"},
      {"neighbourhood", " INPUT --focus LABEL -k K -o OUT\n"},
      {"classify", " INPUT -k K -o OUT.tsv\n"},
      {"render", " GRAPH.gml -o OUT\n"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(usage); i++) {
    g_autofree char *out = NULL;
    g_assert_cmpint(host_test_run(NULL, &out, NULL, usage[i][0], "--help", NULL), ==, 0);
    g_autofree char *prefix = g_strconcat("knnwb ", usage[i][0], NULL);
    if (!host_test_has_usage_line(out, prefix, usage[i][1]))
      g_error("knnwb %s --help: no line '%s [OPTION...]%s' in:\n%s", usage[i][0], prefix,
              usage[i][1], out);
  }
}

static void test_help_and_version(void)
{
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint(host_test_run(NULL, &out, NULL, "--help", NULL), ==, 0);
  g_assert_nonnull(strstr(out, "Usage: knnwb COMMAND"));
  g_assert_nonnull(strstr(out, "knn"));
  g_clear_pointer(&out, g_free);
  g_assert_cmpint(host_test_run(NULL, &out, NULL, "knn", "--help", NULL), ==, 0);
  g_assert_nonnull(strstr(out, "--metric"));
  g_assert_nonnull(strstr(out, "--memory"));
  g_assert_nonnull(strstr(out, "--drop-degenerate"));
  g_clear_pointer(&out, g_free);
  g_assert_cmpint(host_test_run(NULL, &out, NULL, "--version", NULL), ==, 0);
  g_assert_nonnull(strstr(out, KNNWB_VERSION_STRING));
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "frobnicate", NULL), ==, 2);
  g_assert_nonnull(strstr(err, "unknown command 'frobnicate'"));
  g_clear_pointer(&err, g_free);
  g_assert_cmpint(host_test_run(NULL, NULL, &err, NULL), ==, 2);
}

/* --devices narrows CUDA_VISIBLE_DEVICES to the GPUs it names while the options are read, before
 * any GPU call (knnwb_knn_devices_narrow): a CUDA build's debug line says so (7,9 -> 9, the run's
 * GPU 0), a build without CUDA never narrows, and `--backend cpu` leaves the variable alone. GPU
 * "9" exists nowhere, so every run computes on the CPU and writes the same graph. */
static void test_devices_narrowed(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *named = g_build_filename(dir, "named.knn", NULL);
  g_autofree char *cpu = g_build_filename(dir, "cpu.knn", NULL);
  g_autofree char *given = g_strdup(g_getenv("CUDA_VISIBLE_DEVICES"));
  g_autofree char *err = NULL, *cpu_err = NULL;
  g_setenv("CUDA_VISIBLE_DEVICES", "7,9", TRUE);
  g_setenv("G_MESSAGES_DEBUG", "all", TRUE);
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", CIBM_SAMPLE, "-k", "3", "--devices", "1",
                                "-o", named, NULL),
                  ==, 0);
  g_assert_cmpint(host_test_run(NULL, NULL, &cpu_err, "knn", CIBM_SAMPLE, "-k", "3", "--devices",
                                "1", "--backend", "cpu", "-o", cpu, NULL),
                  ==, 0);
  g_unsetenv("G_MESSAGES_DEBUG");
  if (given != NULL)
    g_setenv("CUDA_VISIBLE_DEVICES", given, TRUE);
  else
    g_unsetenv("CUDA_VISIBLE_DEVICES");
#ifdef KNNWB_HAVE_CUDA
  g_assert_nonnull(strstr(err, "CUDA_VISIBLE_DEVICES=9 (was 7,9), now GPU 0 to 0"));
#else
  g_assert_null(strstr(err, "all the driver shows"));
#endif
  g_assert_null(strstr(cpu_err, "all the driver shows"));
  g_autofree char *a = NULL, *b = NULL;
  g_assert_true(g_file_get_contents(named, &a, NULL, NULL));
  g_assert_true(g_file_get_contents(cpu, &b, NULL, NULL));
  g_assert_cmpstr(a, ==, b);
}

/* The sample's graph, checked against the exact distances of a brute-force search. */
static void test_knn_sample(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *output = g_build_filename(dir, "sample.knn", NULL);
  g_autofree char *err = NULL;
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", CIBM_SAMPLE, "-k", "3", "--metric",
                                "pearson", "--threads", "2", "--memory", "1M", "-o", output, NULL),
                  ==, 0);
  /* stderr is not a terminal here: a summary line, no progress. */
  g_assert_null(strchr(err, '\r'));

  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  g_autoptr(KnnwbMatrix) data = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_formats_read_matrix(CIBM_SAMPLE, &options, &data, NULL, &error));
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(output, &text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  g_assert_cmpstr(lines[0], ==, "10 30");
  for (size_t i = 0; i < 10; i++) {
    /* Brute force: the 3 smallest exact distances with lower index first on ties. */
    double best[3] = {G_MAXDOUBLE, G_MAXDOUBLE, G_MAXDOUBLE};
    int best_index[3] = {-1, -1, -1};
    for (size_t j = 0; j < 10; j++) {
      if (j == i)
        continue;
      double d =
          knnwb_distance_exact(KNNWB_METRIC_PEARSON, data->values + i * 6, data->values + j * 6, 6);
      for (int r = 0; r < 3; r++)
        if (d < best[r]) {
          for (int s = 2; s > r; s--) {
            best[s] = best[s - 1];
            best_index[s] = best_index[s - 1];
          }
          best[r] = d;
          best_index[r] = (int)j;
          break;
        }
    }
    for (int r = 0; r < 3; r++) {
      int source, target;
      double weight;
      g_assert_cmpint(sscanf(lines[1 + i * 3 + (size_t)r], "%d %d %lf", &source, &target, &weight),
                      ==, 3);
      g_assert_cmpint(source, ==, (int)i);
      g_assert_cmpint(target, ==, best_index[r]);
      g_assert_cmpfloat_with_epsilon(weight, best[r], 1e-12);
    }
  }
  g_assert_true(lines[31] != NULL && *lines[31] == '\0');
  host_test_rmtree(dir);
}

static void test_knn_formats_and_quiet(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *gml = g_build_filename(dir, "sample.gml", NULL);
  g_autofree char *graphml = g_build_filename(dir, "sample.graphml", NULL);
  g_autofree char *err = NULL;
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", CIBM_SAMPLE, "-k", "2", "--graph", "union",
                                "--metric", "euclidean", "--quiet", "-o", gml, NULL),
                  ==, 0);
  g_assert_cmpstr(err, ==, "");
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(gml, &text, NULL, NULL));
  g_assert_nonnull(strstr(text, "graphics"));
  g_assert_nonnull(strstr(text, "label \"F_1\""));
  g_clear_pointer(&err, g_free);
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", CIBM_SAMPLE, "-k", "2", "-q",
                                "--output-format", "graphml", "-o", graphml, NULL),
                  ==, 0);
  g_assert_true(g_file_test(graphml, G_FILE_TEST_IS_REGULAR));
  host_test_rmtree(dir);
}

/* Usage errors exit 2, input errors 1; neither leaves any file in the output directory. */
static void test_knn_bad_arguments(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *output = g_build_filename(dir, "out.knn", NULL);
  struct {
    const char *k, *extra, *extra_value;
    int status;
    const char *message;
  } cases[] = {
      {"0", NULL, NULL, 2, "k must be at least 1"},
      {"-3", NULL, NULL, 2, "k must be at least 1"},
      {"abc", NULL, NULL, 2, "abc"},
      {"10", NULL, NULL, 1, "use k <= 9"},
      {"3", "--metric", "chebyshev", 2, "chebyshev"},
      {"3", "--memory", "4X", 2, "not a size"},
      {"3", "--graph", "sideways", 2, "sideways"},
      {"3", "--output-format", "xlsx", 2, "xlsx"},
      {"3", "--backend", "tpu", 2, "tpu"},
      {"3", "--devices", "0,x", 2, "--devices: 'x' is not a GPU number"},
      {"3", "--devices", "0,,1", 2, "--devices: '' is not a GPU number"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *err = NULL;
    int status = cases[i].extra
                     ? host_test_run(NULL, NULL, &err, "knn", CIBM_SAMPLE, "-k", cases[i].k,
                                     cases[i].extra, cases[i].extra_value, "-o", output, NULL)
                     : host_test_run(NULL, NULL, &err, "knn", CIBM_SAMPLE, "-k", cases[i].k, "-o",
                                     output, NULL);
    g_test_message("case %u: status %d, stderr: %s", i, status, err);
    g_assert_cmpint(status, ==, cases[i].status);
    g_assert_nonnull(strstr(err, cases[i].message));
    g_assert_cmpuint(host_test_count_files(dir), ==, 0);
  }
  g_autofree char *err = NULL;
  /* a GPU listed twice is taken (two workers share it), with a warning */
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", CIBM_SAMPLE, "-k", "3", "--backend", "cpu",
                                "--devices", "1,0,1", "-q", "-o", output, NULL),
                  ==, 0);
  g_assert_nonnull(strstr(err, "--devices lists GPU 1 more than once"));
  g_assert_true(g_file_test(output, G_FILE_TEST_IS_REGULAR));
  g_remove(output);
  g_clear_pointer(&err, g_free);
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", CIBM_SAMPLE, "-k", "3", NULL), ==, 2);
  g_assert_nonnull(strstr(err, "-o OUT is required"));
  g_clear_pointer(&err, g_free);
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", "-k", "3", "-o", output, NULL), ==, 2);
  g_assert_nonnull(strstr(err, "no INPUT"));
  g_clear_pointer(&err, g_free);
  /* An output directory that does not exist is refused before any work. */
  g_autofree char *nowhere = g_build_filename(dir, "missing", "out.knn", NULL);
  g_assert_cmpint(
      host_test_run(NULL, NULL, &err, "knn", CIBM_SAMPLE, "-k", "3", "-o", nowhere, NULL), ==, 1);
  g_assert_nonnull(strstr(err, "does not exist"));
  g_assert_cmpuint(host_test_count_files(dir), ==, 0);
  host_test_rmtree(dir);
}

/* Malformed files: the message names file:line and the run leaves nothing behind. */
static void test_knn_bad_files(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  g_autofree char *output = g_build_filename(out_dir, "out.knn", NULL);
  struct {
    const char *name, *text, *line;
  } cases[] = {
      {"ragged.tsv", "id\ta\tb\tc\nr1\t1\t2\t3\nr2\t1\t2\nr3\t4\t5\t6\n", ":3:"},
      {"word.tsv", "id\ta\tb\nr1\t1\t2\nr2\t3\t4\nr3\t5\tfive\n", ":4:"},
      {"nan.csv", "id,a,b\nr1,1,2\nr2,NaN,4\nr3,5,6\n", ":3:"},
      {"constant.tsv", "id\ta\tb\tc\nr1\t1\t2\t3\nr2\t7\t7\t7\nr3\t4\t5\t9\nr4\t1\t0\t2\n", "r2"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *input = host_test_write(dir, cases[i].name, cases[i].text);
    g_autofree char *err = NULL;
    int status = host_test_run(NULL, NULL, &err, "knn", input, "-k", "1", "-o", output, NULL);
    g_test_message("%s: status %d, stderr: %s", cases[i].name, status, err);
    g_assert_cmpint(status, ==, 1);
    g_autofree char *prefix = g_strdup_printf("knnwb: %s", input);
    g_assert_true(g_str_has_prefix(err, prefix));
    g_assert_nonnull(strstr(err, cases[i].line));
    g_assert_cmpuint(host_test_count_files(out_dir), ==, 0);
  }
  g_autofree char *missing = g_build_filename(dir, "nothing-here.tsv", NULL);
  g_autofree char *err = NULL;
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", missing, "-k", "1", "-o", output, NULL),
                  ==, 1);
  g_assert_nonnull(strstr(err, "nothing-here.tsv"));
  g_assert_cmpuint(host_test_count_files(out_dir), ==, 0);
  host_test_rmtree(dir);
}

/* A float32 NPY file of n x d deterministic values. */
static char *write_npy(const char *dir, size_t n, size_t d)
{
  return knnwb_test_write_npy(dir, n, d, 7);
}

/* Starts knnwb with argv, sends signal_number after delay_ms, returns the exit status. */
/* Signals argv delay_ms after its handlers are installed; returns the exit status. What is timed
 * is the promised phase: from the signal to knnwb's "interrupted" line (the search stopped at the
 * next tile, the temporaries removed), not the start-up before it nor the freeing after it (which
 * only has to end within 10 s), so a loaded machine does not fail a run that kept the promise. */
static int run_and_signal(char **argv, int signal_number, guint delay_ms)
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
  g_usleep(delay_ms * 1000);
  gint64 signalled = g_get_monotonic_time();
  kill(pid, signal_number);
  g_autoptr(GString) err = g_string_new(NULL);
  gint64 stopped = knnwb_test_read_until_end(err_fd, err, "interrupted");
  close(err_fd);
  int status = 0;
  g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
  gint64 exited = g_get_monotonic_time();
  g_spawn_close_pid(pid);
  g_test_message("stopped %.3f s, exited %.3f s after the signal: %s",
                 (double)(stopped - signalled) / 1e6, (double)(exited - signalled) / 1e6, err->str);
  /* Stopping takes a tile, not the rest of the run (tens of seconds on one thread). */
  g_assert_cmpint(stopped, >, 0);
  g_assert_cmpint(stopped - signalled, <, knnwb_test_usec(3.0));
  g_assert_cmpint(exited - signalled, <, knnwb_test_usec(10.0));
  g_assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

/* SIGINT/SIGTERM during a long kNN: exit 130/143 soon after, no output file, no temporary. */
static void test_knn_interrupted(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = write_npy(dir, 30000, 64);
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  g_autofree char *output = g_build_filename(out_dir, "big.knn", NULL);
  /* the CPU backend on one thread: on a GPU the whole search ends before the signal */
  char *argv[] = {
      KNNWB_HOST_PROGRAM, "knn", input, "-k", "5",    "--threads", "1", "--backend", "cpu",
      "--memory",         "2M",  "-q",  "-o", output, NULL};
  g_assert_cmpint(run_and_signal(argv, SIGINT, 400), ==, 130);
  g_assert_cmpuint(host_test_count_files(out_dir), ==, 0);
  g_assert_cmpint(run_and_signal(argv, SIGTERM, 400), ==, 143);
  g_assert_cmpuint(host_test_count_files(out_dir), ==, 0);

  /* The same through a pipeline: its earlier outputs are not committed either. */
  g_autoptr(GString) xml = g_string_new(NULL);
  g_string_append_printf(
      xml,
      "<pipeline>\n"
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"%s\"/></step>\n"
      "  <step id=\"w0\" type=\"write-graph\"><input name=\"graph\" step=\"small\"/>\n"
      "    <param name=\"path\" value=\"small.knn\"/></step>\n"
      "  <step id=\"small\" type=\"load-knn\"><param name=\"path\" value=\"%s\"/></step>\n"
      "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>\n"
      "    <param name=\"k\" value=\"5\"/><param name=\"threads\" value=\"1\"/>\n"
      "    <param name=\"memory\" value=\"2M\"/><param name=\"backend\" value=\"cpu\"/></step>\n"
      "  <step id=\"w\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/>\n"
      "    <param name=\"path\" value=\"big.knn\"/></step>\n"
      "</pipeline>\n",
      input, KNNWB_SHARED_DATA_DIR "/cibm-sample.seed.knn");
  g_autofree char *pipeline = host_test_write(dir, "interrupt.xml", xml->str);
  char *run_argv[] = {KNNWB_HOST_PROGRAM, "run", "-q", "--output-dir", out_dir, pipeline, NULL};
  g_assert_cmpint(run_and_signal(run_argv, SIGINT, 400), ==, 130);
  g_assert_cmpuint(host_test_count_files(out_dir), ==, 0);
  host_test_rmtree(dir);
}

static void test_parse_bytes(void)
{
  struct {
    const char *text;
    gboolean ok;
    guint64 bytes;
  } cases[] = {
      {"0", TRUE, 0},
      {"1000", TRUE, 1000},
      {"4G", TRUE, 4ull << 30},
      {"512M", TRUE, 512ull << 20},
      {"512m", TRUE, 512ull << 20},
      {"1.5GiB", TRUE, 3ull << 29},
      {"64KB", TRUE, 64ull << 10},
      {"2T", TRUE, 2ull << 40},
      {"100B", TRUE, 100},
      {"", FALSE, 0},
      {"G", FALSE, 0},
      {"-1", FALSE, 0},
      {"4X", FALSE, 0},
      {"4GG", FALSE, 0},
      {"nan", FALSE, 0},
      {"0x10", FALSE, 0},
      {"99999999999T", FALSE, 0},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    guint64 bytes = 12345;
    g_autoptr(GError) error = NULL;
    gboolean ok = knnwb_host_parse_bytes(cases[i].text, &bytes, &error);
    g_test_message("'%s'", cases[i].text);
    g_assert_cmpint(ok, ==, cases[i].ok);
    if (ok)
      g_assert_cmpuint(bytes, ==, cases[i].bytes);
    else
      g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  }
}

/* One reading of a GPU list for `--devices` and the kNN steps' `devices` (<knnwb/device_list.h>):
 * good lists, and every kind of bad entry, with the name of the option in the message. */
static void test_device_list(void)
{
  struct {
    const char *text;
    gboolean ok;
    const char *devices; /* the numbers read, comma-separated */
  } cases[] = {
      {NULL, TRUE, ""},         {"", TRUE, ""},
      {"0", TRUE, "0"},         {"0,1", TRUE, "0,1"},
      {" 2 , 3 ", TRUE, "2,3"}, {"1,1", TRUE, "1,1"},
      {"1024", TRUE, "1024"},   {"1025", FALSE, NULL},
      {"-1", FALSE, NULL},      {"0,", FALSE, NULL},
      {",0", FALSE, NULL},      {" ", FALSE, NULL},
      {"0x1", FALSE, NULL},     {"1.5", FALSE, NULL},
      {"gpu0", FALSE, NULL},    {"99999999999999999999", FALSE, NULL},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GArray) devices = g_array_new(FALSE, FALSE, sizeof(int));
    g_autoptr(GError) error = NULL;
    g_test_message("'%s'", cases[i].text ? cases[i].text : "(null)");
    gboolean ok = knnwb_device_list_parse(cases[i].text, "--devices", devices, &error);
    g_assert_cmpint(ok, ==, cases[i].ok);
    if (!ok) {
      g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
      g_assert_true(g_str_has_prefix(error->message, "--devices: '"));
      continue;
    }
    g_autoptr(GString) read = g_string_new(NULL);
    for (guint d = 0; d < devices->len; d++)
      g_string_append_printf(read, "%s%d", d ? "," : "", g_array_index(devices, int, d));
    g_assert_cmpstr(read->str, ==, cases[i].devices);
  }
  /* the first number listed more than once (each listing is a worker of its own) */
  struct {
    const char *text;
    int repeated;
  } repeats[] = {{"", -1}, {"0", -1}, {"0,1,2", -1}, {"0,0", 0}, {"2,1,3,1,2", 1}, {"5,4,5", 5}};
  for (guint i = 0; i < G_N_ELEMENTS(repeats); i++) {
    g_autoptr(GArray) devices = g_array_new(FALSE, FALSE, sizeof(int));
    g_assert_true(knnwb_device_list_parse(repeats[i].text, "--devices", devices, NULL));
    g_assert_cmpint(knnwb_device_list_repeated(devices), ==, repeats[i].repeated);
  }

  /* The kNN step reads its parameter the same way, naming the parameter. */
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *pipeline = host_test_write(
      dir, "devices.xml",
      "<pipeline>\n"
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"" CIBM_SAMPLE
      "\"/></step>\n"
      "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>\n"
      "    <param name=\"k\" value=\"3\"/><param name=\"devices\" value=\"0,x\"/></step>\n"
      "  <step id=\"w\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/>\n"
      "    <param name=\"path\" value=\"g.knn\"/></step>\n"
      "</pipeline>\n");
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  g_autofree char *err = NULL;
  g_assert_cmpint(
      host_test_run(NULL, NULL, &err, "run", "-q", "--output-dir", out_dir, pipeline, NULL), ==, 1);
  g_test_message("%s", err);
  /* Found by the checks before the first step (the step's check), not when the step runs. */
  g_assert_nonnull(strstr(err, "step 'g': devices: 'x' is not a GPU number"));
  g_assert_null(strstr(err, "[1/"));
  g_assert_cmpuint(host_test_count_files(out_dir), ==, 0);
  host_test_rmtree(dir);
}

/* neighbourhood --phenotype on rows as read: the phenotype row appended to a matrix with a row
 * left out for missing values (--drop-missing) and, for spearman, the ranks its reader kept; the
 * graph is the one of the same matrix with the phenotype row in the file (before, the row left
 * out lost its mark and was refused as constant, and the appended row had no ranks). */
static void test_neighbourhood_phenotype_rows(void)
{
  g_autofree char *dir = host_test_tmpdir();
  GString *with = g_string_new("\tc0\tc1\tc2\tc3\tc4\tc5\tc6\n");
  GString *without = g_string_new(with->str);
  GString *missing = g_string_new(with->str);
  for (int i = 0; i < 40; i++) {
    g_string_append_printf(without, "r%d", i);
    g_string_append_printf(missing, "r%d", i);
    for (int j = 0; j < 7; j++) {
      /* values that differ beyond float32 precision tie as floats, not as read */
      const double v = (double)((i * 37 + j * 11) % 17) + (j == 3 ? 1e-9 * i : 0.0);
      g_string_append_printf(without, "\t%.12g", v);
      g_string_append_printf(missing, "\t%.12g", v);
    }
    g_string_append_c(without, '\n');
    g_string_append_c(missing, '\n');
    if (i == 6)
      g_string_append(missing, "gone\t1\tNA\t2\t3\t4\t5\t6\n");
  }
  g_string_append(with, without->str + strlen(with->str));
  g_string_append(with, "P\t0\t3\t1\t4\t1\t5\t9\n");
  g_autofree char *a = host_test_write(dir, "without.tsv", without->str);
  g_autofree char *b = host_test_write(dir, "with.tsv", with->str);
  g_autofree char *c = host_test_write(dir, "missing.tsv", missing->str);
  g_autofree char *table =
      host_test_write(dir, "p.tsv", "sample\tP\nc0\t0\nc1\t3\nc2\t1\nc3\t4\nc4\t1\nc5\t5\nc6\t9\n");
  static const char *const metrics[] = {"spearman", "pearson"};
  for (guint m = 0; m < G_N_ELEMENTS(metrics); m++) {
    g_autofree char *err = NULL, *appended = NULL, *in_file = NULL, *dropped = NULL;
    g_assert_cmpint(host_test_run(dir, NULL, NULL, "neighbourhood", "without.tsv", "--phenotype",
                                  "p.tsv:P", "--focus", "P", "-k", "5", "-b", "cpu", "-m",
                                  metrics[m], "-q", "-o", "appended.gml", NULL),
                    ==, 0);
    g_assert_cmpint(host_test_run(dir, NULL, NULL, "neighbourhood", "with.tsv", "--focus", "P",
                                  "-k", "5", "-b", "cpu", "-m", metrics[m], "-q", "-o",
                                  "in-file.gml", NULL),
                    ==, 0);
    g_assert_cmpint(host_test_run(dir, NULL, &err, "neighbourhood", "missing.tsv", "--phenotype",
                                  "p.tsv:P", "--focus", "P", "-k", "5", "-b", "cpu", "-m",
                                  metrics[m], "--drop-missing", "-q", "-o", "dropped.gml", NULL),
                    ==, 0);
    g_autofree char *pa = g_build_filename(dir, "appended.gml", NULL);
    g_autofree char *pb = g_build_filename(dir, "in-file.gml", NULL);
    g_autofree char *pc = g_build_filename(dir, "dropped.gml", NULL);
    g_assert_true(g_file_get_contents(pa, &appended, NULL, NULL));
    g_assert_true(g_file_get_contents(pb, &in_file, NULL, NULL));
    g_assert_true(g_file_get_contents(pc, &dropped, NULL, NULL));
    g_assert_cmpstr(appended, ==, in_file);
    g_assert_nonnull(strstr(err, "row 7 (gone)"));
    g_assert_null(strstr(dropped, "\"gone\""));
  }
  g_string_free(with, TRUE);
  g_string_free(without, TRUE);
  g_string_free(missing, TRUE);
  host_test_rmtree(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  knnwb_host_igraph_init();
  g_test_add_func("/host/cli/help-version", test_help_and_version);
  g_test_add_func("/host/cli/usage-lines", test_usage_lines);
  g_test_add_func("/host/cli/knn-sample", test_knn_sample);
  g_test_add_func("/host/cli/knn-formats-quiet", test_knn_formats_and_quiet);
  g_test_add_func("/host/cli/knn-bad-arguments", test_knn_bad_arguments);
  g_test_add_func("/host/cli/knn-bad-files", test_knn_bad_files);
  g_test_add_func("/host/cli/parse-bytes", test_parse_bytes);
  g_test_add_func("/host/cli/device-list", test_device_list);
  g_test_add_func("/host/cli/devices-narrowed", test_devices_narrowed);
  g_test_add_func("/host/cli/knn-interrupted", test_knn_interrupted);
  g_test_add_func("/host/cli/neighbourhood-phenotype-rows", test_neighbourhood_phenotype_rows);
  return g_test_run();
}
