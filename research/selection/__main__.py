"""`python -m research.selection --evidence-table > research/selection/evidence.md`."""

import sys

from research.selection.evidence_doc import main

sys.exit(main())
