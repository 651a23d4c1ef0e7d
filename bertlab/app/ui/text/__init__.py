"""The text views: what a BERT does to the student's own sentence (tokens, masking, fill-mask, next sentence, attention, embeddings)."""
