/* The step types built into the `knnwb` program, registered through the same descriptor
 * mechanism as a plugin's (plugin name "builtin"): moving them into a plugin later is a build
 * change only. Read by commands/ and the tests, which register them in a step registry. */
#ifndef KNNWB_HOST_STEPS_H
#define KNNWB_HOST_STEPS_H

#include <knnwb/plugin.h>

G_BEGIN_DECLS

/**
 * The descriptor of the steps built into the host (formats, clustering, metafeatures and
 * phenotype rows), for knnwb_host_registry_add_plugin(registry, descriptor, NULL, NULL, error).
 * Static: never freed.
 */
const KnnwbPluginDescriptor *knnwb_host_builtin_descriptor(void);

G_END_DECLS

#endif
