"""Each README block tagged with a path under tests/consumer/ is that file,
character for character, and every file of the tutorial has its block."""

import os
import pathlib
import re
import unittest

TUTORIAL_FILES = (".bazelrc", "BUILD.bazel", "WORKSPACE", "consumer_handlers.bzl",
                  "scale_handlers.cc",
                  "scale_kernels.cu", "scale_kernels.h", "square_handlers.cc",
                  "table_handlers.cc", "table_kernels.cu", "table_kernels.h",
                  "test_consumer_ops.py")


def runfile(workspace, path):
    root = pathlib.Path(os.environ["TEST_SRCDIR"])
    return (root / workspace / path).read_text()


def readme_blocks():
    readme = runfile("xlabind", "README.md")
    return dict(re.findall(r"```\w+ tests/consumer/(\S+)\n(.*?)```", readme, flags=re.S))


class ReadmeTutorialTest(unittest.TestCase):

    def test_every_tutorial_file_has_a_block(self):
        self.assertEqual(sorted(readme_blocks()), sorted(TUTORIAL_FILES))

    def test_blocks_are_the_files(self):
        for path, block in readme_blocks().items():
            with self.subTest(path=path):
                self.assertEqual(block, runfile("consumer", path))


if __name__ == "__main__":
    unittest.main()
