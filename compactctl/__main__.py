"""``python -m compactctl``."""

from compactctl.cli import main

main()
