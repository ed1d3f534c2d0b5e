"""`vllm-omni-ci`: the same task namespace as `inv`, usable from any directory."""

from __future__ import annotations

import sys

from invoke.exceptions import Exit, ParseError, UnexpectedExit
from invoke.program import Program

from ci import __version__
from ci.errors import USAGE


class CiProgram(Program):
    """Invoke's Program, with parse errors mapped from 1 to 2 (usage errors)."""

    def run(self, argv: list[str] | None = None, exit: bool = True) -> None:
        try:
            self.create_config()
            self.parse_core(argv)
            self.parse_collection()
            self.parse_tasks()
            self.parse_cleanup()
            self.update_config()
            self.execute()
        except ParseError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(USAGE)
        except Exit as exc:
            if exc.message:
                print(exc.message, file=sys.stderr)
            sys.exit(exc.code)
        except UnexpectedExit as exc:
            sys.exit(exc.result.exited)
        except KeyboardInterrupt:
            sys.exit(130)


def program() -> CiProgram:
    from ci.tasks import ns

    return CiProgram(namespace=ns, version=__version__, name="vllm-omni-ci", binary="vllm-omni-ci")


def main() -> None:
    program().run()
