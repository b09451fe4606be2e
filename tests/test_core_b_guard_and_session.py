"""Placeholder: filled below."""
