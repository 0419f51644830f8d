/* Shared by the MPI files of distributed/. */
#ifndef KNNWB_DISTRIBUTED_INTERNAL_H
#define KNNWB_DISTRIBUTED_INTERNAL_H

#include <glib.h>
#include <stdint.h>
#include <mpi.h>
#include <knnwb/formats.h>
#include <knnwb/knn_group.h>

/** The job's communicator (a duplicate of MPI_COMM_WORLD), MPI_COMM_NULL when alone. */
MPI_Comm knnwb_distributed_communicator(void);

/**
 * Sets up exchanges through shared memory (shared_window.c) when all ranks of comm are on this host
 * (local_size of them == all). Call once after MPI_Init, collectively.
 */
void knnwb_distributed_shared_init(MPI_Comm comm, int local_size);
/** Gives the window back (collective); before MPI_Finalize. */
void knnwb_distributed_shared_finalize(void);
/**
 * The group's share_begin: every rank's part of the window (blocks[r], rank r's), or FALSE on
 * every rank when the window is off, the largest request is small, or there is no room.
 * Collective, like the two below.
 */
gboolean knnwb_distributed_shared_begin(size_t bytes, void **blocks);
/** The group's share_sync: the ranks' writes are seen by all. */
void knnwb_distributed_shared_sync(void);
/** The group's share_end: nobody reads the window any more. */
void knnwb_distributed_shared_end(void);
/**
 * The group's exchange through the shared window: a copy in by the sender, a copy out by the
 * receiver, each on the rank's threads (1.3-2.3 GB/s for 383 MiB on the 2-GPU machine, against
 * 1.0-1.2 GB/s for Open MPI's messages). Collective; returns FALSE on every rank (having done
 * nothing but a small reduction) when messages should do it: off, small, no room, or the window
 * lent to share_begin.
 */
gboolean knnwb_distributed_shared_exchange(const void *const *send, const size_t *send_bytes,
                                           void *const *receive, const size_t *receive_bytes);
/** The group's reduce through the shared window, or FALSE as above. */
gboolean knnwb_distributed_shared_reduce(int64_t *values, size_t count,
                                         KnnwbGroupReduction reduction);
/**
 * Free bytes in the directory that backs shared windows (Open MPI's osc_sm_backing_directory,
 * else /dev/shm), or -1 when it cannot be told: touching a page beyond them ends the process with
 * SIGBUS. O(1), a statvfs.
 */
double knnwb_distributed_shared_free_bytes(void);

/**
 * The communicator of the ranks when they all share this host and its shared memory is used, else
 * MPI_COMM_NULL (every rank alike); *room: whether the window's directory has room for
 * bytes_per_rank more of every rank (this rank's view: the ranks agree on it themselves).
 */
MPI_Comm knnwb_distributed_shared_comm(size_t bytes_per_rank, gboolean *room);

/**
 * Opens the stop word (shared_stop.c) of the ranks of comm that share this host: collective over
 * comm, once after MPI_Init; nothing when they are alone on their hosts, KNNWB_MPI_SHARED=0, or
 * the window's directory has no room (alike on every rank of a host).
 */
void knnwb_distributed_stop_open(MPI_Comm comm);
/** Frees the stop word (collective); before MPI_Finalize. */
void knnwb_distributed_stop_close(void);

/** The group's board_open (shared_board.c): collective; FALSE on every rank when the ranks do
 * not share this host, the shared path is off or there is no room. */
gboolean knnwb_distributed_board_open(size_t n);
/** The group's board_lower: posts values, takes the lowest of every rank's; never waits. */
size_t knnwb_distributed_board_lower(float *values, size_t n);
/** The group's board_close: collective; the board's window freed (nothing when none). */
void knnwb_distributed_board_close(void);

/** Bytes one rank writes at an offset of a file that every rank writes (write_file.c). */
typedef struct {
  int64_t offset;
  const void *data;
  size_t bytes;
} KnnwbDistributedPiece;

/** Rank 0's path, on every rank (g_free). Collective. */
char *knnwb_distributed_root_path(const KnnwbKnnGroup *group, const char *path);

/** One file of knnwb_distributed_write_files: its path (every rank names it alike:
 * knnwb_distributed_root_path) and this rank's pieces of it (any number, 0 too). */
typedef struct {
  const char *path;
  const KnnwbDistributedPiece *pieces;
  size_t n_pieces;
} KnnwbDistributedFile;

/**
 * Every rank writes its pieces of every file at once: each file created or truncated first, then
 * the pieces at their offsets in 1 MiB slices, a slice of each file in turn, each file's bytes
 * handed to the disk every 16 MiB, then every file synced. Between slices a look at control's
 * cancel, after each its progress (progress_done + the bytes written so far, of progress_total;
 * control may be NULL). Collective; ends with an agree, so the result (and the lowest failing
 * rank's error, "rank R: " in front) is the same on every rank. Errors: KNNWB_ERROR_IO naming the
 * file, KNNWB_ERROR_CANCELLED. The files are left as they are on failure (they are the caller's
 * temporaries, removed by rank 0). Time: the bytes' copy and the disk's writes of all files
 * overlap, rather than one file's sync before the next file's writes.
 */
gboolean knnwb_distributed_write_files(const KnnwbKnnGroup *group,
                                       const KnnwbDistributedFile *files, size_t n_files,
                                       const KnnwbWriteControl *control, uint64_t progress_done,
                                       uint64_t progress_total, GError **error);

/** knnwb_distributed_write_files of one file. */
gboolean knnwb_distributed_write_pieces(const KnnwbKnnGroup *group, const char *path,
                                        const KnnwbDistributedPiece *pieces, size_t n_pieces,
                                        const KnnwbWriteControl *control, uint64_t progress_done,
                                        uint64_t progress_total, GError **error);

/** knnwb_distributed_write_lists for NPY and NPZ (write_arrays.c); labels: rank 0's, every row's
 * (NULL: none), stored as a single process stores them (.npz member, .npy side file). */
gboolean knnwb_distributed_write_arrays(const KnnwbKnnGroup *group, const char *path,
                                        KnnwbOutputFormat format, const KnnwbNeighbors *own,
                                        size_t n_rows, const char *const *labels,
                                        const KnnwbWriteControl *control, GError **error);

#endif
