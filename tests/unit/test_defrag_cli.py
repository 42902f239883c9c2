"""``toposched defrag`` output (text and JSON) from a plan on plain data."""

from __future__ import annotations

import json

from scheduler import cli
from scheduler.commands.defrag import plans_to_dicts, to_text
from scheduler.core.beyond.defrag import plan_defrag
from tests.unit.core.test_defrag import _big, _fragmented, _snap


def test_text_and_json_name_the_domain_the_moves_and_the_cost() -> None:
    plans = plans_to_dicts(plan_defrag(_snap(_fragmented(), [_big()])))
    [p] = plans
    assert (p["forWorkload"], p["domain"], p["lostGPUSeconds"]) == ("team/big", "r2", 800.0)
    assert p["moves"] == [{"workload": "team/w2", "clusterQueue": "a", "gpus": 8, "lostGPUSeconds": 800.0,
                           "resumes": "hyperpod-auto-resume"}]
    assert json.loads(json.dumps({"plans": plans})) == {"plans": plans}
    text = to_text(plans)
    assert "team/big (ClusterQueue a): open cloud.com/topology-rack domain r2 on flavor tas by moving 1 workload(s)" \
        in text and "move team/w2 (8 GPUs, hyperpod-auto-resume): 0.22 GPU-hours" in text and "Dry run" in text
    assert to_text([]).startswith("No pending multi-node job")


def test_bad_max_plans_exits_2(capsys: object) -> None:
    assert cli.main(["defrag", "--max-plans", "0"]) == 2
