"""How every figure is built: `spec.Spec`, plain dicts turned into a `go.Figure` once."""
