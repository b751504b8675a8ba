import math

import pytest
from pydantic_core import PydanticCustomError

from frontier_operator.api.units import Duration, Fraction, Price, Rate, TokenCount, format_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20ms", 0.02), ("1.5s", 1.5), ("5m", 300), ("1h30m", 5400), ("250us", 250e-6), ("2h", 7200)],
)
def test_durations_parse_to_seconds_and_keep_their_text(text: str, seconds: float) -> None:
    duration = Duration.parse(text)
    assert math.isclose(duration, seconds)
    assert str(duration) == text


@pytest.mark.parametrize(
    ("value", "message", "hint"),
    [
        ("20 ms", '"20 ms" is not a duration', "write 20ms"),
        ("fast", '"fast" is not a duration', "write it like 20ms, 1.5s or 5m"),
        (20, "20 has no unit", "write 20ms or 20s"),
        ([20], "[20] is not a duration", "write it like 20ms, 1.5s or 5m"),
        ("0s", '"0s" is not a positive duration', "write a duration above zero, e.g. 20ms"),
        ("-5ms", '"-5ms" is not a duration', "write it like 20ms, 1.5s or 5m"),
    ],
)
def test_bad_durations_say_what_to_write(value: object, message: str, hint: str) -> None:
    with pytest.raises(PydanticCustomError) as caught:
        Duration.parse(value)
    assert caught.value.context == {"message": message, "hint": hint}


@pytest.mark.parametrize(
    ("value", "per_second"), [("40/s", 40), ("2400/min", 40), ("36/h", 0.01), (12, 12), ("7.5", 7.5), (2.5, 2.5)]
)
def test_rates(value: object, per_second: float) -> None:
    assert math.isclose(Rate.parse(value), per_second)


@pytest.mark.parametrize(
    ("value", "tokens"), [("8k", 8000), ("128Ki", 131072), ("1.5k", 1500), (600, 600), ("2M", 2e6)]
)
def test_token_counts(value: object, tokens: int) -> None:
    count = TokenCount.parse(value)
    assert count == tokens
    assert isinstance(count, int)


@pytest.mark.parametrize("value", ["8 k", "lots", 0, -3, "8kb", True, 1.5])
def test_bad_token_counts_are_refused(value: object) -> None:
    with pytest.raises(PydanticCustomError):
        TokenCount.parse(value)


@pytest.mark.parametrize(("value", "dollars"), [("$2.30/h", 2.3), ("2.30", 2.3), (2, 2.0), ("$1.74", 1.74)])
def test_prices(value: object, dollars: float) -> None:
    assert math.isclose(Price.parse(value), dollars)


@pytest.mark.parametrize(("value", "share"), [("80%", 0.8), ("0.5%", 0.005), ("100%", 1.0), ("0%", 0.0)])
def test_percentages(value: str, share: float) -> None:
    assert math.isclose(Fraction.parse(value), share)


@pytest.mark.parametrize(
    ("value", "message"),
    [(0.8, "0.8 has no unit"), ("120%", '"120%" is above 100%'), ("NaN%", '"NaN%" is not a percentage')],
)
def test_bad_percentages(value: object, message: str) -> None:
    with pytest.raises(PydanticCustomError) as caught:
        Fraction.parse(value)
    assert caught.value.context is not None
    assert caught.value.context["message"] == message


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "inf", "nan", "1e309", True])
def test_non_finite_numbers_are_refused_everywhere(value: object) -> None:
    for quantity in (Rate, Price):
        with pytest.raises(PydanticCustomError):
            quantity.parse(value)


def test_format_duration() -> None:
    assert format_duration(0.0183) == "18.3ms"
    assert format_duration(2.5) == "2.5s"
    assert format_duration(600) == "10m"
    assert format_duration(9000) == "2.5h"
