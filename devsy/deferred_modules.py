"""Modules that stay unimported until something reads from them: asyncio and the asyncio halves of grpc.

devsy uses only grpc's synchronous API, but `import grpc` ends by importing `grpc.aio`, which imports asyncio: about
30 of grpc's 58 ms import on a CI runner, paid before a provider can print its handshake line and by every host
command that talks to a provider. grpc_health's `health` module re-exports its asyncio servicer and grpc_status its
asyncio helpers the same way (15 ms each, paid before the first health check and Info). Those modules only name
asyncio at import time; they use it inside functions of their aio APIs.

So `devsy/__init__.py` puts a finder on `sys.meta_path`: an import of one of these names gets a stand-in instead of
the module. The first attribute anyone reads from the stand-in (`asyncio.run`, `grpc.aio.insecure_channel`, a
submodule import) imports the real module, which takes the stand-in's place in `sys.modules` and lends it its
attributes, so a reference taken before (grpc's own `grpc.aio`) keeps working. Code that uses asyncio or grpc.aio
works as before; it pays their import when it first uses them, not when it imports grpc.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import threading
import types

DEFERRED = frozenset({"asyncio", "grpc.aio", "grpc_health.v1._async", "grpc_status._async"})
_lock = threading.RLock()
_importing: set[str] = set()  # names being imported for real: the finder lets those through
_loaded: dict[str, types.ModuleType] = {}  # name -> the real module, once a stand-in has imported it


class DeferredModule(types.ModuleType):
    """Stands in `sys.modules` for a module not imported yet; the first attribute read imports it."""

    def __getattr__(self, attr: str) -> object:  # not typing.Any: typing costs 8 ms to import
        name = self.__name__
        with _lock:  # two threads' first reads import it once
            real = _loaded.get(name)
            if real is None:
                if sys.modules.get(name) is not self:
                    # The import system is still setting the stand-in up (it probes __file__ and the like).
                    raise AttributeError(f"module {name!r} has no attribute {attr!r} (not imported yet)")
                real = _import_for_real(self)
        return getattr(real, attr)


def _import_for_real(stand_in: DeferredModule) -> types.ModuleType:
    name = stand_in.__name__
    del sys.modules[name]
    _importing.add(name)
    try:
        real = importlib.import_module(name)
    except BaseException:
        sys.modules[name] = stand_in  # the next read tries again (and fails the same way)
        raise
    finally:
        _importing.discard(name)
    vars(stand_in).update(vars(real))
    _loaded[name] = real
    return real


class _StandInLoader:
    @staticmethod
    def create_module(spec: importlib.machinery.ModuleSpec) -> DeferredModule:
        return DeferredModule(spec.name)

    @staticmethod
    def exec_module(module: types.ModuleType) -> None:
        pass  # nothing runs until the first attribute read


class DeferringFinder:
    """On `sys.meta_path` first: finds a stand-in for a deferred name, and nothing for any other."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name not in DEFERRED or name in _importing:
            return None
        return importlib.machinery.ModuleSpec(name, _StandInLoader())


def defer_unused_imports() -> None:
    """Install the finder once (a module imported before it stays as it is)."""
    if not any(isinstance(finder, DeferringFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, DeferringFinder())
