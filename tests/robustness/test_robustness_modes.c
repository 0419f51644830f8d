/* Modes and names of replaced outputs (ROBUSTNESS.md, "Output targets"): permission bits only are
 * kept (never setuid, setgid or sticky), an output that is a symbolic link is replaced and its
 * target left alone, a private output's new contents never sit in a more open temporary, and a
 * legal name of up to 255 bytes works. The program (`knnwb knn -o`, `knnwb run`) and the
 * library's atomic writer alike. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <knnwb/knnwb.h>
#include "host_test_util.h"
#include "knnwb_test_npy.h"

static char *test_dir;
static mode_t test_umask;

static char *read_file(const char *path)
{
  char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  return text;
}

static mode_t mode_of(const char *path)
{
  struct stat st;
  g_assert_cmpint(lstat(path, &st), ==, 0);
  g_assert_true(S_ISREG(st.st_mode));
  return st.st_mode & 07777;
}

/* A pipeline: the kNN graph of input written to each of outputs; then, when slow_input is not
 * NULL, a larger kNN graph of it written to slow_output (document order puts it last). */
static char *write_pipeline(const char *dir, const char *input, const char *const *outputs,
                            const char *slow_input, const char *slow_output)
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
  if (slow_input != NULL)
    g_string_append_printf(
        xml,
        "  <step id=\"load2\" type=\"load-matrix\"><param name=\"path\" value=\"%s\"/></step>\n"
        "  <step id=\"g2\" type=\"knn-graph\"><input name=\"data\" step=\"load2\"/>\n"
        "    <param name=\"k\" value=\"20\"/><param name=\"threads\" value=\"1\"/></step>\n"
        "  <step id=\"w2\" type=\"write-graph\"><input name=\"graph\" step=\"g2\"/>\n"
        "    <param name=\"path\" value=\"%s\"/></step>\n",
        slow_input, slow_output);
  g_string_append(xml, "</pipeline>\n");
  return host_test_write(dir, "modes.xml", xml->str);
}

/* An existing output with setuid, setgid and sticky bits set: replaced with its permission bits
 * only, by `knnwb knn -o`, a pipeline and the library (before: 06755 was copied to the new file,
 * a setuid file made of data). */
static void test_special_bits(void)
{
  g_autofree char *dir = g_build_filename(test_dir, "bits", NULL);
  g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
  g_autofree char *input = knnwb_test_write_npy(dir, 50, 4, 1);
  g_autofree char *knn_out = host_test_write(dir, "knn.knn", "old\n");
  g_autofree char *run_out = host_test_write(dir, "run.gml", "old\n");
  g_autofree char *library_out = host_test_write(dir, "library.txt", "old\n");
  const char *paths[] = {knn_out, run_out, library_out};
  for (guint i = 0; i < G_N_ELEMENTS(paths); i++) {
    g_assert_cmpint(chmod(paths[i], 07754), ==, 0);
    if ((mode_of(paths[i]) & 07000) == 0) {
      g_test_skip("the file system keeps no setuid, setgid or sticky bits");
      return;
    }
  }
  g_assert_cmpint(
      host_test_run(NULL, NULL, NULL, "knn", input, "-k", "3", "-q", "-o", knn_out, NULL), ==, 0);
  const char *outputs[] = {"run.gml", NULL};
  g_autofree char *pipeline = write_pipeline(dir, input, outputs, NULL, NULL);
  g_assert_cmpint(host_test_run(NULL, NULL, NULL, "run", "-q", "--output-dir", dir, pipeline, NULL),
                  ==, 0);
  g_autoptr(GError) error = NULL;
  KnnwbAtomicFile *file = knnwb_atomic_file_open(library_out, &error);
  g_assert_no_error(error);
  fputs("new\n", knnwb_atomic_file_stream(file));
  g_assert_true(knnwb_atomic_file_commit(file, &error));
  for (guint i = 0; i < G_N_ELEMENTS(paths); i++) {
    g_test_message("%s: %04o", paths[i], (unsigned)mode_of(paths[i]));
    g_assert_cmpint(mode_of(paths[i]), ==, 0754);
    g_autofree char *text = read_file(paths[i]);
    g_assert_cmpstr(text, !=, "old\n");
  }
}

/* An output path that is a symbolic link: the link is replaced by the new file, which gets the
 * mode of a new file; the link's target keeps its contents and mode (before: the mode came from
 * the target while the link was replaced). */
