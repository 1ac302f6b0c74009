"""The command that keeps an instance alive when devcontainer.json overrides the image's own command.

It exits at once on SIGTERM (so `stop` is quick) and `sleep & wait` lets the trap run immediately.
"""

KEEP_ALIVE_ENTRYPOINT = ["/bin/sh"]
KEEP_ALIVE_ARGS = ["-c", 'echo "devsy: container started"\ntrap "exit 0" TERM INT\nwhile sleep 1000 & wait $!; do :; done']
