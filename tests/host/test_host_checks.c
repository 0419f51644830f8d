/* The checks every command and pipeline makes before any work (ROBUSTNESS.md, Output targets):
 * no output replaces any input (side inputs and the side files writers put beside outputs
 * included, and a pipeline's own file), empty paths refused at parse time, side inputs that are
 * FIFOs refused instead of blocking in open(), targets that cannot be replaced found before the
 * work, and the commit's one true message when a rename fails anyway; and the numbers, the checks
 * of validation and the quoting of class names that go with them. */
#include "knnwb_test_npy.h"
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <knnwb/knnwb.h>
#include "runtime/runtime.h"
#include "host_test_util.h"

static const char matrix_text[] = "id\ta\tb\tc\nr1\t1\t2\t3\nr2\t2\t3\t5\nr3\t3\t1\t2\n"
                                  "r4\t5\t5\t1\nr5\t1\t0\t4\nr6\t2\t2\t2.5\n";

/* Runs knnwb with the NULL-terminated args in dir under `timeout -s KILL 60` (a run blocked in
 * open() fails the test instead of hanging it); returns the exit status, stderr in *err. */
static int run_in(const char *dir, char **err, const char *const *args)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  const char *const guard[] = {"timeout", "-s", "KILL", "60", KNNWB_HOST_PROGRAM};
  for (guint i = 0; i < G_N_ELEMENTS(guard); i++)
    g_ptr_array_add(argv, (gpointer)guard[i]);
  for (guint i = 0; args[i]; i++)
    g_ptr_array_add(argv, (gpointer)args[i]);
  g_ptr_array_add(argv, NULL);
  g_auto(GStrv) envp = g_get_environ();
  g_autofree char *plugin_dir = g_path_get_dirname(KNNWB_KNN_PLUGIN_FILE);
  envp = g_environ_setenv(envp, "KNNWB_PLUGIN_PATH", plugin_dir, TRUE);
  int status = -1;
  g_autoptr(GError) error = NULL;
  g_assert_true(g_spawn_sync(dir, (char **)argv->pdata, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL,
                             err, &status, &error));
  g_assert_no_error(error);
  g_test_message("%s: %s", args[0], *err);
  g_assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static char *read_file(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  return text;
}

/* The files the cases below use, in a new directory. */
static char *make_files(void)
{
  char *dir = host_test_tmpdir();
  g_free(host_test_write(dir, "m.tsv", matrix_text));
  g_free(host_test_write(dir, "rows.txt", "r1\nr2\n"));
  g_free(host_test_write(dir, "ph.tsv", "id\ty\na\t1\nb\t2\nc\t3\n"));
  g_free(host_test_write(dir, "cls.tsv", "id\tgroup\na\tx\nb\ty\nc\tx\n"));
  g_free(
      host_test_write(dir, "rlabels.tsv", "id\tgroup\nr1\tx\nr2\ty\nr3\tx\nr4\ty\nr5\tx\nr6\ty\n"));
  g_free(host_test_write(dir, "g.rows.txt", "a\nb\nc\nd\ne\nf\n"));
  g_free(host_test_write(dir, "g.gml",
                         "graph\n[\n  node\n  [\n    id 0\n    graphics\n    [\n"
                         "      x 0\n      y 0\n    ]\n  ]\n]\n"));
  g_autofree char *gml = g_build_filename(dir, "g.gml", NULL);
  g_autofree char *png = g_build_filename(dir, "pic.png", NULL);
  g_assert_cmpint(link(gml, png), ==, 0);
  g_autofree char *npy = knnwb_test_write_npy(dir, 6, 3, 1);
  g_autofree char *renamed = g_build_filename(dir, "m.npy", NULL);
  g_assert_cmpint(rename(npy, renamed), ==, 0);
  return dir;
}

/* Every command refuses an output that is one of its inputs (main, side tables, --pair-rows,
 * --labels, a side file beside the output), exit 1 before any work, the input unchanged. Before,
 * only knn and cluster compared their outputs with the main input: metafeatures, neighbourhood's
 * --table and knn --labels overwrote their input and exited 0. */
