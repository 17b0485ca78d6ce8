"""The build step pyproject.toml cannot say: specs/ and invariants/, the editable sources at
the top of the checkout, are copied into the built package as refsim/_data/, where
refsim.data.paths finds them through importlib.resources (an editable install reads them in
place)."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
DATA = ("specs", "invariants")


class BuildWithData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in DATA:
            target = Path(self.build_lib) / "refsim" / "_data" / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(HERE / name, target,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithData})
