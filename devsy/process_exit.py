"""The end of a devsy process (a command, a provider): what it skips because the process is about to end anyway."""

from __future__ import annotations

import gc


def skip_final_collection() -> None:
    """Let the interpreter's exit skip the garbage collection of every object that exists now.

    At exit Python collects garbage before tearing its modules down: memory that the end of the process frees
    anyway. With gRPC loaded that collection takes 25-40 ms, which `devsy status` on an external provider paid
    twice (the provider's exit is on the command's path too: it waits for it). gc.freeze() moves every tracked
    object to the permanent generation, which no collection visits. Nothing else changes: atexit handlers run,
    streams are flushed, and objects freed by reference counting are finalized as before. Only an object in a
    reference cycle is no longer finalized at exit; devsy closes what it opens rather than leave that to a collector.
    """
    gc.freeze()
