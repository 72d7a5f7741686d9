"""The demo's terminal view and its port for the web view."""

from __future__ import annotations

import socket

from pazzlab.demo import _tail, ui_port


def test_a_long_entry_keeps_its_actions():
    """The fault table cuts an entry from the left: the actions at its end are what a
    misroute changed (`output:3`)."""
    e = "table=0,priority=24,ip,nw_dst=10.0.1.0/24 actions=set_verify_rule:12,output:3"
    cut = _tail(e, 40)
    assert len(cut) == 40 and cut.endswith("output:3") and cut.startswith("…")
    assert _tail("priority=1 actions=drop", 40) == "priority=1 actions=drop"


def test_a_port_left_in_time_wait_is_taken_again():
    """A rerun within a minute keeps the view's port: a connection closed on it leaves
    TIME_WAIT, which the view's own bind (SO_REUSEADDR) does not mind."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.listen()
    c = socket.create_connection(("127.0.0.1", port))
    a, _ = srv.accept()
    a.close()  # the server side closes first: its end waits in TIME_WAIT
    c.close()
    srv.close()
    assert ui_port(port) == port
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        assert ui_port(busy.getsockname()[1]) != busy.getsockname()[1]  # in use: another
    finally:
        busy.close()
