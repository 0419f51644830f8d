/* SIGINT/SIGTERM stop a run: the handler only sets the cancel flag, which the core polls between
 * tiles, igraph polls through its interruption handler, and the commit of the outputs checks last.
 *
 * Under a launcher (Open MPI's mpirun/orted, Slurm's slurmstepd) a rank never sees the user's
 * SIGINT: the launcher ends a job by sending SIGCONT, then SIGTERM a second later, then SIGKILL
 * (Open MPI 4.1: odls_base_sigkill_timeout = 1 s). Waiting for the SIGTERM let a rank go on for a
 * second, and a run that ended within that second committed its outputs after the user's Ctrl-C
 * (measured: `mpirun -np 2 knnwb knn` interrupted 0.3-0.6 s before its end wrote the file). So a
 * rank takes a SIGCONT from its parent as the stop, unless that SIGCONT resumes it after job
 * control (Ctrl-Z on mpirun reaches the ranks as SIGSTOP, which no handler sees): a thread ticks
 * every 10 ms, and a SIGCONT that finds the last tick older than 200 ms, or a gap that long
 * between two ticks less than a second ago, follows a stop. (Under a load that delays the tick
 * that long, the rank stops at the launcher's SIGTERM, as before.)
 *
 * Ranks of one host share a stop word (knnwb_host_signals_share): the ticker posts this rank's
 * signal there and takes one another rank posted, so that a signal to one rank alone stops the
 * ranks of its host within a tick, not at their next agreement.
 *
 * The signals are taken by a thread of their own (sigwaitinfo), blocked in every thread started
 * after the install: a handler runs on the stack of whatever thread the kernel picks, and oneDNN's
 * JIT GEMM kernels use the stack pointer as a general register, so a signal frame pushed while one
 * of them ran landed in the heap (Ctrl-C in `knnwb knn` on the CPU: "corrupted size vs. prev_size"
 * aborts, in 3 runs of 3 at 60,000 x 295 with one thread; OpenBLAS was not affected). The handler
 * stays installed for the threads that existed before.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <igraph.h>
#include "runtime/runtime_internal.h"

static volatile gint knnwb_host_cancel_flag;
static volatile sig_atomic_t knnwb_host_signal_number;
/* Set while the stop came from another rank (knnwb_host_signals_exchange) and no signal has come
 * here yet: this rank's first own signal is then a first, not the user insisting. */
static volatile sig_atomic_t knnwb_host_signals_from_peer;
static volatile sig_atomic_t knnwb_host_signals_in_commit;

static void knnwb_host_signals_handler(int signal_number)
{
  if (knnwb_host_signal_number != 0 && !knnwb_host_signals_from_peer) {
    /* During the renames of the commit, dying would leave some outputs new and some old. */
    if (knnwb_host_signals_in_commit)
      return;
    /* A second signal: the user insists; die the default way. */
    signal(signal_number, SIG_DFL);
    raise(signal_number);
    return;
  }
  knnwb_host_signals_from_peer = 0;
  knnwb_host_signal_number = signal_number;
  knnwb_host_cancel_flag = 1;
}

/* CLOCK_MONOTONIC in ms, modulo 2^31 (differences taken modulo 2^31 too). */
static volatile gint knnwb_host_signals_tick_ms;
/* When the ticker last found such a gap between two ticks (a stop ended) */
static volatile gint knnwb_host_signals_gap_end_ms;
/* Milliseconds between two ticks that mean the process was stopped (or starved that long) */
#define KNNWB_HOST_SIGNALS_GAP_MS 200u
/* KNNWB_SIGNALS_CONT_DELAY_MS (tests): the SIGCONT is read that late, after the ticker resumed */
static struct timespec knnwb_host_signals_cont_delay;
static void knnwb_host_signals_cont_handler(int signal_number, siginfo_t *info, void *context);

/* The signals the waiter takes (SIGINT, SIGTERM, and SIGCONT under a launcher). */
static sigset_t knnwb_host_signals_waited;

/* The signal thread: what the handlers do, for the signals blocked everywhere else. A second
 * SIGINT/SIGTERM outside the commit kills the process the default way, from this thread. */
static gpointer knnwb_host_signals_waiter(gpointer data)
{
  (void)data;
  for (;;) {
    siginfo_t info;
    const int signal_number = sigwaitinfo(&knnwb_host_signals_waited, &info);
    if (signal_number < 0)
      continue; /* EINTR */
    if (signal_number == SIGCONT) {
      knnwb_host_signals_cont_handler(signal_number, &info, NULL);
      continue;
    }
    if (knnwb_host_signal_number != 0 && !knnwb_host_signals_from_peer) {
      if (knnwb_host_signals_in_commit)
        continue;
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, signal_number);
      signal(signal_number, SIG_DFL);
      pthread_sigmask(SIG_UNBLOCK, &one, NULL);
      raise(signal_number);
      continue;
    }
    knnwb_host_signals_from_peer = 0;
    knnwb_host_signal_number = signal_number;
    knnwb_host_cancel_flag = 1;
  }
  return NULL;
}

static gint knnwb_host_signals_now_ms(void)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe */
  return (gint)(((guint64)now.tv_sec * 1000u + (guint64)now.tv_nsec / 1000000u) & 0x7fffffffu);
}

/* The stop word of this host's ranks (knnwb_host_signals_share), under its lock: the ticker holds
 * it while it touches the word, so that the word's memory can go once the share ends. */
static GMutex knnwb_host_signals_word_lock;
static volatile gint *knnwb_host_signals_word;

void knnwb_host_signals_share(volatile gint *word)
{
  g_mutex_lock(&knnwb_host_signals_word_lock);
  knnwb_host_signals_word = word;
  g_mutex_unlock(&knnwb_host_signals_word_lock);
}

