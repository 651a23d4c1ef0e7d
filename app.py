"""bertlab's web app. `python app.py` serves on 127.0.0.1:7860 (GRADIO_SERVER_NAME/PORT override).

Every view is a stateless function of (model, text), so many students can share one server; the
model choice is per browser session, and loaded models are cached for everyone.
"""
import importlib
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
# Gradio's queue rebuilds a pandas summary of its last 10,000 events after every event by default:
# at a class's rate that was a tenth of the server's CPU. Summarise every 500 events, of the last 2,000.
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "500")
os.environ.setdefault("GRADIO_ANALYTICS_MAX_EVENTS", "2000")

import gradio as gr  # noqa: E402
import torch  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402

from bertlab.app import classroom, serving, traffic  # noqa: E402
from bertlab.app.limits import app_device, device_label, limits  # noqa: E402
from bertlab.app.ui.shared import links, models  # noqa: E402
from bertlab.app.ui.shared.tabs import TABS as TAB_RECORDS  # noqa: E402
from bertlab.app.ui.shared.common import MODEL_ERRORS, quiet_gradio_checks, redraw_open_tab_only, said, user_error, warn  # noqa: E402
from bertlab.app.ui.text import nsp_tab  # noqa: E402
from bertlab.app.ui.training import jobs_ui, pretrain_tab  # noqa: E402

INTRO = """# bertlab
See BERT work on your own sentences. The **Lessons** lead through the tabs from left to right: how
text becomes tokens, how pre-training hides words, what the model guesses, where it looks. Then train
your own: pre-train a small BERT, fine-tune it, and probe what each layer learned."""

# Gradio scopes `css` inside the page's content box; the box's own margins need a plain style sheet.
# Gradio's bundled Source Sans Pro SemiBold, the face its bold text uses, holds 55 glyphs: "C" to "Z"
# came from a fallback font, so "ALBERT" in bold read "ALʙERT". The full Bold file serves weight 600 up.
THEME = gr.themes.Default(font=[gr.themes.LocalFont("Source Sans Pro", weights=(400, 700)), "ui-sans-serif",
                                "system-ui", "sans-serif"])
HEAD = "<style>@media (max-width: 640px) {.gradio-container .main.app {padding: 8px 10px !important}}</style>"
CSS = """
/* a Markdown table too wide for its box scrolls sideways; its words are never cut (the Scaling tables
   read "quantit|y", "parameter|s" on a phone) */
.prose table {display: block; max-width: 100%; overflow-x: auto}
.prose table td, .prose table th {overflow-wrap: normal !important; word-break: normal !important}
/* a phone: the token table's seven columns fit its width (no sort menu, tight cells) */
@media (max-width: 640px) {
  #bl-token-table .cell-menu-button {display: none !important}
  #bl-token-table th, #bl-token-table td, #bl-token-table .cell-wrap {padding-left: 2px !important;
    padding-right: 2px !important; font-size: 13px}
}
#bl-intro h1 {margin: 0 0 6px}
#bl-intro p {margin: 0}
#model-card p {margin: 2px 0 0}
@media (max-width: 640px) {
  #bl-intro h1 {font-size: 1.5rem}
  #bl-intro p {font-size: 0.9rem}
  #bl-tabs [role=tablist] button {padding: 4px 8px}
  .prose table td, .prose table th {padding: 6px 8px !important}
  /* a tab's explanation and examples go under its results: controls, then results, on one screen */
  .bl-form {display: contents}
  .bl-side {order: 10}
}
"""

TABS = [(t.title, importlib.import_module(t.module)) for t in TAB_RECORDS]  # (title, module), from the tabs' records


def pick(choice: str, current: str):
    """(card, model in use, picker): a choice that loads becomes the model every tab uses; one that
    does not leaves the working model in place, says why once, and puts the picker back on it."""
    try:
        return models.describe(choice), choice, gr.update()
    except MODEL_ERRORS as e:
        msg = said(user_error(e))
    msg = msg.rstrip()
    warn(f"{msg}{'' if msg.endswith(('.', '!', '?')) else '.'} Still using {current or models.DEFAULT}.")
    return gr.update(), current, gr.update(value=current)


def refresh():
    return gr.Dropdown(choices=models.choices())


