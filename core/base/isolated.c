/* A computation in a forked child that the parent kills when asked (knnwb/isolated.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <knnwb/error.h>
#include <knnwb/isolated.h>

/* The shared mapping: the child's progress and result code, then the result. */
typedef struct {
  volatile uint64_t progress;
  volatile int32_t finished; /* 1 once code and the result are final */
  int32_t code;
  uint64_t padding; /* the result starts 8-byte aligned after 24 bytes */
} KnnwbIsolatedHeader;

static G_NORETURN void knnwb_isolated_child(KnnwbIsolatedWork work, void *data, pid_t parent,
                                            KnnwbIsolatedHeader *header)
{
#ifdef __linux__
  /* A parent killed outright (SIGKILL) takes its child with it. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  if (getppid() != parent)
    _exit(1);
  /* A terminal's Ctrl-C reaches the whole process group: the parent handles it (and kills us). */
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_DFL);
  int code = work(data, header + 1, &header->progress);
  header->code = code;
  __atomic_store_n(&header->finished, 1, __ATOMIC_RELEASE);
  _exit(0);
}

gboolean knnwb_isolated_run(const char *what, KnnwbIsolatedWork work, void *data,
                            size_t result_bytes, KnnwbIsolatedPoll poll, void *poll_data,
                            void **result, int *code, gboolean *started, GError **error)
{
  *result = NULL;
  *code = 0;
  *started = FALSE;
  size_t bytes = sizeof(KnnwbIsolatedHeader) + result_bytes;
  KnnwbIsolatedHeader *header =
      mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (header == MAP_FAILED)
    return FALSE;
  /* Output buffered now would otherwise be written by both processes. */
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    munmap(header, bytes);
    return FALSE;
  }
  if (pid == 0)
    knnwb_isolated_child(work, data, parent, header);
  *started = TRUE;
  int status = 0;
  for (;;) {
    pid_t ended = waitpid(pid, &status, WNOHANG);
    if (ended == pid)
      break;
    if (ended < 0 && errno != EINTR) {
      status = -1; /* reaped elsewhere (SIGCHLD ignored): the finished flag tells */
      break;
    }
    if (poll != NULL && poll(header->progress, poll_data)) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
      munmap(header, bytes);
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s interrupted", what);
      return FALSE;
    }
    g_usleep(10 * 1000);
  }
  if (__atomic_load_n(&header->finished, __ATOMIC_ACQUIRE) != 1) {
    munmap(header, bytes);
    if (status != -1 && WIFSIGNALED(status))
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                  "%s: its process ended by signal %d (%s); out of memory?", what, WTERMSIG(status),
                  g_strsignal(WTERMSIG(status)));
    else
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "%s: its process ended without a result",
                  what);
    return FALSE;
  }
  *code = header->code;
  *result = header + 1;
  return TRUE;
}

void knnwb_isolated_release(void *result, size_t result_bytes)
{
  if (result != NULL)
    munmap((KnnwbIsolatedHeader *)result - 1, sizeof(KnnwbIsolatedHeader) + result_bytes);
}