static void test_output_is_any_input(void)
{
  g_autofree char *dir = make_files();
  const struct {
    const char *args[20];
    const char *kept;    /* the input that must stay as it was */
    const char *message; /* what stderr must say */
  } cases[] = {
      {{"metafeatures", "m.tsv", "-q", "-o", "m.tsv"}, "m.tsv", "is the input file"},
      {{"metafeatures", "m.tsv", "-q", "--pair-rows", "rows.txt", "-o", "./rows.txt"},
       "rows.txt",
       "(--pair-rows)"},
      {{"neighbourhood", "m.tsv", "--focus", "r1", "-k", "2", "-q", "-o", "n.gml", "--table",
        "m.tsv"},
       "m.tsv",
       "--table 'm.tsv' is the input file"},
      {{"neighbourhood", "m.tsv", "-T", "--focus", "y", "-k", "1", "-q", "--phenotype", "ph.tsv:y",
        "-o", "n.gml", "--table", "ph.tsv"},
       "ph.tsv",
       "(--phenotype)"},
      {{"knn", "m.npy", "-k", "2", "-q", "--labels", "rows.txt", "-F", "knn", "-o", "rows.txt"},
       "rows.txt",
       "(--labels)"},
      {{"knn", "m.npy", "-k", "2", "-q", "--labels", "g.rows.txt", "-o", "g.mtx"},
       "g.rows.txt",
       "the side file of -o 'g.rows.txt' is the input file"},
      {{"cluster", "m.tsv", "--method", "components", "-k", "2", "-q", "--annotation",
        "rlabels.tsv:group", "-o", "c.tsv", "--gml", "rlabels.tsv"},
       "rlabels.tsv",
       "(--annotation)"},
      {{"classify", "m.tsv", "-T", "--classes", "cls.tsv:group", "-k", "1", "--folds", "2", "-q",
        "-o", "p.tsv", "--metrics", "cls.tsv"},
       "cls.tsv",
       "must not replace an input"},
      {{"render", "g.gml", "-q", "-o", "pic.png"}, "g.gml", "is the input file"},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autofree char *before = read_file(dir, cases[c].kept);
    g_autofree char *err = NULL;
    g_assert_cmpint(run_in(dir, &err, cases[c].args), ==, 1);
    g_assert_nonnull(strstr(err, cases[c].message));
    g_autofree char *after = read_file(dir, cases[c].kept);
    g_assert_cmpstr(before, ==, after);
  }
  host_test_rmtree(dir);
}

/* Empty output paths are usage errors (status 2) found when the options are parsed; before, the
 * job ran and failed at the rename. A pipeline's empty output path is an error of validation. */
static void test_empty_paths(void)
{
  g_autofree char *dir = make_files();
  const char *const cases[][16] = {
      {"knn", "m.tsv", "-k", "2", "-o", ""},
      {"cluster", "m.tsv", "--method", "components", "-o", "c.tsv", "--gml", ""},
      {"cluster", "m.tsv", "--method", "components", "-o", ""},
      {"neighbourhood", "m.tsv", "--focus", "r1", "-k", "2", "-o", "n.gml", "--table", ""},
      {"metafeatures", "m.tsv", "-o", ""},
      {"classify", "m.tsv", "-T", "--classes", "cls.tsv:group", "-k", "1", "-o", "p.tsv",
       "--metrics", ""},
      {"classify", "m.tsv", "-T", "--classes", "cls.tsv:group", "-k", "1", "-o", ""},
      {"render", "g.gml", "-o", ""},
      {"knn", "m.npy", "-k", "2", "--labels", "", "-o", "g.knn"},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autofree char *err = NULL;
    g_assert_cmpint(run_in(dir, &err, cases[c]), ==, 2);
    g_assert_nonnull(strstr(err, "path is empty"));
  }
  g_free(host_test_write(dir, "empty.xml",
                         "<pipeline>\n  <step id=\"load\" type=\"load-matrix\">"
                         "<param name=\"path\" value=\"m.tsv\"/></step>\n"
                         "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>"
                         "<param name=\"k\" value=\"2\"/></step>\n"
                         "  <step id=\"w\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/>"
                         "<param name=\"path\" value=\"\"/></step>\n</pipeline>\n"));
  const char *const validate[] = {"validate", "empty.xml", NULL};
  g_autofree char *err = NULL;
  g_assert_cmpint(run_in(dir, &err, validate), ==, 1);
  g_assert_nonnull(strstr(err, "parameter 'path': empty file name"));
  g_assert_null(strstr(err, "is a directory"));
  host_test_rmtree(dir);
}

