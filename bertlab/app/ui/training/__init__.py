"""The training tabs: pre-train, fine-tune, distil, race, the class chart, and the job manager's page side."""
