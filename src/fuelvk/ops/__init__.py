"""numpy-style public functions, one module per family."""
