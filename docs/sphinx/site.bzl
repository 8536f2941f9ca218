"""docs_site: runs the site builder (a py_binary) as a build action, in the
target configuration: the builder imports xlabind for autodoc, and as a
genrule tool (the host configuration) it would compile the extension modules
a second time."""

def _docs_site_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".zip")
    ctx.actions.run(
        # The binary with its runfiles (the package, its compiled modules).
        executable = ctx.attr.builder[DefaultInfo].files_to_run,
        arguments = ["--out", out.path] + ctx.attr.builder_arguments,
        outputs = [out],
        mnemonic = "DocsSite",
        progress_message = "Building the documentation site %s" % out.short_path,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

docs_site = rule(
    implementation = _docs_site_impl,
    attrs = {
        "builder": attr.label(
            executable = True,
            cfg = "target",
            doc = "a py_binary that writes the site's zip to --out",
        ),
        "builder_arguments": attr.string_list(doc = "more arguments of the builder"),
    },
)
