import sys

from codewhere.cli import main

if __name__ == "__main__":  # a spawned worker process imports this module without running it
    sys.exit(main())
