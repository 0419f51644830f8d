/* The progress line on a terminal: counts done of total in the phase's unit, rate and time left,
 * fitted to the terminal's width (a line longer than the window wraps, and every update then
 * scrolls), redrawn at most ten times a second, ended by its final state ("knn: 7140/7140 tiles
 * in 2.3 s"). A message printed while a line is on screen first clears it
 * (knnwb_host_progress_clear), so that no result is glued onto a half-drawn line. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "runtime/runtime.h"

struct KnnwbHostProgress {
  char *label;
  const char *unit;
  gint64 start_us;
  gint64 drawn_us;      /* when the line was last drawn; 0: never */
  uint64_t done, total; /* the latest counts, drawn or not */
  gboolean printed;
};

/* Redraws closer together than this are skipped (the last state is drawn by finish): a terminal
 * redrawing one line hundreds of times a second only flickers and costs the writer's time. */
#define KNNWB_PROGRESS_INTERVAL_US (G_USEC_PER_SEC / 10)

/* The line on screen, if any: one at a time (a ticker's thread and the log handler reach it too).
 */
static GMutex knnwb_host_progress_lock;
static KnnwbHostProgress *knnwb_host_progress_on_screen;

/* Under mpirun a rank's stderr is a pipe that the launcher copies to its own stderr, so isatty()
 * says no even when the user watches a terminal (Open MPI gives the ranks a pseudo-terminal for
 * stdout whatever mpirun's own stdout is, so that says nothing either). The launcher is the rank's
 * parent on the host where mpirun runs (Open MPI starts local ranks itself); its stderr, opened
 * through /proc, is the user's. Returns a descriptor of that terminal, or -1: stderr is a terminal
 * itself, not under a launcher, another host's daemon (whose stderr is not a terminal), no /proc,
 * or not a terminal. Asked once (it cannot change during a run); kept open for the process's life
 * (the width is read from it at each update: windows are resized). */
static int knnwb_host_launcher_terminal(void)
{
  static gsize asked = 0;
  static int terminal = -1;
  if (g_once_init_enter(&asked)) {
    if (!isatty(STDERR_FILENO) &&
        (g_getenv("OMPI_COMM_WORLD_SIZE") != NULL || g_getenv("PMIX_RANK") != NULL)) {
      g_autofree char *path = g_strdup_printf("/proc/%ld/fd/%d", (long)getppid(), STDERR_FILENO);
      int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0 && isatty(fd))
        terminal = fd;
      else if (fd >= 0)
        close(fd);
    }
    g_once_init_leave(&asked, 1);
  }
  return terminal;
}

