"""The task namespace shared by `inv` (tasks.py) and `vllm-omni-ci`.

Each area has one module here; a task only parses its arguments and makes one
call into the library. Heavy imports (docker, rich, yaml, jsonschema) stay
inside those library calls, because this namespace loads in every CI job.
"""

from invoke.collection import Collection

from ci.tasks import (
    amd,
    bootstrap,
    covsplit,
    gates,
    images,
    meta,
    pipelines,
    plan,
    release,
    runners,
    sample,
    sandbox,
    skipci,
    tiers,
)

ns = Collection()
for module in (
    meta,
    amd,
    bootstrap,
    images,
    covsplit,
    skipci,
    gates,
    runners,
    pipelines,
    plan,
    sample,
    sandbox,
    tiers,
):
    for name in module.__all__:
        ns.add_task(getattr(module, name))
ns.add_collection(release.collection)
