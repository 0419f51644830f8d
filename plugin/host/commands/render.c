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

typedef struct {
  char *output;
  char **rest;
  int width;
  int label_limit;
  gboolean quiet;
  char *edges;
  char *color_by;
  char *title;
  gboolean density;
  /* Parsed. */
  int edges_mode; /* KnnwbRenderEdges */
  KnnwbPictureFormat format;
} KnnwbRenderCommand;

/* The options of knnwb render, into command. */
static GOptionContext *knnwb_render_options_new(KnnwbRenderCommand *command)
{
  GOptionEntry entries[] = {
      {"edges", 0, 0, G_OPTION_ARG_STRING, &command->edges,
       knnwb_host_help_choices(
           &knnwb_render_edges_table, "",
           " (default: drawn up to 50,000 edges one by one, and every edge in a "
           "density image)",
           NULL, ""),
       KNNWB_ENUM_CHOICES(KNNWB_RENDER_EDGES_NAMES)},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &command->output, "picture.png, .svg or .pdf",
       "OUT"},
      {"width", 'w', 0, G_OPTION_ARG_INT, &command->width,
       "width in pixels (PNG) or points (SVG, PDF); the height follows the drawing (default 1200)",
       "W"},
      {"labels", 0, 0, G_OPTION_ARG_INT, &command->label_limit,
       "try a label on every node when there are at most N (default 150), else on N hubs; the "
       "focus and its neighbours are always labelled; labels never overlap",
       "N"},
      {"color-by", 0, 0, G_OPTION_ARG_STRING, &command->color_by,
       "colour nodes by this node attribute of the GML (cluster, an annotation column): a "
       "palette and a legend with counts for categories, a colour scale for numbers (default: "
       "cluster when the GML has it, else the GML's own fills)",
       "ATTRIBUTE"},
      {"title", 0, 0, G_OPTION_ARG_STRING, &command->title,
       "title above the picture (default: the file name and what the colours mean; \"\" for "
       "none)",
       "TEXT"},
      {"density", 0, 0, G_OPTION_ARG_NONE, &command->density,
       "draw the layout as a density image (nodes binned per pixel, edges faded, clusters "
       "outlined and named); the default above 20,000 nodes",
       NULL},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &command->quiet, "No summary", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &command->rest, NULL, "GRAPH.gml"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  /* GLib names GRAPH.gml in the usage line from the remaining-arguments entry above. */
  GOptionContext *context = g_option_context_new("-o OUT");
  g_option_context_set_summary(
      context,
      "Draws a laid-out GML (from knnwb knn/cluster/neighbourhood with a layout) as a PNG, "
      "SVG or PDF\nwith cairo: nodes coloured by an attribute with a legend, a title, edges "
      "under the nodes\n(arrows when directed), labels placed without overlap (the focus, its "
      "neighbours, then\nhubs), focus nodes as red hexagons; above 20,000 nodes a density "
      "image. See docs/pictures.md.");
  g_option_context_set_description(
      context, "Example:\n"
               "  knnwb render clusters.gml --color-by group -o clusters.png\n\n"
               "Exit status: 0 on success, 1 when the input or the drawing "
               "fails, 2 on a usage error,\n130/143 when interrupted.");
  g_option_context_add_main_entries(context, entries, NULL);
  return context;
}

/* The files of the run, for the checks every command shares. */
static KnnwbHostFiles *knnwb_render_files(const KnnwbRenderCommand *command)
{
  KnnwbHostFiles *files = knnwb_host_files_new();
  knnwb_host_files_input(files, command->rest[0], "the GML file");
  knnwb_host_files_output(files, command->output, "-o");
  return files;
}

