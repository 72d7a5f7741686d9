"""The install steps of docs/operations.md, run verbatim in a temporary root."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.tools import require_tool

REPO = Path(__file__).resolve().parents[2]


def install_script() -> str:
    doc = (REPO / "docs" / "operations.md").read_text()
    section = doc[doc.index("## Install\n") :]
    return re.search(r"```\n(.*?)```", section, re.S).group(1)


def test_install_steps_work_verbatim(tmp_path):
    require_tool("systemd-sysusers", "systemd")
    root, checkout, bin_dir = tmp_path / "root", tmp_path / "opt-pazz", tmp_path / "bin"
    for d in (root, checkout, bin_dir):
        d.mkdir()
    shutil.copytree(REPO / "deploy", checkout / "deploy")
    prefix = tmp_path / "ovs-3.1-test"
    calls = tmp_path / "calls"
    # Stand-ins for what the test must not do: build (make) and touch the host's systemd.
    (bin_dir / "make").write_text(f"""#!/bin/sh
echo "make $*" >> {calls}
mkdir -p .venv/bin {prefix}/bin
printf '#!/bin/sh\\nPYTHONPATH={REPO} exec {sys.executable} -m pazzd.cli "$@"\\n' > .venv/bin/pazzctl
chmod +x .venv/bin/pazzctl
printf '#!/bin/sh\\n' > {prefix}/bin/ovs-ofctl && chmod +x {prefix}/bin/ovs-ofctl
echo {prefix} > .ovs-prefix
""")
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "systemctl $*" >> {calls}\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    script = install_script()
    # Every system path is under $ROOT: the test must not install into this machine.
    code = "\n".join(line.split("#", 1)[0] for line in script.splitlines())
    assert not re.search(r"(?<!\$ROOT)(?<![\w.])/(etc|usr|var|run|lib|opt)\b", code), code
    env = {**os.environ, "ROOT": str(root), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    p = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "deploy/pazzd.yaml" not in p.stderr
    assert f"{root}/etc/pazz/pazzd.yaml: OK" in p.stdout
    assert re.search(r"^pazz:x:\d+:\d+:", (root / "etc/passwd").read_text(), re.M)
    assert re.search(r"^pazz:x:\d+:", (root / "etc/group").read_text(), re.M)
    assert (root / "etc/systemd/system/pazzd.service").read_text() == (
        REPO / "deploy/pazzd.service"
    ).read_text()
    assert (root / "etc/pazz/topology.yaml").exists()
    # The default ovs.bin_dir, /opt/pazz/ovs/bin, is the patched build once installed.
    assert (checkout / "ovs").resolve() == prefix and (checkout / "ovs/bin/ovs-ofctl").exists()
    assert calls.read_text().splitlines() == [
        "make venv ovs",
        "systemctl daemon-reload",
        "systemctl enable --now pazzd",
    ]


def test_shipped_config_passes_check_config():
    p = subprocess.run(
        [sys.executable, "-m", "pazzd.cli", "check-config", str(REPO / "deploy/pazzd.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    from pazzd.config import DEFAULT_OVS_BIN_DIR, load_config

    cfg = load_config(REPO / "deploy/pazzd.yaml")
    assert cfg.ovs.bin_dir == DEFAULT_OVS_BIN_DIR == "/opt/pazz/ovs/bin"
