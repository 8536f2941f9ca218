"""Where an external repository's files are in a test's runfiles."""

import pathlib

# tests/support/runfiles_repos.py in the main repository's folder of the runfiles.
ROOT = pathlib.Path(__file__).parents[3]


def repository(name: str) -> pathlib.Path | None:
    """The runfiles folder of repository `name` (as xlabind's WORKSPACE and
    MODULE.bazel name it), or None: `name` itself under WORKSPACE; under
    bzlmod its canonical name, which ends in `~name` (Bazel 7) or `+name`
    (Bazel 8 and later)."""
    for folder in sorted(ROOT.iterdir()):
        if folder.name == name or folder.name.endswith(("~" + name, "+" + name)):
            return folder
    return None
