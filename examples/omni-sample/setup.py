"""Kept because vLLM-Omni has one: setup.py is a ROCm cache-key input (spec §1.4)."""

from setuptools import setup

setup()
