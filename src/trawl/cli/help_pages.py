"""``--help`` pages with options grouped by topic (`trawl.options.Group`).

In a `TopicCommand`, options outside the option table (a command's own) come first under
"Options", then one section per topic in the table's order, ``--help`` under
"Operations". Help text wraps at spaces
only, so that an option named in it (``--max-pages-per-host``) is never split.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

import click

from trawl.options import Group, group_of


class TopicFormatter(click.HelpFormatter):
    """click's formatter, wrapping help text without breaking words at hyphens.

    ``terms_width``, when set, is the width of the term column of every list, so that
    the sections of one page line up.
    """

    terms_width: int | None = None

    def write_dl(
        self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        """Write ``rows`` as a definition list: each term, then its text wrapped beside it
        (or below it, for a term wider than the term column)."""
        rows = list(rows)
        widest = self.terms_width or max(len(term) for term, _ in rows)
        # On a narrow terminal the text keeps 40 columns; terms then stand above it.
        first_col = min(widest, col_max, max(self.width - 40 - col_spacing, 4)) + col_spacing
        text_indent = " " * (first_col + self.current_indent)
        for term, text in rows:
            self.write(f"{'':>{self.current_indent}}{term}")
            if len(term) <= first_col - col_spacing:
                self.write(" " * (first_col - len(term)))
            else:
                self.write(f"\n{text_indent}")
            lines = textwrap.wrap(text, max(self.width - first_col - 2, 10), break_on_hyphens=False)
            self.write(f"\n{text_indent}".join(lines) + "\n")


class TopicContext(click.Context):
    """A context whose help pages use `TopicFormatter`."""

    formatter_class = TopicFormatter


class WrappedCommand(click.Command):
    """A command whose help page wraps with `TopicFormatter`."""

    context_class = TopicContext


class TopicCommand(WrappedCommand):
    """A command whose options are listed by topic."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections: dict[Group | None, list[tuple[str, str]]] = {None: []}
        sections.update((group, []) for group in Group)
        help_option = self.get_help_option(ctx)
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and isinstance(param, click.Option):
                group = Group.OPERATIONS if param is help_option else group_of(param.name)
                sections[group].append(record)
        if isinstance(formatter, TopicFormatter):
            formatter.terms_width = max(len(term) for rows in sections.values() for term, _ in rows)
        for group, rows in sections.items():
            if rows:
                with formatter.section("Options" if group is None else group.value):
                    formatter.write_dl(rows)


class TopicGroup(click.Group):
    """The command group; its commands wrap help with `TopicFormatter`."""

    context_class = TopicContext
    command_class = WrappedCommand
