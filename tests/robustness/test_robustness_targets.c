/* Output targets (ROBUSTNESS.md, Output targets): FIFOs and devices refused before any work, one
 * file under several spellings recognised, an output that is an input refused, validation and dry
 * runs without side effects, a replaced file's mode kept, and a full disk reported as such, naming
 * the target. */
#include "knnwb_test_npy.h"
#include <stdio.h>
#include <sys/stat.h>
#include <igraph.h>
#include <knnwb/knnwb.h>
#include "host_test_util.h"

static char *read_file(const char *path)
{
  char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  return text;
}

/* A pipeline reading input and writing each of outputs (write-graph) from one kNN graph. */
static char *write_pipeline(const char *dir, const char *input, const char *const *outputs)
{
  g_autoptr(GString) xml = g_string_new("<pipeline>\n");
  g_string_append_printf(
      xml,
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"%s\"/></step>\n"
      "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>\n"
      "    <param name=\"k\" value=\"3\"/></step>\n",
      input);
  for (guint i = 0; outputs[i]; i++)
    g_string_append_printf(xml,
                           "  <step id=\"w%u\" type=\"write-graph\"><input name=\"graph\" "
                           "step=\"g\"/>\n    <param name=\"path\" value=\"%s\"/></step>\n",
                           i, outputs[i]);
  g_string_append(xml, "</pipeline>\n");
  return host_test_write(dir, "targets.xml", xml->str);
}

static gint64 modification_ns(const char *path)
{
  GStatBuf st;
  g_assert_cmpint(g_stat(path, &st), ==, 0);
  return (gint64)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* A FIFO or a device at an output path is refused before anything is read (the message comes
 * before the input's own error) and stays what it was. */
static void test_non_regular_targets(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *fifo = g_build_filename(dir, "graph.knn", NULL);
  g_assert_cmpint(mkfifo(fifo, 0644), ==, 0);
  g_autofree char *input = knnwb_test_write_npy(dir, 50, 4, 1);
  g_autofree char *err = NULL;
  g_autofree char *missing = g_build_filename(dir, "no-such-input.npy", NULL);
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "knn", missing, "-k", "3", "-o", fifo, NULL), ==,
                  1);
  g_test_message("%s", err);
  g_assert_nonnull(strstr(err, "FIFO"));
  g_clear_pointer(&err, g_free);

  const char *const targets[] = {fifo, "/dev/null", NULL};
  for (guint t = 0; targets[t]; t++) {
    const char *outputs[] = {targets[t], NULL};
    g_autofree char *pipeline = write_pipeline(dir, input, outputs);
    const char *commands[] = {"validate", "run"};
    for (guint c = 0; c < G_N_ELEMENTS(commands); c++) {
      g_assert_cmpint(host_test_run(NULL, NULL, &err, commands[c], pipeline, NULL), ==, 1);
      g_test_message("%s", err);
      g_assert_nonnull(strstr(err, t == 0 ? "a FIFO" : "a character device"));
      g_assert_null(strstr(err, "[1/"));
      g_clear_pointer(&err, g_free);
    }
  }
  GStatBuf st;
  g_assert_cmpint(g_stat(fifo, &st), ==, 0);
  g_assert_true(S_ISFIFO(st.st_mode));
  g_assert_cmpint(g_stat("/dev/null", &st), ==, 0);
  g_assert_true(S_ISCHR(st.st_mode));
  host_test_rmtree(dir);
}