/* --lists-dtype 32 writes .npy lists as int32 and float32 (the same lists as the default's int64
 * and float64, narrowed); an unknown value, or an output that is not .npy or .npz, is a usage
 * error that writes nothing. */
static void test_lists_dtype(void)
{
  g_autofree char *dir = make_files();
  const char *const wide[] = {"knn", "m.npy", "-k", "2", "-q", "-o", "w.npy", NULL};
  const char *const narrow[] = {"knn",           "m.npy", "-k", "2",     "-q",
                                "--lists-dtype", "32",    "-o", "n.npy", NULL};
  g_autofree char *err = NULL;
  g_assert_cmpint(run_in(dir, &err, wide), ==, 0);
  g_clear_pointer(&err, g_free);
  g_assert_cmpint(run_in(dir, &err, narrow), ==, 0);
  const char *names[2][2] = {{"w.npy", "n.npy"}, {"w.distances.npy", "n.distances.npy"}};
  for (int a = 0; a < 2; a++) {
    g_autofree char *w_path = g_build_filename(dir, names[a][0], NULL);
    g_autofree char *n_path = g_build_filename(dir, names[a][1], NULL);
    g_autofree char *w = NULL, *n = NULL;
    gsize w_length = 0, n_length = 0;
    g_assert_true(g_file_get_contents(w_path, &w, &w_length, NULL));
    g_assert_true(g_file_get_contents(n_path, &n, &n_length, NULL));
    g_assert_cmpuint(w_length, ==, 128 + 6 * 2 * 8);
    g_assert_cmpuint(n_length, ==, 128 + 6 * 2 * 4);
    g_assert_nonnull(strstr(n + 10, a == 0 ? "'descr': '<i4'" : "'descr': '<f4'"));
    for (size_t e = 0; e < 12; e++) {
      if (a == 0) {
        int64_t wi;
        int32_t ni;
        memcpy(&wi, w + 128 + 8 * e, 8);
        memcpy(&ni, n + 128 + 4 * e, 4);
        g_assert_cmpint(wi, ==, ni);
      } else {
        double wd;
        float nd;
        memcpy(&wd, w + 128 + 8 * e, 8);
        memcpy(&nd, n + 128 + 4 * e, 4);
        g_assert_cmpfloat((float)wd, ==, nd);
      }
    }
  }
  const struct {
    const char *args[12];
    const char *message;
  } refused[] = {
      {{"knn", "m.npy", "-k", "2", "--lists-dtype", "16", "-o", "x.npy"},
       "--lists-dtype 16: 64 (int64 and float64) or 32 (int32 and float32)"},
      {{"knn", "m.npy", "-k", "2", "--lists-dtype", "32", "-o", "x.knn"},
       "--lists-dtype applies to .npy and .npz outputs only"},
  };
  for (guint c = 0; c < G_N_ELEMENTS(refused); c++) {
    g_clear_pointer(&err, g_free);
    g_assert_cmpint(run_in(dir, &err, refused[c].args), ==, 2);
    g_assert_nonnull(strstr(err, refused[c].message));
    g_autofree char *x_npy = g_build_filename(dir, "x.npy", NULL);
    g_autofree char *x_knn = g_build_filename(dir, "x.knn", NULL);
    g_assert_false(g_file_test(x_npy, G_FILE_TEST_EXISTS));
    g_assert_false(g_file_test(x_knn, G_FILE_TEST_EXISTS));
  }
  host_test_rmtree(dir);
}

/* A side input that is a FIFO without a writer: refused at once (before, open() blocked for ever
 * and SIGINT/SIGTERM could not end it; the guard's SIGKILL after 60 s then fails the test). */
