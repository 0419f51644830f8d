/* Hostile pipelines (ROBUSTNESS.md, "Pipelines and plugins"): DOCTYPEs and entities refused before
 * anything expands, size and nesting capped with a message, the XML error path safe under a
 * memory limit, step ordering linear, variables nested with cycles reported and a literal `${`,
 * and --confine. Everything runs through the program (`knnwb validate` / `run`), as a user would.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include "host_test_util.h"
#include "knnwb_test_process.h"
#include "knnwb_test_time.h"

#if defined(__SANITIZE_ADDRESS__)
#define KNNWB_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KNNWB_TEST_ASAN 1
#endif
#endif

#define CIBM_SAMPLE KNNWB_SHARED_DATA_DIR "/cibm-sample.txt"

static char *test_dir;

/* `knnwb validate` on text (written as name); returns the status, *err the diagnostics, and the
 * seconds it took in *seconds (when not NULL). */
static int validate_text(const char *name, const char *text, gssize length, char **err,
                         double *seconds)
{
  g_autofree char *path = g_build_filename(test_dir, name, NULL);
  g_assert_true(g_file_set_contents(path, text, length, NULL));
  gint64 start = g_get_monotonic_time();
  int status = host_test_run(NULL, NULL, err, "validate", "-O", test_dir, path, NULL);
  if (seconds)
    *seconds = (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;
  g_unlink(path);
  return status;
}

static void expect_refused(const char *name, const char *text, const char *fragment)
{
  g_autofree char *err = NULL;
  double seconds;
  int status = validate_text(name, text, -1, &err, &seconds);
  g_test_message("%s: status %d in %.2f s: %s", name, status, seconds, err);
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, fragment));
  g_assert_null(strstr(err, "internal error"));
  g_assert_cmpfloat(seconds, <, knnwb_test_seconds(10.0));
}

static const char *const pipeline_head = "<pipeline name=\"t\">\n";
static const char *const load_step = "  <step id=\"load\" type=\"load-matrix\">\n"
                                     "    <param name=\"path\" value=\"" CIBM_SAMPLE "\"/>\n"
                                     "  </step>\n";

/* Every form of DTD is refused at the DOCTYPE, before any entity is declared or expanded: the
 * quadratic attribute expansion (24 s and 1.2 GB before), an entity in element text (a libxml2
 * internal error before), the nested "billion laughs", external DTDs and external entities. */
static void test_doctype(void)
{
  g_autoptr(GString) quadratic = g_string_new("<?xml version=\"1.0\"?>\n<!DOCTYPE pipeline [\n"
                                              "<!ENTITY e \"");
  for (int i = 0; i < 20000; i++)
    g_string_append_c(quadratic, 'x');
  g_string_append(quadratic, "\">\n]>\n<pipeline name=\"");
  for (int i = 0; i < 20000; i++)
    g_string_append(quadratic, "&e;");
  g_string_append(quadratic, "\"/>\n");
  expect_refused("quadratic.xml", quadratic->str, "DOCTYPE");

  expect_refused("text-entity.xml",
                 "<!DOCTYPE pipeline [<!ENTITY d \"x\">]>\n<pipeline name=\"t\">\n"
                 "<description>&d;</description>\n</pipeline>\n",
                 "DOCTYPE");
  expect_refused("laughs.xml",
                 "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n <!ENTITY lol \"lol\">\n"
                 " <!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">\n"
                 " <!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">\n"
                 " <!ENTITY lol4 \"&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;\">\n"
                 " <!ENTITY lol5 \"&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;\">\n"
                 "]>\n<pipeline name=\"&lol5;\"/>\n",
                 "DOCTYPE");
  expect_refused("external-dtd.xml",
                 "<!DOCTYPE pipeline SYSTEM \"/etc/passwd\">\n<pipeline name=\"t\"/>\n", "DOCTYPE");
  expect_refused("external-entity.xml",
                 "<!DOCTYPE pipeline [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n"
                 "<pipeline name=\"&x;\"/>\n",
                 "DOCTYPE");
  /* Without a DOCTYPE an entity reference is simply undefined. */
  expect_refused("undefined-entity.xml", "<pipeline name=\"&x;\"/>\n", "'x' not defined");
}

/* Nesting beyond any pipeline's is refused with a message of ours, before libxml2's own limit. */
static void test_depth(void)
{
  g_autoptr(GString) deep = g_string_new(NULL);
  for (int i = 0; i < 5000; i++)
    g_string_append(deep, "<pipeline>");
  expect_refused("deep.xml", deep->str, "nested more than");
}

