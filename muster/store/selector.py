"""Parsing label selectors as ``-l`` and ``?labelSelector=`` take them.

The grammar is Kubernetes': requirements joined by commas, each one of ``key``, ``!key``,
``key=value`` (or ``==``), ``key!=value``, ``key in (v1,v2)``, ``key notin (v1,v2)``.
Commas inside parentheses belong to the value set. Errors name the position and what was
expected, so a typo in ``-l`` is easy to fix.
"""

from __future__ import annotations

import re

from muster.store.base import LabelSelector
from muster.store.errors import InvalidSelector

__all__ = ["SELECTOR_PATTERN", "InvalidSelector", "format_selector", "parse_selector"]

# A label key: optional DNS-subdomain prefix and '/', then a name of alphanumerics, '-', '_', '.'.
_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")

# The whole grammar as one regular expression, for the OpenAPI document (JSON Schema reads it
# as Python does). The parser gives the precise errors; a selector it accepts must also match
# this (which only adds: parts are separated by spaces, not tabs or line breaks), so the
# declared format and the server agree on every selector the format refuses.
_NAME_RE = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY_RE = rf"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?{_NAME_RE}"
_VALUE_RE = rf"(?:{_NAME_RE})?"
_SET_RE = rf"\( *{_VALUE_RE}(?: *, *{_VALUE_RE})* *\)"
_REQUIREMENT_RE = rf" *(?:! *{_KEY_RE}|{_KEY_RE}(?: *(?:==|=|!=) *{_VALUE_RE}| +(?:in|notin) *{_SET_RE})?) *"
SELECTOR_PATTERN = rf"^(?: *|{_REQUIREMENT_RE}(?:,{_REQUIREMENT_RE})*)$"
_SELECTOR = re.compile(SELECTOR_PATTERN)


def parse_selector(text: str | None) -> LabelSelector | None:
    """Parse ``text``; an empty or None selector means "everything" and returns None."""
    if text is None or not text.strip():
        if text and not _SELECTOR.fullmatch(text):
            raise InvalidSelector(f"invalid label selector {text!r}: {_SPACES_ONLY}")
        return None
    selector = _Parser(text).parse()
    if not _SELECTOR.fullmatch(text):
        raise InvalidSelector(f"invalid label selector {text!r}: {_SPACES_ONLY}")
    return selector


_SPACES_ONLY = "only spaces may separate its parts (no tabs or line breaks)"


def format_selector(selector: LabelSelector) -> str:
    """The canonical text of ``selector`` (parses back to an equal selector)."""
    parts = [f"{k}={v}" for k, v in sorted(selector.equals.items())]
    parts += [f"{k}!={v}" for k, v in sorted(selector.not_equals.items())]
    parts += [f"{k} in ({','.join(sorted(vs))})" for k, vs in sorted(selector.in_.items())]
    parts += [f"{k} notin ({','.join(sorted(vs))})" for k, vs in sorted(selector.not_in.items())]
    parts += sorted(selector.exists)
    parts += [f"!{k}" for k in sorted(selector.not_exists)]
    return ",".join(parts)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m:  # only trailing whitespace is left
                break
            self.tokens.append((m.group(1), m.start(1)))
            pos = m.end()
        self.i = 0
        self.equals: dict[str, str] = {}
        self.not_equals: dict[str, str] = {}
        self.in_: dict[str, frozenset[str]] = {}
        self.not_in: dict[str, frozenset[str]] = {}
        self.exists: set[str] = set()
        self.not_exists: set[str] = set()

    def parse(self) -> LabelSelector:
        while True:
            self._requirement()
            if self._peek() is None:
                break
            self._expect(",")
        return LabelSelector(
            equals=self.equals,
            not_equals=self.not_equals,
            in_=self.in_,
            not_in=self.not_in,
            exists=frozenset(self.exists),
            not_exists=frozenset(self.not_exists),
        )

    def _requirement(self) -> None:
        if self._peek() == "!":
            self._next()
            self.not_exists.add(self._key())
            return
        key = self._key()
        op = self._peek()
        if op in (None, ","):
            self.exists.add(key)
        elif op in ("=", "=="):
            self._next()
            self._add_equals(key, self._value())
        elif op == "!=":
            self._next()
            self._add_not_in(key, frozenset([self._value()]), single=True)
        elif op == "in":
            self._next()
            values = self._value_set()
            # `a in (x), a in (y)` needs both: keep the intersection.
            self.in_[key] = self.in_[key] & values if key in self.in_ else values
        elif op == "notin":
            self._next()
            self._add_not_in(key, self._value_set())
        else:
            self._fail(f"expected one of '=', '==', '!=', 'in', 'notin' or ',' after key '{key}'")

    def _add_equals(self, key: str, value: str) -> None:
        if key in self.equals and self.equals[key] != value:
            raise InvalidSelector(
                f"invalid label selector {self.text!r}: {key} cannot equal both "
                f"{self.equals[key]!r} and {value!r}, so nothing would match"
            )
        self.equals[key] = value

    def _add_not_in(self, key: str, values: frozenset[str], single: bool = False) -> None:
        # A lone `a!=x` stays in not_equals; several exclusions of one key merge into not_in.
        if single and key not in self.not_equals and key not in self.not_in:
            self.not_equals[key] = next(iter(values))
            return
        excluded = values | self.not_in.pop(key, frozenset())
        if key in self.not_equals:
            excluded |= {self.not_equals.pop(key)}
        self.not_in[key] = excluded

    def _value_set(self) -> frozenset[str]:
        self._expect("(")
        values: set[str] = set()
        while True:
            if self._peek() == ")" and not values:
                self._fail("expected at least one value")
            values.add(self._value())
            tok = self._next_or_fail("expected ',' or ')'")
            if tok == ")":
                return frozenset(values)
            if tok != ",":
                self._fail("expected ',' or ')'", back=1)

    def _key(self) -> str:
        tok = self._next_or_fail("expected a label key")
        if not _KEY.match(tok) or len(tok.rpartition("/")[0]) > 253:
            self._fail(
                f"{tok!r} is not a valid label key (an optional DNS prefix and '/', then at most 63 "
                "letters, digits, '-', '_' or '.', starting and ending with a letter or digit)",
                back=1,
            )
        return tok

    def _value(self) -> str:
        tok = self._peek()
        if tok in (None, ",", ")"):
            return ""  # an empty value is legal: `a=` selects a="" labels
        self._next()
        if not _VALUE.match(tok):
            self._fail(
                f"{tok!r} is not a valid label value (at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit)",
                back=1,
            )
        return tok

    def _peek(self) -> str | None:
        return self.tokens[self.i][0] if self.i < len(self.tokens) else None

    def _next(self) -> str | None:
        tok = self._peek()
        self.i += 1
        return tok

    def _next_or_fail(self, expected: str) -> str:
        tok = self._next()
        if tok is None:
            self._fail(f"{expected} but the selector ended")
        return tok  # type: ignore[return-value]

    def _expect(self, want: str) -> None:
        tok = self._next()
        if tok != want:
            self._fail(f"expected '{want}'", back=1)

    def _fail(self, why: str, back: int = 0) -> None:
        idx = self.i - back
        pos = self.tokens[idx][1] if 0 <= idx < len(self.tokens) else len(self.text)
        raise InvalidSelector(f"invalid label selector {self.text!r} at position {pos}: {why}")