static void test_side_input_fifo(void)
{
  g_autofree char *dir = make_files();
  g_autofree char *fifo = g_build_filename(dir, "fifo", NULL);
  g_assert_cmpint(mkfifo(fifo, 0644), ==, 0);
  g_free(host_test_write(dir, "fifo.xml",
                         "<pipeline>\n  <step id=\"load\" type=\"load-matrix\">"
                         "<param name=\"path\" value=\"m.npy\"/>"
                         "<param name=\"labels\" value=\"fifo\"/></step>\n</pipeline>\n"));
  const char *const cases[][16] = {
      {"knn", "m.npy", "-k", "2", "--labels", "fifo", "-o", "g.knn"},
      {"cluster", "m.tsv", "--method", "components", "--annotation", "fifo:group", "-o", "c.tsv"},
      {"metafeatures", "m.tsv", "--pair-rows", "fifo", "-o", "p.tsv"},
      {"neighbourhood", "m.tsv", "-T", "--focus", "y", "-k", "1", "--phenotype", "fifo:y", "-o",
       "n.gml"},
      {"classify", "m.tsv", "-T", "--classes", "fifo:group", "-k", "1", "-o", "p.tsv"},
      {"validate", "fifo.xml"},
      {"run", "fifo.xml"},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autofree char *err = NULL;
    g_assert_cmpint(run_in(dir, &err, cases[c]), ==, 1);
    g_assert_nonnull(strstr(err, "a pipe (FIFO), not a file"));
  }
  host_test_rmtree(dir);
}

/* A pipeline's writer puts the `.rows.txt` of a `.mtx` beside its temporary: it is committed with
 * the output (before, it stayed behind as a hidden `.knnwb-tmp-...-g.rows.txt` and no
 * `g.rows.txt` appeared), compared with every other output and input (another step writing
 * `g.rows.txt` is refused), and no step may write the pipeline's own file. */
static void test_pipeline_side_files(void)
{
  g_autofree char *dir = make_files();
  const char *head = "<pipeline>\n  <step id=\"load\" type=\"load-matrix\">"
                     "<param name=\"path\" value=\"m.tsv\"/></step>\n"
                     "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>"
                     "<param name=\"k\" value=\"2\"/></step>\n"
                     "  <step id=\"w\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/>"
                     "<param name=\"path\" value=\"out/g.mtx\"/></step>\n";
  g_autofree char *out = g_build_filename(dir, "out", NULL);
  g_assert_cmpint(g_mkdir(out, 0755), ==, 0);
  g_autofree char *one = g_strconcat(head, "</pipeline>\n", NULL);
  g_free(host_test_write(dir, "one.xml", one));
  const char *const run[] = {"run", "-q", "one.xml", NULL};
  g_autofree char *err = NULL;
  g_assert_cmpint(run_in(dir, &err, run), ==, 0);
  g_assert_cmpuint(host_test_count_files(out), ==, 2);
  g_autofree char *rows = read_file(out, "g.rows.txt");
  g_assert_cmpstr(rows, ==, "r1\nr2\nr3\nr4\nr5\nr6\n");

  const char *const clashes[][2] = {
      {"out/g.rows.txt", "the side file written beside its output"},
      {"two.xml", "is this pipeline's own file"},
  };
  for (guint c = 0; c < G_N_ELEMENTS(clashes); c++) {
    g_autofree char *xml = g_strdup_printf(
        "%s  <step id=\"w2\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/>"
        "<param name=\"path\" value=\"%s\"/><param name=\"format\" value=\"knn\"/></step>\n"
        "</pipeline>\n",
        head, clashes[c][0]);
    g_free(host_test_write(dir, "two.xml", xml));
    const char *const validate[] = {"validate", "two.xml", NULL};
    g_clear_pointer(&err, g_free);
    g_assert_cmpint(run_in(dir, &err, validate), ==, 1);
    g_assert_nonnull(strstr(err, clashes[c][1]));
    g_autofree char *kept = read_file(dir, "two.xml");
    g_assert_cmpstr(kept, ==, xml);
  }
  host_test_rmtree(dir);
}

/* Who may replace a file: in a sticky directory only the file's owner, the directory's owner or
 * root; elsewhere anyone who may write the directory. */
