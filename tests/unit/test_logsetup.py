"""``--log-format``: one set-up for every server command, stable JSON keys, fields via extra=."""

from __future__ import annotations

import io
import json
import logging

import pytest

from scheduler.cli import build_parser
from scheduler.logsetup import FIELDS, configure_logging


@pytest.fixture
def restore_root_logging() -> object:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield None
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_have_the_stable_keys(restore_root_logging: object) -> None:
    out = io.StringIO()
    configure_logging("json", stream=out)
    logging.getLogger("toposched.test").info("workload %s admitted", "ns/w", extra={
        "workload": "ns/w", "job": "Job/train", "queue": "cq", "decision": "admitted", "reason": "QuotaReserved",
        "unrelated": "dropped"})
    line = json.loads(out.getvalue())
    assert list(line)[:4] == ["ts", "level", "logger", "msg"]
    assert line["level"] == "info" and line["logger"] == "toposched.test" and line["msg"] == "workload ns/w admitted"
    assert line["ts"].endswith("Z") and "T" in line["ts"]
    assert {k: line[k] for k in ("workload", "job", "queue", "decision", "reason")} == {
        "workload": "ns/w", "job": "Job/train", "queue": "cq", "decision": "admitted", "reason": "QuotaReserved"}
    assert "unrelated" not in line and "node" not in line  # only the known fields, only when given
    assert set(FIELDS) == {"workload", "job", "queue", "node", "decision", "reason"}


def test_json_carries_a_traceback_as_error(restore_root_logging: object) -> None:
    out = io.StringIO()
    configure_logging("json", stream=out)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("x").exception("reconcile failed", extra={"node": "n1"})
    line = json.loads(out.getvalue())
    assert line["level"] == "error" and "RuntimeError: boom" in line["error"] and line["node"] == "n1"


def test_text_appends_the_fields(restore_root_logging: object) -> None:
    out = io.StringIO()
    configure_logging("text", verbose=True, stream=out)
    logging.getLogger("t").debug("evicted", extra={"workload": "ns/w", "reason": "NodeFailures"})
    assert out.getvalue().rstrip().endswith("DEBUG t: evicted workload=ns/w reason=NodeFailures")


@pytest.mark.parametrize("command", ["controller", "webhook", "extender"])
def test_every_server_command_takes_log_format(command: str) -> None:
    args = build_parser().parse_args([command, "--log-format", "json"])
    assert args.log_format == "json"
    assert build_parser().parse_args([command]).log_format == "text"
