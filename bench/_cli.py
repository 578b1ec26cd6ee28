"""The benchmark scripts' one command line: subcommands (``run --out FILE``,
``report FILE``, and a study's own), each a :class:`Command`, parsed and
dispatched by :func:`dispatch`; :func:`main` is the usual pair of ``run`` and
``report``."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Callable

from _report import load, save


class UsageError(Exception):
    """A command's arguments that the parser could not check itself (an unknown
    case name): reported as the parser reports its own errors."""


@dataclasses.dataclass
class Command:
    #: ``run(args)``: what the command does; its value is the script's exit status
    run: Callable
    #: ``arguments(parser)``: adds the command's options
    arguments: Callable | None = None
    help: str | None = None


def dispatch(doc: str, commands: dict, argv=None):
    """Parse ``argv`` into one of ``commands`` (name: :class:`Command`) and run it.
    The first line of ``doc`` describes the script."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, command in commands.items():
        p = sub.add_parser(name, **({"help": command.help} if command.help else {}))
        if command.arguments:
            command.arguments(p)
    args = parser.parse_args(argv)
    try:
        return commands[args.command].run(args)
    except UsageError as e:
        parser.error(str(e))


def add_max_log2(parser, default: int) -> None:
    parser.add_argument("--max-log2", type=int, default=default)


def upto(sizes, max_log2: int) -> list:
    """The sizes of ``sizes`` up to ``2**max_log2``."""
    return [n for n in sizes if n <= 2**max_log2]


def with_out(arguments=None, default: str | None = None):
    """``arguments`` (a function that adds options to a parser) with ``--out FILE``
    before them: required, unless it has a ``default``."""
    def add(parser):
        if default is None:
            parser.add_argument("--out", required=True)
        else:
            parser.add_argument("--out", default=default)
        if arguments:
            arguments(parser)

    return add


def run_command(run, report, arguments=None, *, out: str | None = None,
                help: str | None = None, report_args: bool = False) -> Command:
    """``run --out FILE [options]``: ``run(args)`` written to FILE as JSON and
    ``report(data)`` printed (``report(data, args)`` with ``report_args``: a
    report that takes options of its own, a chart's path say), exiting non-zero
    where a row's ``ok`` is False. ``arguments(parser)`` adds the options;
    ``out`` is FILE's default (without one, ``--out`` is required)."""
    def go(args):
        data = run(args)
        save(args.out, data)
        print(report(data, args) if report_args else report(data))
        if not all(row.get("ok", True) for row in data.get("rows", ())):
            sys.exit("a result disagrees with its reference")

    return Command(go, with_out(arguments, out), help)


def report_command(report, *, arg: str = "file", help: str | None = None) -> Command:
    """``report FILE``: the report of a saved run, printed."""
    return Command(lambda args: print(report(load(getattr(args, arg)))),
                   lambda parser: parser.add_argument(arg), help)


def main(doc: str, add_arguments, run, report, argv=None) -> None:
    """``run --out FILE [options]`` (:func:`run_command`) and ``report FILE``
    (:func:`report_command`)."""
    dispatch(doc, {"run": run_command(run, report, add_arguments),
                   "report": report_command(report)}, argv)
