#include "ffi/common/python_call.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

namespace xlabind {
namespace ffi = xla::ffi;
namespace {

// gc.collect(generation); false if it could not run. Keeps any pending
// exception aside (there is none here, but finalizers must not see one).
bool CollectGarbage(int generation) {
  PyObject* gc = PyImport_ImportModule("gc");
  PyObject* collected = gc ? PyObject_CallMethod(gc, "collect", "i", generation) : nullptr;
  Py_XDECREF(gc);
  if (collected == nullptr) {
    PyErr_Clear();
    return false;
  }
  Py_DECREF(collected);
  return true;
}

// A tuple of `count` views starting at `first` (new references), or nullptr.
PyObject* TupleOf(const ViewList& views, size_t first, size_t count) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(count));
  if (tuple == nullptr) return nullptr;
  for (size_t i = 0; i < count; ++i) {
    Py_INCREF(views[first + i]);
    PyTuple_SET_ITEM(tuple, i, views[first + i]);
  }
  return tuple;
}

// Calls the callable in its style. A new reference to what it returned, or
// nullptr with a Python exception set. `holders` receives the containers the
// handler made (they must be released before views are checked for escape).
PyObject* Invoke(const CallbackData& data, const ViewList& views, size_t num_operands,
                 Ref& operands_tuple, Ref& out_container) {
  const size_t num_results = views.size() - num_operands;
  if (data.style == CallStyle::kJaxbind) {
    // callable(out, args, kwargs_dump), `out` a list as jaxbind passes it.
    out_container.reset(PyList_New(static_cast<Py_ssize_t>(num_results)));
    operands_tuple.reset(TupleOf(views, 0, num_operands));
    if (!operands_tuple || !out_container) return nullptr;
    for (size_t i = 0; i < num_results; ++i) {
      Py_INCREF(views[num_operands + i]);
      PyList_SET_ITEM(out_container.get(), i, views[num_operands + i]);
    }
    PyObject* call_args[] = {out_container.get(), operands_tuple.get(), data.kwargs_dump};
    return PyObject_Vectorcall(data.callable, call_args, 3, nullptr);
  }
  if (data.style == CallStyle::kAdapter) {
    operands_tuple.reset(TupleOf(views, 0, num_operands));
    out_container.reset(TupleOf(views, num_operands, num_results));
    if (!operands_tuple || !out_container) return nullptr;
    PyObject* call_args[] = {operands_tuple.get(), out_container.get()};
    return PyObject_Vectorcall(data.callable, call_args, 2, nullptr);
  }
  // kInPlace: callable(*operands, out=..., **kwargs), with no Python frame of
  // ours in between: the path the benchmark's no-op floor measures.
  PyObject* out;
  if (data.single_result && num_results == 1) {
    out = views[num_operands];
  } else {
    out_container.reset(TupleOf(views, num_operands, num_results));
    if (!out_container) return nullptr;
    if (data.out_builder != nullptr) {
      // reset() drops the tuple, once: the builder may keep it, or not.
      out_container.reset(PyObject_CallOneArg(data.out_builder, out_container.get()));
      if (!out_container) return nullptr;
    }
    out = out_container.get();
  }
  PointerArray call_args(num_operands + 1 + data.kwvalues.size());
  PyObject** slot = call_args.data();
  for (size_t i = 0; i < num_operands; ++i) *slot++ = views[i];
  *slot++ = out;
  for (PyObject* value : data.kwvalues) *slot++ = value;
  return PyObject_Vectorcall(data.callable, call_args.data(), num_operands, data.kwnames);
}

// The views still referenced once unreachable garbage is gone. A reference
// cycle the callable left behind (an exception kept in a local: `except E as
// e: last = e`) holds a view without being reachable; collecting the
// youngest generation first, where such a cycle usually is, keeps the common
// case cheap, and only a view still referenced after a full collection is
// reported as kept.
std::vector<size_t> EscapedAfterCollecting(const ViewList& views) {
  std::vector<size_t> escaped = views.Escaped();
  for (int generation = 0; generation <= 2 && !escaped.empty(); ++generation) {
    if (!CollectGarbage(generation)) break;
    escaped = views.Escaped();
  }
  return escaped;
}

// What a jaxbind callback must have done: returned None, and left each entry
// of `out` (the list it was given) the result view it was.
std::string CheckJaxbindCall(const CallbackData& data, PyObject* returned, PyObject* out,
                             const ViewList& views, size_t num_operands) {
  if (returned != Py_None) {
    return "raised TypeError: " + data.name +
           " is a jaxbind callback: it must write its results into `out` (out[i][...] = "
           "value) and return None, but it returned " +
           Py_TYPE(returned)->tp_name;
  }
  const size_t num_results = views.size() - num_operands;
  const size_t now = static_cast<size_t>(PyList_GET_SIZE(out));
  for (size_t i = 0; i < num_results; ++i) {
    if (i >= now || PyList_GET_ITEM(out, i) != views[num_operands + i]) {
      return "raised TypeError: " + data.name + " replaced out[" + std::to_string(i) +
             "] instead of writing into it: the result arrays are XLA's own memory, so write "
             "with out[" +
             std::to_string(i) + "][()] = value (or out[" + std::to_string(i) + "][...] = value).";
    }
  }
  if (now != num_results) {
    return "raised TypeError: " + data.name + " changed the length of `out` (" +
           std::to_string(num_results) + " results, now " + std::to_string(now) + ")";
  }
  return "";
}

}  // namespace

