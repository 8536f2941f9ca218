// Splits a loop over [0, n) across the machine's cores, for CPU handlers.
// XLA's CPU client runs custom calls on its own threads; a handler that
// parallelises takes care to do so only for work large enough to pay for
// starting threads (`grain` items per thread at least).
#ifndef XLABIND_FFI_NATIVE_PARALLEL_FOR_H_
#define XLABIND_FFI_NATIVE_PARALLEL_FOR_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace xlabind::native {

// How many threads ParallelFor would use for n items.
inline int ThreadsFor(int64_t n, int64_t grain) {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, cores));
}

// Calls body(thread, begin, end) on disjoint chunks covering [0, n), one chunk
// per thread (thread in [0, ThreadsFor(n, grain))), and waits for all.
template <typename Body>
void ParallelFor(int64_t n, int64_t grain, Body&& body) {
  const int threads = ThreadsFor(n, grain);
  if (threads <= 1) {
    body(0, int64_t{0}, n);
    return;
  }
  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  const int64_t chunk = (n + threads - 1) / threads;
  for (int t = 1; t < threads; ++t) {
    const int64_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
    workers.emplace_back([&body, t, begin, end] { body(t, begin, end); });
  }
  body(0, int64_t{0}, std::min(n, chunk));
  for (auto& worker : workers) worker.join();
}

// Calls body(thread, begin, end) on chunks of `chunk` items that cover
// [0, n), handed out on demand to ThreadsFor(n, grain) threads (thread in
// that range; each chunk goes to one thread, in no fixed order). Unlike
// ParallelFor's equal shares, a thread whose core is busy with something else
// (another process, XLA's other work) simply takes fewer chunks, instead of
// holding up the whole call.
template <typename Body>
void ParallelChunks(int64_t n, int64_t grain, int64_t chunk, Body&& body) {
  const int threads = ThreadsFor(n, grain);
  if (threads <= 1) {
    body(0, int64_t{0}, n);
    return;
  }
  chunk = std::max<int64_t>(chunk, 1);
  std::atomic<int64_t> next{0};
  auto work = [&](int thread) {
    for (;;) {
      const int64_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
      if (begin >= n) return;
      body(thread, begin, std::min(n, begin + chunk));
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) workers.emplace_back(work, t);
  work(0);
  for (auto& worker : workers) worker.join();
}

}  // namespace xlabind::native

#endif  // XLABIND_FFI_NATIVE_PARALLEL_FOR_H_
