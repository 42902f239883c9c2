"""Preemption: who may be preempted, who goes first, and the strategies that choose victims.

- ``plan``: Kueue's candidates and attempts (``withinClusterQueue``, ``reclaimWithinCohort``,
  ``borrowWithinCohort``);
- ``cost``: the one definition of a victim's cost and of Kueue's candidate order, read by every
  strategy;
- ``targets``: a target with Kueue's reason and message, and the working set victims are taken
  into;
- ``domains``: a domain-needing preemptor's request and the candidates' usage per leaf;
- the strategies: ``fair_sharing`` (Kueue's fair preemption), ``cpsat`` (cheapest victims that
  free one domain), ``classical`` (Kueue's heuristic), ``clear_domain`` (sticky targets and
  domain clearing).
"""
