/* The commands' --help: GLib's option text, regrouped into the same sections in the same order for
 * every command (input, annotations, search, clustering, output, performance, pipeline, other) and
 * wrapped at 80 columns. Commands declare their options as GOptionEntry tables, as GLib wants;
 * where each option is listed is decided here, once, so that `--threads` sits in the same place
 * in every command's help. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands/options.h"

enum {
  KNNWB_HELP_INPUT,
  KNNWB_HELP_ANNOTATIONS,
  KNNWB_HELP_SEARCH,
  KNNWB_HELP_CLUSTERING,
  KNNWB_HELP_OUTPUT,
  KNNWB_HELP_PERFORMANCE,
  KNNWB_HELP_PIPELINE,
  KNNWB_HELP_OTHER,
  KNNWB_HELP_N_SECTIONS
};

static const char *const knnwb_help_section_names[KNNWB_HELP_N_SECTIONS] = {
    "Input",  "Sample annotations", "Search",   "Clustering",
    "Output", "Performance",        "Pipeline", "Other"};

/* Where each long option is listed, in listing order. An entry naming a command applies to that
 * command alone (render's --labels draws labels; everywhere else --labels reads them) and wins
 * over the entry for every command. An option missing here is listed under "Other" and
 * test_host_help_layout fails, so that new options get a place. */
static const struct {
  const char *command; /* NULL: every command */
  const char *option;
  int section;
} knnwb_help_places[] = {
    {NULL, "format", KNNWB_HELP_INPUT},
    {NULL, "transpose", KNNWB_HELP_INPUT},
    {NULL, "header", KNNWB_HELP_INPUT},
    {NULL, "label-column", KNNWB_HELP_INPUT},
    {NULL, "labels", KNNWB_HELP_INPUT},
    {NULL, "skip-columns", KNNWB_HELP_INPUT},
    {NULL, "use-rep", KNNWB_HELP_INPUT},
    {NULL, "layer", KNNWB_HELP_INPUT},
    {NULL, "missing", KNNWB_HELP_INPUT},
    {NULL, "drop-missing", KNNWB_HELP_INPUT},
    {NULL, "drop-degenerate", KNNWB_HELP_INPUT},
    {NULL, "query", KNNWB_HELP_INPUT},
    {NULL, "pair-rows", KNNWB_HELP_INPUT},
    {NULL, "phenotype", KNNWB_HELP_ANNOTATIONS},
    {NULL, "phenotype-id", KNNWB_HELP_ANNOTATIONS},
    {NULL, "phenotype-label", KNNWB_HELP_ANNOTATIONS},
    {NULL, "phenotype-missing", KNNWB_HELP_ANNOTATIONS},
    {NULL, "classes", KNNWB_HELP_ANNOTATIONS},
    {NULL, "classes-id", KNNWB_HELP_ANNOTATIONS},
    {NULL, "annotation", KNNWB_HELP_ANNOTATIONS},
    {NULL, "annotation-id", KNNWB_HELP_ANNOTATIONS},
    {NULL, "sample-labels", KNNWB_HELP_ANNOTATIONS},
    {NULL, "k", KNNWB_HELP_SEARCH},
    {NULL, "metric", KNNWB_HELP_SEARCH},
    {NULL, "screen", KNNWB_HELP_SEARCH},
    {NULL, "focus", KNNWB_HELP_SEARCH},
    {NULL, "order", KNNWB_HELP_SEARCH},
    {NULL, "direction", KNNWB_HELP_SEARCH},
    {NULL, "ops", KNNWB_HELP_SEARCH},
    {NULL, "metafeatures", KNNWB_HELP_SEARCH},
    {NULL, "folds", KNNWB_HELP_SEARCH},
    {NULL, "method", KNNWB_HELP_CLUSTERING},
    {NULL, "snn-weight", KNNWB_HELP_CLUSTERING},
    {NULL, "similarity", KNNWB_HELP_CLUSTERING},
    {NULL, "resolution", KNNWB_HELP_CLUSTERING},
    {NULL, "objective", KNNWB_HELP_CLUSTERING},
    {NULL, "steps", KNNWB_HELP_CLUSTERING},
    {NULL, "height", KNNWB_HELP_CLUSTERING},
    {NULL, "clusters", KNNWB_HELP_CLUSTERING},
    {NULL, "output", KNNWB_HELP_OUTPUT},
    {NULL, "output-format", KNNWB_HELP_OUTPUT},
    {"render", "labels", KNNWB_HELP_OUTPUT},
    {"render", "edges", KNNWB_HELP_OUTPUT},
    {"render", "width", KNNWB_HELP_OUTPUT},
    {NULL, "density", KNNWB_HELP_OUTPUT},
    {NULL, "graph", KNNWB_HELP_OUTPUT},
    {NULL, "weights", KNNWB_HELP_OUTPUT},
    {NULL, "into", KNNWB_HELP_OUTPUT},
    {NULL, "lists-dtype", KNNWB_HELP_OUTPUT},
    {NULL, "layout", KNNWB_HELP_OUTPUT},
    {NULL, "table", KNNWB_HELP_OUTPUT},
    {NULL, "metrics", KNNWB_HELP_OUTPUT},
    {NULL, "gml", KNNWB_HELP_OUTPUT},
    {NULL, "graphml", KNNWB_HELP_OUTPUT},
    {NULL, "newick", KNNWB_HELP_OUTPUT},
    {NULL, "hierarchy", KNNWB_HELP_OUTPUT},
    {NULL, "linkage", KNNWB_HELP_OUTPUT},
    {NULL, "plots", KNNWB_HELP_OUTPUT},
    {NULL, "plots-top", KNNWB_HELP_OUTPUT},
    {NULL, "plots-color-by", KNNWB_HELP_OUTPUT},
    {NULL, "title", KNNWB_HELP_OUTPUT},
    {NULL, "color-by", KNNWB_HELP_OUTPUT},
    {NULL, "report", KNNWB_HELP_OUTPUT},
    {NULL, "output-dir", KNNWB_HELP_OUTPUT},
    {NULL, "backend", KNNWB_HELP_PERFORMANCE},
    {NULL, "threads", KNNWB_HELP_PERFORMANCE},
    {NULL, "memory", KNNWB_HELP_PERFORMANCE},
    {NULL, "devices", KNNWB_HELP_PERFORMANCE},
    {NULL, "gpu-memory", KNNWB_HELP_PERFORMANCE},
    {NULL, "mpi-input", KNNWB_HELP_PERFORMANCE},
    {NULL, "set", KNNWB_HELP_PIPELINE},
    {NULL, "dry-run", KNNWB_HELP_PIPELINE},
    {NULL, "plugin-path", KNNWB_HELP_PIPELINE},
    {NULL, "confine", KNNWB_HELP_PIPELINE},
    {NULL, "seed", KNNWB_HELP_OTHER},
    {NULL, "quiet", KNNWB_HELP_OTHER},
    {NULL, "brief", KNNWB_HELP_OTHER},
    {NULL, "help", KNNWB_HELP_OTHER},
};

