"""Structural checks of deploy/image/Containerfile (hadolint is not on PyPI; these are the rules
issue 14 sets): multi-stage, Python pinned and checked in every stage, nothing to build with
in the final stage, a numeric non-root user the pods' runAsNonRoot can verify, read-only root
filesystem friendly, and a build context that holds what the COPY lines name. The image itself
is built and run by tests/integration/test_image.py (opt-in)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "deploy" / "image" / "Containerfile"
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|clang|make|build-essential|[\w.+-]+-dev|python3(\.\d+)?-pip|cargo|rustc)\b")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        return [a for k, a in self.instructions if k == keyword]


def instructions(text: str) -> list[tuple[str, str]]:
    logical = re.sub(r"\\\n", " ", text)
    result = []
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        result.append((keyword.upper(), rest.strip()))
    return result


def stages() -> tuple[dict[str, str], list[Stage]]:
    global_args: dict[str, str] = {}
    parsed: list[Stage] = []
    for keyword, rest in instructions(CONTAINERFILE.read_text()):
        if keyword == "FROM":
            words = rest.split()
            parsed.append(Stage(words[0], words[2] if len(words) > 2 and words[1].upper() == "AS" else None))
        elif not parsed:
            assert keyword == "ARG", f"only ARG may precede FROM, found {keyword}"
            name, _, default = rest.partition("=")
            global_args[name] = default
        else:
            parsed[-1].instructions.append((keyword, rest))
    return global_args, parsed


def test_two_stages_on_the_same_pinned_debian_base() -> None:
    global_args, (build, final) = stages()
    assert build.name == "build" and final.name is None
    assert build.base == final.base == "${BASE_IMAGE}", "both stages on the same base: the venv's python path holds"
    assert re.fullmatch(r"\S+/debian:bookworm(-slim)?", global_args["BASE_IMAGE"])
    assert re.fullmatch(r"3\.11\.\d+", global_args["PYTHON_VERSION"]), "an exact Python release"


def test_every_stage_checks_the_python_release() -> None:
    _, parsed = stages()
    for stage in parsed:
        assert "PYTHON_VERSION" in stage.args("ARG")
        runs = " ".join(stage.args("RUN"))
        assert "platform.python_version()" in runs and '"${PYTHON_VERSION}"' in runs, stage.name


def test_final_stage_has_nothing_to_build_with() -> None:
    _, (build, final) = stages()
    runs = " ".join(final.args("RUN"))
    installed = re.findall(r"apt-get install (.*?)(?:&&|$)", runs)
    packages = {w for words in installed for w in shlex.split(words) if not w.startswith("-")}
    assert packages == {"python3.11"}, packages
    assert "pip" not in runs.replace("apt-get", "") and not BUILD_TOOLS.search(runs)
    assert "rm -rf /var/lib/apt/lists/*" in runs
    copies = final.args("COPY")
    # The venv, and the webhook's HTTPS front (webfront/, Go, static; built by scripts/build-image.sh).
    assert copies == ["--from=build /opt/toposched /opt/toposched",
                      "build/image/toposched-webfront /usr/local/bin/toposched-webfront"]
    build_runs = " ".join(build.args("RUN"))
    assert not BUILD_TOOLS.search(build_runs), "wheels only, no compiler"
    assert "--only-binary=:all:" in build_runs
    assert "pip uninstall -y pip setuptools" in build_runs, "the copied venv carries no installer"


def test_runs_as_a_numeric_non_root_user() -> None:
    _, (_, final) = stages()
    (user,) = final.args("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) > 0 and int(gid) > 0, \
        "numeric, so kubelet can enforce runAsNonRoot without /etc/passwd"
    assert [k for k, _ in final.instructions][-3:] == ["USER", "ENTRYPOINT", "CMD"]
    scheduler = yaml.safe_load((ROOT / "deploy" / "scheduler" / "deployment.yaml").read_text())
    assert scheduler["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid)


def test_read_only_root_filesystem_friendly() -> None:
    _, (build, final) = stages()
    assert "compileall" in " ".join(build.args("RUN")), "bytecode written at build time, not at run time"
    assert "PYTHONDONTWRITEBYTECODE=1" in " ".join(final.args("ENV"))
    (entrypoint,) = final.args("ENTRYPOINT")
    assert entrypoint == '["/opt/toposched/bin/toposched"]', "exec form, so signals reach toposched"


def test_build_context_holds_what_is_copied() -> None:
    _, parsed = stages()
    ignore = (ROOT / ".containerignore").read_text().split()
    for stage in parsed:
        for copy in stage.args("COPY"):
            if copy.startswith("--from="):
                continue
            source = copy.split()[0]
            if source.startswith("build/image/"):  # made by the build script before the build
                assert source in (ROOT / "scripts" / "build-image.sh").read_text(), source
            else:
                assert (ROOT / source).exists(), source
            assert f"!{source}" in ignore or f"!{source}/" in ignore, f"{source} excluded from the build context"
