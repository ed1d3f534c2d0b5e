"""AMD (ROCm) pipeline: suite selection, combining, rendering, bootstrap."""
