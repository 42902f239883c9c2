"""Run the conformance scenario groups through one engine and write the outcomes.

    python -m tests.conformance.record --engine kueue      # -> tests/conformance/results/kueue.yaml
    python -m tests.conformance.record --engine toposched --group placement

The Kueue recording is what ``test_vs_kueue.py`` compares against when
``TOPOSCHED_CONFORMANCE_KUEUE=recorded`` (skips the live Kueue half of the run)."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
RESULTS = HERE / "results"
GROUPS = ("placement", "quota", "failure", "groups", "policies", "podsready", "fairsharing",
          "fairsharing-initial", "domainpreempt", "tasgates", "kinds", "newkinds")


def load_group(name: str) -> dict[str, Any]:
    return yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())


def run_group(engine: str, group: str, only: set[str] | None = None, keep: bool = False,
              log: Any = print) -> dict[str, Any]:
    from tests.conformance.harness import run_scenario, start_run

    spec = load_group(group)
    directory = Path(tempfile.mkdtemp(prefix=f"conformance-{engine}-{group}-"))
    t0 = time.monotonic()
    run = start_run(engine, directory, spec["cluster"], spec["queues"], jobsets=bool(spec.get("jobsets")),
                    kueue_config=spec.get("kueue_config"), kinds=tuple(spec.get("kinds") or ()))
    out: dict[str, Any] = {"_node_labels": run.node_labels}
    log(f"[{engine}/{group}] control plane + engine up in {time.monotonic() - t0:.1f}s ({directory})")
    try:
        for scenario in spec["scenarios"]:
            if only and scenario["name"] not in only:
                continue
            t = time.monotonic()
            try:
                out[scenario["name"]] = run_scenario(run, scenario)
            except AssertionError as exc:
                out[scenario["name"]] = {"_error": str(exc)}
            log(f"[{engine}/{group}] {scenario['name']}: {time.monotonic() - t:.1f}s")
            run.cleanup()
    finally:
        run.stop()
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--engine", choices=("kueue", "toposched"), required=True)
    ap.add_argument("--group", action="append", choices=GROUPS)
    ap.add_argument("--scenario", action="append", help="only these scenario names")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--keep", action="store_true", help="keep the cluster directory (logs)")
    args = ap.parse_args(argv)
    results: dict[str, Any] = {}
    for group in args.group or GROUPS:
        results[group] = run_group(args.engine, group, set(args.scenario or ()) or None, args.keep)
        for res in results[group].values():
            if isinstance(res, dict):
                res.pop("_steps", None)
    out = args.out or RESULTS / f"{args.engine}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Outcomes of tests/conformance/scenarios/*.yaml under {args.engine}, written by\n"
              f"# `python -m tests.conformance.record --engine {args.engine}`. Do not edit by hand.\n")
    old: dict[str, Any] = {}
    if out.exists() and (args.group or args.scenario):
        old = yaml.safe_load(out.read_text()) or {}
    for group, res in results.items():
        old.setdefault(group, {}).update(res)
    out.write_text(header + yaml.safe_dump(old, sort_keys=True, width=200))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