static void test_replaceable_rule(void)
{
  struct stat directory = {.st_mode = S_IFDIR | 01777, .st_uid = 0};
  struct stat file = {.st_mode = S_IFREG | 0644, .st_uid = 1001};
  g_assert_false(knnwb_host_output_replaceable(&directory, &file, 1002));
  g_assert_true(knnwb_host_output_replaceable(&directory, &file, 1001));
  g_assert_true(knnwb_host_output_replaceable(&directory, &file, 0));
  directory.st_uid = 1002;
  g_assert_true(knnwb_host_output_replaceable(&directory, &file, 1002));
  directory = (struct stat){.st_mode = S_IFDIR | 0777, .st_uid = 0};
  g_assert_true(knnwb_host_output_replaceable(&directory, &file, 1002));
}

static void become_other_user(gpointer data)
{
  (void)data;
  if (setgid(65533) != 0 || setuid(65533) != 0)
    _exit(99);
}

/* Another user's file in a sticky directory is refused before any work, once, with what is
 * wrong (before: the whole job ran, then "cannot rename X to X: Operation not permitted; some
 * earlier outputs could not be restored", which was false). Needs root to make the two users;
 * the rule itself is tested above wherever the test runs. */
static void test_unreplaceable_target(void)
{
  if (geteuid() != 0) {
    g_test_message("not root: the rule is tested by /host/checks/replaceable-rule");
    return;
  }
  g_autofree char *dir = make_files();
  g_assert_cmpint(chmod(dir, 01777), ==, 0);
  g_autofree char *theirs = host_test_write(dir, "theirs.knn", "old\n");
  g_assert_cmpint(chown(theirs, 65534, 65534), ==, 0);
  g_autofree char *input = g_build_filename(dir, "m.tsv", NULL);
  char *argv[] = {KNNWB_HOST_PROGRAM, "knn", input, "-k", "2", "-q", "-o", theirs, NULL};
  g_autofree char *err = NULL;
  int status = -1;
  g_autoptr(GError) spawn_error = NULL;
  if (!g_spawn_sync(dir, argv, NULL, G_SPAWN_DEFAULT, become_other_user, NULL, NULL, &err, &status,
                    &spawn_error)) {
    /* The other user cannot reach the program (a build under /root, mode 0700): the rule is
     * still tested by /host/checks/replaceable-rule. */
    g_assert_true(g_error_matches(spawn_error, G_SPAWN_ERROR, G_SPAWN_ERROR_ACCES) ||
                  g_error_matches(spawn_error, G_SPAWN_ERROR, G_SPAWN_ERROR_PERM));
    g_test_message("the other user cannot run %s: %s", KNNWB_HOST_PROGRAM, spawn_error->message);
    host_test_rmtree(dir);
    return;
  }
  g_test_message("%s", err);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 1);
  g_assert_nonnull(strstr(err, "belongs to another user"));
  g_assert_null(strstr(err, "restored"));
  g_autofree char *kept = read_file(dir, "theirs.knn");
  g_assert_cmpstr(kept, ==, "old\n");
  host_test_rmtree(dir);
}

/* A rename that fails anyway (the target became a directory after the checks) says so once,
 * naming the target, and claims nothing about outputs that were never replaced. */
static void test_commit_message(void)
{
  g_autofree char *dir = host_test_tmpdir();
  g_autofree char *final = g_build_filename(dir, "out.knn", NULL);
  g_autoptr(GPtrArray) outputs = g_ptr_array_new_with_free_func(knnwb_host_output_free);
  g_autoptr(GError) error = NULL;
  const char *temporary = knnwb_host_outputs_add(outputs, final, &error);
  g_assert_no_error(error);
  g_assert_true(g_file_set_contents(temporary, "new\n", -1, NULL));
  g_assert_cmpint(g_mkdir(final, 0755), ==, 0);
  g_free(host_test_write(final, "inside", "x"));
  g_assert_false(knnwb_host_outputs_commit(outputs, NULL, &error));
  knnwb_host_outputs_name_targets(outputs, error);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, "out.knn: cannot be replaced"));
  g_assert_null(strstr(error->message, "restored"));
  g_assert_null(strstr(error->message, ".knnwb-tmp"));
  host_test_rmtree(dir);
}

/* Numbers out of range are named up front (usage errors): one walk-length bound for the command
 * line and pipelines (before, the command took 2^31 steps: hours on 40 rows), a cut height that is
 * not a distance (before, --height nan cut at no height and reported a wrong number of clusters),
 * and the exact MST's methods with dropped rows (before, they failed after the search naming one
 * dropped row). */