/* The command line into command (usage errors). */
static gboolean knnwb_render_parse(GOptionContext *context, int argc, char **argv,
                                   KnnwbRenderCommand *command, GError **error)
{
  if (!knnwb_host_options_parse(context, "render", &argc, &argv, error))
    return FALSE;
  if (command->rest == NULL || command->rest[0] == NULL || command->rest[1] != NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "one GRAPH.gml expected");
    return FALSE;
  }
  if (!knnwb_host_required(command->output != NULL, "-o OUT", error))
    return FALSE;
  g_autoptr(KnnwbHostFiles) files = knnwb_render_files(command);
  if (!knnwb_host_files_check_names(files, error))
    return FALSE;
  if (command->width < 16 || command->width > 20000) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "--width %d: give 16 to 20000 pixels", command->width);
    return FALSE;
  }
  command->label_limit = MAX(command->label_limit, 0);
  return (command->edges == NULL ||
          knnwb_host_option_choice(&knnwb_render_edges_table, "--edges", command->edges,
                                   &command->edges_mode, error)) &&
         knnwb_render_format_from_path(command->output, &command->format, error);
}

/* Reads the GML, draws it into the output's temporary with its progress line and commits. */
static gboolean knnwb_render_execute(const KnnwbRenderCommand *command, GPtrArray *outputs,
                                     GError **error)
{
  g_autoptr(KnnwbHostFiles) files = knnwb_render_files(command);
  if (!knnwb_host_files_check(files, error))
    return FALSE;
  const volatile gint *cancel = knnwb_host_signals_install();
  const char *temporary = knnwb_host_outputs_add(outputs, command->output, error);
  if (temporary == NULL)
    return FALSE;
  gint64 start = g_get_monotonic_time();
  g_autoptr(KnnwbDrawing) drawing = knnwb_formats_read_gml_full(command->rest[0], 0, cancel, error);
  if (drawing == NULL)
    return FALSE;
  gboolean draw_edges = command->edges_mode == KNNWB_RENDER_EDGES_ALL;
  /* Auto: up to 50,000 edges drawn one by one; a density image bins them whatever their number. */
  if (command->edges_mode == KNNWB_RENDER_EDGES_AUTO)
    draw_edges = drawing->edges->len <= 50000 || command->density || drawing->nodes->len > 20000;
  KnnwbHostProgress *progress = knnwb_host_progress_new("render", command->quiet);
  knnwb_host_progress_set_unit(progress, "shapes");
  KnnwbRenderOptions options;
  knnwb_drawing_render_options_init(&options);
  options.width = command->width;
  options.label_limit = (guint)command->label_limit;
  options.draw_edges = draw_edges;
  options.color_by = command->color_by;
  options.title = command->title;
  options.name = command->rest[0];
  options.density = command->density;
  gboolean drawn =
      knnwb_drawing_render_picture(drawing, temporary, command->format, &options, cancel,
                                   progress ? knnwb_host_progress_update : NULL, progress, error);
  knnwb_host_progress_finish(progress);
  if (!drawn || !knnwb_host_outputs_commit(outputs, cancel, error))
    return FALSE;
  if (!command->quiet)
    g_printerr("knnwb: %u node%s, %u edge%s -> %s (%.2f s)\n", drawing->nodes->len,
               KNNWB_PLURAL(drawing->nodes->len), drawing->edges->len,
               KNNWB_PLURAL(drawing->edges->len), command->output,
               (double)(g_get_monotonic_time() - start) / 1e6);
  return TRUE;
}

int knnwb_host_command_render(int argc, char **argv)
{
  KnnwbRenderCommand command = {.width = 1200,
                                .label_limit = 150,
                                .edges_mode = KNNWB_RENDER_EDGES_AUTO,
                                .format = KNNWB_PICTURE_PNG};
  g_autoptr(GOptionContext) context = knnwb_render_options_new(&command);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free);
  const gboolean parsed = knnwb_render_parse(context, argc, argv, &command, &error);
  const gboolean done = parsed && knnwb_render_execute(&command, outputs, &error);
  const int status = knnwb_host_command_finish("render", parsed, done, outputs, error);
  g_free(command.output);
  g_free(command.edges);
  g_free(command.color_by);
  g_free(command.title);
  g_strfreev(command.rest);
  return status;
}
