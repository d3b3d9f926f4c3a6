"""The ``trawl`` command line.

Every failure a user can cause ends in one line on stderr and an exit code: 0 done (or a
budget reached), 1 runtime failure, 2 bad usage or config, 3 nothing fetched (the crawl
ended without a single page fetched, every seed failed: one line per failing seed says
why, and how to fix it where there is a fix), 130 interrupted. No traceback reaches the
user.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console

from trawl import __version__, options
from trawl.cli.help_pages import TopicCommand, TopicGroup
from trawl.cli.launch import INTERRUPTED, interrupted
from trawl.cli.seed_report import NOTHING_FETCHED, nothing_fetched, report_lines, seed_failures
from trawl.cli.seeds import check_seeds
from trawl.config import CrawlConfig, RecrawlPass
from trawl.config_file import load_config_file
from trawl.crawl.runner import read_summary, run_crawl
from trawl.errors import CrawlInterrupted, TrawlError, UsageError
from trawl.ops.export import export_items, export_rows
from trawl.ops.logs import configure_logging
from trawl.ops.summary import Summary
from trawl.settings import build_config
from trawl.store.location import StoreLocation, newest_unfinished

_CRAWL_EXAMPLES = """\b
Examples:
  A first crawl, with a contact address in the User-Agent:
    trawl crawl https://example.com/ --contact mailto:me@example.org
  A budgeted crawl; the same command again resumes it:
    trawl crawl https://example.com/ --max-pages 10000 --max-time 3600
  An archive: WARC files and clean text in ./archive:
    trawl crawl https://example.com/ --warc --text --data-dir archive
  A crawl in PostgreSQL, and a worker on another machine:
    trawl crawl https://example.com/ --store postgresql://db/trawl
    trawl worker --store postgresql://db/trawl

