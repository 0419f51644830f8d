/* What every run of the `knnwb` program needs, whichever command or pipeline it is: byte sizes,
 * signals, the igraph set-up, atomic outputs, the job's ranks, logging, progress lines and the
 * memory peak. Read by commands/, pipeline/ and main.c; the runtime depends on no other part of
 * the host (only libknnwb and GLib).
 */
#ifndef KNNWB_HOST_RUNTIME_H
#define KNNWB_HOST_RUNTIME_H

#include <stdint.h>
#include <sys/stat.h>
#include <glib.h>
#include <knnwb/formats.h>
#include <knnwb/knn_group.h>

G_BEGIN_DECLS

/* ---------------------------------------------------------------------------------------------- */
/* Byte sizes (bytes.c) */

/**
 * Parses a byte size: a non-negative integer or decimal with an optional suffix K, M, G, T (powers
 * of 1024, case-insensitive, optionally followed by "B" or "iB"): "4G", "512M", "1.5GiB", "1000".
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (syntax, or more than 64 bits). O(length of text).
 */
gboolean knnwb_host_parse_bytes(const char *text, guint64 *bytes, GError **error);

/** Formats a byte count for humans ("1.5 GiB"). Returns a new string. */
char *knnwb_host_format_bytes(guint64 bytes);

/* ---------------------------------------------------------------------------------------------- */
/* Signals (signals.c) */

/**
 * Installs SIGINT/SIGTERM handlers that set the returned flag (the core's cancel option) and
 * remember the signal; a second signal kills the process the default way. Idempotent.
 */
const volatile gint *knnwb_host_signals_install(void);
/**
 * Shares the stop with the other ranks of this host through word (knnwb_distributed_stop_word;
 * NULL: no longer): under a launcher the ticker thread posts this rank's signal there, and a signal
 * posted by another rank stops this one as if it had come here (the flag set, the signal
 * remembered), within about 10 ms. After knnwb_host_signals_share(NULL) returns the word is no
 * longer touched. O(1).
 */
void knnwb_host_signals_share(volatile gint *word);
/** The signal that set the flag (0 when none). */
int knnwb_host_signals_received(void);
/** The exit status for a run stopped by a signal: 128 + signal number. */
int knnwb_host_signals_exit_status(void);

/* ---------------------------------------------------------------------------------------------- */
/* igraph (igraph_setup.c) */

/**
 * Installs, once (later calls do nothing), igraph's error handler that records the message and
 * never aborts, the warning handler and igraph's C attribute handler. Must run before any igraph_t
 * exists: changing the attribute handler later crashes igraph.
 */
void knnwb_host_igraph_init(void);

/* ---------------------------------------------------------------------------------------------- */
/* Outputs written atomically (outputs.c) */

/* An output file: the writer writes temporary; the host renames it to final after everything
 * succeeded, so a failed or interrupted run leaves none of its outputs behind. */
typedef struct {
  char *temporary;
  char *final;
  /* The temporary is created up front, empty, with final's permission bits (writable by its
   * owner), so that whatever writes it (the atomic writer replacing it, MPI-IO writing into it)
   * never exposes the contents more than final will; mode: the bits final gets. */
  mode_t mode;
  gboolean placeholder; /* the empty temporary is there, as recorded below */
  dev_t placeholder_device;
  ino_t placeholder_inode;
  struct timespec placeholder_mtime;
} KnnwbPipelineOutput;

/**
 * Checks, without side effects, that path can become an output: it is absent or a regular file
 * (a FIFO, device or directory is refused: the rename would replace it), and its directory exists
 * and looks writable (access() and the mount's read-only flag; root passes access() anywhere, so
 * knnwb_host_outputs_add() proves it for real when the run starts).
 * Errors: KNNWB_ERROR_IO with a message naming path.
 */
gboolean knnwb_host_output_check(const char *path, GError **error);

/**
 * Whether the commit's rename may replace file (its stat) in directory (its stat) for user (an
 * effective uid): not in a sticky directory unless user owns the file or the directory, or is root.
 * What knnwb_host_output_check asks about an existing target. O(1).
 */
gboolean knnwb_host_output_replaceable(const struct stat *directory, const struct stat *file,
                                       uid_t user);

/**
 * Checks, without opening it, that path can be read as an input: it exists, is readable, and is
 * not a FIFO or socket (whose open() would wait for a writer, deaf to signals); with side (a table,
 * a labels file: anything but the main input, whose reader decides) it must be a regular file.
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (empty path), KNNWB_ERROR_IO naming path. O(1).
 */
gboolean knnwb_host_input_check(const char *path, gboolean side, GError **error);

/*
 * The files of a run, declared by the command before any work (inputs, side inputs, outputs and
 * the side files an output brings), then checked together by one function, so that every command
 * keeps the same promises: no output replaces an input or another output, every output can be
 * written and replaced, no side input blocks in open(), no path is empty.
 */
