from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from muster.store import InvalidSelector, LabelSelector, format_selector, parse_selector


class TestParseSelector:
    def test_every_operator(self):
        sel = parse_selector("a=b,c!=d,e in (x, y),f notin (z),g,!h,i==j")
        assert sel == LabelSelector(
            equals={"a": "b", "i": "j"},
            not_equals={"c": "d"},
            in_={"e": frozenset({"x", "y"})},
            not_in={"f": frozenset({"z"})},
            exists=frozenset({"g"}),
            not_exists=frozenset({"h"}),
        )

    @pytest.mark.parametrize("text", [None, "", "   "])
    def test_empty_selects_everything(self, text):
        assert parse_selector(text) is None

    def test_prefixed_keys_and_empty_values(self):
        sel = parse_selector("muster.dev/queue=team-a,kueue.x-k8s.io/queue-name=,app")
        assert sel is not None
        assert sel.equals == {"muster.dev/queue": "team-a", "kueue.x-k8s.io/queue-name": ""}
        assert sel.exists == {"app"}

    def test_repeated_exclusions_combine(self):
        sel = parse_selector("a!=x,a!=y,a notin (z)")
        assert sel is not None
        assert sel.not_in == {"a": frozenset({"x", "y", "z"})}
        assert not sel.not_equals

    def test_repeated_in_intersects(self):
        sel = parse_selector("a in (x,y),a in (y,z)")
        assert sel is not None and sel.in_ == {"a": frozenset({"y"})}

    @pytest.mark.parametrize(
        ("text", "fragment"),
        [
            ("a in x", "expected '('"),
            ("a in (x", "expected ',' or ')' but the selector ended"),
            ("a in ()", "expected at least one value"),
            ("a=b,", "expected a label key but the selector ended"),
            ("a b", "expected one of '=', '==', '!=', 'in', 'notin' or ','"),
            ("-a=b", "'-a' is not a valid label key"),
            ("a=b c", "at position 4: expected ','"),
            ("a=-x", "'-x' is not a valid label value"),
            ("a=b,a=c", "a cannot equal both 'b' and 'c'"),
            ("!", "expected a label key but the selector ended"),
        ],
    )
    def test_errors_say_where_and_why(self, text, fragment):
        with pytest.raises(InvalidSelector) as info:
            parse_selector(text)
        assert fragment in str(info.value)
        assert repr(text) in str(info.value)

    def test_position_points_at_the_bad_token(self):
        with pytest.raises(InvalidSelector, match="at position 6"):
            parse_selector("a=b,c d")


class TestMatches:
    @pytest.mark.parametrize(
        ("text", "labels", "expected"),
        [
            ("a=b", {"a": "b"}, True),
            ("a=b", {"a": "c"}, False),
            ("a=b", {}, False),
            ("a!=b", {}, True),  # a missing label is "not b"
            ("a!=b", {"a": "b"}, False),
            ("a in (x,y)", {"a": "y"}, True),
            ("a in (x,y)", {}, False),
            ("a notin (x,y)", {}, True),
            ("a notin (x,y)", {"a": "x"}, False),
            ("a", {"a": ""}, True),
            ("!a", {"a": ""}, False),
            ("!a", {"b": "1"}, True),
            ("a=1,b in (2,3),!c", {"a": "1", "b": "3"}, True),
            ("a=1,b in (2,3),!c", {"a": "1", "b": "3", "c": "x"}, False),
        ],
    )
    def test_semantics(self, text, labels, expected):
        sel = parse_selector(text)
        assert sel is not None and sel.matches(labels) is expected


_names = st.from_regex(r"\A[a-z][a-z0-9]{0,5}\Z")


@given(
    equals=st.dictionaries(_names, _names, max_size=3),
    in_=st.dictionaries(_names, st.frozensets(_names, min_size=1, max_size=3), max_size=2),
    exists=st.frozensets(_names, max_size=2),
)
def test_format_parses_back(equals, in_, exists):
    sel = LabelSelector(equals=equals, in_=in_, exists=exists)
    empty = not (equals or in_ or exists)
    assert parse_selector(format_selector(sel)) == (None if empty else sel)
