import sys

from spotgpu.cli import main

sys.exit(main())
