"""The committed stubs in scheduler/api/gen/ are what scripts/gen_proto.sh produces now.

Regenerates into a temporary directory and compares byte for byte when the installed
generators are the versions recorded in scheduler/api/gen/VERSIONS. With other generator
versions the comparison is made after normalising the lines that only carry a version (the
protobuf gencode version header and runtime check, GRPC_GENERATED_VERSION, VERSIONS itself),
so a newer grpcio-tools on a developer machine does not fail the check while a changed .proto
still does.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GEN = ROOT / "scheduler" / "api" / "gen"


def _gen_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_proto"] = module
    spec.loader.exec_module(module)
    return module


def _recorded() -> dict[str, str]:
    out = {}
    for line in (GEN / "VERSIONS").read_text().splitlines():
        name, _, version = line.partition("==")
        out[name] = version
    return out


_VERSION_LINES = [
    (re.compile(r"^# Protobuf Python Version: .*$", re.M), "# Protobuf Python Version: X"),
    (re.compile(r"(ValidateProtobufRuntimeVersion\(\n\s+_runtime_version\.Domain\.PUBLIC,\n)\s+\d+,\n\s+\d+,\n\s+\d+,\n"
                r"\s+'[^']*',\n"), r"\1    X,\n"),
    (re.compile(r"^GRPC_GENERATED_VERSION = '.*'$", re.M), "GRPC_GENERATED_VERSION = 'X'"),
]


def _normalise(text: str) -> str:
    for pattern, repl in _VERSION_LINES:
        text = pattern.sub(repl, text)
    return text


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def test_generated_stubs_are_fresh(tmp_path: Path) -> None:
    if not importlib.util.find_spec("grpc_tools"):
        pytest.skip("grpcio-tools not installed (pip install -e '.[dev]')")
    gen = _gen_module()
    out = tmp_path / "gen"
    gen.generate(out)
    committed, fresh = _files(GEN), _files(out)
    assert sorted(committed) == sorted(fresh), "files differ: run scripts/gen_proto.sh and commit scheduler/api/gen/"
    exact = gen.generator_versions() == _recorded()
    for name in committed:
        if name == "VERSIONS" and not exact:
            continue
        a, b = committed[name], fresh[name]
        if not exact:
            a, b = _normalise(a.decode()).encode(), _normalise(b.decode()).encode()
        assert a == b, (f"scheduler/api/gen/{name} is stale: run scripts/gen_proto.sh and commit it"
                        + ("" if exact else f" (compared without version lines: installed {gen.generator_versions()}, "
                                            f"recorded {_recorded()})"))


def test_normalisation_only_hides_versions() -> None:
    text = (GEN / "toposched" / "v1" / "placement_pb2.py").read_text()
    bumped = re.sub(r"# Protobuf Python Version: .*", "# Protobuf Python Version: 9.9.9", text)
    assert _normalise(bumped) == _normalise(text)
    assert _normalise(text.replace("PlaceRequest", "PlaceRequestX")) != _normalise(text)