typedef struct KnnwbHostFiles KnnwbHostFiles;
KnnwbHostFiles *knnwb_host_files_new(void);
void knnwb_host_files_free(KnnwbHostFiles *files);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbHostFiles, knnwb_host_files_free)
/** The main input (NULL: nothing): compared with the outputs; its reader checks the rest. role
 * names it in messages ("the input file", "--query"). O(1). */
void knnwb_host_files_input(KnnwbHostFiles *files, const char *path, const char *role);
/** A side input (a table, a labels file; NULL: nothing): also checked by knnwb_host_input_check
 * (side). O(1). */
void knnwb_host_files_side_input(KnnwbHostFiles *files, const char *path, const char *role);
/** An output (NULL: nothing); role is its option ("-o", "--gml"). O(1). */
void knnwb_host_files_output(KnnwbHostFiles *files, const char *path, const char *role);
/** An output and the side file format writes beside it (knnwb_formats_side_path: `.rows.txt`
 * beside a `.mtx`, `.distances.npy` beside a `.npy`). O(1). */
void knnwb_host_files_output_with_side(KnnwbHostFiles *files, const char *path, const char *role,
                                       KnnwbOutputFormat format);
/** Usage errors of the names alone (for parse time): an empty path. Errors:
 * KNNWB_ERROR_INVALID_ARGUMENT "ROLE: the output path is empty". O(files). */
gboolean knnwb_host_files_check_names(const KnnwbHostFiles *files, GError **error);
/**
 * Every check before work: the names (as above); each output as knnwb_host_output_check (kind,
 * directory, replaceable); each side input as knnwb_host_input_check; no output is an input or
 * another output, compared by identity (knnwb_host_path_identity). The first failure is reported,
 * prefixed with the file's role. Errors: KNNWB_ERROR_INVALID_ARGUMENT, KNNWB_ERROR_IO.
 * O(files^2) comparisons.
 */
gboolean knnwb_host_files_check(const KnnwbHostFiles *files, GError **error);

/**
 * What identifies a file for "same file" checks: device and inode when it exists, otherwise the
 * real path of its directory plus its name. `out.knn`, `./out.knn`, `sub/../out.knn`, a symbolic
 * link's directory and a hard link all give the same identity. Returns a new string.
 */
char *knnwb_host_path_identity(const char *path);

/**
 * Adds final to outputs (a GPtrArray of KnnwbPipelineOutput with knnwb_host_output_free) and
 * returns its temporary path (owned by outputs), named `.knnwb-tmp-PID-N-TAIL` beside its target,
 * TAIL the last 64 bytes at most of its name: a crashed run's litter is recognisable, the extension
 * stays last, and a target name up to NAME_MAX bytes still leaves room. The temporary is created
 * (O_EXCL) before any work, which proves the directory takes new files, empty and with the
 * permission bits final will have (those of the regular file it replaces, never setuid, setgid or
 * sticky; for a new file, or a symbolic link, which is replaced and not followed, 0666 less the
 * umask), plus the owner's write bit: the writer replaces or fills it, and a temporary left as it
 * was is an output the step did not write. Errors: KNNWB_ERROR_IO naming final and the directory.
 */
const char *knnwb_host_outputs_add(GPtrArray *outputs, const char *final, GError **error);
/** Frees one KnnwbPipelineOutput (a GDestroyNotify; the file is not touched). */
void knnwb_host_output_free(gpointer output);
/**
 * Adds a file a writer derives from another output's name (an NPY's labels side file: the
 * writer given the temporary writes temporary's side file): committed and discarded with the rest,
 * its temporary made up front as knnwb_host_outputs_add() makes them.
 */
void knnwb_host_outputs_add_side_file(GPtrArray *outputs, const char *temporary, const char *final);

/**
 * The commit, the last thing a run does: when *cancel is set (a signal arrived), removes the
 * temporaries and fails with KNNWB_ERROR_CANCELLED without touching any target. Otherwise renames
 * every existing temporary over its target (keeping an existing target's mode), all or nothing:
 * on a failure the targets already replaced get their previous contents back (hard-linked
 * backups) or are removed when there was none, and the other temporaries are deleted.
 * cancel may be NULL. Errors: KNNWB_ERROR_CANCELLED; KNNWB_ERROR_IO naming the rename that failed.
 * O(outputs) renames.
 */
gboolean knnwb_host_outputs_commit(GPtrArray *outputs, const volatile gint *cancel, GError **error);
/** Removes every temporary (those not written yet are fine). */
void knnwb_host_outputs_discard(GPtrArray *outputs);
/** Rewrites every temporary path in error's message as its target's path (NULL is fine). */
void knnwb_host_outputs_name_targets(const GPtrArray *outputs, GError *error);

