/* The pictures README shows, made as share/demo.sh makes them (the same commands on the bundled
 * data) and decoded: the samples' graph coloured by group has a legend with every group's swatch
 * and count, labels that never overlap, nothing cut at the border and its edges where the GML puts
 * them; the phenotype's neighbourhood labels the focus and every order-1 neighbour without overlap;
 * the Figure 3 scatter plots exist as pictures of their stated size with points drawn. */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <knnwb/drawing.h>
#include <knnwb/formats.h>
#include "picture_check.h"

static char *test_dir;

/* Runs the knnwb program with args (NULL-terminated); asserts exit 0. */
static void run_knnwb(const char *const *args)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_ptr_array_add(argv, (gpointer)KNNWB_HOST_PROGRAM);
  for (size_t a = 0; args[a] != NULL; a++)
    g_ptr_array_add(argv, (gpointer)args[a]);
  g_ptr_array_add(argv, NULL);
  g_autofree char *err = NULL;
  int status = -1;
  GError *error = NULL;
  g_autofree char *plugins = g_path_get_dirname(KNNWB_KNN_PLUGIN_FILE);
  g_auto(GStrv) env = g_environ_setenv(g_get_environ(), "KNNWB_PLUGIN_PATH", plugins, TRUE);
  g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, env, G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                             NULL, NULL, &err, &status, &error));
  g_assert_no_error(error);
  if (!g_spawn_check_wait_status(status, NULL))
    g_error("knnwb %s failed: %s", args[0], err);
}

static guint32 rgb_word(const double rgb[3])
{
  return (guint32)lround(rgb[0] * 255) << 16 | (guint32)lround(rgb[1] * 255) << 8 |
         (guint32)lround(rgb[2] * 255);
}

static size_t count_in_box(const KnnwbTestPicture *picture, guint32 colour, const double box[4])
{
  size_t count = 0;
  for (int y = (int)box[1]; y <= (int)box[3]; y++)
    for (int x = (int)box[0]; x <= (int)box[2]; x++) {
      const guint8 *p = knnwb_test_picture_at(picture, x, y);
      count += ((guint32)p[0] << 16 | (guint32)p[1] << 8 | p[2]) == colour;
    }
  return count;
}

/* No two placed labels overlap, and each lies inside the picture. */
static void assert_labels_apart(const KnnwbDrawingPlan *plan)
{
  for (guint i = 0; i < plan->labels->len; i++) {
    const KnnwbLabelBox *a = &g_array_index(plan->labels, KnnwbLabelBox, i);
    g_assert_cmpfloat(a->x0, >=, 0);
    g_assert_cmpfloat(a->y0, >=, 0);
    g_assert_cmpfloat(a->x1, <=, plan->width);
    g_assert_cmpfloat(a->y1, <=, plan->height);
    for (guint j = i + 1; j < plan->labels->len; j++) {
      const KnnwbLabelBox *b = &g_array_index(plan->labels, KnnwbLabelBox, j);
      if (a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1)
        g_error("labels of nodes %u and %u overlap", a->node, b->node);
    }
  }
}

/* Plans and draws gml as the demo does (colour_by may be NULL), decodes the PNG; returns both. */
static KnnwbDrawingPlan *draw(const char *gml, const char *colour_by, KnnwbDrawing **drawing,
                              KnnwbTestPicture *picture)
{
  GError *error = NULL;
  *drawing = knnwb_formats_read_gml(gml, &error);
  g_assert_no_error(error);
  KnnwbRenderOptions options;
  knnwb_drawing_render_options_init(&options);
  options.color_by = colour_by;
  options.name = gml;
  KnnwbDrawingPlan *plan = knnwb_drawing_plan_new(*drawing, &options, &error);
  g_assert_no_error(error);
  g_autofree char *png = g_strconcat(gml, ".png", NULL);
  g_assert_true(knnwb_drawing_render_picture(*drawing, png, KNNWB_PICTURE_PNG, &options, NULL, NULL,
                                             NULL, &error));
  g_assert_no_error(error);
  *picture = knnwb_test_picture_read(png);
  g_assert_cmpint(picture->width, ==, plan->width);
  g_assert_cmpint(picture->height, ==, plan->height);
  g_assert_true(knnwb_test_picture_border_white(picture, 3));
  return plan;
}

