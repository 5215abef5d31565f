#!/usr/bin/env python3
"""The snapshot stream held to 32 MiB/s against unpaced: medians (min..max) of the 3 rounds.
Usage: streamsum.py DIR [PREFIX]; PREFIX "" for paced.sh's runs, "nice-" for nice.sh's.
The table is made by the general summary of the idle-priority runs, ../2026-11-28-raft-snapshot-idle/streamsum.py."""
import os, subprocess, sys
d0 = sys.argv[1] if len(sys.argv) > 1 else '/work/bench/s12/raft'
pre = sys.argv[2] if len(sys.argv) > 2 else ''
general = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '2026-11-28-raft-snapshot-idle', 'streamsum.py')
sys.exit(subprocess.call([sys.executable, general, d0,
                          f'{pre}paced32:buffered:buffered, 32 MiB/s',
                          f'{pre}paced32:backup:backup, 32 MiB/s',
                          f'{pre}unpaced:backup:backup, unpaced']))
