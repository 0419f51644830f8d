/*
 * The entry points of the CUDA selection backend (knnwb_kernels.h), in layers that each add one
 * concern: knnwb_cuda_select validates the job, finds the devices and their budget, and retries
 * with a smaller budget when the allocator disagrees with the plan; select_attempt runs one plan
 * with one worker thread per GPU (select_worker.h); the planner itself is host-only C
 * (select_plan.h).
 *
 * How a run goes (the file names say where): select_plan.c chooses tiles and residency from the
 * memory budget; worker_setup.cu allocates the plan's buffers; row_upload.cu sends the rows;
 * schedule_symmetric.cu or schedule_panels.cu walks the tiles, each issued by tile_issue.cu
 * (scores by tile_scores_gemm.cu or tile_scores_l1.cu, the threshold filter by tile_filter.cu, the
 * per-row merge by tile_select.cu); the lists come back through lists_extract.cu, merged across
 * GPUs by lists_merge_peers.cu or lists_merge_host.cu, with exact distances by exact_distance.cu
 * and, when core asks, sorted and cut to k there by lists_refine.cu (core's refine on the device).
 * Data are resident on each device when they fit the budget, otherwise blocks stream from
 * (registered, pinned) host memory with double buffering on a copy stream; per tile, the GEMM of
 * the next tile (GEMM stream) overlaps the selection of this one (selection stream).
 *
 * KNNWB_CUDA_TRACE=1 prints phase timings (select_trace.h); KNNWB_CUDA_NO_PEER_ACCESS=1 runs
 * several GPUs as if they had no peer access (the tests use it to cover the host-side paths on
 * NVLink machines); KNNWB_CUDA_HOST_REFINE=1 declines core's refine on the device (the lists then
 * come back whole, as before lists_refine.cu: for comparisons).
 */
#include "device_keep.h"
#include "host_staging.h"
#include "row_order.h"
#include "rows_start.h"
#include "select_worker.h"

