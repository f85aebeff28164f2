"""Research behind Strategist: not installed, never imported by `components` or `pipelines`."""
