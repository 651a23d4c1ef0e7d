"""Visitor ids the server issues: a random nonce and its HMAC under the server's secret.

A run belongs to the id of the browser that started it, and the per-visitor caps hang on that id. The
id travels in the page's requests (a gr.BrowserState), so a visitor could send any string: when any
string was an id, a made-up one owned nothing and got fresh caps. Now only an id this server minted
counts, and one address gets at most BERTLAB_NEW_IDS_PER_HOUR new ones (a class behind one router opens
one each, once).

The secret is BERTLAB_SECRET, else a random one kept in the runs folder (`.secret`, mode 600), so ids
outlive a restart.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path

from .quota import Window

PREFIX = "v1."
SECRET_FILE = ".secret"
WINDOW_S = 3600.0


def secret(root: Path) -> bytes:
    """BERTLAB_SECRET, else the runs folder's own secret (made once, readable by the server's user only)."""
    if env := os.environ.get("BERTLAB_SECRET", "").strip():
        return env.encode()
    path = Path(root) / SECRET_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another thread made it meanwhile
            time.sleep(0.05)
            return path.read_bytes()
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        return path.read_bytes()


def _mac(key: bytes, nonce: str) -> str:
    return hmac.new(key, f"bertlab-visitor:{nonce}".encode(), hashlib.sha256).hexdigest()[:32]


def new_id(root: Path) -> str:
    nonce = secrets.token_hex(16)
    return f"{PREFIX}{nonce}.{_mac(secret(root), nonce)}"


def valid_id(owner, root: Path) -> bool:
    """Did this server mint `owner`? (Constant-time: a guess learns nothing from the time.)"""
    if not isinstance(owner, str) or not owner.startswith(PREFIX) or len(owner) != len(PREFIX) + 65:
        return False
    nonce, _, mac = owner[len(PREFIX):].partition(".")
    return hmac.compare_digest(mac.encode(), _mac(secret(root), nonce).encode())


MINTS = Window(WINDOW_S)  # new ids per address: MINTS.take(address, 1, per_hour) is None while allowed
