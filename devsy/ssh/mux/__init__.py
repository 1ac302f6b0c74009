"""The workspace's SSH master and its clients: one connection per workspace, many sessions over a unix socket.

`master` serves sessions; `client` is what `devsy ssh` runs; `protocol` is the framing between them; `spawn` starts
a master; `liveness` pings and replaces a wedged one; `processes` finds masters by their command line.
"""