static void test_parameter_bounds(void)
{
  g_autofree char *dir = make_files();
  const struct {
    const char *args[16];
    int status;
    const char *message;
  } cases[] = {
      {{"cluster", "m.tsv", "--method", "walktrap", "-k", "2", "--steps", "2147483647", "-o",
        "c.tsv"},
       2,
       "--steps 2147483647: walktrap's walk length must be 1 to 1000000"},
      {{"cluster", "m.tsv", "--method", "single-linkage", "--height", "nan", "-o", "c.tsv"},
       2,
       "--height nan"},
      {{"cluster", "m.tsv", "--method", "single-linkage", "--height", "inf", "-o", "c.tsv"},
       2,
       "--height inf"},
      {{"cluster", "m.tsv", "--method", "single-linkage", "--height", "-0.5", "-o", "c.tsv"},
       2,
       "--height -0.5"},
      {{"cluster", "m.tsv", "--method", "mst-knn", "--drop-missing", "-o", "c.tsv"},
       2,
       "--method mst-knn with --drop-missing"},
      {{"cluster", "m.tsv", "--method", "single-linkage", "--clusters", "2", "--drop-degenerate",
        "-o", "c.tsv"},
       2,
       "--method single-linkage with --drop-degenerate"},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autofree char *err = NULL;
    g_assert_cmpint(run_in(dir, &err, cases[c].args), ==, cases[c].status);
    g_assert_nonnull(strstr(err, cases[c].message));
  }
  /* The pipeline's exact MST over rows the reader dropped: the reason, not a row. */
  g_free(host_test_write(dir, "na.tsv", "id\ta\tb\nr1\t1\t2\nr2\tNA\t3\nr3\t3\t1\nr4\t5\t5\n"));
  g_free(host_test_write(dir, "drop.xml",
                         "<pipeline>\n  <step id=\"load\" type=\"load-matrix\">"
                         "<param name=\"path\" value=\"na.tsv\"/>"
                         "<param name=\"missing\" value=\"drop-rows\"/></step>\n"
                         "  <step id=\"t\" type=\"mst\"><input name=\"data\" step=\"load\"/>"
                         "</step>\n</pipeline>\n"));
  const char *const run[] = {"run", "drop.xml", NULL};
  g_autofree char *err = NULL;
  g_assert_cmpint(run_in(dir, &err, run), ==, 1);
  g_assert_nonnull(strstr(err, "1 of the 4 rows were dropped"));
  host_test_rmtree(dir);
}

/* `knnwb validate` finds what the run would refuse from the pipeline text alone, with the
 * parsers the steps' runs use (before, each passed validation and the run failed after the
 * earlier steps had run); `knnwb run` refuses the same before its first step. */
static void test_validate_finds(void)
{
  g_autofree char *dir = make_files();
  g_autofree char *out = g_build_filename(dir, "out", NULL);
  g_assert_cmpint(g_mkdir(out, 0755), ==, 0);
  g_free(host_test_write(
      dir, "typos.xml",
      "<pipeline>\n"
      "  <step id=\"load\" type=\"load-matrix\"><param name=\"path\" value=\"m.tsv\"/></step>\n"
      "  <step id=\"mf\" type=\"metafeatures\"><input name=\"data\" step=\"load\"/>"
      "<param name=\"ops\" value=\"diference\"/></step>\n"
      "  <step id=\"g\" type=\"knn-graph\"><input name=\"data\" step=\"load\"/>"
      "<param name=\"k\" value=\"2\"/><param name=\"devices\" value=\"0,,1\"/></step>\n"
      "  <step id=\"w\" type=\"write-graph\"><input name=\"graph\" step=\"g\"/>"
      "<param name=\"path\" value=\"out/g.xyz\"/></step>\n"
      "  <step id=\"c\" type=\"knn-classify\"><input name=\"data\" step=\"load\"/>"
      "<param name=\"k\" value=\"2\"/><param name=\"folds\" value=\"1\"/>"
      "<param name=\"predictions\" value=\"out/p.tsv\"/></step>\n"
      "  <step id=\"t\" type=\"mst\"><input name=\"data\" step=\"load\"/></step>\n"
      "  <step id=\"s\" type=\"single-linkage\"><input name=\"tree\" step=\"t\"/>"
      "<param name=\"height\" value=\"1\"/><param name=\"clusters\" value=\"2\"/></step>\n"
      "</pipeline>\n"));
  const char *const expected[] = {"typos.xml:3: step 'mf': metafeature operator 'diference'",
                                  "typos.xml:4: step 'g': devices:",
                                  "typos.xml:5: step 'w': ",
                                  "g.xyz: cannot tell the output format",
                                  "typos.xml:6: step 'c': ",
                                  "typos.xml:8: step 's': give height or clusters, not both"};
  const char *const commands[] = {"validate", "run"};
  for (guint c = 0; c < G_N_ELEMENTS(commands); c++) {
    const char *const args[] = {commands[c], "typos.xml", NULL};
    g_autofree char *err = NULL;
    g_assert_cmpint(run_in(dir, &err, args), ==, 1);
    for (guint e = 0; e < G_N_ELEMENTS(expected); e++)
      g_assert_nonnull(strstr(err, expected[e]));
    g_assert_null(strstr(err, "[1/"));
  }
  g_assert_cmpuint(host_test_count_files(out), ==, 0);
  host_test_rmtree(dir);
}