/* out.knn, ./out.knn, sub/../out.knn and a hard link are one file: two steps cannot write it. */
static void test_aliases(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = knnwb_test_write_npy(dir, 50, 4, 1);
  g_autofree char *sub = g_build_filename(dir, "sub", NULL);
  g_mkdir(sub, 0755);
  g_autofree char *out = host_test_write(dir, "out.knn", "old\n");
  g_autofree char *hard = g_build_filename(dir, "hard.knn", NULL);
  g_assert_cmpint(link(out, hard), ==, 0);
  const char *const spellings[] = {"./out.knn", "sub/../out.knn", "hard.knn", NULL};
  for (guint i = 0; spellings[i]; i++) {
    const char *outputs[] = {"out.knn", spellings[i], NULL};
    g_autofree char *pipeline = write_pipeline(dir, input, outputs);
    g_autofree char *err = NULL;
    g_assert_cmpint(
        host_test_run(NULL, NULL, &err, "validate", "--output-dir", dir, pipeline, NULL), ==, 1);
    g_test_message("%s", err);
    g_assert_nonnull(strstr(err, "is also written by step 'w0'"));
  }
  host_test_rmtree(dir);
}

/* An output that is an input of the same run is refused; the input is untouched. */
static void test_output_is_input(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = knnwb_test_write_npy(dir, 50, 4, 1);
  g_autofree char *before = read_file(input);
  g_autofree char *err = NULL;
  g_autofree char *alias = g_build_filename(dir, ".", "big.npy", NULL);
  g_assert_cmpint(
      host_test_run(NULL, NULL, &err, "knn", input, "-k", "3", "-F", "knn", "-o", alias, NULL), ==,
      1);
  g_test_message("%s", err);
  g_assert_nonnull(strstr(err, "is the input file"));
  g_clear_pointer(&err, g_free);

  const char *outputs[] = {"big.npy", NULL};
  g_autofree char *pipeline = write_pipeline(dir, input, outputs);
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "run", "--output-dir", dir, pipeline, NULL), ==,
                  1);
  g_test_message("%s", err);
  g_assert_nonnull(strstr(err, "must not replace an input"));
  g_autofree char *after = read_file(input);
  g_assert_true(memcmp(before, after, 50 * 4 * 4) == 0);
  host_test_rmtree(dir);
}

/* validate and --dry-run change nothing (not even a probe file created and removed, which would
 * move the directory's modification time); `knnwb run` refuses /proc before the first step. */
static void test_validate_has_no_side_effects(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = knnwb_test_write_npy(dir, 50, 4, 1);
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_mkdir(out_dir, 0755);
  const char *outputs[] = {"a.knn", "b.gml", NULL};
  g_autofree char *pipeline = write_pipeline(dir, input, outputs);
  gint64 before = modification_ns(out_dir);
  g_usleep(20 * 1000); /* time stamps are coarse: let a change show */
  g_assert_cmpint(
      host_test_run(NULL, NULL, NULL, "validate", "--output-dir", out_dir, pipeline, NULL), ==, 0);
  g_assert_cmpint(
      host_test_run(NULL, NULL, NULL, "run", "--dry-run", "--output-dir", out_dir, pipeline, NULL),
      ==, 0);
  g_assert_cmpint(modification_ns(out_dir), ==, before);
  g_assert_cmpuint(host_test_count_files(out_dir), ==, 0);

  const char *proc_outputs[] = {"/proc/knnwb-test.knn", NULL};
  g_autofree char *proc_pipeline = write_pipeline(dir, input, proc_outputs);
  g_autofree char *err = NULL;
  g_assert_cmpint(host_test_run(NULL, NULL, &err, "run", proc_pipeline, NULL), ==, 1);
  g_test_message("%s", err);
  g_assert_nonnull(strstr(err, "cannot be written"));
  g_assert_null(strstr(err, "[1/"));
  host_test_rmtree(dir);
}

