/* Streaming line input over large read() calls (or a gzip stream): no stdio, no per-line
 * allocation. */
#include "io.h"

#include <knnwb/parallel.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Large enough that read() overhead vanishes, small enough to stay in L2/L3 reach. */
enum { KNNWB_TEXT_INPUT_CHUNK = 4 << 20 };
/* The longest line (or quoted multi-line record) accepted: a header of a million 200-byte column
 * names, or a row of ten million values, fits; a file without line breaks (/dev/zero, a binary
 * file named .csv) is refused with a message instead of growing the buffer until memory runs
 * out. Every field is part of a line, so this caps field lengths as well. */
#define KNNWB_TEXT_INPUT_MAX_LINE ((size_t)256 << 20)

gboolean knnwb_text_input_open(KnnwbTextInput *input, const char *path, GError **error)
{
  memset(input, 0, sizeof *input);
  input->fd = -1;
  input->path = path;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int saved = errno;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot open: %s", path, g_strerror(saved));
    return FALSE;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: not a readable file", path);
    close(fd);
    return FALSE;
  }
  input->file_size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
  input->stored_size = input->file_size;
  input->size_bound = input->file_size;
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  input->fd = fd;
  if (S_ISREG(st.st_mode) && knnwb_gzip_fd_is_gzip(fd)) {
    /* Compressed: the decompressed size is not known (the trailer holds it modulo 2^32 only). */
    input->gzip = knnwb_gzip_reader_new(fd, path, error);
    if (input->gzip == NULL) {
      knnwb_text_input_close(input);
      return FALSE;
    }
    input->size_bound =
        input->file_size > G_MAXUINT64 / 1032 ? G_MAXUINT64 : input->file_size * 1032;
    input->file_size = 0;
    /* A budget against gzip bombs (megabytes inflating to gigabytes of blank lines or repeated
     * rows): a matrix whose text is twice the memory available (8 bytes per value, such as
     * "0.123456") needs all of that memory for its floats, with none left for the work. A plain
     * file is bounded by the disk; the way out, for a rare true case, is to decompress it. */
    size_t available = knnwb_memory_available();
    if (available != SIZE_MAX)
      knnwb_gzip_reader_set_limit(
          input->gzip, available > G_MAXUINT64 / 2 ? G_MAXUINT64 : (uint64_t)available * 2,
          "twice the memory available to knnwb: the machine's, or ulimit "
          "-v's or the cgroup's when lower; decompress it to a file with "
          "gunzip -k, which is read without this cap");
  }
  /* Small files get a small buffer: opening many of them (tests, fuzzing) stays cheap. */
  input->capacity = KNNWB_TEXT_INPUT_CHUNK;
  if (input->size_bound > 0 && input->size_bound + 1 < KNNWB_TEXT_INPUT_CHUNK)
    input->capacity = MAX((size_t)input->size_bound + 1, 4096);
  input->buffer = g_try_malloc(input->capacity);
  if (input->buffer == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%s: cannot allocate a %zu-byte read buffer", path, input->capacity);
    knnwb_text_input_close(input);
    return FALSE;
  }
  return TRUE;
}

void knnwb_text_input_close(KnnwbTextInput *input)
{
  g_clear_pointer(&input->gzip, knnwb_gzip_reader_free);
  if (input->fd >= 0)
    close(input->fd);
  input->fd = -1;
  g_clear_pointer(&input->buffer, g_free);
}

void knnwb_text_input_watch(KnnwbTextInput *input, const KnnwbReadOptions *options)
{
  if (options == NULL)
    return;
  input->cancel = options->cancel;
  input->progress = options->progress;
  input->progress_data = options->progress_data;
}

/* The bytes of the file consumed so far and the bytes this read will consume, for progress. */
static void knnwb_text_input_report(KnnwbTextInput *input)
{
  uint64_t total = input->stored_size, done = input->base + input->filled;
  if (input->gzip != NULL) {
    off_t position = lseek(input->fd, 0, SEEK_CUR); /* the compressed bytes handed to zlib */
    done = position > 0 ? (uint64_t)position : 0;
  }
  if (input->windowed && input->window_end < total)
    total = input->window_end;
  if (total > 0)
    input->progress(MIN(done, total), total, input->progress_data);
}

