"""The differences between old and new CI that docs/differences.md describes, as rows.

Each row names the heading it stands for (a test checks the heading exists), the
platforms and field where it shows, and the rule that recognises it. A difference
no row recognises makes the cell `differs`.
"""

from __future__ import annotations

from typing import Final

from ci.migrate.compare import Known

KNOWN: Final[tuple[Known, ...]] = ()
