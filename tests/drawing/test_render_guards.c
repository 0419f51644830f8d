/*
 * What `knnwb render` refuses or survives: lists nested a million deep (no stack is used for
 * them), a file past the size cap, a device, a pipe without a writer (refused at once, never
 * read), a cancel flag raised while reading or drawing 150,000 nodes (an error, no picture), every
 * truncation of a GML with labels and attributes (an error, and under LeakSanitizer no leak), and
 * the program itself stopped by SIGINT while it draws (exit 130, "interrupted", no output).
 */
#include <knnwb/drawing.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "knnwb_test_process.h"

static char *write_text(const char *dir, const char *name, const char *text, gssize length)
{
  char *path = g_build_filename(dir, name, NULL);
  g_assert_true(g_file_set_contents(path, text, length, NULL));
  return path;
}

/* A node list a million levels deep inside a node: read without recursion; the node's own keys
 * still count and the file draws. Unclosed, the same nesting is a parse error naming a line. */
static void test_deep_nesting(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-guards-XXXXXX", NULL);
  const int depth = 1000000;
  GString *text = g_string_new("graph [\n node [ id 0 graphics [ x 0 y 0 ] deep\n");
  for (int i = 0; i < depth; i++)
    g_string_append(text, "[ a ");
  g_string_append(text, "[ ] ");
  g_string_append(text, "1 ");
  for (int i = 0; i < depth; i++)
    g_string_append(text, "] ");
  g_string_append(text, "]\n]\n");
  g_autofree char *good = write_text(dir, "deep.gml", text->str, (gssize)text->len);
  GError *error = NULL;
  KnnwbDrawing *drawing = knnwb_formats_read_gml(good, &error);
  /* "a [ ] 1" is not `key value`: the innermost level is an error with its line. */
  g_assert_null(drawing);
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_assert_true(g_str_has_prefix(error->message, good));
  g_assert_nonnull(strstr(error->message, ":3: "));
  g_clear_error(&error);
  /* Well formed: key [ key [ ... ] ] */
  g_string_assign(text, "graph [\n node [ id 0 graphics [ x 0 y 0 ] deep\n");
  for (int i = 0; i < depth; i++)
    g_string_append(text, "[ a ");
  g_string_append(text, "1 ");
  for (int i = 0; i < depth; i++)
    g_string_append(text, "] ");
  g_string_append(text, "]\n]\n");
  g_autofree char *nested = write_text(dir, "nested.gml", text->str, (gssize)text->len);
  drawing = knnwb_formats_read_gml(nested, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(drawing->nodes->len, ==, 1);
  knnwb_drawing_free(drawing);
  /* Never closed. */
  g_string_truncate(text, strstr(text->str, " 1 ") + 3 - text->str);
  g_autofree char *open = write_text(dir, "open.gml", text->str, (gssize)text->len);
  g_assert_null(knnwb_formats_read_gml(open, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE);
  g_assert_nonnull(strstr(error->message, "ends inside a list"));
  g_clear_error(&error);
  g_string_free(text, TRUE);
  g_unlink(good);
  g_unlink(nested);
  g_unlink(open);
  g_rmdir(dir);
}

/* Not read: a file over the cap (by its size, before a byte is read), a device, a directory, and a
 * FIFO without a writer (opening it does not wait for one). */
static void test_refused_inputs(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-guards-XXXXXX", NULL);
  g_autofree char *big = g_build_filename(dir, "big.gml", NULL);
  FILE *file = fopen(big, "w");
  g_assert_nonnull(file);
  fputs("graph [\n", file);
  for (int i = 0; i < 100000; i++)
    fputs(" node [ id 0 graphics [ x 0 y 0 ] ]\n", file);
  fputs("]\n", file);
  fclose(file);
  GError *error = NULL;
  g_assert_null(knnwb_formats_read_gml_full(big, 1 << 20, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
  g_assert_nonnull(strstr(error->message, "more than the 1048576 bytes"));
  g_clear_error(&error);
  g_autofree char *fifo = g_build_filename(dir, "pipe.gml", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  const char *refused[] = {"/dev/zero", dir, fifo};
  for (size_t i = 0; i < G_N_ELEMENTS(refused); i++) {
    g_assert_null(knnwb_formats_read_gml(refused[i], &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_IO);
    g_assert_nonnull(strstr(error->message, "not a regular file"));
    g_clear_error(&error);
  }
  /* A raised flag stops the reading at its first chunk. */
  gint cancel = 1;
  g_assert_null(knnwb_formats_read_gml_full(big, 0, &cancel, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
  g_clear_error(&error);
  g_unlink(fifo);
  g_unlink(big);
  g_rmdir(dir);
}

/* A GML of n nodes on a grid in 12 clusters, ring edges; its text. */
static GString *grid_gml(int n)
{
  GString *text = g_string_new("graph [\n directed 0\n");
  int side = (int)ceil(sqrt(n));
  for (int v = 0; v < n; v++)
    g_string_append_printf(text,
                           " node [ id %d label \"n%d\" cluster %d graphics [ x %d y %d w 30 h 30 "
                           "] ]\n",
                           v, v, v % 12, 40 * (v % side), 40 * (v / side));
  for (int v = 0; v < n; v++)
    g_string_append_printf(text, " edge [ source %d target %d ]\n", v, (v + 1) % n);
  g_string_append(text, "]\n");
  return text;
}

/* Raises the flag at the first progress report: drawing must stop before its total. */
typedef struct {
  gint cancel;
  uint64_t last, total;
} StopAtFirst;

static void stop_at_first(uint64_t done, uint64_t total, void *data)
{
  StopAtFirst *stop = data;
  stop->cancel = 1;
  stop->last = done, stop->total = total;
}

/* 150,000 nodes drawn one by one (and as a density image): a flag raised while drawing stops it
 * with an error and no picture. */
static void test_cancel_while_drawing(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-guards-XXXXXX", NULL);
  GString *text = grid_gml(150000);
  g_autofree char *gml = write_text(dir, "grid.gml", text->str, (gssize)text->len);
  g_string_free(text, TRUE);
  GError *error = NULL;
  g_autoptr(KnnwbDrawing) drawing = knnwb_formats_read_gml(gml, &error);
  g_assert_no_error(error);
  g_autofree char *png = g_build_filename(dir, "grid.png", NULL);
  KnnwbRenderOptions options;
  knnwb_drawing_render_options_init(&options);
  options.width = 600;
  options.density_above = G_MAXUINT; /* node by node */
  StopAtFirst stop = {0};
  gboolean ok = knnwb_drawing_render_picture(drawing, png, KNNWB_PICTURE_PNG, &options,
                                             &stop.cancel, stop_at_first, &stop, &error);
  g_assert_false(ok);
  if (g_error_matches(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT)) {
    g_test_skip("built without cairo");
  } else {
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
    g_assert_cmpuint(stop.last, <, stop.total);
    g_assert_false(g_file_test(png, G_FILE_TEST_EXISTS));
    /* The density image: a flag already raised. */
    g_clear_error(&error);
    options.density = TRUE;
    gint cancel = 1;
    g_assert_false(knnwb_drawing_render_picture(drawing, png, KNNWB_PICTURE_PNG, &options, &cancel,
                                                NULL, NULL, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
    g_assert_false(g_file_test(png, G_FILE_TEST_EXISTS));
  }
  g_clear_error(&error);
  g_unlink(gml);
  g_rmdir(dir);
}

/* Every prefix of a GML with labels, attributes and edges: read or refused, never leaking what
 * the unfinished node held (LeakSanitizer checks this in the sanitizer build). */
static void test_truncated(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-guards-XXXXXX", NULL);
  static const char text[] =
      "graph [ directed 1\n node [ id 1 label \"first &amp; one\" label \"again\" cluster 2 "
      "lineage \"B\" graphics [ x 0 y 0 fill \"#FF0000\" ] LabelGraphics [ fontSize 9 ] ]\n"
      " node [ id 2 label \"second\" lineage \"T\" age 44.5 graphics [ x 10 y 5 ] ]\n"
      " edge [ source 1 target 2 label \"e\" weight 0.5 graphics [ fill \"#00FF00\" ] ]\n]\n";
  g_autofree char *path = g_build_filename(dir, "cut.gml", NULL);
  for (size_t length = 0; length <= strlen(text); length++) {
    g_assert_true(g_file_set_contents(path, text, (gssize)length, NULL));
    GError *error = NULL;
    KnnwbDrawing *drawing = knnwb_formats_read_gml(path, &error);
    g_assert_true((drawing == NULL) != (error == NULL));
    if (length == strlen(text)) {
      g_assert_no_error(error);
      g_assert_cmpuint(drawing->nodes->len, ==, 2);
      g_assert_cmpstr(g_array_index(drawing->nodes, KnnwbDrawingNode, 0).label, ==, "first & one");
      const KnnwbDrawingAttribute *lineage = knnwb_drawing_attribute(drawing, "lineage");
      g_assert_nonnull(lineage);
      g_assert_cmpstr(g_ptr_array_index(lineage->texts, 1), ==, "T");
      const KnnwbDrawingAttribute *age = knnwb_drawing_attribute(drawing, "age");
      g_assert_true(isnan(g_array_index(age->numbers, double, 0)));
      g_assert_cmpfloat(g_array_index(age->numbers, double, 1), ==, 44.5);
      g_assert_cmpfloat(g_array_index(drawing->edges, KnnwbDrawingEdge, 0).weight, ==, 0.5);
    }
    g_clear_error(&error);
    knnwb_drawing_free(drawing);
  }
  g_unlink(path);
  g_rmdir(dir);
}

/* The program: SIGINT once its handlers are in place, while it reads or draws 150,000 nodes with
 * all their edges: exit 130, "interrupted" on stderr, no picture, no temporary. */
static void test_program_interrupted(void)
{
  g_autofree char *dir = g_dir_make_tmp("knnwb-guards-XXXXXX", NULL);
  GString *text = grid_gml(150000);
  g_autofree char *gml = write_text(dir, "grid.gml", text->str, (gssize)text->len);
  g_string_free(text, TRUE);
  g_autofree char *out_dir = g_build_filename(dir, "out", NULL);
  g_assert_cmpint(g_mkdir(out_dir, 0755), ==, 0);
  g_autofree char *png = g_build_filename(out_dir, "grid.png", NULL);
  char *argv[] = {KNNWB_HOST_PROGRAM, "render", gml, "--edges", "all", "-o", png, NULL};
  GPid pid;
  int err_fd = -1;
  GError *error = NULL;
  g_assert_true(g_spawn_async_with_pipes(NULL, argv, NULL,
                                         G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
                                         NULL, NULL, &pid, NULL, NULL, &err_fd, &error));
  g_assert_no_error(error);
  knnwb_test_wait_for_signal_handlers(pid);
  kill(pid, SIGINT);
  g_autoptr(GString) err = g_string_new(NULL);
  knnwb_test_read_until_end(err_fd, err, NULL);
  close(err_fd);
  int status = 0;
  g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
  g_test_message("stderr: %s", err->str);
  if (strstr(err->str, "without cairo") == NULL) {
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 130);
    g_assert_nonnull(strstr(err->str, "interrupted"));
  }
  g_autoptr(GDir) listing = g_dir_open(out_dir, 0, NULL);
  g_assert_null(g_dir_read_name(listing)); /* no picture, no temporary */
  g_rmdir(out_dir);
  g_unlink(gml);
  g_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/drawing/guards/deep-nesting", test_deep_nesting);
  g_test_add_func("/drawing/guards/refused-inputs", test_refused_inputs);
  g_test_add_func("/drawing/guards/cancel-while-drawing", test_cancel_while_drawing);
  g_test_add_func("/drawing/guards/truncated", test_truncated);
  g_test_add_func("/drawing/guards/program-interrupted", test_program_interrupted);
  return g_test_run();
}
