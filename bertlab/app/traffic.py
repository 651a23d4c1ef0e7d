"""Fair shares of the web server for strangers: queue lanes and an upload rate, per client.

Gradio's queue holds at most `max_size` waiting events from everyone, in one count: a client that sent
64 probes in 0.2 s filled it, and the class's fill-mask calls got HTTP 503 for a minute. `guard_queue`
checks each new event before Gradio queues it:

- one browser session (`session_hash`) has at most `per_session` events waiting, one address
  (the client as uvicorn reads it, behind trusted proxies only) at most `per_address`;
- heavy events (those with a concurrency limit of 1 or 2: training starts, probes, measurements) fill
  at most half of the queue, so the cheap views always keep a lane.

`ClientAddress` is the ASGI middleware that says who the client is behind trusted proxies (uvicorn's own
reading took the left-most X-Forwarded-For entry, which the client writes).

`UploadGuard` is the ASGI middleware for `/gradio_api/upload`: one address sends at most `mb_per_hour`
megabytes an hour (and at most a quarter of the folder), and the upload folder holds at most `total_mb`
(`keep_swept` ages files out, whoever stored them). Both answer 429 / 507 with a sentence, not a
stored file. It notes who sent each stored file (`VisitorCookie`'s cookie, else the address), and
`check_owner` refuses another browser's upload.
"""
from __future__ import annotations

import collections
import contextlib
import ipaddress
import json
import os
import secrets
import tempfile
import threading
import time
from pathlib import Path

from starlette.responses import JSONResponse

from .quota import Window, folder_bytes, sweep

HEAVY_LIMIT = 2  # an event whose concurrency limit is this or lower is heavy


def client_of(request) -> str:
    client = getattr(request, "client", None)
    return getattr(client, "host", None) or "unknown"


def is_heavy(fn) -> bool:
    limit = getattr(fn, "concurrency_limit", None)
    return isinstance(limit, int) and limit <= HEAVY_LIMIT


def waiting(queue) -> list:
    """The events Gradio holds that have not started."""
    return [e for q in list(queue.event_queue_per_concurrency_id.values()) for e in list(q.queue)]


