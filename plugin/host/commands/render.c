/* `knnwb render GRAPH.gml -o picture.png|svg|pdf`: the laid-out graph as a picture, for people
 * who do not use yEd, with the GML's colours and the focus highlighted. */
#include <string.h>
#include <knnwb/error.h>
#include "options.h"
#include "runtime/runtime.h"
#include <knnwb/drawing.h>

/* --edges: drawn up to 50,000 edges (auto), always or never. */
typedef enum {
  KNNWB_RENDER_EDGES_AUTO,
  KNNWB_RENDER_EDGES_ALL,
  KNNWB_RENDER_EDGES_NONE
} KnnwbRenderEdges;
/* clang-format off */
#define KNNWB_RENDER_EDGES_NAMES(X)                                                                \
  X(KNNWB_RENDER_EDGES_AUTO, "auto")                                                               \
  X(KNNWB_RENDER_EDGES_ALL, "all")                                                                 \
  X(KNNWB_RENDER_EDGES_NONE, "none")
/* clang-format on */
static const KnnwbEnumName knnwb_render_edges_names[] = {
    KNNWB_RENDER_EDGES_NAMES(KNNWB_ENUM_ENTRY)};
/* Unknown names are reported by knnwb_host_option_choice. */
static const KnnwbEnumTable knnwb_render_edges_table =
    KNNWB_ENUM_TABLE(knnwb_render_edges_names, 0, " or ", "", "", "", "");

static gboolean knnwb_render_format_from_path(const char *path, KnnwbPictureFormat *format,
                                              GError **error)
{
  const char *dot = strrchr(path, '.');
  if (dot != NULL && g_ascii_strcasecmp(dot, ".png") == 0)
    *format = KNNWB_PICTURE_PNG;
  else if (dot != NULL && g_ascii_strcasecmp(dot, ".svg") == 0)
    *format = KNNWB_PICTURE_SVG;
  else if (dot != NULL && g_ascii_strcasecmp(dot, ".pdf") == 0)
    *format = KNNWB_PICTURE_PDF;
  else {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: the picture format comes from the extension: .png, .svg or .pdf", path);
    return FALSE;
  }
  return TRUE;
}

int knnwb_host_command_render(int argc, char **argv)
{
  char *output = NULL;
  char **rest = NULL;
  int width = 1200;
  int label_limit = 150;
  gboolean quiet = FALSE;
  char *edges = NULL;
  GOptionEntry entries[] = {
      {"edges", 0, 0, G_OPTION_ARG_STRING, &edges,
       knnwb_host_help_choices(&knnwb_render_edges_table, "",
                               " (default: drawn up to 50,000 edges; beyond, a 1200-pixel picture "
                               "is a grey veil and slow to draw)",
                               NULL, ""),
       KNNWB_ENUM_CHOICES(KNNWB_RENDER_EDGES_NAMES)},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "picture.png, .svg or .pdf", "OUT"},
      {"width", 'w', 0, G_OPTION_ARG_INT, &width,
       "width in pixels (PNG) or points (SVG, PDF); the height follows the drawing (default 1200)",
       "W"},
      {"labels", 0, 0, G_OPTION_ARG_INT, &label_limit,
       "label every node when there are at most N (default 150); the focus is always labelled",
       "N"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "No summary", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &rest, NULL, "GRAPH.gml"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  /* GLib names GRAPH.gml in the usage line from the remaining-arguments entry above. */
  g_autoptr(GOptionContext) context = g_option_context_new("-o OUT");
  g_option_context_set_summary(
      context,
      "Draws a laid-out GML (from knnwb knn/cluster/neighbourhood with a layout) as a PNG, "
      "SVG or PDF\nwith cairo: the GML's node colours and sizes, edges under the nodes, "
      "focus nodes as red\nhexagons with their labels on top.");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free);
  g_autoptr(KnnwbDrawing) drawing = NULL;
  KnnwbPictureFormat format = KNNWB_PICTURE_PNG;
  int status = 1;
  gboolean usage = TRUE;
  if (!g_option_context_parse(context, &argc, &argv, &error))
    goto out;
  if (rest == NULL || rest[0] == NULL || rest[1] != NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "one GRAPH.gml expected");
    goto out;
  }
  if (output == NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "-o OUT is required");
    goto out;
  }
  if (width < 16 || width > 20000) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--width %d: give 16 to 20000 pixels", width);
    goto out;
  }
  if (label_limit < 0)
    label_limit = 0;
  int edges_mode = KNNWB_RENDER_EDGES_AUTO;
  if (edges != NULL &&
      !knnwb_host_option_choice(&knnwb_render_edges_table, "--edges", edges, &edges_mode, &error))
    goto out;
  if (!knnwb_render_format_from_path(output, &format, &error))
    goto out;
  usage = FALSE;
  if (!knnwb_host_check_output(output, &error))
    goto out;
  const volatile gint *cancel = knnwb_host_signals_install();
  const char *temporary = knnwb_host_outputs_add(outputs, output, &error);
  if (temporary == NULL)
    goto out;
  gint64 start = g_get_monotonic_time();
  drawing = knnwb_render_read_gml(rest[0], &error);
  if (drawing == NULL)
    goto out;
  gboolean draw_edges = edges_mode == KNNWB_RENDER_EDGES_ALL;
  if (edges_mode == KNNWB_RENDER_EDGES_AUTO)
    draw_edges = drawing->edges->len <= 50000;
  KnnwbHostProgress *progress = knnwb_host_progress_new("render", quiet);
  knnwb_host_progress_set_unit(progress, "shapes");
  gboolean drawn =
      knnwb_render_draw(drawing, temporary, format, width, (guint)label_limit, draw_edges, cancel,
                        progress ? knnwb_host_progress_update : NULL, progress, &error);
  knnwb_host_progress_finish(progress);
  if (!drawn || !knnwb_host_outputs_commit(outputs, cancel, &error))
    goto out;
  if (!quiet)
    g_printerr("knnwb: %u node%s, %u edge%s -> %s (%.2f s)\n", drawing->nodes->len,
               KNNWB_PLURAL(drawing->nodes->len), drawing->edges->len,
               KNNWB_PLURAL(drawing->edges->len), output,
               (double)(g_get_monotonic_time() - start) / 1e6);
  status = 0;
out:
  if (status != 0) {
    knnwb_host_outputs_discard(outputs);
    knnwb_host_outputs_name_targets(outputs, error);
    status = knnwb_host_command_fail("render", error, usage);
  }
  g_free(output);
  g_free(edges);
  g_strfreev(rest);
  return status;
}