namespace {

// The calls' gate at interpreter exit (python_call.h, "Exit").
struct ExitGate {
  std::atomic<bool> closed{false};
  // Whether calls on other threads wait in HoldWhileExiting; set before `closed`.
  std::atomic<bool> hold_calls{false};
  // The thread that closed the calls: the one that runs the atexit functions
  // and then finalizes, which may still call (CPython lets it take the GIL).
  std::atomic<std::thread::id> exiting_thread{};
  // When the calls closed; written before `closed`.
  std::atomic<std::chrono::steady_clock::time_point> closed_at{};
  // Calls admitted and not finished; a nested call counts as part of the
  // call it is nested in.
  std::atomic<int> running{0};
  std::mutex mutex;
  // Notified when `running` drops to 0 or `held` grows, once closed.
  std::condition_variable changed;
  // Under `mutex`: the Python threads (threading.get_ident()) that have made
  // a call, and the threads waiting in HoldWhileExiting.
  std::set<unsigned long> python_callers;
  std::set<unsigned long> held;
};

ExitGate& TheExitGate() {
  static auto* gate = new ExitGate();  // never destroyed: held threads read it to the end
  return *gate;
}

// How many calls this thread is inside: a function that calls jax may run a
// call inline, on its own thread.
thread_local int call_depth = 0;

// Whether this thread's Python state is one GilScope made (XLA's threads).
thread_local bool state_made_here = false;
// Whether this thread is in ExitGate::python_callers already.
thread_local bool recorded_as_caller = false;

// How long a held thread waits for finalization to begin before it returns
// anyway: long enough for the atexit functions that run after xlabind's
// (jax's own, which clear its caches and backends), short enough that one
// which waits for a held computation delays exit only that long.
constexpr std::chrono::seconds kHoldForFinalization{30};

bool IsExitingThread(const ExitGate& gate) {
  return gate.exiting_thread.load() == std::this_thread::get_id();
}

void FinishRunningCall(ExitGate& gate) {
  if (gate.running.fetch_sub(1) == 1 && gate.closed.load()) {
    // Under the mutex, so that the wake-up cannot fall between the waiter's
    // check and its wait.
    std::lock_guard<std::mutex> lock(gate.mutex);
    gate.changed.notify_all();
  }
}

// Waits, without the GIL, until `done` (called under the gate's mutex) or
// `timeout_s` seconds have passed. Requires the GIL.
template <typename Done>
void WaitForGate(ExitGate& gate, double timeout_s, Done done) {
  PyThreadState* saved = PyEval_SaveThread();
  {
    std::unique_lock<std::mutex> lock(gate.mutex);
    gate.changed.wait_for(lock, std::chrono::duration<double>(timeout_s), done);
  }
  PyEval_RestoreThread(saved);
}

std::atomic<bool> checks_unwritten_results{true};

}  // namespace

GilScope::GilScope() {
  if (PyGILState_GetThisThreadState() == nullptr) {
    // A thread Python did not start: its state is made once, with a count of
    // one that no GilScope releases, so PyGILState_Release keeps it; detached
    // until the Ensure below attaches it again. It stays when the thread
    // ends: deleting it then needs the GIL, which whoever ends XLA's threads
    // may hold while waiting for them, and deleting it later from another
    // thread would unbind that thread's own state (CPython 3.12 and later).
    // The interpreter frees it at exit.
    PyGILState_Ensure();
    PyEval_SaveThread();
    state_made_here = true;
  } else if (!state_made_here && !recorded_as_caller) {
    // A Python thread that calls inline: at exit, WaitForPythonThreadsToHold
    // may wait for it.
    recorded_as_caller = true;
    ExitGate& gate = TheExitGate();
    std::lock_guard<std::mutex> lock(gate.mutex);
    gate.python_callers.insert(PyThread_get_thread_ident());
  }
  state_ = PyGILState_Ensure();
}

CallAdmission::CallAdmission() {
  if (call_depth++ > 0) {
    admitted_ = true;  // the outer call is admitted, and counted
    return;
  }
  ExitGate& gate = TheExitGate();
  // Counted before `closed` is read, and CloseCallsAndWait sets `closed`
  // before it reads the count (both sequentially consistent): either this
  // call sees the calls closed, or CloseCallsAndWait waits for it.
  gate.running.fetch_add(1);
  admitted_ = (!gate.closed.load() || IsExitingThread(gate)) && !InterpreterIsGone();
  if (!admitted_) FinishRunningCall(gate);
}