\b
Every option can go in a --config TOML file (docs/OPTIONS.md).
Exit codes: 0 done or budget reached, 1 failure, 2 bad usage or config,
3 nothing fetched, 130 interrupted (the same command resumes)."""
_DEMO_DEFAULTS = {"delay": 0.05, "data_dir": "trawl-demo-data"}
"""Where ``trawl demo`` differs from ``trawl crawl``: its site is on loopback."""


def merged_values(ctx: click.Context, params: dict[str, Any]) -> dict[str, Any]:
    """Options given on the command line win over the config file, which wins over defaults."""
    values = dict(params)
    config = values.pop("config", None)
    if config is not None:
        for key, value in load_config_file(Path(config)).items():
            if ctx.get_parameter_source(key) != ParameterSource.COMMANDLINE:
                values[key] = value
    return values


def _stats_interval(values: dict[str, Any]) -> float:
    """The ``--stats-interval`` value, checked."""
    seconds = float(values["stats_interval"])
    if seconds < 0:
        raise UsageError("--stats-interval must not be negative")
    return seconds


def print_summary(summary: Summary, as_json: bool) -> None:
    """Write the summary to stdout as text or JSON."""
    if as_json:
        click.echo(summary.to_json())
    else:
        for line in summary.lines():
            click.echo(line)


def _console(wanted: bool | None) -> Console | None:
    console = Console(stderr=True)
    show = console.is_terminal if wanted is None else wanted
    return console if show else None


def crawl_and_report(config: CrawlConfig, values: dict[str, Any]) -> Summary:
    """Run the crawl, print its summary, and say on stderr which seeds were not fetched
    and why (the caller's :func:`exit_for` gives the exit code)."""
    if config.handlers:
        from trawl.handlers.refs import load_all

        load_all(config.handlers)
    configure_logging(values["log_format"], values["log_level"])
    summary = run_crawl(
        config, _console(values["progress"]), stats_interval=_stats_interval(values)
    )
    if summary.state == "interrupted":
        click.echo(INTERRUPTED, err=True)
    print_summary(summary, bool(values["json"]))
    if summary.state != "interrupted":
        for line in report_lines(asyncio.run(seed_failures(config)), summary):
            click.echo(line, err=True)
    return summary


def exit_for(summary: Summary) -> None:
    """Exit 130 after an interruption, 3 when nothing at all was fetched."""
    if summary.state == "interrupted":
        sys.exit(130)
    if nothing_fetched(summary):
        sys.exit(NOTHING_FETCHED)


@click.group(
    cls=TopicGroup,
    invoke_without_command=True,
    subcommand_metavar="COMMAND [ARGS]...",
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Start with `trawl demo`; `trawl COMMAND --help` shows a command's options.",
)
@click.version_option(__version__, prog_name="trawl")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """trawl: a polite, resumable web crawler."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@cli.command(cls=TopicCommand, params=options.params(), epilog=_CRAWL_EXAMPLES)
@click.pass_context
def crawl(ctx: click.Context, /, **params: Any) -> None:
    """Crawl from SEEDS, http(s) URLs, until done or out of budget.

    Run the same command again to resume; --fresh starts over.
    """
    values = merged_values(ctx, params)
    seeds = tuple(values.pop("seeds") or ())
    if not seeds:
        raise UsageError("give at least one seed URL, e.g. trawl crawl https://example.com/")
    config = build_config(seeds, values)
    check_seeds(seeds, config.url_rules)
    exit_for(crawl_and_report(config, values))


_NEWEST = "Which crawl to join."
_BY_FLAG = {option.flag: option for option in options.OPTIONS}


class JoinCommand(TopicCommand):
    """A command that joins a stored crawl: an option of the crawl's stored policy is
    refused with where its value comes from."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            option = _BY_FLAG.get(exc.option_name)
            if option is None or option.kept is not options.Kept.STORED:
                raise
            raise click.UsageError(
                f"{exc.option_name} is stored with the crawl: trawl {ctx.info_name} takes it "
                "from the store (trawl crawl --store sets it)"
            ) from exc


def _worker_params(*, required: bool = True, which: str = _NEWEST) -> list[click.Parameter]:
    """The options of a command that joins a stored crawl: where it is (``--store``
    ``required``, or else SQLite in the data dir; ``which`` says what ``--crawl`` is)
    and the machine-local options."""
    store = dataclasses.replace(
        options.BY_NAME["store"], required=required,
        help="The PostgreSQL database of the crawl (postgresql://...).",
    )  # fmt: skip
    crawl_name = dataclasses.replace(options.BY_NAME["crawl"], help=which)
    if required:
        crawl_name = dataclasses.replace(
            crawl_name, default=None, shown_default="the newest unfinished one"
        )
    local = [name for name in options.LOCAL_NAMES if name not in ("store", "crawl")]
    return [store.to_click(), crawl_name.to_click(), *options.params(local)]


@cli.command(cls=JoinCommand, params=_worker_params())
def worker(**params: Any) -> None:
    """Join a crawl kept in PostgreSQL and work on it until it is done.

    Scope, politeness, budgets and the rest of the crawl's policy come from the store,
    as `trawl crawl --store` wrote them; only machine-local options are taken here.
    """
    values = crawl.make_context("worker", [], resilient_parsing=True).params
    values.update(params)
    if values["crawl"] is None:
        values["crawl"] = asyncio.run(newest_unfinished(str(values["store"])))
    values["join"] = True
    exit_for(crawl_and_report(build_config((), values), values))


@cli.command(
    cls=JoinCommand, params=_worker_params(required=False, which="Which crawl to recrawl.")
)
@click.option("--all", "every", is_flag=True,
              help="Recrawl every known page, whatever its due time.")  # fmt: skip
def recrawl(every: bool, **params: Any) -> None:
    """Recrawl the pages of a crawl that are due (one pass), then stop.

    Conditional requests (If-None-Match, If-Modified-Since) spare the pages that did not
    change; new links found on changed pages are crawled too. The crawl's policy comes
    from its store, as for `trawl worker`; `--continuous` on the crawl does this forever.
    """
    values = crawl.make_context("recrawl", [], resilient_parsing=True).params
    values.update(params)
    values["join"] = True
    values["recrawl_pass"] = RecrawlPass.ALL if every else RecrawlPass.DUE
    exit_for(crawl_and_report(build_config((), values), values))


STORE_OPTIONS = (
    options.BY_NAME["data_dir"].to_click(),
    dataclasses.replace(
        options.BY_NAME["store"],
        help="The PostgreSQL database of the crawl (default: SQLite in the data dir).",
    ).to_click("dsn"),
    dataclasses.replace(
        options.BY_NAME["crawl"], help="Which crawl in the --store database."
    ).to_click("crawl_name"),
)
"""Where a crawl's state is, for the commands that read it."""


@cli.command(params=[*STORE_OPTIONS])
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def status(data_dir: str, dsn: str | None, crawl_name: str, as_json: bool) -> None:
    """Print the summary of the crawl in the data dir or in --store."""
    location = StoreLocation(Path(data_dir), dsn, crawl_name)
    print_summary(asyncio.run(read_summary(location)), as_json)


@cli.command(params=[*STORE_OPTIONS])
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "jsonl"]),
    default="jsonl",
    show_default=True,
    help="CSV with a header row, or one JSON object a line.",
)
@click.option("--output", "-o", type=click.Path(path_type=Path),
              help="Write here instead of stdout.")  # fmt: skip