def build_app() -> gr.Blocks:
    # Uploads pile up in Gradio's folder (any number, surviving restarts) unless it deletes them: a
    # started run has its own copy by then (jobs_ui.stage_upload)
    age = limits().upload_age_s
    with gr.Blocks(title="bertlab: see and train BERT", delete_cache=(max(1, min(600, age // 2)), age)) as demo:
        with gr.Row(elem_id="bl-header", equal_height=True):
            with gr.Column(scale=3, min_width=300):
                gr.Markdown(INTRO, elem_id="bl-intro")
            with gr.Column(scale=2, min_width=300):
                folder = "a local folder, " if limits().allow_local_paths else ""
                picker = gr.Dropdown(models.choices(), value=models.DEFAULT, label="Model",
                                     allow_custom_value=True, elem_id="model-picker",
                                     info=f"the shipped model, a run trained here, {folder}or a Hugging Face id")
                card = gr.Markdown(elem_id="model-card")
        # The model every tab reads: it changes only to a choice that loaded, so a typo in the
        # picker is one message, not one error per tab, and the tabs keep working on the last good model.
        model = gr.Textbox(models.DEFAULT, visible="hidden", label="Model in use", elem_id="model-in-use")
        picker.input(pick, [picker, model], [card, model, picker], api_name=False, show_progress="minimal")
        picker.focus(refresh, None, picker, api_name=False)
        demo.load(pick, [picker, model], [card, model, picker], api_name=False)
        jobs_ui.session()  # this browser's id, at the top level: a component inside a closed tab is not mounted
        with gr.Tabs(overflow_behavior="wrap", elem_id="bl-tabs") as tabs:  # on a phone: rows of tabs, none hidden
            for title, tab in TABS:
                with gr.Tab(title, id=links.KEYS[title]):  # the key a link names (?tab=attention)
                    tab.build(model)
        redraw_open_tab_only(tabs, model)
        links.install(demo, tabs, [links.KEYS[title] for title, _ in TABS], picker, model)
    return quiet_gradio_checks(demo)


def check_settings() -> str:
    """The host's BERTLAB_* settings, read once before anything loads: a bad one stops the server with
    one line that names it (no traceback). Returns the device the views and web jobs run on."""
    try:
        limits()
        classroom.check_token_setting()
        return app_device()
    except ValueError as e:
        raise SystemExit(f"bertlab: {e}") from None


def warm_up() -> None:
    """Once the first page is up (not before: a restart on a busy Space serves sooner): load the shipped
    model, which the first visitor would otherwise wait for, and prepare the default recipe's data."""
    try:
        model, tok = models.get(models.DEFAULT)
        # the Next sentence tab's held-out accuracy of the shipped model (~5 s, measured once): the first
        # class to open that tab waited for it, call after call (p95 5.5 s in bench/bench_class.py)
        nsp_tab.measured_accuracy(models.DEFAULT, model, tok)
    except Exception as e:  # noqa: BLE001 -- the views say it again, each with its own message
        print(f"bertlab: the shipped model did not load: {e}", flush=True)
    if limits().warm_cache:  # the default recipe's data, prepared in the background (BERTLAB_WARM_CACHE)
        pretrain_tab.warm_default_recipe()


def main() -> None:
    device = check_settings()
    # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told, and takes its left-most entry, which
    # the client writes: traffic.ClientAddress reads the header instead
    os.environ["FORWARDED_ALLOW_IPS"] = ""
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    print(f"bertlab: models and training jobs run on {device_label(device)} (BERTLAB_DEVICE)", flush=True)
    lim = limits()
    demo = traffic.guard_queue(build_app().queue(default_concurrency_limit=4, max_size=64),
                               lim.queue_per_session, lim.queue_per_address)
    uploads = Middleware(traffic.UploadGuard, mb_per_hour=lim.upload_mb_per_hour, total_mb=lim.uploads_mb)
    serving.patient_start_check(then=warm_up)
    serving.light_sessions()
    address = Middleware(traffic.ClientAddress, trusted=lim.trusted_proxies)  # first: the others read it
    traffic.keep_swept(lim.upload_age_s)  # a killed server's uploads too, whoever stored them
    demo.launch(app_kwargs={"middleware": [address, Middleware(traffic.VisitorCookie), serving.compressed(), uploads]},
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        max_file_size=int(limits().max_upload_mb * 1e6), css=CSS, head=HEAD, theme=THEME,  # Gradio refuses bigger uploads before storing them
        # Gradio kept 10,000 sessions: the least recently used go first, and a page that comes back
        # starts a fresh one
        state_session_capacity=limits().max_sessions)


if __name__ == "__main__":
    main()
