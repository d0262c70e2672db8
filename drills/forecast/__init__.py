"""The RTO forecast: how long a takeover started now would take, from this plan's past
drills and the current state of the sites. Pure: callers gather the state and the runs."""

from drills.forecast.model import Forecast, Interval, forecast
from drills.forecast.samples import RunSample, recent_samples, sample_of
from drills.forecast.state import CurrentState

__all__ = [
    "CurrentState",
    "Forecast",
    "Interval",
    "RunSample",
    "forecast",
    "recent_samples",
    "sample_of",
]
