"""vllm-omni-ci: the library behind `inv`, `nox` and the `vllm-omni-ci` command.

Keep this file empty of imports: `inv --list` imports the package in every CI job. The
version is the installed distribution's (`vllm-omni-ci --version`), from the VERSION file.
"""
