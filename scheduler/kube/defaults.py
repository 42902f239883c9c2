"""The controller's tuning defaults, shared by the classes and the command line (this module
imports nothing, so the CLI can show them without loading the Kubernetes client)."""

# Kueue scheduling cycles run back to back in one reconcile pass (core.cycle.run_cycles).
DEFAULT_CYCLES_PER_PASS = 8

# Writes in flight at once within one phase (Writer.run_each). Each is one HTTP round trip of a
# few milliseconds spent waiting on the API server, so a few threads cut a pass of hundreds of
# writes several times over; the client's connection pool (k8s/client.py) holds at least 16.
DEFAULT_CONCURRENT_WRITES = 8
