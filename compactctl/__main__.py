"""``python -m compactctl``."""

from .cli import main

main()
