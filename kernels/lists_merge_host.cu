/*
 * Several GPUs without peer access, symmetric: row i's candidates are spread over the GPUs' lists
 * (no pair twice, every tile is computed once). Each worker merges its share of the rows, keeping
 * the kc best by (score, index), with merge_threads host threads.
 */
#include "select_worker.h"

#include <algorithm>
#include <exception>
#include <new>
#include <thread>
#include <vector>

namespace knnwb_cuda
{

void Worker::merge_partials()
{
  const KnnwbSelectJob *job = run_.job;
  const size_t n = job->n_query, kc = job->kc;
  const int G = run_.n_devices;
  const bool exact = run_.exact;
  struct Entry {
    float score;
    int64_t index;
    double distance;
    bool operator<(const Entry &o) const
    {
      return score != o.score ? score < o.score : index < o.index;
    }
  };
  auto merge_range = [&](size_t begin, size_t end) {
    std::vector<Entry> pool;
    try {
      pool.reserve(kc * G);
    } catch (const std::bad_alloc &) {
      run_.fail(KNNWB_KERNELS_OUT_OF_MEMORY,
                "cannot allocate the host merge of %zu candidates per row (%d GPUs)", kc * G, G);
      return;
    }
    for (size_t i = begin; i < end; i++) {
      pool.clear();
      for (int g = 0; g < G; g++)
        for (size_t t = 0; t < kc; t++) {
          int64_t idx = run_.partial_index[g][i * kc + t];
          if (idx >= 0)
            pool.push_back({run_.partial_score[g][i * kc + t], idx,
                            exact ? run_.partial_distance[g][i * kc + t] : 0.0});
        }
      size_t take = std::min(kc, pool.size());
      if (pool.size() > kc)
        std::nth_element(pool.begin(), pool.begin() + (kc - 1), pool.end());
      for (size_t t = 0; t < kc; t++) {
        job->out_index[i * kc + t] = t < take ? pool[t].index : -1;
        job->out_score[i * kc + t] = t < take ? pool[t].score : __builtin_inff();
        if (exact)
          job->out_distance[i * kc + t] = t < take ? pool[t].distance : __builtin_nan("");
      }
    }
  };
  auto mine = slice_of(n, index_, G);
  const int threads = std::max(1, run_.merge_threads);
  auto merge_part = [&](int t) {
    auto part = slice_of(mine.second - mine.first, t, threads);
    merge_range(mine.first + part.first, mine.first + part.second);
  };
  std::vector<std::thread> helpers;
  int started = 1;
  try {
    helpers.reserve((size_t)threads);
    for (; started < threads; started++)
      helpers.emplace_back(merge_part, started);
  } catch (const std::exception &) {
    /* A helper that cannot start (memory or process limits): this thread merges its part. */
  }
  for (int t = started; t < threads; t++)
    merge_part(t);
  merge_part(0);
  for (auto &h : helpers)
    h.join();
}

} // namespace knnwb_cuda
