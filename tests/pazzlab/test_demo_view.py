"""The demo's terminal view and its port for the web view."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

from pazzlab.demo import Interrupted, View, _hold, ui_port


def test_a_long_entry_is_shown_in_full(capsys):
    """The fault table shows the localized entry whole: its actions, at the end, are what a
    misroute changed (`output:3`), and its match says which traffic."""
    e = (
        "table=0,priority=24,cookie=0x10,ip,nw_src=10.0.3.0/24,nw_dst=10.0.12.0/24,"
        "udp_dst=445,actions=set_verify_rule:12,output:3"
    )
    fault = {"id": 1, "state": "open", "kind": "type_p_action", "location": "dpid:2"}
    view = View(tty=True)
    view.draw(None, [{**fault, "polled": {"switch": "s2", "cause": e}}], [("h",)])
    assert e in capsys.readouterr().out


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


def test_the_view_url_stays_on_screen(capsys):
    """However many events scroll by, every redraw starts with the web view's URL."""
    view = View(tty=True)
    view.pinned = ["web view: http://127.0.0.1:9474/ui/"]
    for i in range(200):
        view.event(f"event {i}")
    view.draw(None, [], [("h",)])
    screen = capsys.readouterr().out.split("\x1b[2J")[-1].splitlines()
    assert "web view: http://127.0.0.1:9474/ui/" in screen[:3]


def test_hold_keeps_going_until_a_signal(capsys):
    """--hold: the demo waits after its summary until Ctrl-C or SIGTERM, saying where the
    view is; the signal ends the hold, not the process."""

    class Lab:
        hosts = {"h1": {"ns": type("NS", (), {"name": "pzab12-h1"})()}}

    def on_signal(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    before = signal.signal(signal.SIGTERM, on_signal)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    try:
        t0 = time.monotonic()
        timer.start()
        _hold(View(tty=False), Lab(), "/run/pazz.sock", "http://127.0.0.1:9474/ui/")
        waited = time.monotonic() - t0
    finally:
        timer.cancel()
        signal.signal(signal.SIGTERM, before)
    out = capsys.readouterr().out
    assert waited >= 0.4  # it held until the signal
    assert "http://127.0.0.1:9474/ui/" in out and "pzab12-h1" in out and "SIGTERM" in out
