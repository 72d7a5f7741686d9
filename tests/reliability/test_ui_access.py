"""The web view obeys the API socket's access: without the token that `pazzctl ui-url`
prints (kept in a file beside the socket, readable by the socket's group only) it answers
401 and nothing else. And it cannot starve the API: 32 `reach` requests at once through
the view leave `pazzctl status` over the socket its usual speed (p50 under 50 ms)."""

from __future__ import annotations

import http.client
import json
import math
import os
import secrets
import stat
import statistics
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from pazzapi import ApiError, call
from pazzdata import workloads
from tests.pazzd.helpers import Pazzd, base_config, free_port, pazzctl, write_config


def _get(port: int, path: str, headers: dict | None = None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", path, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


@pytest.fixture(scope="module")
def view(tmp_path_factory):
    d = tmp_path_factory.mktemp("view")
    port = free_port()
    cfg = base_config(d, ui={"enabled": True, "listen": f"127.0.0.1:{port}"})
    pz = Pazzd(write_config(d / "pazzd.yaml", cfg))
    try:
        pz.wait_ready()
        url = pazzctl(pz.sock, "ui-url").stdout.strip()
        yield pz, port, url
    finally:
        assert pz.stop() == 0
    assert not Path(pz.sock).with_suffix(".ui-token").exists()  # removed at stop


PATHS = [
    "/ui/",
    "/ui/topology.svg",
    "/ui/api/status",
    "/ui/api/faults",
    "/ui/api/topology",
    "/ui/api/coverage",
    "/ui/api/reach?src=s1:5&dst=s2:5",
    "/ui/api/trace?ingress=s1:5&header=ipv4_dst%3D10.0.1.9",
]


def test_no_token_no_view(view):
    pz, port, url = view
    parts = urllib.parse.urlsplit(url)
    token = urllib.parse.parse_qs(parts.query)["token"][0]
    assert parts.port == port and parts.path == "/ui/" and len(token) >= 32
    # The file beside the socket holds the same token, for the socket's owner and group.
    tf = Path(pz.sock).with_suffix(".ui-token")
    st, sock_st = os.stat(tf), os.stat(pz.sock)
    assert tf.read_text().strip() == token
    assert stat.S_IMODE(st.st_mode) == 0o640 and st.st_gid == sock_st.st_gid
    wrong = secrets.token_urlsafe(32)
    answered = []
    for path in PATHS:
        sep = "&" if "?" in path else "?"
        for how, headers, p in (
            ("none", {}, path),
            ("wrong query", {}, f"{path}{sep}token={wrong}"),
            ("wrong header", {"Authorization": f"Bearer {wrong}"}, path),
            ("empty", {"Authorization": "Bearer "}, f"{path}{sep}token="),
        ):
            code, body = _get(port, p, headers)
            if code != 401 or b'"ok"' in body or b"<svg" in body or b"<html" in body.lower():
                answered.append((how, path, code))
        for headers, p in (
            ({}, f"{path}{sep}token={token}"),
            ({"Authorization": f"Bearer {token}"}, path),
        ):
            code, body = _get(port, p, headers)
            assert code == 200, (path, code, body[:200])
    assert answered == []  # 0 of 32 requests without the token got anything but 401
    # The page's script and style are the package's files, public, and hold no token.
    for name in ("ui.js", "ui.css"):
        code, body = _get(port, f"/ui/static/{name}")
        assert code == 200 and token.encode() not in body
    # The URL pazzctl printed opens the page; the page's own requests carry the header.
    code, page = _get(port, f"{parts.path}?{parts.query}")
    assert code == 200 and b"/ui/static/ui.js" in page
    js = _get(port, "/ui/static/ui.js")[1]
    assert b"Authorization: `Bearer ${TOKEN}`" in js


def test_the_view_lists_at_most_1000_cubes(view):
    pz, port, url = view
    auth = {"Authorization": f"Bearer {url.split('token=')[1]}"}
    code, body = _get(port, "/ui/api/reach?src=s1:5&dst=s2:5&limit=1001", auth)
    assert code == 400 and "at most 1000" in json.loads(body)["error"]
    code, body = _get(port, "/ui/api/reach?src=s1:5&dst=s2:5&limit=1000", auth)
    assert code == 200 and json.loads(body)["result"] == pz.call(
        "reach", src="s1:5", dst="s2:5", limit=1000
    )


N_REACH = 32


def test_reach_through_the_view_leaves_the_api_its_speed(tmp_path):
    """A network whose reach answers take tens of milliseconds (4x4 grid, 2000 entries,
    ACLs inline, 1000 cubes listed): 32 at once through the view, status timed meanwhile."""
    wl = workloads.generate("grid", 4, 2000, rule_ids=True, acls=8, wide_acls="inline")
    (tmp_path / "net").mkdir()
    topo, rules = tmp_path / "net/topology.yaml", tmp_path / "net/rules.jsonl"
    wl.write(topo, rules)
    port = free_port()
    cfg = base_config(tmp_path, ui={"enabled": True, "listen": f"127.0.0.1:{port}"})
    cfg.update(topology=str(topo), rules=str(rules))
    pz = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
    try:
        pz.wait_ready()
        token = pz.call("ui-url")["url"].split("token=")[1]
        args = {"src": "s1:5", "dst": "s16:5", "limit": 1000}
        t1 = time.perf_counter()
        want = pz.call("reach", **args)
        one = time.perf_counter() - t1
        assert len(want["cubes"]) == 1000  # the expensive kind
        idle = sorted(_timed_status(pz.sock) for _ in range(10))
        q = urllib.parse.urlencode(args)
        got: list = []
        go = threading.Barrier(N_REACH + 1)

        def reach():
            go.wait()
            code, body = _get(port, f"/ui/api/reach?{q}", {"Authorization": f"Bearer {token}"})
            got.append((code, json.loads(body)))

        threads = [threading.Thread(target=reach) for _ in range(N_REACH)]
        for t in threads:
            t.start()
        go.wait()
        t0 = time.perf_counter()
        # A status request every 40 ms while the reaches run, each on its own connection
        # and thread (as monitoring asks: on time, not after the previous answer).
        busy: list[float] = []
        probes = []
        while any(t.is_alive() for t in threads):
            probes.append(threading.Thread(target=lambda: busy.append(_timed_status(pz.sock))))
            probes[-1].start()
            time.sleep(0.04)
        for t in threads + probes:
            t.join()
        took = time.perf_counter() - t0
    finally:
        assert pz.stop() == 0, pz.log_text()
    p50 = statistics.median(busy)
    print(
        f"one reach {one * 1e3:.0f} ms; status idle p50 {statistics.median(idle) * 1e3:.1f} ms, "
        f"during {N_REACH} reaches through the view ({len(busy)} samples) p50 "
        f"{p50 * 1e3:.1f} ms, max {max(busy) * 1e3:.0f} ms; all answered in {took:.1f} s"
    )
    assert len(got) == N_REACH and all(c == 200 and r["result"] == want for c, r in got)
    assert len(busy) == len(probes) >= 10
    assert p50 < 0.050


def _timed_status(sock: str) -> float:
    """Seconds to pazzd's status over the API socket (infinite: refused or failed)."""
    t0 = time.perf_counter()
    try:
        call(sock, "status", timeout=30)
    except (ApiError, OSError):
        return math.inf
    return time.perf_counter() - t0
