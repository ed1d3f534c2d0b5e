#!/usr/bin/env bash
# Build the tools image (docker/Dockerfile.tools) offline and prove it works:
#   1. `vllm-omni-ci wheelhouse` collects the wheels on the host;
#   2. a BuildKit-capable client (the one `vllm-omni-ci doctor` reports) builds
#      the image from the local registry's base, with no network in the build;
#   3. `vllm-omni-ci --list` runs inside the image, with networking off.
# Called by .ci/run; safe to run by hand from anywhere in the checkout.
set -euo pipefail

cd "$(dirname "$0")/.."
IMAGE=${VLLM_OMNI_CI_TOOLS_IMAGE:-vllm-omni-ci/tools:local}

vllm-omni-ci wheelhouse >/dev/null

# Pick the client from doctor's report: plain `docker build` with BuildKit when
# the client can (DOCKER_BUILDKIT=1, no buildx), else `docker buildx build --load`.
read -r docker mode < <(
  vllm-omni-ci doctor --json | python3 -c '
import json, sys
report = json.load(sys.stdin)
clients = report["clients"]
ordered = sorted(clients, key=lambda c: c["path"] != report["chosen"])
for client in ordered:
    if client["buildkit_without_buildx"]:
        print(client["path"], "buildkit")
        break
else:
    for client in ordered:
        if client["buildx"]:
            print(client["path"], "buildx")
            break
    else:
        print("none none")
'
)
if [[ $mode == none ]]; then
  echo "error: no docker client here can build with BuildKit; see 'vllm-omni-ci doctor'" >&2
  exit 1
fi
echo "tools image: building $IMAGE with $docker ($mode)"

build_args=(--pull --progress=plain -f docker/Dockerfile.tools -t "$IMAGE" .)
if [[ $mode == buildkit ]]; then
  DOCKER_BUILDKIT=1 "$docker" build "${build_args[@]}"
else
  "$docker" buildx build --load "${build_args[@]}"
fi

echo "tools image: vllm-omni-ci --list inside $IMAGE (no network)"
"$docker" run --rm --network none "$IMAGE" vllm-omni-ci --list
