/* `knnwb`: the command-line workbench; its subcommands are the table knnwb_host_commands. */
#include <fcntl.h>
#include <locale.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <libxml/parser.h>
#include <knnwb/distributed.h>
#include <knnwb/version.h>
#include "commands/commands.h"
#include "commands/options.h"
#include "runtime/runtime.h"

/* shared: under mpirun the command's ranks share its work (through knnwb_host_group()). The
 * others run on rank 0 alone, as one process: run on every rank, they would write the same outputs
 * at once, and a failure on one rank alone (its host does not see the input, say) would let the
 * others replace the output while that rank's reason went unseen (only rank 0 prints). */
static const struct {
  const char *name;
  int (*main)(int argc, char **argv);
  const char *summary;
  gboolean shared;
} knnwb_host_commands[] = {
    {"knn", knnwb_host_command_knn, "build the exact kNN graph of a matrix file", TRUE},
    {"cluster", knnwb_host_command_cluster, "cluster the rows of a matrix file (one command)",
     TRUE},
    {"run", knnwb_host_command_run, "run a pipeline (XML)", TRUE},
    {"validate", knnwb_host_command_validate, "check a pipeline without running it", FALSE},
    {"plugins", knnwb_host_command_plugins, "list plugins, their steps and parameters", FALSE},
    {"metafeatures", knnwb_host_command_metafeatures,
     "add pair rows (a-b, a+b, a*b, a/b) to a matrix", FALSE},
    {"neighbourhood", knnwb_host_command_neighbourhood,
     "the kNN neighbourhood of focus rows (yEd GML, ranked table)", TRUE},
    {"classify", knnwb_host_command_classify, "kNN classification with cross-validation", TRUE},
    {"render", knnwb_host_command_render, "draw a laid-out GML as PNG, SVG or PDF (cairo)", FALSE},
};

/* The job's exit status, the same on every rank: the worst of the ranks' (2 for usage errors,
 * 130/143 when interrupted), so that mpirun reports it whichever rank exits first (a signal to
 * rank 0 alone made it 130 there and 1 on the others, which return for the agreed stop). After a
 * command that rank 0 ran alone the others wait for it here, in an agreement (which sleeps between
 * polls, where a plain reduction would spin a core that rank 0 needs). */
static int knnwb_host_job_status(const KnnwbKnnGroup *group, int status)
{
  if (group->agree(group, status == 0, NULL))
    return 0;
  int64_t worst = status;
  if (!group->reduce(group, &worst, 1, KNNWB_GROUP_MAX, NULL))
    return MAX(status, 1);
  return (int)worst;
}

static void knnwb_host_usage(FILE *out)
{
  fprintf(out, "Usage: knnwb COMMAND [OPTION...]\n\n"
               "Exact k-nearest-neighbour graphs, clustering and pipelines.\n\nCommands:\n");
  for (guint i = 0; i < G_N_ELEMENTS(knnwb_host_commands); i++)
    fprintf(out, "  %-13s %s\n", knnwb_host_commands[i].name, knnwb_host_commands[i].summary);
  fprintf(out, "\n`knnwb COMMAND --help` describes a command's options.\n"
               "Options:\n  -h, --help     this text\n  -V, --version  the version\n");
}

int main(int argc, char **argv)
{
  setlocale(LC_ALL, "");
  /* Numbers are read and written with '.' whatever the user's locale says. */
  setlocale(LC_NUMERIC, "C");
  /* A file size limit (`ulimit -f`, a batch system's quota) is a write error like a full disk:
   * by default SIGXFSZ kills the process without a word and leaves other ranks' temporaries
   * behind; ignored, write() fails with EFBIG and the writer says which file, removes its
   * temporary and keeps the previous output. */
  signal(SIGXFSZ, SIG_IGN);
  knnwb_host_igraph_init();
  knnwb_host_log_init();
  LIBXML_TEST_VERSION;

  if (argc < 2) {
    knnwb_host_usage(stderr);
    return 2;
  }
  const char *command = argv[1];
  /* Under mpirun only rank 0 prints the usage or the version (the launcher's environment says
   * which rank this is: no job is joined for them). */
  if (strcmp(command, "-h") == 0 || strcmp(command, "--help") == 0 ||
      strcmp(command, "help") == 0) {
    if (knnwb_distributed_launch_rank() <= 0)
      knnwb_host_usage(stdout);
    return 0;
  }
  if (strcmp(command, "-V") == 0 || strcmp(command, "--version") == 0) {
    if (knnwb_distributed_launch_rank() > 0)
      return 0;
    printf("knnwb %s (library %s)\n", KNNWB_VERSION_STRING, knnwb_version());
    return 0;
  }
  for (guint i = 0; i < G_N_ELEMENTS(knnwb_host_commands); i++)
    if (strcmp(command, knnwb_host_commands[i].name) == 0) {
      g_autofree char *name = g_strdup_printf("knnwb %s", command);
      g_set_prgname(name);
      /* A command's help is printed as its options are parsed, and the process exits there: under
       * mpirun it must not have joined the job (a rank that exits without leaving it makes the
       * launcher fail the job). Rank 0 prints it, as one process; the others have nothing to say.
       * (Where "-h" was the value of an option after all, rank 0 runs the command alone.) */
      if (knnwb_host_options_ask_help(argc, argv, 2))
        return knnwb_distributed_launch_rank() > 0
                   ? 0
                   : knnwb_host_commands[i].main(argc - 1, argv + 1);
      /* Under mpirun every rank runs the same command line; the ranks share the work. */
      const KnnwbKnnGroup *group = NULL;
      g_autoptr(GError) error = NULL;
      if (!knnwb_distributed_init(&argc, &argv, &group, &error)) {
        g_printerr("knnwb: %s\n", error->message);
        return 1;
      }
      /* a rank interrupted alone stops the others of its host within a tick */
      if (group != NULL)
        knnwb_host_signals_share(knnwb_distributed_stop_word());
      const gboolean root_alone = group != NULL && !knnwb_host_commands[i].shared;
      knnwb_host_set_group(root_alone ? NULL : group);
      if (group != NULL && group->rank != 0 && g_getenv("KNNWB_MPI_VERBOSE") == NULL) {
        /* Every rank runs the same steps and every failure is agreed: rank 0 speaks for all. */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
          dup2(null, STDOUT_FILENO);
          dup2(null, STDERR_FILENO);
          close(null);
        }
      }
      /* the whole command's timeline in debug logs: what comes before and after these two lines is
       * the process's start (loading libraries and plugins) and its teardown */
      g_debug("knnwb: command started");
      int status =
          root_alone && group->rank != 0 ? 0 : knnwb_host_commands[i].main(argc - 1, argv + 1);
      if (group != NULL)
        status = knnwb_host_job_status(group, status);
      xmlCleanupParser();
      knnwb_host_signals_share(NULL); /* the word goes with the job */
      knnwb_distributed_finalize();
      g_debug("knnwb: command finished, the process exits");
      if (group == NULL && knnwb_knn_devices_started()) {
        /* Every output is committed (written, synced, renamed) by now. CUDA's teardown at exit
         * (each context destroyed, its pinned host memory unpinned) took 0.2 s of every GPU
         * command on one H200 and changes nothing the user sees: the system frees it all, or a
         * command gave the GPUs back while it wrote (knnwb_knn_devices_release). */
        knnwb_knn_devices_release_wait();
        g_debug("knnwb: the GPUs given back");
        fflush(stdout);
        fflush(stderr);
        _exit(status);
      }
      return status;
    }
  g_printerr("knnwb: unknown command '%s'\n", command);
  knnwb_host_usage(stderr);
  return 2;
}
