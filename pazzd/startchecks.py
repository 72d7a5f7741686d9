"""What the start needs of the machine, checked whenever the config is read (pazzd's
start, a reload, `pazzctl check-config`), so that a config that passes the check does not
fail at start: the API socket's path and directory, the database's place, the TLS files
as the proxy loads them. Each problem is a ConfigError naming the file, the line and the
key. The checks look at the file system as the user who runs them: run check-config as
pazzd's user (systemd's ExecReload does)."""

from __future__ import annotations

import os
import pwd
import ssl
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from .configread import Reader
from .proxy.proxy import tls_contexts

if TYPE_CHECKING:
    from .config import Config

__all__ = ["UNIX_PATH_MAX", "check_start", "model_socket", "unix_path_problem"]

# sun_path of struct sockaddr_un is 108 bytes, its terminating NUL included.
UNIX_PATH_MAX = 107


def model_socket(api_socket: str) -> str:
    """The tester workers' model socket (pazzd.workers), next to the API socket."""
    return str(Path(api_socket).with_suffix(".model"))


def unix_path_problem(path: str) -> str | None:
    n = len(os.fsencode(path))
    if n <= UNIX_PATH_MAX:
        return None
    return (
        f"{path} is {n} bytes long; a unix socket's path can have at most {UNIX_PATH_MAX} "
        "(108 with its final NUL): choose a shorter one, such as /run/pazz/pazzd.sock"
    )


def _user() -> str:
    uid = os.geteuid()
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _nearest(path: Path) -> tuple[Path, os.stat_result]:
    """The path itself or its nearest ancestor that exists, with its stat. Raises
    PermissionError when a directory on the way cannot be searched."""
    p = path
    while True:
        try:
            return p, p.stat()
        except (FileNotFoundError, NotADirectoryError):
            if p.parent == p:
                raise
            p = p.parent


def _place_problem(directory: Path, what: str) -> str | None:
    """Why `directory` cannot hold what pazzd creates there (None: it can): a file in its
    place or on the way, or no write permission where pazzd would create it."""
    try:
        found, st = _nearest(directory)
    except PermissionError as e:
        return f"cannot look into {e.filename}: permission denied for {_user()}"
    if not stat.S_ISDIR(st.st_mode):
        if found == directory:
            return f"{directory} is not a directory"
        return f"{found} is not a directory, so {directory} cannot be made for {what}"
    if not os.access(found, os.W_OK | os.X_OK):
        if found == directory:
            return f"{directory} is not writable by {_user()}, which must create {what} there"
        return f"{found} is not writable by {_user()}, which must make {directory} there"
    return None


def _world_writable(directory: Path) -> str | None:
    """The directory (or, when it is still to be made, the one it is made in) must not be
    writable by every user: anyone could put their own socket, or lock file, in its place
    (the sticky bit does not stop that before pazzd's first start)."""
    try:
        found, st = _nearest(directory)
    except OSError:
        return None  # reported by _place_problem
    mode = st.st_mode
    if not mode & stat.S_IWOTH:
        return None
    perms = f"mode {stat.S_IMODE(mode):04o}"
    if found == directory:
        return (
            f"{directory} is writable by every user ({perms}): another user could put a "
            "socket of their own in pazzd's place; use a directory that only pazzd's user and group may write, such "
            "as /run/pazz"
        )
    return (
        f"{directory} would be made in {found}, which every user may write ({perms}): "
        "another user could make it first; create it beforehand, writable only by pazzd's "
        "user and group, or use /run/pazz"
    )


def _check_socket(r: Reader, doc, cfg: Config) -> None:
    a = doc.get("api") or {}
    sock = cfg.api.socket
    problem = unix_path_problem(sock)
    if problem is None and cfg.tester.workers > 1:
        p = unix_path_problem(model_socket(sock))
        problem = p and f"the tester workers' model socket {p}"
    d = Path(sock).parent
    problem = problem or _place_problem(d, "the API socket") or _world_writable(d)
    if problem is None:
        try:
            mode = Path(sock).lstat().st_mode
        except OSError:
            mode = None
        if mode is not None and not stat.S_ISSOCK(mode):
            problem = f"{sock}: something other than a socket is there; left alone"
    if problem:
        r.fail(a, "socket", "api.socket", problem)


def _check_database(r: Reader, doc, cfg: Config) -> None:
    db = cfg.database
    if db == ":memory:":
        return
    p = Path(db)
    problem = _place_problem(p.parent, "the database and its journal")
    if problem is None:
        try:
            mode = p.stat().st_mode
        except FileNotFoundError:
            mode = None
        except OSError as e:
            mode, problem = None, f"{db}: {e.strerror}"
        if mode is not None and not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            problem = f"{db} is {kind}, not a database file"
        elif mode is not None and not os.access(p, os.R_OK | os.W_OK):
            problem = f"{db} is not readable and writable by {_user()}"
    if problem:
        r.fail(doc, "database", "database", problem)


def _check_tls(r: Reader, doc, cfg: Config) -> None:
    """The TLS files as the proxy loads them: a key that does not fit its certificate, a
    file that is not PEM."""
    pc = cfg.controller
    if not pc.enabled:
        return
    c = doc.get("controller") or {}
    tries = [("tls", c, "controller.tls", pc.tls, None)]
    tries.append(("upstream_tls", c, "controller.upstream_tls", None, pc.upstream_tls))
    items = c.get("controllers") or []
    for i, ctl in enumerate(pc.controllers):
        if ctl.tls and i < len(items):
            d = f"controller.controllers[{i}].upstream_tls"
            tries.append(("upstream_tls", items[i], d, None, ctl.tls))
    for key, container, dotted, server, client in tries:
        if not (server or client):
            continue
        try:
            tls_contexts(server, client)
        except (ssl.SSLError, OSError) as e:
            r.fail(container, key, dotted, f"cannot load: {e}")


def check_start(r: Reader, doc, cfg: Config) -> None:
    """Everything the start will need of the machine (see the module's docstring)."""
    _check_socket(r, doc, cfg)
    _check_database(r, doc, cfg)
    _check_tls(r, doc, cfg)
