"""The fake runtime: a conformance fixture provider (not a backend) with misbehaviour modes."""