static void test_samples_by_group(void)
{
  g_autofree char *gml = g_build_filename(test_dir, "samples.gml", NULL);
  g_autofree char *annotation =
      g_strdup_printf("%s/synthetic_clinical.tsv:Group,YearsToRelapse", KNNWB_EXAMPLE_DATA);
  g_autofree char *input = g_build_filename(KNNWB_EXAMPLE_DATA, "synthetic_expression.tsv", NULL);
  const char *args[] = {"knn",   "-q",           input,      "--transpose", "-k", "5", "--graph",
                        "union", "--annotation", annotation, "-o",          gml,  NULL};
  run_knnwb(args);
  KnnwbDrawing *drawing = NULL;
  KnnwbTestPicture picture;
  KnnwbDrawingPlan *plan = draw(gml, "Group", &drawing, &picture);
  /* Four groups of 25 samples: four swatches in the legend box, and their nodes beyond it. */
  g_assert_false(plan->colours.numeric);
  g_assert_cmpuint(plan->colours.legend->len, ==, 4);
  double whole[4] = {0, 0, picture.width - 1, picture.height - 1};
  for (guint i = 0; i < 4; i++) {
    const KnnwbLegendEntry *entry = &g_array_index(plan->colours.legend, KnnwbLegendEntry, i);
    g_assert_cmpuint(entry->count, ==, 25);
    guint32 colour = rgb_word(entry->rgb);
    size_t in_legend = count_in_box(&picture, colour, plan->legend_box);
    if (in_legend < 36)
      g_error("no legend swatch for %s (#%06X)", entry->text, colour);
    g_assert_cmpuint(count_in_box(&picture, colour, whole), >, in_legend + 25 * 20);
  }
  assert_labels_apart(plan);
  /* 100 samples: nearly all labelled (a label with no free place is left out, never overlapped) */
  g_assert_cmpuint(plan->labels->len, >=, 90);
  /* Edges where the GML says: the middle of an edge is drawn (darker than the background), but
   * where a label's white halo covers it. */
  guint drawn = 0, hidden = 0;
  for (guint e = 0; e < drawing->edges->len; e++) {
    const KnnwbDrawingEdge *edge = &g_array_index(drawing->edges, KnnwbDrawingEdge, e);
    const KnnwbDrawingNode *a = &g_array_index(drawing->nodes, KnnwbDrawingNode, edge->source);
    const KnnwbDrawingNode *b = &g_array_index(drawing->nodes, KnnwbDrawingNode, edge->target);
    double mx = plan->offset_x + plan->scale * (a->x + b->x) / 2;
    double my = plan->offset_y + plan->scale * (a->y + b->y) / 2;
    gboolean under_label = FALSE;
    for (guint i = 0; i < plan->labels->len; i++) {
      const KnnwbLabelBox *box = &g_array_index(plan->labels, KnnwbLabelBox, i);
      under_label |=
          mx >= box->x0 - 2 && mx <= box->x1 + 2 && my >= box->y0 - 2 && my <= box->y1 + 2;
    }
    if (under_label)
      hidden++;
    else if (knnwb_test_picture_darkest(&picture, mx, my, 1) <= 235)
      drawn++;
    else
      g_error("edge %u-%u not drawn at its middle (%.0f, %.0f)", edge->source, edge->target, mx,
              my);
  }
  g_test_message("%u edges seen at their middle, %u under a label", drawn, hidden);
  g_assert_cmpuint(drawn, >=, drawing->edges->len / 2);
  knnwb_test_picture_clear(&picture);
  knnwb_drawing_plan_free(plan);
  knnwb_drawing_free(drawing);
}

