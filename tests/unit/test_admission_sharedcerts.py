"""Certificates shared by webhook replicas: the two-step CA rotation (pure), the Secret codec,
two replicas on the in-memory API (one issues, both serve the same certificate, neither is
ready before its CA is published, no certificate ever written before its CA is trusted),
certificates from mounted files, and the self-signed source's publish-then-serve order."""

from __future__ import annotations

import datetime as dt
import ipaddress
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from admission import configs
from admission.certs import CertManager
from admission.certset import CertSet, Policy, plan, published_cas
from admission.server import WebhookApp, WebhookServer
from admission.sharedcerts import SECRETS, SecretSource
from admission.sources import MountedFilesSource, SelfSignedSource
from scheduler.http.pki import cert_pem, issue_ca, issue_serving, key_pem, signed_by
from scheduler.k8s.fakeapi import FakeApi

NS = "toposched-system"
DAY = dt.timedelta(days=1)
POLICY = Policy(("toposched-webhook.toposched-system.svc", "localhost"), (ipaddress.ip_address("127.0.0.1"),),
                ca_validity=30 * DAY, cert_validity=10 * DAY)
T0 = dt.datetime.now(dt.UTC)


def wait(predicate: Callable[[], Any], timeout_s: float = 10, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} not met within {timeout_s}s")


# ---------------------------------------------------------------------------------- plan (pure)
def test_first_plan_issues_a_ca_and_a_certificate_it_signs() -> None:
    state = plan(None, POLICY, T0, set())
    assert state is not None and state.next_ca is None and signed_by(state.serving.cert, state.ca.cert)
    assert plan(state, POLICY, T0 + DAY, set()) is None, "nothing due a day later"


def test_ca_rotation_stages_then_promotes_only_once_published() -> None:
    first = plan(None, POLICY, T0, set())
    assert first is not None
    later = T0 + 21 * DAY  # past 2/3 of the CA's 30 days
    staged = plan(first, POLICY, later, {first.ca.cert})
    assert staged is not None and staged.next_ca is not None
    assert staged.ca == first.ca and staged.serving.cert == first.serving.cert, "nothing signed by the new CA yet"
    assert staged.bundle_certs() == [first.ca.cert, staged.next_ca.cert]
    # The configurations do not hold the staged CA yet: no promotion however often we ask (the
    # serving certificate, due too, is renewed under the old CA).
    again = plan(staged, POLICY, later, {first.ca.cert})
    assert again is not None and again.ca == first.ca and again.next_ca == staged.next_ca
    assert signed_by(again.serving.cert, first.ca.cert)
    assert plan(again, POLICY, later, {first.ca.cert}) is None
    promoted = plan(staged, POLICY, later, {first.ca.cert, staged.next_ca.cert})
    assert promoted is not None and promoted.ca == staged.next_ca and promoted.next_ca is None
    assert signed_by(promoted.serving.cert, promoted.ca.cert)
    assert promoted.previous_cas == (first.ca.cert,), "the old CA stays trusted until it expires"
    expired = plan(promoted, POLICY, first.ca.cert.not_valid_after_utc + DAY, {promoted.ca.cert})
    assert expired is not None and expired.previous_cas == ()


def test_serving_certificate_renews_under_the_same_ca_and_on_new_names() -> None:
    first = plan(None, POLICY, T0, set())
    assert first is not None
    renewed = plan(first, POLICY, T0 + 7 * DAY, {first.ca.cert})
    assert renewed is not None and renewed.ca == first.ca and renewed.serving.cert != first.serving.cert
    other = Policy(("other.svc",), (), POLICY.ca_validity, POLICY.cert_validity)
    renamed = plan(first, other, T0, {first.ca.cert})
    assert renamed is not None and renamed.ca == first.ca


def test_secret_data_round_trip() -> None:
    ca, nxt = issue_ca(30 * DAY), issue_ca(30 * DAY)
    state = CertSet(ca=ca, serving=issue_serving(ca, ["a.svc"], [], 10 * DAY), next_ca=nxt,
                    previous_cas=(issue_ca(30 * DAY).cert,))
    back = CertSet.from_secret_data(state.to_secret_data())
    assert back is not None and back.bundle() == state.bundle() and back.serving.cert == state.serving.cert
    assert back.serving_ca() == ca.cert
    assert CertSet.from_secret_data({}) is None and CertSet.from_secret_data({"tls.crt": "bm9wZQ=="}) is None


