/*
 * KNNWB_CUDA_TRACE: where the selection backend's time goes, on stderr (for the benchmark
 * README). 1: phase timings per worker and the selection kernels' time per kind of tile; 2: also
 * selection counters (candidates, merges; device atomics, so slightly slower).
 */
#ifndef KNNWB_SELECT_TRACE_H
#define KNNWB_SELECT_TRACE_H

#include "select_plan.h"

namespace knnwb_cuda
{

/** The KNNWB_CUDA_TRACE level (0 when unset), read once. */
int trace_level();

inline bool trace_enabled()
{
  return trace_level() > 0;
}

/** A monotonic clock in seconds. */
double seconds_now();

/** What one worker measured, printed by trace_worker. */
struct WorkerTrace {
  int index, ordinal;
  long tiles;
  /* selection kernels: [1] tiles of fresh rows (diagonal, a panel's first), [0] the others */
  double select_ms[2];
  long select_tiles[2];
  long fused_tiles; /* of the others: fused tiles (GEMM and filter in one kernel, timed as GEMM) */
  long fused_wgmma_tiles; /* of those: on the wgmma kernel (tile_fused_wgmma.cu) */
  long fused_probes;      /* measurements of fused against filtered tiles (fused_probe) */
  long fused_chosen;      /* of which fused tiles won */
  long ahead_tiles;       /* diagonal tiles computed a column ahead (schedule_ahead.cu) */
  double ahead_ms;        /* their GEMMs and selections, on a stream of their own */
  /* candidates, merged rows, overflowed lines (trace 2): [0] other tiles, [1] fresh tiles */
  unsigned long long stats[2][KNNWB_SELECT_STATS];
  bool have_stats;
  double setup_s, upload_s, run_s, lists_wait_s, device_merge_s, host_merge_s, release_s;
  double setup_parts_s[4]; /* of setup_s: streams and events, handles, device memory, the rest */
  /* the timeline, seconds since the attempt started: set up, rows uploaded, (several GPUs) own
   * diagonal tiles done and every GPU's done, every tile done, lists extracted (0: not reached) */
  double at_setup, at_upload, at_phase_done, at_phase_passed, at_tiles_done, at_run;
  double host_wait_s; /* the host thread waiting for a tile's selection (the GPU busy) */
  double gemm_ms;     /* GEMM kernels of every tile */
  double import_ms;   /* threshold imports from the peers (imports of them) */
  long imports;
  double loop_ms; /* GPU time from the first tile's issue to the last tile's end */
  double warm_up_s, warm_up_wait_s; /* the first GEMM's warm-up; the wait for it after the upload */
};

/** Prints a worker's lines (only those whose data exist). */
void trace_worker(const WorkerTrace &t);

} // namespace knnwb_cuda

#endif
