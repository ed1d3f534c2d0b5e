"""`vllm-omni-ci sandbox up | status | down`: make this machine able to run every task, offline.

The parts, in the order `up` brings them up (parts.py): a Docker engine with
the containerd image store, the buildx plugin, the registry at
127.0.0.1:5000, the offline base image, and the buildx builder the e2e tests
use. A part that is already there and can do what the tasks need is reused;
a missing one is installed from pinned Debian packages into a prefix the
sandbox owns (debs.py, pins.py), never into the system's packages. `down`
stops only what `up` started (state.py).
"""
