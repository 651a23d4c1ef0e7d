"""The course inside the app: one lesson at a time, with its checks."""