/* A replaced output keeps its permissions, through `knnwb knn` and a pipeline. */
static void test_mode_kept(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *input = knnwb_test_write_npy(dir, 50, 4, 1);
  g_autofree char *knn_out = host_test_write(dir, "knn.knn", "old\n");
  g_autofree char *run_out = host_test_write(dir, "run.gml", "old\n");
  g_assert_cmpint(chmod(knn_out, 0640), ==, 0);
  g_assert_cmpint(chmod(run_out, 0604), ==, 0);
  g_assert_cmpint(
      host_test_run(NULL, NULL, NULL, "knn", input, "-k", "3", "-q", "-o", knn_out, NULL), ==, 0);
  const char *outputs[] = {"run.gml", NULL};
  g_autofree char *pipeline = write_pipeline(dir, input, outputs);
  g_assert_cmpint(host_test_run(NULL, NULL, NULL, "run", "-q", "--output-dir", dir, pipeline, NULL),
                  ==, 0);
  GStatBuf st;
  g_assert_cmpint(g_stat(knn_out, &st), ==, 0);
  g_assert_cmpint(st.st_mode & 0777, ==, 0640);
  g_assert_cmpuint(st.st_size, >, 4);
  g_assert_cmpint(g_stat(run_out, &st), ==, 0);
  g_assert_cmpint(st.st_mode & 0777, ==, 0604);
  g_assert_cmpuint(st.st_size, >, 4);
  host_test_rmtree(dir);
}

/* A full disk: a 64 KiB tmpfs in a private mount namespace (unshare -rm: no privilege needed
 * where user namespaces are allowed; skipped elsewhere). The message says "No space left on
 * device", names the target (not a temporary), the old file is intact and nothing is left. */
static void test_disk_full(void)
{
  g_autofree char *unshare = g_find_program_in_path("unshare");
  if (unshare == NULL) {
    g_test_skip("no unshare");
    return;
  }
  g_autofree char *dir = host_test_tmpdir();
  /* More than the writer's 1 MiB buffer, so the failure comes from a write in the middle. */
  g_autofree char *input = knnwb_test_write_npy(dir, 8000, 4, 1);
  g_autofree char *mount_point = g_build_filename(dir, "small", NULL);
  g_mkdir(mount_point, 0755);
  g_autofree char *plugin_dir = g_path_get_dirname(KNNWB_KNN_PLUGIN_FILE);
  g_autofree char *script =
      g_strdup_printf("mount -t tmpfs -o size=64k tmpfs '%s' || exit 77\n"
                      "echo old > '%s/out.knn'\n"
                      "KNNWB_PLUGIN_PATH='%s' '%s' knn '%s' -k 10 -q -o '%s/out.knn'\n"
                      "echo \"status $?\"\n"
                      "cat '%s/out.knn'\n"
                      "ls -A '%s'\n",
                      mount_point, mount_point, plugin_dir, KNNWB_HOST_PROGRAM, input, mount_point,
                      mount_point, mount_point);
  char *argv[] = {"unshare", "-rm", "sh", "-c", script, NULL};
  g_autofree char *out = NULL, *err = NULL;
  int status = 0;
  g_autoptr(GError) error = NULL;
  g_assert_true(
      g_spawn_sync(NULL, argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err, &status, &error));
  g_test_message("stdout:\n%s\nstderr:\n%s", out, err);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    g_test_skip("cannot mount a tmpfs in a private namespace here");
    host_test_rmtree(dir);
    return;
  }
  g_assert_nonnull(strstr(out, "status 1\nold\nout.knn\n"));
  g_autofree char *expected =
      g_strdup_printf("%s/out.knn: write failed: No space left on device", mount_point);
  g_assert_nonnull(strstr(err, expected));
  g_assert_null(strstr(err, ".knnwb-tmp"));
  host_test_rmtree(dir);
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/robustness/targets/non-regular", test_non_regular_targets);
  g_test_add_func("/robustness/targets/aliases", test_aliases);
  g_test_add_func("/robustness/targets/output-is-input", test_output_is_input);
  g_test_add_func("/robustness/targets/validate-no-side-effects",
                  test_validate_has_no_side_effects);
  g_test_add_func("/robustness/targets/mode-kept", test_mode_kept);
  g_test_add_func("/robustness/targets/disk-full", test_disk_full);
  return g_test_run();
}
