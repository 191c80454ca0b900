import sys

from codewhere.cli import main

sys.exit(main())
