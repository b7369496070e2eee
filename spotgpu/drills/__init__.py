"""Interruption drills: provoke a real spot interruption on one VM of a pool and follow it."""
