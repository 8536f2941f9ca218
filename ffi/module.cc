// The `xlabind._xlabind` extension module: every platform's FFI handlers as
// capsules (for jax.ffi.register_ffi_target), the one callback registry they
// share, the dtype table of the views, and the CUDA helpers the Python side of
// CUDA callbacks needs (the stream of the running call, device copies).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ffi/common/callback_registry.h"
#include "ffi/common/element_types.h"
#include "ffi/common/noop_handler.h"
#include "ffi/common/python_call.h"
#include "ffi/common/python_errors.h"
#include "ffi/cpu/numpy_views.h"
#include "xlabind/cpu/python_callback_handler.h"
#include "ffi/cpu/status_check_handler.h"
#include "ffi/cuda/copy_handler.h"
#include "ffi/cuda/cuda_driver.h"
#include "ffi/cuda/device_array.h"
#include "ffi/cuda/dlpack_source.h"
#include "xlabind/cuda/python_callback_handler.h"
#include "ffi/cuda/status_check_handler.h"
#include "xlabind/native/call_status.h"

namespace nb = nanobind;

namespace {

template <typename Fn>
nb::capsule HandlerCapsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

// {platform: {FFI target name: handler}}: the stateless handlers, which
// xlabind registers at import. Target names are the same on every platform;
// jax picks the platform's handler.
nb::dict Registrations() {
  nb::dict cpu;
  cpu["xlabind_noop"] = HandlerCapsule(XlabindNoop);
  cpu["xlabind_copy"] = HandlerCapsule(XlabindCpuCopy);
  cpu["xlabind_check_status"] = HandlerCapsule(XlabindCpuCheckStatus);
  nb::dict cuda;
  cuda["xlabind_noop"] = HandlerCapsule(XlabindNoop);
  cuda["xlabind_cuda_copy"] = HandlerCapsule(XlabindCudaCopy);
  cuda["xlabind_check_status"] = HandlerCapsule(XlabindCudaCheckStatus);
  nb::dict platforms;
  platforms["cpu"] = cpu;
  platforms["CUDA"] = cuda;
  return platforms;
}

nb::dict Stages(XLA_FFI_Handler* instantiate, XLA_FFI_Handler* execute) {
  nb::dict stages;
  stages["instantiate"] = HandlerCapsule(instantiate);
  stages["execute"] = HandlerCapsule(execute);
  return stages;
}

nb::dict StateType(const char* name, const XLA_FFI_TypeId* id, const XLA_FFI_TypeInfo* info) {
  nb::dict type;
  type["name"] = name;
  type["type_id"] = nb::capsule(const_cast<XLA_FFI_TypeId*>(id));
  type["type_info"] = nb::capsule(const_cast<XLA_FFI_TypeInfo*>(info));
  return type;
}

// One platform's Python-callback handlers (see CallbackRegistrations).
nb::dict PlatformCallbacks(const char* state_name, const XLA_FFI_TypeId* id,
                           const XLA_FFI_TypeInfo* info, XLA_FFI_Handler* instantiate,
                           XLA_FFI_Handler* execute, XLA_FFI_Handler* execute_reporting_status,
                           XLA_FFI_Handler* execute_capturable = nullptr) {
  nb::dict targets;
  targets["xlabind_python_callback"] = Stages(instantiate, execute);
  targets["xlabind_python_callback_status"] = Stages(instantiate, execute_reporting_status);
  // CUDA graphs: in-place functions declared command_buffer_compatible.
  if (execute_capturable != nullptr) {
    targets["xlabind_python_callback_graph"] = Stages(instantiate, execute_capturable);
  }
  nb::dict platform;
  platform["state_type"] = StateType(state_name, id, info);
  platform["targets"] = targets;
  return platform;
}

// {platform: {"state_type": {name, type_id, type_info}, "targets": {FFI target
// name: {stage: handler}}}}: the Python-callback handlers, whose instantiate
// stage keeps each callback alive for its executable. Their state type must be
// registered first, and only once the platform's backend exists (jax
// registers deferred handlers before deferred types), so xlabind registers
// them when it first lowers a call for that platform.
nb::dict CallbackRegistrations() {
  nb::dict platforms;
  platforms["cpu"] =
      PlatformCallbacks("xlabind_cpu_callback_state", xlabind::CpuCallbackStateTypeId(),
                        xlabind::CpuCallbackStateTypeInfo(), XlabindCpuPythonCallbackInstantiate,
                        XlabindCpuPythonCallback, XlabindCpuPythonCallbackReportingStatus);
  platforms["CUDA"] =
      PlatformCallbacks("xlabind_cuda_callback_state", xlabind::CudaCallbackStateTypeId(),
                        xlabind::CudaCallbackStateTypeInfo(), XlabindCudaPythonCallbackInstantiate,
                        XlabindCudaPythonCallback, XlabindCudaPythonCallbackReportingStatus,
                        XlabindCudaPythonCallbackCapturable);
  return platforms;
}

// An XLA FFI API with nothing but errors, for asking a handler for its
// metadata outside XLA: a handler that refuses (an instantiate stage whose
// state type is not registered yet, a capsule that is no FFI handler's)
// builds its error through the API, and gets one it can carry.
XLA_FFI_Error* CreateError(XLA_FFI_Error_Create_Args* args) {
  return reinterpret_cast<XLA_FFI_Error*>(new std::string(args->message ? args->message : ""));
}

std::string TakeError(XLA_FFI_Error* error) {
  auto* message = reinterpret_cast<std::string*>(error);
  std::string text = std::move(*message);
  delete message;
  return text;
}

const XLA_FFI_Api* ErrorsOnlyApi() {
  static const XLA_FFI_Api api = [] {
    XLA_FFI_Api api{};
    api.struct_size = XLA_FFI_Api_STRUCT_SIZE;
    api.api_version = {XLA_FFI_Api_Version_STRUCT_SIZE, nullptr, XLA_FFI_API_MAJOR,
                       XLA_FFI_API_MINOR};
    api.XLA_FFI_Error_Create = CreateError;
    return api;
  }();
  return &api;
}

// What XLA reads from a handler when it registers it: the FFI API version it
// was built against and its traits (bits of XLA_FFI_Handler_TraitsBits, e.g.
// 1 = command-buffer compatible). Asked the way XLA asks, with a call frame
// carrying the metadata extension; a refusal is a RuntimeError.
nb::dict HandlerMetadata(nb::capsule capsule) {
  auto* handler = reinterpret_cast<XLA_FFI_Handler*>(capsule.data());
  XLA_FFI_Metadata metadata{};
  metadata.struct_size = XLA_FFI_Metadata_STRUCT_SIZE;
  XLA_FFI_Metadata_Extension extension{};
  extension.extension_base.struct_size = XLA_FFI_Metadata_Extension_STRUCT_SIZE;
  extension.extension_base.type = XLA_FFI_Extension_Metadata;
  extension.metadata = &metadata;
  XLA_FFI_CallFrame frame{};
  frame.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  frame.api = ErrorsOnlyApi();
  frame.extension_start = &extension.extension_base;
  if (XLA_FFI_Error* error = handler(&frame)) {
    throw std::runtime_error("the handler refused XLA's metadata query: " + TakeError(error));
  }
  nb::dict out;
  out["api_version"] =
      std::make_pair(metadata.api_version.major_version, metadata.api_version.minor_version);
  out["traits"] = metadata.traits;
  return out;
}

// Raises a RuntimeError for a CUDA driver failure ("" is success).
void CheckCuda(const std::string& error) {
  if (!error.empty()) throw std::runtime_error(error);
}

}  // namespace

