"""ELECTRA's pre-training (Clark et al. 2020): a small generator learns masked-LM, its samples replace
the masked tokens, and the discriminator learns at every position whether the token is the original.
Loss = generator MLM + λ · discriminator BCE (λ = 50 in the paper). The two models share their
embeddings; the discriminator is the model kept for fine-tuning, the generator is saved beside it.

Both train as one module (`ElectraPair`), so the shared Trainer checkpoints, resumes and evaluates
them as it does any model; sampling draws from torch's global RNG, which checkpoints hold.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..checkpoint import load_weights, write_model_files
from ..config import BertConfig
from ..model import BertOutput
from ..variants.electra import ElectraForMaskedLM, ElectraForPreTraining, share_embeddings

GENERATOR = "generator"  # the generator's folder inside a checkpoint or a run


def generator_config(disc: BertConfig, size: float) -> BertConfig:
    """The generator: the discriminator's depth, vocabulary and embeddings, `size` times its width.
    Heads shrink with the width so every head keeps the discriminator's head size."""
    head = disc.hidden_size // disc.num_attention_heads
    heads = max(1, round(disc.num_attention_heads * size))
    return disc.replace(hidden_size=heads * head, num_attention_heads=heads,
                        intermediate_size=max(1, round(disc.intermediate_size * size)),
                        embedding_size=disc.embedding_dim)


class ElectraPair(nn.Module):
    """Generator + discriminator sharing one embeddings module; `forward` computes ELECTRA's loss.
    Another member's pair (a record's `trainer`: DeBERTa-v3's) overrides `build`, and where its saved
    discriminator differs from the one training, `folded`, `save` and `load`."""

    def __init__(self, config: BertConfig, generator_size: float = 0.25, rtd_weight: float = 50.0):
        super().__init__()
        self.config, self.rtd_weight = config, rtd_weight
        # discriminator first: checkpoints name shared tensors after it
        self.discriminator, self.generator = self.build(config, generator_size)

    def build(self, config, generator_size):
        """(discriminator, generator): ELECTRA's share the whole embeddings scope."""
        disc = ElectraForPreTraining(config)
        gen = ElectraForMaskedLM(generator_config(config, generator_size))
        share_embeddings(gen, disc)
        return disc, gen

    def folded(self):
        """A context in which the discriminator holds the weights it is saved with (ELECTRA's: as they are)."""
        return contextlib.nullcontext()

    def save(self, folder: Path, tokenizer) -> None:
        """The discriminator where a model folder's files go, the generator in `generator/` (both load in
        transformers)."""
        with self.folded():
            write_model_files(folder, self.discriminator, tokenizer)  # files first: it fsyncs what iterdir lists
        (folder / GENERATOR).mkdir(exist_ok=True)
        write_model_files(folder / GENERATOR, self.generator, tokenizer)

    def load(self, folder: Path) -> None:
        load_weights(self.discriminator, folder)
        load_weights(self.generator, folder / GENERATOR)

    def corrupt(self, input_ids, labels, mlm_logits, generator=None):
        """Sampled tokens in place of the masked ones; labels 1 where the token differs from the
        original (a sample that happens to be the original counts as original, as in the paper)."""
        keep = labels.ne(-100)  # (B, T)
        probs = F.softmax(mlm_logits.detach().float(), -1)  # (N, V)
        fake = input_ids.clone()
        fake[keep] = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        original = torch.where(keep, labels, input_ids)
        return fake, fake.ne(original).long()  # (B, T) each

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None,
                next_sentence_label=None, sparse_mlm=True, output_attentions=False, sample_generator=None,
                **_) -> BertOutput:
        """With MLM `labels`: loss, mlm_loss/mlm_logits (generator, sparse), rtd_logits/rtd_labels/
        rtd_loss (discriminator on the corrupted input). Without: the discriminator on the input."""
        if next_sentence_label is not None:
            raise ValueError("ELECTRA has no sentence-pair task: use objective mlm")
        if labels is None:
            return self.discriminator(input_ids, token_type_ids, attention_mask, output_attentions)
        g = self.generator(input_ids, token_type_ids, attention_mask, labels=labels, sparse_mlm=True)
        fake, replaced = self.corrupt(input_ids, labels, g.mlm_logits, sample_generator)
        d = self.discriminator(fake, token_type_ids, attention_mask, output_attentions, labels=replaced)
        d.mlm_logits, d.mlm_loss, d.rtd_loss, d.rtd_labels = g.mlm_logits, g.mlm_loss, d.loss, replaced
        d.nsp_loss = None
        d.loss = g.mlm_loss + self.rtd_weight * d.rtd_loss
        return d


