"""devsy: dev environments from devcontainer.json on Docker or MicroSandbox microVMs."""