NB_MODULE(_xlabind, m) {
  m.doc() = "xlabind's FFI handlers (C++). Use the xlabind package, not this module.";
  // Compiled executables own CallbackEntry objects and may live until the
  // interpreter exits; that is by design, not a leak worth reporting.
  nb::set_leak_warnings(false);

  m.def("registrations", &Registrations,
        "{platform: {FFI target name: handler capsule}}: the stateless handlers.");
  m.def("callback_registrations", &CallbackRegistrations,
        "{platform: {'state_type': {...}, 'targets': {name: {stage: capsule}}}}: the "
        "Python-callback handlers and the type of their instantiate stage's state.");
  m.def("handler_metadata", &HandlerMetadata, nb::arg("capsule"),
        "{'api_version': (major, minor), 'traits': int}: what XLA reads from a handler "
        "when it is registered; a RuntimeError if the handler refuses.");
  m.def(
      "status_bytes", [] { return xlabind::native::kStatusBytes; },
      "The size of a call's status result (u8), as the status check reads it.");

  m.def(
      "element_type_names",
      [] {
        nb::dict names;
        for (const auto& [code, name] : xlabind::ElementTypeNames()) names[nb::int_(code)] = name;
        return names;
      },
      "{XLA element type code: NumPy / ml_dtypes dtype name}.");

  m.def(
      "install_dtypes",
      [](nb::dict dtypes) {
        if (!xlabind::InstallDtypes(dtypes.ptr())) throw nb::python_error();
      },
      nb::arg("dtypes"), "Installs {element type code: numpy.dtype} for buffer views.");

  m.def("stop_forwarding_interrupts", &xlabind::StopForwardingInterrupts,
        "At exit: interrupts raised in callbacks are no longer raised in the main thread.");
  m.def("close_calls", &xlabind::CloseCallsAndWait, nb::arg("timeout_s"), nb::arg("hold_calls"),
        "At exit: admits no more calls from other threads, waits up to timeout_s seconds "
        "for those running Python, and returns how many still are. hold_calls: calls on "
        "other threads that are refused or finish from now on never return (once Python "
        "finalizes).");
  m.def("wait_for_held_threads", &xlabind::WaitForPythonThreadsToHold, nb::arg("threads"),
        nb::arg("timeout_s"),
        "At exit, after close_calls(hold_calls=True): waits up to timeout_s seconds until "
        "each of these threads (idents) that has called a function inline is held; returns "
        "how many are not.");
  m.def(
      "keep_until_exit", [](nb::handle obj) { obj.inc_ref(); }, nb::arg("obj"),
      "Takes a reference to obj that is never dropped: obj outlives finalization.");
  m.def("set_checks_unwritten_results", &xlabind::SetChecksUnwrittenResults, nb::arg("checks"),
        "Whether in-place results are checked to be written (tools/benchmarks/main.py only).");
  m.def("live_callback_count", &xlabind::LiveCallbackCount,
        "How many callback keys are registered.");
  m.def("live_callback_data_count", &xlabind::LiveCallbackDataCount,
        "How many callbacks are alive: registered, or held by executables only.");
  m.def("collect_released_callbacks", &xlabind::CollectReleasedCallbacks,
        "Destroys the callbacks executables released on threads without the GIL.");
  m.def("registered_name", &xlabind::RegisteredName, nb::arg("key"),
        "The name of the callback registered under `key`, or '' when none is.");

  xlabind::DefineDeviceArray(m);
  xlabind::DefineDlpackSource(m);

  m.def(
      "_time_cuda_host_calls",
      [](uint64_t key, std::vector<std::tuple<uintptr_t, std::vector<int64_t>, int>> buffers,
         size_t num_operands, size_t calls, uintptr_t stream, int32_t device, bool foreign_thread) {
        std::vector<xlabind::HostCallBuffer> specs;
        for (auto& [data, dims, element_type] : buffers) {
          specs.push_back({data, std::move(dims), element_type});
        }
        return xlabind::TimeCudaHostCalls(key, specs, num_operands, calls, stream, device,
                                          foreign_thread);
      },
      nb::arg("key"), nb::arg("buffers"), nb::arg("num_operands"), nb::arg("calls"),
      nb::arg("stream"), nb::arg("device"), nb::arg("foreign_thread") = false,
      "Seconds for `calls` CUDA-handler calls of a registered callback on buffers "
      "[(address, dims, element type)], without XLA or a GPU (the host-path benchmark); "
      "foreign_thread: on a new thread Python did not start, as XLA's own.");
  m.def("cuda_call_is_capturing", &xlabind::CurrentCudaCallIsCapturing,
        "Whether the running CUDA callback is being captured into a CUDA graph.");
  m.def("cuda_current_call", &xlabind::CurrentCudaCall,
        "(stream, device) of the CUDA callback running on this thread, or None.");
  m.def(
      "cuda_copy",
      [](uintptr_t dst, uintptr_t src, size_t nbytes, uintptr_t stream,
         std::optional<uintptr_t> producer_stream) {
        nb::gil_scoped_release no_gil;
        if (producer_stream) CheckCuda(xlabind::cuda::StreamWaitsFor(stream, *producer_stream));
        CheckCuda(xlabind::cuda::CopyDeviceToDevice(dst, src, nbytes, stream));
      },
      nb::arg("dst"), nb::arg("src"), nb::arg("nbytes"), nb::arg("stream"),
      nb::arg("producer_stream") = nb::none(),
      "Copies nbytes on the device, on `stream`, after the work on `producer_stream`.");
  m.def(
      "cuda_synchronize_stream",
      [](uintptr_t stream) {
        nb::gil_scoped_release no_gil;
        CheckCuda(xlabind::cuda::SynchronizeStream(stream));
      },
      nb::arg("stream"), "Waits until `stream` has finished its work.");
  m.def(
      "cuda_synchronize_device",
      [](uintptr_t stream) {
        nb::gil_scoped_release no_gil;
        CheckCuda(xlabind::cuda::SynchronizeContext(stream));
      },
      nb::arg("stream"), "Waits until every stream of `stream`'s device has finished its work.");

  nb::class_<xlabind::CallbackEntry>(
      m, "CallbackEntry", nb::is_weak_referenceable(),
      "A Python callable registered under a key that HLO can name. The entry "
      "(and the callable) stays registered while this object lives.")
      .def(
          "__init__",
          [](xlabind::CallbackEntry* self, nb::callable callable, std::string name, bool in_place,
             bool single_result, nb::object kwargs, nb::object out_builder,
             nb::object jaxbind_kwargs_dump, uint64_t preferred_key) {
            if (!kwargs.is_none() && !nb::isinstance<nb::dict>(kwargs)) {
              throw nb::type_error("CallbackEntry: kwargs must be a dict or None");
            }
            if (!jaxbind_kwargs_dump.is_none()) {
              new (self) xlabind::CallbackEntry(callable.ptr(), std::move(name),
                                                xlabind::CallStyle::kJaxbind, false, nullptr,
                                                jaxbind_kwargs_dump.ptr(), preferred_key);
              return;
            }
            new (self) xlabind::CallbackEntry(
                callable.ptr(), std::move(name),
                in_place ? xlabind::CallStyle::kInPlace : xlabind::CallStyle::kAdapter,
                single_result, kwargs.is_none() ? nullptr : kwargs.ptr(), out_builder.ptr(),
                preferred_key);
          },
          nb::arg("callable"), nb::arg("name"), nb::kw_only(), nb::arg("in_place") = false,
          nb::arg("single_result") = false, nb::arg("kwargs") = nb::none(),
          nb::arg("out_builder") = nb::none(), nb::arg("jaxbind_kwargs_dump") = nb::none(),
          nb::arg("preferred_key") = 0,
          "in_place=False: callable(operands, results). in_place=True: "
          "callable(*operands, out=..., **kwargs) returning None, where `out` is the one "
          "result array when single_result, else out_builder(results) when given, else "
          "the tuple of results. jaxbind_kwargs_dump given: callable(out list, operands "
          "tuple, jaxbind_kwargs_dump), jaxbind's convention, returning None, every result "
          "written. preferred_key (0: none): the key to take if it is free, else the "
          "first free one after it.")
      .def_prop_ro("key", &xlabind::CallbackEntry::key)
      .def_prop_ro("name", [](const xlabind::CallbackEntry& e) { return e.name(); })
      .def("__reduce__",
           [](const xlabind::CallbackEntry& e) -> nb::object {
             throw nb::type_error(
                 ("xlabind: an executable that calls the Python function '" + e.name() +
                  "' cannot be serialized (pickle, jax.experimental.serialize_executable): "
                  "the function lives only in this process. Serialize programs whose "
                  "custom calls are native FFI targets, or recompile in the new process.")
                     .c_str());
           })
      .def("__repr__", [](const xlabind::CallbackEntry& e) {
        return "CallbackEntry(name='" + e.name() + "', key=" + std::to_string(e.key()) + ")";
      });
}
