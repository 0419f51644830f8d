/* How the host shows the library's log messages: "knnwb: warning: ..." and "knnwb: ..." lines
 * without GLib's timestamps and PIDs; notices are silenced by --quiet, warnings never; debug
 * messages keep GLib's format and filter (G_MESSAGES_DEBUG), on stderr.
 *
 * And what reaches the terminal at all. Row labels, class names and file names end up in
 * messages, summaries and metrics through many paths (GError texts, warnings, printf, tables
 * printed to stdout); their control characters are escaped (knnwb_formats_escape_terminal) at the
 * few places every one of those paths goes through, never at call sites: stdout is replaced, at
 * start, by a stream that escapes on its way to descriptor 1 (printf, fputs, g_print and the
 * FILE * writers of summaries and metrics alike); stderr keeps its descriptor (Open MPI, for
 * one, writes to fileno(stderr)) and everything knnwb writes there passes through GLib's printerr
 * handler or the log writer below, which escape. Data files never go through these. The progress
 * line is escaped and framed by its own \r and erase sequence here
 * (knnwb_host_terminal_rewrite_line). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <knnwb/text_fields.h>
#include "runtime/runtime.h"

static gboolean knnwb_host_log_quiet;
static const KnnwbKnnGroup *knnwb_host_job_group;

void knnwb_host_set_group(const KnnwbKnnGroup *group)
{
  knnwb_host_job_group = group;
}

const KnnwbKnnGroup *knnwb_host_group(void)
{
  return knnwb_host_job_group;
}

gboolean knnwb_host_group_all_gpus(const KnnwbKnnGroup *group, const KnnwbKnnOptions *options)
{
  int64_t gpu = knnwb_knn_uses_gpu(options);
  /* (a transport that fails here fails the next collective call, with its message) */
  if (group->size > 1 && !group->reduce(group, &gpu, 1, KNNWB_GROUP_MIN, NULL))
    return FALSE;
  return gpu != 0;
}

gboolean knnwb_host_speaks(void)
{
  return knnwb_host_job_group == NULL || knnwb_host_job_group->rank == 0;
}

static GLogWriterOutput knnwb_host_log_write(GLogLevelFlags level, const GLogField *fields,
                                             gsize n_fields, gpointer user_data)
{
  (void)user_data;
  if (level & G_LOG_LEVEL_DEBUG) {
    /* GLib's format and G_MESSAGES_DEBUG filter, but on stderr and escaped like the rest: GLib's
     * own writer would send debug lines to stdout, and asks stdout for a descriptor it no longer
     * has once filtered. */
    const char *domain = NULL;
    for (gsize i = 0; i < n_fields; i++)
      if (strcmp(fields[i].key, "GLIB_DOMAIN") == 0)
        domain = fields[i].value;
    if (!g_log_writer_default_would_drop(level, domain)) {
      g_autofree char *line = g_log_writer_format_fields(level, fields, n_fields, FALSE);
      g_printerr("%s\n", line);
    }
    return G_LOG_WRITER_HANDLED;
  }
  const char *message = NULL;
  for (gsize i = 0; i < n_fields; i++)
    if (strcmp(fields[i].key, "MESSAGE") == 0)
      message = fields[i].value;
  if (message == NULL)
    return G_LOG_WRITER_UNHANDLED;
  if (!knnwb_host_speaks())
    return G_LOG_WRITER_HANDLED; /* every rank runs the same steps: rank 0 says it once */
  /* Library messages often start with "knnwb: " already. */
  if (g_str_has_prefix(message, "knnwb: "))
    message += strlen("knnwb: ");
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    g_printerr("knnwb: warning: %s\n", message); /* escaped by the printerr handler */
  else if (!knnwb_host_log_quiet)
    g_printerr("knnwb: %s\n", message);
  return G_LOG_WRITER_HANDLED;
}

/* Every g_printerr of the program (errors, warnings, notices, the progress line's text): escaped,
 * then written to stderr, which is unbuffered. */
