"""The Runtime Protocol host adapter: a Driver backed by an external provider executable."""