@click.option(
    "--items",
    "items",
    is_flag=True,
    help="Write the items page handlers yielded, one row per item, instead of the URLs.",
)
def export(
    data_dir: str, dsn: str | None, crawl_name: str, fmt: str, output: Path | None, items: bool
) -> None:
    """Write one row per known URL, or with --items one per item (csv or jsonl)."""
    location = StoreLocation(Path(data_dir), dsn, crawl_name)
    write = export_items if items else export_rows
    if output is None:
        asyncio.run(write(location, fmt, sys.stdout))
        return
    try:
        with output.open("w", newline="", encoding="utf-8") as handle:
            asyncio.run(write(location, fmt, handle))
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from exc


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("--port", type=int, default=8470, show_default=True, help="Port of the API.")
@click.option("--host", default="127.0.0.1", help="Address to listen on (default: loopback).")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=Path("trawl-crawls"),
    show_default=True,
    help="Where the crawls' data dirs go, one per crawl.",
)
@click.option(
    "--store",
    "dsn",
    metavar="DSN",
    help="Keep the crawls in this PostgreSQL database instead of SQLite.",
)
@click.option(
    "--token",
    envvar="TRAWL_API_TOKEN",
    help="Bearer token every changing request must carry (or TRAWL_API_TOKEN).",
)
@click.argument("crawl_options", nargs=-1, type=click.UNPROCESSED)
def serve(
    port: int,
    host: str,
    data_dir: Path,
    dsn: str | None,
    token: str | None,
    crawl_options: tuple[str, ...],
) -> None:
    """Serve the REST API and operator console for crawls.

    Through it crawls are started, watched, paused, resumed and cancelled.

    CRAWL_OPTIONS (after --) go to every crawl the API starts, e.g.
    `trawl serve -- --concurrency 32 --contact https://example.com/bot`.
    """
    from trawl.ops.api import serve as run_api
    from trawl.ops.crawls import Crawls

    if dsn is not None:
        StoreLocation(data_dir, dsn)  # checks the DSN's form
    run_api(Crawls(data_dir, dsn, crawl_options), host, port, token)


_DEMO_PARAMS = options.params(
    [option.name for option in options.OPTIONS if not option.positional], **_DEMO_DEFAULTS
)


@cli.command(cls=TopicCommand, params=_DEMO_PARAMS)
@click.option(
    "--hosts",
    type=click.IntRange(min=4),
    default=6,
    show_default=True,
    help="Host names in the demo site (at least 4).",
)
@click.option(
    "--pages",
    type=click.IntRange(min=2),
    default=60,
    show_default=True,
    help="Pages per host (at least 2).",
)
@click.pass_context
def demo(ctx: click.Context, /, hosts: int, pages: int, **params: Any) -> None:
    """Serve a generated multi-host site on loopback and crawl it."""
    from trawl.cli.demo import run_demo

    values = merged_values(ctx, params)
    values["fresh"] = True
    exit_for(
        run_demo(hosts, pages, values, lambda seeds, v: crawl_and_report(build_config(seeds, v), v))
    )


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception in ``group`` that is not itself a group."""
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and map every error to one line and an exit code; an
    interruption (Ctrl-C, SIGTERM, or a crawl cancelled by a second one) exits 130 and
    says how to resume."""
    try:
        try:
            cli.main(args=argv, prog_name="trawl", standalone_mode=False)
        except BaseExceptionGroup as group:
            # A task of the crawl failed: report the first failure itself.
            raise _first_leaf(group) from group
    except (click.exceptions.Abort, CrawlInterrupted, KeyboardInterrupt):
        interrupted()
    except click.ClickException as exc:
        click.echo(f"trawl: error: {exc.format_message()}", err=True)
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except TrawlError as exc:
        click.echo(f"trawl: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:
        if os.environ.get("TRAWL_DEBUG"):
            raise
        click.echo(f"trawl: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)
