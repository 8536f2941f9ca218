"""The documentation's quick build (`//docs/sphinx:html_quick`, the compiled
modules stood in for by their snapshot, test_quick_site.py) is the full site,
file for file. A second build of the site: CI runs it (`--config=all`), the
default loop leaves it out (tag "full")."""

import pathlib
import zipfile

FULL = pathlib.Path("docs/sphinx/html.zip")  # in the runfiles
QUICK = pathlib.Path("docs/sphinx/html_quick.zip")


def test_the_quick_site_is_the_full_site():
    with zipfile.ZipFile(FULL) as full, zipfile.ZipFile(QUICK) as quick:
        assert sorted(quick.namelist()) == sorted(full.namelist())
        differ = [n for n in full.namelist() if full.read(n) != quick.read(n)]
    assert not differ, f"the quick build's pages differ from the full build's: {differ}"
