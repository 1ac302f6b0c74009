"""Generated bindings of devsy/runtime/proto/devsy/runtime/v1/runtime.proto (python -m devsy.runtime.proto.generate)."""
