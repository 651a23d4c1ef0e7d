"""bertlab: see and train BERT end to end, on a laptop CPU."""
from .checkpoint import DEFAULT_MODEL_DIR, load_model, load_pretrained, save_pretrained
from .config import PRESETS, BertConfig, preset
from .model import BertForPreTraining, BertModel, BertOutput
from .tokenizer import WordPieceTokenizer

__all__ = ["BertConfig", "PRESETS", "preset", "BertForPreTraining", "BertModel", "BertOutput",
           "WordPieceTokenizer", "DEFAULT_MODEL_DIR", "load_model", "load_pretrained", "save_pretrained"]
__version__ = "0.1.0"
