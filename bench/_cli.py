"""What the benchmark scripts share besides timing: the ``run --out FILE`` /
``report FILE`` command line, and the package versions a run records."""

from __future__ import annotations

import argparse
import json
import sys


def versions(dists) -> dict:
    """The installed version of each distribution in ``dists`` that is installed."""
    from importlib import metadata

    found = {}
    for dist in dists:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return found


def main(doc: str, add_arguments, run, report, argv=None,
         add_report_arguments=None) -> None:
    """``run --out FILE [options]``: ``run(args)`` written to FILE as JSON and
    ``report(data)`` printed, exiting non-zero where a row's ``ok`` is False;
    ``report FILE``: the report of a saved run. ``add_arguments(parser)`` adds the
    options of ``run``. With ``add_report_arguments(parser)``, the options it adds
    (a chart's path, say) are taken by both ``report`` and ``run``, and the report
    is ``report(data, args)``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    add_arguments(r)
    rep = sub.add_parser("report")
    rep.add_argument("file")
    if add_report_arguments is not None:
        add_report_arguments(r)
        add_report_arguments(rep)

    def text(data):
        return report(data) if add_report_arguments is None else report(data, args)

    args = parser.parse_args(argv)
    if args.command == "report":
        with open(args.file) as f:
            print(text(json.load(f)))
        return
    data = run(args)
    with open(args.out, "w") as f:
        json.dump(data, f, indent=1)
    print(text(data))
    if not all(row.get("ok", True) for row in data.get("rows", ())):
        sys.exit("a result disagrees with its reference")