/* Thousands of schema errors: the first ones are reported, the rest counted, in linear time. */
static void test_many_errors(void)
{
  g_autoptr(GString) text = g_string_new(pipeline_head);
  for (int i = 0; i < 20000; i++)
    g_string_append_printf(text, "  <step id=\"s%d\" type=\"b\"><bad/></step>\n", i);
  g_string_append(text, "</pipeline>\n");
  g_autofree char *err = NULL;
  double seconds;
  g_assert_cmpint(validate_text("many.xml", text->str, -1, &err, &seconds), ==, 1);
  /* libxml2 2.9 spent O(n) per schema error looking for XInclude nodes: 200 s here before. */
  g_test_message("20,000 schema errors: %.2f s", seconds);
  g_assert_cmpfloat(seconds, <, knnwb_test_seconds(30.0));
  g_assert_nonnull(strstr(err, "... and 19936 more XML problems"));
  g_assert_cmpuint(strlen(err), <, 100000);
  /* Semantic problems (20,000 unknown step types) likewise. */
  g_string_assign(text, pipeline_head);
  for (int i = 0; i < 20000; i++)
    g_string_append_printf(text, "  <step id=\"s%d\" type=\"unknown\"/>\n", i);
  g_string_append(text, "</pipeline>\n");
  g_clear_pointer(&err, g_free);
  g_assert_cmpint(validate_text("many.xml", text->str, -1, &err, NULL), ==, 1);
  g_assert_nonnull(strstr(err, "... and 19800 more problems"));
  g_assert_cmpuint(strlen(err), <, 100000);
}

/* A 100 MB comment-only file (and an endless /dev/zero) under a 1 GiB address-space limit: a clear
 * error, no crash (before: the XML error callback allocated while out of memory and aborted). */
static void test_huge_file(void)
{
  g_autofree char *path = g_build_filename(test_dir, "comment.xml", NULL);
  FILE *file = fopen(path, "w");
  g_assert_nonnull(file);
  g_autofree char *chunk = g_malloc(1 << 20);
  memset(chunk, 'x', 1 << 20);
  fputs("<!--", file);
  for (int i = 0; i < 100; i++)
    g_assert_cmpuint(fwrite(chunk, 1, 1 << 20, file), ==, 1 << 20);
  fputs("-->\n", file);
  g_assert_cmpint(fclose(file), ==, 0);
  const char *inputs[] = {path, "/dev/zero"};
  for (guint i = 0; i < G_N_ELEMENTS(inputs); i++) {
    /* 1 GiB of headroom above what the program maps at start (CUDA and OpenBLAS's threads map a
     * lot on a GPU machine; see knnwb_test_mapped_kib). */
    g_autofree char *command = g_strdup_printf(
#ifndef KNNWB_TEST_ASAN /* ASan reserves terabytes of shadow: no address-space limit there */
        "ulimit -v %" G_GUINT64_FORMAT "; "
#endif
        "exec '%s' validate '%s'",
#ifndef KNNWB_TEST_ASAN
        knnwb_test_mapped_kib() + 1048576,
#endif
        KNNWB_HOST_PROGRAM, inputs[i]);
    char *argv[] = {"/bin/sh", "-c", command, NULL};
    g_autofree char *err = NULL;
    int status = -1;
    gint64 start = g_get_monotonic_time();
    g_assert_true(
        g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, &err, &status, NULL));
    g_test_message("%s: %s", inputs[i], err);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_nonnull(strstr(err, "a pipeline may have at most 64 MiB"));
    g_assert_cmpint(g_get_monotonic_time() - start, <, knnwb_test_usec(15.0));
  }
  g_unlink(path);
}

/* 50,000 steps in reverse dependency order (the worst case of the old O(n^2) ordering: 27 s):
 * validated, ordered and printed as a plan in about a second. */
