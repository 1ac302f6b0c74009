"""The conformance suite: every case of shared/PROTOCOL.md, runnable against any provider executable."""
