"""The data layer: corpora, pre-training examples, masking, labelled tasks and probe sets."""
