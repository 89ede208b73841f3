"""Build step for the native `claudeguard` launcher (metadata lives in pyproject.toml).

On Linux with a C compiler, `claudeguard` is claudeguard/shim/launcher.c compiled, and the
Python launcher (bin/claudeguard) is installed beside it as `claudeguard-python`: a Python
interpreter alone starts slower than the 15 ms the guard may add to `claude --version`
(bench/RESULTS.md). Without a compiler, or elsewhere, `claudeguard` is the Python launcher and
works the same, only slower to start; the install never fails for want of a compiler.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.dist import Distribution

try:
    from setuptools.command.build_scripts import build_scripts as _build_scripts
except ImportError:  # setuptools < 68 takes it from its distutils
    from distutils.command.build_scripts import build_scripts as _build_scripts

LAUNCHER_SOURCE = os.path.join("claudeguard", "shim", "launcher.c")


def _compile_launcher(out: str) -> bool:
    if not sys.platform.startswith("linux") or os.environ.get("CLAUDEGUARD_NO_NATIVE_LAUNCHER"):
        return False
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        print("claudeguard: no C compiler; installing the Python launcher only", file=sys.stderr)
        return False
    try:
        proc = subprocess.run([cc, "-O2", "-o", out, LAUNCHER_SOURCE], capture_output=True, text=True)
    except OSError as exc:
        print(f"claudeguard: cannot run the C compiler {cc}: {exc.strerror}; installing the Python launcher only", file=sys.stderr)
        return False
    if proc.returncode != 0:
        print(f"claudeguard: the native launcher did not compile; installing the Python launcher only\n{proc.stderr}", file=sys.stderr)
        return False
    return True


class build_scripts(_build_scripts):  # type: ignore[misc, valid-type]
    def run(self) -> None:
        super().run()
        built = os.path.join(self.build_dir, "claudeguard")
        python_launcher = os.path.join(self.build_dir, "claudeguard-python")
        # Always installed, so `claudeguard-python` means the same on every machine.
        shutil.copy2(built, python_launcher)
        native = built + ".native"
        if _compile_launcher(native):
            os.replace(native, built)
            os.chmod(built, 0o755)
        elif os.path.exists(native):
            os.unlink(native)  # whatever a failed compiler left behind


class BinaryDistribution(Distribution):
    """The wheel holds a compiled program, so it is tagged for this platform, not 'any'."""

    def has_ext_modules(self) -> bool:
        return True


setup(cmdclass={"build_scripts": build_scripts}, distclass=BinaryDistribution)
