"""Wrong teacher tokens are counted per client, and a client cannot name itself (issue 30, item 7):
uvicorn believed X-Forwarded-For from 127.0.0.1, so a local guesser rotating the header was never
limited; and twenty wrong tokens from anyone locked out the teacher too."""
import pytest
from browser import serving

TOKEN = "the-teachers-own-secret-0123456789"


@pytest.mark.slow
def test_a_guesser_cannot_dodge_the_limit_by_naming_other_addresses(tmp_path):
    from gradio_client import Client
    from gradio_client.exceptions import AppError
    with serving(["app.py"], tmp_path, {"BERTLAB_CLASSROOM": "1", "BERTLAB_TEACHER_TOKEN": TOKEN}) as (url, log):
        said = []
        for i in range(7):
            guesser = Client(url, verbose=False, analytics_enabled=False, download_files=False,
                             headers={"X-Forwarded-For": f"10.1.2.{i}"})
            with pytest.raises(AppError) as e:
                guesser.predict(token=f"guess-{i}", confirm=True, api_name="/class_clear")
            said.append(str(e.value))
        assert all("not this server's teacher token" in s for s in said[:5]), said
        assert all("too many wrong teacher tokens" in s for s in said[5:]), said  # one client, whatever it says
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
    monkeypatch.setenv("BERTLAB_TRUSTED_PROXIES", "proxy.example.org")
    with pytest.raises(ValueError, match="BERTLAB_TRUSTED_PROXIES"):
        limits()
