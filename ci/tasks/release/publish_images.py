"""`release.publish-images`: the Docker Hub release of the CI images (ci.release.publish)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    replaces=("publish-release-images.sh",),
    help={
        "mode": "release (default: latest, v<version>) or nightly (nightly, nightly-<commit>)",
        "commit": "source commit of the ECR staging images (default: $BUILDKITE_COMMIT)",
        "release_version": "release mode: the version (default: build meta-data release-version)",
        "dry_run": "print the whole command sequence and run nothing",
    },
)
def publish_images(
    mode: str = "release",
    commit: str = "",
    release_version: str = "",
    dry_run: bool = False,
) -> None:
    """Publish the per-arch ECR images to vllm/vllm-omni with multi-arch manifests.

    Replaces publish-release-images.sh: log in to ECR, pull the commit's x86_64
    and aarch64 staging images, tag and push them to vllm/vllm-omni, then create
    and push the multi-arch manifests. stdout lists the refs written. A missing
    commit or a bad mode exits 2; a failed command exits with its code.
    """
    from ci.release.publish import publish

    publish(mode, commit=commit, version=release_version, dry_run=dry_run)