static void test_symlink_replaced(void)
{
  g_autofree char *dir = g_build_filename(test_dir, "links", NULL);
  g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
  g_autofree char *input = knnwb_test_write_npy(dir, 50, 4, 2);
  const char *names[] = {"knn.knn", "run.gml", "library.txt"};
  char *links[3], *targets[3];
  for (guint i = 0; i < 3; i++) {
    g_autofree char *target_name = g_strdup_printf("target-%s", names[i]);
    targets[i] = host_test_write(dir, target_name, "target\n");
    g_assert_cmpint(chmod(targets[i], 0600), ==, 0);
    links[i] = g_build_filename(dir, names[i], NULL);
    g_assert_cmpint(symlink(target_name, links[i]), ==, 0);
  }
  g_assert_cmpint(
      host_test_run(NULL, NULL, NULL, "knn", input, "-k", "3", "-q", "-o", links[0], NULL), ==, 0);
  const char *outputs[] = {"run.gml", NULL};
  g_autofree char *pipeline = write_pipeline(dir, input, outputs, NULL, NULL);
  g_assert_cmpint(host_test_run(NULL, NULL, NULL, "run", "-q", "--output-dir", dir, pipeline, NULL),
                  ==, 0);
  g_autoptr(GError) error = NULL;
  KnnwbAtomicFile *file = knnwb_atomic_file_open(links[2], &error);
  g_assert_no_error(error);
  fputs("new\n", knnwb_atomic_file_stream(file));
  g_assert_true(knnwb_atomic_file_commit(file, &error));
  for (guint i = 0; i < 3; i++) {
    g_assert_cmpint(mode_of(links[i]), ==, 0666 & ~test_umask);
    g_autofree char *text = read_file(links[i]);
    g_assert_cmpstr(text, !=, "target\n");
    g_assert_cmpint(mode_of(targets[i]), ==, 0600);
    g_autofree char *kept = read_file(targets[i]);
    g_assert_cmpstr(kept, ==, "target\n");
    g_free(links[i]);
    g_free(targets[i]);
  }
}

/* The largest mode bits for group and others seen on a non-empty temporary in dir. */
static mode_t open_temporaries(const char *dir, guint *seen)
{
  mode_t open_bits = 0;
  g_autoptr(GDir) handle = g_dir_open(dir, 0, NULL);
  const char *name;
  while (handle != NULL && (name = g_dir_read_name(handle)) != NULL) {
    if (!g_str_has_prefix(name, ".knnwb-tmp-"))
      continue;
    g_autofree char *path = g_build_filename(dir, name, NULL);
    struct stat st;
    if (lstat(path, &st) == 0 && st.st_size > 0) {
      open_bits |= st.st_mode & 077;
      (*seen)++;
    }
  }
  return open_bits;
}

/* A 0600 output: the library's temporary is 0600 while it is written, and a pipeline's written
 * outputs (both 0600) wait for the commit (one while a slower step runs) in 0600 temporaries
 * (before: 0666 less the umask until the commit). */
static void test_private_temporaries(void)
{
  g_autofree char *dir = g_build_filename(test_dir, "private", NULL);
  g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
  g_autofree char *secret = host_test_write(dir, "secret.txt", "old\n");
  g_assert_cmpint(chmod(secret, 0600), ==, 0);
  g_autoptr(GError) error = NULL;
  KnnwbAtomicFile *file = knnwb_atomic_file_open(secret, &error);
  g_assert_no_error(error);
  fputs("new contents\n", knnwb_atomic_file_stream(file));
  fflush(knnwb_atomic_file_stream(file));
  guint seen = 0;
  g_assert_cmpint(open_temporaries(dir, &seen), ==, 0);
  g_assert_cmpuint(seen, ==, 1);
  g_assert_true(knnwb_atomic_file_commit(file, &error));
  g_assert_cmpint(mode_of(secret), ==, 0600);

  g_autofree char *small = knnwb_test_write_npy(dir, 60, 4, 3);
  g_autofree char *small_path = g_build_filename(dir, "small.npy", NULL);
  g_assert_cmpint(g_rename(small, small_path), ==, 0);
  g_autofree char *big = knnwb_test_write_npy(dir, 12000, 32, 4);
  g_autofree char *private_out = host_test_write(dir, "private.knn", "old\n");
  g_assert_cmpint(chmod(private_out, 0600), ==, 0);
  const char *outputs[] = {"private.knn", NULL};
  g_autofree char *slow_out = host_test_write(dir, "slow.knn", "old\n");
  g_assert_cmpint(chmod(slow_out, 0600), ==, 0);
  g_autofree char *pipeline = write_pipeline(dir, small_path, outputs, big, slow_out);
  g_auto(GStrv) envp = g_get_environ();
  g_autofree char *plugin_dir = g_path_get_dirname(KNNWB_KNN_PLUGIN_FILE);
  envp = g_environ_setenv(envp, "KNNWB_PLUGIN_PATH", plugin_dir, TRUE);
  char *argv[] = {KNNWB_HOST_PROGRAM, "run", "-q", "--output-dir", dir, pipeline, NULL};
  GPid pid;
  g_assert_true(g_spawn_async(NULL, argv, envp, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, NULL));
  /* Watch the directory until the run ends: the first output is written long before the slow
   * step is done, and its temporary waits there for the commit. */
  mode_t open_bits = 0;
  seen = 0;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    open_bits |= open_temporaries(dir, &seen);
    g_usleep(200);
  }
  g_spawn_close_pid(pid);
  g_test_message("non-empty temporaries seen %u times, group/other bits %03o", seen,
                 (unsigned)open_bits);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 0);
  g_assert_cmpuint(seen, >, 0);
  g_assert_cmpint(open_bits, ==, 0);
  g_assert_cmpint(mode_of(private_out), ==, 0600);
  g_assert_cmpint(mode_of(slow_out), ==, 0600);
}

