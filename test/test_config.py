"""The params loader turns YAML into frozen dataclasses and names every bad key."""

from dataclasses import dataclass, field

import pytest

from aerial_sim.config import ParamsError, load_yaml_params, params_from_mapping, require_positive


@dataclass(frozen=True)
class Home:
    latitude: float = 47.641468
    longitude: float = -122.140165
    altitude: float = 122.0


@dataclass(frozen=True)
class Example:
    rate_hz: float = 1000.0
    names: tuple[str, ...] = ("drone1",)
    wind: tuple[float, float, float] = (0.0, 0.0, 0.0)
    home: Home = field(default_factory=Home)

    def __post_init__(self):
        require_positive(self, "rate_hz")


def test_defaults_come_from_the_dataclass_and_yaml_overrides_them(tmp_path):
    path = tmp_path / "example.yaml"
    path.write_text("physics:\n  ros__parameters:\n    rate_hz: 500\n    home: {altitude: 10}\n    wind: [1, 2, 3]\n")
    params = load_yaml_params(Example, path)
    assert params.rate_hz == 500.0 and isinstance(params.rate_hz, float)
    assert params.home.altitude == 10.0 and params.home.latitude == pytest.approx(47.641468)
    assert params.wind == (1.0, 2.0, 3.0)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"rate_hz": "fast"}, "rate_hz: expected a number"),
        ({"rate": 10}, "rate: unknown parameter"),
        ({"home": {"lat": 1}}, "home.lat: unknown parameter"),
        ({"wind": [1, 2]}, "wind: expected 3 values"),
        ({"rate_hz": -1}, "rate_hz must be a positive number"),
    ],
)
def test_bad_values_are_errors_that_name_the_key(values, message):
    with pytest.raises(ParamsError, match=message):
        params_from_mapping(Example, values)
