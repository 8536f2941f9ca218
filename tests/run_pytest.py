"""Runs the pytest file named on the command line; exits non-zero on any failure."""

import sys

import pytest

if __name__ == "__main__":
    # No cache folder: runfiles are read-only. -rs lists every skip with its reason.
    sys.exit(pytest.main(["-p", "no:cacheprovider", "-q", "-rs", *sys.argv[1:]]))
