/* SIGINT/SIGTERM stop a run at the next tile: the handler only sets the core's cancel flag. */
#include <signal.h>
#include <string.h>
#include "host.h"

static volatile gint knnwb_host_cancel_flag;
static volatile sig_atomic_t knnwb_host_signal_number;

static void knnwb_host_signals_handler(int signal_number)
{
  if (knnwb_host_signal_number != 0) {
    /* A second signal: the user insists; die the default way. */
    signal(signal_number, SIG_DFL);
    raise(signal_number);
    return;
  }
  knnwb_host_signal_number = signal_number;
  knnwb_host_cancel_flag = 1;
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
