// Splits a loop over [0, n) across threads, for CPU handlers.
//
// Pass the handler's XLA thread pool (bind `.Ctx<xla::ffi::ThreadPool>()` and
// hand its address here): the work then runs on XLA's intra-op threads, the
// ones XLA sized for this machine and shares with the rest of the program,
// so a native op beside other XLA work does not oversubscribe the cores.
// Without a pool (nullptr, or the overloads without one) it starts threads of
// its own.
//
// The calling thread always takes work too, and waits only for tasks that
// have started: the handler itself usually runs on that same pool, and a
// caller that waited for queued tasks could wait forever (8 devices' calls
// on 2 pool threads, each waiting for a task queued behind the others). A
// task that starts after the loop is done finds nothing left and leaves
// without touching the caller's (gone) state.
//
// Work is split only when large enough to pay for it (`grain` items per
// thread at least).
#ifndef XLABIND_FFI_NATIVE_PARALLEL_FOR_H_
#define XLABIND_FFI_NATIVE_PARALLEL_FOR_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace xlabind::native {

// How many threads ParallelFor would use: up to the machine's cores, and no
// more than the pool has. (XLA's CPU client sizes its pool max(cores,
// devices): on 2 cores with 8 devices, 8 threads; more shares than cores would
// only add work, e.g. the scatter's private grids.)
//
// Args:
//   pool: XLA's thread pool (bind `.Ctx<xla::ffi::ThreadPool>()`); null: the
//     machine's cores alone bound it.
//   n: how many items.
//   grain: the fewest items worth a thread of their own.
// Returns:
//   The count, at least 1.
// Example:
//   std::vector<double> partial(ThreadsFor(pool, n, 4096));
inline int ThreadsFor(xla::ffi::ThreadPool* pool, int64_t n, int64_t grain) {
  int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  if (pool != nullptr && pool->num_threads() > 0) {
    threads = std::min<int64_t>(threads, pool->num_threads());
  }
  return static_cast<int>(std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, threads));
}

inline int ThreadsFor(int64_t n, int64_t grain) { return ThreadsFor(nullptr, n, grain); }

namespace internal {

// What the caller shares with the tasks it schedules: a task runs the claim
// loop only while the caller still waits (Enter succeeds), and the caller
// waits for exactly the tasks that entered.
class WorkGate {
 public:
  explicit WorkGate(std::function<void(int)> claim) : claim_(std::move(claim)) {}

  void RunAsWorker(int worker) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closed_) return;
      ++active_;
    }
    claim_(worker);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--active_ == 0) idle_.notify_all();
  }

  // Called once every item has been claimed: later tasks do nothing.
  void CloseAndWait() {
    std::unique_lock<std::mutex> lock(mutex_);
    closed_ = true;
    idle_.wait(lock, [this] { return active_ == 0; });
  }

 private:
  std::function<void(int)> claim_;
  std::mutex mutex_;
  std::condition_variable idle_;
  int active_ = 0;
  bool closed_ = false;
};

// Runs claim(worker) on `workers` workers, the calling thread as worker 0;
// each claim loop takes items until none is left. The body must not throw
// (XLA handlers return errors); should it throw on the calling thread anyway,
// the guards below still wait for the workers before the stack unwinds.
template <typename Claim>
void RunWorkers(xla::ffi::ThreadPool* pool, int workers, Claim& claim) {
  if (workers <= 1) {
    claim(0);
    return;
  }
  if (pool == nullptr) {
    std::vector<std::thread> threads;
    struct Join {
      std::vector<std::thread>& threads;
      ~Join() {
        for (auto& thread : threads) thread.join();
      }
    } join{threads};
    threads.reserve(workers - 1);
    for (int w = 1; w < workers; ++w) threads.emplace_back([&claim, w] { claim(w); });
    claim(0);
    return;
  }
  auto gate = std::make_shared<WorkGate>([&claim](int worker) { claim(worker); });
  struct Close {
    WorkGate& gate;
    ~Close() { gate.CloseAndWait(); }
  } close{*gate};
  for (int w = 1; w < workers; ++w) pool->Schedule([gate, w] { gate->RunAsWorker(w); });
  claim(0);
}

}  // namespace internal

// Calls `body` on equal shares covering [0, n), in parallel, and returns
// when all are done. Which items make a share does not depend on which thread
// runs it, so per-share partial sums come out the same bits every time.
//
// Args:
//   pool: XLA's thread pool (bind `.Ctx<xla::ffi::ThreadPool>()`); null:
//     threads started for the call.
//   n: how many items.
//   grain: the fewest items worth a thread of their own.
//   body: called as body(share, begin, end), share below ThreadsFor(pool, n,
//     grain).
// Example:
//   ParallelFor(pool, n, 4096, [&](int share, int64_t begin, int64_t end) {
//     for (int64_t i = begin; i < end; ++i) y[i] = 2 * x[i];
//   });
template <typename Body>
void ParallelFor(xla::ffi::ThreadPool* pool, int64_t n, int64_t grain, Body&& body) {
  const int shares = ThreadsFor(pool, n, grain);
  if (shares <= 1) {
    body(0, int64_t{0}, n);
    return;
  }
  const int64_t size = (n + shares - 1) / shares;
  std::atomic<int> next{0};
  auto claim = [&](int) {
    for (int share = next.fetch_add(1); share < shares; share = next.fetch_add(1)) {
      const int64_t begin = std::min(n, share * size);
      body(share, begin, std::min(n, begin + size));
    }
  };
  internal::RunWorkers(pool, shares, claim);
}

template <typename Body>
void ParallelFor(int64_t n, int64_t grain, Body&& body) {
  ParallelFor(nullptr, n, grain, std::forward<Body>(body));
}

// Calls `body` on chunks covering [0, n), handed out on demand to the
// workers, and returns when all are done. Unlike ParallelFor's equal shares,
// a thread whose core is busy with something else (another process, XLA's
// other work) simply takes fewer chunks, instead of holding up the call.
//
// Args:
//   pool: XLA's thread pool (bind `.Ctx<xla::ffi::ThreadPool>()`); null:
//     threads started for the call.
//   n: how many items.
//   grain: the fewest items worth a thread of their own.
//   chunk: the items of a chunk (the last may have fewer).
//   body: called as body(worker, begin, end), worker below ThreadsFor(pool,
//     n, grain); a worker runs one chunk at a time, in no fixed order.
// Example:
//   ParallelChunks(pool, n, 4096, 1024, [&](int worker, int64_t begin, int64_t end) {
//     for (int64_t i = begin; i < end; ++i) y[i] = Solve(x[i]);
//   });
template <typename Body>
void ParallelChunks(xla::ffi::ThreadPool* pool, int64_t n, int64_t grain, int64_t chunk,
                    Body&& body) {
  const int workers = ThreadsFor(pool, n, grain);
  if (workers <= 1) {
    body(0, int64_t{0}, n);
    return;
  }
  chunk = std::max<int64_t>(chunk, 1);
  std::atomic<int64_t> next{0};
  auto claim = [&](int worker) {
    for (int64_t begin = next.fetch_add(chunk); begin < n; begin = next.fetch_add(chunk)) {
      body(worker, begin, std::min(n, begin + chunk));
    }
  };
  internal::RunWorkers(pool, workers, claim);
}

template <typename Body>
void ParallelChunks(int64_t n, int64_t grain, int64_t chunk, Body&& body) {
  ParallelChunks(nullptr, n, grain, chunk, std::forward<Body>(body));
}

}  // namespace xlabind::native

#endif  // XLABIND_FFI_NATIVE_PARALLEL_FOR_H_
