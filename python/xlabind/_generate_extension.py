"""`python -m xlabind._generate_extension ...`: xlabind.native_build.main, which
xlabind_add_extension (cmake/xlabindConfig.cmake) runs. A module of its own:
`-m xlabind.native_build` would run a module the package has imported
already (runpy warns of it)."""

import sys

from xlabind.native_build import main

if __name__ == "__main__":
    sys.exit(main())
