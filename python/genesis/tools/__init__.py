"""genesis.tools: command-line and debugging tools built on Genesis."""