static int knnwb_host_help_place(const char *command, const char *option, int *section)
{
  for (int specific = 1; specific >= 0; specific--)
    for (size_t p = 0; p < G_N_ELEMENTS(knnwb_help_places); p++) {
      const char *only = knnwb_help_places[p].command;
      if ((specific ? g_strcmp0(only, command) == 0 && only != NULL : only == NULL) &&
          strcmp(knnwb_help_places[p].option, option) == 0) {
        *section = knnwb_help_places[p].section;
        return (int)p;
      }
    }
  *section = KNNWB_HELP_OTHER;
  return (int)G_N_ELEMENTS(knnwb_help_places);
}

/* Appends text to out as lines of at most width columns: the first line after first_prefix, the
 * others after an indent of the same width (hanging). Breaks at spaces; a word longer than a
 * line is cut, so that no line is ever longer than width. */
static void knnwb_help_wrap(GString *out, const char *first_prefix, const char *text, int width)
{
  const glong indent = g_utf8_strlen(first_prefix, -1);
  const glong room = MAX(width - indent, 20);
  g_string_append(out, first_prefix);
  glong column = 0;
  g_auto(GStrv) words = g_strsplit(text, " ", -1);
  for (guint w = 0; words[w] != NULL; w++) {
    const char *word = words[w];
    if (*word == '\0')
      continue;
    while (word != NULL && *word != '\0') {
      glong length = g_utf8_strlen(word, -1);
      if (column > 0 && column + 1 + length > room) {
        g_string_append_printf(out, "\n%*s", (int)indent, "");
        column = 0;
      }
      if (column > 0) {
        g_string_append_c(out, ' ');
        column++;
      }
      if (length <= room - column) {
        g_string_append(out, word);
        column += length;
        word = NULL;
      } else { /* longer than a whole line: cut it */
        const char *cut = g_utf8_offset_to_pointer(word, room - column);
        g_string_append_len(out, word, cut - word);
        column = room;
        word = cut;
      }
    }
  }
  g_string_append_c(out, '\n');
}

