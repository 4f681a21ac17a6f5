"""`mulligan data ...`: the published benchmark files in the local cache."""

from __future__ import annotations

import argparse

from mulligan import data


def cmd_data(args: argparse.Namespace) -> int:
    if args.action == "fetch":
        for name in args.names or list(data.DATASETS):
            path, downloaded = data.fetch(name)
            print(f"{name}: {path} ({'downloaded, sha256 ok' if downloaded else 'cached'})")
        return 0
    for name, published in data.DATASETS.items():
        found = data.cached(name)
        print(f"{name:<9} {'cached' if found else 'not fetched':<12} {found or published.url}")
        print(f"{'':<9} {published.what}")
    return 0
