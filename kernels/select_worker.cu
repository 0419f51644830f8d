/*
 * A worker's phases, in order (one host thread per GPU): set up (every worker has its memory
 * before any starts, so an out-of-memory anywhere retries them all), start the first GEMM's
 * warm-up on a helper thread (gemm_warm_up.cu), upload the rows (several
 * GPUs: a slice each, then the peers' slices), group them by centroid when core asks
 * (row_order.cu), start the exact rows' upload in the background, run the schedule, then (several
 * GPUs without peer access) merge the lists on the host. Failures are recorded in the run; the
 * barriers are left so that no peer waits for a failed worker.
 */
#include "select_worker.h"

namespace knnwb_cuda
{

void Worker::main()
{
  WorkerTrace trace = {};
  trace.index = index_;
  trace.ordinal = device_ordinal_;
  const double t0 = seconds_now();
  bool ok = setup();
  if (ok)
    start_warm_up(); /* meanwhile the rows upload */
  const double t_setup = seconds_now();
  run_.barrier->wait();
  if (ok && !run_.abort)
    ok = upload_resident();
  if (run_.n_devices > 1 && run_.plan.resident) {
    run_.barrier->wait(); /* every slice is on its GPU */
    if (ok && !run_.abort)
      ok = upload_peer_slices();
    run_.barrier->wait(); /* no GPU frees its rows while a peer still reads them */
  }
  if (run_.order_wanted) {
    if (ok && !run_.abort)
      ok = order_cells();
    run_.barrier->wait(); /* every slice's cells are known */
    if (index_ == 0 && ok && !run_.abort)
      order_publish();
    run_.barrier->wait(); /* the order is published */
    if (ok && !run_.abort)
      ok = order_apply();
  }
  if (ok && !run_.abort && run_.exact)
    start_exact_upload();
  const double t_upload = seconds_now();
  finish_warm_up();
  if (ok && !run_.abort)
    choose_gemm();
  if (ok && !run_.abort)
    ok = run_.cross ? run_cross() : run_.plan.symmetric ? run_symmetric() : run_panels();
  if (ok && run_.exact)
    ok = finish_exact_upload(); /* a GPU that extracted nothing (no panel) still waits here */
  const double t_run = seconds_now();
  if (!ok)
    run_.abort = true;
  if (run_.plan.symmetric && run_.n_devices > 1) {
    if (!phase_passed_) {
      run_.phase_barrier->drop(); /* failed before the diagonal phase ended */
      if (run_.diagonal_latch)
        run_.diagonal_latch->release();
    }
    if (!lists_passed_)
      run_.lists_barrier->drop(); /* failed before its lists were final (or no peer access) */
    quiesce(); /* no kernel of ours may read a peer's thresholds or lists once it frees them */
    run_.barrier->wait();
    if (!run_.abort && !run_.peers_ok)
      merge_partials();
  }
  const double t_merge = seconds_now();
  if (state_.stats && cudaSetDevice(device_ordinal_) == cudaSuccess)
    trace.have_stats = cudaMemcpy(trace.stats, state_.stats, sizeof trace.stats,
                                  cudaMemcpyDeviceToHost) == cudaSuccess;
  release();
  trace.tiles = tile_counter_;
  trace.fused_tiles = fused_tiles_;
  trace.fused_wgmma_tiles = fused_wgmma_tiles_;
  trace.fused_probes = fused_probes_;
  trace.fused_chosen = fused_chosen_;
  trace.ahead_tiles = ahead_.taken;
  trace.ahead_ms = ahead_.ms;
  for (int i = 0; i < 2; i++) {
    trace.select_ms[i] = select_ms_[i];
    trace.select_tiles[i] = select_tiles_[i];
  }
  trace.setup_s = t_setup - t0;
  for (int i = 0; i < 4; i++)
    trace.setup_parts_s[i] = setup_parts_s_[i];
  trace.upload_s = t_upload - t_setup;
  trace.run_s = t_run - t_upload;
  trace.lists_wait_s = lists_wait_s_;
  trace.device_merge_s = device_merge_s_;
  trace.host_merge_s = t_merge - t_run;
  trace.release_s = seconds_now() - t_merge;
  auto since = [this](double t) { return t > 0 ? t - run_.trace_t0 : 0.0; };
  trace.at_setup = since(t_setup);
  trace.at_upload = since(t_upload);
  trace.at_phase_done = since(t_phase_done_);
  trace.at_phase_passed = since(t_phase_passed_);
  trace.at_tiles_done = since(t_tiles_done_);
  trace.at_run = since(t_run);
  trace.host_wait_s = host_wait_s_;
  trace.gemm_ms = gemm_ms_;
  trace.import_ms = import_ms_;
  trace.imports = imports_;
  trace.loop_ms = loop_ms_;
  trace.warm_up_s = warm_up_s_;
  trace.warm_up_wait_s = warm_up_wait_s_;
  trace_worker(trace);
}

} // namespace knnwb_cuda
