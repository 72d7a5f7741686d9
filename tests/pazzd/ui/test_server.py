"""The web view's server on a real pazzd (no OVS): its JSON is the API socket's, it is
read-only, it answers only to a loopback Host, it ships its page, and it is off unless
ui.enabled; its settings are checked like every other key."""

from __future__ import annotations

import http.client
import json
import urllib.parse

import pytest

from pazzd.config import ConfigError, load_config
from tests.pazzd.helpers import Pazzd, base_config, free_port, write_config


@pytest.fixture(scope="module")
def pazzd(tmp_path_factory):
    d = tmp_path_factory.mktemp("ui")
    port = free_port()
    pz = Pazzd(
        write_config(
            d / "pazzd.yaml", base_config(d, ui={"enabled": True, "listen": f"127.0.0.1:{port}"})
        )
    )
    try:
        st = pz.wait_ready()
        TOKEN[port] = pz.call("ui-url")["url"].split("?token=", 1)[1]
        yield pz, port, st
    finally:
        pz.stop()


TOKEN: dict[int, str] = {}  # the view's token by its port (the page sends it as a header)


def _get(port: int, path: str, host: str | None = None, method: str = "GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Authorization": f"Bearer {TOKEN[port]}"}
    c.request(method, path, headers={**headers, "Host": host} if host else headers)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, dict(r.headers), body


def _api(port: int, cmd: str, **args):
    q = urllib.parse.urlencode(args)
    status, _, body = _get(port, f"/ui/api/{cmd}?{q}")
    return status, json.loads(body)


def test_the_json_is_the_api_sockets(pazzd):
    pz, port, st = pazzd
    assert st["ui"] == f"http://127.0.0.1:{port}/ui/"
    for cmd, args in (
        ("faults", {}),
        ("faults", {"state": "open"}),
        ("topology", {}),
        ("coverage", {}),
        ("trace", {"ingress": "s1:5", "header": "ipv4_dst=10.0.1.9,tcp_dst=80"}),
        ("reach", {"src": "s1:5", "dst": "s2:5", "limit": 3}),
    ):
        status, reply = _api(port, cmd, **args)
        assert status == 200 and reply == {"ok": True, "result": pz.call(cmd, **args)}, cmd
    status, reply = _api(port, "fault", id=999)
    assert status == 400 and reply == {
        "ok": False,
        "error": "no fault with id 999",
        "code": "input",
    }
    status, reply = _api(port, "trace", ingress="s9:1", header="x")
    assert status == 400 and "s9" in reply["error"]


def test_it_is_read_only(pazzd):
    pz, port, _ = pazzd
    rules = pz.call("status")["model"]["rules"]
    for cmd in ("flowmod", "reload", "localize", "nosuch"):
        status, reply = _api(port, cmd, switch="s1", flow="priority=9,actions=drop", id=1)
        assert status == 404 and not reply["ok"], cmd
    for method in ("POST", "PUT", "DELETE"):
        status, headers, _ = _get(port, "/ui/api/faults", method=method)
        assert status == 405 and headers["Allow"] == "GET, HEAD"
    assert pz.call("status")["model"]["rules"] == rules
    assert pz.call("status")["config_reloads"] == 0


def test_it_answers_only_a_loopback_host(pazzd):
    _, port, _ = pazzd
    for host in ("evil.example", "evil.example:80", "10.1.2.3"):
        assert _get(port, "/ui/api/faults", host=host)[0] == 421, host
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "[::1]:1", "localhost"):
        assert _get(port, "/ui/api/faults", host=host)[0] == 200, host


def test_the_page_and_its_files_are_shipped(pazzd):
    _, port, _ = pazzd
    status, headers, page = _get(port, "/ui/")
    assert status == 200 and b'src="/ui/static/ui.js"' in page
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    for name, ctype in (("ui.js", "text/javascript"), ("ui.css", "text/css")):
        status, headers, body = _get(port, f"/ui/static/{name}")
        assert status == 200 and headers["Content-Type"].startswith(ctype) and body
    status, headers, svg = _get(port, "/ui/topology.svg")
    assert status == 200 and headers["Content-Type"] == "image/svg+xml"
    assert svg.count(b'class="switch"') == 4
    assert b"http" not in page.replace(b"http-equiv", b"")  # nothing from elsewhere
    assert _get(port, "/ui/static/../../daemon.py")[0] == 404
    assert _get(port, "/")[0] == 302


def test_off_by_default_and_checked_like_every_key(tmp_path):
    cfg = base_config(tmp_path)
    c = load_config(write_config(tmp_path / "a.yaml", cfg))
    assert (c.ui.enabled, c.ui.host, c.ui.port) == (False, "127.0.0.1", 9474)
    for ui, msg in (
        ({"enabled": "yes"}, "ui.enabled: must be true or false"),
        ({"listen": "127.0.0.1:99999"}, "ui.listen: port 99999 out of range"),
        ({"listen": "nohost.invalid:80"}, "ui.listen: cannot resolve host"),
        ({"port": 1}, "ui.port: unknown key"),
    ):
        path = write_config(tmp_path / "b.yaml", {**cfg, "ui": ui})
        with pytest.raises(ConfigError, match=msg) as e:
            load_config(path)
        assert str(e.value).startswith(f"{path}:"), e.value
