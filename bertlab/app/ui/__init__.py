"""The Gradio app, grouped by what a student sees: text/ (what a BERT does to a sentence), training/
(pre-train, fine-tune, distil, race, the class chart), labs/ (architecture, scaling, probing), lessons/
(the course), and shared/ (what every tab uses). One module per tab or view; each calls the backend
and never the reverse."""
