/* Text output formatted by several threads and written in order: the engine of every text writer.
 *
 * Items (rows, vertices or edges) are cut into chunks of `grain` items. Worker threads claim chunks
 * in order and format each into its own buffer; the calling thread writes the buffers to the stream
 * strictly in chunk order, so the bytes are those of a single-threaded writer. At most `window`
 * chunks are formatted ahead of the writer, which bounds memory to window x chunk size. The cancel
 * flag is checked and progress reported after every chunk written. */
#include "io.h"

#include <errno.h>

typedef struct {
  GMutex lock;
  GCond changed;
  size_t n_items, grain, n_chunks, window;
  size_t next_chunk; /* the next chunk a worker claims */
  size_t written;    /* chunks written so far: slot c % window is free once c < written + window */
  KnnwbTextChunk *slots;
  gboolean *ready;
  gboolean stop;
  KnnwbChunkFormatFunc format;
  void *context;
} KnnwbChunkRun;

void knnwb_text_chunk_grow(KnnwbTextChunk *chunk, size_t more)
{
  size_t wanted = chunk->length + more;
  size_t capacity = MAX(chunk->capacity, (size_t)4096);
  while (capacity < wanted)
    capacity *= 2;
  chunk->data = g_realloc(chunk->data, capacity);
  chunk->capacity = capacity;
}

static gpointer knnwb_chunk_worker(gpointer user)
{
  KnnwbChunkRun *run = user;
  locale_t saved_locale = uselocale(knnwb_formats_c_locale());
  for (;;) {
    g_mutex_lock(&run->lock);
    while (!run->stop && run->next_chunk < run->n_chunks &&
           run->next_chunk >= run->written + run->window)
      g_cond_wait(&run->changed, &run->lock);
    if (run->stop || run->next_chunk >= run->n_chunks) {
      g_mutex_unlock(&run->lock);
      break;
    }
    size_t c = run->next_chunk++;
    g_mutex_unlock(&run->lock);
    KnnwbTextChunk *slot = &run->slots[c % run->window];
    slot->length = 0;
    size_t first = c * run->grain;
    run->format(run->context, first, MIN(run->n_items, first + run->grain), slot);
    g_mutex_lock(&run->lock);
    run->ready[c % run->window] = TRUE;
    g_cond_broadcast(&run->changed);
    g_mutex_unlock(&run->lock);
  }
  uselocale(saved_locale);
  return NULL;
}

int knnwb_formats_writer_threads(const KnnwbWriteControl *control)
{
  if (control != NULL && control->n_threads > 0)
    return control->n_threads;
  return MAX(1, (int)g_get_num_processors());
}

gboolean knnwb_formats_cancelled(const KnnwbWriteControl *control, const char *path, GError **error)
{
  if (control == NULL || control->cancel == NULL || *control->cancel == 0)
    return FALSE;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s: interrupted while writing", path);
  return TRUE;
}

gboolean knnwb_formats_write_chunks(FILE *stream, const char *path, size_t n_items, size_t grain,
                                    KnnwbChunkFormatFunc format, void *context,
                                    const KnnwbWriteControl *control, uint64_t progress_done,
                                    uint64_t progress_total, GError **error)
{
  if (n_items == 0)
    return TRUE;
  grain = MAX(grain, (size_t)1);
  KnnwbChunkRun run = {0};
  run.n_items = n_items;
  run.grain = grain;
  run.n_chunks = (n_items + grain - 1) / grain;
  int threads = (int)MIN((size_t)knnwb_formats_writer_threads(control), run.n_chunks);
  run.window = (size_t)threads * 2;
  run.slots = g_new0(KnnwbTextChunk, run.window);
  run.ready = g_new0(gboolean, run.window);
  run.format = format;
  run.context = context;
  g_mutex_init(&run.lock);
  g_cond_init(&run.changed);
  /* Threads that cannot start (memory or process limits) leave their chunks to the others; with
   * none at all, this thread formats each chunk before writing it. */
  GThread **workers = g_new0(GThread *, threads);
  int started = 0;
  while (started < threads) {
    g_autoptr(GError) thread_error = NULL;
    workers[started] = g_thread_try_new("knnwb-writer", knnwb_chunk_worker, &run, &thread_error);
    if (workers[started] == NULL) {
      static gint warned;
      if (g_atomic_int_compare_and_exchange(&warned, 0, 1))
        g_warning("cannot start a writer thread (%s); going on with fewer", thread_error->message);
      break;
    }
    started++;
  }

  gboolean ok = TRUE;
  for (size_t c = 0; c < run.n_chunks && ok; c++) {
    KnnwbTextChunk *slot = &run.slots[c % run.window];
    if (started == 0) {
      locale_t saved_locale = uselocale(knnwb_formats_c_locale());
      slot->length = 0;
      run.format(run.context, c * grain, MIN(n_items, (c + 1) * grain), slot);
      uselocale(saved_locale);
      run.ready[c % run.window] = TRUE;
    }
    g_mutex_lock(&run.lock);
    while (!run.ready[c % run.window]) {
      /* Wake up now and then to honour a cancel request even while a chunk is formatted. */
      gint64 until = g_get_monotonic_time() + 100 * G_TIME_SPAN_MILLISECOND;
      g_cond_wait_until(&run.changed, &run.lock, until);
      if (control != NULL && control->cancel != NULL && *control->cancel != 0)
        break;
    }
    gboolean have = run.ready[c % run.window];
    g_mutex_unlock(&run.lock);
    if (!have || knnwb_formats_cancelled(control, path, error)) {
      if (!have && (error == NULL || *error == NULL))
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "%s: interrupted while writing",
                    path);
      ok = FALSE;
      break;
    }
    if (slot->length > 0 && fwrite(slot->data, 1, slot->length, stream) != slot->length) {
      int code = errno;
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: write failed: %s", path,
                  g_strerror(code));
      ok = FALSE;
      break;
    }
    g_mutex_lock(&run.lock);
    run.ready[c % run.window] = FALSE;
    run.written++;
    g_cond_broadcast(&run.changed);
    g_mutex_unlock(&run.lock);
    if (control != NULL && control->progress != NULL)
      control->progress(progress_done + MIN(n_items, (c + 1) * grain), progress_total,
                        control->progress_data);
  }
  g_mutex_lock(&run.lock);
  run.stop = TRUE;
  g_cond_broadcast(&run.changed);
  g_mutex_unlock(&run.lock);
  for (int t = 0; t < started; t++)
    g_thread_join(workers[t]);
  for (size_t s = 0; s < run.window; s++)
    g_free(run.slots[s].data);
  g_free(run.slots);
  g_free(run.ready);
  g_free(workers);
  g_mutex_clear(&run.lock);
  g_cond_clear(&run.changed);
  return ok;
}
