/* Long library computations that cannot be interrupted from inside, run where they can be killed.
 */
#ifndef KNNWB_ISOLATED_H
#define KNNWB_ISOLATED_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

/** The work of the child: writes its result into result (result_bytes, zeroed) and may count its
 * progress in *progress; returns 0 on success or an error code of its own (e.g. igraph's). */
typedef int (*KnnwbIsolatedWork)(void *data, void *result, volatile uint64_t *progress);

/** Called every 10 ms in the parent with the child's progress; TRUE kills the child. */
typedef gboolean (*KnnwbIsolatedPoll)(uint64_t progress, void *data);

/**
 * Runs work(data, ...) in a forked child process and waits for it, polling every 10 ms; when poll
 * says so the child is killed (SIGKILL) and reaped at once, whatever it is doing. For computations
 * inside libraries that poll for interruption rarely or not at all (igraph's DrL and walktrap
 * set-ups),
 * which a thread could not abandon: igraph keeps its state in process globals. The child shares
 * nothing else with the caller; it never returns into the caller's code (it ends with _exit).
 *
 * Returns TRUE when the child finished: *code is work's return value and *result its result
 * (release it with knnwb_isolated_release). Returns FALSE with *started FALSE and no error when no
 * child could be started (no memory to share, no process to spare): the caller runs the work
 * itself. Otherwise FALSE with KNNWB_ERROR_CANCELLED (poll stopped it) or KNNWB_ERROR_FAILED (the
 * child died: a signal, the out-of-memory killer), naming what.
 * Cost: one fork (the caller's page tables) and result_bytes of shared memory.
 */
gboolean knnwb_isolated_run(const char *what, KnnwbIsolatedWork work, void *data,
                            size_t result_bytes, KnnwbIsolatedPoll poll, void *poll_data,
                            void **result, int *code, gboolean *started, GError **error);
void knnwb_isolated_release(void *result, size_t result_bytes);

G_END_DECLS

#endif
