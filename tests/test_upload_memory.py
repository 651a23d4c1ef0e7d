"""The web server checks an uploaded labelled file on a sample of its rows; the job encodes the whole
file (issue 30, item 1: one 45 MB CSV took the server from 1,157 to 4,614 MB)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK = """
import os, random, resource, sys
from pathlib import Path
d = Path(sys.argv[1])
csv = d / "big.csv"
rng = random.Random(0)
words = "the film was great bad slow warm acting plot story music end long short".split()
with open(csv, "w") as f:
    f.write("text,label\\n")
    n = 0
    while f.tell() < 20_000_000:
        f.write(" ".join(rng.choice(words) for _ in range(40)) + (",pos\\n" if n % 2 else ",neg\\n"))
        n += 1
from bertlab.app.ui.training import finetune_tab
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
task = next(k for k, v in finetune_tab.TASKS.items() if v == "upload-csv")
finetune_tab.form_spec(model=None, task=task, upload=str(csv), text_column="text", label_column="label",
                       method="lora", epochs=1, lr=0, lora_rank=4, lora_alpha=8, max_examples=50, max_len=64,
                       batch_size=8)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before)
"""


@pytest.mark.slow
def test_checking_a_20_mb_csv_upload_keeps_the_server_small(tmp_path):
    env = {"BERTLAB_RUNS_DIR": str(tmp_path / "runs"), "BERTLAB_MAX_UPLOAD_MB": "100", "PYTHONPATH": str(ROOT),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    grew = float(out.stdout.split()[-1])
    print(f"the form's check of a 20 MB CSV raised the peak RSS by {grew:.0f} MB")
    assert grew < 400, f"{grew:.0f} MB (encoding every row took ~780 MB)"
