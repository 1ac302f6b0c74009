"""The Runtime Protocol's .proto sources (under devsy/runtime/proto/) and the generator of their Python bindings."""
