"""The workflow types Baton ships, and the demo services their activities call."""
