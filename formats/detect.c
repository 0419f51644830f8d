/* Input format names and detection by extension, then by content. */
#include "formats_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static const char *const knnwb_input_names[] = {"auto", "cibm", "csv", "tsv", "gct", "npy"};

gboolean knnwb_formats_input_from_string(const char *name, KnnwbInputFormat *format, GError **error)
{
  for (size_t i = 0; i < G_N_ELEMENTS(knnwb_input_names); i++)
    if (name != NULL && g_ascii_strcasecmp(name, knnwb_input_names[i]) == 0) {
      *format = (KnnwbInputFormat)i;
      return TRUE;
    }
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "unknown input format '%s' (known: auto, cibm, csv, tsv, gct, npy)",
              name ? name : "(null)");
  return FALSE;
}

const char *knnwb_formats_input_to_string(KnnwbInputFormat format)
{
  if ((size_t)format < G_N_ELEMENTS(knnwb_input_names))
    return knnwb_input_names[format];
  return "unknown";
}

static gboolean knnwb_formats_has_suffix(const char *path, const char *suffix)
{
  size_t n = strlen(path), m = strlen(suffix);
  return n >= m && g_ascii_strcasecmp(path + n - m, suffix) == 0;
}

gboolean knnwb_formats_detect_input(const char *path, KnnwbInputFormat *format, GError **error)
{
  static const struct {
    const char *suffix;
    KnnwbInputFormat format;
  } by_extension[] = {{".npy", KNNWB_INPUT_NPY},
                      {".gct", KNNWB_INPUT_GCT},
                      {".csv", KNNWB_INPUT_CSV},
                      {".tsv", KNNWB_INPUT_TSV},
                      {".tab", KNNWB_INPUT_TSV}};
  for (size_t i = 0; i < G_N_ELEMENTS(by_extension); i++)
    if (knnwb_formats_has_suffix(path, by_extension[i].suffix)) {
      *format = by_extension[i].format;
      return TRUE;
    }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int saved = errno;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: cannot open: %s", path, g_strerror(saved));
    return FALSE;
  }
  char head[65536];
  ssize_t got = read(fd, head, sizeof head - 1);
  close(fd);
  if (got <= 0) {
    knnwb_formats_parse_error(error, path, 1, 0, "the file is empty%s",
                              got < 0 ? " or unreadable" : "");
    return FALSE;
  }
  head[got] = '\0';
  const char *text = head;
  if (got >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
    text += 3;
  if (got >= 6 && memcmp(head, "\x93NUMPY", 6) == 0) {
    *format = KNNWB_INPUT_NPY;
    return TRUE;
  }
  while (*text == ' ' || *text == '\r' || *text == '\n' || *text == '\t')
    text++;
  if (g_str_has_prefix(text, "#1.2") || g_str_has_prefix(text, "#1.3")) {
    *format = KNNWB_INPUT_GCT;
    return TRUE;
  }
  if (g_str_has_prefix(text, "<MicroarrayData>")) {
    *format = KNNWB_INPUT_CIBM;
    return TRUE;
  }
  size_t first_line = strcspn(text, "\n");
  const char *tab = memchr(text, '\t', first_line);
  const char *comma = memchr(text, ',', first_line);
  if (tab != NULL || comma != NULL) {
    *format = tab != NULL ? KNNWB_INPUT_TSV : KNNWB_INPUT_CSV;
    return TRUE;
  }
  knnwb_formats_parse_error(error, path, 1, 0,
                            "cannot tell the format: not NPY, GCT or CIBM, and the first line has "
                            "no tab or comma; name it with --format");
  return FALSE;
}
