"""The dispatcher's gRPC calls to a toposched worker, with the credentials its Secret holds.

The Secret (named by the MultiKueueCluster's ``toposched.io/grpc-secret``) is read only from the
dispatcher's own namespace: a MultiKueueCluster cannot point it at another namespace's Secret.
Keys: ``ca.crt`` (verifies the worker's certificate; turns TLS on), ``tls.crt`` + ``tls.key``
(mTLS), ``token`` (bearer). Without ``ca.crt`` the call is plaintext and is refused unless the
endpoint is on loopback (the worker's gRPC port refuses plaintext off loopback too). Every
failure makes the worker unaskable for this pass (treated as Kueue's Incremental treats it),
logged once per pass; it never stops the pass.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping

from kubernetes.client.exceptions import ApiException

from scheduler.adapter.mk_dispatch import WorkerEndpoint
from scheduler.api.client import Connection
from scheduler.api.dispatcher import Capacity, PlaceAnswer, Worker, loopback
from scheduler.errors import UserError
from scheduler.k8s.informer import KubeApi, Resource

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
        return PlaceAnswer(bool(resp.fits), domains, tuple(resp.levels))

    def capacity(self) -> Capacity | None:
        from scheduler.api.gen.toposched.v1 import placement_pb2 as pb

        try:
            resp = self.conn.call("GetTopology", pb.GetTopologyRequest(omit_nodes=True))
        except UserError as err:
            log.warning("worker %s: GetTopology failed: %s", self.name, err)
            return None
        t = resp.totals
        return Capacity(max(0, int(t.gpus) - int(t.gpus_used)), max(0, int(t.healthy)), max(0, int(t.gpus)))


def _secret_data(api: KubeApi, namespace: str, name: str) -> Mapping[str, bytes]:
    data = (api.get(SECRETS, name, namespace).get("data") or {})
    return {k: base64.b64decode(v) for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def make_worker(api: KubeApi, namespace: str, conns: dict[str, Connection], ep: WorkerEndpoint) -> Worker | None:
    """The worker for ``ep``, its connection reused between passes."""
    key = f"{ep.cluster}|{ep.target}|{ep.secret}"
    if key not in conns:
        try:
            data = _secret_data(api, namespace, ep.secret) if ep.secret else {}
        except ApiException as exc:
            log.warning("worker %s: Secret %s/%s unreadable (%s %s)", ep.cluster, namespace, ep.secret,
                        exc.status, exc.reason)
            return None
        if "ca.crt" not in data and not loopback(ep.target):
            log.warning("worker %s: %s is not on loopback and Secret %s has no ca.crt: plaintext refused",
                        ep.cluster, ep.target, ep.secret)
            return None
        token = data.get("token", b"").decode().strip() or None
        conns[key] = Connection(ep.target, root_ca=data.get("ca.crt"), client_cert=data.get("tls.crt"),
                                client_key=data.get("tls.key"), token=token, timeout_s=CALL_TIMEOUT_S)
    return GrpcWorker(ep.cluster, conns[key])
