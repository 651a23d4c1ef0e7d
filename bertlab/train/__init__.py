"""Training: a model-agnostic loop (loop.py) whose runs are folders a UI can watch (runs.py)."""
from .loop import (
                   TrainArgs,
                   Trainer,
                   init_distributed,
                   load_weights,
                   lr_lambda,
                   param_groups,
                   save_weights,
                   seed_everything,
)
from .runs import (
                   RunLock,
                   append_metrics,
                   checkpoint_dirs,
                   latest_checkpoint,
                   list_runs,
                   read_metrics,
                   read_status,
                   request_stop,
                   stop_requested,
                   write_status,
)

__all__ = ["TrainArgs", "Trainer", "init_distributed", "load_weights", "lr_lambda", "param_groups",
           "save_weights", "seed_everything", "RunLock", "append_metrics", "checkpoint_dirs",
           "latest_checkpoint", "list_runs", "read_metrics", "read_status", "request_stop",
           "stop_requested", "write_status"]
