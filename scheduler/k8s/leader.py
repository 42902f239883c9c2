"""Leader election through a coordination.k8s.io/v1 Lease, with fencing by time.

The protocol is client-go's ``leaderelection``:

- every ``retry_period`` a candidate reads the Lease; a record held by someone else counts
  as expired only when THIS process has seen it unchanged for ``leaseDurationSeconds`` of its
  own monotonic clock (``observedTime``). The holder's ``renewTime`` is written for humans and
  never compared with our clock, so clock skew between machines cannot make a live lease look
  expired (nor a dead one look alive for an hour);
- updates carry the Lease's ``resourceVersion``: two candidates can never both win one term;
- each Lease call is bounded: a hung API server cannot hold the elector past the renew
  deadline; a leader that has not renewed within ``renew_deadline`` stops leading.

Fencing by time (:meth:`LeaseElector.holds_lease`): the lease counts as held until the start
of the last successful renewal plus ``renew_deadline``. Another candidate first sees that
renewal no earlier than it was sent, and waits ``lease_duration`` after seeing it before it
may take over, so a leader that lost contact stops writing ``lease_duration -
renew_deadline`` seconds (the safety margin) before anyone else can start — even if the
elector's thread is starved, because the check reads the clock itself.

Terms: each acquisition starts a new term. :class:`WriteFence` lets a reconcile pass write
only inside the term it started in, so a pass computed before leadership was lost can never
resume writing after it was won back.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException

from scheduler.k8s.clock import utcnow
from scheduler.k8s.informer import LEASES, KubeApi, Obj

log = logging.getLogger(__name__)
T = TypeVar("T")
# A hung API server leaves abandoned Lease calls behind (each ends at its HTTP timeout); past
# this many outstanding, further attempts fail at once instead of piling up threads.
MAX_ABANDONED_CALLS = 8


class LeaseCallTimeout(Exception):
    """A Lease call did not answer before its deadline (counts as a failed attempt)."""


def _micro(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseTimings:
    """client-go's three durations, with its rules: renew_deadline < lease_duration (the
    difference is the fencing margin), retry_period < renew_deadline (a leader gets several
    tries before it gives up)."""

    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration_s > self.renew_deadline_s:
            raise ValueError("lease duration must be greater than the renew deadline")
        if not self.renew_deadline_s > 1.2 * self.retry_period_s:
            raise ValueError("renew deadline must be greater than 1.2 x the retry period")
        if self.retry_period_s <= 0:
            raise ValueError("retry period must be positive")

    @property
    def safety_margin_s(self) -> float:
        return self.lease_duration_s - self.renew_deadline_s


class _BoundedCaller:
    """Runs a call on a daemon thread and waits at most until a deadline; a late answer is
    dropped (for a Lease that is safe: a late renewal only delays the others, and our own
    view stays the conservative one)."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self.monotonic = monotonic
        self._outstanding = 0
        self._lock = threading.Lock()

    def call(self, fn: Callable[[], T], deadline: float) -> T:
        remaining = deadline - self.monotonic()
        if remaining <= 0:
            raise LeaseCallTimeout("no time left before the deadline")
        with self._lock:
            if self._outstanding >= MAX_ABANDONED_CALLS:
                raise LeaseCallTimeout(f"{self._outstanding} earlier Lease calls have not answered")
            self._outstanding += 1
        done = threading.Event()
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # handed to the waiting thread
                box["error"] = exc
            finally:
                with self._lock:
                    self._outstanding -= 1
                done.set()

        threading.Thread(target=run, name="lease-call", daemon=True).start()
        if not done.wait(remaining):
            raise LeaseCallTimeout(f"no answer within {remaining:.2f}s")
        if "error" in box:
            raise box["error"]
        return box["value"]  # type: ignore[no-any-return]


def _record(spec: dict[str, Any]) -> tuple[Any, ...]:
    """The fields whose change proves the holder is alive (client-go compares the record)."""
    return tuple(spec.get(k) for k in ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
                                       "leaseTransitions"))