static void test_many_steps(void)
{
  const int n = 50000;
  g_autoptr(GString) text = g_string_new(pipeline_head);
  for (int i = n - 1; i >= 2; i--)
    g_string_append_printf(text,
                           "  <step id=\"s%d\" type=\"spanning-forest\"><input name=\"graph\" "
                           "step=\"s%d\"/></step>\n",
                           i, i - 1);
  g_string_append(text, "  <step id=\"s1\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>"
                        "<param name=\"k\" value=\"2\"/></step>\n");
  g_string_append(text, load_step);
  g_string_append(text, "</pipeline>\n");
  g_autofree char *path = g_build_filename(test_dir, "steps.xml", NULL);
  g_assert_true(g_file_set_contents(path, text->str, -1, NULL));
  gint64 start = g_get_monotonic_time();
  g_autofree char *out = NULL, *err = NULL;
  int status = host_test_run(NULL, &out, &err, "run", "--dry-run", "-O", test_dir, path, NULL);
  double seconds = (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;
  g_test_message("50,000 steps: status %d in %.2f s", status, seconds);
  g_assert_cmpint(status, ==, 0);
  /* The plan starts with the load, then the kNN graph, then s2 ... in dependency order. */
  const char *load = strstr(out, "1. load ");
  const char *knn = strstr(out, "2. s1 ");
  const char *last = strstr(out, "50000. s49999 ");
  g_assert_true(load != NULL && knn != NULL && last != NULL && load < knn && knn < last);
  /* Generous for loaded CI machines and sanitizers: the quadratic ordering took 27 s unloaded. */
  g_assert_cmpfloat(seconds, <, knnwb_test_seconds(15.0));
  g_unlink(path);
}

/* The plan of a pipeline as the program prints it (--dry-run), with extra arguments. */
static int dry_run(const char *body, char **out, char **err, const char *extra_name,
                   const char *extra_value)
{
  g_autofree char *text = g_strdup_printf("%s%s</pipeline>\n", pipeline_head, body);
  g_autofree char *path = g_build_filename(test_dir, "vars.xml", NULL);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  int status = extra_name
                   ? host_test_run(NULL, out, err, "run", "--dry-run", "-O", test_dir, extra_name,
                                   extra_value, path, NULL)
                   : host_test_run(NULL, out, err, "run", "--dry-run", "-O", test_dir, path, NULL);
  g_unlink(path);
  return status;
}

/* ${} inside values is expanded (chains, in any order), cycles and self-references are reported
 * at the variable's line with their path, $${ is a literal ${, doubling definitions are capped. */
static void test_variables(void)
{
  const char *write_step = "  <step id=\"w\" type=\"write-graph\"><input name=\"graph\" "
                           "step=\"g\"/><param name=\"path\" value=\"${out}\"/></step>\n"
                           "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" "
                           "step=\"load\"/><param name=\"k\" value=\"${k}\"/></step>\n";
  g_autofree char *nested =
      g_strdup_printf("  <variable name=\"out\" value=\"${base}-k${k}.knn\"/>\n"
                      "  <variable name=\"base\" value=\"${stem}_x\"/>\n"
                      "  <variable name=\"stem\" value=\"run$$1\"/>\n"
                      "  <variable name=\"k\" value=\"${two}\"/>\n"
                      "  <variable name=\"two\" value=\"2\"/>\n%s%s",
                      load_step, write_step);
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint(dry_run(nested, &out, &err, NULL, NULL), ==, 0);
  g_assert_nonnull(strstr(out, "run$$1_x-k2.knn (written)"));
  g_assert_nonnull(strstr(out, "k = 2\n"));
  g_clear_pointer(&out, g_free);
  g_clear_pointer(&err, g_free);
  /* --set values are expanded too. */
  g_assert_cmpint(dry_run(nested, &out, &err, "--set", "base=${stem}-set"), ==, 0);
  g_assert_nonnull(strstr(out, "run$$1-set-k2.knn (written)"));
  g_clear_pointer(&out, g_free);
  g_clear_pointer(&err, g_free);

  g_autofree char *literal =
      g_strdup_printf("  <variable name=\"out\" value=\"$${k}-${k}.knn\"/>\n  <variable name=\"k\" "
                      "value=\"2\"/>\n%s%s",
                      load_step, write_step);
  g_assert_cmpint(dry_run(literal, &out, &err, NULL, NULL), ==, 0);
  g_assert_nonnull(strstr(out, "${k}-2.knn (written)"));
  g_clear_pointer(&out, g_free);
  g_clear_pointer(&err, g_free);

  g_autofree char *cycle = g_strdup_printf("  <variable name=\"out\" value=\"${a}.knn\"/>\n"
                                           "  <variable name=\"a\" value=\"x${b}\"/>\n"
                                           "  <variable name=\"b\" value=\"${a}\"/>\n"
                                           "  <variable name=\"k\" value=\"${k}\"/>\n%s%s",
                                           load_step, write_step);
  g_assert_cmpint(dry_run(cycle, &out, &err, NULL, NULL), ==, 1);
  g_test_message("%s", err);
  g_assert_nonnull(strstr(err, ":3: variable 'a' refers to itself through a cycle: ${a} -> ${b} "
                               "-> ${a}"));
  g_assert_nonnull(strstr(err, ":5: variable 'k' refers to itself through a cycle: ${k} -> ${k}"));
  g_clear_pointer(&out, g_free);
  g_clear_pointer(&err, g_free);

  /* 2^40 bytes if expanded: stopped at the cap. */
  g_autoptr(GString) doubling = g_string_new("  <variable name=\"v0\" value=\"xx\"/>\n");
  for (int i = 1; i <= 40; i++)
    g_string_append_printf(doubling, "  <variable name=\"v%d\" value=\"${v%d}${v%d}\"/>\n", i,
                           i - 1, i - 1);
  g_string_append_printf(doubling,
                         "  <variable name=\"out\" value=\"${v40}\"/>\n"
                         "  <variable name=\"k\" value=\"2\"/>\n%s%s",
                         load_step, write_step);
  g_assert_cmpint(dry_run(doubling->str, &out, &err, NULL, NULL), ==, 1);
  g_assert_nonnull(strstr(err, "expands to more than 1 MiB"));
  g_clear_pointer(&out, g_free);
  g_clear_pointer(&err, g_free);

  /* A chain deeper than the nesting cap. */
  g_autoptr(GString) chain = g_string_new(NULL);
  for (int i = 0; i < 1000; i++)
    g_string_append_printf(chain, "  <variable name=\"c%d\" value=\"${c%d}\"/>\n", i, i + 1);
  g_string_append_printf(chain,
                         "  <variable name=\"c1000\" value=\"end\"/>\n"
                         "  <variable name=\"out\" value=\"${c0}\"/>\n"
                         "  <variable name=\"k\" value=\"2\"/>\n%s%s",
                         load_step, write_step);
  g_assert_cmpint(dry_run(chain->str, &out, &err, NULL, NULL), ==, 1);
  g_assert_nonnull(strstr(err, "more than 64 levels deep"));
}

/* One 512 KiB variable (made by doubling, so the file is small) used in 2,000 parameters: 1 GB of
 * expanded text before (under `ulimit -v` validate aborted in g_realloc); now the total is
 * capped with one message naming the line where it was passed, in half a GiB of address space. */
static void test_variables_total(void)
{
  g_autoptr(GString) text = g_string_new(pipeline_head);
  g_string_append(text, "  <variable name=\"v0\" value=\"xx\"/>\n");
  for (int i = 1; i <= 18; i++)
    g_string_append_printf(text, "  <variable name=\"v%d\" value=\"${v%d}${v%d}\"/>\n", i, i - 1,
                           i - 1);
  for (int i = 0; i < 2000; i++)
    g_string_append_printf(
        text,
        "  <step id=\"s%d\" type=\"load-matrix\"><param name=\"path\" value=\"" CIBM_SAMPLE
        "\"/><param name=\"label-column\" value=\"${v18}\"/>"
        "</step>\n",
        i);
  g_string_append(text, "</pipeline>\n");
  g_assert_cmpuint(text->len, <, 400000);
  g_autofree char *path = g_build_filename(test_dir, "amplified.xml", NULL);
  g_assert_true(g_file_set_contents(path, text->str, -1, NULL));
  g_autofree char *command = g_strdup_printf(
#ifndef KNNWB_TEST_ASAN /* ASan reserves terabytes of shadow: no address-space limit there */
      "ulimit -v %" G_GUINT64_FORMAT "; "
#endif
      "exec '%s' validate -O '%s' '%s'",
#ifndef KNNWB_TEST_ASAN
      /* 3 GiB, as in test_robustness_resources: on a 16-core GPU machine the program's CUDA
       * libraries, OpenBLAS's threads and their malloc arenas map more than 1 GiB past what this
       * test maps, and 1 GiB failed there before validate began; a validate without the cap
       * would still not print its message */
      knnwb_test_mapped_kib() + 3145728,
#endif
      KNNWB_HOST_PROGRAM, test_dir, path);
  char *argv[] = {"/bin/sh", "-c", command, NULL};
  g_autofree char *err = NULL;
  int status = -1;
  g_assert_true(
      g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, &err, &status, NULL));
  g_test_message("%s", err);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 1);
  g_assert_nonnull(strstr(err, "amplified.xml:"));
  g_assert_nonnull(strstr(err, "expand to more than 64 MiB in all"));
  /* Reported once, not at every parameter past the cap. */
  g_assert_true(strstr(err, "in all") == g_strrstr(err, "in all"));
  g_unlink(path);
}