/* Free text (the summary, the description): lines of at least 70 columns were broken by hand
 * and join the next line into a paragraph; shorter lines end theirs; indented lines (examples,
 * commands) keep their indent. Every paragraph is wrapped at width. */
static void knnwb_help_paragraphs(GString *out, char **lines, guint from, guint to, int width)
{
  GString *paragraph = g_string_new(NULL);
  g_autofree char *indent = NULL;
  for (guint l = from; l <= to; l++) {
    const char *line = l < to ? lines[l] : "";
    const gboolean blank = *line == '\0';
    const size_t spaces = strspn(line, " ");
    if (!blank && paragraph->len > 0 && spaces == strlen(indent))
      g_string_append_c(paragraph, ' ');
    else if (!blank && paragraph->len > 0) {
      knnwb_help_wrap(out, indent, paragraph->str, width);
      g_string_truncate(paragraph, 0);
    }
    if (!blank) {
      if (paragraph->len == 0) {
        g_free(indent);
        indent = g_strndup(line, spaces);
      }
      g_string_append(paragraph, line + spaces);
    }
    if (paragraph->len > 0 && (blank || g_utf8_strlen(line, -1) < 70)) {
      knnwb_help_wrap(out, indent, paragraph->str, width);
      g_string_truncate(paragraph, 0);
    }
    if (blank && l < to)
      g_string_append_c(out, '\n');
  }
  g_string_free(paragraph, TRUE);
}

typedef struct {
  char *names;       /* "-k, --k=K" */
  char *description; /* may be empty */
  int section;
  int place;
} KnnwbHelpOption;

static void knnwb_help_option_clear(gpointer data)
{
  KnnwbHelpOption *option = data;
  g_free(option->names);
  g_free(option->description);
}

static gint knnwb_help_option_compare(gconstpointer a, gconstpointer b)
{
  const KnnwbHelpOption *x = a, *y = b;
  if (x->section != y->section)
    return x->section - y->section;
  if (x->place != y->place)
    return x->place - y->place;
  return strcmp(x->names, y->names);
}

/* An option line of GLib's help ("  -k, --k=K    Neighbours per row"), with its place. */
static KnnwbHelpOption knnwb_help_option_parse(const char *command, const char *line)
{
  KnnwbHelpOption option = {0};
  const char *start = line + strspn(line, " ");
  const char *gap = strstr(start, "  ");
  option.names = gap ? g_strndup(start, (gsize)(gap - start)) : g_strdup(start);
  option.description = gap ? g_strstrip(g_strdup(gap)) : g_strdup("");
  const char *dashes = strstr(option.names, "--");
  g_autofree char *name =
      dashes ? g_strndup(dashes + 2, strcspn(dashes + 2, "= ")) : g_strdup(option.names);
  option.place = knnwb_host_help_place(command, name, &option.section);
  return option;
}

/* The options in their sections, aligned: names in a column of at most 28, descriptions wrapped
 * beside them (under them when the names are longer). */
static void knnwb_help_options(GString *out, GArray *options, int width)
{
  g_array_sort(options, knnwb_help_option_compare);
  glong column = 0;
  for (guint o = 0; o < options->len; o++)
    column = MAX(column, g_utf8_strlen(g_array_index(options, KnnwbHelpOption, o).names, -1));
  column = MIN(column, 28) + 4;
  int section = -1;
  for (guint o = 0; o < options->len; o++) {
    const KnnwbHelpOption *option = &g_array_index(options, KnnwbHelpOption, o);
    if (option->section != section) {
      section = option->section;
      g_string_append_printf(out, "\n%s:\n", knnwb_help_section_names[section]);
    }
    const glong length = g_utf8_strlen(option->names, -1);
    g_autofree char *prefix = NULL;
    if (length + 4 <= column) {
      prefix = g_strdup_printf("  %s%*s", option->names, (int)(column - 2 - length), "");
    } else {
      g_string_append_printf(out, "  %s\n", option->names);
      prefix = g_strdup_printf("%*s", (int)column, "");
    }
    knnwb_help_wrap(out, prefix, option->description, width);
  }
}

