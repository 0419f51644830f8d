#!/usr/bin/env python3
"""Builds libknnwb from the checkout around python/ with CMake, for the package to ship it.

usage: build_library.py SOURCE_DIR BUILD_DIR LINK_NAME RUNTIME_NAME [CMAKE_ARGS...]

Configures SOURCE_DIR into BUILD_DIR (Release, no tests; CUDA when nvcc is found unless the extra
arguments, or the environment variable KNNWB_CMAKE_ARGS split as a shell would, say otherwise:
pip 23.0 passes only one setup-args value), builds only the library target, and copies the shared library to
LINK_NAME (what the extension links against) and RUNTIME_NAME (its soname, installed beside the
extension). CMake's own build is incremental, so running this again is cheap.
"""
import os
import shlex
import shutil
import subprocess
import sys


def main():
    source, build, link_name, runtime_name, *extra = sys.argv[1:]
    extra += shlex.split(os.environ.get("KNNWB_CMAKE_ARGS", ""))
    if not os.path.exists(os.path.join(source, "CMakeLists.txt")):
        sys.exit(f"{source}: not a knnwb checkout (no CMakeLists.txt); install libknnwb and build "
                 "the package with -Csetup-args=-Dlibrary=system")
    cmake = shutil.which("cmake") or sys.exit("cmake not found: install it (Debian: cmake)")
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        subprocess.run([cmake, "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                        "-DBUILD_TESTING=OFF", "-DKNNWB_WERROR=OFF", *extra], check=True,
                       stdout=sys.stderr)
    jobs = str(os.cpu_count() or 1)
    subprocess.run([cmake, "--build", build, "--target", "knnwb", "-j", jobs], check=True,
                   stdout=sys.stderr)
    built = os.path.realpath(os.path.join(build, "libknnwb.so"))
    for target in (link_name, runtime_name):
        shutil.copy2(built, target + ".tmp")
        os.replace(target + ".tmp", target)


if __name__ == "__main__":
    main()
