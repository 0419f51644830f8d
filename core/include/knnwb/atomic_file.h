/* Atomic file replacement: write a temporary file beside the target, then rename it into place. */
#ifndef KNNWB_ATOMIC_FILE_H
#define KNNWB_ATOMIC_FILE_H

#include <glib.h>
#include <stdio.h>

G_BEGIN_DECLS

/**
 * An output file under construction. Readers of the target path see either the old file (or no
 * file) or the complete new one, never a partial one; a failed or abandoned write leaves nothing.
 *
 * Durability follows GLib's g_file_set_contents: where the rename replaces a file that holds data,
 * the new file is fsynced before the rename and the directory after it, so that even a power cut
 * leaves the old contents or the new ones. A new file (or one replacing an empty file) is not
 * synced: the system writes it out from its cache in the background, and the program does not
 * wait for the disk (0.15-0.25 s for a 1.5 M-row run's 0.5 GB of lists on the GPU hosts); a power
 * cut in the next seconds may then lose or truncate the new file, with nothing older lost.
 * knnwb_atomic_file_sync_always makes every later file durable.
 */
typedef struct KnnwbAtomicFile KnnwbAtomicFile;

/**
 * Creates a temporary file `.knnwb-tmp-PID-RANDOM` in the directory of path (same file system, so
 * the final rename is atomic; the name makes a killed process's litter recognisable and is short,
 * so any legal target name works), with the permission bits of the regular file it replaces
 * (never its setuid, setgid or sticky bits), or 0666 minus the umask for a new file, from its
 * creation on (a private file's new contents are never readable by others), and returns it open
 * for writing. A path that is a symbolic link is not followed: the link itself is replaced by the
 * new file (mode as for a new file) and its target is left as it was.
 * The target itself is not touched until knnwb_atomic_file_commit().
 * Errors: KNNWB_ERROR_IO when the directory is not writable or path exists and is not a regular
 * file or a symbolic link (a device such as /dev/null would be replaced by the rename).
 */
KnnwbAtomicFile *knnwb_atomic_file_open(const char *path, GError **error);

/**
 * From now on every file this process opens is synced before its rename, whatever it replaces.
 * The program calls it when an output replaces data, since its writers write into empty
 * placeholders that the final renames then move over the outputs. Thread-safe; cannot be undone.
 */
void knnwb_atomic_file_sync_always(void);

/** TRUE once knnwb_atomic_file_sync_always was called in this process (MPI ranks that write one
 * file together agree on it). Thread-safe. */
gboolean knnwb_atomic_file_syncs_always(void);

/** TRUE when file will be synced before its rename (see above). */
gboolean knnwb_atomic_file_durable(const KnnwbAtomicFile *file);

/** The buffered stream to write to (1 MiB buffer). Owned by the file: do not fclose it. */
FILE *knnwb_atomic_file_stream(KnnwbAtomicFile *file);

/** The final path given to knnwb_atomic_file_open(). */
const char *knnwb_atomic_file_path(const KnnwbAtomicFile *file);

/**
 * For a file that will be synced: flushes the stream and asks the system to start writing what the
 * file holds so far to the disk, without waiting (Linux sync_file_range; elsewhere nothing):
 * called between large blocks, it lets the disk work while the next blocks are copied, so the
 * commit's fsync has little left. Otherwise nothing. Changes no byte and reports nothing: a
 * failed write is reported by the commit as always.
 */
void knnwb_atomic_file_start_writeback(KnnwbAtomicFile *file);

/**
 * Flushes, fsyncs (when durable) and closes the temporary file, renames it over the target and
 * (when durable) fsyncs the directory. Always consumes file: on failure the temporary file is
 * removed and the target is untouched. A write error that happened earlier on the stream (disk
 * full) is reported here with its own reason ("No space left on device"). Errors: KNNWB_ERROR_IO
 * naming the target path (never the temporary) and the system error.
 */
gboolean knnwb_atomic_file_commit(KnnwbAtomicFile *file, GError **error);

/** Closes and removes the temporary file, leaving the target untouched. NULL is fine. */
void knnwb_atomic_file_abort(KnnwbAtomicFile *file);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbAtomicFile, knnwb_atomic_file_abort)

G_END_DECLS

#endif
