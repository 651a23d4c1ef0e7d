"""bertlab's web app. `python app.py` serves on 127.0.0.1:7860 (GRADIO_SERVER_NAME/PORT override)."""
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from functools import lru_cache  # noqa: E402

import gradio as gr  # noqa: E402
import torch  # noqa: E402

from bertlab import load_pretrained  # noqa: E402
from bertlab.ui import fill_mask_tab  # noqa: E402


@lru_cache(maxsize=1)
def default_model():
    return load_pretrained()


def build_app() -> gr.Blocks:
    with gr.Blocks(title="bertlab: see and train BERT") as demo:
        gr.Markdown("# bertlab\nSee and train BERT end to end, on a laptop CPU.")
        with gr.Tab("Fill-mask"):
            fill_mask_tab.build(default_model)
    return demo


if __name__ == "__main__":
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    default_model()  # load before the first visitor arrives
    build_app().queue(default_concurrency_limit=4).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
