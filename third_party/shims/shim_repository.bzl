"""shim_repository: one of the offline stand-ins in third_party/shims as an
external repository, wherever xlabind itself lives (this workspace, or a
consumer's local_repository / http_archive of it)."""

def _shim_repository_impl(rctx):
    folder = rctx.path(Label("//third_party/shims:BUILD.bazel")).dirname.get_child(rctx.attr.shim)
    for entry in folder.readdir():
        rctx.symlink(entry, entry.basename)

shim_repository = repository_rule(
    implementation = _shim_repository_impl,
    attrs = {"shim": attr.string(mandatory = True, doc = "the folder under third_party/shims")},
)
