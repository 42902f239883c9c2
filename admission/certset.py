"""The certificates webhook replicas share through one Secret, and how they rotate.

Every replica serves ``serving`` (signed by ``ca``). The API server trusts whatever the
webhook configurations' caBundle holds: ``ca``, the staged ``next_ca`` and still-valid
``previous_cas``. A CA is rotated in two steps so that no replica ever presents a
certificate the API server cannot verify:

1. stage: a new CA is issued as ``next_ca`` and published in the caBundle, while every
   replica keeps serving the certificate signed by the current CA;
2. promote (only once the caBundle of every webhook holds ``next_ca``): it becomes ``ca``, the
   old CA moves to ``previous_cas`` (kept in the bundle until it expires) and a new serving
   certificate signed by the new CA is issued. Replicas that load it late still serve one
   signed by a CA that is in the bundle.

``plan`` is the pure decision (certificate issuing aside): state and "what is published"
in, the next state out. The leader writes the result; everyone else only reads.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from cryptography import x509

from scheduler.http.pki import (
    IPAddress,
    Pair,
    cert_pem,
    due,
    issue_ca,
    issue_serving,
    key_pem,
    load_pair,
    not_after,
    sans_match,
    signed_by,
)

# Keys of the Secret's data (tls.crt/tls.key/ca.crt as in a kubernetes.io/tls Secret).
SERVING_CERT, SERVING_KEY, CA_CERT, CA_KEY = "tls.crt", "tls.key", "ca.crt", "ca.key"
NEXT_CA_CERT, NEXT_CA_KEY, PREVIOUS_CAS, CA_BUNDLE = "next-ca.crt", "next-ca.key", "previous-cas.crt", "ca-bundle.crt"


@dataclass(frozen=True)
class Policy:
    """What the leader issues: names, validities and when to renew (fraction of validity)."""

    dns_names: tuple[str, ...]
    ips: tuple[IPAddress, ...]
    ca_validity: dt.timedelta
    cert_validity: dt.timedelta
    rotate_fraction: float = 2 / 3


@dataclass(frozen=True)
class CertSet:
    ca: Pair
    serving: Pair
    next_ca: Pair | None = None
    previous_cas: tuple[x509.Certificate, ...] = ()

    def bundle_certs(self) -> list[x509.Certificate]:
        staged = [self.next_ca.cert] if self.next_ca else []
        return [self.ca.cert, *staged, *self.previous_cas]

    def serving_ca(self) -> x509.Certificate | None:
        """The CA of the bundle that signed the serving certificate."""
        return next((c for c in self.bundle_certs() if signed_by(self.serving.cert, c)), None)

    def bundle(self) -> bytes:
        """PEM for the caBundle field: current CA, staged CA, then previous CAs."""
        return b"".join(cert_pem(c) for c in self.bundle_certs())

    def to_secret_data(self) -> dict[str, str]:
        raw = {SERVING_CERT: cert_pem(self.serving.cert), SERVING_KEY: key_pem(self.serving.key),
               CA_CERT: cert_pem(self.ca.cert), CA_KEY: key_pem(self.ca.key),
               PREVIOUS_CAS: b"".join(cert_pem(c) for c in self.previous_cas), CA_BUNDLE: self.bundle()}
        if self.next_ca is not None:
            raw[NEXT_CA_CERT], raw[NEXT_CA_KEY] = cert_pem(self.next_ca.cert), key_pem(self.next_ca.key)
        return {k: base64.b64encode(v).decode() for k, v in raw.items()}

    @classmethod
    def from_secret_data(cls, data: Mapping[str, str] | None) -> CertSet | None:
        """The set in a Secret's ``data``; None when it holds none (yet) or it cannot be parsed."""
        if not data or not all(k in data for k in (SERVING_CERT, SERVING_KEY, CA_CERT, CA_KEY)):
            return None
        try:
            raw = {k: base64.b64decode(v) for k, v in data.items()}
            next_ca = load_pair(raw[NEXT_CA_CERT], raw[NEXT_CA_KEY]) if NEXT_CA_CERT in raw else None
            previous = tuple(x509.load_pem_x509_certificates(raw[PREVIOUS_CAS])) if raw.get(PREVIOUS_CAS) else ()
            return cls(ca=load_pair(raw[CA_CERT], raw[CA_KEY]), serving=load_pair(raw[SERVING_CERT], raw[SERVING_KEY]),
                       next_ca=next_ca, previous_cas=previous)
        except ValueError:
            return None


def plan(current: CertSet | None, policy: Policy, now: dt.datetime,
         published: Collection[x509.Certificate]) -> CertSet | None:
    """The next state, or None when nothing is due. ``published``: the CAs every webhook's
    caBundle holds right now (the intersection over all webhooks)."""
    if current is None:
        ca = issue_ca(policy.ca_validity, now)
        return CertSet(ca=ca, serving=issue_serving(ca, policy.dns_names, policy.ips, policy.cert_validity, now))
    state = _drop_expired(current, now)
    if state.next_ca is None and due(state.ca.cert, policy.rotate_fraction, now):
        return replace(state, next_ca=issue_ca(policy.ca_validity, now))  # step 1: stage
    if state.next_ca is not None and state.next_ca.cert in published:
        state = _promote(state)  # step 2: the API server trusts the new CA everywhere
    if _serving_stale(state, policy, now):
        state = replace(state, serving=issue_serving(state.ca, policy.dns_names, policy.ips, policy.cert_validity,
                                                     now))
    return None if state == current else state


def next_due(state: CertSet, policy: Policy) -> dt.datetime:
    """The earliest time ``plan`` has work to do without anything else changing."""
    points = [state.ca.cert, state.serving.cert]
    moments = [c.not_valid_before_utc + (c.not_valid_after_utc - c.not_valid_before_utc) * policy.rotate_fraction
               for c in points]
    moments += [not_after(c) for c in state.previous_cas]
    return min(moments)


def _drop_expired(state: CertSet, now: dt.datetime) -> CertSet:
    kept = tuple(c for c in state.previous_cas if not_after(c) > now)
    return state if kept == state.previous_cas else replace(state, previous_cas=kept)


def _promote(state: CertSet) -> CertSet:
    assert state.next_ca is not None
    return CertSet(ca=state.next_ca, serving=state.serving, next_ca=None,
                   previous_cas=(state.ca.cert, *state.previous_cas))


def _serving_stale(state: CertSet, policy: Policy, now: dt.datetime) -> bool:
    cert = state.serving.cert
    return (not signed_by(cert, state.ca.cert) or due(cert, policy.rotate_fraction, now)
            or not sans_match(cert, policy.dns_names, policy.ips))


def published_cas(bundles: Sequence[bytes]) -> set[x509.Certificate]:
    """CAs present in every one of ``bundles`` (each webhook's caBundle); empty without any."""
    if not bundles:
        return set()
    sets = []
    for pem in bundles:
        try:
            sets.append(set(x509.load_pem_x509_certificates(pem)))
        except ValueError:
            return set()
    return set.intersection(*sets)
