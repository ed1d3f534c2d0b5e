"""Release plumbing: `publish.py` (images to Docker Hub) and `cleanup.py` (nightly tags,
through `hub.py`, a small Docker Hub API client)."""
