#!/usr/bin/env python3
"""The long structure-aware fuzz of the webhook's ``answer()`` and of the CLI's file reader
(tests/fuzzing.py's mutations).

Three parts, each printing its counts (the suite runs a few hundred cases of the same kinds in
tests/unit/test_fuzz_webhook.py and tests/unit/test_cli_inputs.py; this is the longer run):

- exhaustive: every place of a valid object of every kind the webhook serves, set to every
  wrong value of the list (nulls, wrong scalars, containers), a null item, 40 levels of nesting
  and 20,000 items; CREATE on every path of the kind;
- random: N reviews with one to three mutations each, CREATE or UPDATE (the old object valid or
  mutated too), over every path.

- files: ``toposched place`` in-process on N node, pod and workload files, each mutated the same
  way, written as YAML, JSON or UTF-16, then damaged at the byte level (cut short, a NUL, a
  stray byte).

Webhook outcomes: ``decided`` (a field error or an admission), ``internal`` (an internal-error
refusal, goal 0) and ``fail-open`` (a queued object let through unvalidated, must stay 0). File
outcomes: ``answered`` (exit 0/1), ``refused`` (exit 2, one line) and ``crashed`` (anything else:
a traceback, more lines, another exit code; must stay 0). Exit 1 when a must-be-0 count is not
0, with the first cases of each printed.

  python scripts/bench/fuzz_inputs.py                      # exhaustive + 20,000 random + 2,000 files
  python scripts/bench/fuzz_inputs.py --random 200000 --seed 7 --no-exhaustive --files 0
"""

from __future__ import annotations

import argparse
import copy
import logging
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from admission import review, routes  # noqa: E402
from tests.fuzzing import (  # noqa: E402
    CONTAINERS,
    WRONG_SCALARS,
    example_objects,
    generic_object,
    is_queued,
    mutate_at,
    mutated,
    outcome,
    paths_of,
    review_body,
)
from tests.unit.test_admission_validation import cluster  # noqa: E402

Case = tuple[str, str, Any, str, Any]  # path, kind, object, operation, old object


def kind_of(path: str) -> str:
    return routes.ROUTES[path].kind_name or "RayJob"  # the default deny's path: a kind it does not govern


def seeds() -> dict[str, Any]:
    found = example_objects()
    return {kind_of(p): found.get(kind_of(p)) or generic_object(kind_of(p)) for p in routes.PATHS}


def exhaustive_cases() -> Iterator[Case]:
    by_kind = seeds()
    for path in routes.PATHS:
        kind = kind_of(path)
        seed = by_kind[kind]
        for place in paths_of(seed):
            for value in (*WRONG_SCALARS, *CONTAINERS):
                obj = copy.deepcopy(seed)
                target = obj
                for step in place[:-1]:
                    target = target[step]
                target[place[-1]] = copy.deepcopy(value)
                yield path, kind, obj, "CREATE", None
            for mutation, choose in (("null item", 0), ("deep", 40), ("huge", 20_000)):
                obj = copy.deepcopy(seed)
                mutate_at(obj, place, mutation, _fixed(choose), huge=(20_000,))
                yield path, kind, obj, "CREATE", None


def _fixed(value: Any) -> Callable[[Any], Any]:
    def pick(options: Any) -> Any:
        options = list(options)
        return value if value in options else options[0]
    return pick


def random_cases(n: int, seed: int) -> Iterator[Case]:
    rng = random.Random(seed)
    by_kind = seeds()
    for _ in range(n):
        path = rng.choice(routes.PATHS)
        kind = kind_of(path)
        obj = mutated(by_kind[kind], rng.choice)
        operation = rng.choice(("CREATE", "UPDATE"))
        old = None
        if operation == "UPDATE":
            old = mutated(by_kind[kind], rng.choice) if rng.random() < 0.5 else by_kind[kind]
        yield path, kind, obj, operation, old


def run(name: str, cases: Iterator[Case], shown: int = 3) -> Counter[str]:
    view = cluster()
    counts: Counter[str] = Counter()
    bad: dict[str, list[str]] = {}
    start = time.perf_counter()
    for path, kind, obj, operation, old in cases:
        _, out = review.answer(path, review_body(obj, kind, operation, old), view)
        result = outcome(out, is_queued(obj))
        counts[result] += 1
        if result != "decided" and len(bad.setdefault(result, [])) < shown:
            resp = out["response"]
            said = (resp.get("status") or {}).get("message") or resp.get("warnings")
            bad[result].append(f"{path} {operation}: {said}")
    took = time.perf_counter() - start
    total = sum(counts.values())
    print(f"{name}: {total:,} reviews in {took:.1f} s ({total / took:,.0f}/s): decided {counts['decided']:,}, "
          f"internal-error refusals {counts['internal']}, fail-open {counts['fail-open']}")
    for result, lines in bad.items():
        for line in lines:
            print(f"  {result}: {line[:300]}")
    return counts


def file_cases(n: int, seed: int, tmp: Path, shown: int = 3) -> Counter[str]:
    import contextlib
    import io

    from scheduler.cli import main as toposched
    from tests.unit.test_cli_inputs import DATA, JOB, NODES, SEED_FILES, _encoded, _garbled

    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    bad: list[str] = []
    start = time.perf_counter()
    for i in range(n):
        which = rng.choice(sorted(SEED_FILES))
        broken = _garbled(_encoded(mutated(SEED_FILES[which], rng.choice), rng.choice(("yaml", "json", "utf-16"))),
                          rng.choice)
        files = {"nodes": NODES, "workload": JOB, "pods": DATA / "pods.yaml"}
        files[which] = tmp / f"{i}.{which}"
        files[which].write_bytes(broken)
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = toposched(["place", "--nodes", str(files["nodes"]), "--workload", str(files["workload"]),
                                  "--pods", str(files["pods"]), "--solver", "greedy"])
        except BaseException as exc:  # noqa: BLE001 - the count is the point
            code, err = -1, io.StringIO(f"{type(exc).__name__}: {exc}")
        files[which].unlink()
        lines = err.getvalue().strip().splitlines()
        result = ("answered" if code in (0, 1) else
                  "refused" if code == 2 and len(lines) == 1 and not out.getvalue() else "crashed")
        counts[result] += 1
        if result == "crashed" and len(bad) < shown:
            bad.append(f"{which}: exit {code}: {err.getvalue()[:300]}")
    took = time.perf_counter() - start
    print(f"files (seed {seed}): {n:,} place runs in {took:.1f} s: answered {counts['answered']:,}, refused in one "
          f"line {counts['refused']:,}, crashed {counts['crashed']}")
    for line in bad:
        print(f"  crashed: {line}")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--random", type=int, default=20_000, metavar="N", help="random reviews (default 20,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-exhaustive", action="store_true", help="skip the exhaustive part")
    parser.add_argument("--files", type=int, default=2_000, metavar="N", help="place runs on fuzzed files (2,000)")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # the webhook logs every refused internal error; the counts say it
    total: Counter[str] = Counter()
    if not args.no_exhaustive:
        total += run("webhook exhaustive", exhaustive_cases())
    if args.random:
        total += run(f"webhook random (seed {args.seed})", random_cases(args.random, args.seed))
    if args.files:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            total += file_cases(args.files, args.seed, Path(tmp))
    return 1 if total["internal"] or total["fail-open"] or total["crashed"] else 0


if __name__ == "__main__":
    sys.exit(main())
