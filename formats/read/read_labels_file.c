/* The labels side file (`--labels FILE`, pipeline `labels`): one label per row of the file as
 * stored, for any input format. */
#include "read_internal.h"

#include <knnwb/parallel.h>

#include <string.h>
#include <sys/stat.h>

/* Above this size the file is read line by line: read whole, it would be in memory twice for a
 * moment (the bytes read, then their copy in the labels' strings). */
#define KNNWB_LABELS_WHOLE_MAX ((uint64_t)1 << 30)

/* Side files below this size are read line by line: threads are not worth starting for them.
 * KNNWB_LABELS_PARALLEL_BYTES sets another size (tests compare the two ways on small files). */
static uint64_t knnwb_labels_parallel_bytes(void)
{
  const char *v = g_getenv("KNNWB_LABELS_PARALLEL_BYTES");
  return v != NULL ? g_ascii_strtoull(v, NULL, 10) : (uint64_t)1 << 20;
}

/* A plain side file's text in the strings given, split into lines on every thread. Thread t
 * owns the lines that start in its byte range; the ranges begin at line starts. */
typedef struct {
  char *text;  /* the file after a byte-order mark, NUL-terminated, in the strings given */
  size_t size; /* its bytes */
  char **labels;
  size_t count;
  size_t *range;    /* n_threads + 1 line-start offsets */
  size_t *lines;    /* per thread: its lines; then, after the prefix, the number of the first */
  size_t *nonblank; /* per thread: one past its last non-blank line (global number), or 0 */
  size_t *bad_line; /* per thread: the first line that is not valid UTF-8 (SIZE_MAX: none) */
  size_t *bad_column;
  gboolean *bad_nul;
} KnnwbLabelsText;

/* The start of the first line at or after offset (a range's start). */
static size_t knnwb_labels_line_start(const KnnwbLabelsText *t, size_t offset)
{
  if (offset == 0 || offset >= t->size)
    return MIN(offset, t->size);
  const char *newline = memchr(t->text + offset - 1, '\n', t->size - (offset - 1));
  return newline != NULL ? (size_t)(newline - t->text) + 1 : t->size;
}

static void knnwb_labels_count(int thread, int n_threads, void *data)
{
  KnnwbLabelsText *t = data;
  (void)n_threads;
  size_t n = 0;
  for (size_t at = t->range[thread]; at < t->range[thread + 1]; n++) {
    const char *newline = memchr(t->text + at, '\n', t->range[thread + 1] - at);
    at = newline != NULL ? (size_t)(newline - t->text) + 1 : t->range[thread + 1];
  }
  t->lines[thread] = n;
}

/* Ends each line of the thread's range with NUL (without its "\n" or "\r\n", as the line reader
 * gives it), checks it and points its label at it. */
static void knnwb_labels_split(int thread, int n_threads, void *data)
{
  KnnwbLabelsText *t = data;
  (void)n_threads;
  size_t number = t->lines[thread]; /* 0-based number of the range's first line */
  t->nonblank[thread] = 0;
  t->bad_line[thread] = SIZE_MAX;
  for (size_t at = t->range[thread]; at < t->range[thread + 1]; number++) {
    char *line = t->text + at;
    char *newline = memchr(line, '\n', t->range[thread + 1] - at);
    size_t end = newline != NULL ? (size_t)(newline - t->text) : t->range[thread + 1];
    at = newline != NULL ? end + 1 : end;
    if (end > (size_t)(line - t->text) && t->text[end - 1] == '\r')
      end--;
    const size_t length = end - (size_t)(line - t->text);
    const char *invalid;
    if (!g_utf8_validate_len(line, length, &invalid)) {
      t->bad_line[thread] = number + 1;
      t->bad_column[thread] = (size_t)(invalid - line) + 1;
      t->bad_nul[thread] = *invalid == '\0';
      return; /* later lines of this range cannot come first */
    }
    t->text[end] = '\0';
    if (number < t->count)
      t->labels[number] = line;
    if (length > 0)
      t->nonblank[thread] = number + 1;
  }
}

/* A plain (not compressed) regular file of input: read whole on every core into
 * strings, split and checked on n_threads threads (0: every core), the labels into labels (count
 * slots). Returns 1 when read, 0 when the file is not such a file (read it line by line), -1 on an
 * error. Gives the line reader's lines, line numbers and messages. O(file size / threads). */
