"""Release plumbing: publishing images to Docker Hub and pruning nightly tags.

`publish.py` replaces publish-release-images.sh (docker CLI through the door);
`cleanup.py` replaces cleanup-nightly-builds.sh on top of `hub.py`, a small
Docker Hub API client (urllib, timeouts, no redirects with credentials).
"""
