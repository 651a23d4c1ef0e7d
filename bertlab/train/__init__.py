"""Training: job specs (specs.py), a model-agnostic loop (loop.py), and runs as folders a UI can watch (runs.py)."""
from ..checkpoint import load_weights, save_weights
from .loop import Trainer, init_distributed, lr_lambda, param_groups
from .runs import (Run, RunLock, append_metrics, checkpoint_dirs, latest_checkpoint, list_runs, read_metrics,
                   read_status, request_stop, seed_everything, stop_requested, write_status)
from .specs import FinetuneSpec, PretrainSpec, ProbeSpec, TrainArgs

__all__ = ["TrainArgs", "PretrainSpec", "FinetuneSpec", "ProbeSpec", "Trainer", "init_distributed", "load_weights",
           "lr_lambda", "param_groups", "save_weights", "seed_everything", "Run", "RunLock", "append_metrics",
           "checkpoint_dirs", "latest_checkpoint", "list_runs", "read_metrics", "read_status", "request_stop",
           "stop_requested", "write_status"]