/* ---------------------------------------------------------------------------------------------- */
/* The job's ranks and logging (log.c) */

/**
 * The job this process is one rank of (NULL when alone). Ranks other than 0 stay silent: no
 * notices, warnings, progress or error messages (every failure is agreed, and rank 0 reports it).
 */
void knnwb_host_set_group(const KnnwbKnnGroup *group);
const KnnwbKnnGroup *knnwb_host_group(void);
/** Whether every rank of group will search on GPUs (knnwb_knn_uses_gpu on each, the least of
 * them): a collective call on every rank, so that the ranks take the same way to their input
 * (whole on GPUs, split otherwise) even where some rank has no usable GPU. */
gboolean knnwb_host_group_all_gpus(const KnnwbKnnGroup *group, const KnnwbKnnOptions *options);
/** FALSE on ranks other than 0 of a job. */
gboolean knnwb_host_speaks(void);

/** Installs the host's log writer, GLib's printerr handler and the terminal filter on stdout
 * (once, at start): from then on every byte written to stdout, with g_printerr or through the log
 * has its control characters escaped (knnwb_formats_escape_terminal). */
void knnwb_host_log_init(void);
/** Shows line (escaped as every message is) in place of the terminal's current line: "\r", the
 * line, and the erase-to-end sequence, in one write to stderr (flushed first, so the order holds).
 */
void knnwb_host_terminal_rewrite_line(const char *line);
/** With quiet, notices (g_message/g_info) are not shown; warnings always are. */
void knnwb_host_log_set_quiet(gboolean quiet);
/** Prints "knnwb: message" to stderr (nothing on ranks other than 0). */
void knnwb_host_print_error(const GError *error);

/* ---------------------------------------------------------------------------------------------- */
/* Progress lines on a terminal (progress.c) */

/** A terminal progress line on stderr: "label: done/total tiles, rate/s, ETA". */
typedef struct KnnwbHostProgress KnnwbHostProgress;

/** The width of stderr's terminal (TIOCGWINSZ; under mpirun the launcher's), else $COLUMNS,
 * else 80. */
int knnwb_host_terminal_width(void);
/** Returns NULL (no progress) when quiet or stderr is not a terminal. The line fits the terminal's
 * width (shorter forms, then cut). */
KnnwbHostProgress *knnwb_host_progress_new(const char *label, gboolean quiet);
/** A KnnwbProgressFunc; data is the KnnwbHostProgress (NULL is fine). */
void knnwb_host_progress_update(uint64_t done, uint64_t total, void *data);
/** Ends the line with its final state (counts and seconds) and a newline, when it was shown, and
 * frees. NULL is fine. */
void knnwb_host_progress_finish(KnnwbHostProgress *progress);
/** Clears the progress line on screen, if any (the next update redraws it): call before printing
 * anything else to the terminal, so that nothing is glued onto a half-drawn line. */
void knnwb_host_progress_clear(void);
/** What the counts are ("tiles", "rows", "bytes", ...; unit must outlive the progress line; NULL,
 * the default: counts that mean nothing to a user, shown as a share alone). */
void knnwb_host_progress_set_unit(KnnwbHostProgress *progress, const char *unit);

/** A phase line without counts ("label: 12 s", every half second from a thread) for library
 * calls that report no progress; NULL (nothing shown) as knnwb_host_progress_new. */
typedef struct KnnwbHostTicker KnnwbHostTicker;
KnnwbHostTicker *knnwb_host_ticker_new(const char *label, gboolean quiet);
/** Stops the line (ends it with a newline when it was shown) and frees. NULL is fine. */
void knnwb_host_ticker_free(KnnwbHostTicker *ticker);
/** For tests: called by a ticker's thread at each redraw, inside the section that fork() waits
 * for (no fork happens while it runs). */
extern void (*knnwb_host_ticker_draw_hook)(void);

/* ---------------------------------------------------------------------------------------------- */
/* Memory peak (memory_peak.c) */

/** The process's peak resident size in bytes (VmHWM, else ru_maxrss); never reset. */
guint64 knnwb_host_memory_peak(void);

/** Measures one step's peak resident size without resetting the process's high-water mark. */
typedef struct KnnwbHostMemorySampler KnnwbHostMemorySampler;
/**
 * Starts measuring (a thread samples VmRSS every 2 ms). NULL where /proc/self/status is missing;
 * knnwb_host_memory_sampler_stop(NULL) then returns the process's peak so far.
 */
KnnwbHostMemorySampler *knnwb_host_memory_sampler_start(void);
/**
 * Stops and frees the sampler; returns the step's peak: the process's new high-water mark when the
 * step raised it (exact), else the largest resident size sampled (a spike shorter than 2 ms may be
 * missed).
 */
guint64 knnwb_host_memory_sampler_stop(KnnwbHostMemorySampler *sampler);

G_END_DECLS

#endif
