"""``python -m aerial_sim``: the same as the ``aerial_sim`` command."""

from aerial_sim.cli.main import main

raise SystemExit(main())
