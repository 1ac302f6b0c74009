"""devsy: dev environments from devcontainer.json on Docker or MicroSandbox microVMs."""

from devsy.deferred_modules import defer_unused_imports

defer_unused_imports()  # before any devsy module imports grpc: see deferred_modules.py
