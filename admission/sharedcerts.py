"""``--cert-source secret``: webhook replicas share one CA and serving certificate in a Secret.

Every replica watches the Secret and serves the certificate in it, and watches its two webhook
configurations: it is ready once the CA that signed the certificate it serves is in the
caBundle of every webhook it owns. The replica holding the Lease (``scheduler.k8s.leader``)
also issues: it creates the certificates when the Secret is empty, rotates them with
``certset.plan`` (a new CA is published next to the old one before anything is signed by it)
and publishes the bundle into the configurations. Followers never write.

RBAC (deploy/rbac/webhook.yaml): get/list/watch/update of this one Secret (``resourceNames``;
deploy/ ships it empty, as ``create`` cannot be limited by name), the Lease, and get/list/watch/
update of the two configurations named ``toposched-webhook``.
"""

from __future__ import annotations

import datetime as dt
import logging
import ssl
import threading
from collections.abc import Callable, Sequence
from typing import Any

from kubernetes.client import ApiException

from admission import configs
from admission.certset import CertSet, Policy, next_due, plan, published_cas
from scheduler.http.pki import cert_pem, key_pem, load_chain_pem, tls_server_context
from scheduler.k8s.clock import utcnow
from scheduler.k8s.informer import Api, Informer, Resource, object_key
from scheduler.k8s.leader import LeaseElector

log = logging.getLogger(__name__)

SECRETS = Resource("", "v1", "secrets")
SECRET_NAME = "toposched-webhook-certs"
LEASE_NAME = "toposched-webhook"
# A failed write (409 from a concurrent leader, API server away) is retried after this long.
RETRY_S = 2.0
LEASE_RELEASE_WAIT_S = 5.0  # stop() waits this long for the Lease to be given up