def refusal(queue, fn, session: str | None, address: str, per_session: int, per_address: int) -> str | None:
    """Why this client may not queue one more event of `fn` now, or None."""
    held = waiting(queue)
    if session and sum(e.session_hash == session for e in held) >= per_session:
        return (f"This page already has {per_session} requests waiting: wait for them to finish, "
                f"then try again.")
    if sum(client_of(e.request) == address for e in held) >= per_address:
        return (f"Your network already has {per_address} requests waiting on this server: wait for them "
                f"to finish, then try again.")
    if is_heavy(fn) and queue.max_size and sum(is_heavy(e.fn) for e in held) >= queue.max_size // 2:
        return ("The server is busy with long requests (training, probes, measurements): try this one again "
                "in a minute. The other tabs keep working meanwhile.")
    # Fair shares: past half full, an address may hold only its share of the other half (the half
    # divided among the addresses waiting). Eight flooding addresses filled all 64 places, and 102 of
    # 137 honest fill-mask calls got HTTP 503; now they stop at their share and a newcomer always fits.
    if queue.max_size and len(held) >= queue.max_size // 2:
        by_address = collections.Counter(client_of(e.request) for e in held)
        share = max(1, (queue.max_size // 2) // len(by_address.keys() | {address}))
        if by_address[address] >= share:
            return (f"The server is busy and your network has {by_address[address]} requests waiting, its share "
                    f"for now: wait for them to finish, then try again.")
    return None


def guard_queue(demo, per_session: int, per_address: int):
    """Wrap the queue's `push` with the per-client and per-lane checks; returns `demo`. Call after
    `demo.queue(...)`, which makes a new queue."""
    queue = demo._queue  # Gradio has no public hook for refusing an event before it is queued
    push = queue.push

    async def guarded(body, request, username):
        fn = None
        if body.fn_index is not None:
            fn = demo.fns.get(body.fn_index)
        if fn is not None:
            why = refusal(queue, fn, body.session_hash, client_of(request), per_session, per_address)
            if why is not None:
                return False, why, "queue_full"
        return await push(body, request, username)

    queue.push = guarded
    return demo


class ClientAddress:
    """ASGI middleware: scope["client"] becomes the visitor's address when the connection comes from a
    trusted proxy (BERTLAB_TRUSTED_PROXIES).

    Each proxy appends the address it was reached from to X-Forwarded-For, so only the right-hand
    entries are the proxies' own; whatever sits left of them the client wrote. With "*" (a Space: one
    platform proxy in front) the client is the right-most entry; with a list of addresses or networks,
    the first entry from the right that is not one of them. With none trusted (the default off a
    Space), X-Forwarded-For is ignored."""

    def __init__(self, app, trusted: str):
        self.app, parts = app, [p.strip() for p in trusted.split(",") if p.strip()]
        self.one_hop = "*" in parts
        self.networks = [ipaddress.ip_network(p, strict=False) for p in parts if p != "*"]

    def trusts(self, host: str) -> bool:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(ip in n for n in self.networks)

    def client(self, peer: str, forwarded: str) -> str:
        """Who the client is, from the connecting `peer` and the X-Forwarded-For header's value."""
        if not (self.one_hop or self.trusts(peer)):
            return peer
        hops = [h.strip() for h in forwarded.split(",") if h.strip()]
        if not hops:
            return peer
        if self.one_hop:
            return hops[-1]
        for h in reversed(hops):
            if not self.trusts(h):
                return h
        return hops[0]

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and (self.one_hop or self.networks) and scope.get("client"):
            headers = [v.decode("latin-1") for k, v in scope.get("headers") or [] if k == b"x-forwarded-for"]
            host = self.client(scope["client"][0], ",".join(headers))
            if host != scope["client"][0]:
                scope = {**scope, "client": (host, 0)}
        return await self.app(scope, receive, send)


def upload_dir() -> Path:
    """Where Gradio stores uploads (GRADIO_TEMP_DIR, else <tmp>/gradio)."""
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio")


def keep_swept(max_age_s: float, folder=upload_dir) -> threading.Thread:
    """Sweep the upload folder (quota.sweep) now and then every `max_age_s / 4` (at most 10 min), in a
    daemon thread."""
    def loop():
        while True:
            sweep(folder(), max_age_s)
            time.sleep(max(1.0, min(600.0, max_age_s / 4)))
    t = threading.Thread(target=loop, name="bertlab-upload-sweep", daemon=True)
    t.start()
    return t


class UploadGuard:
    """ASGI middleware: uploads count against their address's hourly megabytes, which is at most a
    quarter of the folder's total (two addresses filled a 300 MB folder, then everyone got 507 for an
    hour), and the folder's total."""

    def __init__(self, app, mb_per_hour: float, total_mb: float, window_s: float = 3600.0, clock=time.monotonic,
                 folder=upload_dir):
        self.app, self.mb_per_hour, self.total_mb, self.window_s = app, mb_per_hour, total_mb, window_s
        self.folder = folder
        self.share_mb = min(mb_per_hour, total_mb / 4)  # one address's megabytes within the window
        self.sent = Window(window_s, clock)  # megabytes per address

    def charge(self, address: str, mb: float) -> str | None:
        """Count `mb` against `address`, or say why not."""
        if (used := self.sent.take(address, mb, self.share_mb)) is None:
            return None
        return (f"You have uploaded {used:.0f} MB in the last hour; this server takes "
                f"{self.share_mb:g} MB an hour from one network. Try again later.")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST" or not scope.get("path", "").endswith("/upload"):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        try:
            mb = int(headers.get(b"content-length", b"")) / 1e6
        except ValueError:
            mb = None
        address = (scope.get("client") or ("unknown",))[0]
        if mb is None:
            why, code = "An upload must say its size (Content-Length).", 411
        elif folder_bytes(self.folder()) / 1e6 + mb > self.total_mb:
            why, code = ("The server's upload space is full for now: try again in a while, or use a smaller "
                         "file."), 507
        else:
            why, code = self.charge(address, mb), 429
        if why is None:
            return await self.app(scope, receive, self._recording(scope, send))
        await JSONResponse({"detail": why}, status_code=code)(scope, receive, send)

    def _recording(self, scope, send):
        """`send`, reading the stored paths off Gradio's answer to note who uploaded them (OWNERS)."""
        body, ok = [], [False]
        key = uploader(scope)

        async def sending(message):
            if message["type"] == "http.response.start":
                ok[0] = message.get("status") == 200
            elif message["type"] == "http.response.body" and ok[0]:
                body.append(message.get("body", b""))
                if not message.get("more_body"):
                    with contextlib.suppress(ValueError):
                        paths = json.loads(b"".join(body))
                        OWNERS.add([p for p in paths if isinstance(p, str)] if isinstance(paths, list) else [], key)
            await send(message)
        return sending


# ---- who may use an upload --------------------------------------------------------------------------

COOKIE = "bertlab-visitor"


def _cookie(headers) -> str | None:
    for k, v in headers or []:
        if k == b"cookie":
            for part in v.decode("latin-1").split(";"):
                name, _, value = part.strip().partition("=")
                if name == COOKIE and 16 <= len(value) <= 64 and value.isalnum():
                    return value
    return None


def uploader(scope) -> str:
    """Who made a request, for uploads: its browser's cookie (VisitorCookie), else its address (a
    client that keeps no cookies, such as gradio_client, or a page in a frame that gets none)."""
    return _cookie(scope.get("headers")) or "address:" + (scope.get("client") or ("unknown",))[0]


class VisitorCookie:
    """ASGI middleware: a browser without the visitor cookie gets one (random, HttpOnly), so its uploads
    and its later calls can be matched: an upload is usable only by the browser that sent it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or _cookie(scope.get("headers")) is not None:
            return await self.app(scope, receive, send)
        value = secrets.token_hex(16)

        async def sending(message):
            if message["type"] == "http.response.start":
                cookie = f"{COOKIE}={value}; Path=/; Max-Age=31536000; HttpOnly; SameSite=Lax"
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode())]}
            await send(message)
        return await self.app(scope, receive, sending)


class UploadOwners:
    """Stored upload paths and who sent each (a bounded table: the oldest entries go first; the files
    themselves are swept by age)."""

    def __init__(self, capacity: int = 20_000):
        self.capacity, self._lock = capacity, threading.Lock()
        self._owners: collections.OrderedDict[str, set] = collections.OrderedDict()

    def add(self, paths: list[str], key: str) -> None:
        with self._lock:
            for p in paths:
                self._owners.setdefault(os.path.realpath(p), set()).add(key)
                self._owners.move_to_end(os.path.realpath(p))
            while len(self._owners) > self.capacity:
                self._owners.popitem(last=False)

    def owns(self, path: str, key: str) -> bool:
        with self._lock:
            return key in self._owners.get(os.path.realpath(path), ())


OWNERS = UploadOwners()


def check_owner(path) -> None:
    """Inside a web call: refuse an uploaded file that this browser did not upload (knowing a path was
    enough to use another visitor's file). Outside one (the CLI, a test calling a form) it passes."""
    from gradio.context import LocalContext
    request = LocalContext.request.get(None)
    if request is None or not path:
        return
    scope = getattr(getattr(request, "request", None), "scope", None)
    if scope is None:  # not expected in a web call; fall back on the address, never on no check
        scope = {"headers": [], "client": (client_of(request),)}
    if not OWNERS.owns(str(path), uploader(scope)):
        raise ValueError("that file was not uploaded from this page (or the server restarted since): "
                         "upload it again")
