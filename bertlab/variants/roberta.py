"""RoBERTa (Liu et al. 2019): BERT's architecture trained longer, on more text, with dynamic masking
and no next-sentence task. Two things differ in the model itself:

* position ids come from the token ids, fairseq's way: real tokens are numbered pad_token_id + 1,
  + 2, ... and padding gets pad_token_id (whose row stays zero), so a 512-token model has 514
  position rows (config.position_offset says how many are never used);
* the masked-LM head is `lm_head` (dense, gelu, layer_norm, tied decoder) and there is no NSP head.

The encoder is BERT's (bertlab.model.BertEncoder, keys `roberta.encoder.`); names are Hugging Face's
RobertaModel / RobertaForMaskedLM keys.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import BertConfig
from ..model import ACT, BertEmbeddings, BertModel, BertOutput, init_weights, pretraining_heads


def position_ids(input_ids, pad_token_id: int, past: int = 0):
    """(B, T) positions: pad_token_id + 1, + 2, ... over the non-pad tokens, pad_token_id on pads
    (after `past` positions taken by prefix tuning's virtual tokens, as transformers counts them)."""
    real = input_ids.ne(pad_token_id).long()  # (B, T)
    return (real.cumsum(dim=1) + past) * real + pad_token_id


class RobertaEmbeddings(BertEmbeddings):
    def __init__(self, c: BertConfig):
        super().__init__(c)
        self.pad_token_id = c.pad_token_id
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size,
                                                padding_idx=c.pad_token_id)

    def forward(self, input_ids, token_type_ids, prompt=None, past: int = 0):  # (B, T) each
        """As BERT's; with a prompt every position is numbered in turn, pads included, as transformers
        numbers the input vectors peft hands it (the pads are masked out anyway)."""
        pos = position_ids(input_ids, self.pad_token_id, past)  # (B, T)
        x = self.word_embeddings(input_ids)
        if prompt is not None:
            n = prompt.size(0)
            x = torch.cat([prompt.to(x.dtype).expand(x.size(0), -1, -1), x], dim=1)  # (B, P + T, E)
            token_type_ids = F.pad(token_type_ids, (n, 0))
            pos = torch.arange(x.size(1), device=x.device)[None] + self.pad_token_id + 1  # (1, P + T)
        x = x + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(pos)
        return self.dropout(self.LayerNorm(x))  # (B, T, H)


class RobertaModel(BertModel):
    """BertModel (same forward, encoder, pooler) with RoBERTa's embeddings."""
    Embeddings = RobertaEmbeddings


class RobertaLMHead(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.act = ACT["gelu"]  # always gelu, whatever hidden_act says (as HF's)
        self.layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.decoder = nn.Linear(c.hidden_size, c.vocab_size, bias=False)  # weight tied to word embeddings
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))

    def forward(self, h):  # (..., H)
        x = self.layer_norm(self.act(self.dense(h)))
        return F.linear(x, self.decoder.weight, self.bias)  # (..., V)


class RobertaForMaskedLM(nn.Module):
    """Encoder (no pooler, as HF's RobertaForMaskedLM) + masked-LM head; no next-sentence head."""
    base_model_prefix = "roberta"
    tied_keys = ("lm_head.decoder.weight", "lm_head.decoder.bias")  # HF's decoder.bias is lm_head.bias
    head_names = {"lm_head.": "masked-LM head"}

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.roberta = RobertaModel(config, add_pooling_layer=False)
        self.lm_head = RobertaLMHead(config)
        self.lm_head.apply(lambda m: init_weights(m, config))
        self.tie_weights()

    def tie_weights(self):
        self.lm_head.decoder.weight = self.roberta.embeddings.word_embeddings.weight

    def token_logits(self, h):
        """Vocabulary logits (..., V) from final hidden states (..., H)."""
        return self.lm_head(h)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_attentions=False,
                output_hidden_states=False, labels=None, next_sentence_label=None,
                sparse_mlm=False, causal=False) -> BertOutput:
        """`sparse_mlm` with `labels`: logits only where labels != -100 (same loss, less work)."""
        if next_sentence_label is not None:
            raise ValueError("RoBERTa has no next-sentence head: next_sentence_label cannot be used")
        out = self.roberta(input_ids, token_type_ids, attention_mask, output_attentions,
                           output_hidden_states, causal)
        return pretraining_heads(out, self.lm_head, self.config.vocab_size, labels, sparse_mlm)
