"""The errors a student can act on. Every message names the numbers to change."""

from __future__ import annotations


class NormConfigError(ValueError):
    """An invalid setting; the message says what to change and names the numbers."""


class Refusal(NormConfigError):
    """A setting torch itself refuses, e.g. one value per channel in training.

    Shown as a lesson (an info box with the hint), not as a failure: the refusal is
    often the point the page is making.
    """