class SecretSource:
    def __init__(self, api: Api, namespace: str, policy: Policy, desired: Sequence[dict[str, Any]], *,
                 identity: str, secret_name: str = SECRET_NAME, lease_name: str = LEASE_NAME,
                 create_configs: bool = True, resync_s: float = 300.0,
                 clock: Callable[[], dt.datetime] = utcnow) -> None:
        self.api = api
        self.namespace = namespace
        self.policy = policy
        self.desired = list(desired)
        self.owned = configs.webhook_names(self.desired)
        self.secret_name = secret_name
        self.create_configs = create_configs
        self.resync_s = resync_s
        self.clock = clock
        self._context = tls_server_context()
        self._lock = threading.Lock()
        self._served: CertSet | None = None
        self._pem = b""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lease_thread: threading.Thread | None = None
        self.secret = Informer(api, SECRETS, namespace=namespace, field_selector=f"metadata.name={secret_name}")
        self.config_informers = {kind: Informer(api, resource, field_selector=f"metadata.name={configs.CONFIG_NAME}")
                                 for kind, resource in (("MutatingWebhookConfiguration", configs.MUTATING),
                                                        ("ValidatingWebhookConfiguration", configs.VALIDATING))
                                 if kind in self.owned}
        self.elector = LeaseElector(api, lease_name, namespace, identity)

    @property
    def ssl_context(self) -> ssl.SSLContext:
        return self._context

    @property
    def serving_pem(self) -> bytes:
        return self._pem

    # ------------------------------------------------------------------ every replica
    def start(self) -> None:
        self.secret.add_handler(lambda *_: self._load_from_secret())
        for informer in self.config_informers.values():
            informer.add_handler(lambda *_: self._wake.set())
        for informer in (self.secret, *self.config_informers.values()):
            informer.start()
        self._lease_thread = threading.Thread(target=self.elector.run, args=(self._wake.set, self._wake.set),
                                              name="webhook-lease", daemon=True)
        self._lease_thread.start()
        threading.Thread(target=self._issue_loop, name="webhook-issuer", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self.elector.stop()  # gives the Lease up, so a successor issues without waiting for expiry
        for informer in (self.secret, *self.config_informers.values()):
            informer.stop()
        if self._lease_thread is not None:  # the Lease is released before stop returns
            self._lease_thread.join(timeout=LEASE_RELEASE_WAIT_S)

    def _load_from_secret(self) -> None:
        obj = self.secret.get(f"{self.namespace}/{self.secret_name}")
        state = CertSet.from_secret_data((obj or {}).get("data"))
        if state is None:
            return  # empty (the leader has not issued yet) or unreadable: keep serving what we have
        with self._lock:
            if self._served is not None and _same_serving(self._served, state):
                self._served = state  # same certificate, newer bundle (a CA staged or promoted)
                return
            try:
                pair = (cert_pem(state.serving.cert), key_pem(state.serving.key))
                load_chain_pem(self._context, *pair)
            except (ssl.SSLError, ValueError) as exc:
                log.error("the certificate in Secret %s/%s does not load: %s", self.namespace, self.secret_name, exc)
                return
            self._served = state
            self._pem = pair[0] + b"\n" + pair[1]
        log.info("serving the certificate from Secret %s/%s (valid until %s)", self.namespace, self.secret_name,
                 state.serving.cert.not_valid_after_utc.isoformat())

    def _current_configs(self) -> dict[str, dict[str, Any] | None]:
        return {kind: informer.get(configs.CONFIG_NAME) for kind, informer in self.config_informers.items()}

    def readiness(self) -> tuple[bool, str]:
        with self._lock:
            served = self._served
        if served is None:
            return False, f"no certificate in Secret {self.namespace}/{self.secret_name} yet"
        if not self.owned:
            return True, "ok"
        ca = served.serving_ca()
        if ca is None or ca not in published_cas(configs.ca_bundles(self._current_configs(), self.owned)):
            return False, "the CA of the served certificate is not in every webhook's caBundle yet"
        return True, "ok"

    # ------------------------------------------------------------------ the Lease holder
    def _issue_loop(self) -> None:
        wait = 0.0
        while not self._stop.is_set():
            self._wake.wait(wait)
            self._wake.clear()
            if self._stop.is_set():
                return
            if not self.elector.is_leader.is_set():
                wait = self.resync_s
                continue
            try:
                wait = self.issue_once()
            except ApiException as exc:
                log.warning("issuing webhook certificates: HTTP %s %s; retrying in %.0fs", exc.status, exc.reason,
                            RETRY_S)
                wait = RETRY_S
            except Exception:
                log.exception("issuing webhook certificates failed; retrying in %.0fs", RETRY_S)
                wait = RETRY_S

    def issue_once(self) -> float:
        """One step as leader: plan against the Secret and the published bundles, write the
        Secret when the plan changes it, publish its bundle. Returns seconds until the next step."""
        secret = self._fetch_secret()
        state = CertSet.from_secret_data(secret.get("data"))
        now = self.clock()
        published = published_cas(configs.ca_bundles(self._current_configs(), self.owned)) if self.owned else set()
        planned = plan(state, self.policy, now, published)
        if planned is not None:
            if not self.elector.is_leader.is_set():
                return self.resync_s
            secret["data"] = planned.to_secret_data()
            self.api.replace(SECRETS, secret)  # carries resourceVersion: a stale leader gets 409
            log.info("wrote certificates to Secret %s/%s (CA %s%s)", self.namespace, self.secret_name,
                     planned.ca.cert.subject.rfc4514_string(), ", next CA staged" if planned.next_ca else "")
            state = planned
        assert state is not None
        if self.desired and self.elector.is_leader.is_set():
            configs.sync(self.api, self.desired, state.bundle(), create=self.create_configs)
        if planned is not None:
            return 0.0  # a staged CA may be promotable as soon as the bundle is seen published
        until = (next_due(state, self.policy) - now).total_seconds()
        return max(1.0, min(self.resync_s, until))

    def _fetch_secret(self) -> dict[str, Any]:
        """The Secret as the API server holds it now (not the cache: its resourceVersion guards
        the write); created empty when missing and we may create it (local clusters)."""
        try:
            return self.api.get(SECRETS, self.secret_name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": self.secret_name, "namespace": self.namespace,
                             "labels": {"app.kubernetes.io/name": "toposched",
                                        "app.kubernetes.io/component": "webhook"}}}
        try:
            created = self.api.create(SECRETS, body, self.namespace)
        except ApiException as exc:
            if exc.status == 403:
                log.error("Secret %s/%s is missing and this account may not create it: apply deploy/ (it ships "
                          "the Secret empty)", self.namespace, self.secret_name)
            raise
        log.info("created Secret %s", object_key(created))
        return created


def _same_serving(a: CertSet, b: CertSet) -> bool:
    return a.serving.cert == b.serving.cert
