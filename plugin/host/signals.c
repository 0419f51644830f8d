/* SIGINT/SIGTERM stop a run: the handler only sets the cancel flag, which the core polls between
 * tiles, igraph polls through its interruption handler, and the commit of the outputs checks last.
 */
#include <signal.h>
#include <string.h>
#include <igraph.h>
#include "host.h"

static volatile gint knnwb_host_cancel_flag;
static volatile sig_atomic_t knnwb_host_signal_number;
static volatile sig_atomic_t knnwb_host_signals_in_commit;

static void knnwb_host_signals_handler(int signal_number)
{
  if (knnwb_host_signal_number != 0) {
    /* During the renames of the commit, dying would leave some outputs new and some old. */
    if (knnwb_host_signals_in_commit)
      return;
    /* A second signal: the user insists; die the default way. */
    signal(signal_number, SIG_DFL);
    raise(signal_number);
    return;
  }
  knnwb_host_signal_number = signal_number;
  knnwb_host_cancel_flag = 1;
}

/* igraph's long loops (layouts, community detection, ...) call this every few iterations through
 * IGRAPH_ALLOW_INTERRUPTION; a non-zero answer makes them return IGRAPH_INTERRUPTED, which
 * knnwb_error_from_igraph turns into KNNWB_ERROR_CANCELLED. */
static igraph_error_t knnwb_host_signals_igraph_interruption(void *data)
{
  (void)data;
  if (!knnwb_host_cancel_flag)
    return IGRAPH_SUCCESS;
  /* IGRAPH_ALLOW_INTERRUPTION returns at once, without freeing what the function registered on
   * the FINALLY stack; its frame is gone by the time an outer IGRAPH_CHECK frees that stack. Free
   * it now, while every registered object is still alive (as R's and Python's igraph do). */
  IGRAPH_FINALLY_FREE();
  return IGRAPH_INTERRUPTED;
}

const volatile gint *knnwb_host_signals_install(void)
{
  static gboolean installed;
  if (!installed) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = knnwb_host_signals_handler;
    sigemptyset(&action.sa_mask);
    /* SA_RESTART: reads and writes in progress finish; the flag is polled between tiles. */
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    igraph_set_interruption_handler(knnwb_host_signals_igraph_interruption);
    installed = TRUE;
  }
  return &knnwb_host_cancel_flag;
}

int knnwb_host_signals_received(void)
{
  return (int)knnwb_host_signal_number;
}

int knnwb_host_signals_exit_status(void)
{
  return 128 + (int)knnwb_host_signal_number;
}

void knnwb_host_signals_committing(gboolean committing)
{
  knnwb_host_signals_in_commit = committing ? 1 : 0;
}