/* Names of 211 to 255 bytes are legal: `knnwb knn -o`, a pipeline output and the library write
 * them (before: the temporary's name, the target's with a prefix, passed NAME_MAX); a name of 256
 * bytes is refused before any work. */
static void test_long_names(void)
{
  g_autofree char *dir = g_build_filename(test_dir, "names", NULL);
  g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
  g_autofree char *input = knnwb_test_write_npy(dir, 40, 4, 5);
  g_autofree char *stem_knn = g_strnfill(251, 'k');
  g_autofree char *knn_name = g_strdup_printf("%s.knn", stem_knn); /* 255 bytes */
  g_autofree char *stem_gml = g_strnfill(207, 'g');
  g_autofree char *gml_name = g_strdup_printf("%s.gml", stem_gml); /* 211 bytes */
  g_autofree char *library_name = g_strnfill(255, 'l');
  g_autofree char *knn_out = g_build_filename(dir, knn_name, NULL);
  g_autofree char *err = NULL;
  int status = host_test_run(NULL, NULL, &err, "knn", input, "-k", "3", "-q", "-o", knn_out, NULL);
  g_test_message("%s", err);
  g_assert_cmpint(status, ==, 0);
  const char *outputs[] = {gml_name, NULL};
  g_autofree char *pipeline = write_pipeline(dir, input, outputs, NULL, NULL);
  g_clear_pointer(&err, g_free);
  status = host_test_run(NULL, NULL, &err, "run", "-q", "--output-dir", dir, pipeline, NULL);
  g_test_message("%s", err);
  g_assert_cmpint(status, ==, 0);
  g_autofree char *library_out = g_build_filename(dir, library_name, NULL);
  g_autoptr(GError) error = NULL;
  KnnwbAtomicFile *file = knnwb_atomic_file_open(library_out, &error);
  g_assert_no_error(error);
  fputs("new\n", knnwb_atomic_file_stream(file));
  g_assert_true(knnwb_atomic_file_commit(file, &error));
  g_autofree char *gml_out = g_build_filename(dir, gml_name, NULL);
  const char *written[] = {knn_out, gml_out, library_out};
  for (guint i = 0; i < G_N_ELEMENTS(written); i++) {
    g_autofree char *text = read_file(written[i]);
    g_assert_cmpuint(strlen(text), >, 0);
  }
  /* One byte more: refused up front, and nothing is left behind. */
  guint before = host_test_count_files(dir);
  g_autofree char *too_long = g_strdup_printf("%s/k%s", dir, knn_name);
  g_clear_pointer(&err, g_free);
  status = host_test_run(NULL, NULL, &err, "knn", input, "-k", "3", "-q", "-o", too_long, NULL);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, "File name too long"));
  g_assert_cmpuint(host_test_count_files(dir), ==, before);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  test_umask = umask(022);
  umask(test_umask);
  test_dir = host_test_tmpdir();
  g_test_add_func("/robustness/modes/special-bits", test_special_bits);
  g_test_add_func("/robustness/modes/symlink-replaced", test_symlink_replaced);
  g_test_add_func("/robustness/modes/private-temporaries", test_private_temporaries);
  g_test_add_func("/robustness/modes/long-names", test_long_names);
  int status = g_test_run();
  host_test_rmtree(test_dir);
  g_free(test_dir);
  return status;
}
