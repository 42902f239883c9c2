"""Issue 40: docs/install.md says what the code does. Its kind list is the job-kind registry's,
its RBAC table is the chart's roles rule for rule (every template branch), every ``helm --set``
in its commands names a value the chart has, every ``toposched`` command in them parses, and no
command holds a placeholder (``<name>``, ``...``)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.adapter.kinds.notbuilt import NOT_BUILT
from scheduler.adapter.kinds.registry import KINDS
from scheduler.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "install.md").read_text()
TEMPLATES = ROOT / "deploy" / "helm" / "toposched" / "templates"
VALUES = yaml.safe_load((ROOT / "deploy" / "helm" / "toposched" / "values.yaml").read_text())
TEMPLATED = "X"  # what a template action in a rule becomes (the Kueue guard's Lease name)


def between(marker: str) -> list[list[str]]:
    """The rows of the table between ``<!-- marker: begin -->`` and ``<!-- marker: end -->``."""
    body = DOC.split(f"<!-- {marker}: begin -->")[1].split(f"<!-- {marker}: end -->")[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in body.strip().splitlines()]
    return rows[2:]  # header and separator


def unquote(cell: str) -> str:
    return cell.replace("`", "").strip()


def test_kind_table_is_the_registry() -> None:
    rows = between("kinds")
    assert [(r[0], unquote(r[1]), unquote(r[2]).split(" ")[0]) for r in rows] == \
        [(k.kind, k.api_version, k.framework) for k in KINDS]
    runs = DOC.split("## What toposched runs")[1].split("\n## ")[0]
    for known in NOT_BUILT:
        assert known.kind in runs, f"{known.kind} (not built) is not named"


def chart_documents() -> list[dict[str, Any]]:
    """The RBAC templates as YAML, every branch kept: comments dropped, lines holding only a
    template action dropped, inline actions replaced by a marker."""
    docs: list[dict[str, Any]] = []
    for path in sorted(TEMPLATES.glob("rbac-*.yaml")):
        text = re.sub(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", "", path.read_text(), flags=re.S)
        lines = []
        for line in text.splitlines():
            bare = line.strip()
            if bare.startswith("{{") and bare.endswith("}}") and bare.count("{{") == 1:
                continue
            lines.append(re.sub(r"\{\{.*?\}\}", TEMPLATED, line))
        docs += [d for d in yaml.safe_load_all("\n".join(lines)) if d]
    return docs


Rule = tuple[str, str, str, str, str, str, str]  # account, role kind, role, group, resource, verb, name


def chart_rules() -> set[Rule]:
    docs = chart_documents()
    accounts: dict[str, set[str]] = {}
    for d in docs:
        if d["kind"].endswith("Binding"):
            accounts.setdefault(d["roleRef"]["name"], set()).update(s["name"] for s in d["subjects"])
    rules: set[Rule] = set()
    for d in docs:
        if d["kind"] in ("ClusterRole", "Role"):
            for account in accounts[d["metadata"]["name"]]:
                for r in d["rules"]:
                    for group in r["apiGroups"]:
                        for resource in r["resources"]:
                            for verb in r["verbs"]:
                                for name in r.get("resourceNames") or ["-"]:
                                    rules.add((account, d["kind"], d["metadata"]["name"], group or "core", resource,
                                               verb, name))
        elif d["kind"].endswith("Binding") and d["roleRef"]["name"].startswith(("system:", "extension-")):
            for s in d["subjects"]:
                rules.add((s["name"], d["roleRef"]["kind"], d["roleRef"]["name"], "-", "-", "-", "-"))
    return rules


def doc_rules() -> set[Rule]:
    rules: set[Rule] = set()
    for account, role, group, resources, verbs, names, _why in between("rbac"):
        kind, name = unquote(role).split(" ")[:2]
        listed = ["-"] if names == "-" else [TEMPLATED if "kueueGuard.lease" in n else unquote(n)
                                              for n in names.split(", ")]
        for resource in resources.split(", "):
            for verb in verbs.split(", "):
                for resource_name in listed:
                    rules.add((account, kind, name, unquote(group), resource, verb, resource_name))
    return rules


def test_rbac_table_is_the_charts_roles() -> None:
    chart, doc = chart_rules(), doc_rules()
    assert sorted(doc - chart) == [], "the doc grants what the chart does not"
    assert sorted(chart - doc) == [], "the chart grants what the doc does not list"


def bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", DOC, flags=re.S)


def commands() -> list[str]:
    """Each shell command of the bash blocks, continuation lines joined, comments dropped."""
    out = []
    for block in bash_blocks():
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def test_commands_hold_no_placeholders() -> None:
    for command in commands():
        code = command.split(" # ")[0]
        assert not re.search(r"<[a-z][a-z -]*>", code), command
        assert "..." not in code, command


def _has_value(path: str) -> bool:
    node: Any = VALUES
    for part in re.split(r"(?<!\\)\.", path):
        part = part.replace("\\.", ".")
        key, _, index = part.partition("[")
        if isinstance(node, dict) and node == {} and key:
            return True  # a map the admin fills (nodeSelector.<label>)
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
        if index:
            if not isinstance(node, list):
                return False
            return True
    return True


def test_every_helm_value_set_exists_in_the_chart() -> None:
    seen = 0
    for command in commands():
        for match in re.finditer(r"--set(?:-file)?[ =]['\"]?([A-Za-z0-9_.\\\[\]/-]+)=", command):
            seen += 1
            assert _has_value(match.group(1)), f"{match.group(1)} is not a chart value: {command}"
    assert seen >= 15


def test_every_toposched_command_parses() -> None:
    parser = build_parser()
    found = [c for c in commands() if c.startswith("toposched ")]
    assert {"preflight", "adopt"} <= {c.split()[1] for c in found}
    for command in found:
        argv = shlex.split(command.split(" # ")[0].replace('"$KUEUE_NS"', "kueue-system"))[1:]
        try:
            parser.parse_args(argv)
        except SystemExit as exc:  # --help exits 0
            if exc.code != 0:
                pytest.fail(f"does not parse: {command}")


def test_every_bash_block_is_valid_shell() -> None:
    """Copy-pasteable: each block parses as bash (``bash -n``: syntax only, nothing runs)."""
    for block in bash_blocks():
        out = subprocess.run(["bash", "-n"], input="\n".join(line.removeprefix("  ") for line in block.splitlines()),
                             capture_output=True, text=True, timeout=30, check=False)
        assert out.returncode == 0, f"{out.stderr}\n{block}"
