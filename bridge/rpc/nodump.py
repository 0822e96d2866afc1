"""The library that makes the agent non-dumpable (`nodump.c`): where it is, how it is built.

pi is a node program, and node has no call for prctl(PR_SET_DUMPABLE), so the bridge
preloads a three-line C library into it (docs/security.md, "No tool reaches pi"). It is
built from source by the setup (`python -m bridge.rpc.nodump`, needing only a C
compiler) next to this module; nothing prebuilt is shipped.

Run as a script it builds the library, or with `--check` says whether it is there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("nodump.c")
LIBRARY = Path(__file__).with_name("libnodump.so")  # not nodump.so: that would import
BUILD_TIMEOUT = 60.0  # one small file; a stuck compiler means a broken toolchain
COMPILERS = ("cc", "gcc", "clang")


def library() -> Path | None:
    """The built library, or None when the setup has not built it here."""
    return LIBRARY if LIBRARY.is_file() else None


def missing_reason() -> str:
    return (
        f"{LIBRARY.name} is not built: run deploy/dev-setup.sh, or `python -m "
        "bridge.rpc.nodump` with a C compiler installed (Debian: apt-get install gcc)"
    )


def build(target: Path = LIBRARY) -> Path:
    """Compile `nodump.c` into `target` (written whole, then renamed into place)."""
    compiler = next((found for name in COMPILERS if (found := shutil.which(name))), None)
    if compiler is None:
        raise RuntimeError(f"no C compiler found ({', '.join(COMPILERS)})")
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        argv = [compiler, "-shared", "-fPIC", "-O2", "-nostdlib", "-o", str(built), str(SOURCE)]
        env = {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"{compiler} failed: {done.stderr.strip()[-500:]}")
        built.chmod(0o644)
        built.replace(target)
    return target


def main(args: list[str]) -> int:
    if args[:1] == ["--check"]:
        found = library()
        print(found if found else missing_reason())
        return 0 if found else 1
    try:
        print(build())
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"nodump: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
