"""The controller's signing key (kube/signing.py) and what a signature binds (adapter/owned.py):
one key shared through a Secret the controller creates, a per-process key when it cannot, and
a signature valid only for the Workload uid and the key it was made for. In-memory API."""

from __future__ import annotations

import base64
import json
import logging

import pytest

from scheduler.adapter.owned import SIGNATURE_FIELD, Signer
from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET, DomainTarget, parse_target
from scheduler.core.beyond.held_domains import ANN_RESERVED_DOMAIN
from scheduler.k8s.fakeapi import FakeApi
from scheduler.kube.signing import DEFAULT_SECRET, KEY_FIELD, SECRETS, load_signer

NS = "toposched-system"
TARGET = DomainTarget("main", "gpu", "block", {"block": "b1"}).encode()


def test_the_first_replica_creates_the_key_and_every_other_one_reads_it() -> None:
    api = FakeApi()
    first = load_signer(api, NS)
    [secret] = api.objects(SECRETS, NS)
    assert secret["metadata"]["name"] == DEFAULT_SECRET
    assert len(base64.b64decode(secret["data"][KEY_FIELD])) == 32
    assert load_signer(api, NS).key == first.key  # a second replica, or a restart


def test_a_lost_creation_race_reads_the_winners_key() -> None:
    api = FakeApi()
    winner = load_signer(FakeApi(), NS)
    api.fail_next(404, "get", "secrets")  # both saw no Secret; the other replica creates it first
    api.create(SECRETS, {"metadata": {"name": DEFAULT_SECRET, "namespace": NS},
                         "data": {KEY_FIELD: base64.b64encode(winner.key).decode()}}, NS)
    assert load_signer(api, NS).key == winner.key


def test_without_rights_the_key_is_this_process_only(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    api.fail_next(403, "get", "secrets")
    with caplog.at_level(logging.WARNING):
        signer = load_signer(api, NS)
    assert len(signer.key) == 32 and api.objects(SECRETS, NS) == []
    assert "key of this process only" in caplog.text


def test_a_secret_without_a_usable_key_is_not_used() -> None:
    api = FakeApi()
    api.create(SECRETS, {"metadata": {"name": DEFAULT_SECRET, "namespace": NS},
                         "data": {KEY_FIELD: base64.b64encode(b"short").decode()}}, NS)
    assert load_signer(api, NS).key != b"short"


def test_a_signature_binds_the_uid_the_key_and_the_value() -> None:
    signer = Signer(b"k" * 32)
    stored = signer.sign("uid-1", ANN_PREEMPTION_TARGET, TARGET)
    assert parse_target({ANN_PREEMPTION_TARGET: stored}) == parse_target({ANN_PREEMPTION_TARGET: TARGET})
    assert signer.sign("uid-1", ANN_PREEMPTION_TARGET, TARGET) == stored  # deterministic: no rewrite
    assert signer.verify("uid-1", ANN_PREEMPTION_TARGET, stored)
    assert not signer.verify("uid-2", ANN_PREEMPTION_TARGET, stored)  # copied to another Workload
    assert not signer.verify("uid-1", ANN_RESERVED_DOMAIN, stored)  # replayed under another key
    assert not Signer(b"o" * 32).verify("uid-1", ANN_PREEMPTION_TARGET, stored)  # signed by someone else
    assert not signer.verify("uid-1", ANN_PREEMPTION_TARGET, TARGET)  # unsigned
    edited = json.loads(stored)
    edited["domain"] = {"block": "b0"}
    assert not signer.verify("uid-1", ANN_PREEMPTION_TARGET, json.dumps(edited))  # value changed
    assert not signer.verify("", ANN_PREEMPTION_TARGET, stored)
    assert not signer.verify("uid-1", ANN_PREEMPTION_TARGET, "not json")
    assert SIGNATURE_FIELD in json.loads(stored)
