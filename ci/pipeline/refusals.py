"""What Buildkite refuses in a pipeline file that its JSON schema cannot see.

An `if` that does not parse as a Buildkite conditional (`ci.pipeline.ifexpr`), a
`key` used twice, a step that depends on itself or on its own group, a
`depends_on` cycle (`ci.pipeline.depgraph`). lint-pipelines reports these for every
file; a local tier refuses its file on them before any job runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ci.pipeline import depgraph, ifexpr, model
from ci.pipeline.commands import step_name


def if_problems(documents: Iterable[Any], source: str = "") -> list[str]:
    """One line per step or group whose `if` text Buildkite cannot parse."""
    where = f"{source}: " if source else ""
    found: list[str] = []
    for document in documents:
        for entry in model.every(model.parse(document).steps or ()):
            condition = entry.get("if")
            if isinstance(condition, str) and (why := ifexpr.syntax_problem(condition)):
                shown = " ".join(condition.split())
                found.append(
                    f"{where}step {step_name(entry.fields)}: `if` does not parse ({why}): {shown}"
                )
    return found


def problems(documents: Sequence[Any], source: str = "") -> list[str]:
    """Every refusal of the file's documents, one line each, naming the step."""
    return if_problems(documents, source) + depgraph.problems(documents, source)
