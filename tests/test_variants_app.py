"""Every view on every family member: tiny ALBERT, ELECTRA (discriminator and generator), DistilBERT
and RoBERTa folders, picked by path as a user on their own machine would, through the API and in
Chromium. Each endpoint gives a result or one short message, never a traceback."""
import time

import pytest
import torch
from browser import DESKTOP, WAIT_MS, chromium_page, shot

SKIP = {"/pretrain_start", "/pretrain_stop", "/pretrain_resume", "/pretrain_delete", "/finetune_start",
        "/finetune_stop", "/finetune_compare", "/finetune_delete", "/finetune_try", "/probe"}
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
             max_position_embeddings=64)
TEXT = "the film was great and the plot was fun ."
GIVEN = {"text": TEXT, "position": 3, "query": 3, "word": "film", "answer": "4"}  # where a view has no default


def make(kind: str, folder, wordpiece, bpe):
    from bertlab import family, save_pretrained
    from bertlab.config import BertConfig
    tok = bpe if kind == "roberta" else wordpiece
    extra = {"albert": dict(embedding_size=16), "electra": dict(embedding_size=16), "electra-generator":
             dict(embedding_size=16), "roberta": dict(pad_token_id=tok.pad_token_id, type_vocab_size=1,
                                                      max_position_embeddings=66)}.get(kind, {})
    c = BertConfig(vocab_size=tok.vocab_size, model_type=kind.split("-")[0], **(SMALL | extra))
    torch.manual_seed(0)
    model = family.build(c, ["ElectraForMaskedLM"] if kind == "electra-generator" else [])
    save_pretrained(model, tok, folder)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory, vocab_tokenizer, small_corpus):
    from bertlab.tokenizer import BPETokenizer
    bpe = BPETokenizer.train([str(small_corpus)], vocab_size=400)
    root = tmp_path_factory.mktemp("family")
    return {k: str(make(k, root / k, vocab_tokenizer, bpe))
            for k in ("albert", "electra", "electra-generator", "distilbert", "roberta")}


@pytest.fixture(scope="module")
def family_server(server, plain_app):
    """(url, log): the shared app; its slice of the log is checked by `server`."""
    return server, plain_app[1]


def test_family_folders_load_with_their_own_classes(folders):
    from bertlab import load_pretrained
    names = {}
    for kind, folder in folders.items():
        model, tok = load_pretrained(folder)
        names[kind] = type(model).__name__
        assert model.config.model_type == kind.split("-")[0]
    assert names == {"albert": "AlbertForPreTraining", "electra": "ElectraForPreTraining",
                     "electra-generator": "ElectraForMaskedLM", "distilbert": "DistilBertForMaskedLM",
                     "roberta": "RobertaForMaskedLM"}


@pytest.mark.slow
def test_every_endpoint_on_every_family_member(family_server, folders):
    """Defaults of each view with the model picked by folder: an answer, or one clear message."""
    from gradio_client import Client
    from gradio_client.exceptions import AppError
    url, log = family_server
    client = Client(url, verbose=False, analytics_enabled=False, download_files=False)
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    said, t0 = {}, time.time()
    for kind, folder in folders.items():
        for endpoint, info in api.items():
            params = {p["parameter_name"]: p["parameter_default"] for p in info["parameters"]}
            if endpoint in SKIP or "choice" not in params:
                continue
            params |= {k: v for k, v in GIVEN.items() if k in params and not params[k]}
            start = log.stat().st_size
            try:
                said[kind, endpoint] = client.predict(**{**params, "choice": folder}, api_name=endpoint)
            except AppError as e:
                assert str(e).strip() and len(str(e)) < 600 and "Traceback" not in str(e), (kind, endpoint, e)
                said[kind, endpoint] = e
            assert "Traceback" not in log.read_text(errors="replace")[start:], (kind, endpoint)
    print(f"{len(said)} calls in {time.time() - t0:.0f} s")
    errors = {k: str(v) for k, v in said.items() if isinstance(v, Exception)}
    # Only what a member lacks may fail, and it says so: no masked-LM head in an ELECTRA discriminator.
    assert all(k[0] == "electra" and "masked-LM head" in v for k, v in errors.items()), "\n".join(map(str, errors.items()))
    # ELECTRA's discriminator: Fill-mask shows P(replaced) per token instead of guesses.
    rows = said["electra", "/fill_mask"][1]["replaced_token_detection"]
    assert rows and all(0 <= r["replaced"] <= 1 for r in rows)
    # No pair head: a note, not an error; ALBERT's head is sentence order.
    for kind in ("roberta", "distilbert", "electra"):
        assert "without a sentence-pair task" in said[kind, "/nsp"][1]["notice"]
    assert said["albert", "/nsp"][1]["ranking"]
    # RoBERTa's masks are <mask>; its fill-mask takes [MASK] as typed.
    assert said["roberta", "/fill_mask"][1] and "<mask>" not in said["roberta", "/fill_mask"][1][0][0]["token_str"]


