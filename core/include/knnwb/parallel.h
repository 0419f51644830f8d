/* Threads and memory: the parallel loops and probes that knnwb's modules share. */
#ifndef KNNWB_PARALLEL_H
#define KNNWB_PARALLEL_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

/** Calls body(first, last, data) over [0, n) split in chunks across n_threads threads. */
void knnwb_parallel_for(int n_threads, size_t n, size_t grain,
                        void (*body)(size_t first, size_t last, void *data), void *data);

/**
 * Runs body(thread, n_threads, data) once on each of n_threads threads (the caller is thread 0)
 * and waits. Static ranges (knnwb_team_range) let a pass and its compaction agree on who
 * owns which items.
 */
void knnwb_team_run(int n_threads, void (*body)(int thread, int n_threads, void *data), void *data);

/** The [first, last) share of n items that thread t of n_threads owns. */
static inline void knnwb_team_range(size_t n, int t, int n_threads, size_t *first, size_t *last)
{
  *first = n * (size_t)t / (size_t)n_threads;
  *last = n * (size_t)(t + 1) / (size_t)n_threads;
}

/**
 * g_thread_try_new, with one warning per process when a thread cannot start (memory or process
 * limits). Callers go on with the threads they have. NULL when it failed.
 */
GThread *knnwb_thread_try_start(const char *name, GThreadFunc body, gpointer data);

/** Time between two reports of a KnnwbProgressThrottle (100 ms): ten lines a second at most. */
#define KNNWB_PROGRESS_THROTTLE_US ((gint64)100000)

/**
 * A progress report shared by the threads of a loop: at most one report every
 * KNNWB_PROGRESS_THROTTLE_US, from one thread at a time; the counts reported never go back, each
 * is larger than the one before, and the last count is always reported. Initialise with
 * knnwb_progress_throttle_init, clear once the threads are done.
 */
typedef struct {
  GMutex lock;
  gint64 last_us;     /* when the last report was made (under lock) */
  uint64_t last_done; /* the count it said (under lock) */
} KnnwbProgressThrottle;

/** An empty throttle: nothing reported yet. O(1). */
void knnwb_progress_throttle_init(KnnwbProgressThrottle *throttle);
/** Frees what init took; no thread may be offering. O(1). */
void knnwb_progress_throttle_clear(KnnwbProgressThrottle *throttle);

/**
 * Reports *done of total through progress(done, total, data) when the count went past the last
 * one reported and either KNNWB_PROGRESS_THROTTLE_US passed since that report, the count reached
 * total, or `last`. *done is the callers' counter, advanced with g_atomic_pointer_add; it is read
 * here under the throttle's lock, so a count taken before a later one can never be reported after
 * it.
 * A caller that holds no final count passes while another thread reports; one with `last` (the
 * thread whose rows finished the loop, or the caller once the threads are joined) waits for the
 * lock instead, so the final count is never lost. A count of 0 is never reported. Nothing when
 * progress is NULL. progress is called with the lock held: it must not offer to the same
 * throttle. O(1) plus progress.
 */
void knnwb_progress_throttle_offer(KnnwbProgressThrottle *throttle, gsize *done, uint64_t total,
                                   gboolean last,
                                   void (*progress)(uint64_t done, uint64_t total, void *data),
                                   void *data);

/** Bytes the machine can still give (MemAvailable), SIZE_MAX when unknown. */
size_t knnwb_memory_available(void);
/** "1.5 GiB" style text for messages; free with g_free. */
char *knnwb_memory_format(size_t bytes);

/** Blocks of at least this many bytes ask for huge pages (knnwb_memory_try_alloc). */
#define KNNWB_MEMORY_HUGE_MIN ((size_t)32 << 20)
/**
 * g_try_malloc (g_try_malloc0 when zeroed) of bytes, for the large arrays of a run (rows, lists):
 * a block of at least KNNWB_MEMORY_HUGE_MIN asks for transparent huge pages (madvise
 * MADV_HUGEPAGE before any page is touched; Linux, elsewhere nothing). On the GPU host, whose
 * kernel gives huge pages only where asked, freeing the 1.3 GB of rows and lists of a 1.5 M-row
 * run took 0.05-0.08 s in 4 KiB pages and next to nothing in 2 MiB ones, and writing its lists out
 * 0.03 s less. KNNWB_HUGE_PAGES=0 asks for none. NULL when there is no memory; free with g_free.
 */
void *knnwb_memory_try_alloc(size_t bytes, gboolean zeroed);

G_END_DECLS

#endif