static void knnwb_host_printerr(const char *text)
{
  knnwb_host_progress_clear(); /* nothing is printed onto the end of a progress line */
  g_autoptr(GString) out = g_string_sized_new(strlen(text) + 16);
  knnwb_formats_escape_terminal(out, text, strlen(text), TRUE, NULL);
  fwrite(out->str, 1, out->len, stderr);
  fflush(stderr);
}

/* A filtered stream: its descriptor, and the first bytes of a character that a buffer flush cut
 * (completed by the next write, or escaped when the stream is closed). */
typedef struct {
  int fd;
  char carry[4];
  size_t n_carry;
} KnnwbTerminalStream;

static gboolean knnwb_host_write_fd(int fd, const char *bytes, size_t length)
{
  while (length > 0) {
    ssize_t n = write(fd, bytes, length);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return FALSE;
    bytes += n;
    length -= (size_t)n;
  }
  return TRUE;
}

static ssize_t knnwb_host_terminal_write(void *cookie, const char *buffer, size_t size)
{
  KnnwbTerminalStream *stream = cookie;
  knnwb_host_progress_clear(); /* results on stdout start on a clean line */
  g_autoptr(GString) in = g_string_new_len(stream->carry, (gssize)stream->n_carry);
  g_string_append_len(in, buffer, (gssize)size);
  g_autoptr(GString) out = g_string_sized_new(in->len + 16);
  size_t used = 0;
  knnwb_formats_escape_terminal(out, in->str, in->len, FALSE, &used);
  stream->n_carry = MIN(in->len - used, sizeof stream->carry); /* at most 3: one cut character */
  memcpy(stream->carry, in->str + used, stream->n_carry);
  return knnwb_host_write_fd(stream->fd, out->str, out->len) ? (ssize_t)size : -1;
}

static int knnwb_host_terminal_close(void *cookie)
{
  KnnwbTerminalStream *stream = cookie;
  g_autoptr(GString) out = g_string_new(NULL);
  knnwb_formats_escape_terminal(out, stream->carry, stream->n_carry, TRUE, NULL);
  stream->n_carry = 0;
  return knnwb_host_write_fd(stream->fd, out->str, out->len) ? 0 : EOF;
}

/* The filtered stream's state: static, as the stream lives as long as the process. */
static KnnwbTerminalStream knnwb_host_terminal_stream;

/* Replaces *stream (flushed first) by a filtered stream onto fd, buffered as mode says; keeps
 * the raw one when no stream can be made. */
static void knnwb_host_terminal_install(FILE **stream, int fd, int mode)
{
  fflush(*stream);
  KnnwbTerminalStream *cookie = &knnwb_host_terminal_stream;
  cookie->fd = fd;
  cookie->n_carry = 0;
  cookie_io_functions_t functions = {.write = knnwb_host_terminal_write,
                                     .close = knnwb_host_terminal_close};
  FILE *filtered = fopencookie(cookie, "w", functions);
  if (filtered == NULL)
    return;
  setvbuf(filtered, NULL, mode, mode == _IONBF ? 0 : BUFSIZ);
  *stream = filtered;
}

void knnwb_host_terminal_rewrite_line(const char *line)
{
  g_autoptr(GString) out = g_string_new("\r");
  knnwb_formats_escape_terminal(out, line, strlen(line), TRUE, NULL);
  g_string_append(out, "\033[K"); /* clears what a longer earlier line left behind */
  fflush(stderr);
  /* One write: a launcher that tags its ranks' output (mpirun --tag-output) tags each write. */
  (void)knnwb_host_write_fd(STDERR_FILENO, out->str, out->len);
}

void knnwb_host_log_init(void)
{
  g_log_set_writer_func(knnwb_host_log_write, NULL, NULL);
  g_set_printerr_handler(knnwb_host_printerr);
  knnwb_host_terminal_install(&stdout, STDOUT_FILENO, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF);
}

void knnwb_host_log_set_quiet(gboolean quiet)
{
  knnwb_host_log_quiet = quiet;
}

void knnwb_host_print_error(const GError *error)
{
  if (knnwb_host_speaks()) {
    g_printerr("knnwb: %s\n", error->message);
  }
}
