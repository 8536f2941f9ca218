// The `xlabind._xlabind_cpu` extension module: hands the CPU handlers to
// Python as capsules (for jax.ffi.register_ffi_target) and exposes the
// callback registry.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "ffi/callback_registry.h"
#include "ffi/noop_handler.h"
#include "ffi/numpy_views.h"
#include "ffi/python_callback_handler.h"

namespace nb = nanobind;

namespace {

template <typename Fn>
nb::capsule HandlerCapsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

}  // namespace

NB_MODULE(_xlabind_cpu, m) {
  m.doc() = "xlabind's CPU FFI handlers (C++). Use the xlabind package, not this module.";
  // Compiled executables own CallbackEntry objects and may live until the
  // interpreter exits; that is by design, not a leak worth reporting.
  nb::set_leak_warnings(false);

  m.def(
      "handlers",
      [] {
        nb::dict targets;
        targets["xlabind_python_callback"] = HandlerCapsule(XlabindPythonCallback);
        targets["xlabind_noop"] = HandlerCapsule(XlabindNoop);
        return targets;
      },
      "{FFI target name: handler capsule} for the CPU platform.");

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

  m.def("live_callback_count", &xlabind::LiveCallbackCount,
        "How many registered callbacks are alive.");

  nb::class_<xlabind::CallbackEntry>(
      m, "CallbackEntry",
      "A Python callable registered under a key that HLO can name. The entry "
      "(and the callable) stays registered while this object lives.")
      .def(
          "__init__",
          [](xlabind::CallbackEntry* self, nb::callable callable, std::string name,
             bool in_place, bool single_result, std::optional<nb::dict> kwargs) {
            new (self) xlabind::CallbackEntry(
                callable.ptr(), std::move(name),
                in_place ? xlabind::CallStyle::kInPlace : xlabind::CallStyle::kAdapter,
                single_result, kwargs ? kwargs->ptr() : nullptr);
          },
          nb::arg("callable"), nb::arg("name"), nb::kw_only(), nb::arg("in_place") = false,
          nb::arg("single_result") = false, nb::arg("kwargs") = nb::none(),
          "in_place=False: callable(operands, results). in_place=True: "
          "callable(*operands, out=results, **kwargs) returning None, where `out` is "
          "the one result array when single_result, else a tuple.")
      .def_prop_ro("key", &xlabind::CallbackEntry::key)
      .def_prop_ro("name", [](const xlabind::CallbackEntry& e) { return e.name(); })
      .def("__repr__", [](const xlabind::CallbackEntry& e) {
        return "CallbackEntry(name='" + e.name() + "', key=" + std::to_string(e.key()) + ")";
      });
}