static int knnwb_labels_read_plain(KnnwbTextInput *input, const char *labels_path, size_t count,
                                   GStringChunk *strings, char **labels, int n_threads,
                                   GError **error)
{
  struct stat st;
  if (input->gzip != NULL || fstat(input->fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (uint64_t)st.st_size < knnwb_labels_parallel_bytes() ||
      (uint64_t)st.st_size > KNNWB_LABELS_WHOLE_MAX)
    return 0;
  const size_t size = (size_t)st.st_size;
  g_autofree char *bytes = g_try_malloc(size);
  int saved = 0;
  gboolean unused_finite;
  const KnnwbPreadPlan plan = {0};
  if (bytes == NULL ||
      !knnwb_formats_pread_parallel(input->fd, bytes, size, 0, &plan, &unused_finite, &saved))
    return 0; /* short of memory, or the file changed: the line reader says what it finds */
  const size_t skip = size >= 3 && memcmp(bytes, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
  const int threads = knnwb_thread_count(n_threads);
  KnnwbLabelsText t = {.text =
                           g_string_chunk_insert_len(strings, bytes + skip, (gssize)(size - skip)),
                       .size = size - skip,
                       .labels = labels,
                       .count = count,
                       .range = g_new(size_t, threads + 1),
                       .lines = g_new(size_t, threads),
                       .nonblank = g_new(size_t, threads),
                       .bad_line = g_new(size_t, threads),
                       .bad_column = g_new(size_t, threads),
                       .bad_nul = g_new(gboolean, threads)};
  g_clear_pointer(&bytes, g_free);
  for (int r = 0; r <= threads; r++)
    t.range[r] = knnwb_labels_line_start(&t, t.size * (size_t)r / (size_t)threads);
  knnwb_team_run(threads, knnwb_labels_count, &t);
  size_t n_lines = 0;
  for (int r = 0; r < threads; r++) {
    const size_t n = t.lines[r];
    t.lines[r] = n_lines;
    n_lines += n;
  }
  knnwb_team_run(threads, knnwb_labels_split, &t);
  size_t last_nonblank = 0;
  int result = 1;
  for (int r = 0; r < threads && result == 1; r++) {
    if (t.bad_line[r] != SIZE_MAX) {
      knnwb_formats_parse_error(error, labels_path, t.bad_line[r], t.bad_column[r],
                                t.bad_nul[r] ? "NUL byte in a label"
                                             : "a label is not valid UTF-8");
      result = -1;
    }
    last_nonblank = MAX(last_nonblank, t.nonblank[r]);
  }
  if (result == 1 && last_nonblank != count) { /* trailing blank lines are not labels */
    knnwb_formats_parse_error(error, labels_path, n_lines, 0,
                              "%zu label%s for %zu row%s (one label per line)", last_nonblank,
                              KNNWB_PLURAL(last_nonblank), count, KNNWB_PLURAL(count));
    result = -1;
  }
  g_free(t.range);
  g_free(t.lines);
  g_free(t.nonblank);
  g_free(t.bad_line);
  g_free(t.bad_column);
  g_free(t.bad_nul);
  return result;
}

/* The line reader's way, for compressed and small files. */
static gboolean knnwb_labels_read_lines(KnnwbTextInput *input, const char *labels_path,
                                        size_t count, GStringChunk *strings, char **labels,
                                        GError **error)
{
  const char *line;
  size_t length;
  size_t n_lines = 0, last_nonblank = 0;
  int got;
  /* Each label goes straight into the string chunk given (one copy); lines past count are
   * only counted, so that the message says how many labels there were. */
  while ((got = knnwb_text_input_next_line(input, &line, &length, error)) > 0) {
    const char *invalid;
    if (!g_utf8_validate_len(line, length, &invalid)) {
      knnwb_formats_parse_error(
          error, labels_path, input->line_number, (size_t)(invalid - line) + 1,
          *invalid == '\0' ? "NUL byte in a label" : "a label is not valid UTF-8");
      return FALSE;
    }
    if (n_lines < count)
      labels[n_lines] = g_string_chunk_insert_len(strings, line, (gssize)length);
    n_lines++;
    if (length > 0)
      last_nonblank = n_lines;
  }
  if (got < 0)
    return FALSE;
  if (last_nonblank != count) { /* trailing blank lines are not labels */
    knnwb_formats_parse_error(error, labels_path, input->line_number, 0,
                              "%zu label%s for %zu row%s (one label per line)", last_nonblank,
                              KNNWB_PLURAL(last_nonblank), count, KNNWB_PLURAL(count));
    return FALSE;
  }
  return TRUE;
}

/* The count labels of labels_path into labels (count slots), their text in strings. */
static gboolean knnwb_labels_read(const char *labels_path, size_t count, GStringChunk *strings,
                                  char **labels, int n_threads, GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, labels_path, error))
    return FALSE;
  int plain =
      knnwb_labels_read_plain(&input, labels_path, count, strings, labels, n_threads, error);
  gboolean ok = plain == 1 || (plain == 0 && knnwb_labels_read_lines(&input, labels_path, count,
                                                                     strings, labels, error));
  knnwb_text_input_close(&input);
  return ok;
}

gboolean knnwb_formats_read_labels_file(const char *labels_path, size_t count, KnnwbMatrix *matrix,
                                        gboolean as_columns, int n_threads, GError **error)
{
  /* installed only when the whole file is right: on failure the matrix keeps the labels it had */
  g_autofree char **labels = g_new0(char *, MAX(count, 1));
  if (matrix->strings == NULL)
    matrix->strings = g_string_chunk_new(1 << 16);
  if (!knnwb_labels_read(labels_path, count, matrix->strings, labels, n_threads, error))
    return FALSE;
  char ***slot = as_columns ? &matrix->col_labels : &matrix->row_labels;
  g_free(*slot);
  *slot = g_steal_pointer(&labels);
  return TRUE;
}

gboolean knnwb_formats_read_labels_block(const char *labels_path, size_t count, size_t first,
                                         KnnwbMatrix *matrix, int n_threads, GError **error)
{
  const size_t rows = matrix->n_rows;
  g_return_val_if_fail(first <= count && rows <= count - first, FALSE);
  /* Every label is read and checked (the file names every row of the job, as one process reads
   * it); only the block's are kept, so a rank holds its own rows' labels. */
  GStringChunk *all = g_string_chunk_new(1 << 16);
  g_autofree char **labels = g_new0(char *, MAX(count, 1));
  if (!knnwb_labels_read(labels_path, count, all, labels, n_threads, error)) {
    g_string_chunk_free(all);
    return FALSE;
  }
  if (matrix->strings == NULL)
    matrix->strings = g_string_chunk_new(1 << 16);
  char **block = g_new0(char *, MAX(rows, 1));
  for (size_t i = 0; i < rows; i++)
    block[i] = g_string_chunk_insert(matrix->strings, labels[first + i]);
  g_string_chunk_free(all);
  g_free(matrix->row_labels);
  matrix->row_labels = block;
  return TRUE;
}
