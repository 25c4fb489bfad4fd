"""Real tensors from pretrained models shipped as packages (no network at run time)."""