/* --confine DIR: inputs and outputs must resolve inside DIR, through "..", absolute paths and
 * symbolic links; a pipeline that stays inside runs. */
static void test_confine(void)
{
  g_autofree char *jail = g_build_filename(test_dir, "jail", NULL);
  g_autofree char *outside = g_build_filename(test_dir, "outside", NULL);
  g_assert_cmpint(g_mkdir(jail, 0755), ==, 0);
  g_assert_cmpint(g_mkdir(outside, 0755), ==, 0);
  g_autofree char *data_text = NULL;
  gsize data_length = 0;
  g_assert_true(g_file_get_contents(CIBM_SAMPLE, &data_text, &data_length, NULL));
  g_autofree char *data = g_build_filename(jail, "data.txt", NULL);
  g_assert_true(g_file_set_contents(data, data_text, (gssize)data_length, NULL));
  g_autofree char *escape = g_build_filename(jail, "escape", NULL);
  g_assert_cmpint(symlink(outside, escape), ==, 0);
  g_autofree char *link_out = g_build_filename(jail, "link.knn", NULL);
  g_autofree char *victim = g_build_filename(outside, "victim.knn", NULL);
  g_assert_cmpint(symlink(victim, link_out), ==, 0);

  /* a name beside the test's folder that nothing else makes (a fixed one such as /tmp/x may be
   * there) */
  g_autofree char *test_name = g_path_get_basename(test_dir);
  g_autofree char *absent = g_strdup_printf("../outside/../jail/../../%s-absent", test_name);
  struct {
    const char *input;
    const char *output;
    const char *fragment; /* NULL: runs */
  } cases[] = {
      {"data.txt", "out.knn", NULL},
      {"data.txt", "sub/../out2.knn", NULL},
      {CIBM_SAMPLE, "out.knn", "is outside the --confine directory"},
      {absent, "out.knn", "cannot read"},
      {"data.txt", "../outside/x.knn", "is outside the --confine directory"},
      {"data.txt", "escape/x.knn", "is outside the --confine directory"},
      {"data.txt", "link.knn", "is a symbolic link to nothing"},
      {"escape/../jail/data.txt", "out.knn", NULL},
  };
  g_autofree char *sub = g_build_filename(jail, "sub", NULL);
  g_assert_cmpint(g_mkdir(sub, 0755), ==, 0);
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autofree char *text = g_strdup_printf(
        "<pipeline name=\"t\">\n  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" "
        "value=\"%s\"/></step>\n  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" "
        "step=\"load\"/><param name=\"k\" value=\"2\"/></step>\n  <step id=\"w\" "
        "type=\"write-graph\"><input name=\"graph\" step=\"g\"/><param name=\"path\" "
        "value=\"%s\"/></step>\n</pipeline>\n",
        cases[c].input, cases[c].output);
    g_autofree char *path = g_build_filename(jail, "p.xml", NULL);
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    g_autofree char *err = NULL;
    int status =
        host_test_run(NULL, NULL, &err, "run", "-q", "--confine", jail, "-O", jail, path, NULL);
    g_test_message("case %u: status %d: %s", c, status, err);
    if (cases[c].fragment == NULL) {
      g_assert_cmpint(status, ==, 0);
    } else {
      g_assert_cmpint(status, ==, 1);
      g_assert_nonnull(strstr(err, cases[c].fragment));
    }
  }
  g_assert_false(g_file_test(victim, G_FILE_TEST_EXISTS));
  g_assert_cmpuint(host_test_count_files(outside), ==, 0);
  /* Without --confine the same pipeline may write anywhere: pipelines are trusted code. */
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  test_dir = host_test_tmpdir();
  g_test_add_func("/robustness/pipeline/doctype", test_doctype);
  g_test_add_func("/robustness/pipeline/depth", test_depth);
  g_test_add_func("/robustness/pipeline/many-errors", test_many_errors);
  g_test_add_func("/robustness/pipeline/huge-file", test_huge_file);
  g_test_add_func("/robustness/pipeline/many-steps", test_many_steps);
  g_test_add_func("/robustness/pipeline/variables", test_variables);
  g_test_add_func("/robustness/pipeline/variables-total", test_variables_total);
  g_test_add_func("/robustness/pipeline/confine", test_confine);
  int status = g_test_run();
  host_test_rmtree(test_dir);
  g_free(test_dir);
  return status;
}