def test_published_cas_is_what_every_webhook_trusts() -> None:
    a, b = issue_ca(DAY).cert, issue_ca(DAY).cert
    assert published_cas([cert_pem(a) + cert_pem(b), cert_pem(a)]) == {a}
    assert published_cas([cert_pem(a), b""]) == set() and published_cas([]) == set()


# ---------------------------------------------------------------------------------- two replicas
class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


def desired() -> list[dict[str, Any]]:
    client = configs.url_client_config("https://127.0.0.1:1")
    return [configs.mutating_configuration(client, NS), configs.validating_configuration(client, NS)]


@pytest.fixture
def replicas() -> Iterator[tuple[FakeApi, Clock, list[SecretSource]]]:
    api, clock = FakeApi(), Clock()
    sources = [SecretSource(api, NS, POLICY, desired(), identity=name, clock=clock, resync_s=1)  # type: ignore[arg-type]
               for name in ("a", "b")]
    for source in sources:
        source.start()
    yield api, clock, sources
    for source in sources:
        source.stop()


def serving_of(source: SecretSource) -> x509.Certificate | None:
    served = source._served  # noqa: SLF001 - what this replica serves is the point
    return served.serving.cert if served else None


def check_never_ahead_of_the_bundle(api: FakeApi) -> int:
    """Replay the API's history: every serving certificate written to the Secret is signed by a
    CA that every webhook's caBundle already held. Returns how many Secret writes were seen."""
    current: dict[str, dict[str, Any] | None] = {"MutatingWebhookConfiguration": None,
                                                 "ValidatingWebhookConfiguration": None}
    owned = configs.webhook_names(desired())
    writes = 0
    for change in api._changes:  # noqa: SLF001 - the recorded history
        plural = change.resource.plural
        if plural == "mutatingwebhookconfigurations":
            current["MutatingWebhookConfiguration"] = change.obj
        elif plural == "validatingwebhookconfigurations":
            current["ValidatingWebhookConfiguration"] = change.obj
        elif plural == "secrets":
            state = CertSet.from_secret_data(change.obj.get("data"))
            if state is None:
                continue
            writes += 1
            ca = state.serving_ca()
            first_issue = writes == 1  # nobody serves before the first bundle is published (readiness)
            assert ca is not None
            assert first_issue or ca in published_cas(configs.ca_bundles(current, owned)), \
                f"write {writes}: serving certificate signed by a CA not yet in every caBundle"
    return writes


def test_two_replicas_serve_one_certificate_issued_by_the_lease_holder(
        replicas: tuple[FakeApi, Clock, list[SecretSource]]) -> None:
    api, clock, (a, b) = replicas
    wait(lambda: a.readiness()[0] and b.readiness()[0], what="both replicas ready")
    assert serving_of(a) == serving_of(b) is not None
    leaders = [s for s in (a, b) if s.elector.is_leader.is_set()]
    assert len(leaders) == 1
    (secret,) = api.objects(SECRETS, NS)
    assert secret["metadata"]["name"] == "toposched-webhook-certs"

    # Rotate the CA: stage, publish, promote; both replicas end on the new certificate.
    first_ca = CertSet.from_secret_data(secret["data"]).ca.cert  # type: ignore[union-attr]
    clock.now = T0 + 21 * DAY
    leaders[0]._wake.set()  # noqa: SLF001 - skip the resync wait
    wait(lambda: (s := CertSet.from_secret_data(api.objects(SECRETS, NS)[0]["data"])) and s.ca.cert != first_ca
         and s.previous_cas == (first_ca,), what="CA promoted")
    wait(lambda: serving_of(a) == serving_of(b) and serving_of(a) is not None
         and not signed_by(serving_of(a), first_ca), what="both replicas on the new certificate")  # type: ignore[arg-type]
    wait(lambda: a.readiness()[0] and b.readiness()[0], what="both ready after rotation")
    assert check_never_ahead_of_the_bundle(api) >= 3  # issue, stage, promote


