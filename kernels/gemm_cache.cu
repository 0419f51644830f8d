/*
 * The tile GEMM's timed choices kept on disk (gemm_cache.h). Why: timing cuBLASLt's candidates
 * loads every candidate's kernel, 0.11-0.14 s of every GPU command on an H200 before its first
 * tile, for a choice that only depends on the GPU model, the libraries and the tile's shape. The
 * file is a cache: a line that is missing, stale or broken only means timing again, and whichever
 * algorithm is taken, the lists are the same (the screen's bound holds for any order of the sums).
 *
 * A line: "knnwb-gemm-1 MODEL CUBLASLT DRIVER TILE DPAD lt|ex A0 .. A7" (A: the algorithm's eight
 * 64-bit words in hex, zeros for ex).
 */
#include "gemm_cache.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <fcntl.h>
#include <mutex>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace knnwb_cuda
{

namespace
{

constexpr const char *kVersion = "knnwb-gemm-1";
constexpr size_t kMaxBytes = 1u << 20;
constexpr size_t kMaxLines = 255;

bool same_key(const GemmCacheKey &a, const GemmCacheKey &b)
{
  return a.model == b.model && a.cublaslt == b.cublaslt && a.driver == b.driver &&
         a.tile == b.tile && a.dpad == b.dpad;
}

/* The file's first kMaxBytes as lines; empty when it cannot be read. */
std::vector<std::string> read_lines(const std::string &path)
{
  std::vector<std::string> lines;
  FILE *f = fopen(path.c_str(), "re");
  if (f == nullptr)
    return lines;
  std::string text(kMaxBytes, '\0');
  text.resize(fread(&text[0], 1, kMaxBytes, f));
  fclose(f);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

/* mkdir -p of path's directory (0700 for what it makes: the cache is the user's). */
bool make_parents(const std::string &path)
{
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return false;
  }
  return true;
}

bool write_all(int fd, const std::string &text)
{
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += (size_t)n;
  }
  return true;
}

} // namespace

std::string gemm_cache_model(const char *name, int major, int minor, int multiprocessors)
{
  std::string model = name != nullptr && *name != '\0' ? name : "unnamed";
  for (char &c : model)
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
      c = '_';
  return model + "/" + std::to_string(major) + "." + std::to_string(minor) + "/" +
         std::to_string(multiprocessors);
}

std::string gemm_cache_path()
{
  const char *chosen = getenv("KNNWB_CUDA_GEMM_CACHE");
  if (chosen != nullptr)
    return strcmp(chosen, "0") == 0 ? std::string() : std::string(chosen);
  const char *xdg = getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/')
    return std::string(xdg) + "/knnwb/gemm-choices";
  const char *home = getenv("HOME");
  if (home != nullptr && home[0] == '/')
    return std::string(home) + "/.cache/knnwb/gemm-choices";
  return std::string();
}

std::string gemm_cache_format(const GemmCacheEntry &e)
{
  char words[8 * 17 + 1] = "";
  for (int i = 0; i < 8; i++)
    snprintf(words + 17 * i, 18, " %016llx", (unsigned long long)(e.lt ? e.algo[i] : 0));
  return std::string(kVersion) + " " + e.key.model + " " + std::to_string(e.key.cublaslt) + " " +
         std::to_string(e.key.driver) + " " + std::to_string(e.key.tile) + " " +
         std::to_string(e.key.dpad) + (e.lt ? " lt" : " ex") + words + "\n";
}

bool gemm_cache_parse(const std::string &line, GemmCacheEntry *entry)
{
  std::istringstream in(line);
  std::string version, kind, word;
  GemmCacheEntry e;
  if (!(in >> version >> e.key.model >> e.key.cublaslt >> e.key.driver >> e.key.tile >>
        e.key.dpad >> kind) ||
      version != kVersion || (kind != "lt" && kind != "ex") || e.key.tile <= 0 || e.key.dpad <= 0)
    return false;
  e.lt = kind == "lt";
  for (int i = 0; i < 8; i++) {
    if (!(in >> word) || word.size() != 16 ||
        word.find_first_not_of("0123456789abcdef") != std::string::npos)
      return false;
    e.algo[i] = strtoull(word.c_str(), nullptr, 16);
  }
  if (in >> word)
    return false; /* more than a line holds */
  *entry = e;
  return true;
}

bool gemm_cache_lookup(const std::string &path, const GemmCacheKey &key, GemmCacheEntry *entry)
{
  if (path.empty())
    return false;
  for (const std::string &line : read_lines(path)) {
    GemmCacheEntry e;
    if (gemm_cache_parse(line, &e) && same_key(e.key, key)) {
      *entry = e;
      return true;
    }
  }
  return false;
}

bool gemm_cache_store(const std::string &path, const GemmCacheEntry &entry)
{
  /* The GPUs of a process store from their own threads: one at a time, so that each reads the
   * file the one before it renamed into place, and no two share a temporary. */
  static std::mutex store_lock;
  static std::atomic<unsigned> stores{0};
  std::lock_guard<std::mutex> guard(store_lock);
  if (path.empty() || !make_parents(path))
    return false;
  /* the newest first: this entry, then the others of the file (without one of its key) */
  std::string text = gemm_cache_format(entry);
  size_t kept = 1;
  for (const std::string &line : read_lines(path)) {
    GemmCacheEntry e;
    if (kept < kMaxLines && gemm_cache_parse(line, &e) && !same_key(e.key, entry.key)) {
      text += gemm_cache_format(e);
      kept++;
    }
  }
  const std::string temporary =
      path + ".tmp." + std::to_string((long)getpid()) + "." + std::to_string(stores++);
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return false;
  bool ok = write_all(fd, text);
  ok = close(fd) == 0 && ok;
  ok = ok && rename(temporary.c_str(), path.c_str()) == 0;
  if (!ok)
    unlink(temporary.c_str());
  return ok;
}

} // namespace knnwb_cuda
