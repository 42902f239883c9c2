"""The dispatcher's gRPC calls to a toposched worker, with the credentials its Secret holds.

The Secret (named by the MultiKueueCluster's ``toposched.io/grpc-secret``) is read only from the
dispatcher's own namespace: a MultiKueueCluster cannot point it at another namespace's Secret.
Keys: ``ca.crt`` (verifies the worker's certificate; turns TLS on), ``tls.crt`` + ``tls.key``
(mTLS), ``token`` (bearer), checked by ``dispatch_credentials.py``. Without ``ca.crt`` the call
is plaintext and is refused unless the endpoint is on loopback (the worker's gRPC port refuses
plaintext off loopback too). The Secret is read each pass: when its resourceVersion changed (a
rotated certificate or token) the worker's channel is rebuilt, without a restart. Every failure
makes that worker unaskable (treated as Kueue's Incremental treats it), never the others and
never the pass: an unreadable Secret is logged each pass, an unusable one once per version.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kubernetes.client.exceptions import ApiException

from scheduler.adapter.mk_dispatch import WorkerEndpoint
from scheduler.api.client import Connection
from scheduler.api.dispatch_credentials import CredentialsError, credentials
from scheduler.api.dispatcher import Capacity, PlaceAnswer, Worker, loopback
from scheduler.errors import UserError
from scheduler.k8s.informer import KubeApi, Obj, Resource

log = logging.getLogger(__name__)
SECRETS = Resource("", "v1", "secrets")
# Imports inside functions: the generated protobuf modules load grpc; the dispatcher's command
# imports this module only when it runs (as scheduler.api.client does).
CALL_TIMEOUT_S = 5.0  # one slow worker must not hold the pass for the others


class GrpcWorker(Worker):
    def __init__(self, name: str, conn: Connection) -> None:
        self.name = name
        self.conn = conn

    def place(self, manifest: bytes, whole_capacity: bool = False) -> PlaceAnswer | None:
        from scheduler.api.gen.toposched.v1 import placement_pb2 as pb

        try:
            resp = self.conn.call("Place", pb.PlaceRequest(workload=pb.WorkloadInput(manifest=manifest),
                                                           whole_capacity=whole_capacity))
        except UserError as err:
            log.warning("worker %s: Place failed: %s", self.name, err)
            return None
        domains = tuple({d.level: tuple(d.values) for d in ps.domains} for ps in resp.pod_sets)
        return PlaceAnswer(bool(resp.fits), domains, tuple(resp.levels),
                           int(resp.backlog_gpus) if resp.HasField("backlog_gpus") else None,
                           int(resp.backlog_pods) if resp.HasField("backlog_pods") else None)

    def capacity(self) -> Capacity | None:
        from scheduler.api.gen.toposched.v1 import placement_pb2 as pb

        try:
            resp = self.conn.call("GetTopology", pb.GetTopologyRequest(omit_nodes=True))
        except UserError as err:
            log.warning("worker %s: GetTopology failed: %s", self.name, err)
            return None
        t = resp.totals
        return Capacity(max(0, int(t.gpus) - int(t.gpus_used)), max(0, int(t.healthy)), max(0, int(t.gpus)))


@dataclass
class Channel:
    """One worker's channel, built from the Secret at ``version`` (its resourceVersion), or the
    fault that left the worker unusable at that version (logged once)."""

    target: str
    secret: str | None
    version: str
    conn: Connection | None = None
    fault: str | None = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _open(api: KubeApi, namespace: str, ep: WorkerEndpoint, known: Channel | None) -> Channel | None:
    """The worker's channel as its Secret is now: the known one while the Secret's
    resourceVersion (and the endpoint) are unchanged, else a new one (a rotated Secret takes
    effect at the next pass). None, logged, when the Secret is gone or, without a channel from an
earlier pass, cannot be read."""
    secret: Obj = {}
    if ep.secret:
        try:
            secret = api.get(SECRETS, ep.secret, namespace)
        except ApiException as exc:
            if exc.status != 404 and known is not None and known.conn is not None:
                return known  # the API server failed this read; the Secret was not deleted
            log.warning("worker %s: Secret %s/%s unreadable (%s %s)", ep.cluster, namespace, ep.secret,
                        exc.status, exc.reason)
            return None
    version = str((secret.get("metadata") or {}).get("resourceVersion", ""))
    if known is not None and (known.target, known.secret, known.version) == (ep.target, ep.secret, version):
        return known
    if known is not None:
        known.close()
        if known.version != version:
            log.info("worker %s: Secret %s/%s changed; its channel is rebuilt", ep.cluster, namespace, ep.secret)
    channel = Channel(ep.target, ep.secret, version)
    try:
        creds = credentials(secret)
    except CredentialsError as exc:
        channel.fault = f"Secret {namespace}/{ep.secret}: {exc}"
    else:
        if creds.root_ca is None and not loopback(ep.target):
            channel.fault = (f"{ep.target} is not on loopback and Secret {namespace}/{ep.secret} has no ca.crt: "
                             "plaintext refused")
        else:
            channel.conn = Connection(ep.target, root_ca=creds.root_ca, client_cert=creds.client_cert,
                                      client_key=creds.client_key, token=creds.token, timeout_s=CALL_TIMEOUT_S)
    if channel.fault is not None:  # once per version of the Secret: the next pass returns this channel
        log.warning("worker %s: unusable: %s", ep.cluster, channel.fault)
    return channel


def make_worker(api: KubeApi, namespace: str, conns: dict[str, Channel], ep: WorkerEndpoint) -> Worker | None:
    """The worker for ``ep``: its channel reused between passes while its Secret is unchanged;
    None (unaskable this pass, never a failed pass) when the Secret is unreadable or unusable."""
    channel = _open(api, namespace, ep, conns.get(ep.cluster))
    if channel is None:
        return None
    conns[ep.cluster] = channel
    return GrpcWorker(ep.cluster, channel.conn) if channel.conn is not None else None
