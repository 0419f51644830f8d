/* A test plugin built for another plugin ABI: the host must refuse it without calling init. */
#include <stdlib.h>
#include <knnwb/plugin.h>

static gboolean test_init(KnnwbPluginRegistrar *registrar, GError **error)
{
  (void)registrar;
  (void)error;
  abort(); /* never reached: the ABI check comes first */
}

G_MODULE_EXPORT const KnnwbPluginDescriptor knnwb_plugin_descriptor = {
    KNNWB_PLUGIN_ABI_VERSION + 41, "test-bad-abi", "1.0", "wrong ABI", test_init};