/* Ends out with one newline, whatever blank lines GLib's text left before a heading or at its end.
 */
static void knnwb_help_trim(GString *out)
{
  while (out->len > 1 && out->str[out->len - 1] == '\n' && out->str[out->len - 2] == '\n')
    g_string_truncate(out, out->len - 1);
}

char *knnwb_host_help_format(const char *glib_help, const char *command, int width)
{
  g_auto(GStrv) lines = g_strsplit(glib_help, "\n", -1);
  const guint n = g_strv_length(lines);
  /* GLib's layout: a heading and the usage line, a blank line, the summary, then option
   * sections (a heading, then lines starting "  -"), then the description. */
  guint first_option = n, last_option = 0;
  for (guint l = 0; l < n; l++)
    if (g_str_has_prefix(lines[l], "  -")) {
      first_option = MIN(first_option, l);
      last_option = l;
    }
  GString *out = g_string_new("Usage:\n");
  guint l = 1;
  for (; l < n && lines[l][0] == ' '; l++) {
    /* "[OPTION…]" without a UTF-8 locale becomes "[OPTION?]": the same in plain ASCII. */
    g_autofree char *usage = g_strstrip(g_strdup(lines[l]));
    const char *option = strstr(usage, "[OPTION");
    const char *close = option ? strchr(option, ']') : NULL;
    g_autofree char *plain =
        close ? g_strdup_printf("%.*s[OPTION...]%s", (int)(option - usage), usage, close + 1)
              : g_strdup(usage);
    knnwb_help_wrap(out, "  ", plain, width);
  }
  g_autoptr(GArray) options = g_array_new(FALSE, TRUE, sizeof(KnnwbHelpOption));
  g_array_set_clear_func(options, knnwb_help_option_clear);
  guint summary_end = first_option < n ? first_option - 1 : n; /* the first section's heading */
  g_string_append_c(out, '\n');
  knnwb_help_paragraphs(out, lines, l + (l < n && lines[l][0] == '\0'), summary_end, width);
  for (guint o = first_option; o < n && o <= last_option; o++) {
    if (!g_str_has_prefix(lines[o], "  -"))
      continue;
    KnnwbHelpOption option = knnwb_help_option_parse(command, lines[o]);
    g_array_append_val(options, option);
  }
  knnwb_help_trim(out);
  knnwb_help_options(out, options, width);
  if (last_option + 1 < n) {
    g_string_append_c(out, '\n');
    knnwb_help_paragraphs(out, lines, last_option + 1 + (lines[last_option + 1][0] == '\0'), n,
                          width);
  }
  knnwb_help_trim(out);
  return g_string_free(out, FALSE);
}

gboolean knnwb_host_options_ask_help(int argc, char **argv, int first)
{
  for (int a = first; a < argc; a++) {
    const char *arg = argv[a];
    if (strcmp(arg, "--") == 0)
      return FALSE;
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "-?") == 0 || strcmp(arg, "--help") == 0 ||
        strcmp(arg, "--help-all") == 0)
      return TRUE;
  }
  return FALSE;
}

gboolean knnwb_host_options_parse(GOptionContext *context, const char *command, int *argc,
                                  char ***argv, GError **error)
{
  if (knnwb_host_options_ask_help(*argc, *argv, 1)) {
    g_autofree char *text = g_option_context_get_help(context, FALSE, NULL);
    g_autofree char *formatted = knnwb_host_help_format(text, command, 80);
    fputs(formatted, stdout);
    fflush(stdout);
    exit(0);
  }
  /* GLib would exit(0) for help inside a cluster of short options (-qh) as well: under mpirun a
   * rank that joined the job would leave it without finalising, and the launcher fail the job.
   * Such a cluster is an unknown option instead, a usage error on every rank alike. */
  g_option_context_set_help_enabled(context, FALSE);
  return g_option_context_parse(context, argc, argv, error);
}
