"""The Gradio app: one module per tab; each calls the backend and never the reverse."""