def test_a_replica_is_not_ready_until_its_ca_is_published() -> None:
    api = FakeApi()
    follower = SecretSource(api, NS, POLICY, desired(), identity="f")
    state = plan(None, POLICY, T0, set())
    assert state is not None
    api.create(SECRETS, {"metadata": {"name": "toposched-webhook-certs", "namespace": NS},
                         "data": state.to_secret_data()}, NS)
    follower.secret.add_handler(lambda *_: follower._load_from_secret())  # noqa: SLF001 - no leader here
    for informer in (follower.secret, *follower.config_informers.values()):
        informer.start()
    try:
        wait(lambda: serving_of(follower) is not None, what="certificate loaded")
        ready, why = follower.readiness()
        assert not ready and "caBundle" in why
        configs.sync(api, desired(), state.bundle())  # type: ignore[arg-type]
        wait(lambda: follower.readiness()[0], what="ready once published")
    finally:
        for informer in (follower.secret, *follower.config_informers.values()):
            informer.stop()


def test_leadership_moves_when_the_holder_stops(replicas: tuple[FakeApi, Clock, list[SecretSource]]) -> None:
    _api, _clock, (a, b) = replicas
    wait(lambda: a.readiness()[0] and b.readiness()[0], what="both ready")
    leader, other = (a, b) if a.elector.is_leader.is_set() else (b, a)
    served = serving_of(other)
    leader.stop()  # releases the Lease
    wait(lambda: other.elector.is_leader.is_set(), timeout_s=15, what="the other replica leads")
    assert serving_of(other) == served and other.readiness()[0], "a new leader re-issues nothing"


# ---------------------------------------------------------------------------------- mounted files
def write_pair(directory: Path, validity: dt.timedelta = 10 * DAY) -> x509.Certificate:
    ca = issue_ca(30 * DAY)
    pair = issue_serving(ca, ["localhost"], [], validity)
    (directory / "tls.key").write_bytes(key_pem(pair.key))
    (directory / "tls.crt").write_bytes(cert_pem(pair.cert))
    return pair.cert


def test_mounted_files_are_served_and_reloaded_on_change(tmp_path: Path) -> None:
    source = MountedFilesSource(tmp_path, poll_s=3600)
    assert source.reload() is False and not source.readiness()[0]
    write_pair(tmp_path)
    assert source.reload() is True and source.readiness() == (True, "ok")
    assert source.reload() is False, "unchanged files are not reloaded"
    write_pair(tmp_path)
    assert source.reload() is True
    (tmp_path / "tls.key").write_bytes(key_pem(issue_ca(DAY).key))  # mid-update: key of another cert
    assert source.reload() is False and source.readiness()[0], "the previous certificate keeps being served"


# ---------------------------------------------------------------------------------- self-signed
def test_self_signed_rotation_publishes_before_serving(tmp_path: Path) -> None:
    certs = CertManager(tmp_path, ["localhost"], ["127.0.0.1"], cert_validity=3 * DAY)
    source = SelfSignedSource(certs)
    order: list[str] = []
    source.publish = lambda: order.append("publish")  # type: ignore[method-assign]
    load = certs.load_into
    certs.load_into = lambda ctx: (order.append("serve"), load(ctx))[1]  # type: ignore[method-assign]
    certs.serving = None  # force a renewal
    assert source.rotate_once() is True
    assert order == ["publish", "serve"]


def test_not_ready_while_draining(tmp_path: Path) -> None:
    certs = CertManager(tmp_path, ["localhost"], ["127.0.0.1"])
    source = SelfSignedSource(certs)
    webhook = WebhookServer(WebhookApp(None), source, "127.0.0.1", 0)
    try:
        assert webhook.readiness() == (False, "caBundle not published yet")
        source.publish()
        assert webhook.readiness() == (True, "ok")
        threading.Thread(target=webhook.drain).start()
        wait(lambda: webhook.readiness() == (False, "shutting down"))
    finally:
        webhook.stop()