def rtd_stats(logits: torch.Tensor, replaced: torch.Tensor, keep: torch.Tensor, lazy: bool = False) -> dict:
    """Discriminator accuracy over all kept tokens and over replaced ones, and the ROC AUC of its
    logit as a "replaced?" score (the chance a replaced token scores above an original one).
    `lazy`: 0-d tensors on the logits' device (NaN where undefined: no replaced or no original token),
    so a training step never waits to read them; else floats, leaving out what is undefined."""
    k = keep.flatten()
    s, y = logits.flatten().float(), replaced.flatten().bool() & k  # (B*T,): masks, not indexing (no sync)
    n_keep = k.sum()
    p = y.sum().double()
    n = n_keep.double() - p
    out = {"rtd_acc": (((s > 0) == y) & k).sum().double() / n_keep, "replaced_share": p / n_keep,
           "rtd_recall": ((s > 0) & y).sum().double() / p}
    order = torch.where(k, s, torch.finfo(s.dtype).min).argsort()  # padding ranks below every kept token
    ranks = torch.empty_like(s, dtype=torch.float64)
    ranks[order] = torch.arange(1, len(s) + 1, dtype=torch.float64, device=s.device)
    ranks = ranks - (len(s) - n_keep).double()  # ranks among the kept tokens only
    out["rtd_auc"] = ((ranks * y).sum() - p * (p + 1) / 2) / (p * n)
    if lazy:
        return out
    return {key: float(v) for key, v in out.items() if torch.isfinite(v)}


def compute_loss(model: ElectraPair, batch):
    out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], labels=batch["labels"])
    with torch.no_grad():  # tensors, read once per log row
        y = batch["labels"][batch["labels"] != -100]
        m = {"mlm_loss": out.mlm_loss.detach(), "mlm_acc": (out.mlm_logits.argmax(-1) == y).float().mean(),
             "rtd_loss": out.rtd_loss.detach()}
        m.update(rtd_stats(out.rtd_logits, out.rtd_labels, batch["attention_mask"].bool(), lazy=True))
    return out.loss, m


def evaluate_pair(model: ElectraPair, batches, top_unigram: int) -> dict[str, float]:
    """Held-out generator MLM and discriminator detection on fixed masks and fixed samples."""
    dev = next(model.parameters()).device
    sample = torch.Generator(dev).manual_seed(4321)
    n = loss = correct = uni = 0.0
    logits, flags, keeps = [], [], []
    for b in batches:
        b = {k: v.to(dev) for k, v in b.items()}
        out = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], labels=b["labels"],
                    sample_generator=sample)
        y = b["labels"][b["labels"] != -100]
        loss += float(out.mlm_loss) * len(y)
        correct += float((out.mlm_logits.argmax(-1) == y).sum())
        uni += float((y == top_unigram).sum())
        n += len(y)
        logits.append(out.rtd_logits.flatten())
        flags.append(out.rtd_labels.flatten())
        keeps.append(b["attention_mask"].bool().flatten())
    res = {"mlm_loss": loss / n, "mlm_acc": correct / n, "unigram_acc": uni / n}
    return res | rtd_stats(torch.cat(logits), torch.cat(flags), torch.cat(keeps))


def save_pair(folder: Path, pair: ElectraPair, tokenizer) -> None:
    """(write_model_files's order of arguments: the Trainer's on_save.)"""
    pair.save(folder, tokenizer)


def load_pair(pair: ElectraPair, folder: Path) -> None:
    pair.load(folder)
