"""The C++ source of an `xlabind_extension` module, as one pure function.

Written in the part of Starlark that is also Python (no f-strings, sets or
`while`), so that the one generator serves both: the `xlabind_extension`
macro (ffi/defs.bzl) expands ffi/extension_module.cc.tmpl with these
substitutions, and the wheel's CMake files (python/xlabind/cmake/), which
build without Bazel, execute this file and do the same.
"""

# A target's stages, in the order XLA runs them.
STAGES = ["instantiate", "prepare", "initialize", "execute"]

# The name XLA's FFI registry knows each platform by (jax's).
REGISTRY_NAMES = {"cpu": "cpu", "cuda": "CUDA"}

def registered_platform(name, platform, argument):
    """The name jax registers `platform` under ("cpu", "CUDA"); fails the build
    for a platform xlabind_extension does not know."""
    registered = REGISTRY_NAMES.get(platform.lower())
    if registered == None:
        fail("xlabind_extension(%s): unknown platform %r in %s; use %s (any case)" %
             (name, platform, argument, " or ".join(['"%s"' % p for p in REGISTRY_NAMES])))
    return registered

def handler(execute, instantiate = None, prepare = None, initialize = None, command_buffer = False):
    """xlabind_handler (ffi/defs.bzl): one target's stages as the table of stages
    module_handlers takes, every argument checked here."""
    stages = {
        "instantiate": instantiate,
        "prepare": prepare,
        "initialize": initialize,
        "execute": execute,
    }
    for stage in STAGES:
        symbol = stages[stage]
        if (symbol != None or stage == "execute") and type(symbol) != type(""):
            fail("xlabind_handler: %s must be the C symbol of its handler (a string), got %r" %
                 (stage, symbol))
    if type(command_buffer) != type(True):
        fail("xlabind_handler: command_buffer must be True or False, got %r" % (command_buffer,))
    made = {stage: stages[stage] for stage in STAGES if stages[stage] != None}
    if command_buffer:
        made["command_buffer"] = True
    return made

def handler_stages(name, platform, registered, target, handler):
    """One target's entry of extension_module_substitutions' `handlers`: every
    stage (None where it has none) and "command_buffer"."""
    if type(handler) == type(""):
        handler = {"execute": handler}
    if type(handler) != type({}):
        fail("xlabind_extension(%s): handlers[%r][%r] must be the execute handler's C symbol " %
             (name, platform, target) + "(a string) or xlabind_handler(...), got %r" % (handler,))
    for key in handler:
        if key not in STAGES and key != "command_buffer":
            fail("xlabind_extension(%s): handlers[%r][%r] has an unknown key %r; write it as " %
                 (name, platform, target, key) + "xlabind_handler(execute = ..., instantiate = " +
                 "..., prepare = ..., initialize = ..., command_buffer = ...)")
    if "execute" not in handler:
        fail("xlabind_extension(%s): handlers[%r][%r] names no \"execute\" handler" %
             (name, platform, target))
    command_buffer = handler.get("command_buffer", False)
    if command_buffer and registered != "CUDA":
        fail("xlabind_extension(%s): handlers[%r][%r] asks for command_buffer, which only " %
             (name, platform, target) + "CUDA handlers can be (XLA's command buffers are CUDA graphs)")
    if registered == "cpu" and ("prepare" in handler or "initialize" in handler):
        fail("xlabind_extension(%s): handlers[%r][%r] has a prepare or initialize stage, which " %
             (name, platform, target) + "XLA's CPU runtime never runs (it runs instantiate and " +
             "execute only)")
    stages = {stage: handler.get(stage) for stage in STAGES}
    stages["command_buffer"] = bool(command_buffer)
    return stages

def module_handlers(name, handlers):
    """xlabind_extension's `handlers` ({platform in any case: {target: C symbol or
    {stage: C symbol, "command_buffer": bool}}}) checked, as
    extension_module_substitutions takes them."""
    checked = {}
    for platform, targets in handlers.items():
        registered = registered_platform(name, platform, "handlers")
        if registered not in checked:
            checked[registered] = {}
        for target, handler in targets.items():
            checked[registered][target] = handler_stages(
                name,
                platform,
                registered,
                target,
                handler,
            )
    return checked

def module_state_types(name, state_types):
    """xlabind_extension's `state_types` ({platform in any case: [C symbol]}) by
    registered platform."""
    checked = {}
    for platform, symbols in state_types.items():
        registered = registered_platform(name, platform, "state_types")
        checked[registered] = checked.get(registered, []) + list(symbols)
    return checked

def extension_module_substitutions(module, handlers, state_types):
    """{placeholder of ffi/extension_module.cc.tmpl: its text}.

    Args:
      module: the Python module's name.
      handlers: {platform: {target: {stage: C symbol, "command_buffer": bool}}},
        platforms as REGISTRY_NAMES' values, every stage of STAGES present
        (None where the target has none).
      state_types: {platform: [C symbol of an XLABIND_DEFINE_STATE_TYPE]}.

    Everything comes out in sorted order, whatever order the dicts came in.
    """
    declared = {}
    declarations = []
    wrappers = []
    entries = []
    for platform in sorted(handlers):
        targets = handlers[platform]
        for target in sorted(targets):
            stages = targets[target]
            pointers = []
            for stage in STAGES:
                symbol = stages[stage]
                if symbol == None:
                    pointers.append("nullptr")
                    continue
                if symbol not in declared:
                    declared[symbol] = True
                    declarations.append("struct XLA_FFI_Error* %s(struct XLA_FFI_CallFrame*);" %
                                        symbol)
                pointers.append("&" + symbol)
            if stages["command_buffer"]:
                execute = stages["execute"]
                wrapper = execute + "_command_buffer"
                if wrapper not in declared:
                    declared[wrapper] = True
                    wrappers.append(
                        "XLA_FFI_Error* %s(XLA_FFI_CallFrame* frame) {\n" % wrapper +
                        "  return xlabind::native::CallWithTraits(\n" +
                        "      &%s, XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE, frame);\n}" %
                        execute,
                    )
                pointers[-1] = "&" + wrapper
            entries.append('  if (!Add(platforms, "%s", "%s", {%s})) return Fail(platforms);' %
                           (platform, target, ", ".join(pointers)))
    type_entries = []
    for platform in sorted(state_types):
        for symbol in state_types[platform]:
            declarations.append("XLA_FFI_TypeId* %s_type_id(void);" % symbol)
            declarations.append("const XLA_FFI_TypeInfo* %s_type_info(void);" % symbol)
            type_entries.append(
                '  if (!AddType(types, "%s", "%s.%s", %s_type_id(), %s_type_info())) ' %
                (platform, module, symbol, symbol, symbol) + "return Fail(types);",
            )
    return {
        "%{module}": module,
        "%{declarations}": "\n".join(sorted(declarations)),
        "%{wrappers}": "\n\n".join(wrappers),
        "%{entries}": "\n".join(entries),
        "%{type_entries}": "\n".join(type_entries),
    }