/* Moves the current line to the front of the buffer and reads more after it. 0 = nothing more. */
static int knnwb_text_input_fill(KnnwbTextInput *input, GError **error)
{
  if (input->eof)
    return 0;
  if (input->cancel != NULL && g_atomic_int_get(input->cancel) != 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s: interrupted while reading",
                input->path);
    return -1;
  }
  if (input->line_begin > 0) {
    input->base += input->line_begin;
    memmove(input->buffer, input->buffer + input->line_begin, input->filled - input->line_begin);
    input->filled -= input->line_begin;
    input->line_end -= input->line_begin;
    input->line_begin = 0;
  }
  if (input->filled == input->capacity) {
    /* A single line longer than the buffer: grow (a 295-column row is a few KiB; this is rare). */
    if (input->capacity >= KNNWB_TEXT_INPUT_MAX_LINE) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s:%zu: a line (or quoted record) longer than %zu MiB: no line break where one "
                  "was expected; is this a text matrix file?",
                  input->path, input->line_number + 1, KNNWB_TEXT_INPUT_MAX_LINE >> 20);
      return -1;
    }
    size_t capacity = MIN(input->capacity * 2, KNNWB_TEXT_INPUT_MAX_LINE);
    char *grown = g_try_realloc(input->buffer, capacity);
    if (grown == NULL) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "%s:%zu: cannot allocate %zu MiB for a line this long", input->path,
                  input->line_number + 1, capacity >> 20);
      return -1;
    }
    input->buffer = grown;
    input->capacity = capacity;
  }
  for (;;) {
    ssize_t got;
    if (input->gzip != NULL) {
      g_autoptr(GError) local = NULL;
      got = knnwb_gzip_reader_read(input->gzip, input->buffer + input->filled,
                                   input->capacity - input->filled, &local);
      if (got < 0) {
        /* The message says where in the compressed file; add the line reached. */
        g_set_error(error, local->domain, local->code, "%s (after line %zu)", local->message,
                    input->line_number);
        return -1;
      }
    } else {
      got = read(input->fd, input->buffer + input->filled, input->capacity - input->filled);
    }
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      int saved = errno;
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s:%zu: read failed: %s", input->path,
                  input->line_number, g_strerror(saved));
      return -1;
    }
    if (got == 0) {
      input->eof = TRUE;
      return 0;
    }
    if (!input->started) {
      input->started = TRUE;
      input->filled += (size_t)got;
      if (input->filled >= 3 && memcmp(input->buffer, "\xEF\xBB\xBF", 3) == 0) {
        input->line_begin = input->line_end = 3;
      }
    } else {
      input->filled += (size_t)got;
    }
    if (input->progress != NULL)
      knnwb_text_input_report(input);
    return 1;
  }
}

/*
 * Finds the end of the line that starts at line_begin, searching from line_begin + searched_from
 * (the bytes before are known to hold no newline). Sets line_end. 1 = found (or the last line
 * without a newline), 0 = end of file with no byte after line_begin + searched_from, -1 = error.
 */
static int knnwb_text_input_find_end(KnnwbTextInput *input, size_t searched_from, GError **error)
{
  size_t relative = searched_from;
  for (;;) {
    size_t from = input->line_begin + relative;
    const char *newline =
        from < input->filled ? memchr(input->buffer + from, '\n', input->filled - from) : NULL;
    if (newline != NULL) {
      input->line_end = (size_t)(newline - input->buffer) + 1;
      return 1;
    }
    relative = input->filled - input->line_begin;
    int filled = knnwb_text_input_fill(input, error); /* may move line_begin to 0 */
    if (filled < 0)
      return -1;
    if (filled == 0) {
      if (input->filled == input->line_begin + searched_from)
        return 0;
      input->line_end = input->filled;
      return 1;
    }
  }
}

static void knnwb_text_input_current(KnnwbTextInput *input, const char **line, size_t *length)
{
  size_t end = input->line_end;
  if (end > input->line_begin && input->buffer[end - 1] == '\n')
    end--;
  if (end > input->line_begin && input->buffer[end - 1] == '\r')
    end--;
  *line = input->buffer + input->line_begin;
  *length = end - input->line_begin;
}

void knnwb_text_input_set_window(KnnwbTextInput *input, uint64_t start, uint64_t end)
{
  input->windowed = TRUE;
  input->window_start = start;
  input->window_end = end;
}

uint64_t knnwb_text_input_line_offset(const KnnwbTextInput *input)
{
  return input->base + input->line_begin;
}

int knnwb_text_input_next_line(KnnwbTextInput *input, const char **line, size_t *length,
                               GError **error)
{
  if (!input->started) {
    int filled = knnwb_text_input_fill(input, error);
    if (filled <= 0)
      return filled;
  }
  for (;;) {
    input->line_begin = input->line_end;
    int found = knnwb_text_input_find_end(input, 0, error);
    if (found <= 0)
      return found;
    input->line_number++;
    knnwb_text_input_current(input, line, length);
    if (!input->windowed)
      return 1;
    const uint64_t offset = knnwb_text_input_line_offset(input);
    if (offset >= input->window_end)
      return 0; /* the next rank's lines */
    if (memchr(*line, '"', *length) != NULL)
      input->quoted = TRUE;
    if (offset >= input->window_start)
      return 1;
  }
}

int knnwb_text_input_extend_line(KnnwbTextInput *input, const char **line, size_t *length,
                                 GError **error)
{
  int found = knnwb_text_input_find_end(input, input->line_end - input->line_begin, error);
  if (found <= 0)
    return found;
  input->line_number++;
  knnwb_text_input_current(input, line, length);
  return 1;
}