CallAdmission::~CallAdmission() {
  if (--call_depth == 0 && admitted_) FinishRunningCall(TheExitGate());
}

int CloseCallsAndWait(double timeout_s, bool hold_calls) {
  ExitGate& gate = TheExitGate();
  gate.hold_calls.store(hold_calls);
  gate.exiting_thread.store(std::this_thread::get_id());
  gate.closed_at.store(std::chrono::steady_clock::now());
  gate.closed.store(true);
  // A call this thread is inside (an atexit function run from a callback)
  // cannot finish while this waits.
  const int own = call_depth > 0 ? 1 : 0;
  WaitForGate(gate, timeout_s, [&] { return gate.running.load() <= own; });
  return gate.running.load() - own;
}

int WaitForPythonThreadsToHold(const std::vector<unsigned long>& threads, double timeout_s) {
  ExitGate& gate = TheExitGate();
  // Under the gate's mutex.
  auto not_held = [&] {
    int count = 0;
    for (unsigned long thread : threads) {
      count += gate.python_callers.count(thread) != 0 && gate.held.count(thread) == 0;
    }
    return count;
  };
  WaitForGate(gate, timeout_s, [&] { return not_held() == 0; });
  std::lock_guard<std::mutex> lock(gate.mutex);
  return not_held();
}

void HoldWhileExiting() {
  ExitGate& gate = TheExitGate();
  if (call_depth > 0 || !gate.closed.load() || !gate.hold_calls.load() || IsExitingThread(gate)) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(gate.mutex);
    gate.held.insert(PyThread_get_thread_ident());
    gate.changed.notify_all();
  }
  const auto deadline = gate.closed_at.load() + kHoldForFinalization;
  while (!InterpreterIsGone()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::lock_guard<std::mutex> lock(gate.mutex);
      gate.held.erase(PyThread_get_thread_ident());
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

bool ChecksUnwrittenResults() { return checks_unwritten_results.load(std::memory_order_relaxed); }
void SetChecksUnwrittenResults(bool checks) { checks_unwritten_results.store(checks); }

std::string UnwrittenResultError(const CallbackData& data, size_t i, size_t num_results) {
  const std::string index = std::to_string(i);
  if (data.style == CallStyle::kJaxbind) {
    return "raised TypeError: " + data.name + " wrote nothing into out[" + index +
           "] (its first and last elements are still as xlabind left them): a jaxbind "
           "callback must fill every result, e.g. out[" +
           index + "][...] = value";
  }
  const std::string which = num_results == 1 ? "`out`" : "result " + index + " of `out`";
  return "raised TypeError: " + data.name + " wrote nothing into " + which +
         " (its first and last elements are still as xlabind left them): an in_place "
         "function must fill every result it is given, since XLA's result memory starts "
         "uninitialised; write every element (e.g. out[...] = value), also on the paths "
         "that skip the work";
}

ffi::Error CallbackError(const std::string& name, const std::string& what) {
  return ffi::Error(ffi::ErrorCode::kUnknown, "xlabind callback '" + name + "' " + what);
}

std::string InvokeAndCheck(const CallbackData& data, ViewList& views, size_t num_operands,
                           std::string (*detach)(void*, ViewList&, const std::vector<size_t>&),
                           void* platform) {
  std::string error;
  {
    Ref operands_tuple, out_container;
    Ref returned(Invoke(data, views, num_operands, operands_tuple, out_container));
    if (!returned) {
      // Taking the error also drops the traceback, whose frames hold views.
      error = "raised " + TakePythonError();
    } else if (data.style == CallStyle::kInPlace && returned.get() != Py_None) {
      // The one place that decides: every in-place call comes through here.
      error = "raised TypeError: " + data.name +
              " is an in_place function: it must write into `out` and return None, but it "
              "returned " +
              Py_TYPE(returned.get())->tp_name;
    } else if (data.style == CallStyle::kJaxbind) {
      error = CheckJaxbindCall(data, returned.get(), out_container.get(), views, num_operands);
    }
  }  // the handler's own containers are released here
  const std::vector<size_t> escaped = EscapedAfterCollecting(views);
  if (escaped.empty()) return error;
  // Checked after success and failure alike: a view kept past the call must
  // not reach XLA's memory once the handler returns.
  const std::string what_was_done = detach(platform, views, escaped);
  if (!error.empty()) error += "\n\nIt also ";
  error +=
      "kept a reference to an operand or result array after it returned (it stored one, "
      "or handed one to code that holds on to it: jax itself may alias NumPy memory "
      "without copying). Those arrays view XLA's memory and die with the call; " +
      what_was_done;
  return error;
}

}  // namespace xlabind
