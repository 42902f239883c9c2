"""One logging set-up for every ``toposched`` command: ``--log-format text|json``.

JSON lines carry stable keys, so a log pipeline can index them: ``ts`` (UTC, RFC 3339 with
milliseconds), ``level``, ``logger``, ``msg``, and, where the log site knows them (passed with
``extra=``), ``workload``, ``job``, ``queue``, ``node``, ``decision``, ``reason``; ``error``
holds a traceback. The text format appends the same fields as ``key=value``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
from typing import Any, TextIO

FORMATS = ("text", "json")
# The structured fields a log site may pass with extra={...}; nothing else is emitted, so the
# keys stay stable whatever else a record carries.
FIELDS = ("workload", "job", "queue", "node", "decision", "reason")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def fields_of(record: logging.LogRecord) -> dict[str, str]:
    return {key: str(getattr(record, key)) for key in FIELDS if getattr(record, key, None) not in (None, "")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **fields_of(record),
        }
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extra = " ".join(f"{key}={value}" for key, value in fields_of(record).items())
        if not extra:
            return text
        first, newline, rest = text.partition("\n")  # keep a traceback below the fields
        return f"{first} {extra}{newline}{rest}"


def add_log_format_argument(parser: argparse.ArgumentParser) -> None:
    """``--log-format`` on a server command (controller, webhook, extender)."""
    parser.add_argument("--log-format", choices=FORMATS, default="text",
                        help="text (default) or json: one object per line with keys ts, level, logger, msg "
                        "and, where known, workload, job, queue, node, decision, reason")


def configure_logging(log_format: str = "text", verbose: bool = False, stream: TextIO | None = None) -> None:
    """Replace the root logger's handlers with one on ``stream`` (stderr) in ``log_format``."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
