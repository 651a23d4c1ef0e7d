"""Helpers for test_trainer.py, and the child processes it starts (a run to SIGKILL; DDP ranks).

    python tests/ddp_worker.py kill RUN_DIR          train; hang inside the step-8 checkpoint save
    RANK=r WORLD_SIZE=2 ... python tests/ddp_worker.py ddp OUT_DIR
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bertlab import BertConfig, BertForPreTraining, save_pretrained  # noqa: E402
from bertlab.train import TrainArgs, Trainer, init_distributed, read_metrics  # noqa: E402

VOCAB, T = 50, 12


def tiny_model(seed: int = 0, dropout: float = 0.1, layers: int = 1) -> BertForPreTraining:
    torch.manual_seed(seed)
    return BertForPreTraining(BertConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout))


class TinyBatches:
    """A memorisable task: `pool` fixed sequences, freshly masked each time. Batch k of epoch e is
    drawn from a generator seeded by (seed, rank, e, k), so (epoch, position) is the whole state."""

    def __init__(self, n_batches: int = 8, batch_size: int = 8, pool: int = 4, seed: int = 0,
                 rank: int = 0):
        g = torch.Generator().manual_seed(1234)  # the same pool on every rank
        self.pool = torch.randint(5, VOCAB, (pool, T), generator=g)
        self.nsp = torch.randint(0, 2, (pool,), generator=g)
        self.n_batches, self.batch_size, self.seed, self.rank = n_batches, batch_size, seed, rank
        self.epoch, self.position = 0, 0

    def __iter__(self):
        if self.position >= self.n_batches:
            self.epoch, self.position = self.epoch + 1, 0
        while self.position < self.n_batches:
            g = torch.Generator().manual_seed(hash((self.seed, self.rank, self.epoch, self.position)) % 2**62)
            B = self.batch_size
            idx = torch.randint(0, len(self.pool), (B,), generator=g)
            ids = self.pool[idx].clone()
            attn = torch.ones_like(ids)
            attn[1::2, -2:] = 0  # some padding, so the attention bias is exercised
            ids[attn == 0] = 0
            mask = (torch.rand(ids.shape, generator=g) < 0.25) & (attn == 1)
            mask[:, 1] = True
            self.position += 1
            yield {"input_ids": ids.masked_fill(mask, 4), "token_type_ids": torch.zeros_like(ids),
                   "attention_mask": attn, "labels": torch.where(mask, ids, -100),
                   "next_sentence_label": self.nsp[idx]}

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, s: dict) -> None:
        self.epoch, self.position = s["epoch"], s["position"]


def pretraining_loss(model, b):
    out = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], labels=b["labels"],
                next_sentence_label=b["next_sentence_label"], sparse_mlm=True)
    return out.loss, {"mlm_loss": out.mlm_loss.item(), "nsp_loss": out.nsp_loss.item()}


def kill_args() -> TrainArgs:
    return TrainArgs(steps=12, lr=1e-2, warmup=2, save_every=4, log_every=2, keep_last=3)


def hf_save(model, folder):
    save_pretrained(model, None, folder)


def kill_main(run_dir: str) -> None:
    """Train; inside the step-8 save, after the weights are written, signal the parent and hang."""
    def slow_save(model, folder):
        hf_save(model, folder)
        if Path(folder).name == ".tmp-step-8":
            (Path(run_dir) / "saving").touch()
            time.sleep(120)
    Trainer(tiny_model(), TinyBatches(), kill_args(), run_dir, pretraining_loss, on_save=slow_save).fit()


def ddp_main(out: str) -> None:
    """Per rank: an uninterrupted run A, and a run B stopped at step 10 (by rank 1 alone) then
    resumed to 20. Rank 0 reports whether A == B and how both ranks' parameters compare."""
    import torch.distributed as dist
    torch.set_num_threads(1)
    rank, world = init_distributed()
    args = TrainArgs(steps=20, lr=1e-2, warmup=2, accum=2, log_every=5, save_every=100)
    flat = lambda m: torch.cat([p.detach().flatten() for p in m.parameters()])  # noqa: E731
    a = tiny_model(seed=rank)  # different init per rank: DDP must broadcast rank 0's
    Trainer(a, TinyBatches(rank=rank), args, f"{out}/A", pretraining_loss).fit()
    stop, calls = __import__("threading").Event(), [0]

    def loss_then_stop(model, b):
        calls[0] += 1
        if rank == 1 and calls[0] == 20:  # 2nd micro-batch of step 10
            stop.set()
        return pretraining_loss(model, b)
    st = Trainer(tiny_model(seed=rank), TinyBatches(rank=rank), args, f"{out}/B", loss_then_stop,
                 stop_event=stop).fit()
    b = tiny_model(seed=8)
    st2 = Trainer(b, TinyBatches(rank=rank), args, f"{out}/B", pretraining_loss).fit(resume=True)
    both = [torch.zeros_like(flat(a)) for _ in range(world)]
    dist.all_gather(both, flat(a))
    if rank == 0:
        rows = [r for r in read_metrics(f"{out}/A")[0] if r["split"] == "train"]
        json.dump({"ranks_equal": torch.equal(both[0], both[1]), "resume_exact": torch.equal(flat(a), flat(b)),
                   "stopped": [st["state"], st["step"]], "resumed": [st2["state"], st2["step"]],
                   "losses": [r["loss"] for r in rows], "tokens_per_s": rows[-1]["tokens_per_s"]},
                  open(f"{out}/result.json", "w"))
    dist.barrier()  # both ranks reach teardown together: a peer closing early can abort gloo's threads
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    {"kill": kill_main, "ddp": ddp_main}[sys.argv[1]](sys.argv[2])
