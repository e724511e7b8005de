import sys

from sattui.cli import main

sys.exit(main())
