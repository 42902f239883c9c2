"""The key the controller signs its owned annotations with (``scheduler.adapter.owned``).

Kept in a Secret the controller creates in its own namespace (``--signing-secret``, default
``toposched-controller-signing-key``), so every replica and every restart signs and verifies
with the same key: a new leader keeps honouring the preemption targets and held domains the
last one wrote. Only the controller's ServiceAccount may read it (deploy/: a Role with ``get``
on that one name and ``create``; the webhook's account has no access), so nobody else can sign.

When the Secret can be neither read nor created (no RBAC, no API server at start), the
controller falls back to a key of this process only and says so: nothing is unsafe, but the
values written by another replica or an earlier run are not honoured (they are decided again).
"""

from __future__ import annotations

import base64
import logging
import secrets
from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.adapter.owned import Signer
from scheduler.k8s.informer import KubeApi, Resource

log = logging.getLogger(__name__)

SECRETS = Resource("", "v1", "secrets")
DEFAULT_SECRET = "toposched-controller-signing-key"
KEY_FIELD = "key"
KEY_BYTES = 32


def _key_of(secret: Mapping[str, Any]) -> bytes | None:
    data = secret.get("data")
    raw = data.get(KEY_FIELD) if isinstance(data, dict) else None
    try:
        key = base64.b64decode(str(raw), validate=True) if raw else b""
    except ValueError:
        return None
    return key if len(key) >= KEY_BYTES else None


def load_signer(api: KubeApi, namespace: str, name: str = DEFAULT_SECRET, attempts: int = 3) -> Signer:
    """The shared key from Secret ``namespace/name``, creating the Secret when it is missing
    (two replicas racing: the loser reads the winner's); a per-process key when neither works."""
    for _ in range(attempts):
        try:
            try:
                secret = api.get(SECRETS, name, namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                        "metadata": {"name": name, "namespace": namespace,
                                     "labels": {"app.kubernetes.io/name": "toposched",
                                                "app.kubernetes.io/component": "controller"}},
                        "data": {KEY_FIELD: base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}}
                try:
                    secret = api.create(SECRETS, body, namespace)
                    log.info("created the signing key Secret %s/%s", namespace, name)
                except ApiException as created:
                    if created.status == 409:
                        continue  # another replica created it first: read theirs
                    raise
            key = _key_of(secret)
            if key is None:
                log.warning("Secret %s/%s has no usable %r (at least %d bytes, base64): signing with a key of "
                            "this process only; delete the Secret to let the controller create it", namespace, name,
                            KEY_FIELD, KEY_BYTES)
                return Signer.per_process()
            signer = Signer(key)
            log.info("signing owned annotations with the key in Secret %s/%s (id %s)", namespace, name, signer.key_id)
            return signer
        except Exception as exc:  # noqa: BLE001 - no rights, no API server: run on, less sticky
            status = f"HTTP {exc.status}" if isinstance(exc, ApiException) else type(exc).__name__
            log.warning("cannot read or create the signing key Secret %s/%s (%s): signing with a key of this "
                        "process only, so preemption targets and held domains written by another replica or an "
                        "earlier run are decided again (grant the controller get/create on it: deploy/rbac)",
                        namespace, name, status)
            return Signer.per_process()
    return Signer.per_process()