static void test_neighbourhood_and_figure3(void)
{
  g_autofree char *gml = g_build_filename(test_dir, "relapse.gml", NULL);
  g_autofree char *plots = g_build_filename(test_dir, "plots", NULL);
  g_autofree char *input = g_build_filename(KNNWB_EXAMPLE_DATA, "synthetic_expression.tsv", NULL);
  g_autofree char *pairs = g_build_filename(KNNWB_EXAMPLE_DATA, "synthetic_pair_rows.txt", NULL);
  g_autofree char *phenotype =
      g_strdup_printf("%s/synthetic_clinical.tsv:YearsToRelapse", KNNWB_EXAMPLE_DATA);
  g_autofree char *groups = g_strdup_printf("%s/synthetic_clinical.tsv:Group", KNNWB_EXAMPLE_DATA);
  const char *args[] = {"neighbourhood",
                        "-q",
                        input,
                        "--metafeatures",
                        "difference",
                        "--pair-rows",
                        pairs,
                        "--phenotype",
                        phenotype,
                        "--focus",
                        "YearsToRelapse",
                        "-k",
                        "20",
                        "--order",
                        "2",
                        "-o",
                        gml,
                        "--plots",
                        plots,
                        "--plots-color-by",
                        groups,
                        NULL};
  run_knnwb(args);
  KnnwbDrawing *drawing = NULL;
  KnnwbTestPicture picture;
  KnnwbDrawingPlan *plan = draw(gml, NULL, &drawing, &picture);
  assert_labels_apart(plan);
  /* The focus (vertex 0) and its 20 order-1 neighbours are all labelled. */
  guint order_one = 0;
  gboolean focus = FALSE;
  for (guint i = 0; i < plan->labels->len; i++) {
    const KnnwbLabelBox *box = &g_array_index(plan->labels, KnnwbLabelBox, i);
    focus |= box->node == 0;
    order_one += box->node >= 1 && box->node <= 20;
  }
  g_assert_true(focus);
  g_assert_cmpuint(order_one, ==, 20);
  knnwb_test_picture_clear(&picture);
  knnwb_drawing_plan_free(plan);
  knnwb_drawing_free(drawing);
  /* Figure 3: nine scatter plots and the overview, each a picture with points drawn on white. */
  g_autoptr(GDir) dir = g_dir_open(plots, 0, NULL);
  g_assert_nonnull(dir);
  guint n = 0;
  for (const char *name; (name = g_dir_read_name(dir)) != NULL;) {
    g_autofree char *path = g_build_filename(plots, name, NULL);
    KnnwbTestPicture scatter = knnwb_test_picture_read(path);
    size_t coloured = 0;
    for (size_t p = 0; p < (size_t)scatter.width * scatter.height; p++) {
      const guint8 *rgb = scatter.rgb + 3 * p;
      coloured += MAX(rgb[0], MAX(rgb[1], rgb[2])) - MIN(rgb[0], MIN(rgb[1], rgb[2])) > 80;
    }
    g_assert_cmpuint(coloured, >, 500); /* the samples' dots (or the overview's bars) */
    g_assert_true(knnwb_test_picture_border_white(&scatter, 2));
    knnwb_test_picture_clear(&scatter);
    n++;
  }
  g_assert_cmpuint(n, ==, 10);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  test_dir = g_dir_make_tmp("knnwb-demo-pictures-XXXXXX", NULL);
  g_test_add_func("/drawing/demo/samples-by-group", test_samples_by_group);
  g_test_add_func("/drawing/demo/neighbourhood-and-figure3", test_neighbourhood_and_figure3);
  int status = g_test_run();
  g_autofree char *clean = g_strdup_printf("rm -rf '%s'", test_dir);
  if (system(clean) != 0)
    status = status ? status : 1;
  g_free(test_dir);
  return status;
}