#include <knnwb_kernels.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <memory>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace knnwb_cuda
{
namespace
{

void set_message(char *message, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

void set_message(char *message, size_t size, const char *format, ...)
{
  if (!message || size == 0)
    return;
  va_list args;
  va_start(args, format);
  vsnprintf(message, size, format, args);
  va_end(args);
}

/* KNNWB_KERNELS_OK when the job is well-formed for this backend. */
int select_validate(const KnnwbSelectJob *job, char *message, size_t message_size)
{
  const bool derived = job && job->query == nullptr && job->reference == nullptr &&
                       job->rows_fill && job->query_source && job->reference_source;
  if (!job || (job->n_query > 0 && ((!derived && (!job->query || !job->reference)) ||
                                    !job->out_index || !job->out_score))) {
    set_message(message, message_size, "knnwb_cuda_select: invalid job");
    return KNNWB_KERNELS_ERROR;
  }
  if (job->n_query > 0x7fffffffu || job->n_reference > 0x7fffffffu || job->dim > 0x7ffffff0u) {
    set_message(message, message_size, "knnwb_cuda_select: more than 2^31 rows is not supported");
    return KNNWB_KERNELS_ERROR;
  }
  if (job->score_kind == KNNWB_SCORE_L2 && !job->reference_sqnorms) {
    set_message(message, message_size, "knnwb_cuda_select: L2 scores need reference_sqnorms");
    return KNNWB_KERNELS_ERROR;
  }
  return KNNWB_KERNELS_OK;
}

/* The job's device ordinals (when it names none: its share of the visible ones,
 * knnwb_device_share). */
int select_devices(const KnnwbSelectJob *job, std::vector<int> *ordinals, char *message,
                   size_t message_size)
{
  int available = knnwb_cuda_device_count();
  if (available <= 0) {
    set_message(message, message_size, "no usable CUDA device");
    return KNNWB_KERNELS_NO_DEVICE;
  }
  if (job->devices && job->n_devices > 0) {
    for (int i = 0; i < job->n_devices; i++) {
      if (job->devices[i] < 0 || job->devices[i] >= available) {
        set_message(message, message_size, "CUDA device %d does not exist (%d visible)",
                    job->devices[i], available);
        return KNNWB_KERNELS_NO_DEVICE;
      }
      ordinals->push_back(job->devices[i]);
    }
  } else {
    ordinals->resize((size_t)available);
    ordinals->resize((size_t)knnwb_cuda_share_devices(job->device_share, job->device_shares,
                                                      ordinals->data(), available));
  }
  return KNNWB_KERNELS_OK;
}

/* What the planner needs of the devices: the smallest one's budget (an explicit budget is per
 * device; otherwise 90% of its free memory), multiprocessors and shared-memory kc limit. */
struct DeviceLimits {
  size_t budget = SIZE_MAX;
  int sm_count = 1 << 30;
  int shared_kc = 1 << 30;
  int refine_kc = 1 << 30; /* largest kc lists_refine.cu sorts */
};

int select_limits(const KnnwbSelectJob *job, const std::vector<int> &ordinals, DeviceLimits *out,
                  char *message, size_t message_size)
{
  for (int ordinal : ordinals) {
    size_t free_bytes = 0, total_bytes = 0;
    /* asked before the driver: rows that an upload ahead allocates in between are then counted
     * once (by the driver), not twice */
    const size_t ahead_bytes = rows_start_bytes(ordinal);
    cudaError_t err = cudaSetDevice(ordinal);
    if (err == cudaSuccess)
      err = cudaMemGetInfo(&free_bytes, &total_bytes);
    int sms = 0;
    if (err == cudaSuccess)
      err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal);
    if (err != cudaSuccess) {
      set_message(message, message_size, "cudaMemGetInfo on GPU %d failed: %s", ordinal,
                  cudaGetErrorString(err));
      cudaGetLastError();
      return KNNWB_KERNELS_NO_DEVICE;
    }
    /* a keep scope's blocks and rows uploaded ahead are this process's to reuse */
    free_bytes += keep_bytes(ordinal) + ahead_bytes;
    size_t device_budget = job->memory_bytes ? job->memory_bytes : free_bytes / 10 * 9;
    out->budget = std::min(out->budget, device_budget);
    out->sm_count = std::min(out->sm_count, sms);
    out->shared_kc = std::min(out->shared_kc, shared_memory_kc_limit());
    out->refine_kc = std::min(out->refine_kc, refine_kc_limit());
  }
  return KNNWB_KERNELS_OK;
}

/* A plan that cannot run a two-sided job (select_attempt): the caller runs its query side alone. */
constexpr int kCrossDeclined = -1;

/* A two-sided job (KnnwbSelectJob.out_reference_refined) as a self job over both sides' rows, the
 * query side's first, and the host arrays that job points to (schedule_cross.cu). */
struct CrossJob {
  KnnwbSelectJob job = {};
  CrossRows rows;
  std::vector<float> sqnorms, bounds;
  std::vector<unsigned char> invalid;
  std::vector<double> mean, squares;
  int refined = 0;
};

/* Where job's refined lists go: its arrays (both sides' for a two-sided job), or its take. */
bool refined_outputs(const KnnwbSelectJob *job)
{
  if (job->out_refined_take != nullptr)
    return true;
  return job->out_k_index && job->out_k_distance && job->out_worst_score && job->out_valid &&
         (job->out_reference_refined == nullptr ||
          (job->out_reference_k_index && job->out_reference_k_distance &&
           job->out_reference_worst_score && job->out_reference_valid));
}

/* Whether job asks for the refined transposed output in a form this backend runs: one GPU, both
 * sides' refine and exact distances, no groups or shares (KNNWB_CUDA_CROSS=0: never, to compare).
 */
bool cross_wanted(const KnnwbSelectJob *job, size_t n_devices, int refine_kc)
{
  const char *off = getenv("KNNWB_CUDA_CROSS");
  const char *host_refine = getenv("KNNWB_CUDA_HOST_REFINE");
  return job->out_reference_refined != nullptr && !(off && strcmp(off, "0") == 0) &&
         !(host_refine && atoi(host_refine) > 0) && n_devices == 1 && !job->self &&
         job->n_query > 0 && job->n_reference > 0 &&
         job->n_query + job->n_reference <= 0x7fffffffu && job->out_k > 0 &&
         job->out_k <= job->kc && job->kc <= (size_t)refine_kc && refined_outputs(job) &&
         job->out_refined && job->exact_query && job->exact_reference && job->out_distance &&
         !job->query_group && !job->reference_group && job->share_count <= 1 &&
         (job->score_kind != KNNWB_SCORE_L2 || job->query_sqnorms);
}

/* Both sides of job one after the other, in arrays of x; x->job the self job over them. */
void cross_build(const KnnwbSelectJob *job, CrossJob *x)
{
  const size_t na = job->n_query, nb = job->n_reference, n = na + nb;
  auto join = [&](auto &to, const auto *a, const auto *b, auto none) {
    to.assign(n, none);
    if (a)
      std::copy(a, a + na, to.begin());
    if (b)
      std::copy(b, b + nb, to.begin() + (ptrdiff_t)na);
    return to.data();
  };
  KnnwbSelectJob &c = x->job;
  c = *job;
  c.self = 1;
  c.n_query = c.n_reference = n;
  c.reference_sqnorms = job->score_kind == KNNWB_SCORE_L2
                            ? join(x->sqnorms, job->query_sqnorms, job->reference_sqnorms, 0.0f)
                            : nullptr;
  c.reference_invalid =
      job->query_invalid || job->reference_invalid
          ? join(x->invalid, job->query_invalid, job->reference_invalid, (unsigned char)0)
          : nullptr;
  c.query_bounds = job->query_bounds || job->reference_bounds
                       ? join(x->bounds, job->query_bounds, job->reference_bounds, INFINITY)
                       : nullptr;
  c.reference_bounds = nullptr;
  /* statistics: NULL means all zero, on either side */
  const bool mean = job->exact_query_mean || job->exact_reference_mean;
  const bool squares = job->exact_query_squares || job->exact_reference_squares;
  c.exact_query_mean = c.exact_reference_mean =
      mean ? join(x->mean, job->exact_query_mean, job->exact_reference_mean, 0.0) : nullptr;
  c.exact_query_squares = c.exact_reference_squares =
      squares ? join(x->squares, job->exact_query_squares, job->exact_reference_squares, 0.0)
              : nullptr;
  /* stand-ins: the worker reads each side's rows from x->rows */
  c.exact_query = c.exact_reference = job->exact_query;
  c.reference = c.query = job->query;
  c.out_refined = &x->refined;
  c.out_distance_filled = nullptr;
  c.out_reference_index = nullptr;
  c.out_reference_score = nullptr;
  c.query_sqnorms = nullptr;
  c.query_invalid = nullptr;
  c.out_reference_refined = nullptr;
  c.order_centroids = nullptr;
  c.order_cells = 0;
  x->rows.n_a = na;
  x->rows.rows[0] = job_rows(job, 0);
  x->rows.rows[1] = job_rows(job, 1);
  x->rows.exact[0] = job->exact_query;
  x->rows.exact[1] = job->exact_reference;
  x->rows.out[0] = {job->out_k_index,
                    job->out_k_distance,
                    job->out_worst_score,
                    job->out_valid,
                    job->out_refined_take,
                    job->out_refined_take_data,
                    0};
  x->rows.out[1] = {job->out_reference_k_index,
                    job->out_reference_k_distance,
                    job->out_reference_worst_score,
                    job->out_reference_valid,
                    job->out_refined_take,
                    job->out_refined_take_data,
                    1};
}

/* job with its derived rows made whole in rows (one array a side; the query side none for a job
 * whose sides are the same rows), as *whole. False when the host has no room for them. A streamed
 * plan (rows beyond the GPU's budget) so holds the rows' scored copy for the job's time. */
static bool derive_whole(const KnnwbSelectJob *job, KnnwbSelectJob *whole,
                         std::unique_ptr<float[]> rows[2])
{
  const bool same = knnwb_select_job_same(job);
  *whole = *job;
  for (int side = same ? 1 : 0; side < 2; side++) {
    const size_t n = side ? job->n_reference : job->n_query;
    rows[side].reset(new (std::nothrow) float[std::max<size_t>(n * job->dim, 1)]);
    if (!rows[side])
      return false;
    const HostRows from = job_rows(job, side);
    float *to = rows[side].get();
    parallel_rows(n, job->n_threads, 1024,
                  [&](size_t a, size_t b) { from.copy(a, b - a, job->dim, to + a * job->dim); });
  }
  whole->reference = rows[1].get();
  whole->query = same ? whole->reference : rows[0].get();
  whole->rows_fill = nullptr;
  return true;
}

/* One attempt at plan on the devices: one worker thread per GPU. Returns the run's status (and
 * its message); KNNWB_KERNELS_OUT_OF_MEMORY asks the caller to retry with a smaller budget, and
 * kCrossDeclined (cross given) that the plan cannot hold a two-sided job; *handed: whether rows
 * went to the job's out_refined_take (then it must not run again, whatever the status). */
int select_attempt(const KnnwbSelectJob *job, const CrossRows *cross, const KnnwbSelectPlan &plan,
                   const std::vector<int> &ordinals, size_t budget, int refine_kc, bool *handed,
                   char *message, size_t message_size)
{
  /* A two-sided job needs both sides' rows, state and exact rows on its GPU, and the refine (the
   * sides' lists come back k wide, each to its own outputs). */
  if (cross != nullptr && !(plan.symmetric && plan.resident && job->kc <= (size_t)refine_kc &&
                            knnwb_select_plan_bytes(job, &plan, 1) <= budget))
    return kCrossDeclined;
  /* Streamed rows are read from the host tile by tile: derived rows are made whole for such a plan
   * (a resident one fills them into its staging as they upload). */
  KnnwbSelectJob whole;
  std::unique_ptr<float[]> whole_rows[2];
  if (knnwb_select_job_derived(job) && !plan.resident && cross == nullptr) {
    /* (an error, not OUT_OF_MEMORY: a smaller GPU budget would stream the rows all the same) */
    if (!derive_whole(job, &whole, whole_rows)) {
      set_message(message, message_size,
                  "out of host memory for the %zu x %zu rows of a job streamed to the GPU",
                  job->n_query + job->n_reference, job->dim);
      return KNNWB_KERNELS_ERROR;
    }
    job = &whole;
  }
  const bool same = knnwb_select_job_same(job);
  HostPin pins;
  bool pinned = false;
  if (!plan.resident) {
    pinned = pins.pin(job->reference, job->n_reference * job->dim * sizeof(float));
    if (!same)
      pinned = pins.pin(job->query, job->n_query * job->dim * sizeof(float)) && pinned;
  }
  Run run;
  run.trace_t0 = seconds_now();
  run.job = job;
  run.cross = cross;
  RowOrder row_order;
  if (knnwb_select_plan_groups_rows(job, &plan, budget)) {
    run.order_wanted = true;
    run.cells.resize(job->n_query);
    run.row_order = &row_order;
  }
  run.plan = plan;
  run.ordinals = ordinals;
  run.n_devices = (int)ordinals.size();
  /* rows uploaded ahead for this job's layout on its one GPU; any others freed before the
   * workers allocate (the limits counted them as free) */
  const bool takes_rows = job->reference != nullptr && run.n_devices == 1 && plan.resident &&
                          same && !cross && plan.screen == KNNWB_KERNELS_SCREEN_FP16 &&
                          job->share_count <= 1;
  run.staged_rows = rows_start_claim(takes_rows ? ordinals[0] : -1, job->reference,
                                     job->n_reference, job->dim, plan.dpad, (size_t)plan.row_bytes,
                                     screen_scale_exponent(job->screen_row_norm));
  run.pinned = pinned;
  const size_t T = (size_t)plan.tile;
  const size_t qb = (job->n_query + T - 1) / T, rb = (job->n_reference + T - 1) / T;
  run.tiles_total = plan.symmetric ? qb * (qb + 1) / 2 : qb * rb;
  run.last_report = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  Barrier barrier(run.n_devices), phase_barrier(run.n_devices), lists_barrier(run.n_devices);
  Latch diagonal_latch((long)qb);
  run.barrier = &barrier;
  run.phase_barrier = &phase_barrier;
  run.diagonal_latch = &diagonal_latch;
  run.lists_barrier = &lists_barrier;
  run.device_thr.assign(run.n_devices, nullptr);
  run.device_list_score.assign(run.n_devices, nullptr);
  run.device_list_index.assign(run.n_devices, nullptr);
  run.partial_index.resize(run.n_devices);
  run.partial_score.resize(run.n_devices);
  run.partial_distance.resize(run.n_devices);
  run.device_reference.assign(run.n_devices, nullptr);
  run.device_query.assign(run.n_devices, nullptr);
  run.exact = job->exact_query && job->exact_reference && job->out_distance &&
              knnwb_select_plan_bytes(job, &plan, 1) <= budget;
  /* Core's refine in place in the staging, so no memory beyond the exact distances'. */
  const char *host_refine = getenv("KNNWB_CUDA_HOST_REFINE");
  run.refine = run.exact && job->out_k > 0 && job->out_k <= job->kc && refined_outputs(job) &&
               job->out_refined && job->kc <= (size_t)refine_kc &&
               !(host_refine && atoi(host_refine) > 0);
  /* The host threads of copies and merges: the job's, shared by its GPUs. Several searches at
   * once (a partitioned run's sub-searches, each given its share of the cores) each took every
   * core: six on 32 cores spread their lists 1.5x slower than three on 16. */
  const int hw = (int)std::max(1u, std::thread::hardware_concurrency());
  const int host = job->n_threads > 0 ? std::min(hw, job->n_threads) : hw;
  run.copy_threads = std::max(1, std::min(8, host / run.n_devices));
  run.merge_threads = std::max(1, host / run.n_devices);
  if (cross != nullptr) {
    const size_t na = cross->n_a;
    run.tiles_total = (uint64_t)((na + T - 1) / T) * ((job->n_reference - na + T - 1) / T);
  } else if (!plan.symmetric && job->share_count > 1) {
    /* schedule_panels.cu: every share_count-th panel, from share_index on */
    const uint64_t panels = qb, shares = (uint64_t)job->share_count;
    const uint64_t share = (uint64_t)job->share_index;
    run.tiles_total = (panels > share ? (panels - share + shares - 1) / shares : 0) * rb;
  } else if (plan.symmetric) {
    const int shares = job->share_count > 1 ? job->share_count : 1;
    uint64_t tiles = 0;
    run.segments = symmetric_segments((int)qb, run.n_devices, shares > 1 ? job->share_index : 0,
                                      shares, &tiles);
    run.tiles_total = tiles;
  }
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda: %zu x %zu rows, dim %zu, kc %zu on %d GPU(s): %s, %s, tile %d, "
            "%.2f GiB per device, exact distances on the %s%s%s%s\n",
            cross ? cross->n_a : job->n_query,
            cross ? job->n_reference - cross->n_a : job->n_reference, job->dim, job->kc,
            run.n_devices,
            cross            ? "two-sided"
            : plan.symmetric ? "symmetric"
                             : "panels",
            plan.resident ? "resident" : "streaming", plan.tile, plan.bytes / (double)(1u << 30),
            run.exact ? "GPU" : "host", run.refine ? ", refined to k there" : "",
            run.order_wanted ? ", rows grouped by centroid" : "",
            plan.diagonal_ahead ? ", diagonal tiles a column ahead" : "");
  {
    std::vector<std::unique_ptr<Worker>> workers;
    for (int g = 0; g < run.n_devices; g++)
      workers.emplace_back(new Worker(run, g));
    /* An exception must not leave a worker's thread (that would terminate the process): it fails
     * the attempt, and the worker leaves every barrier so that the others do not wait for it. */
    auto guarded = [&run, &barrier, &phase_barrier, &lists_barrier, &diagonal_latch](Worker *w) {
      try {
        w->main();
        return;
      } catch (const std::bad_alloc &) {
        run.fail(KNNWB_KERNELS_OUT_OF_MEMORY, "out of host memory in a GPU worker");
      } catch (const std::exception &e) {
        run.fail(KNNWB_KERNELS_ERROR, "a GPU worker failed on the host side: %s", e.what());
      }
      barrier.drop();
      phase_barrier.drop();
      lists_barrier.drop();
      diagonal_latch.release();
    };
    std::vector<std::thread> threads;
    threads.reserve((size_t)run.n_devices);
    for (int g = 1; g < run.n_devices; g++) {
      try {
        threads.emplace_back(guarded, workers[g].get());
      } catch (const std::system_error &e) {
        /* The GPUs work in step (barriers): without this one's thread the attempt fails, and the
         * others must not wait for it, nor for those after it. */
        run.fail(KNNWB_KERNELS_ERROR, "cannot start the host thread of GPU %d: %s", ordinals[g],
                 e.what());
        for (int missing = g; missing < run.n_devices; missing++) {
          barrier.drop();
          phase_barrier.drop();
          lists_barrier.drop();
        }
        diagonal_latch.release();
        break;
      }
    }
    guarded(workers[0].get());
    for (auto &t : threads)
      t.join();
  }
  *handed = run.handed.load();
  if (run.staged_rows != nullptr && cudaSetDevice(ordinals[0]) == cudaSuccess)
    keep_free(ordinals[0], run.staged_rows); /* a worker that failed before it took them */
  if (run.status != KNNWB_KERNELS_OK) {
    set_message(message, message_size, "%s", run.message);
    return run.status;
  }
  /* Several GPUs without peer access merge kc lists on the host: those are not refined. */
  if (run.refine && !(plan.symmetric && run.n_devices > 1 && !run.peers_ok))
    *job->out_refined = 1;
  else if (run.exact && job->out_distance_filled)
    *job->out_distance_filled = 1;
  if (job->progress)
    job->progress(run.tiles_total, run.tiles_total, job->progress_data);
  return KNNWB_KERNELS_OK;
}

} // namespace
} // namespace knnwb_cuda

