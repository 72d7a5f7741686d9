"""PAZZ pazzd package."""
