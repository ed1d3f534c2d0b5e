"""`vllm-omni-ci sandbox up | status | down`: make this machine able to run every task, offline.

The parts (parts.py): an engine with the containerd image store on its socket,
buildx, the registry on 127.0.0.1 (port 5000 unless told; settings.py), the
offline base image and the e2e builder. A part that works is reused; a missing
one is installed from pinned Debian packages into the sandbox's own prefix
(debs.py). `down` stops only what `up` started; touches.py lists what `up`
changes outside the sandbox's folder.
"""