int knnwb_host_terminal_width(void)
{
  struct winsize size;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
    return size.ws_col;
  const int launcher = knnwb_host_launcher_terminal();
  if (launcher >= 0 && ioctl(launcher, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
    return size.ws_col;
  const char *columns = g_getenv("COLUMNS");
  guint64 width = 0;
  if (columns != NULL && g_ascii_string_to_unsigned(columns, 10, 1, 10000, &width, NULL))
    return (int)width;
  return 80;
}

KnnwbHostProgress *knnwb_host_progress_new(const char *label, gboolean quiet)
{
  /* Progress is for people: never into logs or pipes, where \r lines are noise. Under mpirun
   * rank 0 alone shows it, when mpirun's stderr is a terminal. */
  if (quiet || !knnwb_host_speaks() ||
      !(isatty(STDERR_FILENO) || knnwb_host_launcher_terminal() >= 0))
    return NULL;
  KnnwbHostProgress *progress = g_new0(KnnwbHostProgress, 1);
  progress->label = g_strdup(label);
  progress->unit = NULL; /* a share and the time left, until the caller names the unit */
  progress->start_us = g_get_monotonic_time();
  return progress;
}

/* Shows the first of the n forms (fullest first) that fits the terminal, the last one cut if none
 * does, and frees them. */
static void knnwb_host_progress_show(KnnwbHostProgress *progress, char **forms, guint n)
{
  /* One column stays free: writing into the last one makes some terminals wrap. */
  glong room = MAX(knnwb_host_terminal_width() - 1, 1);
  guint chosen = n - 1;
  for (guint f = 0; f < n; f++)
    if (g_utf8_strlen(forms[f], -1) <= room) {
      chosen = f;
      break;
    }
  char *line = forms[chosen];
  if (g_utf8_strlen(line, -1) > room)
    *g_utf8_offset_to_pointer(line, room) = '\0';
  /* The line itself (a label, a file name) is escaped; its  and erase sequence are not. */
  g_mutex_lock(&knnwb_host_progress_lock);
  knnwb_host_terminal_rewrite_line(line);
  knnwb_host_progress_on_screen = progress;
  g_mutex_unlock(&knnwb_host_progress_lock);
  for (guint f = 0; f < n; f++)
    g_free(forms[f]);
  progress->printed = TRUE;
  progress->drawn_us = g_get_monotonic_time();
}

void knnwb_host_progress_clear(void)
{
  g_mutex_lock(&knnwb_host_progress_lock);
  if (knnwb_host_progress_on_screen != NULL) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
    knnwb_host_progress_on_screen = NULL;
  }
  g_mutex_unlock(&knnwb_host_progress_lock);
}

/* Formats a byte count in the unit that suits total (kB below a megabyte: a small file read as
 * "0.0/0.0 MB" says nothing). */
static void knnwb_host_progress_bytes(char *text, size_t size, uint64_t done, uint64_t total)
{
  const double scale = total >= 10000000000ULL ? 1e9 : total >= 1000000 ? 1e6 : 1e3;
  const char *unit = scale == 1e9 ? "GB" : scale == 1e6 ? "MB" : "kB";
  g_snprintf(text, size, "%.1f/%.1f %s", (double)done / scale, (double)total / scale, unit);
}

void knnwb_host_progress_update(uint64_t done, uint64_t total, void *data)
{
  KnnwbHostProgress *progress = data;
  if (progress == NULL || total == 0)
    return;
  progress->done = done;
  progress->total = total;
  const gint64 now = g_get_monotonic_time();
  if (progress->drawn_us != 0 && now - progress->drawn_us < KNNWB_PROGRESS_INTERVAL_US)
    return;
  double seconds = (double)(now - progress->start_us) / 1e6;
  double rate = seconds > 0 ? (double)done / seconds : 0;
  char eta[32] = "--";
  /* The first counts carry the set-up (the first tile after the rows were prepared): a rate from
   * them promised 9m24s for a search that took half a second. */
  const gboolean settled = seconds >= 3.0 || (double)done * 100.0 >= (double)total;
  if (rate > 0 && done < total && settled) {
    double left = (double)(total - done) / rate;
    if (left >= 3600)
      g_snprintf(eta, sizeof eta, "%dh%02dm", (int)(left / 3600), (int)(left / 60) % 60);
    else if (left >= 60)
      g_snprintf(eta, sizeof eta, "%dm%02ds", (int)(left / 60), (int)left % 60);
    else
      g_snprintf(eta, sizeof eta, "%.0fs", left);
  } else if (done >= total) {
    g_snprintf(eta, sizeof eta, "0s");
  }
  double percent = 100.0 * (double)done / (double)total;
  /* From the fullest form to the shortest; the first that fits is shown. Without a unit (counts a
   * user would not recognise, such as a split run's share of its schedule) only the last two: the
   * share and the time left. */
  char *forms[4];
  guint n = 0;
  if (progress->unit != NULL && g_str_equal(progress->unit, "bytes")) {
    /* Files: kB, MB or GB, not 574266428/1140405529 bytes. */
    char amount[64];
    knnwb_host_progress_bytes(amount, sizeof amount, done, total);
    forms[n++] = g_strdup_printf("%s: %s (%.0f%%), %.1f MB/s, ETA %s", progress->label, amount,
                                 percent, rate / 1e6, eta);
    forms[n++] = g_strdup_printf("%s: %s (%.0f%%), ETA %s", progress->label, amount, percent, eta);
  } else if (progress->unit != NULL) {
    forms[n++] = g_strdup_printf("%s: %llu/%llu %s (%.0f%%), %.1f %s/s, ETA %s", progress->label,
                                 (unsigned long long)done, (unsigned long long)total,
                                 progress->unit, percent, rate, progress->unit, eta);
    forms[n++] = g_strdup_printf("%s: %llu/%llu (%.0f%%), ETA %s", progress->label,
                                 (unsigned long long)done, (unsigned long long)total, percent, eta);
  }
  forms[n++] = g_strdup_printf("%s: %.0f%%, ETA %s", progress->label, percent, eta);
  forms[n++] = g_strdup_printf("%.0f%% ETA %s", percent, eta);
  knnwb_host_progress_show(progress, forms, n);
}

void knnwb_host_progress_set_unit(KnnwbHostProgress *progress, const char *unit)
{
  if (progress != NULL)
    progress->unit = unit;
}

void knnwb_host_progress_finish(KnnwbHostProgress *progress)
{
  if (progress == NULL)
    return;
  if (progress->printed) {
    /* The final state, not the last one drawn (which the rate limit may have left behind). */
    double seconds = (double)(g_get_monotonic_time() - progress->start_us) / 1e6;
    char amount[96] = "";
    if (progress->unit != NULL && g_str_equal(progress->unit, "bytes"))
      knnwb_host_progress_bytes(amount, sizeof amount, progress->done, progress->total);
    else if (progress->unit != NULL)
      g_snprintf(amount, sizeof amount, "%llu/%llu %s", (unsigned long long)progress->done,
                 (unsigned long long)progress->total, progress->unit);
    const gboolean stopped = progress->done < progress->total;
    const double percent =
        progress->total ? 100.0 * (double)progress->done / (double)progress->total : 100.0;
    const char *comma = amount[0] ? ", " : "";
    char *forms[] = {
        /* Not "stopped": some phases end early by design (a search whose bounds close). */
        stopped
            ? g_strdup_printf("%s: %s%s%.0f%% in %.1f s", progress->label, amount, comma, percent,
                              seconds)
            : g_strdup_printf("%s: %s%sdone in %.1f s", progress->label, amount, comma, seconds),
        g_strdup_printf("%s: %.0f%% in %.1f s", progress->label, percent, seconds),
    };
    knnwb_host_progress_show(progress, forms, G_N_ELEMENTS(forms));
    g_mutex_lock(&knnwb_host_progress_lock);
    fputc('\n', stderr);
    fflush(stderr);
    if (knnwb_host_progress_on_screen == progress)
      knnwb_host_progress_on_screen = NULL;
    g_mutex_unlock(&knnwb_host_progress_lock);
  }
  g_free(progress->label);
  g_free(progress);
}

/* A phase without counts (a library call that reports none): its label and the seconds spent,
 * every half second, from a thread of its own, so that a long phase does not look hung. */
struct KnnwbHostTicker {
  KnnwbHostProgress *progress;
  GThread *thread;
  GMutex lock;
  GCond cond;
  gboolean stop;
};

/* Held by a ticker's thread while it draws (it allocates and writes then) and, through
 * pthread_atfork, by a thread that forks: the computation a ticker watches often runs in a forked
 * child (knnwb/isolated.h), which inherits every lock as it was at the fork. A child forked while
 * the ticker was inside malloc blocked for ever on its first allocation (ASan's allocator does not
 * reset its locks at fork: test_host_usability's cluster run hung about once in 40). */
static GMutex knnwb_host_ticker_drawing;
void (*knnwb_host_ticker_draw_hook)(void);

static void knnwb_host_ticker_fork_prepare(void)
{
  g_mutex_lock(&knnwb_host_ticker_drawing);
}

static void knnwb_host_ticker_fork_done(void)
{
  g_mutex_unlock(&knnwb_host_ticker_drawing);
}

static gpointer knnwb_host_ticker_run(gpointer data)
{
  KnnwbHostTicker *ticker = data;
  g_mutex_lock(&ticker->lock);
  gint64 next = ticker->progress->start_us + G_USEC_PER_SEC / 2;
  while (!ticker->stop) {
    if (g_cond_wait_until(&ticker->cond, &ticker->lock, next) || ticker->stop)
      continue;
    next += G_USEC_PER_SEC / 2;
    g_mutex_lock(&knnwb_host_ticker_drawing);
    if (knnwb_host_ticker_draw_hook != NULL)
      knnwb_host_ticker_draw_hook();
    double seconds = (double)(g_get_monotonic_time() - ticker->progress->start_us) / 1e6;
    char *forms[] = {g_strdup_printf("%s: %.0f s", ticker->progress->label, seconds)};
    knnwb_host_progress_show(ticker->progress, forms, 1);
    g_mutex_unlock(&knnwb_host_ticker_drawing);
  }
  g_mutex_unlock(&ticker->lock);
  return NULL;
}

KnnwbHostTicker *knnwb_host_ticker_new(const char *label, gboolean quiet)
{
  KnnwbHostProgress *progress = knnwb_host_progress_new(label, quiet);
  if (progress == NULL)
    return NULL;
  static gsize fork_handlers = 0;
  if (g_once_init_enter(&fork_handlers)) {
    pthread_atfork(knnwb_host_ticker_fork_prepare, knnwb_host_ticker_fork_done,
                   knnwb_host_ticker_fork_done);
    g_once_init_leave(&fork_handlers, 1);
  }
  KnnwbHostTicker *ticker = g_new0(KnnwbHostTicker, 1);
  ticker->progress = progress;
  g_mutex_init(&ticker->lock);
  g_cond_init(&ticker->cond);
  ticker->thread = g_thread_try_new("knnwb-ticker", knnwb_host_ticker_run, ticker, NULL);
  if (ticker->thread == NULL) {
    knnwb_host_ticker_free(ticker);
    return NULL;
  }
  return ticker;
}

void knnwb_host_ticker_free(KnnwbHostTicker *ticker)
{
  if (ticker == NULL)
    return;
  if (ticker->thread != NULL) {
    g_mutex_lock(&ticker->lock);
    ticker->stop = TRUE;
    g_cond_signal(&ticker->cond);
    g_mutex_unlock(&ticker->lock);
    g_thread_join(ticker->thread);
  }
  g_mutex_clear(&ticker->lock);
  g_cond_clear(&ticker->cond);
  knnwb_host_progress_finish(ticker->progress);
  g_free(ticker);
}
