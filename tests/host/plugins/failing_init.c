/* A test plugin whose init registers one step and then fails: nothing of it may stay registered. */
#include <knnwb/error.h>
#include <knnwb/plugin.h>

static gboolean test_run(KnnwbStepContext *context, GError **error)
{
  (void)context;
  (void)error;
  return TRUE;
}

static const KnnwbStepType test_half = {"test-half-registered", "never visible", NULL, 0,   NULL, 0,
                                        KNNWB_KIND_NONE,        test_run,        0,    NULL};

static gboolean test_init(KnnwbPluginRegistrar *registrar, GError **error)
{
  if (!registrar->add_step(registrar, &test_half, error))
    return FALSE;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "no licence for the frobnicator");
  return FALSE;
}

KNNWB_PLUGIN_DEFINE("test-failing-init", "1.0", "init fails", test_init);