/* Class names with a tab or a line break are quoted in the contingency table and the metrics file
 * as in the other tables (knnwb_formats_write_tsv_field); before they were written raw, adding
 * columns and rows. */
static void test_class_names_quoted(void)
{
  g_autofree char *dir = make_files();
  g_free(host_test_write(dir, "q.csv", "id,group\na,\"x\ty\"\nb,\"u\nv\"\nc,\"x\ty\"\n"));
  g_free(host_test_write(dir, "rq.csv",
                         "id,group\nr1,\"x\ty\"\nr2,\"u\nv\"\nr3,\"x\ty\"\nr4,\"u\nv\"\n"
                         "r5,\"x\ty\"\nr6,\"u\nv\"\n"));
  const char *const classify[] = {"classify", "m.tsv", "-T",        "--classes", "q.csv:group",
                                  "-k",       "1",     "--folds",   "loo",       "-q",
                                  "-o",       "p.tsv", "--metrics", "met.tsv",   NULL};
  const char *const cluster[] = {"cluster", "m.tsv", "--method",     "components",
                                 "-k",      "2",     "--annotation", "rq.csv:group",
                                 "-q",      "-o",    "c.tsv",        NULL};
  g_autofree char *err = NULL;
  g_assert_cmpint(run_in(dir, &err, classify), ==, 0);
  g_clear_pointer(&err, g_free);
  g_assert_cmpint(run_in(dir, &err, cluster), ==, 0);
  const char *const files[] = {"met.tsv", "c.contingency.tsv"};
  for (guint f = 0; f < G_N_ELEMENTS(files); f++) {
    g_autofree char *text = read_file(dir, files[f]);
    g_test_message("%s:\n%s", files[f], text);
    g_assert_nonnull(strstr(text, "\"x\ty\""));
    g_assert_nonnull(strstr(text, "\"u\nv\""));
    g_assert_null(strstr(text, "\tx\ty\t"));
  }
  host_test_rmtree(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/host/checks/output-is-any-input", test_output_is_any_input);
  g_test_add_func("/host/checks/empty-paths", test_empty_paths);
  g_test_add_func("/host/checks/lists-dtype", test_lists_dtype);
  g_test_add_func("/host/checks/side-input-fifo", test_side_input_fifo);
  g_test_add_func("/host/checks/pipeline-side-files", test_pipeline_side_files);
  g_test_add_func("/host/checks/replaceable-rule", test_replaceable_rule);
  g_test_add_func("/host/checks/unreplaceable-target", test_unreplaceable_target);
  g_test_add_func("/host/checks/commit-message", test_commit_message);
  g_test_add_func("/host/checks/parameter-bounds", test_parameter_bounds);
  g_test_add_func("/host/checks/validate-finds", test_validate_finds);
  g_test_add_func("/host/checks/class-names-quoted", test_class_names_quoted);
  return g_test_run();
}
