/*
 * A rank's share of its host's GPUs made all the driver shows (kernels/device_start.cu): the
 * GPUs' start of rank 1 of 2 narrows CUDA_VISIBLE_DEVICES="7,9" to "9" before the driver starts;
 * it leaves the variable alone with KNNWB_GPU_NARROW=0, for a run that names its GPUs, for a run
 * alone on its host, and once the driver was counted. Each case runs in a fresh process (the start
 * is once a process). Needs no GPU: the entries need not exist, the driver is never asked which do
 * before the variable is set (a CUDA build narrows; a build without CUDA never does). The same for
 * the GPUs --devices names (knnwb_knn_devices_narrow), which the run then calls 0 to n - 1.
 */
#include <stdio.h>
#include <glib.h>
#include <knnwb/knnwb.h>
#include "knnwb_kernels.h"

#ifdef KNNWB_HAVE_CUDA
#define NARROWED "9\n"
#else
#define NARROWED "7,9\n"
#endif

typedef struct {
  const char *knob;  /* KNNWB_GPU_NARROW, or NULL */
  int n_devices;     /* the run's --devices (the first n) */
  int shares;        /* ranks on the host */
  gboolean counted;  /* the driver counted before the start */
  const char *after; /* CUDA_VISIBLE_DEVICES after the start, and a newline */
} NarrowCase;

static const NarrowCase narrow_cases[] = {
    {NULL, 0, 2, FALSE, NARROWED}, {"0", 0, 2, FALSE, "7,9\n"}, {NULL, 1, 2, FALSE, "7,9\n"},
    {NULL, 0, 1, FALSE, "7,9\n"},  {NULL, 0, 2, TRUE, "7,9\n"},
};

/* The case's test again in a fresh process with CUDA_VISIBLE_DEVICES="7,9" and knob as
 * KNNWB_GPU_NARROW (NULL: unset): it must pass and print after. */
static void run_case(const char *knob, const char *after)
{
  g_setenv("CUDA_VISIBLE_DEVICES", "7,9", TRUE);
  if (knob != NULL)
    g_setenv("KNNWB_GPU_NARROW", knob, TRUE);
  else
    g_unsetenv("KNNWB_GPU_NARROW");
  g_test_trap_subprocess(NULL, 120 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  g_test_trap_assert_stdout(after);
}

static void test_narrow(gconstpointer data)
{
  const NarrowCase *c = data;
  if (g_test_subprocess()) {
    if (c->counted)
      (void)knnwb_cuda_device_count();
    knnwb_cuda_start(NULL, c->n_devices, c->shares > 1 ? 1 : 0, c->shares);
    knnwb_cuda_start_wait();
    const char *visible = g_getenv("CUDA_VISIBLE_DEVICES");
    printf("%s\n", visible != NULL ? visible : "(unset)");
    return;
  }
  run_case(c->knob, c->after);
}

/* The GPUs --devices names, narrowed the same way (knnwb_knn_devices_narrow): the variable after
 * it and the list as the run then calls it. */
typedef struct {
  const char *knob;
  int devices[2];
  int n_devices;
  const char *after;
} NamedCase;

#ifdef KNNWB_HAVE_CUDA
#define NAMED_SECOND "9 | 0\n"
#define NAMED_SWAPPED "9,7 | 0 1\n"
#else
#define NAMED_SECOND "7,9 | 1\n"
#define NAMED_SWAPPED "7,9 | 1 0\n"
#endif

static const NamedCase named_cases[] = {
    {NULL, {1, 0}, 1, NAMED_SECOND},  /* the second GPU alone */
    {NULL, {1, 0}, 2, NAMED_SWAPPED}, /* both, in another order */
    {NULL, {0, 0}, 2, "7,9 | 0 0\n"}, /* a GPU twice: CUDA would refuse the variable */
    {NULL, {2, 0}, 1, "7,9 | 2\n"},   /* not visible: the search says so */
    {NULL, {0, 1}, 2, "7,9 | 0 1\n"}, /* every GPU in order: nothing to narrow */
    {"0", {1, 0}, 1, "7,9 | 1\n"},    /* KNNWB_GPU_NARROW=0 */
};

static void test_named(gconstpointer data)
{
  const NamedCase *c = data;
  if (g_test_subprocess()) {
    int devices[2] = {c->devices[0], c->devices[1]};
    const gboolean done = knnwb_knn_devices_narrow(devices, c->n_devices);
    const char *visible = g_getenv("CUDA_VISIBLE_DEVICES");
    printf("%s |", visible != NULL ? visible : "(unset)");
    for (int i = 0; i < c->n_devices; i++)
      printf(" %d", devices[i]);
    printf("\n");
    g_assert_true(done == (g_strcmp0(visible, "7,9") != 0));
    return;
  }
  run_case(c->knob, c->after);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  static const char *names[] = {"/kernels/cuda-narrow/share", "/kernels/cuda-narrow/knob-off",
                                "/kernels/cuda-narrow/devices-named",
                                "/kernels/cuda-narrow/alone-on-host",
                                "/kernels/cuda-narrow/driver-counted"};
  for (size_t i = 0; i < G_N_ELEMENTS(narrow_cases); i++)
    g_test_add_data_func(names[i], &narrow_cases[i], test_narrow);
  for (size_t i = 0; i < G_N_ELEMENTS(named_cases); i++) {
    g_autofree char *name = g_strdup_printf("/kernels/cuda-narrow/named-%zu", i);
    g_test_add_data_func(name, &named_cases[i], test_named);
  }
  return g_test_run();
}