/* This rank's signal to the word, or another rank's from it: the first posted stays. */
static void knnwb_host_signals_exchange(void)
{
  g_mutex_lock(&knnwb_host_signals_word_lock);
  volatile gint *word = knnwb_host_signals_word;
  gint taken = 0;
  if (word != NULL) {
    const gint mine = (gint)knnwb_host_signal_number;
    const gint posted = g_atomic_int_get(word);
    if (mine != 0 && posted == 0) {
      g_atomic_int_compare_and_exchange(word, 0, mine);
    } else if (mine == 0 && posted != 0) {
      /* as the waiter takes a first signal; one that comes here later is still a first. The
       * number only if no signal came here meanwhile (the handler may run on this thread): that
       * one is this rank's own first. */
      knnwb_host_signals_from_peer = 1;
      if (g_atomic_int_compare_and_exchange((gint *)&knnwb_host_signal_number, 0, posted)) {
        knnwb_host_cancel_flag = 1;
        taken = posted;
      } else {
        knnwb_host_signals_from_peer = 0;
      }
    }
  }
  g_mutex_unlock(&knnwb_host_signals_word_lock);
  if (taken != 0)
    g_debug("knnwb: stopped by signal %d, taken by another rank of this host", (int)taken);
}

/* Ticks every 10 ms; a tick that finds the last one older than the gap first records when the
 * gap ended, so that a SIGCONT read after this thread resumed still sees the stop. Each tick also
 * exchanges the stop with the other ranks of the host. */
static gpointer knnwb_host_signals_ticker(gpointer data)
{
  (void)data;
  for (;;) {
    const gint now = knnwb_host_signals_now_ms();
    if ((((guint)now - (guint)g_atomic_int_get(&knnwb_host_signals_tick_ms)) & 0x7fffffffu) >
        KNNWB_HOST_SIGNALS_GAP_MS)
      g_atomic_int_set(&knnwb_host_signals_gap_end_ms, now);
    g_atomic_int_set(&knnwb_host_signals_tick_ms, now);
    knnwb_host_signals_exchange();
    g_usleep(10000);
  }
  return NULL;
}

/* A SIGCONT from the launcher ends the run, unless it resumes the process after a stop: the
 * last tick is older than the gap (the signal was read before the ticker resumed), or the ticker
 * found such a gap less than a second ago (it resumed first: which thread the kernel runs first
 * after a stop is not fixed; a test that delayed this handler 50 ms failed 3 runs of 4 without
 * this second test). */
static void knnwb_host_signals_cont_handler(int signal_number, siginfo_t *info, void *context)
{
  (void)signal_number;
  (void)context;
  if (info == NULL || info->si_pid != getppid())
    return; /* not the launcher's */
  if (knnwb_host_signals_cont_delay.tv_nsec > 0)
    nanosleep(&knnwb_host_signals_cont_delay, NULL); /* async-signal-safe */
  const guint now = (guint)knnwb_host_signals_now_ms();
  const guint since = (now - (guint)g_atomic_int_get(&knnwb_host_signals_tick_ms)) & 0x7fffffffu;
  const guint since_gap =
      (now - (guint)g_atomic_int_get(&knnwb_host_signals_gap_end_ms)) & 0x7fffffffu;
  if (since > KNNWB_HOST_SIGNALS_GAP_MS || since_gap < 1000u)
    return; /* a resume after a stop */
  knnwb_host_signals_handler(SIGTERM);
}

/* Whether a launcher that ends its jobs with SIGCONT before SIGTERM started this process. */
static gboolean knnwb_host_signals_under_launcher(void)
{
  return g_getenv("OMPI_COMM_WORLD_SIZE") != NULL || g_getenv("SLURM_STEP_ID") != NULL;
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
    if (knnwb_host_signals_under_launcher()) {
      const char *delay = g_getenv("KNNWB_SIGNALS_CONT_DELAY_MS");
      if (delay != NULL)
        knnwb_host_signals_cont_delay.tv_nsec = CLAMP(atol(delay), 0, 999) * 1000000L;
      const gint now = knnwb_host_signals_now_ms();
      g_atomic_int_set(&knnwb_host_signals_tick_ms, now);
      g_atomic_int_set(&knnwb_host_signals_gap_end_ms, (gint)(((guint)now - 10000u) & 0x7fffffffu));
      GThread *ticker = g_thread_try_new("knnwb-tick", knnwb_host_signals_ticker, NULL, NULL);
      if (ticker !=
          NULL) { /* without it every SIGCONT would look like a stop's end: none acted on */
        g_thread_unref(ticker);
        struct sigaction cont;
        memset(&cont, 0, sizeof cont);
        cont.sa_sigaction = knnwb_host_signals_cont_handler;
        sigemptyset(&cont.sa_mask);
        cont.sa_flags = SA_RESTART | SA_SIGINFO;
        sigaction(SIGCONT, &cont, NULL);
      }
    }
    /* From here on the signals go to the waiter only (see the top of this file). */
    sigemptyset(&knnwb_host_signals_waited);
    sigaddset(&knnwb_host_signals_waited, SIGINT);
    sigaddset(&knnwb_host_signals_waited, SIGTERM);
    if (knnwb_host_signals_under_launcher())
      sigaddset(&knnwb_host_signals_waited, SIGCONT);
    sigset_t before;
    if (pthread_sigmask(SIG_BLOCK, &knnwb_host_signals_waited, &before) == 0) {
      GThread *waiter = g_thread_try_new("knnwb-signals", knnwb_host_signals_waiter, NULL, NULL);
      if (waiter != NULL)
        g_thread_unref(waiter);
      else
        pthread_sigmask(SIG_SETMASK, &before, NULL); /* the handlers, as before */
    }
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
