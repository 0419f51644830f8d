/* Terminal escape injection (ROBUSTNESS.md, "Hostile pipelines, ..."): row labels and class names
 * holding ESC, BEL, CR, C1 controls, bidirectional overrides or bytes that are not UTF-8 reach
 * the terminal escaped, in every message (errors, warnings, notices) and on stdout (classify's
 * metrics), while data files keep them as they are. Everything runs through the program. */
#include <stdio.h>
#include <string.h>
#include "host_test_util.h"

static char *test_dir;

/* A label for each kind of control a terminal acts on: an OSC title change ended by BEL, a CSI
 * colour, a carriage return, C1 CSI (U+009B), a right-to-left override (labels are UTF-8: a lone
 * 0x9b byte is tried in a file name). */
static const char *const hostile_labels[] = {
    "t\033]0;pwned\007", "c\033[31m", "r\rX", "u\302\2332J", "b\xe2\x80\xaeZ",
};

/* No byte of text is a control a terminal would act on: C0 but tab and LF, DEL, C1 as UTF-8, a
 * lone byte >= 0x80 that is not part of valid UTF-8, a bidirectional override. */
static void assert_inert(const char *what, const char *text)
{
  g_test_message("%s: %s", what, text);
  for (const char *p = text; *p; p++) {
    unsigned char byte = (unsigned char)*p;
    if ((byte < 0x20 && byte != '\t' && byte != '\n') || byte == 0x7f)
      g_error("%s: control byte 0x%02x at %td: %s", what, byte, p - text, text);
  }
  g_assert_true(g_utf8_validate(text, -1, NULL));
  g_assert_null(strstr(text, "\xc2\x9b"));
  g_assert_null(strstr(text, "\xe2\x80\xae"));
}

static char *write_file(const char *name, const char *content)
{
  char *path = g_build_filename(test_dir, name, NULL);
  g_assert_true(g_file_set_contents(path, content, -1, NULL));
  return path;
}

/* An error naming a constant row, the warning about a repeated label, and the notice naming the
 * input file: all escaped; the written graph's labels are the file's own bytes. */
static void test_messages(void)
{
  g_autoptr(GString) csv = g_string_new("id,a,b,c\n");
  for (guint i = 0; i < G_N_ELEMENTS(hostile_labels); i++)
    g_string_append_printf(csv, "%s,%u,%u,%u\n", hostile_labels[i], i, i * 7 % 5, i * i % 3);
  g_string_append_printf(csv, "%s,1,1,1\n", hostile_labels[0]); /* constant and repeated */
  g_autofree char *path = write_file("flat\033[5m\x9b.csv", csv->str);
  g_autofree char *out_path = g_build_filename(test_dir, "flat.knn", NULL);
  g_autofree char *out = NULL, *err = NULL;
  int status = host_test_run(NULL, &out, &err, "knn", "-k", "2", path, "-o", out_path, NULL);
  g_assert_cmpint(status, ==, 1);
  assert_inert("constant row", err);
  g_assert_nonnull(strstr(err, "is constant"));
  g_assert_nonnull(strstr(err, "t\\x1b]0;pwned\\x07"));
  g_assert_nonnull(strstr(err, "flat\\x1b[5m\\x9b.csv"));
  g_clear_pointer(&out, g_free);
  g_clear_pointer(&err, g_free);

  /* Dropped, the constant row leaves a repeated label (a warning) and a run that succeeds. */
  status = host_test_run(NULL, &out, &err, "knn", "-k", "2", "--drop-degenerate", path, "-o",
                         out_path, NULL);
  g_assert_cmpint(status, ==, 0);
  assert_inert("warnings", err);
  assert_inert("stdout", out);
  g_assert_nonnull(strstr(err, "warning"));
  g_assert_nonnull(strstr(err, "\\x1b"));
}

/* classify's metrics on stdout with class names holding controls: escaped there; the
 * predictions file keeps the names (tables are escaped by their own writers, not here). */
static void test_classify_stdout(void)
{
  g_autoptr(GString) csv = g_string_new("id,a,b,c\n");
  g_autoptr(GString) classes = g_string_new("id\tclass\n");
  for (int i = 0; i < 24; i++) {
    g_string_append_printf(csv, "s%d,%d,%d,%d\n", i, i % 2 * 10 + i, i % 2 * -10 + i * 3 % 7,
                           i * i % 11);
    g_string_append_printf(classes, "s%d\t%s\n", i, i % 2 ? "bell\007" : "csi\302\23331m");
  }
  g_autofree char *data = write_file("data.csv", csv->str);
  g_autofree char *table = write_file("classes.tsv", classes->str);
  g_autofree char *spec = g_strdup_printf("%s:class", table);
  g_autofree char *predictions = g_build_filename(test_dir, "pred.tsv", NULL);
  g_autofree char *out = NULL, *err = NULL;
  int status = host_test_run(NULL, &out, &err, "classify", "-k", "3", "-m", "euclidean", "--folds",
                             "3", "-c", spec, data, "-o", predictions, NULL);
  g_test_message("%s", err);
  g_assert_cmpint(status, ==, 0);
  assert_inert("classify stdout", out);
  assert_inert("classify stderr", err);
  g_assert_nonnull(strstr(out, "bell\\x07"));
  g_assert_nonnull(strstr(out, "csi\\u009b31m"));
  g_autofree char *written = NULL;
  g_assert_true(g_file_get_contents(predictions, &written, NULL, NULL));
  g_assert_nonnull(strstr(written, "bell\007"));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  test_dir = host_test_tmpdir();
  g_test_add_func("/robustness/terminal/messages", test_messages);
  g_test_add_func("/robustness/terminal/classify-stdout", test_classify_stdout);
  int status = g_test_run();
  host_test_rmtree(test_dir);
  g_free(test_dir);
  return status;
}
