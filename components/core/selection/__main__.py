"""`python -m components.core.selection --evidence-table > docs/selection.md`."""

import sys

from components.core.selection.evidence_doc import main

sys.exit(main())
