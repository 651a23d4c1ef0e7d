"""ALBERT, ELECTRA, DistilBERT and RoBERTa: one plain file each, reusing model.py where their keys are BERT's."""
