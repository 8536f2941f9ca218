"""The documentation's quick build (`//docs/sphinx:html_quick`), which stands in
for the compiled modules with a snapshot of what the site reads of them
(docs/sphinx/stand_ins.py): the snapshot is what the modules this build
compiled hold, and the stand-ins run nothing. That the quick site is the full
site, file for file, is test_quick_site_pages.py (`--config=all`)."""

import json

import pytest
import stand_ins


def test_the_snapshot_is_what_the_compiled_modules_hold():
    assert stand_ins.snapshot() == json.loads(stand_ins.SNAPSHOT.read_text()), (
        "a compiled module changed what the site reads of it: run "
        "`tools/bazel run //docs/sphinx:snapshot_compiled_modules -- --write`"
    )


def test_a_stand_in_refuses_to_run_what_only_the_compiled_module_can():
    copy = stand_ins._function("_xlabind", "cuda_copy", {})
    with pytest.raises(RuntimeError, match=r"xlabind\._xlabind\.cuda_copy: .*stand-in"):
        copy(0, 0, 8)
    assert stand_ins._function("_xlabind_ops", "registrations", {})() == {}
