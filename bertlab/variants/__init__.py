"""ALBERT, ELECTRA, DistilBERT, RoBERTa and DeBERTa: one plain file each, reusing model.py where their keys are BERT's."""
