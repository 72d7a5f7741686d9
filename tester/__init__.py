"""PAZZ tester package."""
