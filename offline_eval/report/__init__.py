"""Reports from an output folder's summary.json: report.md and report.html."""

from .write import write_report

__all__ = ["write_report"]
