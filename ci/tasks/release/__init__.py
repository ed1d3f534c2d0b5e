"""The release tasks: `release.publish-images`, `release.cleanup-nightly`."""
