/*
 * KNNWB_CUDA_TRACE output of the selection backend (select_trace.h).
 */
#include "select_trace.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace knnwb_cuda
{

int trace_level()
{
  static const int level = [] {
    const char *v = getenv("KNNWB_CUDA_TRACE");
    return v && *v ? atoi(v) : 0;
  }();
  return level;
}

double seconds_now()
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void trace_worker(const WorkerTrace &t)
{
  if (t.select_tiles[0] + t.select_tiles[1] > 0)
    fprintf(
        stderr,
        "knnwb cuda worker %d: selection kernels %.3f ms per diagonal tile (%ld), %.3f ms per "
        "other tile (%ld, of which %ld fused, %ld of them on wgmma: their filter is timed with the "
        "GEMMs; fused tiles won %ld of %ld measurements)\n",
        t.index, t.select_ms[1] / (double)std::max(1L, t.select_tiles[1]), t.select_tiles[1],
        t.select_ms[0] / (double)std::max(1L, t.select_tiles[0]), t.select_tiles[0], t.fused_tiles,
        t.fused_wgmma_tiles, t.fused_chosen, t.fused_probes);
  if (trace_enabled() && t.ahead_tiles > 0)
    fprintf(stderr,
            "knnwb cuda worker %d: %ld diagonal tiles a column ahead, on a stream of their own: "
            "%.3f ms each (GEMM and selection; not in the selection times above)\n",
            t.index, t.ahead_tiles, t.ahead_ms / (double)t.ahead_tiles);
  static const char *const kinds[2] = {"other", "diagonal"};
  for (int k = 0; t.have_stats && k < 2; k++) {
    const double n = (double)std::max(1L, t.select_tiles[k]);
    fprintf(stderr,
            "knnwb cuda worker %d, %s tiles: %llu candidates, %llu merged rows, %llu overflowed "
            "lines (%.0f candidates and %.0f merges per tile)\n",
            t.index, kinds[k], t.stats[k][0], t.stats[k][1], t.stats[k][2], t.stats[k][0] / n,
            t.stats[k][1] / n);
  }
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda worker %d (GPU %d): setup %.3f s (streams and events %.3f s, handles "
            "%.3f s, device memory %.3f s, staging and clears %.3f s), upload %.3f s, tiles + "
            "extract %.3f s (%ld tiles; of which waiting for peers %.3f s, device merge %.3f s), "
            "host merge %.3f s, release %.3f s\n",
            t.index, t.ordinal, t.setup_s, t.setup_parts_s[0], t.setup_parts_s[1],
            t.setup_parts_s[2], t.setup_parts_s[3], t.upload_s, t.run_s, t.tiles, t.lists_wait_s,
            t.device_merge_s, t.host_merge_s, t.release_s);
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda worker %d timeline (s from the start): set up %.3f, uploaded %.3f, own "
            "diagonal tiles %.3f, every GPU's %.3f, tiles done %.3f, lists out %.3f; tile loop on "
            "the GPU %.3f s = selection %.3f + imports %.3f (%ld) + idle or GEMM alone %.3f; GEMM "
            "%.3f s; host waited for tiles %.3f s; GEMM warm-up %.3f s (waited %.3f s)\n",
            t.index, t.at_setup, t.at_upload, t.at_phase_done, t.at_phase_passed, t.at_tiles_done,
            t.at_run, t.loop_ms / 1e3, (t.select_ms[0] + t.select_ms[1]) / 1e3, t.import_ms / 1e3,
            t.imports, (t.loop_ms - t.select_ms[0] - t.select_ms[1] - t.import_ms) / 1e3,
            t.gemm_ms / 1e3, t.host_wait_s, t.warm_up_s, t.warm_up_wait_s);
}

} // namespace knnwb_cuda
