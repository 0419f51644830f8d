/* Helpers for tests that signal a child knnwb process. */
#ifndef KNNWB_TEST_PROCESS_H
#define KNNWB_TEST_PROCESS_H

#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <glib.h>

/*
 * What this process maps now, in KiB (0 when /proc is unavailable). A CUDA-enabled build maps over
 * 500 MB of cuBLASLt at start-up, so address-space limits in tests are this figure plus the headroom
 * the test wants, never a fixed figure (which would fail every allocation before the code under test
 * runs). The knnwb program links the same libraries as the test programs.
 */
static inline guint64 knnwb_test_mapped_kib(void)
{
  g_autofree char *status_text = NULL;
  if (!g_file_get_contents("/proc/self/status", &status_text, NULL, NULL))
    return 0;
  const char *line = strstr(status_text, "VmSize:");
  return line == NULL ? 0 : g_ascii_strtoull(line + strlen("VmSize:"), NULL, 10);
}

/* Limits this process's address space to what it maps now plus extra_bytes; FALSE on failure. */
static inline gboolean knnwb_test_cap_address_space(guint64 extra_bytes)
{
  guint64 bytes = knnwb_test_mapped_kib() * 1024 + extra_bytes;
  struct rlimit limit = {(rlim_t)bytes, (rlim_t)bytes};
  return setrlimit(RLIMIT_AS, &limit) == 0;
}

/*
 * Waits (up to 20 s) until /proc says process pid catches both SIGINT and SIGTERM. knnwb installs
 * its handlers after start-up (loading libraries and plugins can take a while on a loaded machine);
 * a signal before that kills it the default way, which is not what an interruption test tests.
 */
static inline void knnwb_test_wait_for_signal_handlers(GPid pid)
{
  g_autofree char *status_path = g_strdup_printf("/proc/%d/status", (int)pid);
  gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
  const guint64 wanted = (1ull << (SIGINT - 1)) | (1ull << (SIGTERM - 1));
  for (;;) {
    g_autofree char *status_text = NULL;
    guint64 caught = 0;
    if (g_file_get_contents(status_path, &status_text, NULL, NULL)) {
      const char *line = strstr(status_text, "SigCgt:");
      if (line != NULL)
        caught = g_ascii_strtoull(line + strlen("SigCgt:"), NULL, 16);
    }
    if ((caught & wanted) == wanted)
      return;
    g_assert_cmpint(g_get_monotonic_time(), <, deadline);
    g_usleep(10 * 1000);
  }
}

/*
 * Reads fd (a child's stderr) into text until end of file, at most 60 s, and returns the monotonic
 * time (microseconds) at which marker first arrived, or 0 when it never did. Interruption tests
 * time a signal's effect to knnwb's "interrupted" line, printed once the work has stopped and the
 * temporaries are gone: what the process does after that (freeing what it holds, a sanitizer's
 * leak check at exit) is timed separately, with its own bound.
 */
static inline gint64 knnwb_test_read_until_end(int fd, GString *text, const char *marker)
{
  gint64 seen = 0, deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
  while (g_get_monotonic_time() < deadline) {
    GPollFD poll_fd = {fd, G_IO_IN | G_IO_HUP, 0};
    if (g_poll(&poll_fd, 1, 10) <= 0)
      continue;
    char buffer[4096];
    ssize_t got = read(fd, buffer, sizeof buffer);
    if (got <= 0)
      break;
    g_string_append_len(text, buffer, got);
    if (seen == 0 && marker != NULL && strstr(text->str, marker) != NULL)
      seen = g_get_monotonic_time();
  }
  return seen;
}

#endif
