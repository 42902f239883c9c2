"""The controller's tuning defaults, shared by the classes and the command line (this module
imports nothing, so the CLI can show them without loading the Kubernetes client)."""

# Kueue scheduling cycles run back to back in one reconcile pass (core.cycle.run_cycles): at
# least this many, and more while they fit in the cycle budget (kube/cycle_budget.py).
DEFAULT_CYCLES_PER_PASS = 8
DEFAULT_CYCLE_BUDGET_MS = 1000.0

# Writes in flight at once within one phase (Writer.run_each). Each is one HTTP round trip spent
# waiting on the API server (20-100 ms on a busy 2-core control plane, its admission webhooks
# included), so threads cut a pass of hundreds of writes many times over. 32 is far below what an
# API server takes in flight (--max-mutating-requests-inflight, default 200; APF shares) and what
# a burst's pass needs (issue 34: with 8, three quarters of the pass waited on writes); the
# controller's connection pool holds this many beside its watches (commands/controller.py).
DEFAULT_CONCURRENT_WRITES = 32
