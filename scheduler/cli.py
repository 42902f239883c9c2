"""The ``toposched`` command.

Each subcommand lives in ``scheduler.commands.<name>`` and exposes ``register(subparsers)``;
the function it sets as ``func`` returns the process exit code. A :class:`UserError` anywhere
becomes one line on stderr and its exit code (2 unless it says otherwise).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from scheduler.errors import UserError
from scheduler.logsetup import configure_logging

# Order is the order ``toposched --help`` lists them in.
COMMAND_MODULES = (
    "dev",
    "place",
    "topology",
    "explain",
    "defrag",
    "simulate",
    "controller",
    "extender",
    "webhook",
    "adopt",
    "preflight",
    "migrate_limits",
    "mk_dispatch",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toposched",
        description="Kueue-compatible, topology-aware admission and placement for GPU clusters.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"scheduler.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"scheduler.commands.{name}":
                raise
            continue  # not built yet: the command is simply absent from --help
        module.register(sub)
    return parser


def other_checkout(cwd: Path, running: Path) -> Path | None:
    """The toposched checkout ``cwd`` is in, when it is not the one whose code runs (``running``):
    the editable install points ``toposched`` at whichever checkout ran scripts/setup.sh last."""
    for folder in (cwd, *cwd.parents):
        if (folder / "scheduler" / "cli.py").is_file() and (folder / "pyproject.toml").is_file():
            return None if folder.resolve() == running.resolve() else folder
    return None


def main(argv: Sequence[str] | None = None) -> int:
    elsewhere = other_checkout(Path.cwd(), Path(__file__).resolve().parents[1])
    if elsewhere is not None:
        print(f"toposched: note: running the code of {Path(__file__).resolve().parents[1]}, not of this checkout "
              f"({elsewhere}): run scripts/setup.sh here, or python3 -m scheduler.cli", file=sys.stderr)
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(getattr(args, "log_format", "text"), args.verbose)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"toposched {args.command}: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
