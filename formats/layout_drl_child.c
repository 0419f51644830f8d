/* DrL in a child process that the caller can kill at any moment.
 *
 * Why a process: igraph 0.10's DrL (src/layout/drl/drl_graph.cpp, drl_layout.cpp) polls the
 * interruption handler once per iteration only, and igraph_layout_drl ignores what that poll
 * returns. Around the iterations it does long work that cannot be interrupted at all: the
 * constructor fills std::maps with every edge, and the density grid is 1000 x 1000 std::deque
 * bins (about 600 MB) built and destroyed on every call: about 1 s before the first poll and
 * 0.1 s after the last one for a 2,000-vertex graph on a loaded 2-core machine, more for larger
 * graphs and under sanitizers. A thread cannot help: Debian's igraph keeps its error, FINALLY
 * and RNG state in process globals (IGRAPH_THREAD_SAFE is 0), so DrL cannot run beside the rest
 * of the process nor be abandoned half-way. A forked child has its own copy of that state; it
 * writes the coordinates into shared memory, and the parent polls its cancel flag every 10 ms
 * and kills the child (SIGKILL) when it rises: a cancellation takes effect in milliseconds
 * whatever DrL is doing. The child never returns into the caller's code: it ends with _exit(),
 * so no atexit handler, stdio buffer or sanitizer leak check of the parent's runs twice. */
#include "formats_internal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* What the child shares with the parent: its progress, its result code and the coordinates. */
typedef struct {
  volatile uint64_t calls;   /* interruption polls so far (DrL iterations) */
  volatile int32_t finished; /* 1 once code and coordinates are final */
  int32_t code;              /* igraph_layout_drl's result */
  double coordinates[];      /* n x 2, row by row */
} KnnwbDrlShared;

static KnnwbDrlShared *knnwb_drl_child_shared;

/* In the child: count iterations for the parent's progress; the parent decides about stopping. */
static igraph_error_t knnwb_drl_child_interruption(void *data)
{
  (void)data;
  knnwb_drl_child_shared->calls++;
  return IGRAPH_SUCCESS;
}

static G_NORETURN void knnwb_drl_child_run(const igraph_t *graph, const igraph_vector_t *weights,
                                           const igraph_layout_drl_options_t *options, pid_t parent,
                                           KnnwbDrlShared *shared)
{
#ifdef __linux__
  /* A parent killed outright (SIGKILL) takes its layout with it. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  if (getppid() != parent)
    _exit(1);
  /* A terminal's Ctrl-C reaches the whole process group: the parent handles it (and kills us). */
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_DFL);
  knnwb_drl_child_shared = shared;
  igraph_set_interruption_handler(knnwb_drl_child_interruption);
  igraph_matrix_t result;
  igraph_error_t code = igraph_matrix_init(&result, 0, 0);
  if (code == IGRAPH_SUCCESS) {
    code = igraph_layout_drl(graph, &result, /*use_seed=*/false, options, weights);
    igraph_integer_t n = igraph_vcount(graph);
    if (code == IGRAPH_SUCCESS &&
        (igraph_matrix_nrow(&result) != n || igraph_matrix_ncol(&result) != 2))
      code = IGRAPH_FAILURE;
    for (igraph_integer_t v = 0; code == IGRAPH_SUCCESS && v < n; v++) {
      shared->coordinates[2 * v] = MATRIX(result, v, 0);
      shared->coordinates[2 * v + 1] = MATRIX(result, v, 1);
    }
  }
  shared->code = (int32_t)code;
  __atomic_store_n(&shared->finished, 1, __ATOMIC_RELEASE);
  _exit(0);
}

/* Waits for pid, retrying on EINTR (a signal handler of the parent's may run meanwhile). */
static void knnwb_drl_child_reap(pid_t pid, int *status)
{
  while (waitpid(pid, status, 0) < 0 && errno == EINTR)
    ;
}

igraph_error_t knnwb_formats_layout_drl_isolated(const igraph_t *graph,
                                                 const igraph_vector_t *weights,
                                                 const igraph_layout_drl_options_t *options,
                                                 KnnwbDrlPoll poll, void *poll_data,
                                                 igraph_matrix_t *coordinates, gboolean *isolated)
{
  *isolated = FALSE;
  igraph_integer_t n = igraph_vcount(graph);
  size_t bytes = sizeof(KnnwbDrlShared) + (size_t)n * 2 * sizeof(double);
  KnnwbDrlShared *shared =
      mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED)
    return IGRAPH_SUCCESS; /* no room for a child's result: the caller runs DrL here */
  memset(shared, 0, sizeof *shared);
  /* Output that is buffered now would otherwise be flushed by both processes. */
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    munmap(shared, bytes);
    return IGRAPH_SUCCESS; /* no process to spare: the caller runs DrL here */
  }
  if (pid == 0)
    knnwb_drl_child_run(graph, weights, options, parent, shared);
  *isolated = TRUE;
  int status = 0;
  for (;;) {
    pid_t ended = waitpid(pid, &status, WNOHANG);
    if (ended == pid)
      break;
    if (ended < 0 && errno != EINTR) {
      /* Somebody else reaped it (a SIGCHLD handler set to SIG_IGN reaps automatically). */
      status = -1;
      break;
    }
    if (poll(shared->calls, poll_data)) {
      kill(pid, SIGKILL);
      knnwb_drl_child_reap(pid, &status);
      munmap(shared, bytes);
      return IGRAPH_INTERRUPTED;
    }
    g_usleep(10 * 1000);
  }
  if (__atomic_load_n(&shared->finished, __ATOMIC_ACQUIRE) != 1) {
    munmap(shared, bytes);
    /* Killed from outside (the out-of-memory killer, a user) or crashed: say so. */
    if (status != -1 && WIFSIGNALED(status))
      IGRAPH_ERRORF("the DrL layout process ended by signal %d (%s)", IGRAPH_FAILURE,
                    WTERMSIG(status), g_strsignal(WTERMSIG(status)));
    IGRAPH_ERROR("the DrL layout process ended without a result", IGRAPH_FAILURE);
  }
  igraph_error_t code = (igraph_error_t)shared->code;
  if (code == IGRAPH_SUCCESS)
    code = igraph_matrix_resize(coordinates, n, 2);
  for (igraph_integer_t v = 0; code == IGRAPH_SUCCESS && v < n; v++) {
    MATRIX(*coordinates, v, 0) = shared->coordinates[2 * v];
    MATRIX(*coordinates, v, 1) = shared->coordinates[2 * v + 1];
  }
  munmap(shared, bytes);
  return code;
}
