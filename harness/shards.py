"""`python -m harness shards`: the CI shard matrix (GitHub Actions `strategy.matrix` JSON) from the manifest.

One shard per named suite (`--named` / `--named-file`, default: every suite of the manifest), plus a catch-all
shard that runs every suite *not* named (`--devsy-suites-except`), resolved again against the manifest when it
runs: a suite added to the manifest but not to the named list lands in the catch-all instead of silently dropping
out. A named suite the manifest lacks (a stale list) is an error here, before any runner starts.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.catalogue import DEFAULT_MANIFEST, Manifest, ManifestError, load_manifest

CATCH_ALL = "catch-all"


@dataclass(frozen=True)
class Shard:
    shard: str  # the job's name
    select: str  # pytest arguments selecting its suites
    suites: str  # the suites it runs with the manifest as it is now (for display; the run resolves `select` itself)


def plan(manifest: Manifest, named: list[str]) -> list[Shard]:
    """One shard per named suite (in catalogue order), then the catch-all; raises ManifestError on a bad list."""
    duplicates = sorted({name for name in named if named.count(name) > 1})
    if duplicates:
        raise ManifestError(f"suite(s) named twice in the shard list: {', '.join(duplicates)}")
    rest = manifest.select_suites(exclude=tuple(named)) if named else tuple(manifest.suite_names())
    ordered = [name for name in manifest.suite_names() if name in named]
    shards = [Shard(name, f"--devsy-suite {name}", name) for name in ordered]
    shards.append(Shard(CATCH_ALL, f"--devsy-suites-except {','.join(ordered)}" if ordered else "",
                        ",".join(rest or ())))
    return shards


def read_named(path: Path) -> list[str]:
    """Suite names, one per line; `#` starts a comment."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness shards", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--named", default=None, help="comma-separated suites that get their own shard")
    group.add_argument("--named-file", type=Path, default=None, help="file listing them, one per line")
    parser.add_argument("--manifest", default=DEFAULT_MANIFEST, help="manifest module or .py path")
    args = parser.parse_args(argv)
    try:
        manifest = load_manifest(args.manifest)
        if args.named_file is not None:
            named = read_named(args.named_file)
        elif args.named is not None:
            named = [name.strip() for name in args.named.split(",") if name.strip()]
        else:
            named = manifest.suite_names()
        shards = plan(manifest, named)
    except (ManifestError, OSError) as exc:
        print(f"shards: {exc}", file=sys.stderr)
        return 2
    catch_all = shards[-1]
    print(f"shards: {len(shards) - 1} named; catch-all runs: {catch_all.suites or '(nothing yet)'}", file=sys.stderr)
    print(json.dumps({"include": [asdict(shard) for shard in shards]}))
    return 0
