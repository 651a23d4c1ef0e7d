"""DeBERTa-v3's pre-training (He et al. 2021): ELECTRA's replaced-token detection with a half-depth
generator and gradient-disentangled embedding sharing. The model classes are the member's own
(variants/deberta.py); this is how a run trains them, as train/electra.py is ELECTRA's."""
from __future__ import annotations

import contextlib

import torch
from safetensors.torch import load_file, save_file

from ..variants.deberta import DebertaV2ForMaskedLM, DebertaV2ForReplacedTokenDetection, SharedWords
from .electra import ElectraPair


class DebertaPair(ElectraPair):
    """v3's pre-training: ELECTRA's corruption and loss (λ = rtd_weight, the paper's 50) with a generator
    as wide as the discriminator and half as deep (DeBERTaV3's choice for its generator;
    generator_size is ELECTRA's width share, unused here), sharing word vectors through GDES. Saved:
    the discriminator with E_G + E_Δ folded into its table (what transformers loads); checkpoints also
    keep E_Δ itself (DELTA), so a resume continues exactly."""
    DELTA = "embedding_delta.safetensors"

    def build(self, config, generator_size):
        disc = DebertaV2ForReplacedTokenDetection(config)
        gen = DebertaV2ForMaskedLM(config.replace(num_hidden_layers=max(1, config.num_hidden_layers // 2)))
        disc.deberta.embeddings.word_embeddings = SharedWords(gen.deberta.embeddings.word_embeddings)
        return disc, gen

    @property
    def words(self) -> SharedWords:
        return self.discriminator.deberta.embeddings.word_embeddings

    @contextlib.contextmanager
    def folded(self):
        """E_D = E_G + E_Δ in the discriminator's table while it is saved; E_Δ back after."""
        w = self.words.weight
        delta = w.detach().clone()
        with torch.no_grad():
            w.add_(self.words.shared[0].weight)
        try:
            yield
        finally:
            with torch.no_grad():
                w.copy_(delta)

    def save(self, folder, tokenizer) -> None:
        save_file({"delta": self.words.weight.detach().contiguous()}, folder / self.DELTA)  # before: fsynced
        super().save(folder, tokenizer)

    def load(self, folder) -> None:
        super().load(folder)  # the folded table lands in E_Δ's place; the checkpoint's E_Δ replaces it
        with torch.no_grad():
            self.words.weight.copy_(load_file(folder / self.DELTA)["delta"])
