"""bertlab: see and train BERT (and ALBERT, ELECTRA, DistilBERT, RoBERTa, DeBERTa) end to end, on a laptop CPU."""
from . import family
from .checkpoint import DEFAULT_MODEL_DIR, load_model, load_pretrained, save_pretrained
from .config import PRESETS, BertConfig, preset
from .model import BertForPreTraining, BertModel, BertOutput
from .tokenizer import BPETokenizer, SubwordTokenizer, WordPieceTokenizer

__all__ = ["BertConfig", "PRESETS", "preset", "BertForPreTraining", "BertModel", "BertOutput",
           "WordPieceTokenizer", "SubwordTokenizer", "BPETokenizer", "family", "DEFAULT_MODEL_DIR", "load_model", "load_pretrained", "save_pretrained"]
__version__ = "0.1.0"