using namespace knnwb_cuda;

/* The C boundary: no C++ exception may leave (host containers sized by the job throw
 * std::bad_alloc, thread starts std::system_error); each becomes a status with a message. */
static int select_entry(const KnnwbSelectJob *job, char *message, size_t message_size);
static int select_plans(const KnnwbSelectJob *job, const CrossRows *cross,
                        const std::vector<int> &ordinals, DeviceLimits limits, bool *handed,
                        char *message, size_t message_size);

extern "C" int knnwb_cuda_select(const KnnwbSelectJob *job, char *message, size_t message_size)
{
  try {
    return select_entry(job, message, message_size);
  } catch (const std::bad_alloc &) {
    set_message(message, message_size, "out of host memory for the GPU search of %zu x %zu rows",
                job->n_query, job->n_reference);
    return KNNWB_KERNELS_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    set_message(message, message_size, "GPU search failed on the host side: %s", e.what());
    return KNNWB_KERNELS_ERROR;
  } catch (...) {
    set_message(message, message_size, "GPU search failed on the host side (unknown exception)");
    return KNNWB_KERNELS_ERROR;
  }
}

static int select_entry(const KnnwbSelectJob *job, char *message, size_t message_size)
{
  set_message(message, message_size, "ok");
  int status = select_validate(job, message, message_size);
  if (status != KNNWB_KERNELS_OK)
    return status;
  if (job->n_query == 0 || job->kc == 0)
    return KNNWB_KERNELS_OK;
  std::vector<int> ordinals;
  DeviceLimits limits;
  const double t0 = seconds_now();
  /* a choice of the tile GEMM begun ahead: done (its memory free again) before the limits */
  knnwb_cuda_gemm_start_wait();
  const double waited = seconds_now() - t0;
  if ((status = select_devices(job, &ordinals, message, message_size)) != KNNWB_KERNELS_OK ||
      (status = select_limits(job, ordinals, &limits, message, message_size)) != KNNWB_KERNELS_OK)
    return status;
  /* (the limits are the first calls on each GPU: a context still starting is waited for here) */
  if (trace_enabled())
    fprintf(stderr,
            "knnwb cuda: %zu GPU(s) and their memory limits in %.3f s (of which %.3f s waiting "
            "for the tile GEMM's choice begun ahead)\n",
            ordinals.size(), seconds_now() - t0, waited);
  /* A two-sided job runs once for both sides where its GPU holds them; else its query side runs
   * alone and the caller runs the other side as a job of its own. */
  if (cross_wanted(job, ordinals.size(), limits.refine_kc)) {
    std::unique_ptr<CrossJob> cross(new CrossJob);
    cross_build(job, cross.get());
    bool handed = false;
    status =
        select_plans(&cross->job, &cross->rows, ordinals, limits, &handed, message, message_size);
    if (status == KNNWB_KERNELS_OK) {
      *job->out_refined = 1;
      *job->out_reference_refined = 1;
    }
    /* (a plan that fit no budget for both sides may still fit the query side alone, unless rows
     * went to the caller already) */
    if ((status != kCrossDeclined && status != KNNWB_KERNELS_OUT_OF_MEMORY) || handed)
      return status;
  }
  KnnwbSelectJob plain = *job;
  plain.out_reference_refined = nullptr;
  bool handed = false;
  return select_plans(&plain, nullptr, ordinals, limits, &handed, message, message_size);
}

