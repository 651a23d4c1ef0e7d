"""README.md's front matter is the Space's settings: what it asks Hugging Face to install and run must
be what the suite tested (issue 30, item 9: without python_version a Space may run another Python)."""
import re
import sys
from pathlib import Path

import gradio

ROOT = Path(__file__).resolve().parent.parent


def _front_matter() -> dict:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert m, "README.md starts with the Space's front matter"
    return {k.strip(): v.strip().strip('"') for k, v in (line.split(":", 1) for line in m.group(1).splitlines())}


def test_the_space_runs_the_python_and_gradio_the_suite_ran():
    card = _front_matter()
    assert card["python_version"] == f"{sys.version_info.major}.{sys.version_info.minor}", card
    assert card["sdk"] == "gradio" and card["sdk_version"] == gradio.__version__, card
    assert (ROOT / card["app_file"]).exists()
