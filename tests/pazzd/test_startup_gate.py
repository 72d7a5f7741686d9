"""Findings about the half-installed state of the controller's first install are never
opened (services.Startup): the intents check follows every update, stores nothing until
the start-up is done, then opens what is still broken, with cause "start-up"; what a
later FlowMod breaks is opened with its own cause."""

from __future__ import annotations

from types import SimpleNamespace

from cpc.intents import Policy
from cpc.model import Model
from cpc.rules import FlowMod, Instructions, Match
from cpc.topology import Topology
from pazzd.checks.intents import IntentsCheck
from pazzd.findstore import FindingStore
from pazzd.localize import ChangeLog
from pazzd.services import FindingSink, Services, Startup

IP = {"eth_type": (0x0800, 0xFFFF)}


def out(port):
    return Instructions((("output", port),), (), False, None)


def net(i: int) -> Match:
    return Match.build({**IP, "ipv4_dst": (0x0A000000 + (i << 8), 0xFFFFFF00)})


def intents_check(model, topo, store, startup, policy, clock) -> IntentsCheck:
    """The intents check started on these services (no tester, fuzzer or proxy)."""
    svc = Services(
        cfg=SimpleNamespace(intents=SimpleNamespace(policies=[policy])),
        model=model,
        store=None,
        findings=store,
        tester=None,
        topology=topo,
        sink=FindingSink(store, clock=clock),
        startup=startup,
        changes=ChangeLog(),
        metrics=None,
        clock=clock,
    )
    check = IntentsCheck()
    check.start(svc)
    return check


def test_startup_settles_after_quiet_or_limit():
    st = Startup(100.0, needs_controller=True, quiet=3.0, limit=60.0)
    assert not st.check(101.0, False) and not st.settled  # no controller yet
    assert not st.check(102.0, True)  # connected at 102: quiet until 105
    st.committed(104.0)  # the install goes on
    assert not st.check(106.0, True)
    assert st.check(107.5, True) and st.settled and st.settled_at == 107.5
    assert not st.check(200.0, True)  # once
    late = Startup(100.0, needs_controller=True, quiet=3.0, limit=60.0)
    assert late.check(160.0, False)  # no controller ever: the limit
    assert Startup(5.0, needs_controller=False).settled  # rules from a file: at once


def test_intent_findings_wait_for_the_first_install():
    topo = Topology()
    topo.add_switch(1, "s1", [1, 2, 3])
    topo.add_switch(2, "s2", [1, 2])
    topo.add_link((1, 3), (2, 1))
    for p in ((1, 1), (2, 2)):
        topo.add_edge(p)
    model = Model(topo)
    model.build()
    store = FindingStore(":memory:")
    now = [1000.0]
    startup = Startup(now[0], needs_controller=True, quiet=3.0)
    reach = Policy(
        "reach-s2", "reach", src=((1, 1),), dst=(2, 2), match=(("eth_type", 0x800, 0xFFFF),)
    )
    check = intents_check(model, topo, store, startup, reach, lambda: now[0])
    model.subscribe(check.on_update)
    startup.check(now[0], controller_connected=True)
    check.tick(now[0])
    assert store.findings() == []  # broken (nothing installed), but the install is under way
    # Half of the install: s1 forwards to s2, s2 has nothing yet.
    model.apply(FlowMod("add", 1, 0, 10, Match.build(IP), out(3), rule_id=1))
    startup.committed(now[0])
    check.tick(now[0])
    assert store.findings() == []
    # The rest: reach holds, then the controller goes quiet and the start-up ends.
    model.apply(FlowMod("add", 2, 0, 10, Match.build(IP), out(2), rule_id=2))
    now[0] += 5
    assert startup.check(now[0], controller_connected=True)
    check.tick(now[0])
    assert store.findings() == []  # nothing was broken once installed: no finding at all
    # A later FlowMod breaks it: opened, with the cause the update carried.
    with model.caused_by({"source": "api flowmod"}):
        model.apply(FlowMod("add", 2, 0, 20, net(1), Instructions((), (), False, None), rule_id=3))
    check.tick(now[0])
    (f,) = store.findings("intent", "open")
    assert f.policy == "reach-s2" and f.cause == {"source": "api flowmod"}


def test_what_is_still_broken_when_the_install_ends_opens_with_cause_startup():
    topo = Topology()
    topo.add_switch(1, "s1", [1, 2])
    for p in ((1, 1), (1, 2)):
        topo.add_edge(p)
    model = Model(topo)
    model.build()
    store = FindingStore(":memory:")
    startup = Startup(0.0, needs_controller=True, quiet=1.0)
    reach = Policy(
        "reach", "reach", src=((1, 1),), dst=(1, 2), match=(("eth_type", 0x800, 0xFFFF),)
    )
    check = intents_check(model, topo, store, startup, reach, lambda: 5.0)
    assert store.findings() == []
    assert not startup.check(0.5, controller_connected=True)  # the controller connects
    assert startup.check(2.0, controller_connected=True)
    check.tick(2.0)
    (f,) = store.findings("intent", "open")
    assert f.cause == {"source": "start-up"}
    assert f.confirmation is None  # no probe service here: nothing claims it was confirmed
