"""How the page is served to a class: it starts on a busy machine, its first page travels compressed,
and a visitor who only looks costs the server little memory.

Three of Gradio's defaults are wrong for one server and thirty strangers, each fixed here once:
- launch() asks for its own page with a 3 s time-out and exits when the answer is slower;
- the first page (the whole app's config, ~1.2 MB of JSON inline) is sent uncompressed;
- every new session copies the config of every component (~1.5 MB here), which only Gradio's
  "share this state" button (gr.DeepLinkButton, not used here) ever reads.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from copy import copy

# Pages and their config compress ~10×; streams (server-sent events) must not be buffered, and
# Starlette's GZipMiddleware already passes text/event-stream through untouched.
GZIP_MIN_BYTES = 1000


def patient_start_check(limit_s: float = 900.0, then: Callable[[], None] | None = None):
    """Gradio's launch() asks for its own page once, with a 3 s time-out, and exits ("localhost is not
    accessible") when the answer is slower: on a busy machine (a class server beside a training job, a
    Space restarting) it often is. The server is already listening then, so wait for the page as long as
    it takes to render, say once when it is up, start `then` in the background, and let launch() go on."""
    import urllib.request

    from gradio import networking

    def url_ok(url: str) -> bool:
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit_s:
            try:
                with urllib.request.urlopen(url, timeout=60) as r:
                    if r.status == 200:
                        print(f"bertlab: the page is up at {url} ({time.monotonic() - t0:.1f} s after listening)",
                              flush=True)
                        if then is not None:
                            threading.Thread(target=then, name="bertlab-warm-up", daemon=True).start()
                        return True
            except OSError:  # refused, reset or slow: the server is still starting
                time.sleep(0.5)
        return False
    networking.url_ok = url_ok


def compressed():
    """The middleware that gzips what a browser accepts gzipped: the first page goes from ~1.2 MB to
    ~0.1 MB on the wire. Streams stay unbuffered (Starlette leaves text/event-stream alone)."""
    from starlette.middleware import Middleware
    from starlette.middleware.gzip import GZipMiddleware
    return Middleware(GZipMiddleware, minimum_size=GZIP_MIN_BYTES)


def light_sessions():
    """Each new session costs what it changes, not a copy of every component's config.

    Gradio's SessionState builds `config_values` (one fresh dict per component, ~1.5 MB for this app)
    when a session starts, for the deep-link button alone. Here it starts empty: the values a session
    changes are still recorded there, and a deep link still lists every component (the unchanged ones
    are read from the shared blocks when it is made)."""
    from gradio import state_holder

    base = state_holder.SessionState
    if getattr(base, "bertlab_light", False):
        return

    class LightSession(base):
        bertlab_light = True

        def __init__(self, blocks):
            self.blocks_config = copy(blocks.default_config)
            self._known = blocks.blocks  # the ids Gradio's eager copy covered
            self.config_values = {}
            self.state_data = {}
            self._state_ttl = {}
            self.is_closed = False
            self.STATE_TTL_WHEN_CLOSED = 1 if os.getenv("GRADIO_IS_E2E_TEST", None) else 3600

        @property
        def components(self):
            for k, block in self.blocks_config.blocks.items():
                if k not in self._known:
                    continue
                config = self.config_values.get(k) or self.blocks_config.config_for_block(k, [], block)
                if config:
                    yield config

    state_holder.SessionState = LightSession

