"""Generate the Python stubs of proto/ into scheduler/api/gen/ (run via scripts/gen_proto.sh).

protoc (from grpcio-tools) writes ``*_pb2.py``, ``*_pb2_grpc.py`` and, through mypy-protobuf,
``*_pb2.pyi`` / ``*_pb2_grpc.pyi``. The generated files import each other as top-level
``toposched.v1`` modules; that import path is rewritten to ``scheduler.api.gen.toposched.v1`` so
the stubs live inside the package without touching sys.path. Method paths such as
``/toposched.v1.Placement/Place`` are strings and stay as they are (the wire names).

The versions of the generators are written to ``scheduler/api/gen/VERSIONS``; the staleness test
(tests/unit/api/test_generated_stubs.py) regenerates into a temporary directory and compares.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "scheduler" / "api" / "gen"
PACKAGE_PREFIX = "scheduler.api.gen"
_IMPORT_RE = re.compile(r"\b(from|import) toposched\.")
_QUALIFIED_RE = re.compile(r"(?<![\w./'\"])toposched\.(v\d+)\.(\w+_pb2)\b")

INIT = '"""Generated from proto/ by scripts/gen_proto.sh; do not edit."""\n'


def generator_versions() -> dict[str, str]:
    return {name: metadata.version(name) for name in ("grpcio-tools", "mypy-protobuf")}


def _protoc_plugin(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise SystemExit(f"{name} not found on PATH; pip install mypy-protobuf")
    return found


def generate(out_dir: Path) -> list[Path]:
    """Write the stubs of every proto/**/*.proto under ``out_dir``; returns the files written."""
    protos = sorted(p.relative_to(PROTO_DIR).as_posix() for p in PROTO_DIR.rglob("*.proto"))
    if not protos:
        raise SystemExit(f"no .proto files under {PROTO_DIR}")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}",
            f"--plugin=protoc-gen-mypy={_protoc_plugin('protoc-gen-mypy')}",
            f"--plugin=protoc-gen-mypy_grpc={_protoc_plugin('protoc-gen-mypy_grpc')}",
            f"--python_out={tmp}", f"--grpc_python_out={tmp}", f"--mypy_out={tmp}", f"--mypy_grpc_out={tmp}",
            *protos,
        ]
        subprocess.run(cmd, check=True, cwd=PROTO_DIR)
        written = []
        for src in sorted(Path(tmp).rglob("*")):
            if not src.is_file():
                continue
            rel = src.relative_to(tmp)
            text = src.read_text()
            text = _IMPORT_RE.sub(rf"\1 {PACKAGE_PREFIX}.toposched.", text)
            text = _QUALIFIED_RE.sub(rf"{PACKAGE_PREFIX}.toposched.\1.\2", text)
            dest = out_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
            written.append(dest)
    # Packages for every directory level.
    for directory in sorted({out_dir, *(p.parent for p in written)}):
        cur = directory
        while cur != out_dir.parent and (cur == out_dir or out_dir in cur.parents):
            init = cur / "__init__.py"
            if not init.exists():
                init.write_text(INIT)
                written.append(init)
            cur = cur.parent
    versions = out_dir / "VERSIONS"
    versions.write_text("".join(f"{k}=={v}\n" for k, v in sorted(generator_versions().items())))
    written.append(versions)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help=f"output directory (default {OUT_DIR})")
    args = parser.parse_args(argv)
    out: Path = args.out
    if out.resolve() == OUT_DIR.resolve() and OUT_DIR.exists():
        shutil.rmtree(OUT_DIR)  # no stale files of removed protos
    for path in generate(out):
        print(path.relative_to(out.parent) if out.parent in path.parents else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
