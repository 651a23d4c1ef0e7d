"""The app layer on top of the library: the command line, background jobs, server limits, the web UI."""
