"""Run some of the example apps in one os-ken controller process (os-ken has no
osken-manager script in this venv, so this file starts its own):

    python -m examples.apps.run --port 6633 --apps router,acl,lb [--rules rules.jsonl]
                                [--lb-rules lb.jsonl] [--lb-cookie 0x30]

--rules: the cpc rule file router and acl install from; --lb-rules: the file lb follows;
--lb-cookie: the cookie of lb's FlowMods (0: lb is known by its connection only).
"""

from __future__ import annotations

import argparse
import os
import sys

APPS = {
    "router": "examples.apps.router",
    "acl": "examples.apps.acl",
    "lb": "examples.apps.lb",
}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--apps", required=True, help="comma-separated: router, acl, lb")
    ap.add_argument("--rules")
    ap.add_argument("--lb-rules")
    ap.add_argument("--lb-cookie")
    args = ap.parse_args(argv)
    names = [a for a in args.apps.split(",") if a]
    bad = [a for a in names if a not in APPS]
    if bad:
        ap.error(f"--apps: unknown app {bad[0]!r} (known: {', '.join(APPS)})")
    from examples.apps import common, lb

    for env, v in ((common.RULES_ENV, args.rules), (lb.RULES_ENV, args.lb_rules)):
        if v:
            os.environ[env] = v
    if args.lb_cookie is not None:
        os.environ[lb.COOKIE_ENV] = args.lb_cookie

    from os_ken import cfg
    from os_ken.lib import hub

    hub.patch(thread=False)
    cfg.CONF(
        args=["--ofp-tcp-listen-port", str(args.port), "--ofp-listen-host", "127.0.0.1"],
        project="os_ken",
    )
    from examples.controller_app import serve

    serve([APPS[a] for a in names])


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    main()
