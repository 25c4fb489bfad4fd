"""Safe loading of user tensors (placeholder; see issue 4)."""


class TensorLoadError(ValueError):
    """A file that cannot be read as a tensor; the message says why."""
