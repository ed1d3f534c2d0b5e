"""`inv`'s tasks: the task definitions of `ci.tasks` as an Invoke collection (`ci.inv`)."""

from ci.inv import collection, take_over

ns = collection()

take_over()  # `inv` exits as `vllm-omni-ci` does: a usage error is 2, not Invoke's 1
