/*
 * The shared state of one selection attempt (select_run.h).
 */
#include "select_run.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace knnwb_cuda
{

int piece_tiles(bool shares)
{
  static const int piece = knnwb_select_plan_env("KNNWB_CUDA_PIECE", 0, 1, 4096);
  return piece > 0 ? piece : shares ? kPiece : 1 << 30;
}

int exchange_items()
{
  static const int items = knnwb_select_plan_env("KNNWB_CUDA_EXCHANGE", kExchangeItems, 1, 1 << 20);
  return items;
}

bool serial_tiles()
{
  static const bool serial = knnwb_select_plan_env("KNNWB_CUDA_SERIAL_TILES", 0, 0, 1) == 1;
  return serial;
}

bool import_piece_rows()
{
  static const bool all = [] {
    const char *v = getenv("KNNWB_CUDA_IMPORT");
    return v != nullptr && strcmp(v, "all") == 0;
  }();
  return !all;
}

bool shared_diagonals_wanted()
{
  static const bool shared = [] {
    const char *v = getenv("KNNWB_CUDA_DIAGONALS");
    return v != nullptr && strcmp(v, "shared") == 0;
  }();
  return shared;
}

std::vector<Segment> symmetric_segments(int blocks, int n_devices, int share, int shares,
                                        uint64_t *tiles)
{
  std::vector<Segment> segments;
  /* With shares, each piece goes to the share with the least work so far (the same choice in
   * every process), counting a diagonal tile as kDiagonalWeight ordinary ones (its selection
   * sorts fresh lists): taking every shares-th piece left one share 8% more tiles, since each
   * column's last piece is short and the first one always fell to share 0. */
  constexpr uint64_t kDiagonalWeight = 3;
  std::vector<uint64_t> load((size_t)std::max(shares, 1), 0);
  *tiles = 0;
  for (int c = 0; c < blocks; c++) {
    if (n_devices == 1 && shares == 1) {
      segments.push_back({c, 0, c, true});
      *tiles += (uint64_t)c + 1;
      continue;
    }
    if (shares > 1)
      load[(size_t)(c % shares)] += kDiagonalWeight;
    const int piece = piece_tiles(shares > 1);
    for (int b0 = 0; b0 < c; b0 += piece) {
      Segment sg = {c, b0, std::min(c, b0 + piece), false};
      const size_t to = (size_t)(std::min_element(load.begin(), load.end()) - load.begin());
      load[to] += (uint64_t)(sg.b1 - sg.b0);
      if ((int)to != share)
        continue;
      segments.push_back(sg);
      *tiles += (uint64_t)(sg.b1 - sg.b0);
    }
    if (c % shares == share)
      *tiles += 1; /* this process owns diagonal tile c (on one of its GPUs) */
  }
  return segments;
}

std::pair<size_t, size_t> slice_of(size_t n, int g, int G)
{
  return {n * (size_t)g / (size_t)G, n * (size_t)(g + 1) / (size_t)G};
}

void Barrier::wait()
{
  std::unique_lock<std::mutex> lock(mutex_);
  int gen = generation_;
  if (++waiting_ == count_) {
    waiting_ = 0;
    generation_++;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return gen != generation_; });
  }
}

void Barrier::drop()
{
  std::lock_guard<std::mutex> lock(mutex_);
  if (--count_ > 0 && waiting_ == count_) {
    waiting_ = 0;
    generation_++;
    cv_.notify_all();
  }
}

void Latch::count_down(long done)
{
  std::lock_guard<std::mutex> lock(mutex_);
  left_ -= done;
  if (left_ <= 0)
    cv_.notify_all();
}

void Latch::release()
{
  std::lock_guard<std::mutex> lock(mutex_);
  open_ = true;
  cv_.notify_all();
}

void Latch::wait()
{
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return left_ <= 0 || open_; });
}

void Run::fail(int code, const char *format, ...)
{
  std::lock_guard<std::mutex> lock(error_mutex);
  if (status == KNNWB_KERNELS_OK) {
    status = code;
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
  }
  abort = true;
}

bool Run::cancelled()
{
  if (job->cancel && *job->cancel) {
    fail(KNNWB_KERNELS_CANCELLED, "cancelled");
    return true;
  }
  return abort.load();
}

void Run::tile_finished()
{
  uint64_t done = ++tiles_done;
  if (!job->progress)
    return;
  std::unique_lock<std::mutex> lock(progress_mutex, std::try_to_lock);
  if (!lock.owns_lock())
    return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_report >= std::chrono::milliseconds(100)) {
    last_report = now;
    job->progress(done, tiles_total, job->progress_data);
  }
}

} // namespace knnwb_cuda
