/* Inputs that change under us (ROBUSTNESS.md): an NPY input truncated while `knnwb knn` runs (as
 * `np.save` to the same name does) must not kill the process with SIGBUS: either the data was
 * already read (the run goes on; here it is then stopped with SIGTERM) or the read fails with a
 * message naming the file. */
#include "knnwb_test_npy.h"
#include "knnwb_test_process.h"
#include <signal.h>
#include <stdio.h>
#include <igraph.h>
#include <knnwb/knnwb.h>
#include "host_test_util.h"

static void test_npy_truncated_during_run(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *out = g_build_filename(dir, "out.knn", NULL);
  g_auto(GStrv) envp = g_get_environ();
  g_autofree char *plugin_dir = g_path_get_dirname(KNNWB_KNN_PLUGIN_FILE);
  envp = g_environ_setenv(envp, "KNNWB_PLUGIN_PATH", plugin_dir, TRUE);
  for (int run = 0; run < 6; run++) {
    g_autofree char *input = knnwb_test_write_npy(dir, 40000, 64, (guint32)run + 1);
    /* the CPU backend on one thread, so that the run outlasts the truncation (a GPU ends it first)
     */
    char *argv[] = {KNNWB_HOST_PROGRAM, "knn", input,      "-k", "5",  "--threads", "1",
                    "--backend",        "cpu", "--memory", "2M", "-o", out,         NULL};
    GPid pid;
    int err_fd = -1;
    g_autoptr(GError) error = NULL;
    g_assert_true(g_spawn_async_with_pipes(NULL, argv, envp,
                                           G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
                                           NULL, NULL, &pid, NULL, NULL, &err_fd, &error));
    knnwb_test_wait_for_signal_handlers(pid);
    /* Early in the read, or during the checks and the preparation, or in the search. */
    g_usleep((gulong)(run * 40 * 1000));
    g_assert_cmpint(truncate(input, 200), ==, 0);
    g_usleep(300 * 1000);
    kill(pid, SIGTERM);
    int status = 0;
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_spawn_close_pid(pid);
    char buffer[4096];
    ssize_t got = read(err_fd, buffer, sizeof buffer - 1);
    buffer[MAX(got, 0)] = '\0';
    close(err_fd);
    g_test_message("run %d: status 0x%x, stderr: %s", run, status, buffer);
    g_assert_true(WIFEXITED(status));
    /* Truncated before the header check ("needs more bytes") or during the read ("read failed"):
     * a message naming the file either way. */
    if (WEXITSTATUS(status) == 1)
      g_assert_nonnull(strstr(buffer, input));
    else
      g_assert_cmpint(WEXITSTATUS(status), ==, 143);
    g_assert_false(g_file_test(out, G_FILE_TEST_EXISTS));
  }
  host_test_rmtree(dir);
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/robustness/changing/npy-truncated", test_npy_truncated_during_run);
  return g_test_run();
}
