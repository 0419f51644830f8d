/* The GPU list of `--devices 0,1` and of the kNN steps' `devices` parameter: one reading for both.
 *
 * Header-only (static inline, like knnwb_kind_to_string in <knnwb/plugin.h>): the host and a
 * plugin both reach it, and a plugin never calls into the host.
 */
#ifndef KNNWB_DEVICE_LIST_H
#define KNNWB_DEVICE_LIST_H

#include <glib.h>
#include <knnwb/error.h>

G_BEGIN_DECLS

/** The largest GPU number a list may name (a typo such as 10000 is refused, not looked for). */
#define KNNWB_DEVICE_LIST_MAX 1024

/**
 * Parses text, comma-separated GPU numbers ("0,1", " 2 , 3 ": blanks around each are ignored),
 * appending each to devices (a GArray of int). NULL or "" means every visible GPU: nothing is
 * appended. Numbers are kept in the order and with the repetitions given.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT, "what: 'entry' is not a GPU number (expected e.g. 0,1)",
 * for an empty entry, a non-decimal one or one outside 0 .. KNNWB_DEVICE_LIST_MAX; devices may
 * then hold the entries before it. what names the option or parameter ("--devices", "devices").
 * O(length of text).
 */
static inline gboolean knnwb_device_list_parse(const char *text, const char *what, GArray *devices,
                                               GError **error)
{
  if (text == NULL || *text == '\0')
    return TRUE;
  gchar **parts = g_strsplit(text, ",", -1);
  gboolean ok = TRUE;
  for (gchar **part = parts; *part != NULL && ok; part++) {
    char *end = NULL;
    gint64 device = g_ascii_strtoll(g_strstrip(*part), &end, 10);
    if (**part == '\0' || *end != '\0' || device < 0 || device > KNNWB_DEVICE_LIST_MAX) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "%s: '%s' is not a GPU number (expected e.g. 0,1)", what, *part);
      ok = FALSE;
    } else {
      int value = (int)device;
      g_array_append_val(devices, value);
    }
  }
  g_strfreev(parts);
  return ok;
}

/**
 * The first GPU number devices (a GArray of int, as knnwb_device_list_parse fills it) lists more
 * than once, or -1 when none repeats. Why it matters: each listing is a worker of its own, so a
 * GPU listed twice runs two workers that share it (slower than one; useful only for checks of the
 * several-GPU paths on one GPU). O(len^2), len at most a few dozen.
 */
static inline int knnwb_device_list_repeated(const GArray *devices)
{
  for (guint i = 0; devices != NULL && i < devices->len; i++)
    for (guint j = 0; j < i; j++)
      if (g_array_index(devices, int, i) == g_array_index(devices, int, j))
        return g_array_index(devices, int, i);
  return -1;
}

/** A warning where devices lists a GPU more than once (knnwb_device_list_repeated); what names the
 * option or parameter. O(len^2). */
static inline void knnwb_device_list_warn_repeated(const GArray *devices, const char *what)
{
  const int repeated = knnwb_device_list_repeated(devices);
  if (repeated >= 0)
    g_warning("%s lists GPU %d more than once: its workers share that GPU, which is slower than "
              "listing it once (meant for checks of the several-GPU paths)",
              what, repeated);
}

G_END_DECLS

#endif