/* The plan a shared job's processes agreed on (KnnwbSelectJob.share_plan): the smallest schedule
 * (panels before symmetric) and tile of theirs, so that every process splits the pairs alike. */
struct SharePlan {
  bool sharing = false;
  int symmetric = -1, tile = -1;
};

/* For a shared job (agreed->sharing), *plan: on the first attempt this process's choice offered to
 * the others and the agreed one taken; on a retry with a smaller budget the agreed one again,
 * resident or streamed, since another schedule or tile would split the pairs differently from the
 * other processes. False (with its message): no plan that the processes share fits this one.
 * Not sharing: true, *plan untouched. */
static bool share_plan_choose(const KnnwbSelectJob *job, const DeviceLimits &limits, int attempt,
                              SharePlan *agreed, KnnwbSelectPlan *plan, char *message,
                              size_t message_size)
{
  if (!agreed->sharing)
    return true;
  if (attempt == 0) {
    const bool mine =
        knnwb_select_plan_choose(job, limits.budget, limits.sm_count, limits.shared_kc, plan) != 0;
    int64_t values[KNNWB_SELECT_SHARE_PLAN_VALUES] = {0};
    values[0] = mine ? plan->symmetric : -1;
    values[1] = mine ? plan->tile : -1;
    if (!job->share_plan(values, KNNWB_SELECT_SHARE_PLAN_VALUES, job->share_plan_data) ||
        values[0] < 0 || values[1] < 0) {
      set_message(message, message_size,
                  "out of GPU memory: a process of the group has no room for its share of the "
                  "search (%zu x %zu rows, dim %zu, kc %zu); give a larger --gpu-memory, or "
                  "fewer processes a GPU",
                  job->n_query, job->n_reference, job->dim, job->kc);
      return false;
    }
    agreed->symmetric = (int)values[0];
    agreed->tile = (int)values[1];
  }
  if (knnwb_select_plan_choose_agreed(job, limits.budget, limits.sm_count, limits.shared_kc,
                                      agreed->symmetric, agreed->tile, plan))
    return true;
  set_message(message, message_size,
              "out of GPU memory: a budget of %zu MiB per device cannot hold the %s tiles of %d "
              "rows the group's processes agreed on for %zu x %zu rows, dim %zu, kc %zu; give a "
              "larger --gpu-memory, or fewer processes a GPU",
              limits.budget >> 20, agreed->symmetric ? "symmetric" : "panel", agreed->tile,
              job->n_query, job->n_reference, job->dim, job->kc);
  return false;
}

