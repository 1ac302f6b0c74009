"""SSH flow-control sizes shared by the agent (server) and devsy's client; measured with ci/bench_ssh.py.

paramiko's defaults (2 MiB window, 32 KiB packets) follow OpenSSH. Both ends here are Python, where the cost is per
packet rather than per byte, so larger packets and a window of several packets in flight move bulk data faster.
An OpenSSH client still gets its own (smaller) sizes: each side announces what it accepts.
"""

WINDOW_SIZE = 16 * 1024 * 1024
MAX_PACKET_SIZE = 256 * 1024
# What the client offers first. AES-GCM is one AEAD call per packet (no separate Python-level HMAC).
CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "aes128-ctr", "aes256-ctr")
KEX = ("curve25519-sha256@libssh.org", "ecdh-sha2-nistp256")
HOST_KEY_TYPES = ("ssh-ed25519",)
# Reads from a channel take everything buffered: paramiko's channel buffer drops what was read with a memmove of
# the rest, so reading it in small pieces costs time proportional to the backlog on every read.
CHANNEL_READ_SIZE = WINDOW_SIZE
# Reads from pipes and terminals: one read becomes one SSH packet, so read up to a packet's worth (pipes are
# enlarged to 1 MiB where the kernel allows it; a default pipe holds 64 KiB).
PIPE_READ_SIZE = MAX_PACKET_SIZE