@pytest.mark.slow
def test_family_members_in_the_browser(family_server, folders):
    url, _ = family_server
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(url)
        page.locator("#model-card").get_by_text("default (shipped)").wait_for(timeout=WAIT_MS)
        box = page.get_by_role("combobox", name="Model")
        for kind in ("electra", "roberta"):
            if kind == "roberta":  # a text for a masked-LM again before the switch (else: "No [MASK] in the text")
                page.get_by_role("tab", name="Fill-mask").click()
                page.locator("[role=tabpanel]:visible").first.locator("textarea").first.fill("the film was [MASK] .")
            box.fill(folders[kind])
            box.press("Enter")
            page.locator("#model-card").get_by_text({"electra": "ELECTRA discriminator",
                                                     "roberta": "RoBERTa"}[kind]).wait_for(timeout=WAIT_MS)
            page.get_by_role("tab", name="Fill-mask").click()
            panel = page.locator("[role=tabpanel]:visible").first
            panel.locator("textarea").first.fill("the chef ate the meal ." if kind == "electra" else "the film was [MASK] .")
            panel.get_by_role("button", name="Predict", exact=True).click()
            want = "ELECTRA discriminator" if kind == "electra" else "top guess"
            panel.get_by_text(want).first.wait_for(timeout=WAIT_MS)
            page.wait_for_timeout(1000)
            shot(page, f"family_{kind}_fill_mask.png", full_page=True)
            page.get_by_role("tab", name="Next sentence").click()
            panel = page.locator("[role=tabpanel]:visible").first
            panel.get_by_role("button", name="Rank the B's").click()
            panel.get_by_text("without a sentence-pair task").first.wait_for(timeout=WAIT_MS)
            page.get_by_role("tab", name="Tokenize").click()
            page.wait_for_timeout(1000)
            shot(page, f"family_{kind}_tokenize.png", full_page=True)
            assert page.locator(".toast-body").count() == 0, page.locator(".toast-body").all_inner_texts()
    assert not outside, outside[:5]
    assert not errors, errors


def test_training_refuses_what_it_cannot_train(folders, tmp_path):
    """Fine-tuning takes every discriminative model (not ELECTRA's generator); pre-training continues
    BERT/RoBERTa/ALBERT: the rest is refused clearly."""
    from bertlab.train.finetune import finetune
    from bertlab.train.pretrain import build_model
    from bertlab.train.specs import FinetuneSpec, PretrainSpec
    from bertlab.tokenizer import WordPieceTokenizer
    with pytest.raises(ValueError, match="ELECTRA generator"):
        finetune(tmp_path / "ft", FinetuneSpec(model=folders["electra-generator"], task="sentiment"),
                 log=lambda *_: None)
    tok = WordPieceTokenizer.from_pretrained(folders["distilbert"])
    with pytest.raises(ValueError, match="pre-training continues BERT, RoBERTa and ALBERT models"):
        build_model(PretrainSpec(init_from=folders["distilbert"]), tok)