class LeaseElector:
    def __init__(self, api: KubeApi, name: str, namespace: str, identity: str, *,
                 lease_duration_s: float = 15, renew_deadline_s: float = 10, retry_period_s: float = 2,
                 clock: Callable[[], dt.datetime] = utcnow, monotonic: Callable[[], float] = time.monotonic) -> None:
        """``clock``: the wall time written into the Lease (for humans; never compared);
        ``monotonic``: every duration this process judges (immune to wall-clock jumps)."""
        self.api = api
        self.clock = clock
        self.monotonic = monotonic
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.timings = LeaseTimings(lease_duration_s, renew_deadline_s, retry_period_s)
        self.lease_duration_s = lease_duration_s
        self.renew_deadline_s = renew_deadline_s
        self.retry_period_s = retry_period_s
        self.is_leader = threading.Event()
        self.term = 0  # bumped on every acquisition
        self._valid_until = float("-inf")  # monotonic: writes allowed strictly before this
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._caller = _BoundedCaller(monotonic)
        self._lock = threading.Lock()
        self._stop = threading.Event()

    # ------------------------------------------------------------------ the fence
    def holds_lease(self, term: int | None = None) -> bool:
        """True only while the lease is known held (in ``term``, when given): leading, and
        the last successful renewal started less than the renew deadline ago."""
        with self._lock:
            held = self.is_leader.is_set() and self.monotonic() < self._valid_until
            return held and (term is None or term == self.term)

    def current_term(self) -> int | None:
        with self._lock:
            held = self.is_leader.is_set() and self.monotonic() < self._valid_until
            return self.term if held else None

    # ------------------------------------------------------------------ one attempt
    def _observe(self, spec: dict[str, Any], now: float) -> None:
        record = _record(spec)
        if record != self._observed:
            self._observed, self._observed_at = record, now

    def _create(self, deadline: float) -> bool:
        now = _micro(self.clock())
        body = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration_s),
                     "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
        }
        try:
            created = self._caller.call(lambda: self.api.create(LEASES, body, self.namespace), deadline)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        self._observe(created.get("spec") or {}, self.monotonic())
        return True

    def try_acquire_or_renew(self, deadline: float) -> bool:
        """One attempt (client-go's tryAcquireOrRenew); every call ends by ``deadline``."""
        try:
            lease: Obj = self._caller.call(lambda: self.api.get(LEASES, self.name, self.namespace), deadline)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return self._create(deadline)
        spec = lease.get("spec") or {}
        self._observe(spec, self.monotonic())
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration_s)
        if holder and holder != self.identity:
            if self.is_leader.is_set():
                self._step_down(f"lease now held by {holder}")
            if self.monotonic() < self._observed_at + duration:
                return False
        new_spec = dict(spec)
        now = _micro(self.clock())
        if holder != self.identity:
            new_spec["acquireTime"] = now
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        new_spec.update(holderIdentity=self.identity, renewTime=now, leaseDurationSeconds=int(self.lease_duration_s))
        lease["spec"] = new_spec
        try:  # carries resourceVersion: a concurrent writer gets 409
            updated = self._caller.call(lambda: self.api.replace(LEASES, lease), deadline)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        self._observe(updated.get("spec") or {}, self.monotonic())
        return True

    def step(self) -> bool:
        """Attempt once and update leadership; returns whether this process now leads. A
        leader's attempt may take until its lease stops counting as held; a candidate's, until
        the renew deadline."""
        started = self.monotonic()
        deadline = self._valid_until if self.is_leader.is_set() else started + self.renew_deadline_s
        try:
            ok = self.try_acquire_or_renew(deadline)
        except ApiException as exc:
            log.warning("lease %s/%s: HTTP %s %s", self.namespace, self.name, exc.status, exc.reason)
            ok = False
        except Exception as exc:  # unreachable, timed out: a failed attempt
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            ok = False
        if ok:
            self._renewed(started)
        elif self.is_leader.is_set() and self.monotonic() >= self._valid_until:
            self._step_down(f"not renewed within the renew deadline ({self.renew_deadline_s:g}s)")
        return self.is_leader.is_set()

    def _renewed(self, started: float) -> None:
        with self._lock:
            # From the attempt's START: the API server wrote the renewal no earlier, so nobody
            # can have observed it (and begun waiting out the lease) any earlier.
            self._valid_until = started + self.renew_deadline_s
            if not self.is_leader.is_set():
                self.term += 1
                log.info("became leader (lease %s/%s, identity %s, term %d)", self.namespace, self.name,
                         self.identity, self.term)
                self.is_leader.set()

    def _step_down(self, why: str) -> None:
        with self._lock:
            if not self.is_leader.is_set():
                return
            self.is_leader.clear()
            self._valid_until = float("-inf")
        log.warning("lost leadership (lease %s/%s): %s", self.namespace, self.name, why)

    # ------------------------------------------------------------------ the loop
    def release(self) -> None:
        """Give the lease up on clean shutdown so a successor need not wait for expiry. The
        fence closes first: no write of ours can follow the release."""
        if not self.is_leader.is_set():
            return
        self._step_down("released")
        deadline = self.monotonic() + self.renew_deadline_s
        try:
            lease = self._caller.call(lambda: self.api.get(LEASES, self.name, self.namespace), deadline)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                self._caller.call(lambda: self.api.replace(LEASES, lease), deadline)
        except Exception as exc:  # best effort: the lease expires anyway
            log.info("lease %s/%s not released: %s", self.namespace, self.name, exc)

    def stop(self) -> None:
        self._stop.set()

    def run(self, on_started_leading: Callable[[], None], on_stopped_leading: Callable[[], None]) -> None:
        """Block: attempt every retry period; call ``on_started_leading`` on each acquisition
        and ``on_stopped_leading`` when a term ends (renew deadline passed, or another holder
        seen); campaign again after losing. On :meth:`stop`, release the lease."""
        was_leading = False
        while not self._stop.is_set():
            leading = self.step()
            if leading and not was_leading:
                on_started_leading()
            elif was_leading and not leading:
                on_stopped_leading()
            was_leading = leading
            self._stop.wait(self._next_wait())
        self.release()
        if was_leading:
            on_stopped_leading()

    def _next_wait(self) -> float:
        """A retry period, but never past the moment the fence closes (so the step-down is
        reported on time even when the period is long)."""
        if not self.is_leader.is_set():
            return self.retry_period_s
        return max(0.0, min(self.retry_period_s, self._valid_until - self.monotonic()))


class WriteFence:
    """The writer's leadership check for one reconcile loop: a pass may write only while the
    lease is held in the term the pass started in."""

    def __init__(self, elector: LeaseElector) -> None:
        self.elector = elector
        self._term: int | None = None

    def begin_pass(self) -> int | None:
        """Start a pass in the current term; ``None`` when not leading (then nothing is written)."""
        self._term = self.elector.current_term()
        return self._term

    def end_pass(self) -> None:
        self._term = None

    def __call__(self) -> bool:
        term = self._term
        return term is not None and self.elector.holds_lease(term)