/* Plans for job (cross: a two-sided job's sides) from the devices' limits, retried with smaller
 * budgets when the allocator disagrees with the plan's arithmetic, unless the attempt handed rows
 * to the job's out_refined_take already (*handed: it did; the status is then final). */
static int select_plans(const KnnwbSelectJob *job, const CrossRows *cross,
                        const std::vector<int> &ordinals, DeviceLimits limits, bool *handed,
                        char *message, size_t message_size)
{
  int status = KNNWB_KERNELS_OUT_OF_MEMORY;
  *handed = false;
  SharePlan agreed;
  agreed.sharing = job->share_count > 1 && job->share_plan != nullptr;
  for (int attempt = 0; attempt < 8 && status == KNNWB_KERNELS_OUT_OF_MEMORY && !*handed;
       attempt++) {
    KnnwbSelectPlan plan;
    if (!share_plan_choose(job, limits, attempt, &agreed, &plan, message, message_size))
      return KNNWB_KERNELS_OUT_OF_MEMORY;
    if (!agreed.sharing &&
        !knnwb_select_plan_choose(job, limits.budget, limits.sm_count, limits.shared_kc, &plan)) {
      /* A budget below the fixed share (context slack, cuBLAS workspace) fails for any input:
       * say so, instead of blaming the sizes (seen with --gpu-memory 64M on 2 rows). */
      if (limits.budget <= KNNWB_SELECT_OVERHEAD_BYTES + ((size_t)16 << 20))
        set_message(message, message_size,
                    "out of GPU memory: a budget of %zu MiB per device is too small for any "
                    "search: the CUDA context and cuBLAS's workspace take %zu MiB of it before "
                    "the first tile; give --gpu-memory 128M or more",
                    limits.budget >> 20, (size_t)KNNWB_SELECT_OVERHEAD_BYTES >> 20);
      else
        set_message(message, message_size,
                    "out of GPU memory: a budget of %zu MiB per device cannot hold the smallest "
                    "tiles for %zu x %zu rows, dim %zu, kc %zu; give a larger --gpu-memory or use "
                    "more GPUs",
                    limits.budget >> 20, job->n_query, job->n_reference, job->dim, job->kc);
      return KNNWB_KERNELS_OUT_OF_MEMORY;
    }
    if (cross == nullptr) /* a two-sided job has no diagonal tiles */
      knnwb_select_plan_diagonal_ahead(job, &plan, (int)ordinals.size(), limits.budget);
    status = select_attempt(job, cross, plan, ordinals, limits.budget, limits.refine_kc, handed,
                            message, message_size);
    /* the allocator disagreed with our arithmetic: smaller tiles */
    limits.budget = limits.budget / 4 * 3;
  }
  return status;
}
