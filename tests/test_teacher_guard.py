"""Who the client is, and the teacher's token (issue 30, item 7; issue 41, holes 3 and 5).

uvicorn believed X-Forwarded-For from 127.0.0.1 and took its left-most entry, which the client writes:
a guesser rotating the header was never limited, on a Space too. And five wrong tokens from any student
behind the teacher's router locked the teacher out. Now the client is the entry the trusted proxy
added, wrong tries from one address slow down, and the right token always passes."""
import time

import pytest
from browser import serving

from bertlab.app.traffic import ClientAddress

TOKEN = "the-teachers-own-secret-0123456789"


def test_the_client_is_the_entry_the_trusted_proxy_added():
    none, space, listed = ClientAddress(None, ""), ClientAddress(None, "*"), ClientAddress(None, "10.0.0.0/8, 192.0.2.1")
    # no proxy trusted (a laptop, a lab server): the header is the client's own words
    assert none.client("198.51.100.4", "10.1.2.3") == "198.51.100.4"
    # a Space: one platform proxy, which appends the address it was reached from (the right-most entry);
    # what the client wrote sits to its left
    assert space.client("10.16.3.80", "10.1.2.3, 203.0.113.7") == "203.0.113.7"
    assert space.client("10.16.3.80", "203.0.113.7") == "203.0.113.7"
    assert space.client("10.16.3.80", "") == "10.16.3.80"
    # listed proxies: the first entry from the right that is not one of them; a stranger's connection
    # is not believed at all
    assert listed.client("10.0.0.5", "1.2.3.4, 203.0.113.7, 10.2.0.1") == "203.0.113.7"
    assert listed.client("192.0.2.1", "203.0.113.9") == "203.0.113.9"
    assert listed.client("198.51.100.4", "203.0.113.9") == "198.51.100.4"
    assert listed.client("10.0.0.5", "not-an-ip, 10.0.0.6") == "not-an-ip"  # a made-up name: still one key


@pytest.mark.slow
def test_behind_a_space_proxy_a_guesser_is_one_address_and_slows_down(tmp_path):
    from gradio_client import Client
    from gradio_client.exceptions import AppError
    env = {"BERTLAB_CLASSROOM": "1", "BERTLAB_TEACHER_TOKEN": TOKEN, "BERTLAB_TRUSTED_PROXIES": "*"}
    with serving(["app.py"], tmp_path, env) as (url, log):
        def client(forwarded):  # as the Space's proxy forwards it: what the client wrote, then its address
            return Client(url, verbose=False, analytics_enabled=False, download_files=False,
                          headers={"X-Forwarded-For": forwarded})
        said, waited = [], []
        for i in range(7):
            t0 = time.monotonic()
            with pytest.raises(AppError) as e:
                client(f"10.1.2.{i}, 203.0.113.7").predict(token=f"guess-{i}", confirm=True, api_name="/class_clear")
            said.append(str(e.value))
            waited.append(time.monotonic() - t0)
        assert all("not this server's teacher token" in s for s in said), said
        # one address whatever the client wrote: the 6th and 7th wrong answers waited 1 s and 2 s (a
        # lower bound, which a busy machine cannot break)
        assert waited[5] >= 1.0 and waited[6] >= 2.0, waited
        # the teacher behind the same router is heard: past the token, to the tick it asks for
        with pytest.raises(AppError, match="Tick 'delete them for good'"):
            client("203.0.113.7").predict(token=TOKEN, confirm=False, api_name="/class_clear")
    assert "Traceback" not in log.read_text(errors="replace")


def test_which_proxies_are_believed(monkeypatch):
    from bertlab.app.limits import limits
    monkeypatch.delenv("BERTLAB_TRUSTED_PROXIES", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert limits().trusted_proxies == ""  # a laptop or a lab server: no one names their own address
    monkeypatch.setenv("SPACE_ID", "someone/bertlab")
    assert limits().trusted_proxies == "*"  # a Space is reached only through Hugging Face's proxy
    monkeypatch.setenv("BERTLAB_TRUSTED_PROXIES", "10.0.0.5, 192.168.0.0/16")
    assert limits().trusted_proxies == "10.0.0.5, 192.168.0.0/16"
    for bad in ("proxy.example.org", "10.0.0.0/33"):
        monkeypatch.setenv("BERTLAB_TRUSTED_PROXIES", bad)
        with pytest.raises(ValueError, match="BERTLAB_TRUSTED_PROXIES"):
            limits()
