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


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "data",
        help="fetch the published MBPP and HotpotQA files into a cache",
        description=f"files go to {data.DATA_ENV} or ~/.cache/mulligan/data; "
        "`--data PATH` on run/bench/tasks never downloads",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("action", choices=["fetch", "list"])
    parser.add_argument("names", nargs="*", help=f"{', '.join(data.DATASETS)} (default: all)")
    parser.set_defaults(handler=cmd_data)
