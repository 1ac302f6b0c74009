"""Generated bindings of go-plugin's GRPCController and GRPCStdio services (python -m devsy.runtime.proto.generate)."""
