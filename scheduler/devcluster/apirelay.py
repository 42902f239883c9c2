"""The ``kubernetes`` Service for the podman node's pods: a TCP relay from the pods' gateway
to the API server on loopback.

In a cluster, kube-proxy sends the ``kubernetes`` Service's address to an API server. Here the
API server listens on 127.0.0.1 only, which a pod (its own network namespace) cannot reach, so
the node relays ``<gateway>:<port>`` to ``127.0.0.1:<port>``, bytes unchanged (TLS end to end:
the pod verifies the API server's certificate, for the name ``kubernetes.default.svc`` that its
/etc/hosts maps to the gateway). Only connections from the pods' network are accepted.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading

log = logging.getLogger(__name__)

IP_FREEBIND = 15  # linux/in.h: bind before the bridge (made with the first pod) has the address


class ApiRelay:
    def __init__(self, listen: tuple[str, int], target: tuple[str, int], allowed: str) -> None:
        self.target = target
        self.allowed = ipaddress.ip_network(allowed, strict=False)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.setsockopt(socket.IPPROTO_IP, IP_FREEBIND, 1)
        self.sock.bind(listen)
        self.sock.listen(128)
        self._stopped = threading.Event()

    def start(self) -> ApiRelay:
        threading.Thread(target=self._accept, name="api-relay", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self.sock.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            if ipaddress.ip_address(peer[0]) not in self.allowed:
                log.warning("api relay: refused a connection from %s (not the pods' network)", peer[0])
                conn.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError as exc:
                log.warning("api relay: API server %s:%d unreachable (%s)", *self.target, exc)
                conn.close()
                continue
            upstream.settimeout(None)
            for src, dst in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=_pipe, args=(src, dst), daemon=True).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
