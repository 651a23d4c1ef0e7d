"""Tools that look at a BERT from outside: sizing arithmetic, predictions, attention views."""
