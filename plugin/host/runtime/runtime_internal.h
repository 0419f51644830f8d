/* Private to runtime/: what its files call in each other beyond runtime.h. */
#ifndef KNNWB_HOST_RUNTIME_INTERNAL_H
#define KNNWB_HOST_RUNTIME_INTERNAL_H

#include "runtime/runtime.h"

G_BEGIN_DECLS

/**
 * Brackets the commit of the outputs (outputs.c): while committing, a second signal no longer
 * kills the process (the renames must not stop half-way); the first still sets the flag.
 */
void knnwb_host_signals_committing(gboolean committing);

G_END_DECLS

#endif
