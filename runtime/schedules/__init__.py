"""Scheduled runs (CONTRACT §15): a cron and a time zone start a workflow's run at each tick, exactly once."""

from runtime.schedules.service import CATCH_UP, ScheduleService
from runtime.schedules.ticker import Ticker

__all__ = ["CATCH_UP", "ScheduleService", "Ticker"]
