"""Private Open vSwitch instances and network namespaces for integration tests.

The implementation is pazzlab.ovs's (the demo's lab uses the same pieces); this module
names what the tests use. Everything runs as root and cleans up after itself, also
when a test fails.

    from tests.ovs.ovsenv import OvsInstance, Netns, VethPair, unique_name

    with OvsInstance(prefix, rundir) as ovs:           # ovsdb-server + ovs-vswitchd
        ovs.add_bridge("br1", dpid=1)                   # netdev, fail_mode=secure
        with Netns(unique_name("h")) as h1:
            link = VethPair.host(h1, "eth0", "10.0.0.1/24", mac="02:00:00:00:00:01")
            ovs.add_port("br1", link.outer, ofport=1)
            ovs.ofctl("add-flow", "br1", "priority=10,ip,actions=output:2")
            h1.run("ping", "-c1", "10.0.0.2", check=False)

API
---
``OvsInstance(prefix, rundir, *, name="ovs")``
    ``prefix``: an OVS install prefix (``$PAZZ_OVS_PREFIX``, or ``/usr`` for the stock Debian
    build); ``rundir``: an empty private directory (holds db, sockets, pid files and logs).
    ``.start()`` / ``.stop()`` (also via ``with``). ``.vsctl(*args)``, ``.ofctl(*args,
    version="OpenFlow13")`` (pass ``version=None`` for none), ``.appctl(*args, target=
    "ovs-vswitchd")`` run the prefix's tools against this instance and return stdout (raise
    ``subprocess.CalledProcessError`` with stderr on failure). ``.add_bridge(name, dpid=,
    fail_mode="secure", other_config=None)``, ``.add_port(bridge, port, ofport=None,
    iface_other_config=None)``, ``.dump_flows(bridge)``, ``.port_stats(bridge)`` ->
    ``{ofport: {"rx_packets", "tx_packets", ...}}``, ``.env`` (the OVS_* environment), ``.bin``
    (tool paths) and ``.log_tail()``. ``stop()`` deletes the bridges (a netdev bridge is a
    persistent tap device), then stops every process started, by pid.
``Netns(name, pid=None)``
    A network namespace (``ip netns add``; with ``pid``, a name for that process's namespace,
    ``ip netns attach``, as the lab does for its Mininet hosts); ``.run(*cmd, check=True, timeout=30)``,
    ``.popen(*cmd, **kw)``, ``.delete()`` (also via ``with``). Deleting removes its links.
``VethPair(a, b, ns_a=None, ns_b=None)``
    A veth pair; ``.delete()``. ``VethPair.host(ns, ifname, cidr, mac=None)`` makes a pair
    whose inner end ``ifname`` lives in ``ns`` with the address ``cidr`` and whose outer
    end (``.outer``) stays in the root namespace for OVS. Offloads are turned off on both
    ends so that captures and checksums stay exact.
``Cleanup``
    A LIFO stack of cleanup callbacks (``.push(fn, *args)``, ``.run()``); used by the fixtures.
``unique_name(stem)``
    ``pz<stem><6 hex>`` short names, unique per call (Linux interface names are <= 15 chars).
"""

import socket
import threading

from pazzlab.ovs import Cleanup, Netns, OvsInstance, VethPair, run, unique_name

__all__ = ["Cleanup", "Netns", "OvsInstance", "SflowSink", "VethPair", "run", "unique_name"]


class SflowSink:
    """A UDP socket on 127.0.0.1 that keeps every sFlow datagram it receives (a thread)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.datagrams: list[bytes] = []
        self._stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self._stop:
            try:
                self.datagrams.append(self.sock.recv(65535))
            except TimeoutError:
                continue
            except OSError:
                return

    def stop(self) -> None:
        self._stop = True
        self.thread.join(timeout=2)
        self.sock.close()
