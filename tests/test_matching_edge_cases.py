"""Answers that once crashed the parser: empty quoted entries."""

from recharness.matching import parse_recommendations


def test_empty_quotes_do_not_crash():
    assert parse_recommendations('""') == []
    assert parse_recommendations('1. ""\n2. "Alien" (1979)') == ["Alien (1979)"]
    assert parse_recommendations("“”") == []
