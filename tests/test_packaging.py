"""The distribution ships every module (a missing __init__.py would silently drop a package)."""

from __future__ import annotations

from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]


def test_every_source_directory_is_a_package():
    found = set(find_packages(where=str(ROOT), include=["hooks*", "glue*"]))
    source_dirs = {
        ".".join(p.relative_to(ROOT).parts)
        for top in ("hooks", "glue")
        for p in [ROOT / top, *(ROOT / top).rglob("*")]
        if p.is_dir() and p.name != "__pycache__" and any(p.glob("*.py"))
    }
    assert source_dirs <= found, source_dirs - found
