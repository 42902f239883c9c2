"""Discrete-event simulation of the admission cycle (virtual time, no cluster).

``trace`` reads and generates job/failure traces, ``engine`` replays them through
``scheduler.core.kueue.cycle.run_cycle`` with a ``QueueState`` exactly as the controller drives it,
``report`` renders the JSON summary and the self-contained HTML report.
"""
