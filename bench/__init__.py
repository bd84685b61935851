"""Baton's benchmark suite: `python -m bench` (or `make bench`) measures the engine's hot
path, the sweep and the inbox through their public entry points, each beside a baseline
taken in the same run, and prints a table of figures against their targets."""
