"""Ports for the local control plane's listeners are chosen below the kernel's ephemeral range:
a port from that range can be taken by an outgoing connection's local port between choosing it and
the component binding it (KWOK then exits with "address already in use", seen in a conformance
run while other processes ran)."""

from __future__ import annotations

import socket

from scheduler.devcluster.controlplane import LISTEN_PORTS_FROM, LOOPBACK, ephemeral_port_range, free_ports


def test_listening_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    low, _ = ephemeral_port_range()
    first, second = free_ports(6), free_ports(50)
    assert len(set(first)) == 6 and len(set(second)) == 50 and not set(first) & set(second)
    assert all(LISTEN_PORTS_FROM <= p < low for p in first + second)
    for port in first:  # free now: each can be bound
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((LOOPBACK, port))


def test_a_port_in_use_is_never_handed_out() -> None:
    held = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(3)]
    try:
        taken = set()
        for s in held:
            s.bind((LOOPBACK, free_ports(1)[0]))
            s.listen()
            taken.add(s.getsockname()[1])
        assert not taken & set(free_ports(300))
    finally:
        for s in held:
            s.close()
