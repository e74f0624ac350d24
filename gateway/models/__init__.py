"""Model backends, one module per engine, behind the small interfaces in ``base``."""
