#!/usr/bin/env bash
# Stand-in for vLLM-Omni's TorchCodec-for-ROCm build, for the sample's deps stage.
#
# Why it exists: the deps stage must do real, offline, CPU-bound work with real
# output, so that cache hits and misses of the ROCm image are measurable. The
# "build" byte-compiles a private copy of the Python standard library at three
# optimisation levels, then packs it, the way a native build produces objects
# and an archive.
#
# Usage: install_torchcodec_rocm.sh [PREFIX]   (default /opt/torchcodec)
set -euo pipefail

prefix="${1:-/opt/torchcodec}"
arch="${PYTORCH_ROCM_ARCH:-gfx942}"
python="${PYTHON:-python3}"

stdlib="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')"
echo "torchcodec (sample): building for ROCm arch '${arch}' from ${stdlib}"

mkdir -p "${prefix}/src"
cp -a "${stdlib}/." "${prefix}/src/"
rm -rf "${prefix}/src/site-packages" "${prefix}/src/dist-packages"
# Sources that do not compile on purpose (test data) are skipped, not errors.
"$python" -m compileall -q -j 0 -o 0 -o 1 -o 2 \
    -x '(bad_coding|badsyntax|lib2to3/tests/data|test/tokenizedata)' \
    "${prefix}/src" >/dev/null
tar -C "${prefix}" -czf "${prefix}/torchcodec-src.tar.gz" src
printf 'arch=%s\npython=%s\n' "${arch}" "$("$python" -c 'import platform; print(platform.python_version())')" \
    >"${prefix}/BUILD_INFO"
du -sh "${prefix}"
